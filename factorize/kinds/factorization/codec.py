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
``kinds.factorization.verify.verify_plan`` re-derives everything privacy depends on from the arrays.)

:func:`load_plan` raises :class:`PlanFormatError` for every unreadable, corrupt, tampered or
inconsistent file and never anything else.
"""

from __future__ import annotations

from pathlib import Path

from factorize.io.certificate_arrays import certificate_arrays, certificate_from_arrays, expected_array_names
from factorize.kinds.factorization.plan import Plan
from factorize.plan.files import (
    FORMAT,
    PlanBytes,
    PlanFormatError,
    check_plan_kind,
    json_int,
    optional_record,
    require_record,
    save_with_embedded,
    typed_values,
)
from factorize.plan.files import check_finite as _check_finite
from factorize.plan.files import embedded_from as _embedded_from
from factorize.plan.files import guarded_load as _guarded_load
from factorize.plan.files import read_plan_container as _read_container
from factorize.plan.files import require_dict as _dict
from factorize.plan.files import workload_and_domain as _workload_and_domain
from factorize.plan.manifest import POSTPROCESS_METHODS
from factorize.plan.records import (
    BiasRecord,
    CertificateRecord,
    ExpectedError,
    PostprocessRecord,
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
    check_plan_kind(path, m, Plan.plan_kind)
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
