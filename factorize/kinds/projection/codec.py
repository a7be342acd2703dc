"""The projection plan file (``format: "factorize-projection-plan"``): the container and
integrity rules every plan shares (``plan.files``), the projection's own sections and arrays
(``T`` for ``jl``; none for the moment mechanisms)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factorize.plan.files import (
    PROJECTION_FORMAT,
    PlanBytes,
    PlanFormatError,
    check_finite,
    check_plan_kind,
    embedded_from,
    guarded_load,
    json_int,
    optional_record,
    read_plan_container,
    require_record,
    save_with_embedded,
    typed_values,
    workload_and_domain,
)
from factorize.plan.records import (
    DecoderRecord,
    ProjectionBounds,
    ProjectionExpectedError,
    Provenance,
    WorkloadRecord,
)

#: 2: states ``rmse_bound_95`` and the any-mechanism bound's ``lower_witness``;
#: version-1 files are read and verified with those derived instead.
PROJECTION_SCHEMA_VERSION = 2


def save_projection_plan(plan: Any, path: str | Path) -> None:
    """Write a :class:`~factorize.kinds.projection.plan.ProjectionPlan` atomically."""
    save_with_embedded(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION, plan.manifest(),
                       dict(plan.arrays), plan.embedded)


def load_projection_plan(path: str | Path | PlanBytes) -> Any:
    """Read and structurally check a projection plan; :class:`PlanFormatError` on any problem."""
    return guarded_load(_load_projection, path, "projection plan")


def _load_projection(path: Path) -> Any:
    from .plan import PROJECTION_KINDS, ProjectionPlan

    m, arrays = read_plan_container(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION)
    check_plan_kind(path, m, ProjectionPlan.plan_kind)
    check_finite(path, arrays)
    arrays, embedded = embedded_from(path, m, arrays)
    kind = m.get("kind")
    if kind not in PROJECTION_KINDS:
        raise PlanFormatError(f"{path}: unknown projection mechanism {kind!r}")
    if set(arrays) != ({"T"} if kind == "jl" else set()):
        raise PlanFormatError(f"{path}: the arrays do not match a {kind} plan")
    shape, _ = workload_and_domain(path, m)
    wl = require_record(path, m, "workload", WorkloadRecord)
    if kind == "jl" and (arrays["T"].ndim != 2 or arrays["T"].shape[1] != shape[0]):
        raise PlanFormatError(f"{path}: T must have k={shape[0]} columns")
    if m.get("neighbouring") != "replace":
        raise PlanFormatError(f"{path}: projection plans need replace-one neighbours (public n)")
    n = json_int(m.get("n"))
    if n is None or n < 1:
        raise PlanFormatError(f"{path}: the public dataset size n must be a positive integer")
    values = typed_values(path, m)
    return ProjectionPlan(kind=kind, workload=wl, domain=values.domain, relation=values.relation,
                          guarantee=values.guarantee, n=n, noise=values.noise,
                          decoder=require_record(path, m, "decoder", DecoderRecord),
                          bounds=require_record(path, m, "bounds", ProjectionBounds),
                          expected_error=require_record(path, m, "expected_error", ProjectionExpectedError),
                          arrays=arrays, provenance=optional_record(path, m, "provenance", Provenance),
                          embedded=embedded, schema_version=int(m["schema_version"]))
