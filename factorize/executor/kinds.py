"""The registered plan kinds (``plan.registry``): what each mechanism contributes to the one
pipeline (``executor.pipeline``) — reading its file, verifying it, measuring the data exactly,
and releasing from that measurement."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from factorize.plan.files import PlanBytes
from factorize.plan.registry import Measurement

from .session import ExecutionError


class _Kind:
    """What the kinds share: the guarantee / relation / sampler of a plan (typed values:
    ``privacy.Guarantee``, ``privacy.Neighbouring``, ``privacy.NoiseSpec``). Each kind reads,
    writes and verifies its plans with its own module's functions, imported when called (no
    kind loads another's modules; verifying imports no builder, tests/test_import_contracts.py)."""

    name = ""
    central = True

    def load(self, path: str | Path | PlanBytes) -> Any:
        """The plan in ``path``, or in the bytes of a plan file read once (``PlanBytes``)."""
        raise NotImplementedError(f"plan kind {self.name!r} states no reader")

    def save(self, plan: Any, path: str | Path) -> None:
        raise NotImplementedError(f"plan kind {self.name!r} states no writer")

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any:
        raise NotImplementedError(f"plan kind {self.name!r} states no verifier")

    def guarantee(self, plan: Any) -> Any:
        return plan.guarantee

    def relation(self, plan: Any) -> str:
        return plan.relation.key

    def sampler(self, plan: Any) -> str:
        return plan.noise.sampler


class FactorizationKind(_Kind):
    """Dense and Kronecker factorization plans (``plan.model``, ``executor.release``)."""

    name = "factorization"

    def load(self, path: str | Path | PlanBytes) -> Any:
        from factorize.plan.plan_file import load_plan

        return load_plan(path)

    def save(self, plan: Any, path: str | Path) -> None:
        from factorize.plan.plan_file import save_plan

        save_plan(plan, path)

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any:
        from factorize.plan.checks import verify_plan

        return verify_plan(plan, certificate=certificate, workload=workload,
                           allow_weak_guarantee=allow_weak_guarantee)

    def measure(self, plan: Any, check: Any, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from .data import load_histogram
        from .release import check_public_n, measure

        h = load_histogram(data_path, plan.domain, allow_extra_columns=allow_extra_columns, engine=engine)
        check_public_n(plan, h)
        n = int(h.sum(dtype=np.uint64))
        return Measurement(measure(plan, h), n)

    def release(self, plan: Any, check: Any, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any:
        from .release import release_dense

        return release_dense(plan, np.zeros(0), rng, allow_float_noise=allow_float_noise,
                               metadata=metadata, check=check, measurement=measurement.values,
                               postprocess_seconds=max(0.0, deadline - time.monotonic()))


class StructuredKind(_Kind):
    """Structured plans (``plan.structured_plan``, ``executor.structured``)."""

    name = "structured"

    def load(self, path: str | Path | PlanBytes) -> Any:
        from factorize.plan.structured_plan import load_structured_plan

        return load_structured_plan(path)

    def save(self, plan: Any, path: str | Path) -> None:
        from factorize.plan.structured_plan import save_structured_plan

        save_structured_plan(plan, path)

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any:
        from factorize.plan.structured_checks import verify_structured_plan

        return verify_structured_plan(plan, certificate=certificate, workload=workload,
                                      allow_weak_guarantee=allow_weak_guarantee)

    def measure(self, plan: Any, check: Any, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from .data import load_marginals
        from .structured import measure

        tables = load_marginals(data_path, plan.domain, plan.strategy.supports(),
                                allow_extra_columns=allow_extra_columns, engine=engine)
        return Measurement(measure(plan, tables), int(tables.n_records))

    def release(self, plan: Any, check: Any, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any:
        from .structured import release

        return release(plan, check, measurement.values, rng, allow_float_noise=allow_float_noise,
                       metadata=metadata, deadline=deadline)


class ProjectionKind(_Kind):
    """Projection plans: jl, covariance, relaxed-projection (``executor.projection``)."""

    name = "projection"

    def load(self, path: str | Path | PlanBytes) -> Any:
        from factorize.plan.plan_file import load_projection_plan

        return load_projection_plan(path)

    def save(self, plan: Any, path: str | Path) -> None:
        from factorize.plan.plan_file import save_projection_plan

        save_projection_plan(plan, path)

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any:
        from factorize.plan.projection_checks import verify_projection_plan  # no certificate: nothing to skip

        return verify_projection_plan(plan, workload=workload,
                                      allow_weak_guarantee=allow_weak_guarantee)

    def measure(self, plan: Any, check: Any, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from factorize.engines import DataError

        from .projection import measure

        if engine != "duckdb":
            raise ExecutionError(f"projection plans read their data with DuckDB; --engine {engine} "
                                 "is supported for factorization and structured plans only")
        values, n = measure(plan, data_path, check.workload, allow_extra_columns=allow_extra_columns)
        if n != plan.n:
            raise DataError(f"the plan's public dataset size is n={plan.n} (replace-one neighbours); "
                            "the data has a different number of records")
        if plan.noise.sampler != "float":
            from factorize.privacy import round_to_grid

            values = round_to_grid(values, plan.noise.grid)  # exact (integer moments)
        return Measurement(values, n)

    def release(self, plan: Any, check: Any, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any:
        from .projection import release_projection

        rel = release_projection(plan, measurement.values, measurement.n_records, rng,
                                 workload=check.workload, allow_float_noise=allow_float_noise,
                                 metadata=metadata, deadline=deadline, claims=check.derived)
        rel.extra["columns"] = ("query", "estimate")  # projected answers carry no per-query CIs
        return rel


class LocalKind(_Kind):
    """Local-model plans: the server aggregates already-randomized messages
    (``local.plan``, ``local.protocol``). Not a central release: nothing is charged and no
    noise is drawn here — each message was randomized by its user."""

    name = "local"
    central = False

    def load(self, path: str | Path | PlanBytes) -> Any:
        from factorize.local.plan import load_local_plan

        return load_local_plan(path)

    def save(self, plan: Any, path: str | Path) -> None:
        from factorize.local.plan import save_local_plan

        save_local_plan(plan, path)

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any:
        from factorize.local.plan import verify_local_plan
        from factorize.plan.check_record import PlanCheck

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

    def relation(self, plan: Any) -> str:
        return "local"

    def sampler(self, plan: Any) -> str:
        return "none"  # the server draws no noise

    def measure(self, plan: Any, check: Any, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement:
        from factorize.local.protocol import message_sums

        sums, n, info = message_sums(plan, data_path)
        return Measurement(sums, n, {"messages": info})

    def release(self, plan: Any, check: Any, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any:
        from factorize.local.protocol import aggregate_sums
        from factorize.plan.model import Z_95

        from .linear_release import Release

        rel = aggregate_sums(plan, measurement.values, measurement.n_records)
        info = measurement.extra.get("messages", {})
        test = bool(info.get("test_mode", False))
        k = rel["estimate"].size
        meta = dict(metadata)
        meta.update({"mechanism": "local", "workload": plan.workload["spec"],
                     "workload_fingerprint": plan.workload["fingerprint"],
                     "domain": plan.manifest()["domain"], "guarantee": plan.guarantee.to_dict(),
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

