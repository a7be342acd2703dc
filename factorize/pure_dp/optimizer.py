"""Multi-start L-BFGS-B on a non-negative parameter vector: deterministic starts from the
workload's structure plus seeded random restarts, a short first stage for every start and a
polish of the best few, keeping the best.

Reference for the approach (gradient-based optimisation of strategy templates with
L-BFGS-B, random restarts): McKenna et al., "Optimizing error of high-dimensional
statistical queries under differential privacy", PVLDB 2018 (its L-BFGS-B strategy
optimisation). The restarts here are reproducible: every random start names the integer
seed of the ``numpy.random.default_rng`` that drew it, and the result records the seeds,
which start won and the runners-up values.

The objectives are non-convex (p-Identity, marginal weights): local optima differ by a few
percent, which is why the structure-derived starts (identity, b-ary trees, coverings) and
the restarts matter more than the local method.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, minimize

from factorize.pure_dp.errors import PureDPError

__all__ = ["Start", "StartOutcome", "MultiStartResult", "lbfgsb", "multistart"]

ValueAndGrad = Callable[[np.ndarray], tuple[float, np.ndarray]]


@dataclass(frozen=True)
class Start:
    """One starting point: ``label`` names how it was built (``"tree b=16"``, ``"random p=8"``),
    ``seed`` is the ``default_rng`` seed that drew it (None for a deterministic start), ``key``
    groups starts that share a problem (e.g. the number of rows p)."""

    label: str
    x0: np.ndarray
    seed: int | None = None
    key: object = None


@dataclass(frozen=True)
class StartOutcome:
    """Where one start ended: objective value, iterations (both stages) and seconds."""

    label: str
    seed: int | None
    value: float
    iterations: int
    seconds: float
    polished: bool
    x: np.ndarray = field(repr=False)
    key: object = None


@dataclass(frozen=True)
class MultiStartResult:
    """The best outcome, every outcome (best first), and the seeds of the random starts."""

    best: StartOutcome
    outcomes: tuple[StartOutcome, ...]
    seeds: tuple[int, ...]
    #: the deterministic budget the search ran under (None: none) and the work it spent, in
    #: the units of ``multistart``'s ``cost`` (work spent before it, e.g. on weighting the
    #: starts, included)
    work_budget: float | None = None
    work_spent: float = 0.0

    @property
    def value(self) -> float:
        return self.best.value

    @property
    def winner(self) -> str:
        """Label of the start that won (with its seed when it was random)."""
        b = self.best
        return b.label if b.seed is None else f"{b.label} (seed {b.seed})"

    @property
    def runners_up(self) -> tuple[float, ...]:
        """Objective values of the other starts, best first."""
        return tuple(o.value for o in self.outcomes[1:])

    def summary(self) -> dict:
        return {"winner": self.winner, "value": self.value, "seeds": list(self.seeds),
                "runners_up": list(self.runners_up), "work_budget": self.work_budget,
                "work_spent": self.work_spent,
                "starts": [{"label": o.label, "seed": o.seed, "value": o.value,
                            "iterations": o.iterations, "seconds": round(o.seconds, 4),
                            "polished": o.polished} for o in self.outcomes]}


def lbfgsb(fun: ValueAndGrad, x0: np.ndarray, *, maxiter: int, ftol: float = 1e-13,
           gtol: float = 1e-11, maxcor: int = 20) -> tuple[np.ndarray, float, int]:
    """``scipy.optimize.minimize(method="L-BFGS-B")`` over ``x ≥ 0``; returns
    ``(x, f(x), iterations)``. A start whose objective is not finite is returned unchanged."""
    x0 = np.maximum(np.asarray(x0, dtype=np.float64), 0.0)
    f0 = fun(x0)[0]
    if not np.isfinite(f0):
        return x0, float("inf"), 0
    if maxiter <= 0:
        return x0, float(f0), 0
    res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=Bounds(0.0, np.inf),
                   options={"maxiter": int(maxiter), "ftol": ftol, "gtol": gtol, "maxcor": maxcor})
    x = np.maximum(res.x, 0.0)
    value = float(fun(x)[0])
    # scipy ≥ 1.17 leaves ``nit`` out of the result when L-BFGS-B stops before its first
    # iteration (a start that already meets the tolerances): zero iterations were taken
    iterations = int(res.get("nit", 0))
    if not np.isfinite(value) or value > f0:  # never worse than where it started
        return x0, float(f0), iterations
    return x, value, iterations


def multistart(fun_for: Callable[[Start], ValueAndGrad], starts: Sequence[Start], *,
               stage1_iters: int = 100, polish_top: int = 2, polish_iters: int = 2000,
               work_budget: float | None = None, cost: Callable[[Start], float] | None = None,
               time_budget: float | None = None, stage1_share: float = 0.4,
               ftol: float = 1e-13, gtol: float = 1e-11, maxcor: int = 20,
               spent: float = 0.0, min_starts: int = 1) -> MultiStartResult:
    """Run every start for ``stage1_iters`` L-BFGS-B iterations, then continue the best
    ``polish_top`` for up to ``polish_iters`` more; return all outcomes, best first.

    ``fun_for(start)`` gives the value-and-gradient function of a start's problem (starts of
    different shapes — different p — share this driver).

    Budgets. ``work_budget`` is counted in the units of ``cost(start)`` per iteration (e.g.
    the multiply-adds of one objective evaluation), so it is *deterministic*: the same inputs
    and seeds give the same iterations on any machine. ``spent``: work already done for this
    search (e.g. weighting the starts), counted against the budget. No new first-stage run
    starts once ``stage1_share`` of the budget is spent, except the first ``min_starts``
    (at least one), which always run: put the deterministic starts first; the rest is shared
    by the starts being polished, with weights 1, 1/2, 1/4, … by rank. ``time_budget``
    (seconds) is an optional wall-clock cap applied the same way (then the result depends on
    the machine's speed).
    """
    if not starts:
        raise PureDPError("multistart needs at least one start")
    cost = cost or (lambda st: 1.0)
    t_begin = time.perf_counter()
    spent = float(spent)
    stage1: list[StartOutcome] = []
    ran: list[Start] = []
    for st in starts:
        over = ((work_budget is not None and spent > stage1_share * work_budget)
                or (time_budget is not None
                    and time.perf_counter() - t_begin > stage1_share * time_budget))
        if over and len(stage1) >= max(min_starts, 1):
            break
        t0 = time.perf_counter()
        x, value, it = lbfgsb(fun_for(st), st.x0, maxiter=stage1_iters, ftol=ftol, gtol=gtol,
                              maxcor=maxcor)
        spent += it * cost(st)
        stage1.append(StartOutcome(st.label, st.seed, value, it, time.perf_counter() - t0,
                                   False, x, len(ran)))
        ran.append(st)
    order = sorted(range(len(stage1)), key=lambda i: stage1[i].value)
    outcomes: list[StartOutcome] = []
    for rank, i in enumerate(order):
        o, st = stage1[i], ran[i]
        if rank >= polish_top or not np.isfinite(o.value) or polish_iters <= 0:
            outcomes.append(_keyed(o, st))
            continue
        # rank r gets weight 2^-r of what is left to the ranks still to polish
        remaining = min(polish_top, len(order)) - rank
        share = 1.0 / (2.0 - 2.0 ** (1 - remaining)) if remaining > 1 else 1.0
        iters = polish_iters
        if work_budget is not None:
            iters = min(iters, int(max(0.0, share * (work_budget - spent) / max(cost(st), 1e-300))))
        if time_budget is not None:
            left = time_budget - (time.perf_counter() - t_begin)
            per_iter = o.seconds / max(o.iterations, 1)
            iters = min(iters, int(max(0.0, share * left / max(per_iter, 1e-9))))
        if iters <= 0 or o.iterations < stage1_iters:  # converged in stage 1 already
            outcomes.append(_keyed(o, st))
            continue
        t0 = time.perf_counter()
        x, value, it = lbfgsb(fun_for(st), o.x, maxiter=iters, ftol=ftol, gtol=gtol, maxcor=maxcor)
        spent += it * cost(st)
        outcomes.append(StartOutcome(o.label, o.seed, value, o.iterations + it,
                                     o.seconds + time.perf_counter() - t0, True, x, st.key))
    outcomes.sort(key=lambda o: o.value)
    seeds = tuple(s.seed for s in ran if s.seed is not None)
    return MultiStartResult(outcomes[0], tuple(outcomes), seeds, work_budget, spent)


def _keyed(o: StartOutcome, st: Start) -> StartOutcome:
    return StartOutcome(o.label, o.seed, o.value, o.iterations, o.seconds, o.polished, o.x, st.key)
