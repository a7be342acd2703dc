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
  order in ||q − q*||: a q accurate to 1e-3 certifies a gap near 1e-6. Used only when G is
  non-singular: its range ``D_r^{-1/2} range(G)`` contains W's rows only then (or at r = 1).
* ``"projected"`` (G singular, rank ρ < N, range basis U_G with ``G = U_G Σ U_Gᵀ``, projector
  ``P = U_G U_Gᵀ``): X_q = U_G Y_q U_Gᵀ already has range(G) (Y_q is computed from
  S = U_Gᵀ D U_G, never dividing by √q_j: weights that vanish at the optimum are common
  here); it is corrected inside that range, ``X = (X_q − P diag(y) P) / s`` with
  ``(P∘P) y = c``, ``c_j = r_j − 1`` on the active columns (r_j ≥ 1 − INACTIVE) and 0 on
  the slack ones (least squares; P∘P is constant, its pseudo-inverse computed once) and s
  the largest diagonal entry. For singular G the "scaled" strategy is X_q / max r in the same
  coordinates, so both have exactly W's row space. The gradient
  of tr(G X⁺) at X_q is ``−f² D``, so the first-order change ``f² Σ q_j (r_j − 1)`` is 0 and
  the bound ``s · tr(Σ Y⁻¹)`` is second order, like "balanced"; A = Y^{1/2} U_Gᵀ/√s has
  exactly W's row space, so ``R = W A⁺`` reproduces W. Skipped when the corrected Y is
  not positive definite (far from the optimum).

Every primal bound above assumes ``R = W A⁺`` reproduces W. For non-singular G the
D^{-1/2}-form bounds are recorded only where ``rank M_q = N``; at a q whose tiny weights
drop a direction of M_q no bound is recorded there — the
value ``f² max r`` there would be a bound for a *different* workload and can lie below the
true γ_F (a failed certificate, not a plan).

The strategies are ``A = Λ^{1/4} Vᵀ D^{-1/2} (D_r^{-1/2}) / √f`` (rows for the positive
eigenvalues), so ``AᵀA = X``, and the "projected" one above.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.dual_common import (
    REL_EIG_TOL,
    Deadline,
    DualSolveResult,
    SafeguardedAnderson,
    log_weights,
    positive_eigenpairs,
    simplex_from_log,
    square_finite,
)
from solvers.errors import SolverFailedError

#: "projected" primal: a column whose diagonal r_j is below 1 − INACTIVE is treated as having
#: a slack constraint (weight → 0 at the optimum) and is not corrected.
INACTIVE = 0.05


def solve_gamma_f_dual(G: np.ndarray, k: int, *, target_gap: float = 1e-7, memory: int = 5,
                       max_iters: int = 2000, time_limit: float | None = None,
                       stall_iters: int = 40, start: np.ndarray | None = None) -> DualSolveResult:
    """Maximise f(q) over the simplex; return weights, strategies and the solver's estimates.

    ``G`` is WᵀW (N×N, symmetric PSD), ``k`` the number of queries (it only scales the
    reported values to γ_F's normalisation). Stops when the estimated relative gap of the
    best primal against the best dual is ≤ ``target_gap``, after ``stall_iters`` iterations
    without improvement, at ``max_iters`` or at ``time_limit`` (``converged`` says which).
    ``start``: weights (length N, non-negative) to start from instead of the uniform ones — a
    warm start for a sequence of nearby problems (the alternating Kronecker descent of
    ``factorize.structured.shared_kron_gaussian``); any start gives the same certificate rules.
    """
    G = _check_gram(G)
    deadline = Deadline(time_limit)
    N = G.shape[0]
    support = np.diag(G) > 0
    if not np.any(support):
        raise SolverFailedError("the workload is zero: γ_F(0) = 0 has nothing to plan")
    Gs = G[np.ix_(support, support)]
    n = Gs.shape[0]
    # the rank of G on its support, and for singular G its range (the "projected" primal)
    sigma, U = positive_eigenpairs(Gs)
    span = None if sigma.size == n else _Range(sigma, U)

    x = np.full(n, -math.log(n))
    if start is not None:
        s0 = np.asarray(start, dtype=np.float64)
        if s0.shape != (N,) or not np.all(np.isfinite(s0)) or np.any(s0 < 0) or not np.sum(s0[support]) > 0:
            raise SolverFailedError("a warm start must be N finite non-negative weights, some on the support")
        x = log_weights(s0[support], float(np.sum(s0[support])))
    loop = SafeguardedAnderson(memory, target_gap, stall_iters, deadline)
    it = 0
    for it in range(1, max_iters + 1):
        q = simplex_from_log(x)
        lam, V, f, diag_root = _eval(Gs, q)
        bounds: dict[str, float] = {}
        if span is not None:  # range(A) = range(G) by construction, whatever rank M_q has
            bounds.update({route: b for route, (b, _) in span.primals(q).items()})
        elif lam.size == n:  # else A's rows miss part of W's row space: no bound
            r = diag_root / (q * f)
            bounds["scaled"] = f * f * float(np.max(r))  # k·γ_F² ≤ this, see the module doc
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
    strategies = _strategies(loop.upper_at[0], loop.upper_at[1], support, span)
    if loop.lower_at is not loop.upper_at:
        strategies.update({f"{name}@dual": A
                           for name, A in _strategies(loop.lower_at[0], loop.lower_at[1], support, span).items()})
    return DualSolveResult(q=q_full, p=None, strategies=strategies, lower_estimate=loop.lower,
                           upper_estimate=loop.upper, iterations=it, seconds=deadline.elapsed(),
                           converged=loop.converged, history=tuple(loop.history))


