"""The low-rank Grothendieck SDP solver: certified bounds against closed forms and cvxpy.

max ⟨C, Z⟩ s.t. diag Z = 1, Z ⪰ 0 (docs/math.md §4.3). Independent truths: closed forms
(J → n², I → n, −J → 0, rank-one sign matrices, Hadamard: γ₂*(H_n) = n^{3/2}), an
interior-point solve through cvxpy, and the eigenvalue check ``norms.certified_psd_margin``
/ ``certificate.grothendieck_psd_margin`` of every returned d.
"""

from __future__ import annotations

import math
import time

import cvxpy as cp
import numpy as np
import pytest
from scipy.linalg import hadamard

from factorize.norms import certified_psd_margin
from factorize.planner.certificate import grothendieck_psd_margin
from solvers.errors import SolverTimeLimitError
from solvers.grothendieck import (
    cholesky_psd_certificate,
    default_rank,
    gamma_2_star,
    gamma_2_star_at,
    solve_grothendieck,
)


def _half_M(U: np.ndarray) -> np.ndarray:
    k, N = U.shape
    C = np.zeros((k + N, k + N))
    C[:k, k:] = 0.5 * U
    C[k:, :k] = 0.5 * U.T
    return C


def _cvxpy_value(C: np.ndarray) -> float:
    n = C.shape[0]
    Z = cp.Variable((n, n), PSD=True)
    prob = cp.Problem(cp.Maximize(cp.trace(C @ Z)), [cp.diag(Z) == 1])
    prob.solve(solver="CLARABEL")
    assert prob.status == "optimal"
    return float(prob.value)


def _assert_certified(C: np.ndarray, res) -> None:
    """upper = Σd with diag(d) − C PSD (independent eigenvalue check); lower from unit V."""
    assert res.upper >= res.lower
    assert res.upper >= math.fsum(res.d) * (1 - 1e-15)
    # the eigenvalue check subtracts its own allowance, so allow that much below zero
    S = np.diag(res.d) - C
    allowance = 8 * C.shape[0] * np.finfo(float).eps * np.abs(S).sum(axis=1).max()
    assert certified_psd_margin(S) >= -allowance
    np.testing.assert_allclose(np.linalg.norm(res.V, axis=0), 1.0, rtol=1e-14)
    assert float(np.sum(C * (res.V.T @ res.V))) >= res.lower


@pytest.mark.parametrize("n", [5, 12, 30])
def test_against_cvxpy_on_random_symmetric(n):
    rng = np.random.default_rng(n)
    C = rng.standard_normal((n, n))
    C = 0.5 * (C + C.T)
    ref = _cvxpy_value(C)
    res = solve_grothendieck(C, rng=rng)
    _assert_certified(C, res)
    assert res.gap <= 1e-6
    # the interior-point value lies in the certified interval (up to its own tolerance)
    assert res.lower <= ref * (1 + 1e-7) + 1e-9 and ref <= res.upper * (1 + 1e-7) + 1e-9


def test_closed_forms_J_I_minus_J():
    n = 25
    rng = np.random.default_rng(1)
    J = np.ones((n, n))
    res = solve_grothendieck(J, rng=rng, gap_tol=1e-9)  # Z = J: the value is n², not n
    _assert_certified(J, res)
    assert res.lower <= n * n <= res.upper and res.gap <= 1e-9
    res = solve_grothendieck(np.eye(n), rng=rng, gap_tol=1e-9)  # every feasible Z: tr Z = n
    _assert_certified(np.eye(n), res)
    assert res.lower <= n <= res.upper and res.gap <= 1e-9
    # −J: max −||Σ v_i||² = 0 (unit vectors summing to zero); d = 0 is dual optimal
    res = solve_grothendieck(-J, rng=rng, abs_tol=1e-8)
    _assert_certified(-J, res)
    assert res.lower <= 0.0 <= res.upper and res.upper - res.lower <= 1e-8


def test_rank_one_sign_matrix():
    """U = x yᵀ with ±1 entries: γ₂*(U) = Σ|u_ij| = kN (a_i = x_i e, b_j = y_j e)."""
    rng = np.random.default_rng(2)
    x, y = rng.choice([-1.0, 1.0], 9), rng.choice([-1.0, 1.0], 14)
    U = np.outer(x, y)
    g = gamma_2_star(U, rng=rng)
    assert g.lower <= U.size <= g.upper
    assert g.gap <= 1e-6
    assert grothendieck_psd_margin(U, g.d) >= 0
    assert g.d.shape == (23,)


