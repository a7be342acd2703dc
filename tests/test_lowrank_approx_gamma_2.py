"""The scalable approximate-γ₂ solver (Burer–Monteiro + augmented Lagrangian).

Independent truths: the generic cvxpy SDP of the planner on small workloads, and closed
forms verified by hand below; every certificate is re-checked by ``certificate.verify``
(the planner's own check).

Closed forms. For W = x yᵀ with x, y ∈ {±1} (the identity is the analogous diagonal case)
and 0 ≤ η < 1:  γ₂(W; η) = 1 − η.
  upper: W̃ = (1 − η) W is within η of W and factors as R = √(1−η)·x, A = √(1−η)·yᵀ
         (identity: R = A = √(1−η)·I), so γ₂(W̃) ≤ 1 − η;
  lower: U = W gives ⟨W, U⟩ − η||U||₁ = (1 − η)·kN, and γ₂*(W) = kN (Σ u_ij⟨a_i, b_j⟩ ≤
         Σ|u_ij|, attained by a_i = x_i e, b_j = y_j e); for U = I, ⟨I, I⟩ − η·n = (1 − η)n
         and γ₂*(I) = max Σ⟨a_i, b_i⟩ = n; Lemma 12 gives γ₂(W; η) ≥ 1 − η.
"""

from __future__ import annotations

import numpy as np
import pytest

from factorize.planner.certificate import Certificate, grothendieck_psd_margin, verify
from factorize.planner.lowrank import solve_approx_gamma_2_scalable
from factorize.planner.routes import solve
from solvers.errors import CertificateGapError, SolverTimeLimitError
from workloads import DenseWorkload, parse_workload


def _check(W, eta, fact, wit, info):
    """verify() passes and reproduces info's numbers; the primal is within η."""
    v = verify(Certificate("approx_gamma_2", fact, wit, eta=eta), W)
    assert v.passed, v.summary()
    assert v.lower <= v.upper
    assert info["upper"] == v.upper and info["lower"] == v.lower
    assert v.residual <= eta + 1e-12 * max(1.0, float(np.max(np.abs(W))))
    assert grothendieck_psd_margin(wit.U, wit.d) >= 0
    return v


@pytest.mark.parametrize("case", ["prefix:16", "random12x10"])
def test_agrees_with_generic_sdp(case):
    if case == "prefix:16":
        wl = parse_workload("prefix:16")
        W = wl.dense()
    else:
        W = np.random.default_rng(12).choice([-1.0, 1.0], size=(12, 10))
        wl = DenseWorkload(W)
    eta = 0.1 * float(np.max(np.abs(W)))
    fact, wit, info = solve_approx_gamma_2_scalable(W, eta, gap_tol=1e-6, rng=np.random.default_rng(0))
    v = _check(W, eta, fact, wit, info)
    assert v.gap <= 1e-6
    ref = solve(wl, "approx_gamma_2", eta=eta, method="sdp")  # the generic SDP path (SCS)
    # both are certified intervals for the same number: they must overlap
    assert max(v.lower, ref.lower) <= min(v.upper, ref.upper) * (1 + 1e-12)
    assert v.upper == pytest.approx(ref.upper, rel=2e-6)


@pytest.mark.parametrize("eta", [0.0, 0.1, 0.35])
def test_identity_closed_form(eta):
    W = np.eye(12)
    fact, wit, info = solve_approx_gamma_2_scalable(W, eta, gap_tol=1e-6, rng=np.random.default_rng(1))
    v = _check(W, eta, fact, wit, info)
    assert v.lower <= (1 - eta) * (1 + 1e-12) and (1 - eta) <= v.upper * (1 + 1e-12)
    assert v.gap <= 1e-6


def test_rank_one_sign_matrix_closed_form_and_scaling():
    rng = np.random.default_rng(2)
    W = np.outer(rng.choice([-1.0, 1.0], 5), rng.choice([-1.0, 1.0], 9))
    eta = 0.25
    fact, wit, info = solve_approx_gamma_2_scalable(W, eta, rng=rng)
    v = _check(W, eta, fact, wit, info)
    assert v.lower <= 1 - eta <= v.upper and v.gap <= 1e-6
    # γ₂(cW; cη) = c·γ₂(W; η)
    fact3, wit3, info3 = solve_approx_gamma_2_scalable(3.0 * W, 3.0 * eta, rng=rng)
    v3 = _check(3.0 * W, 3.0 * eta, fact3, wit3, info3)
    assert v3.lower <= 3 * (1 - eta) <= v3.upper


def test_rectangular_real_workload():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((6, 20))
    eta = 0.2
    fact, wit, info = solve_approx_gamma_2_scalable(W, eta, gap_tol=1e-6, rng=rng)
    v = _check(W, eta, fact, wit, info)
    assert v.gap <= 1e-6
    assert info["rank"] == 6 + 3


@pytest.mark.parametrize("W, eta, match", [
    (np.eye(3), -0.1, "≥ 0"),
    (np.eye(3), float("nan"), "finite"),
    (np.eye(3), float("inf"), "finite"),
    (np.array([[1.0, np.nan], [0.0, 1.0]]), 0.1, "non-finite"),
    (np.array([[1.0, np.inf], [0.0, 1.0]]), 0.1, "non-finite"),
    (np.eye(3), 1.0, "nothing to plan"),
    (np.zeros((2, 2)), 0.0, "nothing to plan"),
    (np.ones(4), 0.1, "matrix"),
    (np.ones((0, 3)), 0.1, "matrix"),
])
def test_hostile_inputs(W, eta, match):
    with pytest.raises(ValueError, match=match):
        solve_approx_gamma_2_scalable(W, eta)


def test_time_limit_raises():
    W = np.random.default_rng(4).choice([-1.0, 1.0], size=(40, 40))
    with pytest.raises(SolverTimeLimitError):
        solve_approx_gamma_2_scalable(W, 0.1, time_limit=1e-3)


def test_rank_escalation_and_honest_failure():
    """Too small a rank: the stall is detected, the rank doubled once; if that is still too
    small, the certified gap is reported by CertificateGapError, never returned silently."""
    W = np.eye(12)  # γ₂(I; 0.1) = 0.9 needs rank ≈ 12 (near-orthogonal vectors)
    fact, wit, info = solve_approx_gamma_2_scalable(W, 0.1, rank=8, rng=np.random.default_rng(5))
    v = _check(W, 0.1, fact, wit, info)
    assert info["rank"] == 16 and v.gap <= 1e-6
    with pytest.raises(CertificateGapError, match="certified relative gap"):
        solve_approx_gamma_2_scalable(W, 0.1, rank=4, rng=np.random.default_rng(5))
