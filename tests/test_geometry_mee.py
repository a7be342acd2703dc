"""Minimum-volume enclosing ellipsoid (D-optimal design), against independent truth:
cvxpy's log_det program (a different algorithm), closed forms, and the enclosure itself."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pytest

from factorize.geometry import EnclosingEllipsoid, minimum_enclosing_ellipsoid


def _log_det_moment(e: EnclosingEllipsoid) -> float:
    """log det M of the design (the D-optimal objective, in the points' span)."""
    return float(np.linalg.slogdet(e.moment)[1])


def _log_det_at_cvxpy_design(A: np.ndarray) -> float:
    """log det M(p̂) at Clarabel's design, made exactly feasible (clipped, renormalised),
    so it is a true lower bound on the optimum (the solver's objective value can overshoot
    by its feasibility tolerance)."""
    p = cp.Variable(A.shape[1], nonneg=True)
    M = A @ cp.diag(p) @ A.T
    cp.Problem(cp.Maximize(cp.log_det(0.5 * (M + M.T))), [cp.sum(p) == 1]).solve(solver=cp.CLARABEL)
    q = np.maximum(p.value, 0.0)
    q /= q.sum()
    return float(np.linalg.slogdet((A * q[None, :]) @ A.T)[1])


@pytest.mark.parametrize("seed,d,N", [(0, 3, 12), (1, 5, 40), (2, 2, 7)])
def test_log_det_matches_cvxpy(seed, d, N):
    """No design beats ours by more than the certified d·log C (Kiefer–Wolfowitz duality),
    and ours matches cvxpy's log_det program (a different algorithm) to 1e-6."""
    A = np.random.default_rng(seed).standard_normal((d, N))
    e = minimum_enclosing_ellipsoid(A, tol=1e-9)
    other = _log_det_at_cvxpy_design(A)
    assert other <= _log_det_moment(e) + d * math.log(e.optimality) + 1e-12
    assert _log_det_moment(e) == pytest.approx(other, abs=1e-6)


def test_every_point_is_enclosed_and_the_measure_is_recomputed():
    A = np.random.default_rng(3).standard_normal((6, 200))
    e = minimum_enclosing_ellipsoid(A, tol=1e-4)
    Minv = np.linalg.inv(e.moment)
    g = np.einsum("ij,ij->j", e.basis.T @ A, Minv @ (e.basis.T @ A))
    assert np.max(g) / e.rank == pytest.approx(e.optimality, rel=1e-9)
    assert e.optimality <= 1 + 1e-4
    # E(p) = {x : xᵀ M⁻¹ x ≤ C r} contains ±a_j (symmetric: g is even in a_j)
    assert np.all(g <= e.optimality * e.rank * (1 + 1e-12))
    assert np.sum(e.weights) == pytest.approx(1.0) and np.all(e.weights >= 0)


def test_closed_forms():
    """Orthonormal points: p uniform and E = the unit ball (C = 1). Regular polygon in the
    plane: by symmetry p uniform, M = I/2, E = the disc of radius 1 (the circumcircle)."""
    e = minimum_enclosing_ellipsoid(np.eye(5))
    np.testing.assert_allclose(e.weights, 0.2, atol=1e-12)
    assert e.optimality == pytest.approx(1.0, abs=1e-12)
    t = 2 * np.pi * np.arange(7) / 7
    poly = np.vstack([np.cos(t), np.sin(t)])
    e = minimum_enclosing_ellipsoid(poly, tol=1e-10)
    np.testing.assert_allclose(e.weights, 1 / 7, atol=1e-8)
    np.testing.assert_allclose(e.basis @ e.moment @ e.basis.T, np.eye(2) / 2, atol=1e-8)


def test_points_in_a_subspace_give_a_flat_ellipsoid():
    rng = np.random.default_rng(4)
    A = np.vstack([rng.standard_normal((2, 30)), np.zeros((1, 30))])  # the plane z = 0
    e = minimum_enclosing_ellipsoid(A, tol=1e-8)
    assert e.rank == 2
    assert np.allclose(e.shape[2, :], 0) and np.allclose(e.shape[:, 2], 0)
    flat = minimum_enclosing_ellipsoid(A[:2], tol=1e-8)
    assert _log_det_moment(e) == pytest.approx(_log_det_moment(flat), abs=1e-9)


def test_hostile_inputs():
    with pytest.raises(ValueError, match="non-finite"):
        minimum_enclosing_ellipsoid(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="all points are 0"):
        minimum_enclosing_ellipsoid(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="d×N"):
        minimum_enclosing_ellipsoid(np.zeros((0, 4)))
    with pytest.raises(TimeoutError, match="limit"):
        minimum_enclosing_ellipsoid(np.random.default_rng(5).standard_normal((40, 3000)),
                                    tol=1e-12, time_limit=0.01)
