"""What every builder parses first (:func:`plan_inputs`): the workload, the guarantee (checked
against the policy), the neighbouring relation and the domain, checked against each other."""

from __future__ import annotations

from typing import Any

from workloads import Domain, Workload, parse_workload

from .errors import PlanError
from .rules import default_domain


def plan_inputs(workload: Workload | str, guarantee: Any, relation: str, domain: Domain | None,
                allow_weak_guarantee: bool) -> tuple[Workload, Any, Any, Domain]:
    """A plan's public inputs, checked: the workload (with a spec to rebuild it from), the
    guarantee within the documented ceilings (``privacy.policy``), the neighbouring relation,
    and a domain of N cells whose attributes line up with the workload's axes."""
    from factorize.privacy import Neighbouring, parse_guarantee
    from factorize.privacy.policy import check_guarantee
    from workloads.domain import check_workload_axes

    W = parse_workload(workload) if isinstance(workload, str) else workload
    if not W.spec:
        raise PlanError("the workload needs a spec (the plan rebuilds W from it)")
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    check_guarantee(g, allow_weak=allow_weak_guarantee)
    rel = Neighbouring.parse(relation)
    N = W.shape[1]
    dom = domain if domain is not None else default_domain(W)
    if dom.size != N:
        raise PlanError(f"the workload has N={N} cells but the domain "
                        f"({', '.join(f'{a}={s}' for a, s in zip(dom.attributes, dom.sizes, strict=True))}) has "
                        f"{dom.size}")
    check_workload_axes(W, dom)
    return W, g, rel, dom
