"""Marginal-weight strategies for marginal workloads under the Laplace mechanism: OPT_M of
McKenna et al., "Optimizing error of high-dimensional statistical queries under
differential privacy" (PVLDB 2018, its marginals strategy optimiser), computed in the
algebra of attribute subsets of ``factorize.planner.marginal_algebra`` (never an N-column matrix).

The strategy measures the marginal of every candidate subset S with weight ``θ_S ≥ 0``:
``A = [θ_S Q_S]_S``, ``Q_S = ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}``. Every column of Q_S holds one
1, so ``‖A‖_{1→1} = Σ_S θ_S`` (add/remove) and, for two cells differing in every attribute,
``‖a_x − a_y‖₁ = 2 Σ_{S≠∅} θ_S`` (replace). By the algebra (``marginal_algebra`` docstring,
``B_SᵀB_S = w² (N/rows_S) Σ_{T⊆S} P_T``),

    AᵀA = Σ_T x_T P_T,   x_T = N Σ_{S⊇T} θ_S² / rows_S,
    WᵀW = Σ_T λ_T P_T    (``marginal_algebra.gram_eigenvalues``),

so with ``dim_T = rank P_T``

    f(θ) = ‖A‖₁² tr(WᵀW (AᵀA)⁺) = (Σ_S θ_S)² Σ_T dim_T λ_T / x_T,

finite iff x_T > 0 wherever λ_T > 0, and

    ∂f/∂θ_S = 2 (Σθ) Σ_T dim_T λ_T / x_T − (Σθ)² · 2 θ_S (N/rows_S) Σ_{T⊆S} dim_T λ_T / x_T².

f is not convex (it favours few subsets: ``1/(θ_1² + θ_2²)`` on the simplex peaks inside),
and L-BFGS-B from random points stops in poor local optima; the starts here come from the
structure — the identity, the workload's own marginals, greedy *coverings* (random sets of
subsets of sizes between the workload's order and d, each covering still-uncovered workload
marginals, seeded) — and the best local optimum is improved by *chord moves*: the exact
minimum of f along the segment to each vertex ``e_S`` of the simplex (all S at once, on a
grid of step lengths), then L-BFGS-B again, until no chord gains.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from factorize.planner.marginal_algebra import MarginalFamily, gram_eigenvalues
from factorize.pure_dp.errors import PureDPError

from .optimizer import MultiStartResult, Start, lbfgsb, multistart

__all__ = ["MarginalWeightsObjective", "MarginalWeightsResult", "candidate_subsets",
           "optimize_marginal_weights"]

#: All subsets of the attributes of size > 1 are candidates when there are at most this many
#: (and the (S, T ⊆ S) pairs, 3^d, stay below MAX_ALL_PAIRS); else the workload's downward
#: closure and the full set.
MAX_ALL_SUBSETS = 4096
MAX_ALL_PAIRS = 2_000_000


def candidate_subsets(family: MarginalFamily) -> tuple[tuple[int, ...], ...]:
    """Strategy subsets tried (see MAX_ALL_SUBSETS), the full set always included."""
    eff = tuple(j for j, n in enumerate(family.sizes) if n > 1)
    d = len(eff)
    if 2 ** d <= MAX_ALL_SUBSETS and 3 ** d <= MAX_ALL_PAIRS:
        return tuple(S for r in range(d + 1) for S in itertools.combinations(eff, r))
    out = {eff}
    for b in family.distinct_blocks():
        S = tuple(j for j in b.subset if family.sizes[j] > 1)
        for r in range(len(S) + 1):
            out.update(itertools.combinations(S, r))
    return tuple(sorted(out, key=lambda S: (len(S), S)))


@dataclass(frozen=True, eq=False)
class MarginalWeightsObjective:
    """``f(θ) = (Σθ)² Σ_T dim_T λ_T / x_T(θ)`` over the candidate subsets (module docstring),
    all quantities divided by N (``ℓ_T = λ_T/N``, ``x_T/N = Σ_{S⊇T} θ_S²/rows_S``)."""

    family: MarginalFamily
    subsets: tuple[tuple[int, ...], ...]
    #: ``λ_T`` by subset for a workload that is not a marginal family (a union of Kronecker
    #: products, ``structured.subset_algebra.subset_eigenvalues``: the Gram of its average
    #: over value permutations, on which f depends alone), with its query count ``queries``;
    #: ``family`` then only names the workload's attribute sets (the starts and candidates)
    eigenvalues: dict[tuple[int, ...], float] | None = None
    queries: int | None = None
    strategy_family: MarginalFamily = field(init=False, repr=False)
    pair_t: np.ndarray = field(init=False, repr=False)
    pair_s: np.ndarray = field(init=False, repr=False)
    inv_rows: np.ndarray = field(init=False, repr=False)
    load: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fam = self.family
        rows = tuple(math.prod(fam.sizes[j] for j in S) for S in self.subsets)
        sfam = MarginalFamily(sizes=fam.sizes, subsets=self.subsets, rows=rows)
        if len(sfam.distinct_blocks()) != len(self.subsets):
            raise PureDPError("candidate subsets must be distinct")
        inc = sfam.incidence
        N = float(fam.N)
        if self.eigenvalues is None:
            lam = gram_eigenvalues(fam)
            have_masks = set(inc.masks)
            missing = any(float(lam[t]) > 0 and t not in have_masks for t in lam)
            ell = np.array([float(lam.get(m, 0)) / N for m in inc.masks])
        else:
            have = set(inc.subsets)
            missing = any(v > 0 and T not in have for T, v in self.eigenvalues.items())
            ell = np.array([float(self.eigenvalues.get(T, 0.0)) / N for T in inc.subsets])
        if missing:
            raise PureDPError("the candidate subsets do not cover the workload's marginals")
        dims = np.array([float(math.prod(fam.sizes[j] - 1 for j in T)) for T in inc.subsets])
        order = {b.subset: i for i, b in enumerate(inc.blocks)}
        perm = np.array([order[S] for S in self.subsets])  # candidate i ↔ incidence block perm[i]
        inv_perm = np.empty_like(perm)
        inv_perm[perm] = np.arange(len(perm))
        object.__setattr__(self, "strategy_family", sfam)
        object.__setattr__(self, "pair_t", inc.pair_t)
        object.__setattr__(self, "pair_s", inv_perm[inc.pair_s])
        object.__setattr__(self, "inv_rows", np.array([1.0 / r for r in rows]))
        object.__setattr__(self, "load", dims * ell)

    @property
    def size(self) -> int:
        return len(self.subsets)

    @property
    def k(self) -> int:
        return self.family.k if self.queries is None else self.queries

    def coefficients(self, theta: np.ndarray) -> np.ndarray:
        """``x_T / N = Σ_{S⊇T} θ_S² / rows_S`` on the strategy's closure."""
        w = (np.asarray(theta) ** 2 * self.inv_rows)[self.pair_s]
        return np.bincount(self.pair_t, weights=w, minlength=len(self.load))

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        theta = np.asarray(theta, dtype=np.float64)
        x = self.coefficients(theta)
        need = self.load > 0
        if np.any(x[need] <= 0.0):
            return float("inf"), np.zeros_like(theta)
        q = np.zeros_like(x)
        q[need] = self.load[need] / x[need]
        tr = float(q.sum())
        s = float(theta.sum())
        r = np.zeros_like(x)
        r[need] = q[need] / x[need]
        per_s = np.bincount(self.pair_s, weights=r[self.pair_t], minlength=self.size)
        grad = 2.0 * s * tr - s * s * 2.0 * theta * self.inv_rows * per_s
        return s * s * tr, grad

    def value(self, theta: np.ndarray) -> float:
        return self.value_and_grad(theta)[0]

    def rmse(self, theta: np.ndarray) -> float:
        return float(np.sqrt(2.0 * self.value(theta) / self.k))

    def chord_step(self, theta: np.ndarray, grid: int = 64) -> tuple[np.ndarray, float]:
        """The best point ``(1−t)θ̂ + t e_S`` (θ̂ = θ/Σθ) over every candidate S and t on a
        grid of (0, 1); returns θ̂ itself when no such point is better."""
        th = np.asarray(theta, dtype=np.float64) / float(np.sum(theta))
        x = self.coefficients(th)
        need = self.load > 0
        best_val = float(np.sum(self.load[need] / x[need]))
        best = th
        lt = self.load[self.pair_t]
        a = self.inv_rows[self.pair_s]
        ths = th[self.pair_s]
        for t in np.arange(1, grid) / grid:
            base = (1.0 - t) ** 2 * x
            f_base = float(np.sum(self.load[need] / base[need]))
            xb = base[self.pair_t]
            xp = xb + a * (t * t + 2.0 * t * (1.0 - t) * ths)
            with np.errstate(divide="ignore", invalid="ignore"):
                delta = np.where(lt > 0, lt / xp - lt / np.where(xb > 0, xb, np.inf), 0.0)
            vals = f_base + np.bincount(self.pair_s, weights=delta, minlength=self.size)
            j = int(np.argmin(vals))
            if np.isfinite(vals[j]) and vals[j] < best_val * (1.0 - 1e-10):
                best_val = float(vals[j])
                best = (1.0 - t) * th
                best[j] += t
        return best, best_val


