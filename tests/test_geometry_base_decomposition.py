"""Base decomposition (seed 002 Alg. 1) and its factorization form (Alg. 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.geometry.base_decomposition import base_decomposition, ellipsoid_factorization
from factorize.planner import solve
from workloads import parse_workload


@pytest.mark.parametrize("spec", ["prefix:32", "allrange:12", "random:40x24:seed=3", "marginals:3x3x4:2"])
def test_pieces_are_an_orthonormal_split_of_the_range(spec):
    W = parse_workload(spec).dense()
    pieces = base_decomposition(W)
    Ucat = np.hstack(pieces)
    r = np.linalg.matrix_rank(W)
    assert Ucat.shape[1] == r
    np.testing.assert_allclose(Ucat.T @ Ucat, np.eye(r), atol=1e-10)
    np.testing.assert_allclose(Ucat @ (Ucat.T @ W), W, atol=1e-9)  # spans range(W)
    assert len(pieces) <= math.floor(1 + math.log2(r))
    sizes = [U.shape[1] for U in pieces]
    assert sizes[0] == math.ceil(r / 2)  # the shorter half of the axes comes first


@pytest.mark.parametrize("spec", ["prefix:32", "allrange:12", "random:40x24:seed=3"])
def test_factorization_is_exact_private_and_not_better_than_optimal(spec):
    """R·S = W, ||S||_{1→2} ≤ 1 (so unit-sensitivity Gaussian noise on S·h is private),
    and its γ₂ value is bounded below by the certified optimum (the certificate's lower
    bound binds every factorization) and within the seed's O(log) factor of it."""
    W = parse_workload(spec).dense()
    f = ellipsoid_factorization(W)
    np.testing.assert_allclose(f.R_dense() @ f.A_dense(), W, atol=1e-9)
    assert f.col_norm_max_A() <= 1 + 1e-12
    opt = solve(spec, "gamma_2")
    value = f.gamma_2_value()
    assert value >= opt.lower * (1 - 1e-9)
    assert value <= 3 * math.log2(W.shape[1]) * opt.upper


def test_identity_bounds():
    """For I_8 (γ₂ = 1): 4 pieces (axes 8 → 4 + 4 → 2 + 2 → 1 + 1); each row of R has norm
    √k·(its piece's r_i ≤ 1)… so the value lies in [1, √k] = [1, 2]."""
    pieces = base_decomposition(np.eye(8))
    assert [U.shape[1] for U in pieces] == [4, 2, 1, 1]
    value = ellipsoid_factorization(np.eye(8)).gamma_2_value()
    assert 1 - 1e-12 <= value <= 2 + 1e-12
