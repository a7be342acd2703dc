"""Building a structured plan: one family's (``plan.build_structured_family``), or the best of
every structured family that applies (the strategy search, ``factorize.families.search``,
whose table the plan records in ``provenance.strategy_search``). The families plan through
``build_structured_family``, which never imports this module or the families: the search sits
above both."""

from __future__ import annotations

from typing import Any

from factorize.choices import Neighbouring, NoiseFamily, Norm, StructuredFamily
from workloads import Domain, Workload

from .build_structured_family import build_family_plan
from .errors import PlanError
from .structured_plan import StructuredPlan


def build_structured_plan(workload: Workload | str, guarantee: Any, *, norm: Norm = "gamma_f",
                          relation: Neighbouring = "add_remove", domain: Domain | None = None,
                          noise_family: NoiseFamily | None = None,
                          strategy: StructuredFamily | None = None,
                          gap_tol: float = 1e-6, allow_weak_guarantee: bool = False,
                          options: Any = None, search_seed: int = 0,
                          memo: dict[str, Any] | None = None) -> StructuredPlan:
    """The plan of the family ``strategy`` (``build_structured_family.build_family_plan``), or,
    with ``strategy=None``, the best plan of the strategy search over every structured family
    (ties and stopping rules: ``families.search``). ``search_seed``: the base seed of the
    families' random starts (recorded); ``memo``: results one family computes and another
    reuses (the union plan's certificate, the symmetry-reduced bound)."""
    from factorize.families import PlanProblem, search
    from factorize.families.registry import FAMILIES
    from factorize.families.registry import family as registered
    from factorize.families.structured_family import StructuredFamilyBase

    if strategy is not None:
        fam = registered(strategy)
        if not isinstance(fam, StructuredFamilyBase):
            raise PlanError(f"{strategy!r} is not a structured strategy family")
        return build_family_plan(workload, guarantee, strategy=strategy, parts=fam.parts,
                                 norm=norm, relation=relation, domain=domain,
                                 noise_family=noise_family, gap_tol=gap_tol,
                                 allow_weak_guarantee=allow_weak_guarantee, options=options,
                                 search_seed=search_seed, memo=memo)

    from .build import plan_inputs

    if norm not in ("gamma_f", "gamma_2"):
        raise PlanError(f"structured plans optimise gamma_f or gamma_2, not {norm!r}")
    W, g, rel, dom = plan_inputs(workload, guarantee, relation, domain, allow_weak_guarantee)
    family = noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
    if family not in ("gaussian", "laplace"):
        raise PlanError(f"structured plans use exact Gaussian or Laplace noise, not {family!r}")
    problem = PlanProblem(W, g, rel, dom, family, norm, options=options, gap_tol=gap_tol,
                          seed=search_seed, allow_weak_guarantee=allow_weak_guarantee,
                          memo={} if memo is None else memo)
    return search(problem, [f for f in FAMILIES if f.kind == "structured"]).plan
