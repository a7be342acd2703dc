"""The plan kinds, registered in one place: the CLI, the verifier, the executor's pipeline and
the reports dispatch through :func:`kind_of_file` / :func:`kind_of_plan`.

Each kind is one package, ``factorize.kinds.<name>``: its plan class (``plan``), file codec
(``codec``), verifier (``verify``), release halves and builder entry (``build``), and the
module ``kind`` that exposes them as ``KIND``, a :class:`~.protocol.PlanKind` (the typed
interface: load, save, verify, guarantee, relation, sampler, summary, measure, release, build).
Shared rules stay in the shared modules (``plan.files``, ``plan.rules``, ``plan.checks``,
``plan.manifest``, ``plan.records``).

The registry, :data:`KINDS`, maps a kind's name to its ``kind`` module, imported on first use:
reading, verifying or running a plan imports that one module — never a builder (the ``kind``
module imports its builder only inside ``build``: tests/test_import_contracts.py) — and no
other kind's modules. A new kind is one package and one line here.

Every writer states ``plan_kind`` in its manifest, and a file's kind is that field alone
(:func:`kind_name`). One legacy rule (:data:`LEGACY_FORMATS`) reads the files written before
every writer stated it: a manifest without ``plan_kind`` takes the kind its ``format`` was
written by — ``factorize-plan`` → ``factorization`` (structured plans always stated theirs),
``factorize-projection-plan`` → ``projection``, ``factorize-local-plan`` → ``local``. Each
kind's reader still checks the file's format and schema version (``plan.files``), so a
``plan_kind`` that contradicts them is refused there.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from factorize.plan.files import PlanBytes, PlanFormatError, plan_header, read_plan_bytes

from .protocol import PlanKind

if TYPE_CHECKING:
    from factorize.plan.check_record import PlanCheck

#: kind name → its ``kind`` module (which exposes ``KIND``); imported on first use.
KINDS: dict[str, str] = {
    "factorization": "factorize.kinds.factorization.kind",
    "structured": "factorize.kinds.structured.kind",
    "projection": "factorize.kinds.projection.kind",
    "local": "factorize.kinds.local.kind",
    "training": "factorize.kinds.training.kind",
}

#: The legacy rule (module docstring): the kind of a file that states no ``plan_kind``, by the
#: format it was written in — only files written before every writer stated it.
LEGACY_FORMATS: dict[str, str] = {
    "factorize-plan": "factorization",
    "factorize-projection-plan": "projection",
    "factorize-local-plan": "local",
}

_loaded: dict[str, PlanKind[Any, Any]] = {}


def kind(name: str) -> PlanKind[Any, Any]:
    """The registered kind ``name`` (its module's ``KIND``, checked to be that kind)."""
    if name not in KINDS:
        raise PlanFormatError(f"unknown plan kind {name!r}; registered: {', '.join(KINDS)}")
    if name not in _loaded:
        found = getattr(importlib.import_module(KINDS[name]), "KIND", None)
        if getattr(found, "name", None) != name:
            raise PlanFormatError(f"{KINDS[name]} does not define the plan kind {name!r} as KIND")
        _loaded[name] = cast("PlanKind[Any, Any]", found)
    return _loaded[name]


def kind_name(manifest: dict[str, Any]) -> str:
    """The kind of a plan file from its manifest: ``plan_kind``, or the legacy rule for a
    file that states none (module docstring)."""
    stated = manifest.get("plan_kind")
    if stated is None:
        fmt = manifest.get("format")
        if not isinstance(fmt, str) or fmt not in LEGACY_FORMATS:
            raise PlanFormatError(f"not a plan file: no plan_kind and an unknown format {fmt!r}")
        return LEGACY_FORMATS[fmt]
    if not isinstance(stated, str) or stated not in KINDS:
        raise PlanFormatError(f"unknown plan kind {stated!r}; registered: {', '.join(KINDS)}")
    return stated


def kind_of_file(path: str | Path | PlanBytes) -> PlanKind[Any, Any]:
    """The kind of the plan in ``path`` — a file, or its bytes read once
    (``plan.files.read_plan_bytes``) — from its bounded header only."""
    return kind(kind_name(plan_header(path)))


def kind_of_plan(plan: object) -> PlanKind[Any, Any]:
    """The kind of a loaded plan (its class's ``plan_kind``)."""
    name = getattr(type(plan), "plan_kind", None)
    if not isinstance(name, str) or name not in KINDS:
        raise PlanFormatError(f"{type(plan).__name__} is not a registered plan kind")
    return kind(name)


def load_plan(path: str | Path) -> Any:
    """Any plan, read by its kind (``factorize.load_plan``; the file read once: the kind and
    the plan come from the same bytes)."""
    source = read_plan_bytes(path)
    return kind_of_file(source).load(source)


def save_plan(plan: object, path: str | Path) -> None:
    """Any plan, written atomically by its kind (``factorize.save_plan``)."""
    kind_of_plan(plan).save(plan, path)


def verify_plan(plan: object, *, certificate: bool = True, allow_weak_guarantee: bool = False,
                workload: Any = None) -> PlanCheck:
    """Any plan's verification, a ``plan.check_record.PlanCheck`` (``factorize.verify_plan``)."""
    return kind_of_plan(plan).verify(plan, certificate=certificate,
                                     allow_weak_guarantee=allow_weak_guarantee, workload=workload)
