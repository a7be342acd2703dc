"""Approximate γ₂ at scale: Burer–Monteiro + augmented Lagrangian, with a verified certificate.

    γ₂(W; η) = min { γ₂(W̃) : |W̃ − W|_max ≤ η }                       (docs/math.md §2.3)

The generic route (``solvers.sdp_approx_gamma_2`` through cvxpy) solves a (k+N)-square SDP
with kN box constraints and is slow past ~64×64. This module solves the same program in
factored form and returns a certificate that ``factorize.planner.certificate.verify`` re-checks.

Formulation (unit-vector form of the γ₂ SDP). Write the PSD matrix of docs/math.md §3.3 as
``t·VᵀV`` with ``V = [A | B] ∈ R^{r×(k+N)}`` having unit columns (``diag = t``; padding a
column to unit norm never changes the cross block when r ≥ rank + 2, one spare direction
per side), so ``W̃ = t·AᵀB`` and

    γ₂(W; η) = min t   s.t.   |t·AᵀB − W| ≤ η  entrywise,   ||a_i|| = ||b_j|| = 1.

Any feasible (t, A, B) gives the factorization ``R = √t·Aᵀ``, ``A_strategy = √t·B`` with
``||R||_{2→∞} ||A||_{1→2} = t``. Rank: the cross block of an optimal P can be projected
on the row space of R (or the column space of A) without increasing any norm, so an
optimum has rank ≤ min(k, N) + 2; r = min(k, N) + 3 (capped at k + N). Measured optima
have rank ≈ min(k, N), so no smaller r is safe in general.

Augmented Lagrangian (Rockafellar's form for inequalities; Nocedal–Wright §17.4) with
multipliers λ⁺, λ⁻ ≥ 0 for ``g⁺ = tX − (W + η) ≤ 0`` and ``g⁻ = (W − η) − tX ≤ 0``
(``X = AᵀB``), objective scaled by c = kN:

    L_ρ(V, t) = c·t + (1/2ρ) Σ [ (λ⁺ + ρg⁺)₊² − (λ⁺)² + (λ⁻ + ρg⁻)₊² − (λ⁻)² ].

For fixed V, L_ρ is a convex piecewise quadratic in the scalar t and is minimised exactly
(safeguarded Newton), so the inner problem is over V alone: limited-memory BFGS in the
coordinates ``V = x / ||x||`` (columnwise), gradient ``∂L/∂A = t·B Dᵀ``,
``∂L/∂B = t·A D`` with ``D = (λ⁺ + ρg⁺)₊ − (λ⁻ + ρg⁻)₊``, projected through the
normalisation, with the diagonal preconditioner ``1/N`` on the a-columns and ``1/k`` on the
b-columns (their curvatures scale with the number of constraints they enter; without it
tall or wide W stall). Outer step: ``λ^± ← (λ^± + ρg^±)₊``; ρ ← 3ρ when the violation did
not drop fourfold and still matters for the primal repair (large ρ makes the inner problem
ill-conditioned, and the dual bound degrades with the inner stationarity). If the certified
gap stalls, the rank is doubled once (a spurious low-rank critical point); if it still
stalls, ``CertificateGapError`` reports the certified numbers.

Dual witness. The multipliers give ``U = λ⁻ − λ⁺``: stationarity in t says
``⟨U, X⟩ = c`` and in V that V maximises ``⟨U, AᵀB⟩`` over unit vectors, i.e. attains
γ₂*(U); the dual value is ``⟨W, U⟩ − η||U||₁`` (the box's support function) — exactly
the witness of Edmonds, Nikolov & Ullman 2020, Lemma 12 with the radius made explicit (docs/math.md §4.3):

    γ₂(W; η) ≥ (⟨W, U⟩ − η ||U||₁) / Σd   for any d with diag(d) − ½ M_U ⪰ 0.

d comes from ``solvers.grothendieck.gamma_2_star_at(U, V)``: the stationarity multipliers
``d_i = ⟨v_i, (V·½M_U)_i⟩`` at the ALM's own V (which is first-order optimal for the
Grothendieck SDP of U, to the inner tolerance) plus the least uniform shift for which a
Cholesky factorization proves ``diag(d) − ½M_U ⪰ 0`` (then inflated for verify's
eigenvalue re-check). The ratio is homogeneous in U, so U needs no rescaling. A full
Grothendieck solve from V was tried first and is not used: on these multipliers the SDP is
highly degenerate (an optimal face of rank ≈ min(k, N)) and first-order methods crawl
(measured 4000 iterations at k = N = 32), while the bound from V is within 2× of γ₂*(U)
itself — the remaining dual error is U's, and it shrinks with the inner stationarity.

Primal repair. The ALM iterate is feasible only to its violation v. Clip
``W̃ = clip(t·X, W − η', W + η')`` (η' = η(1 − 10⁻⁹), so rounding stays inside η) and
put the correction ``E = W̃ − t·X`` (non-zero only in the violated columns J) in extra
rank: ``R' = [√t·Aᵀ, E_J / s]``, ``A' = [√t·B; s·I_J]``. Then ``R'A' = W̃`` exactly and,
with ``s² = e = max_i ||E_i||``, both ``||R'||²_{2→∞}`` and ``||A'||²_{1→2}`` are ≤ t + e:
the upper bound grows by at most e ≤ √|J|·v (first order in the violation). The smaller
of this and the pure rescaling ``t' = min{t : |t'X − W| ≤ η'}`` (when that interval is
non-empty) is kept.

Everything returned is re-checked by ``certificate.verify`` (the planner's check) and the
numbers in ``info`` are verify's. The certified gap, not the ALM's residuals, decides when
to stop; failures and time-outs raise ``solvers.errors`` exceptions.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from factorize.factorization import Factorization
from factorize.planner.certificate import (
    DEFAULT_RESIDUAL_TOL,
    ApproxGamma2Witness,
    Certificate,
    approx_gamma_2_lower,
    verify,
)
from factorize.planner.errors import PlannerError
from solvers.errors import (
    CertificateGapError,
    CertificateInvalidError,
    SolverInaccurateError,
    SolverTimeLimitError,
)
from solvers.grothendieck import gamma_2_star_at

#: Initial penalty; with the objective scaled by kN and W by max|W| it is size-independent
#: (multipliers are O(1/avg|X|), violations O(1)); measured best of {10², 10³, 10⁴} on
#: prefix / random ±1 workloads of size 32–256.
RHO_INIT = 1e3
RHO_GROWTH = 3.0
INNER_MAX_ITERS = 500
#: Certifications in a row without a 30% gap improvement before giving up.
STALL_LIMIT = 8
LBFGS_MEMORY = 10
#: Relative shrink of η for the primal repair, so that rounding keeps ||W − RA|| ≤ η.
ETA_SHRINK = 1e-9


def solve_approx_gamma_2_scalable(W: np.ndarray, eta: float, *, gap_tol: float = 1e-6,  # noqa: C901 (counted allow-list)
                                  time_limit: float | None = None, rank: int | None = None,
                                  max_outer: int = 200, rng: np.random.Generator | None = None,
                                  residual_tol: float = DEFAULT_RESIDUAL_TOL,
                                  verbose: bool = False
                                  ) -> tuple[Factorization, ApproxGamma2Witness, dict]:
    """Certified approximate γ₂ of a dense W (k×N) with entrywise radius ``eta``.

    Returns ``(factorization, witness, info)``: ``||R A − W||_max ≤ η`` (up to rounding,
    within verify's ``residual_tol``), ``ApproxGamma2Witness(U, d)`` with
    ``diag(d) − ½M_U`` certified PSD, and ``info`` holding verify's ``upper``, ``lower``,
    ``gap`` and ``residual`` plus solver statistics.

    Raises ``ValueError`` for invalid input (non-finite W, η < 0 or not finite,
    η ≥ max|W|: then W̃ = 0 is within the radius and γ₂(W; η) = 0),
    ``SolverTimeLimitError`` on time-out, ``CertificateGapError`` when the certified
    relative gap stalls above ``gap_tol``, ``CertificateInvalidError`` if the final
    certificate does not verify.
    """
    start = time.perf_counter()
    W = np.asarray(W, dtype=np.float64)
    _validate(W, eta, gap_tol, time_limit)
    eta = float(eta)
    k, N = W.shape
    w_max = float(np.max(np.abs(W)))
    gen = rng if rng is not None else np.random.default_rng()

    # --- scaled problem: max|W| = 1 --------------------------------------------------
    Ws = W / w_max
    es = eta / w_max
    es_in = es * (1.0 - ETA_SHRINK)
    r = int(rank) if rank is not None else min(k + N, min(k, N) + 3)
    if not r >= 1:
        raise PlannerError(f"rank must be ≥ 1, got {rank}")
    alm = _ALM(Ws, es, c=float(k * N))
    x = _initial_point(Ws, r, gen)
    alm.t = _initial_t(x, k)
    x = _normalize(x)
    lam_p = np.zeros((k, N))
    lam_m = np.zeros((k, N))
    rho = RHO_INIT
    gtol = 1e-2 * alm.c
    viol_prev = math.inf

    best_fact: Factorization | None = None
    best_upper = math.inf
    best_wit: ApproxGamma2Witness | None = None
    best_lower = -math.inf
    viol_target = 0.05 * gap_tol / math.sqrt(N)
    # diagonal preconditioner: the curvature of L_ρ in a_i (b_j) grows with the number of
    # constraints in row i (column j), N (k) when all are active: balance the two sides
    precond = np.concatenate([np.full(k, 1.0 / N), np.full(N, 1.0 / k)])[None, :] * max(k, N)
    stats = {"outer_iterations": 0, "inner_iterations": 0, "function_evaluations": 0,
             "certifications": 0, "grothendieck_seconds": 0.0}
    stalled = 0
    escalated = False
    last_best_gap = math.inf
    log = []

    def remaining() -> float | None:
        if time_limit is None:
            return None
        left = time_limit - (time.perf_counter() - start)
        if left <= 0:
            raise SolverTimeLimitError(
                f"scalable approximate-γ₂ solver hit the time limit of {time_limit:g} s on a "
                f"{k}×{N} workload after {stats['outer_iterations']} outer iterations "
                f"(best certified bounds: lower {best_lower:.10g}, upper {best_upper:.10g})")
        return left

    for outer in range(1, max_outer + 1):
        stats["outer_iterations"] = outer
        remaining()
        x, info_in = _lbfgs(functools.partial(alm.value_grad, lam_p=lam_p, lam_m=lam_m, rho=rho), x,
                            INNER_MAX_ITERS, gtol,
                            deadline=None if time_limit is None else start + time_limit,
                            precond=precond)
        stats["inner_iterations"] += info_in["iterations"]
        stats["function_evaluations"] = alm.evaluations
        V, t, X, P_p, P_m = info_in["aux"]
        x = V  # renormalised coordinates (the scale of x is immaterial)
        viol = float(max(np.max(t * X - alm.Wp), np.max(alm.Wm - t * X), 0.0))
        lam_p, lam_m = P_p, P_m
        U = lam_m - lam_p
        phi = float(np.sum(Ws * U) - es * np.sum(np.abs(U)))
        ux = float(np.sum(U * X))
        lower_est = phi / ux if ux > 0 else -math.inf
        upper_est, _ = _repair(t, X, Ws, es_in)
        est_gap = upper_est / lower_est - 1.0 if lower_est > 0 else math.inf
        log.append({"outer": outer, "t": t * w_max, "violation": viol, "rho": rho,
                    "upper_est": upper_est * w_max, "lower_est": lower_est * w_max,
                    "est_gap": est_gap, "inner": info_in["iterations"],
                    "seconds": time.perf_counter() - start})
        if verbose:
            print(f"[approx-γ₂ {k}×{N}] outer {outer} t {t * w_max:.10g} viol {viol:.2e} ρ {rho:.3g} "
                  f"est gap {est_gap:.2e} inner {info_in['iterations']} "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)

        # --- certification: cheap (one product, Cholesky probes), so every outer step ----
        # once the optimistic estimate (which takes γ₂*(U) = ⟨U, X⟩) is within the target
        if est_gap <= 0.5 * gap_tol or outer == max_outer:
            stats["certifications"] += 1
            fact = _repair_factorization(t, V, X, Ws, es_in, w_max, k)
            up = fact.value_upper_bound("approx_gamma_2")
            if up < best_upper and _residual(W, fact) <= eta + residual_tol * w_max:
                best_upper, best_fact = up, fact
            if phi > 0:
                g_start = time.perf_counter()
                g2s = gamma_2_star_at(U, V, check_margin=False)
                stats["grothendieck_seconds"] += time.perf_counter() - g_start
                lo = approx_gamma_2_lower(W, U, g2s.d, eta)
                if lo > best_lower:
                    best_lower, best_wit = lo, ApproxGamma2Witness(U=U.copy(), d=g2s.d)
            gap_now = best_upper / best_lower - 1.0 if best_lower > 0 else math.inf
            log[-1].update({"certified_upper": best_upper, "certified_lower": best_lower,
                            "certified_gap": gap_now})
            if verbose:
                print(f"[approx-γ₂ {k}×{N}]   certified lower {best_lower:.10g} upper "
                      f"{best_upper:.10g} gap {gap_now:.2e}", flush=True)
            if gap_now <= gap_tol:
                break
            stalled = stalled + 1 if gap_now > 0.7 * last_best_gap else 0
            last_best_gap = min(last_best_gap, gap_now)
            if stalled >= STALL_LIMIT:
                if r >= k + N or escalated:
                    break
                # a stall may be a spurious low-rank point: allow the full rank once
                escalated = True
                r_new = min(k + N, 2 * r)
                x = np.vstack([V, 1e-3 * gen.standard_normal((r_new - r, k + N))])
                r = r_new
                stalled = 0
                last_best_gap = math.inf
        # ρ grows only while the violation matters for the primal repair (cost ≈ √N·viol)
        if viol > 0.25 * viol_prev and viol > viol_target * t:
            rho *= RHO_GROWTH
        viol_prev = viol
        gtol = max(0.3 * gtol, 1e-11 * alm.c)

    if best_fact is None or best_wit is None:
        raise SolverInaccurateError(
            f"scalable approximate-γ₂ solver found no certificate for the {k}×{N} workload "
            f"in {stats['outer_iterations']} outer iterations")
    cert = Certificate(norm="approx_gamma_2", factorization=best_fact, witness=best_wit, eta=eta)
    check = verify(cert, W, residual_tol=residual_tol)
    if not check.passed:
        raise CertificateInvalidError("the scalable approximate-γ₂ certificate failed verification: "
                                      + check.summary())
    info = {"upper": check.upper, "lower": check.lower, "gap": check.gap,
            "residual": check.residual, "verification": check, "rank": r, "rho": rho,
            "seconds": time.perf_counter() - start, "method": "burer-monteiro-alm", "log": log,
            **stats}
    if not check.gap <= gap_tol:
        raise CertificateGapError(
            f"scalable approximate-γ₂ solver: certified relative gap {check.gap:.3g} exceeds the "
            f"requested {gap_tol:g} on the {k}×{N} workload (lower {check.lower:.10g}, upper "
            f"{check.upper:.10g}) after {stats['outer_iterations']} outer iterations")
    return best_fact, best_wit, info


# ---------------------------------------------------------------------------------
# the augmented Lagrangian in V = x / ||x|| with t eliminated
# ---------------------------------------------------------------------------------
class _ALM:
    def __init__(self, Ws: np.ndarray, es: float, c: float) -> None:
        self.k, self.N = Ws.shape
        self.Wp = Ws + es
        self.Wm = Ws - es
        self.c = c
        self.t = 1.0
        self.evaluations = 0

    def t_opt(self, X, lam_p, lam_m, rho, t0):
        """argmin_{t ≥ 0} of the convex piecewise quadratic L_ρ(·) (safeguarded Newton).

        Returns t and the clipped multipliers ``(λ^± + ρ g^±(t))₊`` at that t.
        """
        X2 = X * X

        def parts(t):
            tX = t * X
            P_p = lam_p + rho * (tX - self.Wp)
            np.maximum(P_p, 0.0, out=P_p)
            P_m = lam_m + rho * (self.Wm - tX)
            np.maximum(P_m, 0.0, out=P_m)
            return P_p, P_m

        def deriv(t):
            P_p, P_m = parts(t)
            g = self.c + float(np.vdot(P_p - P_m, X))
            h = rho * float(np.vdot(X2, (P_p > 0) | (P_m > 0)))
            return g, h

        g0, _ = deriv(0.0)
        if g0 >= 0:
            return 0.0, *parts(0.0)
        lo, hi = 0.0, math.inf
        t = max(t0, 1e-12)
        for _ in range(100):
            g, h = deriv(t)
            if g < 0:
                lo = t
            else:
                hi = t
            # L' is piecewise linear: Newton is exact once the active set settles
            if abs(g) <= 1e-10 * self.c or (hi - lo) <= 1e-15 * max(1.0, hi if math.isfinite(hi) else lo):
                break
            t_new = t - g / h if h > 0 else math.inf
            if not (lo < t_new < hi):  # Newton left the bracket: bisect (or expand)
                t_new = 0.5 * (lo + hi) if math.isfinite(hi) else max(2.0 * t, 1.0)
            if abs(t_new - t) <= 1e-15 * max(1.0, t):
                t = t_new
                break
            t = t_new
        return t, *parts(t)

    def value_grad(self, x, lam_p, lam_m, rho):
        self.evaluations += 1
        k = self.k
        nx = np.sqrt(np.einsum("ij,ij->j", x, x))
        V = x / nx
        A, B = V[:, :k], V[:, k:]
        X = A.T @ B
        t, P_p, P_m = self.t_opt(X, lam_p, lam_m, rho, self.t)
        self.t = t
        value = self.c * t + (float(np.vdot(P_p, P_p)) - float(np.vdot(lam_p, lam_p))
                              + float(np.vdot(P_m, P_m)) - float(np.vdot(lam_m, lam_m))) / (2.0 * rho)
        D = t * (P_p - P_m)
        grad = np.empty_like(V)
        grad[:, :k] = B @ D.T
        grad[:, k:] = A @ D
        grad -= V * np.einsum("ij,ij->j", V, grad)
        grad /= nx
        return value, grad, (V, t, X, P_p, P_m)


def _lbfgs(fun: Callable[[np.ndarray], tuple[float, np.ndarray, Any]], x: np.ndarray, max_iters: int,
           gtol: float, deadline: float | None = None,
           precond: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Plain L-BFGS with Armijo backtracking (two-loop recursion, Nocedal–Wright Alg. 7.4).

    Vectors are handled flat with in-place BLAS updates (the two-loop recursion would
    otherwise cost as much as the function evaluation at these sizes).
    """
    shape = x.shape
    D = None if precond is None else np.ascontiguousarray(np.broadcast_to(precond, shape)).ravel()
    value, grad, aux = fun(x)
    x = np.ascontiguousarray(x).ravel()
    grad = np.ascontiguousarray(grad).ravel()
    mem_s: list[np.ndarray] = []
    mem_y: list[np.ndarray] = []
    rhos: list[float] = []
    it = 0
    for it in range(max_iters):  # noqa: B007 - the count is read after the loop
        g_norm = float(np.linalg.norm(grad))
        if g_norm <= gtol:
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        q = grad.copy()
        alphas = []
        for s_vec, y_vec, rho_i in zip(reversed(mem_s), reversed(mem_y), reversed(rhos), strict=True):
            a = rho_i * float(np.dot(s_vec, q))
            alphas.append(a)
            q -= a * y_vec
        if D is not None:
            q *= D
        if mem_s:
            y_last = mem_y[-1]
            yDy = float(np.dot(y_last, y_last * D)) if D is not None else float(np.dot(y_last, y_last))
            q *= float(np.dot(mem_s[-1], y_last)) / yDy
        else:
            q *= 1e-2 / max(float(np.linalg.norm(q)), 1e-300)
        for s_vec, y_vec, rho_i, a in zip(mem_s, mem_y, rhos, reversed(alphas), strict=True):
            b = rho_i * float(np.dot(y_vec, q))
            q += (a - b) * s_vec
        direction = q
        direction *= -1.0
        slope = float(np.dot(grad, direction))
        if not slope < 0:
            mem_s.clear()
            mem_y.clear()
            rhos.clear()
            direction = grad * (D if D is not None else 1.0)
            direction *= -1e-2 / max(float(np.linalg.norm(direction)), 1e-300)
            slope = float(np.dot(grad, direction))
        step = 1.0
        for _ in range(40):
            x_new = x + step * direction
            v_new, g_new, aux_new = fun(x_new.reshape(shape))
            if v_new <= value + 1e-4 * step * slope:
                break
            step *= 0.5
        else:
            break  # no descent at rounding level: the inner problem is solved
        g_new = np.ascontiguousarray(g_new).ravel()
        s_vec = x_new - x
        y_vec = g_new - grad
        sy = float(np.dot(s_vec, y_vec))
        if sy > 1e-12 * float(np.linalg.norm(s_vec)) * float(np.linalg.norm(y_vec)):
            mem_s.append(s_vec)
            mem_y.append(y_vec)
            rhos.append(1.0 / sy)
            if len(mem_s) > LBFGS_MEMORY:
                del mem_s[0], mem_y[0], rhos[0]
        x, value, grad, aux = x_new, v_new, g_new, aux_new
    return x.reshape(shape), {"iterations": it, "aux": aux, "grad_norm": float(np.linalg.norm(grad))}


def _repair(t, X, Ws, es_in):
    """Upper bound (scaled units) of the repaired primal: min over clip-and-augment and rescaling."""
    tX = t * X
    clipped = np.clip(tX, Ws - es_in, Ws + es_in)
    E = clipped - tX
    e = float(np.sqrt(np.max(np.einsum("ij,ij->i", E, E))))
    value_clip = t + e
    t_scaled = _rescaled_t(X, Ws, es_in)
    value_scale = t_scaled if t_scaled is not None else math.inf
    return min(value_clip, value_scale), (E, e, t_scaled)


def _rescaled_t(X, Ws, es_in):
    """The least t' ≥ 0 with |t'X − W| ≤ η' entrywise, or None if none exists."""
    lo, hi = 0.0, math.inf
    for bound, sign in ((Ws + es_in, 1.0), (Ws - es_in, -1.0)):
        Xs = sign * X
        Bs = sign * bound  # constraint t'·Xs ≤ Bs
        pos, neg, zero = Xs > 0, Xs < 0, Xs == 0
        if np.any(Bs[zero] < 0):
            return None
        if np.any(pos):
            hi = min(hi, float(np.min(Bs[pos] / Xs[pos])))
        if np.any(neg):
            lo = max(lo, float(np.max(Bs[neg] / Xs[neg])))
    return lo if lo <= hi and math.isfinite(lo) else None


def _repair_factorization(t, V, X, Ws, es_in, w_max, k) -> Factorization:
    """An exactly feasible factorization (original scale) from the ALM iterate (see module doc)."""
    A_vec, B_vec = V[:, :k], V[:, k:]
    _, (E, e, t_scaled) = _repair(t, X, Ws, es_in)
    if t_scaled is not None and t_scaled <= t + e:
        root = math.sqrt(t_scaled)
        return Factorization.dense(w_max * root * A_vec.T, root * B_vec).normalized()
    root = math.sqrt(t)
    cols = np.flatnonzero(np.any(E != 0, axis=0))
    if cols.size == 0:
        return Factorization.dense(w_max * root * A_vec.T, root * B_vec).normalized()
    s = math.sqrt(e)
    N = Ws.shape[1]
    R = np.hstack([root * A_vec.T, E[:, cols] / s])
    A = np.vstack([root * B_vec, np.zeros((cols.size, N))])
    A[B_vec.shape[0] + np.arange(cols.size), cols] = s
    return Factorization.dense(w_max * R, A).normalized()


def _residual(W: np.ndarray, fact: Factorization) -> float:
    return float(np.max(np.abs(W - fact.R_factors[0] @ fact.A_factors[0])))


def _initial_point(Ws: np.ndarray, r: int, gen: np.random.Generator) -> np.ndarray:
    """Balanced SVD factors of W (W = (LΣ^½)(Σ^½Rᵀ)), padded/truncated to r, slightly perturbed."""
    k, N = Ws.shape
    L, sv, Rt = np.linalg.svd(Ws, full_matrices=False)
    m = min(sv.size, r)
    x = np.zeros((r, k + N))
    x[:m, :k] = (L[:, :m] * np.sqrt(sv[:m])).T
    x[:m, k:] = np.sqrt(sv[:m])[:, None] * Rt[:m]
    x += 1e-3 * float(np.max(np.abs(x))) * gen.standard_normal(x.shape)
    return x


def _initial_t(x: np.ndarray, k: int) -> float:
    cn = np.sqrt(np.einsum("ij,ij->j", x, x))
    return float(np.max(cn[:k]) * np.max(cn[k:]))


def _normalize(x: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.einsum("ij,ij->j", x, x))


def _validate(W: np.ndarray, eta, gap_tol, time_limit) -> None:
    if W.ndim != 2 or W.size == 0:
        raise PlannerError(f"W must be a non-empty matrix, got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise PlannerError("W has a non-finite entry (NaN or inf)")
    try:
        eta_f = float(eta)
    except (TypeError, ValueError):
        raise PlannerError(f"eta must be a number, got {eta!r}") from None
    if not (math.isfinite(eta_f) and eta_f >= 0):
        raise PlannerError(f"eta must be a finite number ≥ 0, got {eta}")
    w_max = float(np.max(np.abs(W)))
    if eta_f >= w_max:
        raise PlannerError(f"eta = {eta_f:g} ≥ max|W_ij| = {w_max:g}: W̃ = 0 is within the radius, "
                         "so γ₂(W; η) = 0 and there is nothing to plan")
    if not (gap_tol > 0 and math.isfinite(gap_tol)):
        raise PlannerError(f"gap_tol must be a positive number, got {gap_tol}")
    if time_limit is not None and not (time_limit > 0 and math.isfinite(time_limit)):
        raise PlannerError(f"time_limit must be a positive number of seconds, got {time_limit}")
