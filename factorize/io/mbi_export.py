"""A release's measurement records as private-pgm's: ``mbi.LinearMeasurement`` and ``mbi.Domain``.

private-pgm (McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019; the ``mbi`` package, 2.0) fits a graphical model to noisy
linear measurements of marginals by minimising ``Σ ½‖(Q_c μ_c − y_c)/σ_c‖²`` over the marginal
polytope, and draws synthetic records from it (``model.synthetic_data()``). The records of
``structured.measurement_records`` (written by ``factorize run --measurements-out``, read by
``io.measurement_files.read_measurements``) are exactly such measurements: each becomes
``LinearMeasurement(y, clique, stddev, query)`` with ``query(f) = Q·vec(f)`` — the Kronecker
query ``scale ⊗_i F_i`` applied to the clique's factor, axis by axis (:class:`KronQuery`; the
factor's values are ordered as the clique, which is in schema order, C order). A record on the
empty clique (the total) is stated on the first attribute's clique as ``scale·𝟙ᵀ`` (the same
number). mbi's own estimate of the total reads identity queries only, so :func:`to_mbi` also
returns the release's estimate of n: pass it as ``known_total``.

Nothing here imports jax or mbi until :func:`to_mbi` is called.

    from factorize.io.mbi_export import load_mbi
    import mbi
    m = load_mbi("measurements/")
    model = mbi.estimation.MirrorDescent().estimate(m.domain, m.measurements,
                                                    known_total=m.total, iters=1000)
    synthetic = model.synthetic_data()
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .measurement_files import MeasurementSet, read_measurements


@dataclass(frozen=True, eq=False)
class KronQuery:
    """``f ↦ scale · (⊗_i factors[i]) vec(f.values)`` for an mbi ``Factor`` over the clique
    (hashed by identity, as mbi's ``WeightedQuery``: jax traces it as a static callable)."""

    scale: float
    factors: tuple[np.ndarray, ...]

    def __call__(self, f: Any) -> Any:
        import jax.numpy as jnp

        x = f.datavector(flatten=False)
        for i, F in enumerate(self.factors):
            x = jnp.moveaxis(jnp.tensordot(jnp.asarray(F), x, axes=(1, i)), 0, i)
        return self.scale * jnp.reshape(x, (-1,))

    def op_norm_sq(self) -> float:
        """``‖Q‖₂²`` (Kronecker: the product of the factors' squared spectral norms)."""
        return float(self.scale ** 2 * math.prod(float(np.linalg.norm(F, 2)) ** 2 for F in self.factors))

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


@dataclass(frozen=True)
class MbiMeasurements:
    """mbi's inputs: the ``LinearMeasurement`` list, the ``Domain`` and the release's total."""

    measurements: list[Any]
    domain: Any
    total: float


def to_mbi(mset: MeasurementSet) -> MbiMeasurements:
    """The records of ``mset`` as ``mbi.LinearMeasurement`` s over ``mbi.Domain`` (module
    docstring); ``ImportError`` naming the package when mbi is not installed."""
    try:
        import mbi
    except ImportError as exc:
        raise ImportError("to_mbi needs private-pgm: pip install mbi (it needs jax)") from exc
    domain = mbi.Domain(mset.names, mset.sizes)
    out = []
    for r in mset.records:
        attrs, factors = tuple(r.attrs), tuple(np.asarray(F, dtype=np.float64) for F in r.factors)
        if not attrs:  # the total, stated on the first attribute's marginal
            attrs, factors = (0,), (np.ones((1, mset.sizes[0])),)
        out.append(mbi.LinearMeasurement(
            noisy_measurement=np.asarray(r.values, dtype=np.float64),
            clique=tuple(mset.names[j] for j in attrs), stddev=float(r.stddev),
            query=KronQuery(float(r.scale), factors)))
    return MbiMeasurements(out, domain, float(mset.total))


def load_mbi(folder: str | os.PathLike[str]) -> MbiMeasurements:
    """:func:`to_mbi` of the measurements folder ``folder`` (``io.measurement_files``)."""
    return to_mbi(read_measurements(folder))
