"""Optimised p-Identity strategies for one workload Gram matrix (a 1-D workload, or one
Kronecker factor): OPT_0 of McKenna et al., "Optimizing error of high-dimensional
statistical queries under differential privacy" (PVLDB 2018, the explicit p-Identity
optimiser), with more and better starting points.

Starts, in this order (deterministic ones first, so they always run):

* the identity (p = 1, Θ = 0);
* every b-ary tree (``factorize.planner.strategies.tree_strategy``, b = 2, 4, 8, …) whose internal
  nodes number at most ``2·p_max``: Θ = the internal nodes' rows times weights optimised
  first per level, then per node (a few dozen L-BFGS-B steps on that many parameters, the
  tree's sparsity kept), so the start is at least as good as the tree with uniform weights
  and the optimum is never worse than that tree; weighting first makes a short first stage
  rank the trees as their optima rank (unweighted, b = 32 led b = 16 after 40 steps on
  prefix:1024 and ended 2% worse);
* candidate strategies given by the caller (e.g. the γ_F optimum's rows), through
  ``p_identity.theta_from_strategy``;
* seeded random starts Θ ~ U(0, 1)^{p×n} for p in ``p_values`` (powers of two up to p_max,
  and p_max itself — HDMM's p = n/16: prefix:100 at p = 6 beats every power of two),
  ``restarts`` seeds each (default ``default_restarts(n)``); the seeds are recorded in the
  result.

Every start gets ``stage1_iters`` L-BFGS-B iterations; the best ``polish_top`` are continued
(``optimizer.multistart``). The objective is ``f = ‖A‖₁² tr(G (AᵀA)⁻¹)`` of
``p_identity.PIdentityObjective``.

Work budget (deterministic, scaled to the problem). One iteration on a start of p rows costs
``iteration_cost(p, n) = p·n² + EVAL_OVERHEAD`` units (multiply-adds of the O(p n²)
products, plus a fixed ``EVAL_OVERHEAD`` = 10⁵ for what every evaluation and L-BFGS-B step
costs whatever n: Python, small LAPACK calls, the bound-constrained step). By default a search
may spend

    ``default_work_budget(n, p_max) = min(DEFAULT_WORK_BUDGET,
    max(MIN_ITERATIONS, (p_max·n)² / 8) · iteration_cost(p_max, n))``,

i.e. iterations of the largest random start growing with the square of its number of
parameters P = p_max·n (O(P) iterations per start, and more starts worth running as P
grows), at least 40, capped at 2·10¹⁰ units (which binds from n ≈ 512 on). The tree starts'
weighting is counted against it; the deterministic starts (warm starts, identity, trees,
given strategies) always get their first stage; random restarts run only while less than
40% of the budget is spent, and the polish gets what is left. A tiny factor (n = 5, P = 20)
thus gets about 50 iterations' worth instead of a fixed 6 random starts × 100 iterations +
2 × 1,500 of polish; from n ≈ 32 on (P ≥ 128: 2,048 iterations) the budget is above what
the fixed iteration counts spend, so larger problems search exactly as before. The budget
and the work spent are recorded with the result (``search.summary()``) and in the plan.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from factorize.planner.strategies import tree_strategy

from .optimizer import MultiStartResult, Start, lbfgsb, multistart
from .p_identity import PIdentityObjective, p_identity_strategy, theta_from_strategy

__all__ = ["PIdentityResult", "optimize_p_identity", "default_p_max", "tree_starts",
           "DEFAULT_WORK_BUDGET", "default_work_budget", "iteration_cost"]

#: Largest work budget of one OPT_0 search (units of ``iteration_cost``).
DEFAULT_WORK_BUDGET = 2e10
#: The fixed cost of one evaluation and L-BFGS-B step, in multiply-add units (module docstring).
EVAL_OVERHEAD = 1e5
#: ``default_work_budget``: ``(p_max·n)² / PARAMETERS_SQUARED_PER_ITERATION`` iterations of
#: the largest start, and at least ``MIN_ITERATIONS``.
PARAMETERS_SQUARED_PER_ITERATION = 8
MIN_ITERATIONS = 40


def iteration_cost(p: int, n: int) -> float:
    """Work of one iteration on a start of p rows over n cells: ``p·n² + EVAL_OVERHEAD``."""
    return float(max(int(p), 1)) * n * n + EVAL_OVERHEAD


def default_work_budget(n: int, p_max: int) -> float:
    """``min(DEFAULT_WORK_BUDGET, max(MIN_ITERATIONS, (p_max·n)² / 8) · iteration_cost(p_max, n))``
    (module docstring)."""
    iters = max(MIN_ITERATIONS, (int(p_max) * int(n)) ** 2 / PARAMETERS_SQUARED_PER_ITERATION)
    return float(min(DEFAULT_WORK_BUDGET, iters * iteration_cost(p_max, n)))


@dataclass(frozen=True)
class PIdentityResult:
    """The best p-Identity strategy found: ``theta`` (p × n), the dense strategy ``A``
    (columns of L1 norm 1), the objective ``value = tr(G (AᵀA)⁻¹)`` and the optimizer's
    record (winner, seeds, runners-up)."""

    theta: np.ndarray
    value: float
    k: int
    search: MultiStartResult
    seconds: float

    @property
    def A(self) -> np.ndarray:
        return p_identity_strategy(self.theta, self.theta.shape[1])

    @property
    def rmse(self) -> float:
        """Optimizer's per-query RMSE at ε = 1, ``sqrt(2·value/k)`` (not re-checked)."""
        return float(np.sqrt(2.0 * self.value / self.k))


