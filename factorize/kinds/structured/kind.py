"""The structured kind (unions of Kronecker products, marginal plans at any domain size):
``KIND``, its :class:`PlanKind` (``kinds.protocol``) — the plan class and file (``.plan``),
verifier (``.verify``), release halves (``executor.structured``: the block measurements from
the marginal tables, the noisy release) and builder (``.build``, imported only by
:meth:`StructuredKind.build`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorize.kinds.protocol import Measurement, PlanKind
from factorize.plan.files import PlanBytes

from .plan import StructuredPlan

if TYPE_CHECKING:
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee
    from workloads import Workload

    from .options import StructuredOptions


class StructuredKind:
    """Structured plans (module docstring)."""

    name = "structured"
    central = True

    def load(self, source: str | Path | PlanBytes) -> StructuredPlan:
        from .plan import load_structured_plan

        return load_structured_plan(source)

    def save(self, plan: StructuredPlan, path: str | Path) -> None:
        from .plan import save_structured_plan

        save_structured_plan(plan, path)

    def verify(self, plan: StructuredPlan, *, certificate: bool = True,
               allow_weak_guarantee: bool = False, workload: Workload | None = None) -> PlanCheck:
        from .verify import verify_structured_plan

        return verify_structured_plan(plan, certificate=certificate, workload=workload,
                                      allow_weak_guarantee=allow_weak_guarantee)

    def guarantee(self, plan: StructuredPlan) -> Guarantee:
        return plan.guarantee

    def relation(self, plan: StructuredPlan) -> str:
        return plan.relation.key

    def sampler(self, plan: StructuredPlan) -> str:
        return plan.noise.sampler

    def summary(self, plan: StructuredPlan) -> list[str]:
        return plan.summary_lines()

    def measure(self, plan: StructuredPlan, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from factorize.executor.data import load_marginals
        from factorize.executor.structured import measure

        tables = load_marginals(data_path, plan.domain, plan.strategy.supports(),
                                allow_extra_columns=allow_extra_columns, engine=engine)
        return Measurement(measure(plan, tables), int(tables.n_records))

    def release(self, plan: StructuredPlan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        from factorize.executor.structured import release

        return release(plan, check, measurement.values, rng, allow_float_noise=allow_float_noise,
                       metadata=metadata, deadline=deadline)

    def build(self, options: StructuredOptions) -> StructuredPlan:
        from .build import build

        return build(options)


KIND: PlanKind[StructuredPlan, StructuredOptions] = StructuredKind()
