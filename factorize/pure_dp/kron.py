"""Kronecker strategies ``A = ⊗_i A_i`` (p-Identity factors) for product workloads and unions
of them: OPT_⊗ of McKenna et al., "Optimizing error of high-dimensional statistical queries
under differential privacy" (PVLDB 2018, its Kronecker-product strategy optimiser), plus its weighted
union of Kronecker strategies (OPT_+).

For ``W = [w_b ⊗_i W_{b,i}]_b`` and ``A = ⊗_i A_i`` with every factor's columns of L1 norm 1
(p-Identity), ``‖A‖₁ = Π_i ‖A_i‖₁ = 1`` and, since ``(AᵀA)⁻¹ = ⊗_i (A_iᵀA_i)⁻¹``,

    f(A) = ‖A‖₁² tr(WᵀW (AᵀA)⁻¹) = Σ_b w_b² Π_i t_{b,i},   t_{b,i} = tr(W_{b,i}ᵀW_{b,i} (A_iᵀA_i)⁻¹).

* One block: ``f = w² Π_i t_i`` — each factor is optimised on its own (``one_d``), once per
  distinct factor.
* Several blocks: with the other factors fixed, f is ``tr(G̃_i (A_iᵀA_i)⁻¹)`` for
  ``G̃_i = Σ_b w_b² (Π_{i'≠i} t_{b,i'}) W_{b,i}ᵀW_{b,i}`` — a one-factor problem. With at
  most one free factor (one attribute, or every other factor identity / total in every
  block) that problem is exact: one search on G̃_i, no alternation. Otherwise the factors
  are optimised in turn (block coordinate descent, each step warm-started from the current
  factor and kept only if f does not increase) until a sweep gains less than ``tol``
  relative; from two starts (all factors I, and each factor optimal for its blocks' Grams
  normalised to unit trace), keeping the better (the identity is often a coordinate-wise
  optimum that the first start cannot leave).
* Weighted union (one Kronecker strategy per block, ``A = [α_b ⊗_i A_{b,i}]_b``): answering
  block b from its own measurement only, the variance is ``2 (Σ α)² v_b / α_b²`` with
  ``v_b = w_b² Π_i t_{b,i}``; the weights ``α_b ∝ v_b^{1/3}`` minimise the total,
  ``(Σ_b v_b^{1/3})³`` (HDMM's union template uses the same cube-root rule).

Identity factors take ``A_i = I`` (optimal: ``t ≥ n`` for any strategy of L1 norm 1, since
``tr((AᵀA)⁻¹) ≥ n²/tr(AᵀA) ≥ n/‖A‖₁²``) and all-ones factors ``A_i = 1ᵀ`` (``t = 1``,
the least possible) when they are such in every block.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .one_d import PIdentityResult, optimize_p_identity
from .structure import ProductWorkload

__all__ = ["KronStrategy", "UnionStrategy", "factor_trace", "optimize_kron", "optimize_union"]


@dataclass(frozen=True)
class KronStrategy:
    """``A = ⊗_i factors[i]``; ``value`` is the optimizer's ``f`` (re-checked elsewhere)."""

    factors: tuple[np.ndarray, ...]
    value: float
    sweeps: int
    history: tuple[float, ...]
    searches: tuple[PIdentityResult | None, ...] = field(repr=False)
    seconds: float = 0.0
    init: str = "per factor"


@dataclass(frozen=True)
class UnionStrategy:
    """``A = [weights[b] · ⊗_i terms[b][i]]_b``, block b of the workload answered from term b."""

    weights: tuple[float, ...]
    terms: tuple[tuple[np.ndarray, ...], ...]
    value: float
    block_values: tuple[float, ...]
    seconds: float = 0.0


def factor_trace(G: np.ndarray, A: np.ndarray) -> float:
    """``tr(G (AᵀA)⁺)`` for one factor (dense, n×n)."""
    return float(np.sum(G * np.linalg.pinv(A.T @ A, hermitian=True)))