@dataclass(frozen=True)
class MarginalWeightsResult:
    """Weights ``θ`` (Σθ = 1) over ``subsets``, the optimizer's f, the search record."""

    subsets: tuple[tuple[int, ...], ...]
    theta: np.ndarray
    value: float
    k: int
    search: MultiStartResult
    chord_rounds: int
    seconds: float
    winner: str = ""

    @property
    def rmse(self) -> float:
        return float(np.sqrt(2.0 * self.value / self.k))

    def support(self, rel: float = 1e-12) -> list[tuple[float, tuple[int, ...]]]:
        """``(weight, subset)`` of the subsets with ``θ_S > rel·max θ``, heaviest first."""
        top = float(self.theta.max())
        out = [(float(w), S) for w, S in zip(self.theta, self.subsets, strict=True) if w > rel * top]
        return sorted(out, key=lambda z: -z[0])


def _greedy_cover(obj: MarginalWeightsObjective, rng: np.random.Generator) -> np.ndarray:
    """A covering start: subsets of random sizes in [order, d] chosen greedily (random ties)
    until every workload marginal lies in one, each with weight 1, 1e-3 elsewhere."""
    fam = obj.family
    eff = [j for j, n in enumerate(fam.sizes) if n > 1]
    d = len(eff)
    wl = {tuple(j for j in b.subset if fam.sizes[j] > 1) for b in fam.distinct_blocks()}
    order = max(len(S) for S in wl)
    lo = int(rng.integers(order, d + 1))
    hi = int(rng.integers(lo, d + 1))
    index = {S: i for i, S in enumerate(obj.subsets)}
    theta = np.full(obj.size, 1e-3)
    uncovered = set(wl)
    while uncovered:
        pick = sorted(uncovered)[int(rng.integers(len(uncovered)))]
        S = set(pick)
        size = int(rng.integers(lo, hi + 1))
        while len(S) < size:
            cand = [j for j in eff if j not in S]
            gains = [sum(1 for U in uncovered if set(U) <= S | {j}) + 0.5 * rng.random() for j in cand]
            S.add(cand[int(np.argmax(gains))])
        key = tuple(sorted(S))
        theta[index[key]] = 1.0
        uncovered = {U for U in uncovered if not set(U) <= S}
    return theta


