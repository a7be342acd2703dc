"""Saving and loading a certified factorization (``factorize solve --out FILE``).

Layout (a ``factorize.io.container`` file of format ``factorize-result``):

* arrays ``R.i`` / ``A.i`` for each Kronecker factor i (one pair when dense) and the dual
  witness ``q.i`` / ``p.i`` / ``U``, ``d`` (naming in ``factorize.io.certificate_arrays``,
  shared with plan files);
* the manifest: norm, η, the workload's spec, fingerprint and shape, the bounds as verified
  when saved, the solves, and versions.

Loading returns the ``Certificate``; the bounds in the manifest are informational only —
``certificate.verify`` recomputes them from the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factorize.io import container
from factorize.io.certificate_arrays import certificate_arrays, certificate_from_arrays
from factorize.io.provenance import versions
from factorize.planner.certificate import Certificate

FORMAT = "factorize-result"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class LoadedResult:
    certificate: Certificate
    manifest: dict[str, Any]


def save_result(result, path: str | Path) -> None:
    """Write a ``planner.CertifiedFactorization`` to ``path``."""
    cert = result.certificate
    fact = cert.factorization
    arrays = certificate_arrays(cert)
    v = result.verification
    manifest = {
        "norm": cert.norm,
        "eta": cert.eta,
        "kron_factors": len(fact.R_factors),
        "workload": {"spec": result.workload.spec, "fingerprint": result.workload.fingerprint(),
                     "shape": list(result.workload.shape)},
        "bounds_when_saved": {"upper": v.upper, "lower": v.lower, "gap": v.gap,
                              "residual": v.residual},
        "solves": [s.to_dict() for s in result.solves],
        "seconds": result.seconds,
        "versions": versions(),
    }
    container.write(path, FORMAT, SCHEMA_VERSION, manifest, arrays)


def load_result(path: str | Path) -> LoadedResult:
    """Read a result file back into a ``Certificate`` (digests and structure checked)."""
    manifest, arrays = container.read(path, FORMAT, SCHEMA_VERSION)
    try:
        cert = certificate_from_arrays(arrays, manifest["norm"], int(manifest["kron_factors"]),
                                       manifest.get("eta"))
    except (KeyError, TypeError, ValueError) as exc:
        raise container.ContainerError(f"{path}: inconsistent result file ({exc})") from None
    return LoadedResult(certificate=cert, manifest=manifest)
