"""The one release of a linear measurement: noise once, answers, error bars, metadata.

Every linear plan kind (dense / Kronecker factorizations, ``executor.release``; structured
plans, ``executor.structured``) turns its exact measurement into a :class:`LinearMeasurement`
(as private-pgm's ``LinearMeasurement``: the values, their noise, and how the answers are read
off them) and calls :func:`release` — the noise, the standard errors, the intervals and the
metadata are written here and nowhere else:

* ``ỹ = y + z`` with z drawn once: the exact lattice sampler (discrete Gaussian / Laplace on γZ,
  ``privacy.sample_lattice``) for a lattice measurement, floating-point noise only where the
  caller allowed it (:func:`refuse_float_noise`, the one refusal);
* answers ``R·ỹ``; std error ``sd·‖r_i‖₂`` (sd² the sampled noise's exact variance);
* 95% intervals ``estimate ± (c·std_error + (γ/2)‖r_i‖₁ + β·n⁺)``: c the normal quantile at the
  noise level (Gaussian) or Chebyshev's (Laplace) (``plan.manifest.ci_multiplier``), the lattice
  rounding bias, and the reconstruction's certified bias β per record times a bound n⁺ on the
  number of records (probability 1e-3);
* labels travel in the measurement and come out in the release (``Release.extra["labels"]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .session import ExecutionError

NOT_PRIVATE = "NOT PRIVATE: produced in --seed test mode (reproducible noise)"
#: The exact samplers; any other (``float``) runs only when the caller allows it.
EXACT_SAMPLERS = ("discrete_gaussian", "discrete_laplace")


@dataclass
class Release:
    estimate: np.ndarray
    std_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    metadata: dict[str, Any]
    postprocessed: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, np.ndarray]:
        """The answers file's columns: the query index, its labels (``extra["labels"]``: the
        table, label and attribute columns, ``executor.labels``), the estimate with its standard
        error and 95% interval, and any post-processed estimate (``extra["columns"]`` restricts
        the numbers, e.g. projected answers have no intervals; the labels always stay)."""
        labels = self.extra.get("labels", {})
        cols = {"query": QueryIndex(self.estimate.size),
                **labels, "estimate": self.estimate,
                "std_error": self.std_error, "ci_low": self.ci_low, "ci_high": self.ci_high}
        if self.postprocessed is not None:
            cols["estimate_postprocessed"] = self.postprocessed
        only = self.extra.get("columns")
        return cols if only is None else {k: v for k, v in cols.items() if k in only or k in labels}


class QueryIndex:
    """The ``query`` column ``0 .. k-1`` of an answers file, made per slice of rows when it is
    written (``executor.output``), as ``pyarrow.Array.slice``: never k integers at once."""

    def __init__(self, k: int) -> None:
        self.k = int(k)

    def __len__(self) -> int:
        return self.k

    def slice(self, offset: int, length: int) -> np.ndarray:
        """``offset .. offset+length-1`` (clipped to ``0 .. k-1``), int64."""
        lo = min(max(0, int(offset)), self.k)
        return np.arange(lo, min(self.k, lo + max(0, int(length))), dtype=np.int64)


def refuse_float_noise(sampler: str, allow_float_noise: bool) -> None:
    """The one refusal of inexact noise: a sampler other than the exact lattice samplers runs
    only with ``--allow-float-noise`` (and only ``float`` is known besides them)."""
    if sampler in EXACT_SAMPLERS:
        return
    if sampler == "float" and allow_float_noise:
        return
    raise ExecutionError(f"the plan's noise sampler {sampler!r} is not exact; refusing (pass "
                         "--allow-float-noise to accept floating-point noise)")


@dataclass(frozen=True)
class LinearMeasurement:
    """An exact linear measurement and what its release needs (module docstring).

    ``values``: ``round(Ã h/γ)`` (lattice integers) or ``fl(Ã h)`` (float sampler);
    ``noise``: the plan's verified ``privacy.NoiseSpec``; ``reconstruct``: ``ỹ ↦ R·ỹ``;
    ``std_error``: ``sd ↦ sd·‖r_i‖₂`` for R's rows, a new array (the release's standard
    errors); ``row_l1_norms``: ``‖r_i‖₁`` of R's rows; ``beta``: the
    certified reconstruction bias per record (the verifier's, required); ``n_upper``:
    ``(ỹ, estimate, sd) ↦ n⁺``; ``n_bound``: how n⁺ is found; ``describe``: the plan's public description for the metadata (workload, domain,
    guarantee, neighbours, mechanism)."""

    values: Any
    noise: Any
    reconstruct: Callable[[np.ndarray], np.ndarray]
    std_error: Callable[[float], np.ndarray]
    row_l1_norms: np.ndarray
    beta: float
    n_upper: Callable[[np.ndarray, np.ndarray, float], float]
    n_bound: Any
    describe: dict[str, Any]


def release(m: LinearMeasurement, rng: Any, *, allow_float_noise: bool,
            metadata: dict[str, Any] | None = None, variance_note: str | None = None) -> Release:
    """Noise once, answers, standard errors, intervals and metadata (module docstring)."""
    from factorize.plan.manifest import ci_method, ci_multiplier
    from factorize.privacy import add_noise, sample_lattice, sampled_variance

    spec = m.noise
    refuse_float_noise(spec.sampler, allow_float_noise)
    if spec.sampler == "float":
        noisy = add_noise(np.asarray(m.values, dtype=np.float64), spec, rng)
    else:
        noisy = sample_lattice(m.values, spec, rng)
    est = m.reconstruct(noisy)
    sd = math.sqrt(sampled_variance(spec))
    n_plus = m.n_upper(noisy, est, sd)
    del noisy  # the answers' arrays come next, each as long as the answers
    se = m.std_error(sd)
    c = ci_multiplier(spec)
    # half = c·se + (γ/2)‖r_i‖₁ + β·n⁺, evaluated in that order in two buffers (the arrays of
    # a release are as long as its answers: 21·10⁶ for Adult's ≤3-way marginals)
    half = np.multiply(se, c)
    if spec.grid:
        spare = np.multiply(m.row_l1_norms, 0.5 * spec.grid)
        half += spare
    else:
        spare = np.empty_like(half)
    half += m.beta * n_plus
    ci_high = np.add(est, half, out=spare)
    ci_low = np.subtract(est, half, out=half)
    meta = dict(metadata or {})
    test_mode = bool(getattr(rng, "is_test_mode", False))
    meta.update({
        "test_mode": test_mode, **m.describe,
        "noise": {"family": spec.family, "sampler": spec.sampler, "scale": spec.scale,
                  "grid": spec.grid},
        "ci": {"level": 0.95, "method": ci_method(spec), "multiplier": c,
               "rounding_bias_added": bool(spec.grid), "bias_per_record": m.beta,
               "n_upper": n_plus, "n_bound": m.n_bound,
               "note": "estimate ± (multiplier·std_error + rounding bias + bias_per_record·n_upper); "
                       "n_upper bounds n except with probability 1e-3, the noise term holds with "
                       "probability 0.951: coverage ≥ 0.95"},
        "n_queries": int(est.size),
    })
    if variance_note is not None:
        meta["variance"] = variance_note
    if test_mode:
        meta["warning"] = NOT_PRIVATE
    return Release(estimate=est, std_error=se, ci_low=ci_low, ci_high=ci_high, metadata=meta)
