"""Dense training strategies under multi-participation (``training.multi_epoch``), against
independent truth: a Clarabel SDP of the exact program, the γ_F dual solver (single
participation), brute-force sensitivity, and the certificate's own refusal of tampered arrays."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from factorize.privacy.participation import Participation, participation_sensitivity
from factorize.training.certificate import (
    EpochsWitness,
    PatternWitness,
    check_training_certificate,
    epochs_lower_bound,
    solution_figures,
)
from factorize.training.multi_epoch import CLAIM_SLACK, plan_multi_epoch
from factorize.training.streaming import causal_reconstruction, lower_triangular_factor


def _prefix(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n)))


def _sdp_exact(W: np.ndarray, K: int) -> float:
    """min tr(W X⁻¹ Wᵀ) s.t. X_ππ ⪯ Diag(d_π), 𝟙ᵀd_π ≤ 1 (Schur complement form), Clarabel."""
    cp = pytest.importorskip("cvxpy")
    n = W.shape[1]
    b = n // K
    X = cp.Variable((n, n), PSD=True)
    Y = cp.Variable((W.shape[0], W.shape[0]), symmetric=True)
    d = cp.Variable((b, K))
    cons = [cp.bmat([[Y, W], [W.T, X]]) >> 0, cp.sum(d, axis=1) <= 1]
    for i in range(b):
        S = np.zeros((n, K))
        S[np.arange(i, n, b), np.arange(K)] = 1.0
        cons.append(cp.diag(d[i]) - S.T @ X @ S >> 0)
    prob = cp.Problem(cp.Minimize(cp.trace(Y)), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)


def _check_sdp(n: int, K: int, W: np.ndarray) -> None:
    sol = plan_multi_epoch(W, Participation("epochs", K), target_gap=1e-9)
    ref = _sdp_exact(W, K)
    assert sol.lower <= sol.objective
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert sol.lower == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("K", [2, 4])
def test_small_optimum_equals_the_sdp(K):
    n = 16
    rng = np.random.default_rng(K)
    _check_sdp(n, K, _prefix(n))
    _check_sdp(n, K, rng.normal(size=(20, n)))  # a general workload, X with negative entries


@pytest.mark.slow
def test_optimum_at_64_equals_the_sdp():
    _check_sdp(64, 4, _prefix(64))


def test_single_participation_is_the_gamma_f_optimum():
    from solvers.dual_gamma_f import solve_gamma_f_dual

    n = 64
    W = _prefix(n)
    p = Participation("epochs", 1)
    sol = plan_multi_epoch(W, p, target_gap=1e-11)
    assert sol.gap <= 1e-10
    # an independent algorithm: the γ_F fixed point, its balanced strategy at our certified figures
    ref = solve_gamma_f_dual(W.T @ W, n, target_gap=1e-12)
    A = ref.strategies["balanced"]
    _, objective, _ = solution_figures(W, p, A, np.linalg.solve(A.T, W.T).T)
    assert sol.objective == pytest.approx(objective, rel=1e-9)
    assert sol.lower <= objective * (1 + 1e-12)


def test_four_epochs_at_256_beats_jax_privacy_with_a_certified_gap():
    n = 256
    W = _prefix(n)
    sol = plan_multi_epoch(W, Participation.parse("epochs=4"))
    assert sol.objective <= 6954.1  # jax_privacy's multi-epoch optimum (the figure)
    assert sol.gap <= 1e-6
    assert check_training_certificate(W, sol).passed


def test_sensitivity_is_recomputed_and_equal_to_the_claim():
    n, K = 32, 4
    W = _prefix(n)
    p = Participation("epochs", K)
    sol = plan_multi_epoch(W, p)
    certified = participation_sensitivity(sol.strategy, p).value
    assert certified <= sol.sensitivity <= certified * (1 + CLAIM_SLACK) * (1 + 1e-15)  # stated with the slack
    # brute force over the patterns: Y = all-ones with the best signs (K = 4: 8 sign vectors)
    X = sol.strategy.T @ sol.strategy
    b = n // K
    signs = np.array([[1, *s] for s in np.ndindex(2, 2, 2)], dtype=float)
    signs[:, 1:] = 1 - 2 * signs[:, 1:]
    best = max(float(np.max(np.einsum("si,ij,sj->s", signs, X[np.ix_(idx, idx)], signs)))
               for idx in (np.arange(i, n, b) for i in range(b)))
    assert math.sqrt(best) <= sol.sensitivity * (1 + 1e-12)
    assert math.sqrt(best) >= sol.sensitivity * (1 - 1e-6)  # the rank-one patterns nearly attain it
    R = sol.reconstruction
    assert sol.objective >= sol.sensitivity ** 2 * float(np.sum(R * R))


def test_tampered_arrays_are_refused():
    n = 32
    W = _prefix(n)
    sol = plan_multi_epoch(W, Participation("epochs", 2))
    assert check_training_certificate(W, sol).passed
    F = sol.witness.factor.copy()
    F[3] *= 1.5  # another Z: its bound drops below the stated one
    bad = dataclasses.replace(sol, witness=EpochsWitness(F))
    assert not check_training_certificate(W, bad).passed
    assert not check_training_certificate(W, dataclasses.replace(sol, lower=sol.lower * 1.001)).passed
    A = sol.strategy.copy()
    A[:, 5] *= 1.01  # a larger sensitivity than stated
    assert not check_training_certificate(W, dataclasses.replace(sol, strategy=A)).passed
    assert not check_training_certificate(W, dataclasses.replace(sol, objective=sol.objective * 0.999)).passed


def test_any_witness_bounds_any_feasible_strategy():
    n, K = 24, 3
    W = _prefix(n)
    p = Participation("epochs", K)
    rng = np.random.default_rng(7)
    strategies = [np.eye(n), W, plan_multi_epoch(W, Participation("epochs", 1)).strategy]
    for _ in range(5):
        F = rng.normal(size=(n, K))
        lower = epochs_lower_bound(W, p, F)
        for A in strategies:
            _, upper, _ = solution_figures(W, p, A, np.linalg.solve(A.T, W.T).T)
            assert lower <= upper


def test_streaming_is_lower_triangular_at_no_cost():
    n = 64
    W = _prefix(n)
    p = Participation("epochs", 4)
    dense = plan_multi_epoch(W, p)
    stream = plan_multi_epoch(W, p, streaming=True)
    C = stream.strategy
    assert stream.streaming and np.all(np.triu(C, 1) == 0)
    assert check_training_certificate(W, stream).passed
    assert stream.objective == pytest.approx(dense.objective, rel=1e-9)
    # the factor itself: CᵀC = AᵀA, the sensitivity recomputed from C equals A's
    A = dense.strategy
    L = lower_triangular_factor(A)
    X = A.T @ A
    assert np.max(np.abs(L.T @ L - X)) <= 1e-12 * np.max(np.abs(X))
    assert participation_sensitivity(L, p).value == pytest.approx(dense.sensitivity, rel=CLAIM_SLACK + 1e-12)
    R = causal_reconstruction(W, L)
    assert np.max(np.abs(R @ L - W)) <= 1e-10


def test_min_sep_plan_is_certified():
    n = 48
    W = _prefix(n)
    p = Participation.parse("k=3,min_sep=12")
    sol = plan_multi_epoch(W, p)
    assert isinstance(sol.witness, PatternWitness)
    assert 0 < sol.lower <= sol.objective
    assert check_training_certificate(W, sol).passed
    single = plan_multi_epoch(W, Participation("epochs", 1)).strategy
    _, single_value, _ = solution_figures(W, p, single, np.linalg.solve(single.T, W.T).T)
    assert sol.objective <= single_value * (1 + 1e-9)


def test_bad_requests_raise_typed_errors():
    from factorize.planner.errors import PlannerError
    from factorize.privacy.guarantees import PrivacyError

    W = _prefix(12)
    with pytest.raises(PlannerError):
        plan_multi_epoch(W, Participation("epochs", 2), objective="gamma_2")
    with pytest.raises(PlannerError):
        plan_multi_epoch(np.ones((3, 12)), Participation("epochs", 2))  # rank 1: not every step queried
    with pytest.raises(PrivacyError):
        plan_multi_epoch(W, Participation("epochs", 5))
    with pytest.raises(PlannerError):
        lower_triangular_factor(np.ones((3, 12)))


def test_coarse_to_fine_start_reaches_the_cold_start_optimum(monkeypatch):
    """The coarse-to-fine start changes only where the dual iteration starts: at 512 steps, 4
    epochs, both runs certify their objective within their own gap, so the two objectives agree
    to the sum of the gaps, and each lower bound stays below the other's objective."""
    from factorize.training import multi_epoch

    W = np.tril(np.ones((512, 512)))
    p = Participation.parse("epochs=4")
    warm = plan_multi_epoch(W, p, target_gap=1e-7)
    monkeypatch.setattr(multi_epoch, "COARSE_MIN_STEPS", 10**9)
    cold = plan_multi_epoch(W, p, target_gap=1e-7)
    assert warm.gap <= 1e-6 and cold.gap <= 1e-6
    assert abs(warm.objective - cold.objective) <= (warm.gap + cold.gap) * cold.objective
    assert warm.lower <= cold.objective and cold.lower <= warm.objective


def test_coarse_start_applies_to_lower_triangular_toeplitz_workloads_only():
    from factorize.training.multi_epoch import _interpolate, _toeplitz_column

    n = 8
    w = 0.9 ** np.arange(n)
    T = np.tril(w[np.subtract.outer(np.arange(n), np.arange(n)).clip(0)])
    assert np.array_equal(_toeplitz_column(T), w)
    U = T.copy()
    U[5, 2] += 1e-12
    assert _toeplitz_column(U) is None
    assert _toeplitz_column(T.T) is None
    assert _toeplitz_column(T[:, :6]) is None
    # a profile linear in the relative position is interpolated exactly away from the ends
    K, bc, b = 2, 4, 8
    centres = (np.arange(bc) + 0.5) / bc
    blocks = np.tile(np.eye(K), (bc, 1, 1))
    x = np.concatenate([3.0 * centres, blocks.ravel()])
    y = _interpolate(x, K, b)
    fine = (np.arange(b) + 0.5) / b
    inside = (fine >= centres[0]) & (fine <= centres[-1])
    np.testing.assert_allclose(y[:b][inside], 3.0 * fine[inside], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(y[b:].reshape(b, K, K), np.tile(np.eye(K), (b, 1, 1)))
