"""The γ₂ SDP in its X-only form (docs/math.md §3.3), through cvxpy.

    γ₂(W)² = min { max_i w_iᵀ X⁻¹ w_i : X ⪰ 0, diag(X) ≤ 1 }

— the ℓ∞ twin of the γ_F program, equivalent to the Linial–Shraibman SDP. Writing
``W = C·B`` with B (r×N) spanning the row space (from the SVD), ``w_iᵀ X⁻¹ w_i =
c_iᵀ (B X⁻¹ Bᵀ) c_i``, so with ``[[X, Bᵀ], [B, S]] ⪰ 0`` the k row constraints are linear
in S and the PSD cone has size N + r whatever k is (all ranges: k = n(n+1)/2 ≫ N).

Multipliers: ν of ``c_iᵀ S c_i ≤ s`` are the row weights p, μ of ``diag X ≤ 1`` the
column weights q of the Lee–Shraibman–Špalek witness (``certificate.gamma_2_lower``).
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from solvers.backends import SolveInfo, SolverOptions, solve_cvxpy
from solvers.errors import SolverInputError


@dataclass(frozen=True)
class Gamma2SDPResult:
    """Raw SDP output: X = AᵀA, row multipliers (p) and column multipliers (q)."""

    X: np.ndarray
    row_multipliers: np.ndarray
    col_multipliers: np.ndarray
    info: SolveInfo


def solve_gamma_2_sdp(W: np.ndarray, opts: SolverOptions, rel_tol: float = 1e-12) -> Gamma2SDPResult:
    """Solve the γ₂ SDP of the dense workload W (k×N)."""
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    keep = s > rel_tol * (s[0] if s.size else 0.0)
    if not np.any(keep):
        raise SolverInputError("the workload is the zero matrix: every factorization norm is 0")
    C = U[:, keep]                         # k×r, W = C B
    B = s[keep, None] * Vt[keep]           # r×N; unscaled: measured fastest for SCS on
    #                                        prefix and marginals (reports/bench_core.md)
    r, N = B.shape
    X = cp.Variable((N, N), symmetric=True)
    S = cp.Variable((r, r), symmetric=True)
    bound = cp.Variable()
    rows = cp.sum(cp.multiply(C @ S, C), axis=1) <= bound   # c_iᵀ S c_i ≤ bound
    box = cp.diag(X) <= 1
    problem = cp.Problem(cp.Minimize(bound), [cp.bmat([[X, B.T], [B, S]]) >> 0, rows, box])
    info = solve_cvxpy(problem, opts, f"γ₂ SDP of a {W.shape[0]}×{N} workload (rank {r})")
    return Gamma2SDPResult(X=np.asarray(X.value), row_multipliers=np.asarray(rows.dual_value).ravel(),
                           col_multipliers=np.asarray(box.dual_value).ravel(), info=info)
