"""The Grothendieck-type SDP  max ⟨C, Z⟩ s.t. diag Z = 1, Z ⪰ 0  at scale, with a certified bound.

Used for ``γ₂*(U) = max { ⟨½ M_U, Z⟩ : Z ⪰ 0, diag Z = 1 }``, ``M_U = [[0, U], [Uᵀ, 0]]``
(docs/math.md §4.3): the denominator of the approximate-γ₂ lower bound
``γ₂(W; η) ≥ (⟨W, U⟩ − η ||U||_1) / Σd`` (Edmonds, Nikolov & Ullman 2020, Lemma 12, radius η explicit).

Primal (low rank, Burer–Monteiro). ``Z = VᵀV`` with ``V ∈ R^{r×n}`` whose columns ``v_i`` are
unit vectors, ``r ≈ ⌈√(2n)⌉ + 1``: by Barvinok–Pataki some optimal Z has rank ≤ √(2n), and
for r above that bound the rank-r problem generically has no spurious second-order critical
points (Boumal–Voroninski–Bandeira 2016). The objective ``f(V) = ⟨C, VᵀV⟩`` is maximised
on the product of spheres by

1. Riemannian limited-memory BFGS (the two-loop recursion on tangent vectors, projected
   back to the tangent space, retraction by column normalisation, Armijo backtracking):
   one ``V·C`` product per trial point, BLAS-3, no per-coordinate Python loop. Measured
   against the mixing method of Wang–Chang–Kolter 2017 (block Gauss–Seidel version,
   whose coordinate updates cost interpreter overhead per column) and against Riemannian
   gradient ascent with Barzilai–Borwein steps: on random n = 500–2000 instances L-BFGS
   needs 3–5× fewer products than BB and ~10× fewer than mixing sweeps for the same
   accuracy; then
2. Riemannian Newton steps solved by truncated conjugate gradients once the relative
   stationarity residual is small: with ``G = V C`` and ``d_i = ⟨v_i, g_i⟩`` the gradient
   is ``2(G − V diag d)`` and the Hessian ``Ξ ↦ −2 Proj_V(Ξ S)``, ``S = diag(d) − C``
   (``Proj_V`` removes from each column its component along ``v_i``); Newton solves
   ``Proj_V(Ξ S) = G − V diag d`` (quadratic convergence, measured 2–4 steps to 1e-12).

Certificate (the stopping criterion; never an iteration count). Weak duality: for any d
with ``diag(d) − C ⪰ 0`` and any feasible Z, ``⟨C, Z⟩ = Σd − ⟨diag(d) − C, Z⟩ ≤ Σd``.
From V take the stationarity multipliers ``d_i = ⟨v_i, (V C)_i⟩`` (exact at a
critical point, where ``(diag(d) − C) Vᵀ = 0``), add a uniform shift τ and *prove*
``diag(d + τ) − C ⪰ 0`` with one Cholesky factorization:

    if Cholesky of the floating-point matrix A runs to completion, the computed factor
    satisfies R̂ᵀR̂ = A + ΔA with |ΔA| ≤ γ_{n+1} |R̂ᵀ| |R̂|  (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., Thm 10.3; the same form holds for blocked
    implementations built on conventional level-3 BLAS, §10.1.3),

so for a unit x: ``xᵀAx = ||R̂x||² − xᵀΔAx ≥ −γ_{n+1} ||R̂||_F²`` and
``||R̂||_F² = tr(A + ΔA) ≤ tr(A)/(1 − γ_{n+1})``. Hence
``λ_min(A) ≥ −γ tr(A)/(1 − γ)``, taken here with the project's safety factor 4
(``γ = 4(n+1)u``, as in ``factorize.norms``), plus the rounding of A's diagonal. The
returned d has those allowances added, so ``diag(d) − C ⪰ 0`` holds for the exact stored
numbers and ``upper = Σd`` (rounded up) is a valid upper bound by construction. The lower
bound is ``⟨C, VᵀV⟩`` with V's columns renormalised, minus its own rounding allowance.
A Cholesky costs n³/3 flops, ~4× less than ``eigvalsh``; it is tried at the shift that
would just meet the requested gap, so a failure simply means "not converged yet".

``gamma_2_star(U)`` applies this to ``C = ½ M_U`` (the product ``V·C`` done blockwise,
``½[B Uᵀ, A U]`` for ``V = [A | B]``) and returns ``d`` in the layout of
``certificate.ApproxGamma2Witness`` (length k + N), inflated further so that the
eigenvalue re-check ``certificate.grothendieck_psd_margin(U, d) ≥ 0`` used by ``verify``
passes (that check subtracts its own allowance ``4·n·u·||S||₂`` from the computed λ_min).

Randomness (the initial point) comes from ``np.random.default_rng()`` — OS entropy — unless
the caller passes a generator (tests do, for reproducibility).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from factorize.numerics import SPECTRAL_SAFETY as _SAFETY
from factorize.numerics import U as _U
from factorize.numerics import certified_psd_margin
from solvers.dual_common import square_finite
from solvers.errors import SolverInaccurateError, SolverInputError, SolverTimeLimitError

#: Relative stationarity residual below which Newton steps are attempted.
NEWTON_SWITCH = 1e-4

#: Conjugate-gradient iterations per (truncated) Newton step; each costs one V·C product.
NEWTON_CG_MAX = 60

#: Above this n a certification check is one Cholesky (at the target shift) instead of three.
LADDER_MAX_N = 1500

#: Pairs kept by the limited-memory BFGS iteration.
LBFGS_MEMORY = 10


@dataclass(frozen=True)
class GrothendieckResult:
    """A certified solution of ``max ⟨C, Z⟩ s.t. diag Z = 1, Z ⪰ 0``.

    ``V`` (r×n, unit columns) gives the feasible ``Z = VᵀV`` with value ≥ ``lower``;
    ``d`` satisfies ``diag(d) − C ⪰ 0`` (proved by a Cholesky factorization with rounding
    allowances), so every feasible Z has ``⟨C, Z⟩ ≤ upper = Σd``. ``gap`` is
    ``(upper − lower) / max(|upper|, |lower|)`` (0 when both are 0).
    """

    V: np.ndarray
    d: np.ndarray
    lower: float
    upper: float
    gap: float
    iterations: int
    seconds: float
    newton_steps: int = 0
    cholesky_probes: int = 0


@dataclass(frozen=True)
class Gamma2StarResult:
    """``γ₂*(U) ∈ [lower, upper]`` with ``upper = Σd`` and d in ApproxGamma2Witness layout."""

    d: np.ndarray  # length k + N; diag(d) − ½ M_U ⪰ 0 (passes grothendieck_psd_margin)
    lower: float
    upper: float
    gap: float
    grothendieck: GrothendieckResult


# ---------------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------------
def solve_grothendieck(C: np.ndarray, *, rank: int | None = None, V0: np.ndarray | None = None,
                       gap_tol: float = 1e-6, abs_tol: float = 0.0, max_iters: int = 20_000,
                       time_limit: float | None = None, rng: np.random.Generator | None = None,
                       require_gap: bool = True) -> GrothendieckResult:
    """Solve ``max ⟨C, Z⟩ s.t. diag Z = 1, Z ⪰ 0`` for a symmetric n×n C, with a certificate.

    Stops when the certified gap ``upper − lower`` is ≤ ``gap_tol · max(|upper|, |lower|)``
    or ≤ ``abs_tol``. ``rank`` defaults to ``⌈√(2n)⌉ + 1`` (at most n); ``V0`` (any r×n
    matrix with non-zero columns) warm-starts the iteration and fixes r.

    On time-out (``SolverTimeLimitError``) or when ``max_iters`` is used up
    (``SolverInaccurateError``) it raises, unless ``require_gap=False``: then it returns
    the best certified bounds reached (``upper`` is still a valid bound, only looser).
    """
    C = _check_symmetric(C)
    n = C.shape[0]
    problem = _Problem(n, matmul=lambda V: V @ C, dense=lambda: C, abs_sum=float(np.sum(np.abs(C))))
    return _solve(problem, rank=rank, V0=V0, gap_tol=gap_tol, abs_tol=abs_tol, max_iters=max_iters,
                  time_limit=time_limit, rng=rng, require_gap=require_gap)


def gamma_2_star(U: np.ndarray, *, rank: int | None = None, V0: np.ndarray | None = None,
                 gap_tol: float = 1e-6, max_iters: int = 20_000, time_limit: float | None = None,
                 rng: np.random.Generator | None = None, require_gap: bool = True,
                 check_margin: bool = True) -> Gamma2StarResult:
    """Certified bounds on ``γ₂*(U) = max Σ u_ij ⟨a_i, b_j⟩`` over unit vectors (docs/math.md §4.3).

    Solves the Grothendieck SDP for ``C = ½ M_U`` and returns ``d`` (length k + N) with
    ``diag(d) − ½ M_U ⪰ 0`` — ``ApproxGamma2Witness(U, d)`` — so ``γ₂*(U) ≤ Σd = upper``.
    ``d`` is inflated by three times the eigenvalue allowance of
    ``certificate.grothendieck_psd_margin`` so that re-check passes; with
    ``check_margin`` the re-check is run here (one ``eigvalsh`` of size k + N) and further
    inflation is applied if it still fails. ``V0`` (r×(k+N)) warm-starts the solver.
    """
    U = np.asarray(U, dtype=np.float64)
    if U.ndim != 2 or U.size == 0:
        raise SolverInputError(f"U must be a non-empty matrix, got shape {U.shape}")
    if not np.all(np.isfinite(U)):
        raise SolverInputError("U has a non-finite entry")
    k, N = U.shape
    n = k + N
    half_U = 0.5 * U
    half_Ut = np.ascontiguousarray(half_U.T)

    def matmul(V: np.ndarray) -> np.ndarray:
        return np.hstack([V[:, k:] @ half_Ut, V[:, :k] @ half_U])

    def dense() -> np.ndarray:
        C = np.zeros((n, n))
        C[:k, k:] = half_U
        C[k:, :k] = half_Ut
        return C

    problem = _Problem(n, matmul=matmul, dense=dense, abs_sum=float(np.sum(np.abs(U))))
    res = _solve(problem, rank=rank, V0=V0, gap_tol=gap_tol, abs_tol=0.0, max_iters=max_iters,
                 time_limit=time_limit, rng=rng, require_gap=require_gap)
    d = _inflate_for_eigen_check(res.d, U)
    if check_margin:
        d = _repair_eigen_check(U, d)
    upper = _sum_up(d)
    gap = _rel_gap(upper, res.lower)
    return Gamma2StarResult(d=d, lower=res.lower, upper=upper, gap=gap, grothendieck=res)


def gamma_2_star_at(U: np.ndarray, V: np.ndarray, *, check_margin: bool = True) -> Gamma2StarResult:
    """Certified ``γ₂*(U) ≤ Σd`` from a given point V (r×(k+N)), without iterating.

    ``d_i = ⟨v_i, (V·½M_U)_i⟩`` (the stationarity multipliers at V, columns renormalised),
    shifted by the least τ on a ×10 ladder — started at the computed ``−λ_min`` when
    k + N ≤ 2048 — for which the Cholesky certificate succeeds, then inflated for the
    eigenvalue re-check. Tight when V is (near-)optimal for U, e.g. the primal iterate of
    the approximate-γ₂ augmented Lagrangian, whose multiplier U it is.
    """
    U = np.asarray(U, dtype=np.float64)
    k, N = U.shape
    n = k + N
    V = _normalize(np.asarray(V, dtype=np.float64))
    if V.shape[1] != n:
        raise SolverInputError(f"V must have {n} columns, got {V.shape}")
    G = np.hstack([V[:, k:] @ (0.5 * U.T), V[:, :k] @ (0.5 * U)])
    d = np.einsum("ij,ij->j", V, G)
    lower = float(np.sum(d)) - _SAFETY * (n + V.shape[0] + 2) * _U * float(np.sum(np.abs(U)))
    C = np.zeros((n, n))
    C[:k, k:] = 0.5 * U
    C[k:, :k] = 0.5 * U.T
    dc, probes = _least_certified_shift(C, d, lower)
    d_out = _inflate_for_eigen_check(dc, U)
    if check_margin:
        d_out = _repair_eigen_check(U, d_out)
    upper = _sum_up(d_out)
    res = GrothendieckResult(V=V, d=dc, lower=lower, upper=_sum_up(dc), gap=_rel_gap(_sum_up(dc), lower),
                             iterations=0, seconds=0.0, cholesky_probes=probes)
    return Gamma2StarResult(d=d_out, lower=lower, upper=upper, gap=_rel_gap(upper, lower), grothendieck=res)


def _least_certified_shift(C: np.ndarray, d: np.ndarray, scale: float) -> tuple[np.ndarray, int]:
    """``cholesky_psd_certificate(C, d + τ)`` for the least τ of a ×10 ladder (then ×√10)."""
    n = C.shape[0]
    floor = 1e-15 * max(abs(scale), 1e-300) / n
    tau = floor
    if n <= 2048:
        lam = float(np.linalg.eigvalsh(np.diag(d) - C)[0])
        tau = max(floor, -lam * 1.001)
    probes = 0
    last_fail = None
    while True:
        probes += 1
        dc = _cholesky_certificate(C, d + tau)
        if dc is not None:
            break
        last_fail = tau
        tau *= 10.0
        if not math.isfinite(tau) or probes > 400:
            raise SolverInaccurateError("no shift makes diag(d) − C certifiably PSD")
    if last_fail is not None:  # one refinement step between the last failure and success
        mid = math.sqrt(last_fail * tau)
        probes += 1
        dm = _cholesky_certificate(C, d + mid)
        if dm is not None:
            dc = dm
    return dc, probes


def _repair_eigen_check(U: np.ndarray, d: np.ndarray) -> np.ndarray:
    # the verifier's test (factorize.planner.certificate.grothendieck_psd_margin), computed
    # here from the bottom-layer primitive so that the solvers import nothing above it
    n = d.size
    k = U.shape[0]
    for _ in range(8):
        S = np.diag(d.astype(np.float64))
        S[:k, k:] -= 0.5 * U
        S[k:, :k] -= 0.5 * U.T
        margin = certified_psd_margin(S)
        if margin >= 0:
            return d
        d = d + (-margin) * 2.0 + 64 * _U * n * max(float(np.max(np.abs(d))), 1e-300)
    raise SolverInaccurateError("could not make diag(d) − ½M_U pass the eigenvalue re-check")


def default_rank(n: int) -> int:
    """``⌈√(2n)⌉ + 1``, capped at n (the Barvinok–Pataki bound plus one)."""
    return int(min(n, math.ceil(math.sqrt(2.0 * n)) + 1))


def cholesky_psd_certificate(C: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """A vector ``d' ≥ d`` with ``diag(d') − C`` provably PSD, or None if Cholesky fails.

    Factorises the floating-point ``A = diag(d) − C`` (C exactly symmetric). On success
    ``λ_min(diag(d) − C) ≥ −ε`` with ``ε = γ tr(A)/(1 − γ) + 2u·max|A_ii|``,
    ``γ = 4(n+1)u`` (Higham Thm 10.3, see the module docstring), and the returned
    ``d' = d + ε'`` with ε' ≥ ε covering the rounding of the addition itself.
    """
    n = C.shape[0]
    if C.shape != (n, n) or not np.array_equal(C, C.T):
        raise SolverInputError("C must be an exactly symmetric square matrix")  # Cholesky reads one triangle
    return _cholesky_certificate(C, d)


def _cholesky_certificate(C: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """``cholesky_psd_certificate`` for a C already known to be exactly symmetric."""
    n = C.shape[0]
    A = -C  # a fresh array; off-diagonal entries are exact negations
    diag = np.asarray(d, dtype=np.float64) - np.diag(C)
    A[np.diag_indices(n)] = diag
    if not np.all(diag > 0):
        return None
    # numpy's LAPACK only: numpy and scipy bundle separate OpenBLAS builds whose thread
    # pools, alternated in one loop, were measured to slow each other down badly
    try:
        np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return None
    gamma = _SAFETY * (n + 1) * _U
    if gamma >= 0.5:
        return None
    trace_up = math.fsum(diag.tolist()) * (1.0 + 2 * (n + 2) * _U)
    eps = gamma * trace_up / (1.0 - gamma) + 2.0 * _U * float(np.max(np.abs(diag)))
    shift = eps * (1.0 + 1e-6) + 4.0 * _U * float(np.max(np.abs(d)))
    return np.asarray(d, dtype=np.float64) + shift


# ---------------------------------------------------------------------------------
# the solver
# ---------------------------------------------------------------------------------
@dataclass
class _Problem:
    n: int
    matmul: Callable[[np.ndarray], np.ndarray]  # V ↦ V·C
    dense: Callable[[], np.ndarray]  # the symmetric matrix C (for the Cholesky check)
    abs_sum: float  # Σ|c_ij| (for the rounding allowance of the lower bound)


def _solve(p: _Problem, *, rank, V0, gap_tol, abs_tol, max_iters, time_limit, rng,  # noqa: C901 (counted allow-list)
           require_gap) -> GrothendieckResult:
    start = time.perf_counter()
    if not (gap_tol >= 0 and abs_tol >= 0) or (gap_tol == 0 and abs_tol == 0):
        raise SolverInputError("need gap_tol > 0 or abs_tol > 0")
    if time_limit is not None and not time_limit > 0:
        raise SolverInputError(f"time_limit must be positive, got {time_limit}")
    n = p.n
    V = _initial_point(n, rank, V0, rng)
    r = V.shape[0]
    C_dense: np.ndarray | None = None
    lower_slack = _SAFETY * (n + r + 2) * _U * p.abs_sum

    G = p.matmul(V)
    d = np.einsum("ij,ij->j", V, G)
    f = float(np.sum(d))
    Rg = G - V * d
    # scale of the residual: ||V C||_F, floored so that optima with V C → 0 (C = −J) count
    res_floor = 1e-6 * p.abs_sum / math.sqrt(n)
    mem_s: list[np.ndarray] = []
    mem_y: list[np.ndarray] = []
    newton_mode = False
    newton_wait = 0
    next_check = 1e-2
    since_check = 0
    newton_steps = probes = 0
    best = None  # (gap, upper, d, V, lower) of the tightest certificate so far
    noise = 16 * n * _U
    it = 0
    for it in range(1, max_iters + 1):
        if time_limit is not None and time.perf_counter() - start > time_limit:
            return _give_up(best, p, V, lower_slack, it, start, newton_steps, probes, require_gap,
                            SolverTimeLimitError(
                                f"Grothendieck SDP (n = {n}) hit the time limit of {time_limit:g} s "
                                f"after {it} iterations"))
        g_norm = float(np.linalg.norm(Rg))
        relres = g_norm / max(float(np.linalg.norm(G)), res_floor, 1e-300)
        since_check += 1
        # ---- certification attempt --------------------------------------------------
        if relres <= next_check or since_check >= 200 or g_norm == 0.0:
            since_check = 0
            if C_dense is None:
                C_dense = np.ascontiguousarray(p.dense())
            lower = f - lower_slack
            allowed = max(gap_tol * abs(lower), abs_tol)
            tau = max(0.5 * allowed / n, 0.0)
            # smaller shifts first (a success there is a tighter certificate) while a
            # Cholesky is cheap; for large n only the shift that meets the target
            ladder = (tau * 1e-4, tau * 1e-2, tau) if n <= LADDER_MAX_N else (tau,)
            for t in ladder if tau > 0 else (0.0,):
                probes += 1
                dc = _cholesky_certificate(C_dense, d + t)
                if dc is not None:
                    upper = _sum_up(dc)
                    gap = _rel_gap(upper, lower)
                    if best is None or upper - lower < best[1] - best[4]:
                        best = (gap, upper, dc, V.copy(), lower)
                    # a gap at the level of the rounding allowances cannot be improved
                    floor = 4.0 * (lower_slack + n * float(np.max(dc - d - t)))
                    if gap <= gap_tol or upper - lower <= max(abs_tol, floor):
                        return GrothendieckResult(V=V, d=dc, lower=lower, upper=upper, gap=gap,
                                                  iterations=it, seconds=time.perf_counter() - start,
                                                  newton_steps=newton_steps, cholesky_probes=probes)
                    break
            next_check = min(next_check, relres) * 0.1
        if g_norm == 0.0:
            # exactly stationary yet not certified: a saddle point (diag(d) − C indefinite);
            # perturb to escape it.
            V = _normalize(V + 1e-3 * _rng(rng).standard_normal(V.shape))
            G = p.matmul(V)
            d = np.einsum("ij,ij->j", V, G)
            f = float(np.sum(d))
            Rg = G - V * d
            mem_s.clear()
            mem_y.clear()
            continue
        # ---- Newton step ------------------------------------------------------------
        newton_wait -= 1
        if newton_mode or (relres < NEWTON_SWITCH and newton_wait <= 0):
            out = _newton_step(p, V, G, d, Rg, relres)
            if out is not None:
                V_n, G_n, d_n, f_n, Rg_n = out
                relres_n = float(np.linalg.norm(Rg_n)) / max(float(np.linalg.norm(G_n)), res_floor, 1e-300)
                if relres_n < relres and f_n >= f - noise * max(abs(f), 1.0):
                    newton_steps += 1
                    newton_mode = True
                    mem_s.clear()
                    mem_y.clear()
                    V, G, d, f, Rg = V_n, G_n, d_n, f_n, Rg_n
                    next_check = max(next_check, relres_n * 1.0001)  # check after each good step
                    continue
            newton_mode = False
            newton_wait = 20  # a rejected Newton step: some quasi-Newton steps first
        # ---- Riemannian L-BFGS step (ascent on f; Rg is half the Riemannian gradient) ---
        direction = _lbfgs_direction(Rg, mem_s, mem_y, G)
        direction -= V * np.einsum("ij,ij->j", V, direction)  # back to the tangent space
        slope = float(np.vdot(Rg, direction))
        if not slope > 0:
            mem_s.clear()
            mem_y.clear()
            direction = Rg / max(float(np.max(np.sqrt(np.einsum("ij,ij->j", G, G)))), 1e-300)
            slope = float(np.vdot(Rg, direction))
        t = 1.0
        accepted = False
        for _ in range(30):
            V_n = _normalize(V + t * direction)
            G_n = p.matmul(V_n)
            d_n = np.einsum("ij,ij->j", V_n, G_n)
            f_n = float(np.sum(d_n))
            if f_n >= f + 1e-4 * t * slope:
                accepted = True
                break
            if abs(f_n - f) <= noise * max(abs(f), 1.0):
                # f is flat to rounding: accept when the gradient shrinks instead
                Rg_try = G_n - V_n * d_n
                if float(np.linalg.norm(Rg_try)) < g_norm:
                    accepted = True
                    break
            t *= 0.5
        if not accepted:
            mem_s.clear()
            mem_y.clear()
            next_check = max(next_check, relres * 1.0001)  # stalled: let a check decide
            continue
        Rg_n = G_n - V_n * d_n
        s_vec = V_n - V
        y_vec = Rg - Rg_n  # gradient of −f changes by −ΔRg
        sy = float(np.vdot(s_vec, y_vec))
        if sy > 1e-12 * float(np.linalg.norm(s_vec)) * float(np.linalg.norm(y_vec)):
            mem_s.append(s_vec)
            mem_y.append(y_vec)
            if len(mem_s) > LBFGS_MEMORY:
                del mem_s[0], mem_y[0]
        V, G, d, f, Rg = V_n, G_n, d_n, f_n, Rg_n
    return _give_up(best, p, V, lower_slack, it, start, newton_steps, probes, require_gap,
                    SolverInaccurateError(
                        f"Grothendieck SDP (n = {n}) did not reach the certified gap "
                        f"{gap_tol:g} in {max_iters} iterations"))


def _lbfgs_direction(Rg, mem_s, mem_y, G):
    """The L-BFGS ascent direction from the two-loop recursion (Nocedal–Wright Alg. 7.4).

    Minimises −f, whose gradient is −Rg; the pairs are (V_{k+1} − V_k, Rg_k − Rg_{k+1}).
    Flat vectors and in-place BLAS updates (temporaries would cost as much as V·C).
    """
    shape = Rg.shape
    q = np.array(Rg, dtype=np.float64, order="C").ravel()
    flat_s = [s_vec.ravel() for s_vec in mem_s]
    flat_y = [y_vec.ravel() for y_vec in mem_y]
    alphas = []
    for s_vec, y_vec in zip(reversed(flat_s), reversed(flat_y), strict=True):
        rho = 1.0 / float(np.dot(y_vec, s_vec))
        a = rho * float(np.dot(s_vec, q))
        alphas.append((a, rho))
        q -= a * y_vec
    if flat_s:
        q *= float(np.dot(flat_s[-1], flat_y[-1])) / float(np.dot(flat_y[-1], flat_y[-1]))
    else:
        q /= max(float(np.max(np.sqrt(np.einsum("ij,ij->j", G, G)))), 1e-300)
    for (s_vec, y_vec), (a, rho) in zip(zip(flat_s, flat_y, strict=True), reversed(alphas), strict=True):
        b = rho * float(np.dot(y_vec, q))
        q += (a - b) * s_vec
    return q.reshape(shape)


def _newton_step(p: _Problem, V, G, d, Rg, relres):
    """One Riemannian Newton step (truncated CG on ``Proj_V(Ξ S) = Rg``) with backtracking."""
    def proj(X):
        return X - V * np.einsum("ij,ij->j", V, X)

    def hess(X):  # Proj_V(X S), S = diag(d) − C
        return proj(X * d - p.matmul(X))

    X = np.zeros_like(V)
    res = Rg.copy()
    P = res.copy()
    rr = float(np.vdot(res, res))
    rr0 = rr
    tol = min(0.1, math.sqrt(relres)) ** 2 * rr0
    for k in range(min(NEWTON_CG_MAX, V.size)):
        HP = hess(P)
        pHp = float(np.vdot(P, HP))
        if pHp <= 0:
            if k == 0:
                return None
            break
        a = rr / pHp
        X += a * P
        res -= a * HP
        rn = float(np.vdot(res, res))
        if rn <= tol:
            break
        P = res + (rn / rr) * P
        rr = rn
    f0 = float(np.sum(d))
    t = 1.0
    for _ in range(6):
        V_n = _normalize(V + t * X)
        G_n = p.matmul(V_n)
        d_n = np.einsum("ij,ij->j", V_n, G_n)
        f_n = float(np.sum(d_n))
        if f_n >= f0 - 8 * p.n * _U * max(abs(f0), 1.0):
            return V_n, G_n, d_n, f_n, G_n - V_n * d_n
        t *= 0.5
    return None


def _give_up(best, p, V, lower_slack, it, start, newton_steps, probes, require_gap, exc):
    if require_gap:
        raise exc
    if best is None:  # certify the current point with a shift large enough to succeed
        C = np.ascontiguousarray(p.dense())
        G = p.matmul(V)
        d = np.einsum("ij,ij->j", V, G)
        lower = float(np.sum(d)) - lower_slack
        # τ above this makes diag(d + τ) − C strictly diagonally dominant
        dominance = float(np.max(np.sum(np.abs(C), axis=1) - np.abs(np.diag(C)) + np.diag(C) - d))
        tau = 1e-12 * max(abs(lower), 1.0) / p.n
        while True:
            probes += 1
            dc = _cholesky_certificate(C, d + tau)
            if dc is not None:
                break
            if tau > 4.0 * max(dominance, 0.0) + 1.0:
                raise exc
            tau *= 10.0
        upper = _sum_up(dc)
        best = (_rel_gap(upper, lower), upper, dc, V, lower)
    gap, upper, dc, Vb, lower = best
    return GrothendieckResult(V=Vb, d=dc, lower=lower, upper=upper, gap=gap, iterations=it,
                              seconds=time.perf_counter() - start, newton_steps=newton_steps,
                              cholesky_probes=probes)


# ---------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------
def _check_symmetric(C: np.ndarray) -> np.ndarray:
    C = square_finite(C, "C")
    if not np.array_equal(C, C.T):
        scale = max(float(np.max(np.abs(C))), 1e-300)
        if float(np.max(np.abs(C - C.T))) > 1e-12 * scale:
            raise SolverInputError("C must be symmetric")
        C = 0.5 * (C + C.T)  # exactly symmetric in floating point (addition commutes)
    return C


def _rng(rng):
    return rng if rng is not None else np.random.default_rng()


def _initial_point(n: int, rank, V0, rng) -> np.ndarray:
    if V0 is not None:
        V = np.array(V0, dtype=np.float64)
        if V.ndim != 2 or V.shape[1] != n or not np.all(np.isfinite(V)):
            raise SolverInputError(f"V0 must be a finite r×{n} matrix, got shape {V.shape}")
        if rank is not None and rank > V.shape[0]:
            pad = 1e-3 * _rng(rng).standard_normal((rank - V.shape[0], n)) / math.sqrt(rank)
            V = np.vstack([V / np.maximum(np.linalg.norm(V, axis=0), 1e-300), pad])
        norms = np.linalg.norm(V, axis=0)
        if np.any(norms == 0):
            V[:, norms == 0] = _rng(rng).standard_normal((V.shape[0], int(np.sum(norms == 0))))
        return _normalize(V)
    r = default_rank(n) if rank is None else int(rank)
    if not r >= 1:
        raise SolverInputError(f"rank must be ≥ 1, got {rank}")
    return _normalize(_rng(rng).standard_normal((r, n)))


def _normalize(V: np.ndarray) -> np.ndarray:
    return V / np.sqrt(np.einsum("ij,ij->j", V, V))


def _sum_up(d: np.ndarray) -> float:
    """``Σd`` rounded up: fsum is correctly rounded, two steps up cover it."""
    s = math.fsum(np.asarray(d, dtype=np.float64).tolist())
    return s if s == 0.0 else float(np.nextafter(np.nextafter(s, math.inf), math.inf))


def _rel_gap(upper: float, lower: float) -> float:
    scale = max(abs(upper), abs(lower))
    return 0.0 if scale == 0 else (upper - lower) / scale


def _inflate_for_eigen_check(d: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Add 3× the allowance ``grothendieck_psd_margin`` subtracts (``4 n u ||S||₂``).

    ``||S||₂ ≤ ||S||_∞ = max_i(|d_i| + ½ Σ_j |u_ij|)`` (rows, then columns of U).
    The eigenvalue check loses at most one allowance in λ̂_min (backward stability) and
    subtracts one more; the third covers the spectral-norm estimate and this addition.
    """
    k, N = U.shape
    n = k + N
    row = np.concatenate([0.5 * np.sum(np.abs(U), axis=1), 0.5 * np.sum(np.abs(U), axis=0)])
    s_inf = float(np.max(np.abs(d) + row))
    extra = 3.0 * _SAFETY * n * _U * s_inf * (1.0 + 1e-3)
    return d + (extra + 4 * _U * float(np.max(np.abs(d))))