class _Range:
    """range(G) for a singular G = U diag(σ) Uᵀ and the "projected" primal inside it
    (module doc), computed in the ρ-dimensional coordinates of U: with S = Uᵀ D U,
    ``X_q = U Y_q Uᵀ``, ``Y_q = S^{-1/2} (S^{1/2} Σ S^{1/2})^{1/2} S^{-1/2} / f`` — no division
    by √q_j, so weights that vanish at the optimum (inactive columns) cost no accuracy."""

    def __init__(self, sigma: np.ndarray, U: np.ndarray) -> None:
        self.sigma, self.U = sigma, U
        P = U @ U.T
        w, E = np.linalg.eigh(P * P)  # P∘P is PSD (Schur product theorem)
        keep = w > 1e-10 * float(w[-1])
        self.K_pinv = (E[:, keep] / w[keep][None, :]) @ E[:, keep].T

    def primals(self, q: np.ndarray) -> dict[str, tuple[float, np.ndarray]]:
        """``{route: (k·γ_F² bound, A)}`` for "scaled" (X_q / max r) and "projected" (the
        corrected X); a route is missing where its Y is not numerically positive definite.

        Columns with ``r_j < 1 − INACTIVE`` are treated as inactive (their weight tends to 0:
        the constraint holds with slack) and left uncorrected; their cost is nil at first
        order and forcing them to 1 would make the correction large."""
        U, sigma = self.U, self.sigma
        e, E = np.linalg.eigh(U.T @ (q[:, None] * U))
        if not e[0] > REL_EIG_TOL * e[-1]:
            return {}
        half = (E * np.sqrt(e)[None, :]) @ E.T  # S^{1/2}
        inv_half = (E / np.sqrt(e)[None, :]) @ E.T  # S^{-1/2}
        t, F = np.linalg.eigh(half @ (sigma[:, None] * half))
        t = np.maximum(t, 0.0)
        f = float(np.sum(np.sqrt(t)))
        Yq = inv_half @ ((F * np.sqrt(t)[None, :]) @ F.T) @ inv_half / f
        r = np.einsum("ja,ab,jb->j", U, Yq, U)  # diag X_q
        c = np.where(r >= 1.0 - INACTIVE, r - 1.0, 0.0)
        out = {}
        for route, Y in (("scaled", Yq), ("projected", Yq - (U.T * (self.K_pinv @ c)[None, :]) @ U)):
            found = self._strategy(Y)
            if found is not None:
                out[route] = found
        return out

    def _strategy(self, Y: np.ndarray) -> tuple[float, np.ndarray] | None:
        """``(s·tr(Σ Y⁻¹), Y^{1/2} Uᵀ/√s)`` with s = max diag(U Y Uᵀ), or None."""
        U, sigma = self.U, self.sigma
        w, Q = np.linalg.eigh(0.5 * (Y + Y.T))
        if not (np.all(np.isfinite(w)) and w[0] > REL_EIG_TOL * w[-1]):
            return None
        root = Q * np.sqrt(w)[None, :]  # Y = root rootᵀ
        scale = float(np.max(np.sum((U @ root) ** 2, axis=1)))  # max diag(U Y Uᵀ)
        bound = scale * float(np.sum(sigma[:, None] * (Q / np.sqrt(w)[None, :]) ** 2))
        return bound, (root.T @ U.T) / math.sqrt(scale)


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


def _strategies(q: np.ndarray, evaluation: tuple, support: np.ndarray,
                span: _Range | None) -> dict[str, np.ndarray]:
    """The "scaled" and "balanced" (G non-singular) or "scaled" and "projected" (G singular)
    strategies of q, as m×N matrices, from q's evaluation ``_eval(G, q)`` made by the iteration."""
    if span is not None:
        out = {route: A for route, (_, A) in span.primals(q).items()}
    else:
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
