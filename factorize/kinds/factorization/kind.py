"""The factorization kind (dense and Kronecker plans): ``KIND``, its :class:`PlanKind`
(``kinds.protocol``) — the plan class (``.plan``), file (``.codec``), verifier (``.verify``),
release halves (``executor.release``: the lattice measurement of the histogram, the noisy
release) and builder (``.build``, imported only by :meth:`FactorizationKind.build`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.kinds.protocol import Measurement, PlanKind
from factorize.plan.files import PlanBytes

from .plan import Plan

if TYPE_CHECKING:
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee
    from workloads import Workload

    from .options import FactorizationOptions


class FactorizationKind:
    """Dense and Kronecker factorization plans (module docstring)."""

    name = "factorization"
    central = True

    def load(self, source: str | Path | PlanBytes) -> Plan:
        from .codec import load_plan

        return load_plan(source)

    def save(self, plan: Plan, path: str | Path) -> None:
        from .codec import save_plan

        save_plan(plan, path)

    def verify(self, plan: Plan, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Workload | None = None) -> PlanCheck:
        from .verify import verify_plan

        return verify_plan(plan, certificate=certificate, workload=workload,
                           allow_weak_guarantee=allow_weak_guarantee)

    def guarantee(self, plan: Plan) -> Guarantee:
        return plan.guarantee

    def relation(self, plan: Plan) -> str:
        return plan.relation.key

    def sampler(self, plan: Plan) -> str:
        return plan.noise.sampler

    def summary(self, plan: Plan) -> list[str]:
        return plan.summary_lines()

    def measure(self, plan: Plan, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from factorize.executor.data import load_histogram
        from factorize.executor.release import check_public_n, measure

        h = load_histogram(data_path, plan.domain, allow_extra_columns=allow_extra_columns, engine=engine)
        check_public_n(plan, h)
        n = int(h.sum(dtype=np.uint64))
        return Measurement(measure(plan, h), n)

    def release(self, plan: Plan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        from factorize.executor.release import release_dense

        return release_dense(plan, np.zeros(0), rng, allow_float_noise=allow_float_noise,
                             metadata=metadata, check=check, measurement=measurement.values,
                             postprocess_seconds=max(0.0, deadline - time.monotonic()))

    def build(self, options: FactorizationOptions) -> Plan:
        from .build import build

        return build(options)


KIND: PlanKind[Plan, FactorizationOptions] = FactorizationKind()
