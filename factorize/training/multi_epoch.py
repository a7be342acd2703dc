"""Optimal dense strategies for model training under multi-participation, with a certified gap.

**The exact program** (``epochs=K``: n = K·b steps, record i takes part at the steps of
π_i = {i, i + b, …, i + (K−1)b}). The sensitivity of a strategy A with X = AᵀA is
``Δ² = max_π max_{Y ∈ 𝓔} ⟨X_ππ, Y⟩`` (``privacy.participation``), and by SDP duality of the
elliptope (Goemans & Williamson 1995; Nesterov 1998) ``Δ ≤ 1`` iff for every π there is
``d_π ≥ 0`` with ``Diag(d_π) ⪰ X_ππ`` and ``𝟙ᵀd_π ≤ 1``. The minimum total squared error per unit
noise is therefore the convex program

    (P)  min tr(W X⁻¹ Wᵀ)  s.t.  X ≻ 0,  X_ππ ⪯ Diag(d_π),  𝟙ᵀd_π ≤ 1  (every π),

whose Lagrange dual (``training.certificate``) is

    (D)  max (‖W Z^{1/2}‖_tr)² / Σ_π ν_π  over  Z = ⊕_π Z_π,  Z_π ⪰ 0 (K × K),  diag Z_π = ν_π 𝟙.

**jax_privacy's program** (``matrix_factorization.dense.optimize(n, epochs=K)``, the projected
gradient method of Choquette-Choo et al., "Multi-Epoch Matrix Factorization Mechanisms for
Private Machine Learning", ICML 2023, §4) imposes ``X_ij = 0`` for i ≠ j in one pattern (its
``get_orthogonal_mask``) and ``Σ_{i∈π} X_ii = 1``: a subset of (P)'s feasible set (take
``Diag(d_π) = X_ππ``), so (P) ≤ theirs. Its Lagrange dual — a multiplier ν_π on each trace and a
free one on each zeroed entry, the inner minimum finite only for a PSD total — is (D) again:
Z_π ⪰ 0 with constant diagonal ν_π and free off-diagonal entries. Both programs are strictly
feasible (X = I/K), so strong duality holds for both and **their optimal values are equal**; the
orthogonal restriction loses nothing for ``epochs=K``. What factorize adds is the certificate:
an optimality gap from (D), the sensitivity re-derived from the stored strategy.

**Solver.** (D) in Burer–Monteiro form: ``Z_π = B_π B_πᵀ``, row j of B_π (step π + j·b) equal to
``√ν_π u_j`` with ‖u_j‖ = 1; variables ``log ν`` and the unnormalised u's; L-BFGS (scipy) on
``−(2 log T − log Σν)``, T = ‖W B‖_tr = tr((Bᵀ C B)^{1/2}) (C = WᵀW), one symmetric
eigendecomposition of the n × n matrix M = BᵀCB per evaluation, the gradient
``∂T/∂B = C B M^{-1/2}`` restricted to B's blocks. The primal from the dual is the inner
minimiser ``X = B^{-T} M^{1/2} B^{-1}``, read as the strategy ``A = Λ^{1/4} Vᵀ B^{-1}``
(M = V Λ Vᵀ; B is block-diagonal, so B⁻¹ is b inverses of K × K blocks), *balanced* — pattern
π's columns scaled by ``1/√s_π``, s_π = Σ|X_ππ| ≥ its elliptope maximum, so every pattern meets
the constraint alike (the analogue of ``solvers.dual_gamma_f``'s "balanced" primal; measured
6× closer to the dual than scaling by the largest s_π, prefix n = 256, 4 epochs) — then scaled
to unit certified sensitivity. The iteration stops when an estimated gap is ≤ ``target_gap``: of the
scaled primal, ``s·Σν/T − 1`` (s the largest ``Σ|X_ππ|``, an upper bound on its Δ² at that
scale), or of the balanced one (:meth:`_EpochsDual.balanced_gap`). The
printed figures are recomputed afterwards: the objective from the stored strategy at its
certified sensitivity, the lower bound from the stored witness (``training.certificate``).
K = 1 is the γ_F dual of docs/math.md §4.1 (``k·γ_F(W)² = (P)``).

**Coarse-to-fine start** (:func:`_coarse_start`). For a lower-triangular Toeplitz workload (the
prefix sums, with or without momentum: ``W_ij = w_{i−j}``) the same workload at n/2 steps is the
leading n/2 × n/2 block, and its dual optimum, read on the relative position ``(π + ½)/b`` of a
pattern, is a close approximation of the dual optimum at n (both are samples of one smooth profile
away from the ends). The start of the iteration at n is therefore the optimum at n/2 (solved the
same way, recursively, to an estimated gap of :data:`COARSE_GAP`), with ``log ν`` and the
row-normalised blocks interpolated linearly in relative position. Only the starting point changes:
the stopping rule, the primal and every certified figure are those of a cold start. Measured at
prefix n = 1024, 4 epochs: 49 → 22 dual evaluations (each one n × n eigendecomposition), the
same lower bound to 1e-11 relative. A start that is not positive definite falls back to the cold
start ``Z_π = I/b``.

**Worst step** (``objective="max"``, the γ₂-type objective; ``epochs=K`` only). Step t's error
variance per unit noise at unit sensitivity is ``e_t(X) = (W X⁻¹ Wᵀ)_tt = Δ²‖R_t‖²``, and the
program is

    (P∞)  min max_t (W X⁻¹ Wᵀ)_tt  over the feasible set of (P).

Each e_t is convex in X and ``max_t e_t = max_{p∈Δ_k} Σ_t p_t e_t``, so by Sion's minimax
theorem (the simplex is compact) ``(P∞) = max_{p∈Δ_k}`` of (P) for the row-weighted workload
``D_p^{1/2} W``, and its dual is

    (D∞)  max (‖D_p^{1/2} W Z^{1/2}‖_tr)² / (Σ_π ν_π · Σ_t p_t)  over p ≥ 0 and Z as in (D),

(T = ‖D_p^{1/2} W Z^{1/2}‖_tr is jointly concave in (p, Z): ``2T = min_{X≻0}
tr(D_p W X⁻¹ Wᵀ) + ⟨Z, X⟩``). K = 1 is γ₂'s dual over two simplices (Lee, Shraibman & Špalek,
"A Direct Product Theorem for Discrepancy", CCC 2008; ``solvers.dual_gamma_2``, docs/math.md
§4.2): ``(P∞) = γ₂(W)²``. Solver (:class:`_EpochsMaxDual`): L-BFGS on (D∞) in the
Burer–Monteiro form above with ``log p`` as further variables; with ``G = D_p^{1/2} W B``,
``M = GᵀG = V Λ Vᵀ`` and ``H = G V``, ``∂T/∂log p_t = ½ Σ_l H_tl²/√λ_l`` and ``∂T/∂B`` the
diagonal blocks of ``Wᵀ D_p^{1/2} H Λ^{-1/2} Vᵀ``. The primal is the inner minimiser at (p, B),
``X⁻¹ = B M^{-1/2} Bᵀ`` (step errors ``e_t = Σ_l H_tl²/(p_t√λ_l)``), balanced over the patterns
as above. Its worst step is only first-order accurate in the dual's error, and the dual value
reaches machine precision (where L-BFGS stops) well before the worst step meets it (measured
prefix n = 64, 4 epochs: dual to 1e-16, primal gap 7e-6). The rows are therefore *balanced*
after the dual iteration (:func:`_balance_rows`): with B fixed, ``p_t ← p_t · e_t/ē`` (e of the
balanced primal, ē their mean) until the step errors agree to :data:`ROW_BALANCE_SPREAD` of the
target or stop improving (same case: 7e-6 → 5.8e-7 in 30 eigendecompositions). What is left
is Z's error: up to :data:`ALTERNATIONS` rounds then re-optimise Z at the balanced p (L-BFGS on
(D) for the workload ``D_p^{1/2} W``, warm) and balance the rows again — the fixed point of this
alternation is the saddle point (X optimal for the p-weighted total with equal step errors is
optimal for (P∞)); measured at the default target 1e-7 (prefix sums, one BLAS thread): n = 64,
4 epochs 5.7e-7 → 9.4e-8; n = 256, K = 1, 2, 4: certified gaps 6.8e-8, 8.8e-8, 9.7e-8 in 1.2,
1.9, 2.4 s; n = 1024, 4 epochs: 9.8e-8 in 150 s. The witness is the best dual point met (its p included); the primal the best balanced
one. Where the dual optimum is degenerate — few patterns, weight on a few rows, Z_π of low
rank, so B is nearly singular near the optimum (n = 8, 4 epochs: the last two steps carry all
the weight) — the primal read from the dual is poor and the iterate of the dual path with the
smallest primal estimate is balanced as well: measured certified gaps 0.9 % at n = 8 and 3e-6
at n = 12, 4 epochs (b = 2, 3 patterns; the lower bound within 4e-6 of the SDP optimum), ≤ 1e-6
from b = 4 patterns on. The
coarse-to-fine start applies with ``log p`` interpolated on the relative step position.

**``k=K,min_sep=B``.** The pattern set is combinatorial and its elliptope constraints overlap;
this module does not solve the exact program. It returns the best (at the certified min-sep
sensitivity of ``privacy.participation``) of three strategies: the single-participation
optimum; when B divides n, the ``epochs=n/B`` optimum (whose patterns {i, i + B, …} are the
tightest min-sep patterns); and the optimal *banded* strategy with B bands and unit columns
(:func:`_solve_banded`; columns at distance ≥ B are orthogonal, so every pattern's Gram block is
the identity and Δ² is the number of participations that fit — jax_privacy's
``dense.optimize(bands=B, equal_norm=True)`` optimises the same class) — and prints the lower
bound of
``planner.participation_bound`` (arithmetic-progression patterns: a relaxation, so the gap it
shows is an upper bound on the true gap).

**Streaming.** ``streaming=True`` replaces A by the lower-triangular factor of AᵀA
(``training.streaming``): same Gram, same sensitivity and objective, recomputed from it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from factorize.errors import InternalError, SolverError
from factorize.planner.errors import PlannerError
from factorize.privacy.participation import Participation, participation_sensitivity

from .certificate import (
    CLAIM_SLACK,
    DEFAULT_RESIDUAL_TOL,
    EpochsWitness,
    PatternWitness,
    TrainingSolution,
    epochs_lower_bound,
    solution_figures,
)

#: Objectives this module plans for: ``gamma_f`` (the total squared error, (P)) and ``max`` (the
#: worst step's squared error, (P∞), the γ₂-type objective; ``epochs=K`` only).
OBJECTIVES = ("gamma_f", "max")

#: Row balancing (:func:`_balance_rows`) stops once the balanced primal's step errors agree to
#: this fraction of the target gap (relative spread), or after :data:`ROW_BALANCE_ITERS`
#: updates (or on the other rules of its docstring).
ROW_BALANCE_SPREAD = 1e-2
ROW_BALANCE_ITERS = 200

#: Rounds of (Z re-optimised at fixed row weights, rows balanced) after the joint iteration
#: (module docstring), each to an estimated gap of :data:`ALTERNATION_GAP` × the target.
ALTERNATIONS = 10
ALTERNATION_GAP = 1e-2

#: Smallest number of steps at which the dual starts from the optimum at n/2 (module docstring).
COARSE_MIN_STEPS = 512

#: Estimated relative gap to which the coarser problems of the coarse-to-fine start are solved.
COARSE_GAP = 1e-5

#: The balanced gap (an n × n product) is evaluated once the cheap estimate is this many times
#: the target; the cheap one overestimates it by 10–100× near the optimum (prefix sums).
BALANCED_GAP_WINDOW = 1e3


def plan_multi_epoch(workload_matrix: Any, participation: Participation, *, objective: str = "gamma_f",
                     streaming: bool = False, target_gap: float = 1e-7, max_iter: int = 5000,
                     time_limit: float | None = None) -> TrainingSolution:
    """The dense strategy of the module docstring for workload W (k × n, full column rank;
    one column per step) under ``participation``, with its certified objective, sensitivity and
    lower bound. ``objective``: ``gamma_f`` (total squared error) or ``max`` (the worst step's,
    ``epochs=K`` only). ``target_gap``: the estimated relative gap at which the dual iteration
    stops; ``time_limit`` (seconds) stops it earlier with what it has (``details['converged']``
    = 0)."""
    if objective not in OBJECTIVES:
        raise PlannerError(f"the dense training planner optimises {OBJECTIVES}, got {objective!r}")
    if not isinstance(participation, Participation):
        raise PlannerError("participation must be a privacy.participation.Participation")
    if not (math.isfinite(target_gap) and target_gap > 0):
        raise PlannerError(f"target_gap must be a positive number, got {target_gap!r}")
    W = _workload(workload_matrix)
    start = time.perf_counter()
    deadline = None if time_limit is None else start + float(time_limit)
    if objective == "max":
        if participation.kind != "epochs":
            raise PlannerError("the worst-step objective is planned under epochs=K participation only")
        A, F, p, iters, converged = _solve_epochs_max(W, participation.k, target_gap, max_iter,
                                                      deadline)
        A = _streaming(A) if streaming else A
        return _finish(W, participation, A, EpochsWitness(F, p),
                       epochs_lower_bound(W, participation, F, p), streaming, start, iters,
                       converged, "max")
    if participation.kind == "epochs":
        A, F, iters, converged = _solve_epochs(W, participation.k, target_gap, max_iter, deadline)
        A = _streaming(A) if streaming else A
        return _finish(W, participation, A, EpochsWitness(F), epochs_lower_bound(W, participation, F),
                       streaming, start, iters, converged)
    return _plan_min_sep(W, participation, streaming, target_gap, max_iter, deadline, start)


def _workload(workload_matrix: Any) -> np.ndarray:
    W = np.asarray(workload_matrix, dtype=np.float64)
    if W.ndim != 2 or W.size == 0 or not np.all(np.isfinite(W)):
        raise PlannerError("the workload must be a finite, non-empty 2-D array (one column per step)")
    try:
        np.linalg.cholesky(W.T @ W)
    except np.linalg.LinAlgError:
        raise PlannerError("the dense training planner needs a workload of full column rank "
                           "(every step queried independently)") from None
    return W


def _streaming(A: np.ndarray) -> np.ndarray:
    from .streaming import lower_triangular_factor

    return lower_triangular_factor(A)


def _finish(W: np.ndarray, p: Participation, A: np.ndarray, witness: EpochsWitness | PatternWitness,
            lower: float, streaming: bool, start: float, iters: int, converged: bool,
            reduction: str = "total") -> TrainingSolution:
    """Scale A to unit certified sensitivity, reconstruct R and certify the objective (the
    total squared error, or the worst step's with ``reduction="max"``)."""
    A = A / participation_sensitivity(A, p).value
    if streaming:
        from .streaming import causal_reconstruction

        R = causal_reconstruction(W, A)
    else:
        R = np.linalg.solve(A.T, W.T).T
    sens, upper, residual = solution_figures(W, p, A, R, reduction)
    # stated with CLAIM_SLACK (training.certificate): a re-derivation in
    # another summation order (BLAS threads, another machine) confirms them
    sens, upper, lower = sens * (1 + CLAIM_SLACK), upper * (1 + CLAIM_SLACK) ** 3, lower * (1 - CLAIM_SLACK)
    if residual > DEFAULT_RESIDUAL_TOL:
        raise SolverError(f"the strategy reproduces the workload only to {residual:.3g} (relative, max "
                          f"entry), above {DEFAULT_RESIDUAL_TOL:g}: too ill-conditioned to state")
    if lower > upper:
        raise InternalError(f"certified lower bound {lower!r} above the certified objective {upper!r}")
    return TrainingSolution(p, A, R, sens, upper, lower, witness, streaming,
                            seconds=time.perf_counter() - start, iterations=iters,
                            details={"residual": residual, "converged": float(converged)},
                            reduction=reduction)


def _plan_min_sep(W: np.ndarray, p: Participation, streaming: bool, target_gap: float, max_iter: int,
                  deadline: float | None, start: float) -> TrainingSolution:
    from factorize.planner.participation_bound import lower_bound

    n = W.shape[1]
    candidates = [1] + ([n // p.min_sep] if n % p.min_sep == 0 and 1 < n // p.min_sep < n else [])
    strategies = []
    iters, converged = 0, True
    for K in candidates:
        A, _, it, conv = _solve_epochs(W, K, target_gap, max_iter, deadline)
        iters, converged = iters + it, converged and conv
        strategies.append(A)
    if p.min_sep < n:
        A, it = _solve_banded(W, p.min_sep, _streaming(strategies[0]), max_iter, deadline)
        iters += it
        strategies.append(A)
    best: tuple[float, np.ndarray] | None = None
    for A in strategies:
        A = A / participation_sensitivity(A, p).value
        _, value, _ = solution_figures(W, p, A, np.linalg.solve(A.T, W.T).T)
        if best is None or value < best[0]:
            best = (value, A)
    if best is None:
        raise InternalError("no min-sep candidate strategy was built")
    A = _streaming(best[1]) if streaming else best[1]
    bound = lower_bound(W, p)
    return _finish(W, p, A, PatternWitness(bound.a, bound.c), max(0.0, bound.value), streaming,
                   start, iters, converged)


class _EpochsDual:
    """(D) of the module docstring in the permuted coordinates where each pattern's steps are
    contiguous: position π·K + j is step π + j·b."""

    def __init__(self, W: np.ndarray, K: int) -> None:
        n = W.shape[1]
        self.n, self.K, self.b = n, K, n // K
        self.perm = (np.arange(self.b)[:, None] + self.b * np.arange(K)[None, :]).ravel()
        C = W.T @ W
        Cp = C[np.ix_(self.perm, self.perm)]
        self.C3 = np.ascontiguousarray(Cp.reshape(n, self.b, K).transpose(1, 0, 2))  # (b, n, K)
        self.cache: dict[bytes, dict[str, Any]] = {}

    def blocks(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(ν, N, ‖V‖, B)`` with N the row-normalised V and B_π = √ν_π N_π."""
        b, K = self.b, self.K
        nu = np.exp(x[:b])
        V = x[b:].reshape(b, K, K)
        norms = np.linalg.norm(V, axis=2, keepdims=True)
        N = V / norms
        return nu, N, norms, np.sqrt(nu)[:, None, None] * N

    def evaluate(self, x: np.ndarray) -> dict[str, Any]:
        key = x.tobytes()
        if key in self.cache:
            return self.cache[key]
        n, b, K = self.n, self.b, self.K
        nu, N, norms, B = self.blocks(x)
        CB = (self.C3 @ B).transpose(1, 0, 2).reshape(n, n)  # rows: positions, cols: (π, c)
        M = (B.transpose(0, 2, 1) @ CB.reshape(b, K, n)).reshape(n, n)
        lam, V = np.linalg.eigh(0.5 * (M + M.T))
        out: dict[str, Any] = {"ok": bool(lam[0] > 1e-13 * lam[-1] > 0)}
        if out["ok"]:
            s = np.sqrt(lam)
            T = float(np.sum(s))
            P = (CB @ (V / s)).reshape(b, K, n)  # the diagonal blocks of C B M^{-1/2}:
            Vb = V.reshape(b, K, n)
            G = P @ Vb.transpose(0, 2, 1)
            half = (Vb * s) @ Vb.transpose(0, 2, 1)  # the diagonal blocks of M^{1/2}
            Binv = np.linalg.inv(B)
            Xblocks = Binv.transpose(0, 2, 1) @ half @ Binv
            spread = np.sum(np.abs(Xblocks), axis=(1, 2))
            out.update(nu=nu, N=N, norms=norms, B=B, lam=lam, V=V, T=T, G=G, Binv=Binv, spread=spread,
                       gap=float(np.max(spread)) * float(np.sum(nu)) / T - 1.0)
        self.cache = {key: out}
        return out

    def balanced_gap(self, x: np.ndarray) -> float:
        """The relative gap of the balanced primal against (D) at x: ``X_bal = D Xu D`` (D = 1/√s_π
        on pattern π's steps) has every pattern sum Σ|X_ππ| equal to 1, and with w = √s_π on
        π's coordinates (D⁻¹B = B D_w), ``tr(C X_bal⁻¹) = tr(D_w M D_w M^{-1/2}) =
        Σ_kl (λ_l/√λ_k) (Vᵀ D_w V)_lk²`` (as for ``solvers.dual_gamma_f``'s balanced bound)."""
        e = self.evaluate(x)
        if not e["ok"]:
            return math.inf
        V, lam = e["V"], e["lam"]
        w = np.repeat(np.sqrt(e["spread"]), self.K)
        Cm = V.T @ (w[:, None] * V)
        primal = float(np.sum((lam[:, None] / np.sqrt(lam)[None, :]) * Cm * Cm))
        dual = e["T"] ** 2 / float(np.sum(e["nu"]))
        return primal / dual - 1.0

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """``−(2 log T − log Σν)`` and its gradient in x = (log ν, V)."""
        e = self.evaluate(x)
        if not e["ok"]:
            return math.inf, np.zeros_like(x)
        nu, N, norms, T = e["nu"], e["N"], e["norms"], e["T"]
        S = float(np.sum(nu))
        gB = 2.0 * e["G"] / T
        g_nu = np.einsum("bjc,bjc->b", gB, N) / (2.0 * np.sqrt(nu)) - 1.0 / S
        gN = np.sqrt(nu)[:, None, None] * gB
        gV = (gN - N * np.sum(N * gN, axis=2, keepdims=True)) / norms
        value = 2.0 * math.log(T) - math.log(S)
        return -value, -np.concatenate([g_nu * nu, gV.ravel()])

    def strategy(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A, F)``: the balanced strategy ``Λ^{1/4} Vᵀ B^{-1} D`` in step order and the witness
        factor; D scales pattern π's columns by ``1/√s_π``, s_π = Σ|X_ππ| (module docstring)."""
        n, b, K = self.n, self.b, self.K
        e = self.evaluate(x)
        Vt = (e["lam"] ** 0.25)[:, None] * e["V"].T  # rows: strategy rows, cols: (π, c)
        Binv = e["Binv"] / np.sqrt(e["spread"])[:, None, None]
        Ap = (Vt.reshape(n, b, K).transpose(1, 0, 2) @ Binv).transpose(1, 0, 2).reshape(n, n)
        A = np.empty_like(Ap)
        A[:, self.perm] = Ap
        F = np.empty((n, K))
        F[self.perm] = e["B"].reshape(n, K)
        return A, F


class _EpochsMaxDual(_EpochsDual):
    """The worst-step dual (Dmax) of the module docstring: x = (log p (k rows), log ν (b), V),
    value ``−(2 log T − log Σν − log Σp)`` with ``T = ‖D_p^{1/2} W B‖_tr``. With
    ``G = D_p^{1/2} W B`` (k × n), ``M = GᵀG = V Λ Vᵀ`` and ``H = G V``:
    ``∂T/∂log p_t = ½ Σ_l H_tl² / √λ_l`` and ``∂T/∂B = Wᵀ D_p W B M^{-1/2} =
    Wᵀ D_p^{1/2} H Λ^{-1/2} Vᵀ`` (its diagonal blocks). The primal at x is the inner minimiser
    of the p-weighted program, ``X⁻¹ = B M^{-1/2} Bᵀ``, with step errors
    ``e_t = (W X⁻¹ Wᵀ)_tt = Σ_l H_tl² / (p_t √λ_l)``."""

    def __init__(self, W: np.ndarray, K: int) -> None:
        super().__init__(W, K)
        self.k = W.shape[0]
        self.Wp = np.ascontiguousarray(W[:, self.perm])  # columns in pattern order
        self.W3 = self.Wp.reshape(self.k, self.b, K).transpose(1, 0, 2)  # (b, k, K)

    def evaluate(self, x: np.ndarray) -> dict[str, Any]:
        key = x.tobytes()
        if key in self.cache:
            return self.cache[key]
        n, b, K, k = self.n, self.b, self.K, self.k
        logp = x[:k]
        p = np.exp(logp - float(np.max(logp)))
        nu, N, norms, B = self.blocks(x[k:])
        G0 = (self.W3 @ B).transpose(1, 0, 2).reshape(k, n)  # W B (rows: steps, cols: (π, c))
        sp = np.sqrt(p)
        G = sp[:, None] * G0
        M = G.T @ G
        lam, V = np.linalg.eigh(0.5 * (M + M.T))
        out: dict[str, Any] = {"ok": bool(lam[0] > 1e-13 * lam[-1] > 0)}
        if out["ok"]:
            s = np.sqrt(lam)
            T = float(np.sum(s))
            H = G @ V
            Hs = H * H / s[None, :]
            dlogp = 0.5 * np.sum(Hs, axis=1)  # ∂T/∂log p_t
            P = (self.Wp.T @ (sp[:, None] * H / s[None, :])).reshape(b, K, n)
            Vb = V.reshape(b, K, n)
            Gr = P @ Vb.transpose(0, 2, 1)
            half = (Vb * s) @ Vb.transpose(0, 2, 1)
            Binv = np.linalg.inv(B)
            Xblocks = Binv.transpose(0, 2, 1) @ half @ Binv
            spread = np.sum(np.abs(Xblocks), axis=(1, 2))
            errors = 2.0 * dlogp / p  # e_t of the unscaled inner minimiser
            dual = T * T / (float(np.sum(nu)) * float(np.sum(p)))
            out.update(p=p, nu=nu, N=N, norms=norms, B=B, lam=lam, V=V, T=T, G=Gr, G0=G0,
                       dlogp=dlogp, Binv=Binv, spread=spread, dual=dual,
                       gap=float(np.max(spread)) * float(np.max(errors)) / dual - 1.0)
        self.cache = {key: out}
        return out

    def weights(self, x: np.ndarray) -> np.ndarray:
        """The row weights p at x, normalised to sum 1."""
        p = np.asarray(self.evaluate(x)["p"])
        return p / float(np.sum(p))

    def balanced_errors(self, x: np.ndarray) -> np.ndarray:
        """Step errors of the balanced primal ``D X D`` (pattern sums Σ|X_ππ| = 1): with
        ``w = √s_π`` on π's coordinates, ``W (DXD)⁻¹ Wᵀ = (W B D_w) M^{-1/2} (W B D_w)ᵀ``."""
        e = self.evaluate(x)
        w = np.repeat(np.sqrt(e["spread"]), self.K)
        HB = (e["G0"] * w[None, :]) @ e["V"]
        return np.asarray(np.sum(HB * HB / np.sqrt(e["lam"])[None, :], axis=1))

    def balanced_gap(self, x: np.ndarray) -> float:
        e = self.evaluate(x)
        if not e["ok"]:
            return math.inf
        return float(np.max(self.balanced_errors(x))) / e["dual"] - 1.0

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        e = self.evaluate(x)
        if not e["ok"]:
            return math.inf, np.zeros_like(x)
        nu, N, norms, T, p = e["nu"], e["N"], e["norms"], e["T"], e["p"]
        S = float(np.sum(nu))
        gB = 2.0 * e["G"] / T
        g_nu = np.einsum("bjc,bjc->b", gB, N) / (2.0 * np.sqrt(nu)) - 1.0 / S
        gN = np.sqrt(nu)[:, None, None] * gB
        gV = (gN - N * np.sum(N * gN, axis=2, keepdims=True)) / norms
        g_logp = 2.0 * e["dlogp"] / T - p / float(np.sum(p))
        value = 2.0 * math.log(T) - math.log(S) - math.log(float(np.sum(p)))
        return -value, -np.concatenate([g_logp, g_nu * nu, gV.ravel()])


def _solve_epochs(W: np.ndarray, K: int, target_gap: float, max_iter: int,
                  deadline: float | None) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """L-BFGS on (D), from the coarse-to-fine start where it applies (module docstring), else
    from Z_π = I/b; returns ``(A, F, iterations, converged)`` (iterations at every level)."""
    from factorize.privacy.guarantees import PrivacyError

    n = W.shape[1]
    if n % K:
        raise PrivacyError(f"epochs={K} needs a number of steps divisible by {K}, got {n}")
    dual = _EpochsDual(W, K)
    x0, coarse_iters = _coarse_start(W, K, max_iter, deadline)
    if x0 is not None and not dual.evaluate(x0)["ok"]:
        x0 = None
    x, iters, converged = _iterate(dual, _cold_start(n, K) if x0 is None else x0, target_gap,
                                   max_iter, deadline)
    A, F = dual.strategy(x)
    return A, F, iters + coarse_iters, converged


def _solve_epochs_max(W: np.ndarray, K: int, target_gap: float, max_iter: int,
                      deadline: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """L-BFGS on (D∞) (module docstring; coarse-to-fine start where it applies, else uniform
    p and Z_π = I/b), the rows balanced (:func:`_balance_rows`), then up to
    :data:`ALTERNATIONS` rounds of (Z re-optimised at fixed p, rows balanced); returns ``(A, F,
    p, iterations, converged)`` with (F, p) the witness at the best dual point met and A the
    best primal."""
    from factorize.privacy.guarantees import PrivacyError

    n = W.shape[1]
    k = W.shape[0]
    if n % K:
        raise PrivacyError(f"epochs={K} needs a number of steps divisible by {K}, got {n}")
    dual = _EpochsMaxDual(W, K)
    x0, coarse_iters = _coarse_start(W, K, max_iter, deadline, worst=True)
    if x0 is not None and not dual.evaluate(x0)["ok"]:
        x0 = None
    if x0 is None:
        x0 = np.concatenate([np.zeros(k), _cold_start(n, K)])
    # the iterate with the smallest cheap primal estimate: where the dual optimum is degenerate
    # (a few patterns, weight on a few rows: B nearly singular at the end) an earlier iterate
    # can give the better primal
    track: dict[str, Any] = {"gap": math.inf, "x": None}

    def remember(z: np.ndarray) -> None:
        e = dual.evaluate(z)
        if e["ok"] and e["gap"] < track["gap"]:
            track.update(gap=e["gap"], x=z.copy())

    x, iters, converged = _iterate(dual, x0, target_gap, max_iter, deadline, remember)
    best_dual = (float(dual.evaluate(x)["dual"]), x)
    xb, worst, it = _balance_rows(dual, x, best_dual[0], target_gap, deadline)
    iters += coarse_iters + it
    if track["x"] is not None and worst / best_dual[0] - 1.0 > target_gap:
        xt, worst_t, it = _balance_rows(dual, track["x"], best_dual[0], target_gap, deadline)
        iters += it
        if worst_t < worst:
            xb, worst = xt, worst_t
    xx = xb
    for _ in range(ALTERNATIONS):
        gap = worst / best_dual[0] - 1.0
        if gap <= target_gap or (deadline is not None and time.perf_counter() > deadline):
            break
        p = dual.weights(xx)
        inner = _EpochsDual(np.sqrt(p)[:, None] * W, K)
        z, it, _ = _iterate(inner, xx[k:], ALTERNATION_GAP * target_gap, max_iter, deadline)
        iters += it
        xx = np.concatenate([np.log(p), z])
        if not dual.evaluate(xx)["ok"]:
            break
        value = float(dual.evaluate(xx)["dual"])
        if value > best_dual[0]:
            best_dual = (value, xx)
        xx, w, it = _balance_rows(dual, xx, best_dual[0], target_gap, deadline)
        iters += it
        if not w < worst:  # the round gained nothing
            break
        xb, worst = xx, w
    _, F = dual.strategy(best_dual[1])
    p = dual.weights(best_dual[1])
    A, _ = dual.strategy(xb)
    return A, F, p, iters, converged or worst / best_dual[0] - 1.0 <= target_gap


def _balance_rows(dual: _EpochsMaxDual, x: np.ndarray, value: float, target_gap: float,
                  deadline: float | None) -> tuple[np.ndarray, float, int]:
    """The row balancing of the module docstring: with B fixed, ``log p_t += log(e_t/ē)`` for
    the balanced primal's step errors e, until the worst step is within ``target_gap`` of the
    dual ``value``, the errors agree to :data:`ROW_BALANCE_SPREAD` of the target, the worst
    step's excess over ``value`` shrank by less than 5 % over 5 updates, or
    :data:`ROW_BALANCE_ITERS`; returns the point whose balanced primal has the smallest worst
    step, that worst step, and the number of updates."""
    k = dual.k
    xx = x.copy()
    best: tuple[float, np.ndarray] | None = None
    history: list[float] = []
    updates = 0
    for _ in range(ROW_BALANCE_ITERS):
        if not dual.evaluate(xx)["ok"]:
            break
        e = dual.balanced_errors(xx)
        worst = float(np.max(e))
        if best is None or worst < best[0]:
            best = (worst, xx.copy())
        history.append(best[0])
        if best[0] / value - 1.0 <= target_gap:
            break
        if worst / float(np.min(e)) - 1.0 <= ROW_BALANCE_SPREAD * target_gap:
            break
        if len(history) > 5 and history[-1] - value > 0.995 * (history[-6] - value):
            break
        if deadline is not None and time.perf_counter() > deadline:
            break
        xx[:k] += np.log(e / float(np.mean(e)))
        updates += 1
    if best is None:
        raise SolverError("the multi-epoch dual iteration reached a singular point; no strategy")
    return best[1], best[0], updates


def _cold_start(n: int, K: int) -> np.ndarray:
    """``Z_π = I/b`` up to scale: ``log ν = 0`` and identity blocks."""
    b = n // K
    return np.concatenate([np.zeros(b), np.tile(np.eye(K), (b, 1, 1)).ravel()])


def _iterate(dual: _EpochsDual, x0: np.ndarray, target_gap: float, max_iter: int,
             deadline: float | None,
             on_iterate: Callable[[np.ndarray], None] | None = None) -> tuple[np.ndarray, int, bool]:
    """L-BFGS-B on ``dual`` from x0 until the estimated gap (the cheaper one, or the balanced
    one once the cheap one is within :data:`BALANCED_GAP_WINDOW` of the target) is ≤
    ``target_gap``, the deadline passes or L-BFGS stops; returns ``(x, iterations, converged)``.
    ``on_iterate`` sees each iterate."""
    from scipy.optimize import minimize

    state: dict[str, int] = {"iters": 0, "converged": 0}

    def reached(x: np.ndarray) -> bool:
        e = dual.evaluate(x)
        if not e["ok"]:
            return False
        return e["gap"] <= target_gap or (e["gap"] <= BALANCED_GAP_WINDOW * target_gap
                                          and dual.balanced_gap(x) <= target_gap)

    def callback(intermediate_result: Any) -> None:
        state["iters"] += 1
        if on_iterate is not None:
            on_iterate(intermediate_result.x)
        if reached(intermediate_result.x):
            state["converged"] = 1
            raise StopIteration
        if deadline is not None and time.perf_counter() > deadline:
            raise StopIteration

    res = minimize(dual.value_and_gradient, x0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": max_iter, "maxcor": 30, "ftol": 1e-16, "gtol": 1e-14})
    if not dual.evaluate(res.x)["ok"]:
        raise SolverError("the multi-epoch dual iteration reached a singular point; no strategy")
    e = dual.evaluate(res.x)
    converged = bool(state["converged"]) or min(e["gap"], dual.balanced_gap(res.x)) <= target_gap
    return res.x, state["iters"], converged


def _toeplitz_column(W: np.ndarray) -> np.ndarray | None:
    """The first column w of W when W is square, lower-triangular and Toeplitz
    (``W_ij = w_{i−j}`` for i ≥ j, 0 above), else None."""
    if W.shape[0] != W.shape[1] or np.any(np.triu(W, 1)):
        return None
    return W[:, 0].copy() if np.array_equal(W[1:, 1:], W[:-1, :-1]) else None


def _coarse_start(W: np.ndarray, K: int, max_iter: int, deadline: float | None,
                  worst: bool = False) -> tuple[np.ndarray | None, int]:
    """The coarse-to-fine start of the module docstring: (x0, iterations spent), or (None, 0)
    where it does not apply (fewer than :data:`COARSE_MIN_STEPS` steps, an odd number of
    patterns, a workload that is not lower-triangular Toeplitz). ``worst``: for (D∞), whose
    x leads with ``log p`` (one per step), interpolated like ``log ν``."""
    n = W.shape[1]
    b = n // K
    if n < COARSE_MIN_STEPS or b % 2:
        return None, 0
    w = _toeplitz_column(W)
    if w is None:
        return None, 0
    m = n // 2
    Wc = np.tril(w[np.subtract.outer(np.arange(m), np.arange(m)).clip(0)])
    dual = _EpochsMaxDual(Wc, K) if worst else _EpochsDual(Wc, K)
    xc, iters = _coarse_start(Wc, K, max_iter, deadline, worst)
    if xc is None or not dual.evaluate(xc)["ok"]:
        xc = _cold_start(m, K)
        xc = np.concatenate([np.zeros(m), xc]) if worst else xc
    xc, it, _ = _iterate(dual, xc, COARSE_GAP, max_iter, deadline)
    if not worst:
        return _interpolate(xc, K, b), iters + it
    log_p = np.interp((np.arange(n) + 0.5) / n, (np.arange(m) + 0.5) / m, xc[:m])
    return np.concatenate([log_p, _interpolate(xc[m:], K, b)]), iters + it


def _interpolate(x: np.ndarray, K: int, b: int) -> np.ndarray:
    """Dual variables for b patterns from those for ``len(x) // (1 + K²)`` patterns: ``log ν``
    and the row-normalised K × K blocks, each entry interpolated linearly in the relative
    position ``(π + ½)/b`` (constant beyond the first and last centres)."""
    bc = x.size // (1 + K * K)
    V = x[bc:].reshape(bc, K, K)
    V = V / np.linalg.norm(V, axis=2, keepdims=True)
    coarse = (np.arange(bc) + 0.5) / bc
    fine = (np.arange(b) + 0.5) / b
    log_nu = np.interp(fine, coarse, x[:bc])
    blocks = np.stack([np.interp(fine, coarse, col) for col in V.reshape(bc, K * K).T], axis=1)
    return np.concatenate([log_nu, blocks.ravel()])


def _solve_banded(W: np.ndarray, bands: int, start: np.ndarray, max_iter: int,
                  deadline: float | None) -> tuple[np.ndarray, int]:
    """The banded candidate of ``k=K,min_sep=B``: a lower-triangular A with ``bands`` bands and
    unit columns (so X = AᵀA vanishes at distance ≥ B and every min-sep pattern's X_ππ is the
    identity: Δ² = the most participations that fit), minimising ``log ‖W A⁻¹‖_F²`` by L-BFGS
    from the band of ``start``. Gradient: with R = W A⁻¹, ``∂‖R‖_F²/∂A = −2 (A⁻¹RᵀR)ᵀ``, then
    through the column normalisation and restricted to the band."""
    from scipy.linalg import solve_triangular
    from scipy.optimize import minimize

    n = W.shape[1]
    rows, cols = np.tril_indices(n)
    keep = rows - cols < bands
    rows, cols = rows[keep], cols[keep]
    state = {"iters": 0}

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        V = np.zeros((n, n))
        V[rows, cols] = x
        norms = np.linalg.norm(V, axis=0)
        return V / norms, norms

    def value_and_gradient(x: np.ndarray) -> tuple[float, np.ndarray]:
        A, norms = unpack(x)
        if not np.all(np.abs(np.diagonal(A)) > 1e-12):
            return math.inf, np.zeros_like(x)
        R = solve_triangular(A, W.T, lower=True, trans="T").T
        val = float(np.sum(R * R))
        G = -2.0 * solve_triangular(A, R.T @ R, lower=True).T
        GV = (G - A * np.sum(A * G, axis=0)) / norms
        return math.log(val), GV[rows, cols] / val

    def callback(intermediate_result: Any) -> None:
        state["iters"] += 1
        if deadline is not None and time.perf_counter() > deadline:
            raise StopIteration

    x0 = np.asarray(start, dtype=np.float64)[rows, cols]
    res = minimize(value_and_gradient, x0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": max_iter, "maxcor": 30, "ftol": 1e-15, "gtol": 1e-10})
    A, _ = unpack(res.x)
    return A, state["iters"]
