"""The ``.plan`` file: one self-contained, non-executable file per mechanism plan.

Format (a ``factorize.io.container`` file, i.e. safetensors: an 8-byte length, a JSON
header, raw little-endian float64 buffers — nothing in it can execute on load):

* arrays (names shared with result files, ``factorize.io.certificate_arrays``): ``R.i`` and
  ``A.i`` per Kronecker factor (one pair when dense) and the dual witness (``q.i``; ``p.i``
  and ``q.i``; or ``U`` and ``d``), each listed in the manifest with its shape and SHA-256;
* the JSON manifest (``format: "factorize-plan"``, ``schema_version``): ``workload`` (spec,
  fingerprint, shape), ``domain`` (attributes, sizes, order), ``neighbouring``, ``guarantee``,
  ``factorization`` (norm, η, factor shapes), ``certificate`` (upper, lower, gap, residual),
  ``noise`` (family, scale, sensitivity and its norm, relation, sampler, grid, dim, base
  sensitivity, accounting), ``postprocess``, ``expected_error``, ``provenance``, and
  ``content_sha256`` — the SHA-256 of the canonical JSON of every other manifest field.

Compatibility policy (``COMPATIBILITY``): a reader refuses a format other than
``factorize-plan`` and any ``schema_version`` it does not know (currently 1 and 2). Within a
schema version fields are only ever *added*, never removed or changed in meaning; a reader
ignores fields it does not know. A change of meaning gets a new schema version. Version 2
(issue 13): the noise is calibrated to the sensitivity of the *measured* strategy
(``privacy.lattice``: A truncated to 53 bits, a certified upper bound), the intervals carry
the reconstruction bias (``bias`` and the ``nbound.*`` weights), custom workload matrices
travel inside the file (``workload.embedded``). A version-1 plan is read and verified by the
version-2 rules: it runs when its noise covers the certified sensitivity, with its bias bounded
by the record cap.

Integrity: the reader checks every array digest, the manifest's ``content_sha256``, and that
the header is exactly the canonical (compact) JSON the writer produces, so any corruption —
a flipped byte anywhere, truncation, appended data — is refused. (Digests detect corruption
and accidental edits; they are not a signature against a deliberate forger, which is why
``checks.verify_plan`` re-derives everything privacy depends on from the arrays.)

:func:`load_plan` raises :class:`PlanFormatError` for every unreadable, corrupt, tampered or
inconsistent file and never anything else.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from factorize.io import container
from factorize.io.certificate_arrays import (certificate_arrays, certificate_from_arrays,
                                             expected_array_names)

from .model import KNOWN_SAMPLERS, POSTPROCESS_METHODS, Plan, PlanError

FORMAT = "factorize-plan"
SCHEMA_VERSION = 2
COMPATIBILITY = ("readers refuse unknown formats and schema versions; within a schema version "
                 "fields are only added, never removed or changed in meaning; unknown fields "
                 "are ignored")
_CONTAINER_KEYS = ("format", "schema_version", "arrays", "content_sha256")


class PlanFormatError(PlanError):
    """The plan file is missing, truncated, corrupt, tampered with, or of an unknown version."""


def content_digest(manifest: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of the manifest without the container keys."""
    body = {k: v for k, v in manifest.items() if k not in _CONTAINER_KEYS}
    text = json.dumps(body, sort_keys=True, allow_nan=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def save_plan(plan: Plan, path: str | Path) -> None:
    """Write ``plan`` to ``path`` atomically (temporary file + ``os.replace``)."""
    arrays = certificate_arrays(plan.certificate)
    arrays.update({f"{N_WEIGHTS}.{i}": b for i, b in enumerate(plan.n_weights)})
    manifest = plan.manifest()
    listing, emb = _embedded_for(plan.embedded)
    arrays.update(emb)
    manifest["workload"]["embedded"] = listing
    _write(path, FORMAT, SCHEMA_VERSION, manifest, arrays)


#: Array name prefix of the n-bound weights b_j (``plan.bias``).
N_WEIGHTS = "nbound"


def _embedded_for(embedded: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Manifest listing and arrays of a plan's custom matrices (``plan.embedded``)."""
    from .embedded import embedded_arrays

    return embedded_arrays(embedded)


def _write(path: str | Path, fmt: str, version: int, manifest: dict[str, Any],
           arrays: dict[str, np.ndarray]) -> None:
    manifest["compatibility"] = COMPATIBILITY
    manifest["content_sha256"] = content_digest(manifest)
    container.write(path, fmt, version, manifest, arrays)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def load_plan(path: str | Path) -> Plan:
    """Read and structurally check a plan file (see the module docstring)."""
    return _guarded_load(_load, path, "plan")


def _guarded_load(loader: Any, path: str | Path, what: str) -> Any:
    """``loader(path)``, every failure but PlanFormatError turned into one."""
    try:
        return loader(Path(path))
    except PlanFormatError:
        raise
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except RecursionError:
        raise PlanFormatError(f"{path}: not a valid {what} file (nested too deeply)") from None
    except BaseException as exc:  # noqa: BLE001 — includes pyo3 panics from a corrupt header
        raise PlanFormatError(f"{path}: not a valid {what} file ({type(exc).__name__}: "
                              f"{str(exc)[:200]})") from None


def _read(path: Path, fmt: str = FORMAT, version: int = SCHEMA_VERSION
          ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``container.read`` (format, version, array list, digests), the canonical header and the
    manifest digest — the checks every plan format shares — as ``PlanFormatError``."""
    try:
        manifest, arrays, head = container.read_with_header(path, fmt, version)
    except container.ContainerError as exc:
        raise PlanFormatError(str(exc)) from None
    _check_canonical_header(path, head)
    if manifest.get("content_sha256") != content_digest(manifest):
        raise PlanFormatError(f"{path}: the manifest fails its SHA-256 check (tampered or corrupt)")
    return manifest, arrays


def _check_finite(path: Path, arrays: dict[str, np.ndarray]) -> None:
    for name, a in arrays.items():
        if not np.isfinite(a).all():
            raise PlanFormatError(f"{path}: array {name!r} has non-finite entries")


def _load(path: Path) -> Plan:
    m, arrays = _read(path)
    _check_finite(path, arrays)
    arrays, embedded = _embedded_from(path, m, arrays)
    weights = {k: v for k, v in arrays.items() if k.startswith(N_WEIGHTS + ".")}
    arrays = {k: v for k, v in arrays.items() if k not in weights}
    fz = _dict(m, "factorization")
    norm, d = fz.get("norm"), fz.get("kron_factors")
    if norm not in ("gamma_f", "gamma_2", "approx_gamma_2"):
        raise PlanFormatError(f"{path}: unknown norm {norm!r}")
    if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= 64:
        raise PlanFormatError(f"{path}: kron_factors must be an integer in 1..64")
    if set(arrays) != expected_array_names(norm, d):
        raise PlanFormatError(f"{path}: the arrays do not match a {norm} certificate with {d} factor(s)")
    bias = m.get("bias", {})
    if not isinstance(bias, dict):
        raise PlanFormatError(f"{path}: 'bias' must be an object")
    nw = len(weights)
    if set(weights) != {f"{N_WEIGHTS}.{i}" for i in range(nw)} or any(w.ndim != 1 for w in weights.values()):
        raise PlanFormatError(f"{path}: the n-bound weights must be vectors {N_WEIGHTS}.0, {N_WEIGHTS}.1, …")
    eta = fz.get("eta")
    try:
        cert = certificate_from_arrays(arrays, norm, d, eta)
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanFormatError(f"{path}: inconsistent certificate arrays ({exc})") from None
    fact = cert.factorization
    if fz.get("R_shapes") != [list(R.shape) for R in fact.R_factors] or \
            fz.get("A_shapes") != [list(A.shape) for A in fact.A_factors] or \
            fz.get("strategy_rows") != fact.strategy_rows:
        raise PlanFormatError(f"{path}: factor shapes disagree with the manifest")
    wl = _dict(m, "workload")
    shape, dom = _workload_and_domain(path, m)
    if tuple(shape) != fact.shape:
        raise PlanFormatError(f"{path}: the factorization has shape {fact.shape}, the workload {tuple(shape)}")
    if m.get("neighbouring") not in ("add_remove", "replace"):
        raise PlanFormatError(f"{path}: unknown neighbouring relation {m.get('neighbouring')!r}")
    noise = _dict(m, "noise")
    if noise.get("sampler") not in KNOWN_SAMPLERS:
        raise PlanFormatError(f"{path}: unknown noise sampler {noise.get('sampler')!r} "
                              f"(known: {', '.join(KNOWN_SAMPLERS)})")
    for key in ("scale", "sensitivity", "base_sensitivity"):
        v = noise.get(key)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise PlanFormatError(f"{path}: noise {key} must be a finite positive number")
    post = m.get("postprocess")
    if post is not None and (not isinstance(post, dict) or post.get("method") not in POSTPROCESS_METHODS):
        raise PlanFormatError(f"{path}: unknown post-processing {post!r}")
    return Plan(workload=wl, domain=dom, relation=m["neighbouring"], guarantee=_dict(m, "guarantee"),
                certificate=cert, bounds=_dict(m, "certificate"), noise=noise, postprocess=post,
                expected_error=_dict(m, "expected_error"),
                provenance=m.get("provenance") if isinstance(m.get("provenance"), dict) else {},
                bias=bias, n_weights=tuple(weights[f"{N_WEIGHTS}.{i}"] for i in range(nw)),
                embedded=embedded, schema_version=int(m["schema_version"]))


def _embedded_from(path: Path, m: dict[str, Any], arrays: dict[str, np.ndarray]
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


def _workload_and_domain(path: Path, m: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """The manifest's workload shape [k, N] (with spec and fingerprint) and its domain,
    checked: distinct attribute names, positive sizes, Π sizes = N."""
    wl = _dict(m, "workload")
    shape = wl.get("shape")
    if not (isinstance(shape, list) and len(shape) == 2 and all(_is_int(x) and x >= 1 for x in shape)):
        raise PlanFormatError(f"{path}: workload shape must be [k, N]")
    if not isinstance(wl.get("spec"), str) or not isinstance(wl.get("fingerprint"), str):
        raise PlanFormatError(f"{path}: the workload needs a spec and a fingerprint")
    dom = _dict(m, "domain")
    attrs, sizes = dom.get("attributes"), dom.get("sizes")
    if not (isinstance(attrs, list) and isinstance(sizes, list) and len(attrs) == len(sizes) >= 1
            and all(isinstance(a, str) and a for a in attrs) and len(set(attrs)) == len(attrs)
            and all(_is_int(s) and s >= 1 for s in sizes)):
        raise PlanFormatError(f"{path}: the domain must list distinct attribute names and positive sizes")
    if math.prod(sizes) != shape[1]:
        raise PlanFormatError(f"{path}: the domain has {math.prod(sizes)} cells, the workload N={shape[1]}")
    return shape, dom


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _dict(m: dict[str, Any], key: str) -> dict[str, Any]:
    v = m.get(key)
    if not isinstance(v, dict):
        raise PlanFormatError(f"plan manifest: {key!r} is missing or not an object")
    return v


def _check_canonical_header(path: Path, head: Any = None) -> None:
    """The header must be the writer's compact JSON followed by < 8 padding spaces.

    ``head``: the validated header the arrays were read with (``container.read_with_header``);
    read here (bounded: length capped, JSON depth-checked, offsets and file size validated, no
    array data) when not given."""
    if head is None:
        try:
            head = container.read_header(path)
        except container.ContainerError as exc:
            raise PlanFormatError(str(exc)) from None
    body = head.raw.rstrip(b" ")
    if len(head.raw) - len(body) > 7:
        raise PlanFormatError(f"{path}: the header has unexpected padding")
    canon = json.dumps(head.header, separators=(",", ":"), ensure_ascii=False).encode()
    if canon != body:
        raise PlanFormatError(f"{path}: the header is not in canonical form (corrupt or edited)")
    end = max((t.end for t in head.tensors), default=0)
    if head.file_size != head.data_start + end:  # read_header checks it too; kept explicit
        raise PlanFormatError(f"{path}: the file has {head.file_size} bytes, its header "
                              f"describes {head.data_start + end} (truncated or data appended)")


# ---------------------------------------------------------------------------------------
# projection plans (``plan.projection_plan``): their own format, the same container rules

PROJECTION_FORMAT = "factorize-projection-plan"
#: 2 (issue 13): states ``rmse_bound_95`` and the any-mechanism bound's ``lower_witness``;
#: version-1 files are read and verified with those derived instead.
PROJECTION_SCHEMA_VERSION = 2


def save_projection_plan(plan: Any, path: str | Path) -> None:
    """Write a :class:`~factorize.plan.projection_plan.ProjectionPlan` atomically."""
    manifest = plan.manifest()
    listing, emb = _embedded_for(plan.embedded)
    manifest["workload"]["embedded"] = listing
    _write(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION, manifest, {**plan.arrays, **emb})


def load_projection_plan(path: str | Path) -> Any:
    """Read and structurally check a projection plan; :class:`PlanFormatError` on any problem."""
    return _guarded_load(_load_projection, path, "projection plan")


def plan_format(path: str | Path) -> str:
    """The ``format`` named in a plan file's header (the container's bounded header read and
    manifest parse: no array data is read, no unbounded or deeply nested JSON is parsed)."""
    try:
        head = container.read_header(path)
        manifest = container.parse_manifest(path, head.header)
    except container.ContainerError as exc:
        raise PlanFormatError(f"{path}: not a valid plan file ({exc})") from None
    if not isinstance(manifest, dict):
        raise PlanFormatError(f"{path}: not a valid plan file (the manifest is not a JSON object)")
    return str(manifest.get("format"))


def load_any_plan(path: str | Path) -> Any:
    """A factorization, projection or local plan, by the file's format."""
    fmt = plan_format(path)
    if fmt == PROJECTION_FORMAT:
        return load_projection_plan(path)
    from factorize.local.plan import FORMAT as LOCAL_FORMAT

    if fmt == LOCAL_FORMAT:
        from factorize.local.plan import load_local_plan

        return load_local_plan(path)
    return load_plan(path)


def _load_projection(path: Path) -> Any:
    from .projection_plan import PROJECTION_KINDS, ProjectionPlan

    m, arrays = _read(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION)
    _check_finite(path, arrays)
    arrays, embedded = _embedded_from(path, m, arrays)
    kind = m.get("kind")
    if kind not in PROJECTION_KINDS:
        raise PlanFormatError(f"{path}: unknown projection mechanism {kind!r}")
    if set(arrays) != ({"T"} if kind == "jl" else set()):
        raise PlanFormatError(f"{path}: the arrays do not match a {kind} plan")
    wl = _dict(m, "workload")
    shape, dom = _workload_and_domain(path, m)
    if kind == "jl" and (arrays["T"].ndim != 2 or arrays["T"].shape[1] != shape[0]):
        raise PlanFormatError(f"{path}: T must have k={shape[0]} columns")
    if m.get("neighbouring") != "replace":
        raise PlanFormatError(f"{path}: projection plans need replace-one neighbours (public n)")
    n = m.get("n")
    if not (_is_int(n) and n >= 1):
        raise PlanFormatError(f"{path}: the public dataset size n must be a positive integer")
    noise = _dict(m, "noise")
    if noise.get("sampler") not in KNOWN_SAMPLERS:
        raise PlanFormatError(f"{path}: unknown noise sampler {noise.get('sampler')!r}")
    for key in ("scale", "sensitivity", "base_sensitivity"):
        v = noise.get(key)
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
            raise PlanFormatError(f"{path}: noise {key} must be a finite positive number")
    return ProjectionPlan(kind=kind, workload=wl, domain=dom, relation="replace",
                          guarantee=_dict(m, "guarantee"), n=n, noise=noise,
                          decoder=_dict(m, "decoder"), bounds=_dict(m, "bounds"),
                          expected_error=_dict(m, "expected_error"), arrays=arrays,
                          provenance=m.get("provenance") if isinstance(m.get("provenance"), dict) else {},
                          embedded=embedded, schema_version=int(m["schema_version"]))
