"""Base decomposition (Nikolov, Talwar & Zhang 2013, Alg. 1) and its factorization form (Alg. 2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.geometry.base_decomposition import base_decomposition, ellipsoid_factorization
from factorize.planner.routes import solve
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
    bound binds every factorization) and within the paper's O(log) factor of it."""
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


def test_ellipsoid_plan_is_verified_and_runs(tmp_path):
    """`--mechanism ellipsoid` writes a plan the executor verifies and runs; its certificate
    upper bound is the ellipsoid mechanism's value, its lower bound the optimum's."""
    from factorize.cli import main
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import load_plan

    plan = build_plan("prefix:16", "epsilon=1,delta=1e-6", norm="gamma_2", mechanism="ellipsoid")
    f = ellipsoid_factorization(parse_workload("prefix:16").dense())
    assert plan.bounds["upper"] == pytest.approx(f.gamma_2_value(), rel=1e-12)
    assert plan.bounds["lower"] == pytest.approx(solve("prefix:16", "gamma_2").lower, rel=1e-9)
    assert plan.provenance["mechanism"] == "ellipsoid"
    out = tmp_path / "e.plan"
    assert main(["plan", "--workload", "prefix:16", "--privacy", "epsilon=1,delta=1e-6",
                 "--mechanism", "ellipsoid", "--out", str(out)]) == 0
    assert load_plan(out).provenance["mechanism"] == "ellipsoid"
    data = tmp_path / "h.npy"
    np.save(data, np.arange(16, dtype=float))
    assert main(["run", str(out), "--data", str(data), "--out", str(tmp_path / "a.csv")]) == 0
    from factorize.plan.errors import PlanError
    with pytest.raises(PlanError, match="unknown mechanism"):
        build_plan("prefix:16", "epsilon=1,delta=1e-6", mechanism="jl")
