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
* seeded random starts Θ ~ U(0, 1)^{p×n} for p in ``p_values`` (powers of two up to p_max),
  ``restarts`` seeds each; the seeds are recorded in the result.

Every start gets ``stage1_iters`` L-BFGS-B iterations; the best ``polish_top`` are continued
(``optimizer.multistart``). The objective is ``f = ‖A‖₁² tr(G (AᵀA)⁻¹)`` of
``p_identity.PIdentityObjective``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from factorize.planner.strategies import tree_strategy

from .optimizer import MultiStartResult, Start, lbfgsb, multistart
from .p_identity import PIdentityObjective, p_identity_strategy, theta_from_strategy

__all__ = ["PIdentityResult", "optimize_p_identity", "default_p_max", "tree_starts",
           "DEFAULT_WORK_BUDGET"]

#: Default work budget of one OPT_0 search: multiply-adds of its O(p n²) products.
DEFAULT_WORK_BUDGET = 2e10


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


def default_p_max(n: int) -> int:
    """Largest number of extra rows of the random starts by default: ``max(4, n/16)``
    (HDMM's choice, n/16); trees may have up to twice as many internal nodes."""
    return max(4, n // 16)


def tree_starts(n: int, p_max: int, obj: PIdentityObjective | None = None,
                weight_iters: int = 40) -> list[Start]:
    """The b-ary trees (b = 2, 4, 8, … < n) with at most ``p_max`` internal nodes, as
    p-Identity starts: Θ = internal nodes (0/1), weighted per level and then per node by
    ``weight_iters`` L-BFGS-B steps each on ``obj`` when it is given."""
    out = []
    b = 2
    while b < n:
        A = tree_strategy(n, b)
        internal = A[: A.shape[0] - n]  # the leaf level (single cells) comes last
        if 0 < internal.shape[0] <= p_max:
            T = internal if obj is None else _weighted_tree(obj, internal, weight_iters)
            out.append(Start(f"tree b={b}", T, None, internal.shape[0]))
        b *= 2
    return out


def _weighted_tree(obj: PIdentityObjective, M: np.ndarray, iters: int) -> np.ndarray:
    """``diag(w)·M`` with w optimised per level (rows of equal width), then per node; the
    gradient is ``∇_w = rowsum(∇_Θ f ⊙ M)`` (chain rule through ``Θ = diag(w) M``)."""
    level = np.unique(M.sum(axis=1), return_inverse=True)[1]
    L = int(level.max()) + 1

    def by_level(w: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = obj.value_and_grad((w[level][:, None] * M).ravel())
        return f, np.bincount(level, weights=(g.reshape(M.shape) * M).sum(axis=1), minlength=L)

    def by_node(w: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = obj.value_and_grad((w[:, None] * M).ravel())
        return f, (g.reshape(M.shape) * M).sum(axis=1)

    w, _, _ = lbfgsb(by_level, np.ones(L), maxiter=iters)
    w, _, _ = lbfgsb(by_node, w[level], maxiter=iters)
    return w[:, None] * M


def optimize_p_identity(G: np.ndarray, k: int, *, p_values: Sequence[int] | None = None,
                        p_max: int | None = None, restarts: int = 2, seed: int = 0,
                        trees: bool = True, init_strategies: Sequence[np.ndarray] = (),
                        warm_starts: Sequence[np.ndarray] = (), tree_weight_iters: int = 40,
                        stage1_iters: int = 100,
                        polish_top: int = 2, polish_iters: int = 1500,
                        work_budget: float | None = DEFAULT_WORK_BUDGET,
                        time_budget: float | None = None) -> PIdentityResult:
    """Minimise ``‖A‖₁² tr(G (AᵀA)⁻¹)`` over p-Identity strategies (module docstring).

    ``G``: n×n Gram matrix ``WᵀW`` (any positive weighting of query rows allowed); ``k``:
    number of queries (for the RMSE). ``seed``: base seed; random start i uses ``seed + i``.
    ``warm_starts``: Θ matrices to start from as they are (e.g. the previous solution in an
    alternating scheme), run before everything else.

    ``work_budget``: multiply-adds of the ``p·n²`` products the first stage and the polish
    may spend (deterministic, see ``optimizer.multistart``; the default 2·10¹⁰ is about 8 s
    single-threaded here for n = 1024, and never binds below n ≈ 256; the weighting of the
    tree starts, a fixed number of steps, is not counted); ``time_budget``: an optional
    wall-clock cap in seconds (it makes the result depend on the machine).
    """
    t0 = time.perf_counter()
    obj = PIdentityObjective(G, k)
    n = obj.n
    p_max = default_p_max(n) if p_max is None else int(p_max)
    if p_values is None:
        p_values = [1 << i for i in range(0, 64) if (1 << i) <= p_max]
    starts: list[Start] = [Start(f"warm start {i}", np.asarray(T, dtype=np.float64), None,
                                 np.asarray(T).shape[0]) for i, T in enumerate(warm_starts)]
    starts.append(Start("identity", np.zeros((1, n)), None, 1))
    if trees:
        starts.extend(tree_starts(n, 2 * p_max, obj, tree_weight_iters))
    for i, M in enumerate(init_strategies):
        T = theta_from_strategy(M)
        starts.append(Start(f"given strategy {i}", T, None, T.shape[0]))
    index = 0
    for _ in range(int(restarts)):
        for p in p_values:
            s = seed + index
            index += 1
            starts.append(Start(f"random p={p}", np.random.default_rng(s).random((int(p), n)), s,
                                int(p)))
    flat = [Start(s.label, s.x0.ravel(), s.seed, s.key) for s in starts]
    left = None if time_budget is None else max(0.0, time_budget - (time.perf_counter() - t0))
    search = multistart(lambda st: obj.value_and_grad, flat, stage1_iters=stage1_iters,
                        polish_top=polish_top, polish_iters=polish_iters,
                        work_budget=work_budget, cost=lambda st: float(max(st.key, 1)) * n * n,
                        time_budget=left)
    theta = search.best.x.reshape(-1, n)
    return PIdentityResult(theta, search.value, int(k), search, time.perf_counter() - t0)
