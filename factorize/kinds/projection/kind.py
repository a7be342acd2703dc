"""The projection kind (``jl``, ``covariance``, ``relaxed-projection``): ``KIND``, its
:class:`PlanKind` (``kinds.protocol``) — the plan class (``.plan``), file (``.codec``),
verifier (``.verify``), release halves (``.release``: the exact moments or projection read
with DuckDB, the noisy decoded release) and builder (``.build``, imported only by
:meth:`ProjectionKind.build`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorize.executor.session import ExecutionError
from factorize.kinds.protocol import Measurement, PlanKind
from factorize.plan.files import PlanBytes

from .plan import ProjectionPlan

if TYPE_CHECKING:
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee
    from workloads import Workload

    from .options import ProjectionOptions


class ProjectionKind:
    """Projection plans (module docstring)."""

    name = "projection"
    central = True

    def load(self, source: str | Path | PlanBytes) -> ProjectionPlan:
        from .codec import load_projection_plan

        return load_projection_plan(source)

    def save(self, plan: ProjectionPlan, path: str | Path) -> None:
        from .codec import save_projection_plan

        save_projection_plan(plan, path)

    def verify(self, plan: ProjectionPlan, *, certificate: bool = True,
               allow_weak_guarantee: bool = False, workload: Workload | None = None) -> PlanCheck:
        from .verify import verify_projection_plan  # no certificate: nothing to skip

        return verify_projection_plan(plan, workload=workload,
                                      allow_weak_guarantee=allow_weak_guarantee)

    def guarantee(self, plan: ProjectionPlan) -> Guarantee:
        return plan.guarantee

    def relation(self, plan: ProjectionPlan) -> str:
        return plan.relation.key

    def sampler(self, plan: ProjectionPlan) -> str:
        return plan.noise.sampler

    def summary(self, plan: ProjectionPlan) -> list[str]:
        return plan.summary_lines()

    def measure(self, plan: ProjectionPlan, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from factorize.engines import DataError

        from .release import measure

        if engine != "duckdb":
            raise ExecutionError(f"projection plans read their data with DuckDB; --engine {engine} "
                                 "is supported for factorization and structured plans only")
        values, n = measure(plan, data_path, check.workload, allow_extra_columns=allow_extra_columns)
        if n != plan.n:
            raise DataError(f"the plan's public dataset size is n={plan.n} (replace-one neighbours); "
                            "the data has a different number of records")
        if plan.noise.sampler != "float":
            from factorize.privacy import round_to_grid

            if plan.noise.grid is None:
                raise ExecutionError("an exact sampler needs the plan's lattice grid")
            values = round_to_grid(values, plan.noise.grid)  # exact (integer moments)
        return Measurement(values, n)

    def release(self, plan: ProjectionPlan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        from .release import release_projection

        rel = release_projection(plan, measurement.values, measurement.n_records, rng,
                                 workload=check.workload, allow_float_noise=allow_float_noise,
                                 metadata=metadata, deadline=deadline, claims=check.derived)
        rel.extra["columns"] = ("query", "estimate")  # projected answers carry no per-query CIs
        return rel

    def build(self, options: ProjectionOptions) -> ProjectionPlan:
        from .build import build

        return build(options)


KIND: PlanKind[ProjectionPlan, ProjectionOptions] = ProjectionKind()
