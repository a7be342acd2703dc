"""Projections onto the simplex and the spectraplex {M ⪰ 0, tr M = t}, against cvxpy
(a different algorithm) and the projection's variational inequality."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from factorize.geometry.spectral_projection import project_to_simplex, project_to_spectraplex


@pytest.mark.parametrize("seed", range(4))
def test_simplex_projection_against_cvxpy(seed):
    v = np.random.default_rng(seed).standard_normal(9) * 3
    x = cp.Variable(9)
    cp.Problem(cp.Minimize(cp.sum_squares(x - v)), [x >= 0, cp.sum(x) == 2.5]).solve(solver=cp.CLARABEL)
    np.testing.assert_allclose(project_to_simplex(v, 2.5), x.value, atol=1e-7)


@pytest.mark.parametrize("seed", range(3))
def test_spectraplex_projection_against_cvxpy(seed):
    rng = np.random.default_rng(seed)
    M = rng.standard_normal((5, 5))
    X = cp.Variable((5, 5), symmetric=True)
    cp.Problem(cp.Minimize(cp.sum_squares(X - M)), [X >> 0, cp.trace(X) == 4.0]).solve(solver=cp.CLARABEL)
    P = project_to_spectraplex(M, 4.0)
    np.testing.assert_allclose(P, X.value, atol=1e-5)  # Clarabel on the PSD cone: ~1e-6 accurate


def test_variational_inequality_and_idempotence():
    """⟨M − P, Y − P⟩ ≤ 0 for every Y in the body (here: random points of it), P in the body,
    and projecting P again returns P."""
    rng = np.random.default_rng(7)
    M = rng.standard_normal((6, 6)) * 2
    P = project_to_spectraplex(M, 3.0)
    assert np.trace(P) == pytest.approx(3.0, abs=1e-12)
    assert np.linalg.eigvalsh(P)[0] >= -1e-12
    for _ in range(50):
        G = rng.standard_normal((6, 3))
        Y = G @ G.T
        Y *= 3.0 / np.trace(Y)
        assert np.sum((0.5 * (M + M.T) - P) * (Y - P)) <= 1e-9
    np.testing.assert_allclose(project_to_spectraplex(P, 3.0), P, atol=1e-12)


def test_a_point_inside_is_fixed_and_bad_input_is_refused():
    x = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_to_simplex(x), x, atol=1e-15)
    with pytest.raises(ValueError, match="positive"):
        project_to_simplex(x, 0.0)
    with pytest.raises(ValueError, match="finite"):
        project_to_simplex(np.array([np.nan]))
    with pytest.raises(ValueError, match="square"):
        project_to_spectraplex(np.ones((2, 3)), 1.0)