#: Random restarts per p by default: many on small factors, where each costs little and the
#: landscape has many basins (prefix:128: 6.328 with 2 or 8, 6.293 with 16 — HDMM's 25
#: restarts reach 6.307), 2 from n = 256 on (prefix:256: 20 s, no gain from 8 or 16).
SMALL_FACTOR_RESTARTS = 16
SMALL_FACTOR = 128


def default_restarts(n: int) -> int:
    """Random restarts per p (``optimize_p_identity``'s default): :data:`SMALL_FACTOR_RESTARTS`
    for n ≤ :data:`SMALL_FACTOR`, else 2."""
    return SMALL_FACTOR_RESTARTS if n <= SMALL_FACTOR else 2


def default_p_max(n: int) -> int:
    """Largest number of extra rows of the random starts by default: ``max(4, n/16)``
    (HDMM's choice, n/16); trees may have up to twice as many internal nodes."""
    return max(4, n // 16)


def tree_starts(n: int, p_max: int, obj: PIdentityObjective | None = None,
                weight_iters: int = 40, work: list[float] | None = None) -> list[Start]:
    """The b-ary trees (b = 2, 4, 8, … < n) with at most ``p_max`` internal nodes, as
    p-Identity starts: Θ = internal nodes (0/1), weighted per level and then per node by
    ``weight_iters`` L-BFGS-B steps each on ``obj`` when it is given. ``work``: a one-element
    list the weighting's work (``iteration_cost`` per iteration) is added to."""
    out = []
    b = 2
    while b < n:
        A = tree_strategy(n, b)
        internal = A[: A.shape[0] - n]  # the leaf level (single cells) comes last
        if 0 < internal.shape[0] <= p_max:
            if obj is None:
                T = internal
            else:
                T, it = _weighted_tree(obj, internal, weight_iters)
                if work is not None:
                    work[0] += it * iteration_cost(internal.shape[0], n)
            out.append(Start(f"tree b={b}", T, None, internal.shape[0]))
        b *= 2
    return out


def _weighted_tree(obj: PIdentityObjective, M: np.ndarray, iters: int) -> tuple[np.ndarray, int]:
    """``diag(w)·M`` with w optimised per level (rows of equal width), then per node; the
    gradient is ``∇_w = rowsum(∇_Θ f ⊙ M)`` (chain rule through ``Θ = diag(w) M``). Returns
    the weighted Θ and the iterations taken."""
    level = np.unique(M.sum(axis=1), return_inverse=True)[1]
    L = int(level.max()) + 1

    def by_level(w: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = obj.value_and_grad((w[level][:, None] * M).ravel())
        return f, np.bincount(level, weights=(g.reshape(M.shape) * M).sum(axis=1), minlength=L)

    def by_node(w: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = obj.value_and_grad((w[:, None] * M).ravel())
        return f, (g.reshape(M.shape) * M).sum(axis=1)

    w, _, it1 = lbfgsb(by_level, np.ones(L), maxiter=iters)
    w, _, it2 = lbfgsb(by_node, w[level], maxiter=iters)
    return w[:, None] * M, it1 + it2


def optimize_p_identity(G: np.ndarray, k: int, *, p_values: Sequence[int] | None = None,
                        p_max: int | None = None, restarts: int | None = None, seed: int = 0,
                        trees: bool = True, init_strategies: Sequence[np.ndarray] = (),
                        warm_starts: Sequence[np.ndarray] = (), tree_weight_iters: int = 40,
                        stage1_iters: int = 100,
                        polish_top: int = 2, polish_iters: int = 1500,
                        work_budget: float | None | Literal["auto"] = "auto",
                        time_budget: float | None = None) -> PIdentityResult:
    """Minimise ``‖A‖₁² tr(G (AᵀA)⁻¹)`` over p-Identity strategies (module docstring).

    ``G``: n×n Gram matrix ``WᵀW`` (any positive weighting of query rows allowed); ``k``:
    number of queries (for the RMSE). ``seed``: base seed; random start i uses ``seed + i``.
    ``warm_starts``: Θ matrices to start from as they are (e.g. the previous solution in an
    alternating scheme), run before everything else.

    ``work_budget``: units of ``iteration_cost`` the tree weighting, the first stage and the
    polish may spend (deterministic, see ``optimizer.multistart``); ``"auto"`` (default):
    ``default_work_budget(n, p_max)`` (module docstring; its cap 2·10¹⁰ is about 8 s
    single-threaded here for n = 1024); None: no budget. ``time_budget``: an optional
    wall-clock cap in seconds (it makes the result depend on the machine).
    """
    t0 = time.perf_counter()
    obj = PIdentityObjective(G, k)
    n = obj.n
    p_max = default_p_max(n) if p_max is None else int(p_max)
    if work_budget == "auto":
        work_budget = default_work_budget(n, p_max)
    if p_values is None:
        p_values = sorted({1 << i for i in range(0, 64) if (1 << i) <= p_max} | {p_max})
    starts: list[Start] = [Start(f"warm start {i}", np.asarray(T, dtype=np.float64), None,
                                 np.asarray(T).shape[0]) for i, T in enumerate(warm_starts)]
    starts.append(Start("identity", np.zeros((1, n)), None, 1))
    work = [0.0]
    if trees:
        starts.extend(tree_starts(n, 2 * p_max, obj, tree_weight_iters, work))
    for i, M in enumerate(init_strategies):
        T = theta_from_strategy(M)
        starts.append(Start(f"given strategy {i}", T, None, T.shape[0]))
    deterministic = len(starts)
    index = 0
    for _ in range(default_restarts(n) if restarts is None else int(restarts)):
        for p in p_values:
            s = seed + index
            index += 1
            starts.append(Start(f"random p={p}", np.random.default_rng(s).random((int(p), n)), s,
                                int(p)))
    flat = [Start(s.label, s.x0.ravel(), s.seed, s.key) for s in starts]
    left = None if time_budget is None else max(0.0, time_budget - (time.perf_counter() - t0))
    search = multistart(lambda st: obj.value_and_grad, flat, stage1_iters=stage1_iters,
                        polish_top=polish_top, polish_iters=polish_iters,
                        work_budget=work_budget, cost=lambda st: iteration_cost(st.x0.size // n, n),
                        time_budget=left, spent=work[0], min_starts=deterministic)
    theta = search.best.x.reshape(-1, n)
    return PIdentityResult(theta, search.value, int(k), search, time.perf_counter() - t0)
