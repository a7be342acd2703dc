"""γ_F by its concave dual over the simplex, from the Gram matrix G = WᵀW alone.

Dual (docs/math.md §4.1): for q in the simplex Δ_N,

    √k · γ_F(W) = max_q f(q),   f(q) = tr(M_q^{1/2}),   M_q = D^{1/2} G D^{1/2},  D = diag(q),

a concave function whose partial derivatives are ``∂f/∂q_j = [M_q^{1/2}]_jj / (2 q_j)``
(differentiate ``||W D^{1/2}||_tr``). Its KKT conditions on the simplex are the fixed point

    q_j = [M_q^{1/2}]_jj / f(q),

iterated here in log-weights with Anderson acceleration (``solvers.anderson``), one
symmetric eigendecomposition of the N×N matrix M_q per iteration: the cost is
O(N³) per iteration whatever the number of queries k.

Primal from any q (the inner minimiser of the Lagrangian): ``X_q = D^{-1/2} M_q^{1/2}
D^{-1/2} / f`` with ``tr(G X_q⁻¹) = f²`` and ``diag X_q = r``, ``r_j = [M_q^{1/2}]_jj/(q_j f)``.
Two feasible strategies (``diag X ≤ 1``) are read off it:

* ``"scaled"``:  X = X_q / max_j r_j,   k·γ_F² ≤ f² · max_j r_j  — first order in ||q − q*||;
* ``"balanced"``: X = D_r^{-1/2} X_q D_r^{-1/2} (unit diagonal),
  k·γ_F² ≤ tr(G X⁻¹) = f · Σ_ab (λ_a/√λ_b) C_ab²,  C = Vᵀ D_{√r} V,  M_q = V Λ Vᵀ.
  At the optimum r = 1 and X is stationary on {diag X = 1}, so this bound is *second*
  order in ||q − q*||: a q accurate to 1e-3 certifies a gap near 1e-6. It reproduces W
  only when its rows span W's row space — always when G is non-singular; the planner's
  residual check decides otherwise.

The strategies are ``A = Λ^{1/4} Vᵀ D^{-1/2} (D_r^{-1/2}) / √f`` (rows for the positive
eigenvalues), so ``AᵀA = X``.
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
    square_finite,
)
from solvers.errors import SolverFailedError


def solve_gamma_f_dual(G: np.ndarray, k: int, *, target_gap: float = 1e-7, memory: int = 5,
                       max_iters: int = 2000, time_limit: float | None = None,
                       stall_iters: int = 40) -> DualSolveResult:
    """Maximise f(q) over the simplex; return weights, strategies and the solver's estimates.

    ``G`` is WᵀW (N×N, symmetric PSD), ``k`` the number of queries (it only scales the
    reported values to γ_F's normalisation). Stops when the estimated relative gap of the
    best primal against the best dual is ≤ ``target_gap``, after ``stall_iters`` iterations
    without improvement, at ``max_iters`` or at ``time_limit`` (``converged`` says which).
    """
    G = _check_gram(G)
    deadline = Deadline(time_limit)
    N = G.shape[0]
    support = np.diag(G) > 0
    if not np.any(support):
        raise SolverFailedError("the workload is zero: γ_F(0) = 0 has nothing to plan")
    Gs = G[np.ix_(support, support)]
    n = Gs.shape[0]
    full_rank = None

    x = np.full(n, -math.log(n))
    loop = SafeguardedAnderson(memory, target_gap, stall_iters, deadline)
    it = 0
    for it in range(1, max_iters + 1):
        q = simplex_from_log(x)
        lam, V, f, diag_root = _eval(Gs, q)
        if full_rank is None:
            full_rank = lam.size == n
        r = diag_root / (q * f)
        bounds = {"scaled": f * f * float(np.max(r))}  # k·γ_F² ≤ this, see the module doc
        if full_rank:
            C = V.T @ (np.sqrt(r)[:, None] * V)
            bounds["balanced"] = f * float(np.sum((lam[:, None] / np.sqrt(lam)[None, :]) * C * C))
        plain = log_weights(diag_root, f)
        primal = {route: math.sqrt(b / k) for route, b in bounds.items()}
        # the point carries its eigendecomposition, so the strategies need no second one
        if loop.record(it, f / math.sqrt(k), plain, primal, (q, (lam, V, f, diag_root))):
            break
        x = loop.next_iterate(x, plain)

    if loop.upper_at is None or loop.lower_at is None:
        raise SolverFailedError("the dual γ_F iteration reached no finite primal or dual point "
                                "(entries spanning many orders of magnitude); use the SDP")
    q_full = np.zeros(N)
    q_full[support] = loop.lower_at[0]
    strategies = _strategies(*loop.upper_at, support)
    if loop.lower_at is not loop.upper_at:
        strategies.update({f"{name}@dual": A for name, A in _strategies(*loop.lower_at, support).items()})
    return DualSolveResult(q=q_full, p=None, strategies=strategies, lower_estimate=loop.lower,
                           upper_estimate=loop.upper, iterations=it, seconds=deadline.elapsed(),
                           converged=loop.converged, history=tuple(loop.history))


def _check_gram(G: np.ndarray) -> np.ndarray:
    G = square_finite(G, "the Gram matrix")
    return 0.5 * (G + G.T)


def _eval(G: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Positive eigenpairs of M_q, f(q) = tr M_q^{1/2} and diag(M_q^{1/2})."""
    s = np.sqrt(q)
    lam, V = positive_eigenpairs(s[:, None] * G * s[None, :])
    sig = np.sqrt(lam)
    diag_root = np.einsum("ij,j,ij->i", V, sig, V)
    return lam, V, float(np.sum(sig)), diag_root


def _strategies(q: np.ndarray, evaluation: tuple, support: np.ndarray) -> dict[str, np.ndarray]:
    """The "scaled" and (when G is non-singular) "balanced" strategies of q, as m×N matrices,
    from q's evaluation ``_eval(G, q)`` made by the iteration."""
    lam, V, f, diag_root = evaluation
    base = (lam ** 0.25)[:, None] * V.T / np.sqrt(q)[None, :] / math.sqrt(f)  # AᵀA = X_q
    r = diag_root / (q * f)
    out = {"scaled": base / math.sqrt(float(np.max(r)))}
    if lam.size == q.size:
        out["balanced"] = base / np.sqrt(r)[None, :]
    N = support.size
    full = {}
    for name, A in out.items():
        wide = np.zeros((A.shape[0], N))
        wide[:, support] = A
        full[name] = wide
    return full
