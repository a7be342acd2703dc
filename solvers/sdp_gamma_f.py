"""The γ_F SDP (docs/math.md §3.1; Edmonds, Nikolov & Ullman 2020, §2.5), through cvxpy.

    k · γ_F(W)² = min { tr(W X⁻¹ Wᵀ) : X ⪰ 0, diag(X) ≤ 1 }
                = min { tr(T) : [[X, Bᵀ], [B, T]] ⪰ 0, diag(X) ≤ 1 }

where ``B`` (r×N, r = rank W) is any matrix with ``BᵀB = WᵀW`` (taken from the SVD of W),
so the PSD cone has size N + r, never k + N. The multipliers λ of ``diag(X) ≤ 1`` are the
dual witness q (after normalisation) of ``factorize.planner.certificate.gamma_f_lower``.
"""

from __future__ import annotations

from dataclasses import dataclass

import cvxpy as cp
import numpy as np

from solvers.backends import SolveInfo, SolverOptions, solve_cvxpy
from solvers.errors import SolverInputError


@dataclass(frozen=True)
class GammaFSDPResult:
    """Raw SDP output: the primal Gram matrix X = AᵀA and the multipliers of diag X ≤ 1."""

    X: np.ndarray
    diag_multipliers: np.ndarray
    info: SolveInfo


def row_space_factor(W: np.ndarray, rel_tol: float = 1e-12) -> np.ndarray:
    """``B = diag(s) Vᵀ`` (r×N) from the SVD of W, so ``BᵀB = WᵀW``, rank-revealing."""
    _, s, Vt = np.linalg.svd(W, full_matrices=False)
    keep = s > rel_tol * (s[0] if s.size else 0.0)
    if not np.any(keep):
        raise SolverInputError("the workload is the zero matrix: every factorization norm is 0")
    return s[keep, None] * Vt[keep]


def solve_gamma_f_sdp(W: np.ndarray, opts: SolverOptions) -> GammaFSDPResult:
    """Solve the γ_F SDP of the dense workload W (k×N)."""
    B = row_space_factor(W)
    r, N = B.shape
    # Scale so that ||B||_F² = N: the objective at X = I then equals the sum of the N
    # diagonal constraints. SCS converges 5-40x faster than unscaled or spectrally scaled
    # on prefix, all-range and marginal workloads (measured; see reports/bench_core.md).
    B = B * np.sqrt(N) / np.linalg.norm(B)
    X = cp.Variable((N, N), symmetric=True)
    T = cp.Variable((r, r), symmetric=True)
    box = cp.diag(X) <= 1
    problem = cp.Problem(cp.Minimize(cp.trace(T)), [cp.bmat([[X, B.T], [B, T]]) >> 0, box])
    info = solve_cvxpy(problem, opts, f"γ_F SDP of a {W.shape[0]}×{N} workload (rank {r})")
    return GammaFSDPResult(X=np.asarray(X.value), diag_multipliers=np.asarray(box.dual_value).ravel(),
                           info=info)