def gram_inverse(A: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
    """``(AᵀA)⁺`` of one factor, formed once and shared by every block's trace
    ``tr(G_b (AᵀA)⁺) = Σ G_b ⊙ (AᵀA)⁺``. For a p-Identity factor ``A = [I; Θ] D`` (``theta``
    given) it is ``C (I − Θᵀ S⁻¹ Θ) C`` with ``C = D⁻¹ = diag(1 + Σ_i θ_ij)``,
    ``S = I_p + ΘΘᵀ`` (Woodbury; ``AᵀA = D (I + ΘᵀΘ) D`` is invertible): O(p n²), no
    eigendecomposition. Otherwise the pseudo-inverse: ``I`` for the identity, ``J/n²`` for
    ``1ᵀ``, ``pinv`` for anything else."""
    n = A.shape[1]
    if theta is not None:
        T = np.asarray(theta, dtype=np.float64).reshape(-1, n)
        c = 1.0 + T.sum(axis=0)
        Y = np.eye(n) - T.T @ np.linalg.solve(np.eye(T.shape[0]) + T @ T.T, T)
        return c[:, None] * Y * c[None, :]
    if A.shape[0] == n and np.array_equal(A, np.eye(n)):
        return np.eye(n)
    if A.shape[0] == 1 and np.all(A == 1.0):
        return np.full((n, n), 1.0 / (n * n))
    return np.linalg.pinv(A.T @ A, hermitian=True)


def _traces(grams: Sequence[np.ndarray], inverse: np.ndarray) -> list[float]:
    """``[tr(G_b X)]_b`` for symmetric ``X`` (one elementwise product per distinct Gram)."""
    memo: dict[int, float] = {}
    return [memo.setdefault(id(g), float(np.sum(g * inverse))) for g in grams]


def _weighted_gram(coef: np.ndarray, grams: Sequence[np.ndarray]) -> np.ndarray:
    """``Σ_b coef_b G_b``, the blocks that share one Gram matrix (the same object) added
    once: the n×n matrix of attribute i's one-factor subproblem."""
    acc: dict[int, list] = {}
    for c, g in zip(coef, grams, strict=True):
        if id(g) in acc:
            acc[id(g)][0] += float(c)
        else:
            acc[id(g)] = [float(c), g]
    return sum(c * g for c, g in acc.values())


def _shared_grams(blocks: Sequence, i: int) -> list[np.ndarray]:
    """Attribute i's per-block Grams ``W_{b,i}ᵀ W_{b,i}``, one array object per distinct
    factor (so ``_traces`` and ``_weighted_gram`` see the sharing)."""
    seen: dict[str, np.ndarray] = {}
    out = []
    for b in blocks:
        F = b.factors[i]
        key = _key(F)
        if key not in seen:
            seen[key] = F.T @ F
        out.append(seen[key])
    return out


def _kind(F: np.ndarray) -> str:
    """"total" (c·1ᵀ), "identity" (c·I), "diagonal" or "matrix": a scaled identity factor is
    optimally measured by I, a scaled total by 1ᵀ (the scale only multiplies t)."""
    if F.shape[0] == 1 and np.all(F[0, 0] == F) and F[0, 0] != 0:
        return "total"
    diag = np.diagonal(F)
    if F.shape[0] == F.shape[1] and np.array_equal(F, np.diag(diag)) and np.all(diag != 0):
        return "identity" if np.all(np.abs(diag) == abs(F[0, 0])) else "diagonal"
    return "matrix"


def _key(G: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(G).tobytes() + str(G.shape).encode()).hexdigest()


def _fixed_factor(kinds: Sequence[str], n: int) -> np.ndarray | None:
    if all(k == "identity" for k in kinds):
        return np.eye(n)
    if all(k == "total" for k in kinds):
        return np.ones((1, n))
    return None


def optimize_kron(P: ProductWorkload, *, sweeps: int = 8, tol: float = 1e-7, seed: int = 0,
                  one_d: dict | None = None, escape: bool = True) -> KronStrategy:
    """One Kronecker strategy for the product workload P (module docstring). ``one_d``:
    keyword options of ``one_d.optimize_p_identity`` (restarts, time budget, …); the seeds of
    factor i's search start at ``seed + 1000·i``; ``escape``: the escape sweeps after the
    alternation (``_escape``).

    Cost: each attribute's subproblem reads only the n_i×n_i matrix ``Σ_b c_b G_{b,i}`` (the
    blocks' distinct Grams formed once), and the traces ``t_{b,i}`` of a new factor come from
    one ``(A_iᵀA_i)⁻¹`` (``gram_inverse``: Woodbury for p-Identity factors) shared by every
    block; the alternating sweeps after the first search each factor only from its current
    optimum (``WARM_POLISH_ITERS`` iterations)."""
    t0 = time.perf_counter()
    opts = dict(one_d or {})
    d = len(P.sizes)
    blocks = P.blocks
    kinds = [[_kind(b.factors[i]) for b in blocks] for i in range(d)]
    fixed = [_fixed_factor(kinds[i], P.sizes[i]) for i in range(d)]
    grams = [_shared_grams(blocks, i) for i in range(d)]
    w2 = np.array([b.weight ** 2 for b in blocks])
    if len(blocks) == 1:
        ks = _per_factor(P, grams, w2, fixed, seed=seed, opts=opts)
        return KronStrategy(ks.factors, ks.value, 1, ks.history, ks.searches,
                            time.perf_counter() - t0, ks.init)
    if sum(F is None for F in fixed) <= 1:
        ks = _one_free_factor(P, grams, w2, fixed, seed=seed, opts=opts)
        return KronStrategy(ks.factors, ks.value, 1, ks.history, ks.searches,
                            time.perf_counter() - t0, ks.init)
    tried = [_alternate(P, grams, w2, fixed, init, sweeps=sweeps, tol=tol, seed=seed, opts=opts)
             for init in ("identity", "normalised sum")]
    best = min(tried, key=lambda ks: ks.value)  # the first on a tie
    if escape:
        best = _escape(P, grams, w2, fixed, best, seed=seed, opts=opts)
    return KronStrategy(best.factors, best.value, best.sweeps, best.history, best.searches,
                        time.perf_counter() - t0, best.init)


#: Iterations of L-BFGS-B a warm-started alternating step may take (the factor moves little
#: between sweeps; the sweeps, not one step, converge the product).
WARM_POLISH_ITERS = 300


def _start_factors(P: ProductWorkload, fixed: list[np.ndarray | None]) -> list[np.ndarray]:
    return [F if F is not None else np.eye(P.sizes[i]) for i, F in enumerate(fixed)]


def _trace_table(grams: list[list[np.ndarray]], factors: Sequence[np.ndarray],
                 thetas: Sequence[np.ndarray | None]) -> np.ndarray:
    """``T[b, i] = t_{b,i} = tr(G_{b,i} (A_iᵀA_i)⁺)`` (one inverse per attribute)."""
    cols = [_traces(grams[i], gram_inverse(F, th)) for i, (F, th) in enumerate(zip(factors, thetas, strict=True))]
    return np.array(cols, dtype=np.float64).T


#: Extra rows tried by an escape step (module docstring of ``_escape``), as fractions n/q.
ESCAPE_ROWS = (16, 8)
#: Escape sweeps at most (each one re-searches every free factor).
ESCAPE_SWEEPS = 3


def _escape(P: ProductWorkload, grams: list[list[np.ndarray]], w2: np.ndarray,
            fixed: list[np.ndarray | None], ks: KronStrategy, *, seed: int, opts: dict,
            tol: float = 1e-7) -> KronStrategy:
    """Leave the alternation's basin: a warm-started step keeps each factor's number of extra
    rows p, so a coordinate-wise optimum can sit at the wrong p. Each escape sweep searches
    every free factor afresh against the others (``G̃_i``) at HDMM's p = n/16 and at n/8
    (no trees, seeds ``seed + 1000·i + 500 + sweep``), and keeps a factor only when f
    decreases; at most :data:`ESCAPE_SWEEPS` sweeps, until one gains less than ``tol``
    relative. (HDMM's SF1 persons under ε = 1: 7.3607 → 7.2947, HDMM's own 7.3063.)"""
    d = len(P.sizes)
    factors = list(ks.factors)
    searches = list(ks.searches)
    thetas = [s.theta if s is not None and factors[i] is s.A else None
              for i, s in enumerate(searches)]
    T = _trace_table(grams, factors, thetas)

    def objective(M: np.ndarray) -> float:
        return float(np.sum(w2 * np.prod(M, axis=1)))

    history = list(ks.history)
    start = objective(T)
    for sweep in range(ESCAPE_SWEEPS):
        before = objective(T)
        for i in range(d):
            if fixed[i] is not None:
                continue
            n = P.sizes[i]
            G = _weighted_gram(np.prod(np.delete(T, i, axis=1), axis=1) * w2, grams[i])
            k_i = max(b.factors[i].shape[0] for b in P.blocks)
            for p in sorted({max(1, n // q) for q in ESCAPE_ROWS}):
                res = optimize_p_identity(G, k_i, seed=seed + 1000 * i + 500 + sweep,
                                          **{**opts, "p_values": [p], "trees": False})
                trial = T.copy()
                trial[:, i] = _traces(grams[i], gram_inverse(res.A, res.theta))
                if objective(trial) < objective(T):
                    T = trial
                    factors[i], thetas[i], searches[i] = res.A, res.theta, res
        history.append(objective(T))
        if before - history[-1] <= tol * before:
            break
    if not objective(T) < start:
        return ks
    return KronStrategy(tuple(factors), objective(T), ks.sweeps, tuple(history), tuple(searches),
                        0.0, ks.init + " + escape")


def _alike(grams: Sequence[np.ndarray]) -> np.ndarray:
    """``Σ_b G_b / tr G_b``: every block weighted alike."""
    return _weighted_gram(np.array([1.0 / max(float(np.trace(g)), 1e-300) for g in grams]), grams)


def _per_factor(P: ProductWorkload, grams: list[list[np.ndarray]], w2: np.ndarray,
                fixed: list[np.ndarray | None], *, seed: int, opts: dict) -> KronStrategy:
    """One block: every free factor optimised on its own, once per distinct Gram matrix."""
    d = len(P.sizes)
    factors = _start_factors(P, fixed)
    thetas: list[np.ndarray | None] = [None] * d
    searches: list[PIdentityResult | None] = [None] * d
    start = float(w2[0] * np.prod(_trace_table(grams, factors, thetas)[0]))
    cache: dict[str, PIdentityResult] = {}
    for i in range(d):
        if fixed[i] is not None:
            continue
        key = _key(grams[i][0])
        if key not in cache:
            cache[key] = optimize_p_identity(grams[i][0], P.blocks[0].factors[i].shape[0],
                                             seed=seed + 1000 * i, **opts)
        searches[i] = cache[key]
        factors[i], thetas[i] = cache[key].A, cache[key].theta
    value = float(w2[0] * np.prod(_trace_table(grams, factors, thetas)[0]))
    return KronStrategy(tuple(factors), value, 1, (start, value), tuple(searches), 0.0)


def _one_free_factor(P: ProductWorkload, grams: list[list[np.ndarray]], w2: np.ndarray,
                     fixed: list[np.ndarray | None], *, seed: int, opts: dict) -> KronStrategy:
    """Several blocks, at most one free factor i: the other factors are fixed, so
    ``f = tr(G̃_i (A_iᵀA_i)⁻¹)`` with ``G̃_i = Σ_b w_b² (Π_{i'≠i} t_{b,i'}) G_{b,i}`` exactly
    (module docstring) — one search (seeds from ``seed + 1000·i``) warm-started from the
    optimum for the blocks weighted alike (``Σ_b G_{b,i} / tr G_{b,i}``, seeds from
    ``seed + 1000·i + 50``), where alternating from those two initialisations solved the
    same problem in two more sweeps each."""
    d = len(P.sizes)
    factors = _start_factors(P, fixed)
    thetas: list[np.ndarray | None] = [None] * d
    searches: list[PIdentityResult | None] = [None] * d
    T = _trace_table(grams, factors, thetas)
    start = float(np.sum(w2 * np.prod(T, axis=1)))
    free = [i for i in range(d) if fixed[i] is None]
    for i in free:
        others = np.prod(np.delete(T, i, axis=1), axis=1) * w2
        G = _weighted_gram(others, grams[i])
        k_i = max(b.factors[i].shape[0] for b in P.blocks)
        # the blocks weighted alike (each Gram at unit trace) lead to other local optima:
        # that problem's optimum is a warm start of the exact one
        alike = optimize_p_identity(_alike(grams[i]), k_i, seed=seed + 1000 * i + 50, **opts)
        res = optimize_p_identity(G, k_i, seed=seed + 1000 * i, warm_starts=[alike.theta], **opts)
        factors[i], thetas[i], searches[i] = res.A, res.theta, res
        T[:, i] = _traces(grams[i], gram_inverse(res.A, res.theta))
    value = float(np.sum(w2 * np.prod(T, axis=1)))
    return KronStrategy(tuple(factors), value, 1, (start, value), tuple(searches), 0.0,
                        "one free factor" if free else "fixed factors")


def _alternate(P: ProductWorkload, grams: list[list[np.ndarray]], w2: np.ndarray,
               fixed: list[np.ndarray | None], init: str, *, sweeps: int, tol: float, seed: int,
               opts: dict) -> KronStrategy:
    """Block coordinate descent over the factors from ``init``: ``"identity"`` (every free
    factor I; the first sweep searches from scratch) or ``"normalised sum"`` (factor i starts at
    the p-Identity optimum for ``Σ_b G_{b,i} / tr G_{b,i}``, every block weighted alike).
    A step from a current p-Identity factor runs only that warm start, for at most
    ``WARM_POLISH_ITERS`` iterations."""
    d = len(P.sizes)
    blocks = P.blocks
    factors = _start_factors(P, fixed)
    thetas: list[np.ndarray | None] = [None] * d
    searches: list[PIdentityResult | None] = [None] * d
    if init == "normalised sum":
        for i in range(d):
            if fixed[i] is not None:
                continue
            res = optimize_p_identity(_alike(grams[i]), max(b.factors[i].shape[0] for b in blocks),
                                      seed=seed + 1000 * i + 50, **opts)
            factors[i], thetas[i], searches[i] = res.A, res.theta, res
    T = _trace_table(grams, factors, thetas)

    def objective(M: np.ndarray) -> float:
        return float(np.sum(w2 * np.prod(M, axis=1)))

    history = [objective(T)]
    done = 0
    for sweep in range(sweeps):
        done = sweep + 1
        before = objective(T)
        for i in range(d):
            if fixed[i] is not None:
                continue
            others = np.prod(np.delete(T, i, axis=1), axis=1) * w2
            G = _weighted_gram(others, grams[i])
            k_i = max(b.factors[i].shape[0] for b in blocks)
            run = dict(opts)
            theta_i = thetas[i]
            if theta_i is not None:  # from the current factor, no fresh restarts
                run.update(restarts=0, trees=False, polish_top=1,
                           stage1_iters=min(run.get("stage1_iters", 100), WARM_POLISH_ITERS),
                           polish_iters=min(run.get("polish_iters", 1500), WARM_POLISH_ITERS))
            res = optimize_p_identity(G, k_i, seed=seed + 1000 * i + 100 * (sweep + 1),
                                      warm_starts=[] if theta_i is None else [theta_i], **run)
            trial = T.copy()
            trial[:, i] = _traces(grams[i], gram_inverse(res.A, res.theta))
            if objective(trial) <= objective(T):
                T = trial
                factors[i], thetas[i], searches[i] = res.A, res.theta, res
        history.append(objective(T))
        if before - history[-1] <= tol * before:
            break
    return KronStrategy(tuple(factors), history[-1], done, tuple(history), tuple(searches), 0.0, init)


def optimize_union(P: ProductWorkload, *, seed: int = 0, one_d: dict | None = None) -> UnionStrategy:
    """One Kronecker strategy per workload block, weighted ``α_b ∝ v_b^{1/3}`` (module
    docstring); ``value = (Σ_b v_b^{1/3})³`` for the block-by-block reconstruction."""
    t0 = time.perf_counter()
    terms = []
    values = []
    for b, block in enumerate(P.blocks):
        single = ProductWorkload(P.sizes, (block,))
        ks = optimize_kron(single, seed=seed + 100_000 * b, one_d=one_d)
        terms.append(ks.factors)
        values.append(ks.value)
    v = np.array(values)
    cube = np.cbrt(v)
    weights = cube / cube.sum()
    return UnionStrategy(tuple(float(w) for w in weights), tuple(terms), float(cube.sum() ** 3),
                         tuple(float(x) for x in v), time.perf_counter() - t0)
