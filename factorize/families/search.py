"""One strategy search over every family.

``search(problem)`` asks each registered family (``families.registry``) whether it applies,
plans every one that does, and keeps the plan of least error under the guarantee's own
objective — the plan's stated per-query RMSE for γ_F, its largest per-query standard deviation
for γ₂ (``expected_error``, which the verifier re-derives from the plan's strategy and noise)
— with ties (within :data:`TIE`) going to the earlier family. Under Gaussian noise the
search stops at a plan certified optimal over every strategy (:data:`CERTIFIED_GAP`): the
families after it are recorded as not tried, and why. A family that fails (bad structure,
a solver that fails or stops short of its gap) is recorded with its message and the others
go on — a plan never rests on a failed solve, and when every family failed the search raises
(``SolverError`` when a solver was among the causes, else ``PlanError``). The winner's
``provenance.strategy_search`` records the table: every family tried with its score and
seconds (or why it failed), every family that did not apply and why, the objective and the
base seed. ``plan.search_record`` re-checks it in ``verify`` and prints it in ``inspect``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from factorize.errors import SolverError
from factorize.plan.errors import PlanError
from factorize.plan.search_record import OBJECTIVE, TIE, score

from .base import PlanProblem, StrategyFamily

#: Under Gaussian noise a plan whose certificate's gap is at most this is optimal over every
#: strategy (its lower bound is γ(W)'s, docs/math.md §4.1): the search stops there.
CERTIFIED_GAP = 1e-6


def certified_gap(plan: Any) -> float:
    """The relative gap of the plan's certificate (dense ``bounds``, structured
    ``certificate``); ∞ when it states none."""
    c = getattr(plan, "bounds", None) or getattr(plan, "certificate", None) or {}
    g = c.get("gap") if isinstance(c, dict) else None
    return float(g) if isinstance(g, (int, float)) and g == g else math.inf


@dataclass
class SearchResult:
    plan: Any
    record: dict[str, Any]


def search(problem: PlanProblem, families: Sequence[StrategyFamily] | None = None) -> SearchResult:
    """The best plan of every applicable family (module docstring); ``PlanError`` when none
    applies or every one failed (the reasons listed)."""
    from .registry import FAMILIES

    fams = FAMILIES if families is None else tuple(families)
    tried: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    best: tuple[float, Any, str] | None = None
    failures: list[Exception] = []
    stop: str | None = None
    for fam in fams:
        if stop is not None:
            skipped.append({"family": fam.name, "why": stop})
            continue
        why = fam.applies(problem)
        if why is not None:
            skipped.append({"family": fam.name, "why": why})
            continue
        t = time.perf_counter()
        try:
            plan = fam.plan(problem)
        except (PlanError, ValueError, SolverError) as exc:  # StructureError is a ValueError
            solver = isinstance(exc, SolverError)
            tried.append({"family": fam.name, "kind": fam.kind, "score": None,
                          "seconds": time.perf_counter() - t,
                          "failed": ("solver: " if solver else "") + str(exc)[:240]})
            failures.append(exc)
            continue
        s = score(plan, problem.norm)
        tried.append({"family": fam.name, "kind": fam.kind, "score": s,
                      "seconds": time.perf_counter() - t})
        if best is None or s < best[0] * (1.0 - TIE):
            best = (s, plan, fam.name)
        gap = certified_gap(plan)
        if problem.noise == "gaussian" and best[2] == fam.name and gap <= CERTIFIED_GAP:
            stop = (f"not tried: {fam.name} is certified optimal over every strategy (gap "
                    f"{gap:.2g} ≤ {CERTIFIED_GAP:g})")
    if best is None:
        reasons = [f"{r['family']}: {r['failed']}" for r in tried] + \
                  [f"{r['family']}: {r['why']}" for r in skipped]
        message = "no strategy family could plan this workload — " + "; ".join(reasons)
        if any(isinstance(e, SolverError) for e in failures):
            raise SolverError(message)  # exit 3: a solver failed where nothing else planned
        raise PlanError(message)
    record = {"objective": OBJECTIVE[problem.norm], "chosen": best[2], "seed": int(problem.seed),
              "tried": tried, "not_applicable": skipped}
    plan = replace(best[1], provenance={**best[1].provenance, "strategy_search": record})
    return SearchResult(plan, record)
