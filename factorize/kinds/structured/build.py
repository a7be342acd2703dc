"""Building a structured plan: one family's (``kinds.structured.build_family``), or the best
of every structured family that applies (the strategy search, ``factorize.families.search``,
whose table the plan records in ``provenance.strategy_search``). The families plan through
``build_family``, which never imports this module or the families: the search sits above
both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from factorize.kinds.structured.build_family import build_family_plan
from factorize.kinds.structured.plan import StructuredPlan
from factorize.plan.errors import PlanError
from workloads import Workload

from .options import StructuredOptions

if TYPE_CHECKING:
    from factorize.privacy import Guarantee


def build(options: StructuredOptions) -> StructuredPlan:
    """The plan of the family ``options.strategy`` (``build_family.build_family_plan``), or,
    with ``strategy=None``, the best plan of the strategy search over every structured family
    (ties and stopping rules: ``families.search``)."""
    from factorize.families import PlanProblem, search
    from factorize.families.registry import FAMILIES
    from factorize.families.registry import family as registered
    from factorize.families.structured_family import StructuredFamilyBase
    from factorize.plan.build_inputs import plan_inputs

    o = options
    if o.strategy is not None:
        fam = registered(o.strategy)
        if not isinstance(fam, StructuredFamilyBase):
            raise PlanError(f"{o.strategy!r} is not a structured strategy family")
        return build_family_plan(o.workload, o.guarantee, strategy=o.strategy, parts=fam.parts,
                                 norm=o.norm, relation=o.relation, domain=o.domain,
                                 noise_family=o.noise_family, gap_tol=o.gap_tol,
                                 allow_weak_guarantee=o.allow_weak_guarantee,
                                 options=o.solver_options, search_seed=o.search_seed, memo=o.memo)
    if o.norm not in ("gamma_f", "gamma_2"):
        raise PlanError(f"structured plans optimise gamma_f or gamma_2, not {o.norm!r}")
    W, g, rel, dom = plan_inputs(o.workload, o.guarantee, o.relation, o.domain, o.allow_weak_guarantee)
    family = o.noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
    if family not in ("gaussian", "laplace"):
        raise PlanError(f"structured plans use exact Gaussian or Laplace noise, not {family!r}")
    problem = PlanProblem(W, g, rel, dom, family, o.norm, options=o.solver_options,
                          gap_tol=o.gap_tol, seed=o.search_seed,
                          allow_weak_guarantee=o.allow_weak_guarantee,
                          memo={} if o.memo is None else o.memo)
    return search(problem, [f for f in FAMILIES if f.kind == "structured"]).plan


def build_structured_plan(workload: Workload | str, guarantee: Guarantee | str,
                          **fields: Any) -> StructuredPlan:
    """``factorize.build_structured_plan``: :func:`build` of ``StructuredOptions(workload=workload,
    guarantee=guarantee, **fields)`` — every other field is an option's name
    (:class:`~factorize.kinds.structured.options.StructuredOptions`)."""
    return build(StructuredOptions(workload=workload, guarantee=guarantee, **fields))
