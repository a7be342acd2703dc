"""The array naming of a stored certificate, shared by result files and plan files.

* ``R.i`` / ``A.i`` for each Kronecker factor i (one pair when dense);
* the dual witness: ``q.i`` (γ_F), ``p.i`` and ``q.i`` (γ₂), or ``U`` and ``d`` (approximate γ₂).

:func:`certificate_arrays` turns a ``Certificate`` into these arrays;
:func:`certificate_from_arrays` rebuilds it (raising :class:`ContainerError` — a ``ValueError``
— for an unknown norm or factor count, and ``KeyError`` / ``ValueError`` / ``TypeError`` from
the arrays themselves on an inconsistent set; callers turn these into their own format error).
"""

from __future__ import annotations

import numpy as np

from factorize.choices import NORMS, Norm
from factorize.factorization import Factorization
from factorize.io.container import ContainerError
from factorize.planner.certificate import (
    ApproxGamma2Witness,
    Certificate,
    Gamma2Witness,
    GammaFWitness,
    Witness,
)


def certificate_arrays(cert: Certificate) -> dict[str, np.ndarray]:
    """The named arrays of ``cert`` (factors and witness)."""
    fact = cert.factorization
    arrays: dict[str, np.ndarray] = {}
    for i, (R, A) in enumerate(zip(fact.R_factors, fact.A_factors, strict=True)):
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
    return arrays


def expected_array_names(norm: str, kron_factors: int) -> set[str]:
    """The exact set of array names a certificate of this norm and factor count has."""
    d = int(kron_factors)
    names = {f"R.{i}" for i in range(d)} | {f"A.{i}" for i in range(d)}
    if norm == "gamma_f":
        names |= {f"q.{i}" for i in range(d)}
    elif norm == "gamma_2":
        names |= {f"p.{i}" for i in range(d)} | {f"q.{i}" for i in range(d)}
    elif norm == "approx_gamma_2":
        names |= {"U", "d"}
    else:
        raise ContainerError(f"unknown norm {norm!r}")
    return names


def certificate_from_arrays(arrays: dict[str, np.ndarray], norm: str, kron_factors: int,
                            eta: float | None) -> Certificate:
    """Rebuild the ``Certificate`` stored under the names of :func:`certificate_arrays`."""
    d = int(kron_factors)
    if d < 1:
        raise ContainerError(f"kron_factors must be ≥ 1, got {kron_factors!r}")
    known: Norm | None = next((n for n in NORMS if n == norm), None)
    if known is None:
        raise ContainerError(f"unknown norm {norm!r}")
    fact = Factorization(tuple(arrays[f"R.{i}"] for i in range(d)),
                         tuple(arrays[f"A.{i}"] for i in range(d)))
    witness: Witness
    if known == "gamma_f":
        witness = GammaFWitness(q=tuple(arrays[f"q.{i}"] for i in range(d)))
    elif known == "gamma_2":
        witness = Gamma2Witness(p=tuple(arrays[f"p.{i}"] for i in range(d)),
                                q=tuple(arrays[f"q.{i}"] for i in range(d)))
    else:
        witness = ApproxGamma2Witness(U=arrays["U"], d=arrays["d"])
    return Certificate(norm=known, factorization=fact, witness=witness, eta=eta)