@pytest.mark.parametrize("n", [8, 16, 32])
def test_hadamard(n):
    """γ₂*(H_n) = n^{3/2}: a_i = e_i, b_j = h_j/√n attain it; ≤ √(kN)·||H||₂ bounds it."""
    H = hadamard(n).astype(float)
    g = gamma_2_star(H, rng=np.random.default_rng(n))
    truth = n ** 1.5
    assert g.lower <= truth * (1 + 1e-12) and truth <= g.upper
    assert g.gap <= 1e-6
    assert grothendieck_psd_margin(H, g.d) >= 0


def test_gamma_2_star_matches_cvxpy_and_warm_start():
    rng = np.random.default_rng(3)
    U = rng.standard_normal((10, 7))
    ref = _cvxpy_value(_half_M(U))
    g = gamma_2_star(U, rng=rng)
    assert g.lower <= ref * (1 + 1e-7) and ref <= g.upper * (1 + 1e-7)
    assert grothendieck_psd_margin(U, g.d) >= 0
    # a warm start from the solution certifies at once (no iteration needed)
    g2 = gamma_2_star(U, V0=g.grothendieck.V, rng=rng)
    assert g2.grothendieck.iterations <= 3 and g2.gap <= 1e-6
    # and gamma_2_star_at certifies any point: valid (≥ the value), tight at the optimum
    at_opt = gamma_2_star_at(U, g.grothendieck.V)
    assert ref <= at_opt.upper * (1 + 1e-7) and at_opt.gap <= 1e-5
    assert grothendieck_psd_margin(U, at_opt.d) >= 0
    at_random = gamma_2_star_at(U, rng.standard_normal((4, 17)))
    assert ref <= at_random.upper * (1 + 1e-7)
    assert grothendieck_psd_margin(U, at_random.d) >= 0


def test_cholesky_certificate():
    rng = np.random.default_rng(4)
    B = rng.standard_normal((40, 6))
    C = -(B @ B.T)  # diag(d) − C = d + BBᵀ: PSD for d = 0, singular (rank 6)
    dc = cholesky_psd_certificate(C, np.full(40, 1e-9))
    assert dc is not None and np.all(dc >= 1e-9)
    assert certified_psd_margin(np.diag(dc) - C) >= -1e-10
    C2 = B @ B.T  # diag(d) − BBᵀ is indefinite for small d
    assert cholesky_psd_certificate(C2, np.full(40, 1e-3)) is None


def test_hostile_inputs_and_limits():
    with pytest.raises(ValueError, match="symmetric"):
        solve_grothendieck(np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="non-finite"):
        solve_grothendieck(np.array([[np.nan, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        solve_grothendieck(np.ones((2, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        gamma_2_star(np.array([[1.0, np.inf]]))
    assert default_rank(4000) == 91 and default_rank(3) == 3
    rng = np.random.default_rng(5)
    C = rng.standard_normal((300, 300))
    C = C + C.T
    with pytest.raises(SolverTimeLimitError):
        solve_grothendieck(C, time_limit=1e-6, rng=rng)
    # without require_gap the same run returns valid (if loose) bounds
    res = solve_grothendieck(C, time_limit=1e-6, rng=rng, require_gap=False)
    _assert_certified(C, res)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2000, 4000])
def test_timing_large(n, capsys):  # pragma: no cover - timing only, run with -m slow
    rng = np.random.default_rng(n)
    C = rng.standard_normal((n, n))
    C = 0.5 * (C + C.T)
    start = time.perf_counter()
    res = solve_grothendieck(C, rng=rng)
    with capsys.disabled():
        print(f"\nGrothendieck n={n} r={res.V.shape[0]}: lower {res.lower:.10g} upper {res.upper:.10g} "
              f"gap {res.gap:.2e}, {res.iterations} iterations, {res.newton_steps} Newton, "
              f"{res.cholesky_probes} Cholesky probes, {time.perf_counter() - start:.1f} s")
    assert res.gap <= 1e-6
