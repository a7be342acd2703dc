"""The local kind (Edmonds, Nikolov & Ullman 2020, Thm 10): ``KIND``, its :class:`PlanKind`
(``kinds.protocol``) — the plan class, file and verifier (``.plan``), release halves
(``.protocol``: the sums of the users' already-randomized messages, the aggregation) and
builder (``.build``, imported only by :meth:`LocalKind.build`). Not a central release:
nothing is charged and the server draws no noise — each message was randomized by its user."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from factorize.kinds.protocol import Measurement, PlanKind
from factorize.plan.files import PlanBytes

from .plan import LocalPlan

if TYPE_CHECKING:
    from factorize.executor.linear_release import Release
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee
    from workloads import Workload

    from .options import LocalOptions


class LocalKind:
    """Local-model plans (module docstring)."""

    name = "local"
    central = False

    def load(self, source: str | Path | PlanBytes) -> LocalPlan:
        from .plan import load_local_plan

        return load_local_plan(source)

    def save(self, plan: LocalPlan, path: str | Path) -> None:
        from .plan import save_local_plan

        save_local_plan(plan, path)

    def verify(self, plan: LocalPlan, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Workload | None = None) -> PlanCheck:
        """``plan.verify_local_plan``'s failures as a ``PlanCheck`` (the certificate is always
        re-checked: it is what the stated error bounds rest on)."""
        from factorize.plan.check_record import PlanCheck

        from .plan import verify_local_plan

        t0 = time.perf_counter()
        out = PlanCheck(passed=False, checks=[])
        failures = verify_local_plan(plan, workload=workload,
                                     allow_weak_guarantee=allow_weak_guarantee)
        for f in failures:
            name, _, detail = f.partition(": ")
            out.record(name, False, detail or f)
        if not failures:
            out.record("local plan", True, "guarantee, randomizer, unit-ball columns, W ≈ R·A within "
                                           "η, certificate and every stated bound re-derived")
        return out.finish(t0, False)

    def guarantee(self, plan: LocalPlan) -> Guarantee:
        return plan.guarantee

    def relation(self, plan: LocalPlan) -> str:
        return "local"

    def sampler(self, plan: LocalPlan) -> str:
        return "none"  # the server draws no noise

    def summary(self, plan: LocalPlan) -> list[str]:
        return plan.summary_lines()

    def measure(self, plan: LocalPlan, check: PlanCheck, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from .protocol import message_sums

        sums, n, info = message_sums(plan, data_path)
        return Measurement(sums, n, {"messages": info})

    def release(self, plan: LocalPlan, check: PlanCheck, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Release:
        from factorize.executor.linear_release import Release
        from factorize.plan.manifest import Z_95, domain_manifest

        from .protocol import aggregate_sums

        rel = aggregate_sums(plan, measurement.values, measurement.n_records)
        info = measurement.extra.get("messages", {})
        test = bool(info.get("test_mode", False))
        k = rel["estimate"].size
        meta = dict(metadata)
        meta.update({"mechanism": "local", "workload": plan.workload["spec"],
                     "workload_fingerprint": plan.workload["fingerprint"],
                     "domain": domain_manifest(plan.domain), "guarantee": plan.guarantee.to_dict(),
                     "neighbouring": "local (any two records)", "n": rel["n"], "n_queries": k,
                     "noise": {"family": plan.randomizer["kind"], "sampler": "float",
                               "scale": plan.randomizer["scale"], "grid": None},
                     "ci": {"level": 0.95, "method": "normal (CLT over n messages) + bias n·η",
                            "multiplier": Z_95},
                     "bias_bound": rel["bias_bound"], "test_mode": test,
                     "messages_plan_sha256": info.get("plan_sha256")})
        if test:
            meta["warning"] = "NOT PRIVATE: the messages were simulated in --seed test mode"
        return Release(estimate=rel["estimate"], std_error=rel["std_error"], ci_low=rel["ci_low"],
                       ci_high=rel["ci_high"], metadata=meta)

    def build(self, options: LocalOptions) -> LocalPlan:
        from .build import build

        return build(options)


KIND: PlanKind[LocalPlan, LocalOptions] = LocalKind()
