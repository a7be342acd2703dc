"""Saving and loading a certified factorization (``factorize solve --out FILE``).

Layout (a ``factorize.io.container`` file of format ``factorize-result``):

* arrays ``R.i`` / ``A.i`` for each Kronecker factor i (one pair when dense);
* the dual witness: ``q.i`` (γ_F), ``p.i`` and ``q.i`` (γ₂), or ``U`` and ``d`` (approximate γ₂);
* the manifest: norm, η, the workload's spec, fingerprint and shape, the bounds as verified
  when saved, the solves, and versions.

Loading returns the ``Certificate``; the bounds in the manifest are informational only —
``certificate.verify`` recomputes them from the arrays.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import factorize
from factorize.certificate import (ApproxGamma2Witness, Certificate, Gamma2Witness,
                                   GammaFWitness)
from factorize.factorization import Factorization
from factorize.io import container

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
    arrays: dict[str, np.ndarray] = {}
    for i, (R, A) in enumerate(zip(fact.R_factors, fact.A_factors)):
        arrays[f"R.{i}"] = R
        arrays[f"A.{i}"] = A
    w = cert.witness
    if isinstance(w, GammaFWitness):
        arrays.update({f"q.{i}": q for i, q in enumerate(w.q)})
    elif isinstance(w, Gamma2Witness):
        arrays.update({f"p.{i}": p for i, p in enumerate(w.p)})
        arrays.update({f"q.{i}": q for i, q in enumerate(w.q)})
    else:
        arrays.update({"U": w.U, "d": w.d})
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
        d = int(manifest["kron_factors"])
        norm = manifest["norm"]
        fact = Factorization(tuple(arrays[f"R.{i}"] for i in range(d)),
                             tuple(arrays[f"A.{i}"] for i in range(d)))
        if norm == "gamma_f":
            witness = GammaFWitness(q=tuple(arrays[f"q.{i}"] for i in range(d)))
        elif norm == "gamma_2":
            witness = Gamma2Witness(p=tuple(arrays[f"p.{i}"] for i in range(d)),
                                    q=tuple(arrays[f"q.{i}"] for i in range(d)))
        else:
            witness = ApproxGamma2Witness(U=arrays["U"], d=arrays["d"])
        cert = Certificate(norm=norm, factorization=fact, witness=witness, eta=manifest.get("eta"))
    except (KeyError, TypeError, ValueError) as exc:
        raise container.ContainerError(f"{path}: inconsistent result file ({exc})") from None
    return LoadedResult(certificate=cert, manifest=manifest)


def versions() -> dict[str, str]:
    """Versions of factorize and the numerical stack, for provenance."""
    import cvxpy
    import scipy

    return {"factorize": factorize.__version__, "python": platform.python_version(),
            "numpy": np.__version__, "scipy": scipy.__version__, "cvxpy": cvxpy.__version__}
