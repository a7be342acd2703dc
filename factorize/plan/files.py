"""What every plan file shares: the container, its integrity checks and the manifest basics.

Every plan kind (``factorize.kinds``) is one ``factorize.io.container`` file (safetensors: an
8-byte length, a JSON header, raw little-endian float64 buffers — nothing in it can execute
on load) with a JSON manifest naming its ``format`` and ``schema_version``. The rules here are
the same for all of them:

* **integrity** (:func:`read_plan_container`): the container's own checks (bounded header,
  strict JSON, array digests, contiguous offsets, file size), the header byte-for-byte in the
  writer's canonical form, and ``content_sha256`` — the SHA-256 of the canonical JSON of every
  manifest field but the container keys — so any corruption (a flipped byte, truncation,
  appended data) is refused. Digests detect corruption and accidental edits, not a deliberate
  forger: each kind's verifier re-derives what privacy depends on.
* **compatibility** (:data:`COMPATIBILITY`): a reader refuses an unknown format or schema
  version; within a version fields are only added, never removed or changed in meaning.
* **manifest basics** (:func:`workload_and_domain`): the workload's spec, fingerprint and shape
  ``[k, N]``, a domain of distinct attribute names and positive sizes with ``Π sizes = N``;
  custom workload matrices travel inside the file (``plan.embedded``).
* **typed values** (:func:`typed_values`): the domain, neighbouring relation, guarantee and
  noise spec parsed into ``workloads.Domain``, ``privacy.Neighbouring``, ``privacy.Guarantee``
  and ``privacy.NoiseSpec`` — plans hold these, never their JSON.
* **typed records** (:func:`require_record`): every other section a plan holds — workload,
  certificate, expected error, bias, decoder, randomizer, provenance, … — as its ``TypedDict``
  of ``plan.records``, with every required key present and every key the record declares of
  its JSON type; a missing or mistyped key is a :class:`PlanFormatError` naming it.

* **one read** (:func:`read_plan_bytes`): a release reads its plan file once, into memory
  (a regular file of at most :data:`MAX_PLAN_BYTES`), and derives the kind, loads, verifies
  and hashes those bytes (:class:`PlanBytes`): every reader here accepts them in place of a
  path, so a file replaced between two reads can never be verified in one version and run or
  charged in another.

Every failure is a :class:`PlanFormatError` (:func:`guarded_load`), never anything else.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import UnionType
from typing import Any, NamedTuple, TypeVar, Union, cast, get_args, get_origin, get_type_hints, is_typeddict

import numpy as np

from factorize.io import container
from factorize.numerics import is_int, is_number, is_positive_number

from .errors import PlanError
from .records import WorkloadRecord

COMPATIBILITY = ("readers refuse unknown formats and schema versions; within a schema version "
                 "fields are only added, never removed or changed in meaning; unknown fields "
                 "are ignored")
_CONTAINER_KEYS = ("format", "schema_version", "arrays", "content_sha256")


class PlanFormatError(PlanError):
    """The plan file is missing, truncated, corrupt, tampered with, or of an unknown version."""


#: Largest plan file :func:`read_plan_bytes` reads: the container's own bounds (the 8-byte
#: length, a header of at most ``MAX_HEADER_BYTES``, at most ``MAX_TOTAL_BYTES`` of arrays).
MAX_PLAN_BYTES = 8 + container.MAX_HEADER_BYTES + container.MAX_TOTAL_BYTES


@dataclass(frozen=True)
class PlanBytes:
    """A plan file read once (:func:`read_plan_bytes`): ``data``, its bytes, and ``name``, the
    path it was read from — used in messages only, never opened again. Every plan reader
    (:func:`plan_header`, :func:`read_plan_container`, each kind's ``load``) accepts one in
    place of a path; :attr:`sha256` is the digest of exactly these bytes."""

    name: str
    data: bytes = field(repr=False)

    def __str__(self) -> str:
        return self.name

    @property
    def sha256(self) -> str:
        """SHA-256 of :attr:`data` (hex)."""
        return hashlib.sha256(self.data).hexdigest()



def read_plan_bytes(path: str | os.PathLike[str], *, limit: int = MAX_PLAN_BYTES) -> PlanBytes:
    """Read the plan file at ``path`` once: one ``open`` (non-blocking: a FIFO in the plan's
    place is refused, not waited on), a regular file of at most ``limit`` bytes (checked on
    the open file, and again on what was read: a file growing while it is read is refused,
    never truncated). :class:`PlanFormatError` otherwise."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise PlanFormatError(f"{name}: no such file") from None
    except OSError as exc:
        raise PlanFormatError(f"{name}: cannot read the plan file "
                              f"({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PlanFormatError(f"{name}: not a valid plan file (not a regular file)")
        if st.st_size > limit:
            raise PlanFormatError(f"{name}: the plan file has {st.st_size} bytes, more than the "
                                  f"limit of {limit}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise PlanFormatError(f"{name}: cannot read the plan file "
                              f"({exc.strerror or type(exc).__name__})") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise PlanFormatError(f"{name}: the plan file grew past the limit of {limit} bytes while "
                              "it was read")
    return PlanBytes(name, data)


def _bytes_of(source: Any) -> bytes | None:
    """The bytes of a :class:`PlanBytes` (None for a path: the reader opens it)."""
    return source.data if isinstance(source, PlanBytes) else None


def content_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the manifest without the container keys."""
    body = {k: v for k, v in manifest.items() if k not in _CONTAINER_KEYS}
    text = json.dumps(body, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_plan_container(path: str | Path, fmt: str, version: int, manifest: dict[str, Any],
                         arrays: dict[str, np.ndarray]) -> None:
    """Write a plan file atomically (compatibility note and content digest added)."""
    manifest["compatibility"] = COMPATIBILITY
    manifest["content_sha256"] = content_digest(manifest)
    container.write(path, fmt, version, manifest, arrays)


#: A plan whose domain carries a value schema (``docs/schema.md``: raw values → codes) is
#: written this many schema versions above its kind's, so that a reader from before schemas
#: refuses it rather than read raw values as codes; a reader of this version accepts both,
#: and requires the schema exactly when the version says so.
SCHEMA_BUMP = 1
#: A plan made for per-table weights or targets (``plan.table_targets``: it measures D·W and
#: its release returns W's answers, D⁻¹ times D·W's) is written this many versions higher
#: still, so that a reader from before targets — which would release D·W's answers as W's —
#: refuses it, with or without a value schema.
TARGETS_BUMP = 2


def plan_version(version: int, manifest: dict[str, Any]) -> int:
    """The schema version a plan of a kind at ``version`` is written at (:data:`SCHEMA_BUMP`
    for a value schema, :data:`TARGETS_BUMP` for per-table targets, both added)."""
    dom, wl = manifest.get("domain"), manifest.get("workload")
    bump = SCHEMA_BUMP if isinstance(dom, dict) and "schema" in dom else 0
    if isinstance(wl, dict) and "table_targets" in wl:
        bump += TARGETS_BUMP
    return version + bump


def read_plan_container(path: Path | PlanBytes, fmt: str, version: int
                        ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``container.read`` (format, version ≤ ``version`` — one more for a plan carrying a value
    schema, :data:`SCHEMA_BUMP` —, array list, digests), the canonical header and the manifest
    digest — the checks every plan format shares. ``path``: a file, or the bytes of one
    (:class:`PlanBytes`: nothing is opened)."""
    try:
        manifest, arrays, head = container.read_with_header(
            str(path), fmt, version + SCHEMA_BUMP + TARGETS_BUMP, data=_bytes_of(path))
    except container.ContainerError as exc:
        raise PlanFormatError(str(exc)) from None
    check_canonical_header(path, head)
    if manifest.get("content_sha256") != content_digest(manifest):
        raise PlanFormatError(f"{path}: the manifest fails its SHA-256 check (tampered or corrupt)")
    stated = manifest.get("schema_version")
    expected = plan_version(version, manifest)
    if (not isinstance(stated, int) or stated > version or expected != version) and stated != expected:
        raise PlanFormatError(
            f"{path}: schema_version {stated} disagrees with the plan's contents, whose schema "
            f"version is {expected} (the kind's {version}, +{SCHEMA_BUMP} with a domain value schema, "
            f"+{TARGETS_BUMP} with per-table targets)")
    return manifest, arrays


def check_plan_kind(path: Path | PlanBytes, m: dict[str, Any], name: str) -> None:
    """A kind's reader refuses a manifest whose ``plan_kind`` names another kind; one that
    states none is a file written before every writer stated it (``factorize.kinds``: the
    legacy rule), read by the kind of its format, which ``read_plan_container`` checked."""
    stated = m.get("plan_kind")
    if stated is not None and stated != name:
        raise PlanFormatError(f"{path}: a {stated!r} plan, not a {name} plan")


def check_canonical_header(path: Path | PlanBytes, head: container.Header | None = None) -> None:
    """The header must be the writer's compact JSON followed by < 8 padding spaces.

    ``head``: the validated header the arrays were read with (``container.read_with_header``);
    read here (bounded) when not given."""
    if head is None:
        try:
            head = container.read_header(str(path), data=_bytes_of(path))
        except container.ContainerError as exc:
            raise PlanFormatError(str(exc)) from None
    body = head.raw.rstrip(b" ")
    if len(head.raw) - len(body) > 7:
        raise PlanFormatError(f"{path}: the header has unexpected padding")
    canon = json.dumps(head.header, separators=(",", ":"), ensure_ascii=False).encode()
    if canon != body:
        raise PlanFormatError(f"{path}: the header is not in canonical form (corrupt or edited)")
    end = max((t.end for t in head.tensors), default=0)
    if head.file_size != head.data_start + end:
        raise PlanFormatError(f"{path}: the file has {head.file_size} bytes, its header "
                              f"describes {head.data_start + end} (truncated or data appended)")


def guarded_load(loader: Callable[[Any], Any], path: str | Path | PlanBytes, what: str) -> Any:
    """``loader(path)``, every failure but PlanFormatError turned into one (a
    :class:`PlanBytes` is passed on as it is: the loader reads those bytes)."""
    try:
        return loader(path if isinstance(path, PlanBytes) else Path(path))
    except PlanFormatError:
        raise
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except RecursionError:
        raise PlanFormatError(f"{path}: not a valid {what} file (nested too deeply)") from None
    except BaseException as exc:  # noqa: BLE001 — includes pyo3 panics from a corrupt header
        raise PlanFormatError(f"{path}: not a valid {what} file ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None


def plan_header(path: str | Path | PlanBytes) -> dict[str, Any]:
    """The manifest of a plan file (or of its bytes, :class:`PlanBytes`) from its bounded
    header alone (no array data is read, no unbounded or deeply nested JSON is parsed)."""
    try:
        head = container.read_header(str(path), data=_bytes_of(path))
        manifest = container.parse_manifest(str(path), head.header)
    except container.ContainerError as exc:
        raise PlanFormatError(f"{path}: not a valid plan file ({exc})") from None
    if not isinstance(manifest, dict):
        raise PlanFormatError(f"{path}: not a valid plan file (the manifest is not a JSON object)")
    return manifest


def plan_format(path: str | Path) -> str:
    """The ``format`` named in a plan file's header (:func:`plan_header`)."""
    return str(plan_header(path).get("format"))


def check_finite(path: Path, arrays: dict[str, np.ndarray]) -> None:
    for name, a in arrays.items():
        if not np.isfinite(a).all():
            raise PlanFormatError(f"{path}: array {name!r} has non-finite entries")


def require_dict(m: dict[str, Any], key: str) -> dict[str, Any]:
    v = m.get(key)
    if not isinstance(v, dict):
        raise PlanFormatError(f"plan manifest: {key!r} is missing or not an object")
    return v


#: A record of ``plan.records`` (a ``TypedDict``).
R = TypeVar("R")


def require_record(path: Path | PlanBytes, m: dict[str, Any], key: str, record: type[R]) -> R:
    """The manifest's object ``key`` as the typed ``record`` (``plan.records``): every required
    key present and every key the record declares of its JSON type (:func:`record_problem`);
    keys it does not declare are ignored (:data:`COMPATIBILITY`). A :class:`PlanFormatError`
    naming the key otherwise — the one check of a plan section's keys, for every reader."""
    value = m.get(key)
    if not isinstance(value, dict):
        raise PlanFormatError(f"{path}: the manifest's {key!r} is missing or not an object")
    problem = record_problem(value, record, key)
    if problem is not None:
        raise PlanFormatError(f"{path}: {problem}")
    return cast(R, value)


def optional_record(path: Path | PlanBytes, m: dict[str, Any], key: str, record: type[R]) -> R:
    """:func:`require_record` for a section a plan may leave out (``provenance``: ``{}`` when it
    is missing or not an object, as before records were typed); one it states is checked."""
    if not isinstance(m.get(key), dict):
        return cast(R, {})
    return require_record(path, m, key, record)


def record_problem(value: dict[str, Any], record: Any, where: str) -> str | None:
    """What keeps the JSON object ``value`` from being the ``TypedDict`` ``record`` (None:
    nothing): a required key missing, or a declared key whose value is not of its type —
    ``float`` any JSON number, ``int`` a JSON integer, ``X | None`` also null, ``list[X]`` /
    ``dict[str, X]`` element by element, a nested record recursively, ``Any`` anything."""
    hints = get_type_hints(record)
    for key in sorted(record.__required_keys__):
        if key not in value:
            return f"{where}.{key} is missing (required: {_json_type_name(hints[key])})"
    for key, annotation in hints.items():
        if key in value:
            problem = _json_type_problem(value[key], annotation, f"{where}.{key}")
            if problem is not None:
                return problem
    return None


def _json_type_problem(value: Any, annotation: Any, where: str) -> str | None:
    """:func:`record_problem` for one value against one annotation."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return None
    if origin in (Union, UnionType):
        problems = [_json_type_problem(value, a, where) for a in args]
        if None in problems:
            return None
        # an object or list of the arm that takes one: what is wrong inside it
        inner = [p for a, p in zip(args, problems, strict=True) if _container(a) is type(value)]
        if len(inner) == 1:
            return inner[0]
    elif is_typeddict(annotation):
        if isinstance(value, dict):
            return record_problem(value, annotation, where)
    elif origin is list:
        if isinstance(value, list):
            return next((p for i, v in enumerate(value)
                         if (p := _json_type_problem(v, args[0], f"{where}[{i}]")) is not None), None)
    elif origin is dict:
        if isinstance(value, dict):
            return next((p for k, v in value.items()
                         if (p := _json_type_problem(v, args[1], f"{where}.{k}")) is not None), None)
    elif _JSON_SCALARS[annotation](value):
        return None
    return f"{where} must be {_json_type_name(annotation)}, not {str(value)[:80]!r}"


#: The JSON scalar each scalar annotation of a record stands for.
_JSON_SCALARS: dict[Any, Callable[[Any], bool]] = {
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
    int: is_int,
    float: is_number,
    type(None): lambda v: v is None,
}


def _container(annotation: Any) -> type | None:
    """``dict`` or ``list`` for an annotation of a JSON object or list, else None."""
    if is_typeddict(annotation) or get_origin(annotation) is dict:
        return dict
    return list if get_origin(annotation) is list else None


def _json_type_name(annotation: Any) -> str:
    """The JSON type an annotation stands for, in words (for messages)."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return " or ".join(_json_type_name(a) for a in get_args(annotation))
    if origin is list:
        return "a list"
    if origin is dict or is_typeddict(annotation):
        return "an object"
    return {str: "a string", bool: "true or false", int: "an integer", float: "a number",
            type(None): "null"}.get(annotation, "a value")


def json_int(value: Any) -> int | None:
    """``value`` when it is a JSON integer (:func:`~factorize.numerics.is_int`: an int, never
    a bool), else None — a manifest field typed for the checks that follow."""
    return value if is_int(value) else None


def json_number(value: Any) -> float | None:
    """``value`` when it is a finite JSON number (:func:`~factorize.numerics.is_number`: an
    int or float, never a bool), else None."""
    return value if is_number(value) else None


def workload_and_domain(path: Path, m: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """The manifest's workload shape [k, N] (its record, spec and fingerprint checked:
    ``records.WorkloadRecord``) and its domain, checked: distinct attribute names, positive
    sizes, Π sizes = N."""
    shape = require_record(path, m, "workload", WorkloadRecord)["shape"]
    if not (len(shape) == 2 and all(x >= 1 for x in shape)):
        raise PlanFormatError(f"{path}: workload shape must be [k, N]")
    dom = require_dict(m, "domain")
    attrs, sizes = dom.get("attributes"), dom.get("sizes")
    if not (isinstance(attrs, list) and isinstance(sizes, list) and len(attrs) == len(sizes) >= 1
            and all(isinstance(a, str) and a for a in attrs) and len(set(attrs)) == len(attrs)
            and all(is_int(s) and s >= 1 for s in sizes)):
        raise PlanFormatError(f"{path}: the domain must list distinct attribute names and positive sizes")
    if math.prod(sizes) != shape[1]:
        raise PlanFormatError(f"{path}: the domain has {math.prod(sizes)} cells, the workload N={shape[1]}")
    return shape, dom


def embedded_for(embedded: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Manifest listing and arrays of a plan's custom matrices (``plan.embedded``)."""
    from .embedded import embedded_arrays

    return embedded_arrays(embedded)


def embedded_from(path: Path, m: dict[str, Any], arrays: dict[str, np.ndarray]
                  ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Split off and rebuild the custom matrices a plan carries (``plan.embedded``)."""
    from .embedded import read_embedded, split_arrays

    own, emb = split_arrays(arrays)
    wl = m.get("workload")
    listing = wl.get("embedded") if isinstance(wl, dict) else None
    try:
        return own, read_embedded(listing, emb)
    except PlanError as exc:
        raise PlanFormatError(f"{path}: {exc}") from None


def save_with_embedded(path: str | Path, fmt: str, version: int, manifest: dict[str, Any],
                       arrays: dict[str, np.ndarray], embedded: dict[str, Any]) -> None:
    """Write a plan whose workload may carry custom matrices (listed in ``workload.embedded``)."""
    listing, emb = embedded_for(embedded)
    manifest["workload"]["embedded"] = listing
    write_plan_container(path, fmt, plan_version(version, manifest), manifest, {**arrays, **emb})


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _domain_schema(dom: dict[str, Any]) -> Any:
    """The domain's public schema (``docs/schema.md``), if the manifest carries one: plans
    written before schemas existed have none (their records are codes)."""
    if "schema" not in dom:
        return None
    from workloads.schema import DomainSchema

    return DomainSchema.from_dict(dom["schema"], source="the plan's domain schema")


class ManifestValues(NamedTuple):
    """The typed values of a plan manifest (:func:`typed_values`)."""

    domain: Any        # workloads.Domain
    relation: Any      # privacy.Neighbouring, or None for a kind without one
    guarantee: Any     # privacy.Guarantee
    noise: Any         # privacy.NoiseSpec, or None for a kind without one


def typed_values(path: Path, m: dict[str, Any], *, relation: bool = True,
                 noise: bool = True) -> ManifestValues:
    """Parse the manifest's ``domain``, ``neighbouring``, ``guarantee`` and ``noise`` into typed
    values (:class:`ManifestValues`); anything the types refuse is a :class:`PlanFormatError`.

    The noise section must state a finite positive ``scale``, ``sensitivity`` and
    ``base_sensitivity``; its fields that ``NoiseSpec`` does not know (annotations such as
    ``sensitivity_exact`` and ``warning``, or fields a later writer adds) are ignored, per
    :data:`COMPATIBILITY`.
    """
    from factorize.privacy import Neighbouring, NoiseSpec, guarantee_from_dict
    from workloads import Domain

    _, dom = workload_and_domain(path, m)
    if relation and m.get("neighbouring") not in ("add_remove", "replace"):
        raise PlanFormatError(f"{path}: unknown neighbouring relation {m.get('neighbouring')!r}")
    spec = None
    if noise:
        nz = require_dict(m, "noise")
        for key in ("scale", "sensitivity", "base_sensitivity"):
            if not is_positive_number(nz.get(key)):
                raise PlanFormatError(f"{path}: noise {key} must be a finite positive number")
    try:
        domain = Domain(dom["attributes"], dom["sizes"], _domain_schema(dom))
        rel = Neighbouring.parse(m["neighbouring"]) if relation else None
        guarantee = guarantee_from_dict(require_dict(m, "guarantee"))
        if noise:
            known = NoiseSpec.__dataclass_fields__
            spec = NoiseSpec.from_dict({k: v for k, v in nz.items() if k in known})
    except PlanFormatError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise PlanFormatError(f"{path}: {exc}") from None
    return ManifestValues(domain, rel, guarantee, spec)


#: The three plan file formats: each kind's reader checks its own (``factorize.kinds``
#: dispatches on ``plan_kind``, by the format only for files that state none).
FORMAT = "factorize-plan"
PROJECTION_FORMAT = "factorize-projection-plan"
LOCAL_FORMAT = "factorize-local-plan"