def optimize_marginal_weights(family: MarginalFamily, *, covers: int = 96, randoms: int = 64,
                              seed: int = 0, chord_rounds: int = 20, stage1_iters: int = 3000,
                              polish_top: int = 3,
                              subsets: tuple[tuple[int, ...], ...] | None = None,
                              eigenvalues: dict[tuple[int, ...], float] | None = None,
                              queries: int | None = None) -> MarginalWeightsResult:
    """Minimise f(θ) (module docstring) from the identity, the workload's marginals, the
    uniform weights, ``covers`` greedy coverings and ``randoms`` U(0,1) points (seeds
    ``seed, seed+1, …``, recorded), then chord moves + L-BFGS-B from the best ``polish_top``
    local optima and from every deterministic start's. ``eigenvalues``, ``queries``: a
    workload that is not a marginal family (:class:`MarginalWeightsObjective`)."""
    t0 = time.perf_counter()
    subsets = candidate_subsets(family) if subsets is None else subsets
    obj = MarginalWeightsObjective(family, subsets, eigenvalues, queries)
    index = {S: i for i, S in enumerate(subsets)}
    full = tuple(j for j, n in enumerate(family.sizes) if n > 1)
    starts: list[Start] = []
    if full in index:  # the full table may be left out of a caller's candidates (too large)
        e = np.zeros(obj.size)
        e[index[full]] = 1.0
        starts.append(Start("identity", e))
    wl = np.zeros(obj.size)
    for b in family.distinct_blocks():
        S = tuple(j for j in b.subset if family.sizes[j] > 1)
        if S in index:
            wl[index[S]] = max(wl[index[S]], b.max_weight)
    if wl.any() and np.isfinite(obj.value(wl)):
        starts.append(Start("workload marginals", wl))
    starts.append(Start("uniform", np.ones(obj.size)))
    s = seed
    all_subsets = len(subsets) == 2 ** len(full)
    for _ in range(covers if all_subsets else 0):
        starts.append(Start("covering", _greedy_cover(obj, np.random.default_rng(s)), s))
        s += 1
    for _ in range(randoms):
        starts.append(Start("random", np.random.default_rng(s).random(obj.size), s))
        s += 1
    search = multistart(lambda st: obj.value_and_grad, starts, stage1_iters=stage1_iters,
                        polish_top=0)
    best_theta, best_val, winner = search.best.x, search.best.value, search.winner
    rounds = 0
    chosen = list(search.outcomes[:max(1, polish_top)])
    chosen += [o for o in search.outcomes[max(1, polish_top):] if o.seed is None]
    for o in chosen:
        if not np.isfinite(o.value):
            continue
        th, val, gained = o.x, o.value, 0
        for _ in range(chord_rounds):
            moved, _ = obj.chord_step(th)
            x, v, _ = lbfgsb(obj.value_and_grad, moved, maxiter=stage1_iters)
            rounds += 1
            if not v < val * (1.0 - 1e-10):
                break
            th, val, gained = x, v, gained + 1
        if val < best_val:
            label = o.label if o.seed is None else f"{o.label} (seed {o.seed})"
            best_theta, best_val = th, val
            winner = f"{label} + {gained} chord move(s)" if gained else label
    theta = best_theta / float(best_theta.sum())
    value = obj.value(theta)
    return MarginalWeightsResult(subsets, theta, value, obj.k, search, rounds,
                                 time.perf_counter() - t0, winner)
