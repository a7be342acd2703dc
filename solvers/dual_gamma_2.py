"""γ₂ by its concave dual over two simplices (Lee, Shraibman & Špalek 2008; docs/math.md §4.2).

    γ₂(W) = max_{p ∈ Δ_k, q ∈ Δ_N} F(p, q),   F(p, q) = ||D_p^{1/2} W D_q^{1/2}||_tr,

jointly concave (F² (p,q) = max over the inner γ_F problem — the minimax
``γ₂(W)² = max_p k·γ_F(D_p^{1/2} W)²`` of docs/math.md §4.2 is this with q eliminated). With
``K = D_p^{1/2} W D_q^{1/2} = U Σ Vᵀ``, the partial derivatives are
``∂F/∂p_i = (UΣUᵀ)_ii / (2p_i)`` and ``∂F/∂q_j = (VΣVᵀ)_jj / (2q_j)``, and the KKT
conditions on the simplices are the joint fixed point

    p_i = (UΣUᵀ)_ii / F,   q_j = (VΣVᵀ)_jj / F,

iterated in log-weights with Anderson acceleration. One iteration costs one N×N
eigendecomposition of KᵀK plus O(k·N·r) products (r = rank W): O(kN² + N³).

Primal from (p, q): ``A = Σ^{1/2} Vᵀ D_q^{-1/2}`` with its columns scaled to unit norm
(``"balanced"``) or by their maximum (``"scaled"``); ``R = W A⁺`` and
``γ₂ ≤ ||R||_{2→∞} ||A||_{1→2}`` for every factorization W = R A. Column j of
``Σ^{1/2} Vᵀ`` has norm² ``(VΣVᵀ)_jj``, so A's column norms² are ``c_j = (VΣVᵀ)_jj / q_j``.

* ``"scaled"``: ``A = Σ^{1/2} Vᵀ D_q^{-1/2} / max √c``. Where V spans
  ``D_q^{1/2}·range(Wᵀ)`` (always when rank K = N; otherwise checked by the residual of
  R·A against W), ``R = W D_q^{1/2} V Σ^{-1/2} · max √c`` gives R·A = W, and
  ``γ₂ ≤ √(max_i (UΣUᵀ)_ii / p_i · max_j c_j)``.
* ``"balanced"`` (rank K = N only): ``A_b = Σ^{1/2} Vᵀ D_q^{-1/2} D_c^{-1/2}`` has unit
  columns and is invertible (V is N×N orthogonal, Σ, q and c positive), so
  ``R_b = W A_b⁻¹ = W D_q^{1/2} D_c^{1/2} V Σ^{-1/2}`` has R_b·A_b = W exactly and
  ``γ₂ ≤ ||R_b||_{2→∞}``. Where rank K < N, V spans at most ``D_q^{1/2}·range(Wᵀ)``, so
  ``range(A_bᵀ) ⊆ D_c^{-1/2}·range(Wᵀ)``, which need not contain W's rows: no "balanced"
  value is recorded there (as for γ_F's "balanced" with singular G).

Both are first order in the weights' error: at the fixed point c_j = F and every row of R
with p_i > 0 has norm γ₂, but the row maximum of ``R_b`` still moves at first order.
Balancing removes the column term: measured on dense prefix:64 … prefix:1024, prefix:2x512
and prefix:4x256, the "balanced" gap of an iterate is 0.52–0.68 (median) of the "scaled"
one. To the planner's target (4.5e-7) that cut the iterations of prefix:1024 from 35 to 30,
prefix:512 from 30 to 28 and prefix:256 from 26 to 24; random ±1 and 0/1 matrices of
1024×1024 stay at 8. The extra k×N×N product costs 10–20 % of an iteration, so it is formed
only where the iterate's "scaled" gap is within ``BALANCE_WITHIN`` times the target (where
the balanced value can stop the loop: one or two iterates per solve on those workloads).
The iteration runs until the target gap is met or the budget ends.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.dual_common import (
    Deadline,
    DualSolveResult,
    SafeguardedAnderson,
    log_weights,
    positive_eigenpairs,
    simplex_from_log,
)
from solvers.errors import SolverFailedError, SolverInputError

#: The "balanced" estimate is formed where the iterate's "scaled" relative gap is at most this
#: many times the target: measured at 0.52–0.68 (median) of the "scaled" gap, it cannot stop
#: the loop much earlier, and its extra product (10–20 % of an iteration) is spent only there.
BALANCE_WITHIN = 4.0


def solve_gamma_2_dual(W: np.ndarray, *, target_gap: float = 1e-7, memory: int = 5,
                       max_iters: int = 1_000_000, time_limit: float | None = None,
                       stall_iters: int = 200) -> DualSolveResult:
    """Maximise F(p, q) over Δ_k × Δ_N; weights, candidate strategies and estimates.

    Stops when the estimated relative gap (best primal against best dual) is ≤
    ``target_gap``, after ``stall_iters`` iterations without improvement, at
    ``max_iters`` or at ``time_limit`` (``converged`` says whether the target was met).
    """
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or 0 in W.shape:
        raise SolverInputError(f"the workload must be a non-empty matrix, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise SolverInputError("the workload has a non-finite entry")
    deadline = Deadline(time_limit)
    rows = np.any(W != 0, axis=1)
    cols = np.any(W != 0, axis=0)
    if not np.any(rows):
        raise SolverFailedError("the workload is zero: γ₂(0) = 0 has nothing to plan")
    Ws = W[np.ix_(rows, cols)]
    k, N = Ws.shape

    x = np.concatenate([np.full(k, -math.log(k)), np.full(N, -math.log(N))])
    loop = SafeguardedAnderson(memory, target_gap, stall_iters, deadline)
    it = 0
    for it in range(1, max_iters + 1):
        p, q = simplex_from_log(x[:k]), simplex_from_log(x[k:])
        F, dp, dq, estimates, eig = _eval(Ws, p, q, loop.lower, BALANCE_WITHIN * target_gap)
        plain = np.concatenate([log_weights(dp, F), log_weights(dq, F)])
        # the point carries its eigendecomposition, so the strategy needs no second one
        if loop.record(it, F, plain, estimates, (p, q, eig)):
            break
        x = loop.next_iterate(x, plain)

    if loop.upper_at is None or loop.lower_at is None:
        raise SolverFailedError("the dual γ₂ iteration reached no finite primal or dual point "
                                "(entries spanning many orders of magnitude); use the SDP")
    p_full = np.zeros(W.shape[0])
    p_full[rows] = loop.lower_at[0]
    q_full = np.zeros(W.shape[1])
    q_full[cols] = loop.lower_at[1]
    route = loop.route
    assert route is not None  # set together with upper_at
    _, q_best, eig_best = loop.upper_at
    A = _strategy(q_best, eig_best, route)
    A_full = np.zeros((A.shape[0], W.shape[1]))
    A_full[:, cols] = A
    return DualSolveResult(q=q_full, p=p_full, strategies={route: A_full},
                           lower_estimate=loop.lower, upper_estimate=loop.upper, iterations=it,
                           seconds=deadline.elapsed(), converged=loop.converged,
                           history=tuple(loop.history))


def _eval(W: np.ndarray, p: np.ndarray, q: np.ndarray, lower: float, within: float):
    """F(p, q), diag(UΣUᵀ), diag(VΣVᵀ) and the primal values of the strategies of (p, q).

    With ``base = Σ^{1/2} Vᵀ D_q^{-1/2}`` (column norms² ``c_j = (VΣVᵀ)_jj / q_j``) and
    ``Z = W D_q^{1/2} V``: the "scaled" strategy ``base / max √c`` has
    ``R = Z Σ^{-1/2} · max √c`` (R·A = W: V spans D_q^{1/2}·range(Wᵀ)), so its value is
    ``√(max_i Σ_a Z_ia²/σ_a · max_j c_j)``; when V is square the "balanced" strategy
    ``base · D_c^{-1/2}`` (unit columns) has ``R = W D_q^{1/2} D_c^{1/2} V Σ^{-1/2}``
    (module doc), formed only where the "scaled" value is within a relative ``within`` of
    ``max(F, lower)`` (``lower``: the best dual value so far).
    One gemm each, no solve: these are the solver's estimates; the planner re-derives R.
    """
    sp, sq = np.sqrt(p), np.sqrt(q)
    Wq = W * sq[None, :]
    K = sp[:, None] * Wq
    lam, V = positive_eigenpairs(K.T @ K)
    sig = np.sqrt(lam)
    Z = Wq @ V  # KV = D_p^{1/2} Z = U Σ
    row_sq = np.einsum("ij,j,ij->i", Z, 1.0 / sig, Z)  # (UΣUᵀ)_ii / p_i
    dp = p * row_sq
    dq = np.einsum("ij,j,ij->i", V, sig, V)
    c = dq / q
    F = float(np.sum(sig))
    estimates = {"scaled": math.sqrt(float(np.max(row_sq)) * float(np.max(c)))}
    if lam.size < W.shape[1]:
        # rank-deficient: V spans D_q^{1/2}·range(Wᵀ) only if no row weight has collapsed
        # numerically; check R·A = Z Vᵀ D_q^{-1/2} against W
        residual = float(np.max(np.abs((Z @ V.T) / sq[None, :] - W)))
        if not residual <= 1e-9 * max(1.0, float(np.max(np.abs(W)))):
            estimates["scaled"] = math.inf
    elif estimates["scaled"] <= (1.0 + within) * max(F, lower):
        Rb = (Wq * np.sqrt(c)[None, :]) @ (V / np.sqrt(sig)[None, :])
        estimates["balanced"] = float(np.sqrt(np.max(np.einsum("ij,ij->i", Rb, Rb))))
    return F, dp, dq, estimates, (lam, V)


def _strategy(q: np.ndarray, eig: tuple[np.ndarray, np.ndarray], route: str) -> np.ndarray:
    """The strategy matrix of ``route`` ("scaled" or "balanced") read off q and the
    eigendecomposition of KᵀK that the iteration made at (p, q)."""
    sq = np.sqrt(q)
    lam, V = eig
    base = np.sqrt(np.sqrt(lam))[:, None] * V.T / sq[None, :]
    cn = np.sqrt(np.einsum("ij,ij->j", base, base))
    return base / cn[None, :] if route == "balanced" else base / float(np.max(cn))
