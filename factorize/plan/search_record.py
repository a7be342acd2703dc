"""The strategy search's record in a plan (``provenance.strategy_search``, written by
``factorize.families.search``): its objective, re-checks and display. Executor side: imports
no planner.

Checks (``verify``): the chosen family is the plan's own, its stated score is the plan's own
error under the objective (re-derived by the claims check from the strategy and the noise),
and no other family tried is stated better — a runner-up's score would need its plan, so it is
only checked no better. A plan that states no search (an explicit ``--strategy``) has nothing
to check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from factorize.numerics import is_number

from .check_record import same_number

#: A later family replaces an earlier one only when its score is lower by more than this
#: relative amount: every plan's noise is calibrated on a lattice whose rounding inflates its
#: sensitivity by up to 10⁻³ (``plan.rules.choose_grid``), so two equal strategies may score
#: up to that apart — equal optima found by two routes keep the first (dense over union,
#: residual over a shared Kronecker product of the same value). The verifier accepts a
#: runner-up stated better by at most this much (the search's own tie rule).
TIE = 2e-3

#: The score of each objective: the plan's per-query RMSE (γ_F) or its worst query's standard
#: deviation (γ₂), both from ``expected_error``.
OBJECTIVE = {"gamma_f": "rmse", "gamma_2": "per_query_std_max"}


def score(plan: Any, norm: str) -> float:
    """The plan's error under the objective of ``norm``."""
    return float(plan.expected_error[OBJECTIVE[norm]])


def search_problems(record: Any, family: str, norm: str, expected_error: Mapping[str, Any]) -> list[str]:
    """What is wrong with a stated search record (module docstring); ``expected_error`` the
    re-derived one."""
    if record is None:
        return []
    if not isinstance(record, dict):
        return ["strategy_search must be a table"]
    problems = []
    if record.get("objective") != OBJECTIVE.get(norm):
        problems.append(f"strategy_search.objective {record.get('objective')!r} is not the "
                        f"plan's ({OBJECTIVE.get(norm)})")
    if record.get("chosen") != family:
        problems.append(f"strategy_search chose {record.get('chosen')!r}, the plan is {family}")
    mine = float(expected_error[OBJECTIVE.get(norm, "rmse")])
    tried = record.get("tried")
    if not isinstance(tried, list) or not all(isinstance(r, dict) for r in tried):
        return problems + ["strategy_search.tried must be a list of families"]
    own = [r for r in tried if r.get("family") == family]
    if len(own) != 1 or not (is_number(own[0].get("score")) and same_number(own[0]["score"], mine)):
        problems.append(f"strategy_search states the chosen family's score as "
                        f"{own[0].get('score') if own else None!r}, the plan's is {mine:.10g}")
    for r in tried:
        v = r.get("score")
        if r.get("family") != family and v is not None and not (
                is_number(v) and v >= mine * (1.0 - TIE) * (1.0 - 1e-9)):
            problems.append(f"strategy_search states {r.get('family')!r} better ({v!r}) than the "
                            f"chosen {mine:.6g} by more than the search's tie rule ({TIE:g})")
    return problems


def search_lines(record: Any) -> list[str]:
    """``inspect``'s table of the search: each family tried with its score and seconds (or why
    it failed), each family that did not apply and why."""
    if not isinstance(record, dict):
        return []
    out = [f"search      every family that applies, by {record.get('objective')} "
           f"(seed {record.get('seed')}); chosen {record.get('chosen')}, re-checked"]
    for r in record.get("tried") or []:
        s = r.get("score")
        val = f"{s:.6g}" if isinstance(s, (int, float)) and math.isfinite(s) else \
            f"failed: {str(r.get('failed'))[:90]}"
        out.append(f"  {str(r.get('family')):<17}{val:<14}{float(r.get('seconds') or 0.0):8.2f} s")
    for r in record.get("not_applicable") or []:
        out.append(f"  {str(r.get('family')):<17}n/a: {str(r.get('why'))[:110]}")
    return out
