"""The plan kinds, registered in one place: the CLI, the verifier, the executor's pipeline and
the reports dispatch through :func:`kind_of_file` / :func:`kind_of_plan`.

A plan kind implements :class:`PlanKind`: how its file is read and written, how it is verified
from first principles, how its summary reads, and the two halves of a release that differ
between mechanisms — the exact measurement from the data (before any budget is charged) and
the noisy release from that measurement (after). Everything else — opening the answers file,
refusing float noise, the ledger, δ < 1/n, writing all or nothing — is the one pipeline of
``executor.pipeline``. A new mechanism adds one :class:`PlanKind` class in ``executor.kinds``,
one line in :data:`KINDS` and one rule in :func:`kind_name` — besides its plan module, its report
and its builder (ARCHITECTURE.md, "What a new plan kind or strategy family touches").

Kinds (file format → kind): ``factorize-plan`` → ``factorization`` (dense / Kronecker factors,
schema 1–2; a schema-3 file without ``plan_kind`` is refused as an unknown version)
or ``structured`` (schema 3, ``plan_kind: "structured"``);
``factorize-projection-plan`` → ``projection``; ``factorize-local-plan`` → ``local``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .files import PlanBytes, PlanFormatError, plan_header, read_plan_bytes

#: kind name → "module:Class" (imported on first use: inspecting a plan imports no solver).
KINDS = {
    "factorization": "factorize.executor.kinds:FactorizationKind",
    "structured": "factorize.executor.kinds:StructuredKind",
    "projection": "factorize.executor.kinds:ProjectionKind",
    "local": "factorize.executor.kinds:LocalKind",
}


@dataclass
class Measurement:
    """The exact, noiseless measurement of a plan on the data (taken before the charge):
    lattice integers, float values or message sums, and the number of records read."""

    values: Any
    n_records: int
    extra: dict[str, Any] = field(default_factory=dict)


class PlanKind(Protocol):
    """What one mechanism contributes (module docstring)."""

    name: str
    #: a central-model release: charged to the ledger, δ < 1/n checked on the data
    central: bool

    def load(self, path: str | Path | PlanBytes) -> Any: ...  # a path, or its bytes read once

    def save(self, plan: Any, path: str | Path) -> None: ...

    def verify(self, plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False,
               workload: Any = None) -> Any: ...

    def guarantee(self, plan: Any) -> Any: ...   # privacy.Guarantee

    def relation(self, plan: Any) -> str: ...     # "add_remove", "replace" or "local"

    def sampler(self, plan: Any) -> str: ...

    def measure(self, plan: Any, check: Any, data_path: str, *, engine: str,
                allow_extra_columns: bool) -> Measurement: ...

    def release(self, plan: Any, check: Any, measurement: Measurement, rng: Any, *,
                allow_float_noise: bool, metadata: dict[str, Any], deadline: float) -> Any: ...


_cache: dict[str, Any] = {}


def kind(name: str) -> PlanKind:
    """The registered kind ``name``."""
    if name not in KINDS:
        raise PlanFormatError(f"unknown plan kind {name!r}")
    if name not in _cache:
        module, cls = KINDS[name].split(":")
        _cache[name] = getattr(importlib.import_module(module), cls)()
    return _cache[name]


def kind_name(manifest: dict[str, Any]) -> str:
    """The kind of a plan file from its manifest (format, schema, ``plan_kind``)."""
    from .files import FORMAT, LOCAL_FORMAT, PROJECTION_FORMAT

    fmt = manifest.get("format")
    if fmt == FORMAT:
        return "structured" if manifest.get("plan_kind") == "structured" else "factorization"
    if fmt == PROJECTION_FORMAT:
        return "projection"
    if fmt == LOCAL_FORMAT:
        return "local"
    raise PlanFormatError(f"not a plan file: unknown format {fmt!r}")


def kind_of_file(path: str | Path | PlanBytes) -> PlanKind:
    """The kind of the plan in ``path`` — a file, or its bytes read once
    (``files.read_plan_bytes``) — from its bounded header only."""
    return kind(kind_name(plan_header(path)))


def kind_of_plan(plan: Any) -> PlanKind:
    """The kind of a loaded plan (its class's ``plan_kind``)."""
    name = getattr(type(plan), "plan_kind", None)
    if name not in KINDS:
        raise PlanFormatError(f"{type(plan).__name__} is not a registered plan kind")
    return kind(name)


def load_any_plan(path: str | Path) -> Any:
    """Any plan, read by its kind (the file read once: the kind and the plan come from the
    same bytes)."""
    source = read_plan_bytes(path)
    return kind_of_file(source).load(source)


def save_any_plan(plan: Any, path: str | Path) -> None:
    """Any plan, written by its kind (atomically)."""
    kind_of_plan(plan).save(plan, path)


def verify_any(plan: Any, **kwargs: Any) -> Any:
    """Any plan's verification (a ``checks.PlanCheck``)."""
    return kind_of_plan(plan).verify(plan, **kwargs)
