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
* the standard errors and intervals are :class:`AnswerColumn` s: computed from the row norms
  for the rows asked for (a writer's batch, ``executor.output``), never held whole — a
  release holds its estimates and R's row norms only (Adult's ≤3-way marginals: 21·10⁶
  answers, 160 MiB per float column); each value is the same floating-point expression, in the
  same order, as when the columns were computed whole, so the bytes written do not change;
* labels travel in the measurement and come out in the release (``Release.extra["labels"]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from .session import ExecutionError

NOT_PRIVATE = "NOT PRIVATE: produced in --seed test mode (reproducible noise)"
#: The exact samplers; any other (``float``) runs only when the caller allows it.
EXACT_SAMPLERS = ("discrete_gaussian", "discrete_laplace")


@dataclass
class Release:
    estimate: np.ndarray
    std_error: np.ndarray | AnswerColumn
    ci_low: np.ndarray | AnswerColumn
    ci_high: np.ndarray | AnswerColumn
    metadata: dict[str, Any]
    postprocessed: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The answers file's columns: the query index, its labels (``extra["labels"]``: the
        table, label and attribute columns, ``executor.labels``), the estimate with its standard
        error and 95% interval, and any post-processed estimate (``extra["columns"]`` restricts
        the numbers, e.g. projected answers have no intervals; the labels always stay)."""
        labels = self.extra.get("labels", {})
        cols: dict[str, Any] = {"query": QueryIndex(self.estimate.size),
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


class ErrorBars:
    """Standard errors and 95% intervals of a release, rows ``lo .. hi-1`` at a time (module
    docstring): ``se = sd·‖r_i‖₂``, ``half = (c·se + (γ/2)‖r_i‖₁) + β·n⁺`` (the rounding term
    only on a lattice), ``ci = estimate ∓ half`` — per row the same operations in the same
    order as over whole columns, hence the same values. The last range asked for is kept (a
    writer asks for the three columns of one batch in turn)."""

    def __init__(self, estimate: np.ndarray, row_norms: Callable[[int, int], np.ndarray],
                 row_l1_norms: Callable[[], np.ndarray], sd: float, multiplier: float,
                 grid: float | None, bias: float) -> None:
        self.estimate = estimate
        self.row_norms = row_norms
        self.row_l1_norms = row_l1_norms
        self.sd, self.multiplier, self.grid, self.bias = sd, multiplier, grid, bias
        self._l1: np.ndarray | None = None  # ‖r_i‖₁, from the first interval asked for
        self._last: tuple[int, int, np.ndarray, np.ndarray] | None = None

    def rows(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(se, half)`` for rows ``lo .. hi-1`` (read-only arrays)."""
        if self._last is not None and self._last[:2] == (lo, hi):
            return self._last[2], self._last[3]
        se = np.multiply(self.row_norms(lo, hi), self.sd)
        half = np.multiply(se, self.multiplier)
        if self.grid:
            if self._l1 is None:
                self._l1 = self.row_l1_norms()
            half += np.multiply(self._l1[lo:hi], 0.5 * self.grid)
        half += self.bias
        se.setflags(write=False)
        half.setflags(write=False)
        self._last = (lo, hi, se, half)
        return se, half


class AnswerColumn(NDArrayOperatorsMixin):
    """One per-answer column of :class:`ErrorBars` (``"std_error"``, ``"ci_low"`` or
    ``"ci_high"``), made per slice of rows when it is written (``executor.output``: its
    ``slice``), as :class:`QueryIndex`. As an array (``np.asarray``, arithmetic, comparisons,
    indexing) it is the whole column, computed when asked (the standard errors read-only)."""

    def __init__(self, bars: ErrorBars, name: str) -> None:
        if name not in ("std_error", "ci_low", "ci_high"):
            raise ExecutionError(f"no answer column {name!r} in error bars")
        self.bars = bars
        self.name = name

    def __len__(self) -> int:
        return int(self.bars.estimate.size)

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    @property
    def size(self) -> int:
        return len(self)

    @property
    def ndim(self) -> int:
        return 1

    @property
    def dtype(self) -> np.dtype[np.float64]:
        return np.dtype(np.float64)

    def slice(self, offset: int, length: int) -> np.ndarray:
        """Rows ``offset .. offset+length-1`` (clipped to ``0 .. k-1``), float64."""
        k = len(self)
        lo = min(max(0, int(offset)), k)
        hi = min(k, lo + max(0, int(length)))
        se, half = self.bars.rows(lo, hi)
        if self.name == "std_error":
            return se
        est = self.bars.estimate[lo:hi]
        return np.subtract(est, half) if self.name == "ci_low" else np.add(est, half)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice) and key.step in (None, 1):
            lo, hi, _ = key.indices(len(self))
            return self.slice(lo, hi - lo)
        return np.asarray(self)[key]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The whole column, computed now (``copy`` is not consulted)."""
        out = self.slice(0, len(self))
        return out if dtype is None else out.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        args = [np.asarray(x) if isinstance(x, AnswerColumn) else x for x in inputs]
        return getattr(ufunc, method)(*args, **kwargs)


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
    ``row_norms``: ``(lo, hi) ↦ ‖r_i‖₂`` for R's rows ``lo .. hi-1``;
    ``row_l1_norms``: ``() ↦ ‖r_i‖₁`` (bounds) of R's rows, called once, when the first
    interval is made; ``beta``: the
    certified reconstruction bias per record (the verifier's, required); ``n_upper``:
    ``(ỹ, estimate, sd) ↦ n⁺``; ``n_bound``: how n⁺ is found; ``describe``: the plan's public description for the metadata (workload, domain,
    guarantee, neighbours, mechanism)."""

    values: Any
    noise: Any
    reconstruct: Callable[[np.ndarray], np.ndarray]
    row_norms: Callable[[int, int], np.ndarray]
    row_l1_norms: Callable[[], np.ndarray]
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
    del noisy
    c = ci_multiplier(spec)
    bars = ErrorBars(est, m.row_norms, m.row_l1_norms, sd, c, spec.grid, m.beta * n_plus)
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
    return Release(estimate=est, std_error=AnswerColumn(bars, "std_error"),
                   ci_low=AnswerColumn(bars, "ci_low"), ci_high=AnswerColumn(bars, "ci_high"),
                   metadata=meta)
