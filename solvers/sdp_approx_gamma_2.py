"""The approximate-γ₂ SDP with an explicit entrywise radius η (docs/math.md §3.4; Edmonds, Nikolov & Ullman 2020, §1.1).

    γ₂(W; η) = min t  s.t.  P = [[P₁₁, W̃], [W̃ᵀ, P₂₂]] ⪰ 0,  diag(P) ≤ t,  |W̃ − W| ≤ η.

(Edmonds, Nikolov & Ullman 2020 write the radius as α/2 in §1.1 but α in Lemma 12; here η is the radius itself.)

Dual: with Y ⪰ 0 the multiplier of ``P ⪰ 0``, stationarity in the free entries gives
``U = −2·Y₁₂`` and ``d = diag(Y)`` with ``Σd = 1`` and ``diag(d) − ½ M_U = Y ⪰ 0`` up to
the off-diagonal entries of the diagonal blocks (zero at optimality), and the dual
objective is ``⟨W, U⟩ − η ||U||_1`` — the witness of ``certificate.approx_gamma_2_lower``.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from solvers.backends import SolveInfo, SolverOptions, solve_cvxpy
from solvers.errors import SolverInputError


@dataclass(frozen=True)
class ApproxGamma2SDPResult:
    """Raw SDP output: the PSD matrix P and the PSD multiplier Y (both (k+N)×(k+N))."""

    P: np.ndarray
    Y: np.ndarray
    info: SolveInfo


def solve_approx_gamma_2_sdp(W: np.ndarray, eta: float, opts: SolverOptions) -> ApproxGamma2SDPResult:
    """Solve the approximate-γ₂ SDP of the dense workload W (k×N) with radius ``eta``."""
    if not (np.isfinite(eta) and eta >= 0):
        raise SolverInputError(f"eta must be a finite number ≥ 0, got {eta}")
    k, N = W.shape
    P = cp.Variable((k + N, k + N), symmetric=True)
    t = cp.Variable()
    psd = P >> 0
    constraints = [psd, cp.diag(P) <= t, cp.abs(P[:k, k:] - W) <= eta]
    problem = cp.Problem(cp.Minimize(t), constraints)
    info = solve_cvxpy(problem, opts, f"approximate-γ₂ SDP (η = {eta:g}) of a {k}×{N} workload")
    return ApproxGamma2SDPResult(P=np.asarray(P.value), Y=np.asarray(psd.dual_value), info=info)
