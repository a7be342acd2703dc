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
ignores fields it does not know. A change of meaning gets a new schema version. Version 2:
the noise is calibrated to the sensitivity of the *measured* strategy
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

from pathlib import Path
from typing import Any

from factorize.io.certificate_arrays import certificate_arrays, certificate_from_arrays, expected_array_names

from .files import (  # noqa: F401 (API)
    COMPATIBILITY,
    FORMAT,
    PROJECTION_FORMAT,
    PlanBytes,
    PlanFormatError,
    file_sha256,
    json_int,
    optional_record,
    plan_format,
    require_record,
    save_with_embedded,
    typed_values,
)
from .files import check_finite as _check_finite
from .files import embedded_from as _embedded_from
from .files import guarded_load as _guarded_load
from .files import read_plan_container as _read_container
from .files import require_dict as _dict
from .files import workload_and_domain as _workload_and_domain
from .files import write_plan_container as _write  # noqa: F401 (tests forge plans with it)
from .model import POSTPROCESS_METHODS, Plan
from .records import (
    BiasRecord,
    CertificateRecord,
    DecoderRecord,
    ExpectedError,
    PostprocessRecord,
    ProjectionBounds,
    ProjectionExpectedError,
    Provenance,
    WorkloadRecord,
)

SCHEMA_VERSION = 2


def save_plan(plan: Plan, path: str | Path) -> None:
    """Write ``plan`` to ``path`` atomically (temporary file + ``os.replace``)."""
    arrays = certificate_arrays(plan.certificate)
    arrays.update({f"{N_WEIGHTS}.{i}": b for i, b in enumerate(plan.n_weights)})
    save_with_embedded(path, FORMAT, SCHEMA_VERSION, plan.manifest(), arrays, plan.embedded)


#: Array name prefix of the n-bound weights b_j (``plan.bias``).
N_WEIGHTS = "nbound"


def load_plan(path: str | Path | PlanBytes) -> Plan:
    """Read and structurally check a plan file (see the module docstring)."""
    return _guarded_load(_load, path, "plan")


def _load(path: Path) -> Plan:
    m, arrays = _read_container(path, FORMAT, SCHEMA_VERSION)
    _check_finite(path, arrays)
    arrays, embedded = _embedded_from(path, m, arrays)
    weights = {k: v for k, v in arrays.items() if k.startswith(N_WEIGHTS + ".")}
    arrays = {k: v for k, v in arrays.items() if k not in weights}
    fz = _dict(m, "factorization")
    norm, d = fz.get("norm"), json_int(fz.get("kron_factors"))
    if norm not in ("gamma_f", "gamma_2", "approx_gamma_2"):
        raise PlanFormatError(f"{path}: unknown norm {norm!r}")
    if d is None or not 1 <= d <= 64:
        raise PlanFormatError(f"{path}: kron_factors must be an integer in 1..64")
    if set(arrays) != expected_array_names(norm, d):
        raise PlanFormatError(f"{path}: the arrays do not match a {norm} certificate with {d} factor(s)")
    version = int(m["schema_version"])
    # a schema-1 file states no bias (the verifier derives it, with n capped)
    bias = None if version < 2 and m.get("bias", {}) == {} else require_record(path, m, "bias", BiasRecord)
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
    shape, _ = _workload_and_domain(path, m)
    wl = require_record(path, m, "workload", WorkloadRecord)
    if tuple(shape) != fact.shape:
        raise PlanFormatError(f"{path}: the factorization has shape {fact.shape}, the workload {tuple(shape)}")
    values = typed_values(path, m)
    post = None
    if m.get("postprocess") is not None:
        post = require_record(path, m, "postprocess", PostprocessRecord)
        if post["method"] not in POSTPROCESS_METHODS:
            raise PlanFormatError(f"{path}: unknown post-processing {post['method']!r}")
    exact = _dict(m, "noise").get("sensitivity_exact")
    return Plan(workload=wl, domain=values.domain, relation=values.relation,
                guarantee=values.guarantee, certificate=cert,
                bounds=require_record(path, m, "certificate", CertificateRecord),
                noise=values.noise, postprocess=post,
                expected_error=require_record(path, m, "expected_error", ExpectedError),
                provenance=optional_record(path, m, "provenance", Provenance),
                bias=bias, n_weights=tuple(weights[f"{N_WEIGHTS}.{i}"] for i in range(nw)),
                embedded=embedded, schema_version=version,
                sensitivity_exact=exact if isinstance(exact, bool) else None)


# ---------------------------------------------------------------------------------------
# projection plans (``plan.projection_plan``): their own format, the same container rules

#: 2: states ``rmse_bound_95`` and the any-mechanism bound's ``lower_witness``;
#: version-1 files are read and verified with those derived instead.
PROJECTION_SCHEMA_VERSION = 2


def save_projection_plan(plan: Any, path: str | Path) -> None:
    """Write a :class:`~factorize.plan.projection_plan.ProjectionPlan` atomically."""
    save_with_embedded(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION, plan.manifest(),
                       dict(plan.arrays), plan.embedded)


def load_projection_plan(path: str | Path | PlanBytes) -> Any:
    """Read and structurally check a projection plan; :class:`PlanFormatError` on any problem."""
    return _guarded_load(_load_projection, path, "projection plan")


def _load_projection(path: Path) -> Any:
    from .projection_plan import PROJECTION_KINDS, ProjectionPlan

    m, arrays = _read_container(path, PROJECTION_FORMAT, PROJECTION_SCHEMA_VERSION)
    _check_finite(path, arrays)
    arrays, embedded = _embedded_from(path, m, arrays)
    kind = m.get("kind")
    if kind not in PROJECTION_KINDS:
        raise PlanFormatError(f"{path}: unknown projection mechanism {kind!r}")
    if set(arrays) != ({"T"} if kind == "jl" else set()):
        raise PlanFormatError(f"{path}: the arrays do not match a {kind} plan")
    shape, _ = _workload_and_domain(path, m)
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
