"""Banded inverse square root (BISR) strategies for long horizons: the closed form and the
optimised coefficients, without n × n matrices (Kalinin, McKenna, Upadhyay & Lampert, "Back to
Square Roots: An Optimal Bound on the Matrix Factorization Error for Multi-Epoch
Differentially Private SGD", ICLR 2026, arXiv:2505.12128, §3; the banded square root before
it: Kalinin & Lampert, "Banded Square Root Matrix Factorization for Differentially Private
Model Training", NeurIPS 2024).

The prefix-sum workload ``L`` (lower-triangular ones, series ``1/(1 − x)``) is the square of
the Toeplitz ``L^{1/2}`` with series ``(1 − x)^{−1/2}``, whose inverse has the series
``(1 − x)^{1/2}``: ``r_0 = 1``, ``r_j = r_{j−1}·(2j − 3)/(2j)`` (``−1/2, −1/8, −1/16, …``,
all negative after r_0, summing to 0 over all j). BISR keeps the first p of them as the bands
of ``C⁻¹`` (:func:`bisr_coefficients`); C is the series ``1/r`` (``training.series``), the
factorization ``L = B·C`` with ``B = L·C⁻¹``. Step t's noise ``(C⁻¹z)_t = Σ_{j<p} r_j z_{t−j}``
needs the last p − 1 draws (O(p·d) memory, ``training.stream``).

**Objective** (``E(r)·S(c)``, scale-free): E the error of C⁻¹'s padded first column r
(``toeplitz.error_and_gradient``: ``‖W C⁻¹‖_F² = Σ_k (n − k)·s_k²``, s the cumulative sums
of r — constant beyond p for the prefix sums), S the smooth sensitivity² of C's column
``c = 1/r`` at the worst pattern (``toeplitz.pattern_value_and_gradient``; exact for
non-negative non-increasing c). Gradient in O(n·p): ``∂E/∂r_j`` read from E's gradient; for S,
``c = 1/r`` gives ``dc = −c * c * dr``, so with ``g = ∂S/∂c`` and the anti-causal
``v = (1/r)ᵀ g`` (``v_i = Σ_{k≥i} c_{k−i} g_k``),

    ∂S/∂r_m = −Σ_i v_i c_{i−m},

p dot products of length n. :func:`optimize_bisr` minimises ``log E + log S`` by L-BFGS-B over
``r_1 … r_{p−1}`` with ``r_0 = 1`` (scale), ``r_j = −a_j/(1 + Σa)``, ``a = e^u`` (u free):
``r_j < 0`` and ``Σ_{j≥1}|r_j| < 1`` — the sign pattern of ``(1 − x)^{1/2}``, under which
``c = Σ_m (Σ_{j≥1}|r_j| x^j)^m ≥ 0`` entrywise (C's Gram is non-negative: the epochs
sensitivity is exact) and the series' certificate (``training.series``: ``D = r(1) > 0``)
applies — started from the closed form; the result is re-evaluated with the certified
sensitivity (``toeplitz.certified_sensitivity``) and kept only when its certified objective is
below the closed form's (else the closed form is returned).

For the prefix sums, ``s_k = r(1)`` for k ≥ p − 1, so E contains ``r(1)²·Σ_{k≥p−1}(n − k) ≈
r(1)²n²/2``; the truncation has ``r(1) = Σ_{j≥p}|r_j| ≈ 1/√(πp)``, which dominates for p ≪ n.
The optimum shrinks r(1) (its last band absorbs much of the tail): at p = 64, single
participation, about 4×, 15× and 58× below the truncation at n = 10⁴, 10⁵, 10⁶
(reports/bench_training_long.md).
"""

from __future__ import annotations

import math
import time

import numpy as np

from factorize.errors import SolverError
from factorize.numerics import NumericRangeError, integer
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .banded import LongOptimum
from .toeplitz import (
    BandedInverse,
    Reduction,
    ToeplitzWorkload,
    certified_sensitivity,
    error_and_gradient,
    pattern_value_and_gradient,
    strategy_error,
)

__all__ = ["bisr_coefficients", "bisr_objective", "certified_objective", "closed_form_bisr",
           "optimize_bisr"]


def bisr_coefficients(p: int) -> np.ndarray:
    """The first p coefficients of ``(1 − x)^{1/2}``: ``r_0 = 1``, ``r_j = r_{j−1}(2j − 3)/(2j)``."""
    p = integer("bands", p, 1, PrivacyError)
    out = np.ones(p)
    for j in range(1, p):
        out[j] = out[j - 1] * (2 * j - 3) / (2 * j)
    return out


def closed_form_bisr(n: int, bands: int) -> BandedInverse:
    """The BISR strategy of p = ``bands`` (at most n) truncated coefficients for n steps."""
    n = integer("n", n, 1, PrivacyError)
    return BandedInverse(bisr_coefficients(min(integer("bands", bands, 1, PrivacyError), n)), n)


def bisr_objective(r: np.ndarray, n: int, workload: ToeplitzWorkload, reduction: Reduction,
                   participation: Participation | None,
                   impulse: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``(log(E·S), its gradient in r, E)`` (module docstring); ``impulse`` = e_0 of length n."""
    from scipy.signal import lfilter

    p = r.size
    rr = np.zeros(n)
    rr[:p] = r
    with np.errstate(all="ignore"):
        c = np.asarray(lfilter([1.0], r, impulse))
        if not np.all(np.isfinite(c)):
            return math.inf, np.zeros_like(r), math.inf
        E, gE = error_and_gradient(rr, workload, reduction)
        S, gS = pattern_value_and_gradient(c, n, participation)
        if not (math.isfinite(E) and math.isfinite(S) and E > 0 and S > 0):
            return math.inf, np.zeros_like(r), math.inf
        v = np.asarray(lfilter([1.0], r, gS[::-1]))[::-1]
        dS = np.array([-np.dot(v[m:], c[:n - m]) for m in range(p)])
    grad = gE[:p] / E + dS / S
    if not np.all(np.isfinite(grad)):
        return math.inf, np.zeros_like(r), math.inf
    return math.log(E) + math.log(S), grad, E


def _coefficients(u: np.ndarray) -> np.ndarray:
    """``r_0 = 1``, ``r_j = −a_j/(1 + Σa)`` with ``a = e^u``: ``r_j < 0`` and ``Σ_{j≥1}|r_j| =
    A/(1 + A) < 1`` for every u (the optimiser's free variables)."""
    a = np.exp(u)
    return np.concatenate([[1.0], -a / (1.0 + float(np.sum(a)))])


def _variables(r: np.ndarray) -> np.ndarray:
    """u with ``_coefficients(u) = r`` for ``r_0 = 1``, ``r_j < 0``, ``Σ_{j≥1}|r_j| < 1``."""
    t = 1.0 + float(np.sum(r[1:]))
    return np.asarray(np.log(-r[1:] / t))


def certified_objective(strategy: BandedInverse, workload: ToeplitzWorkload, reduction: Reduction,
                        participation: Participation | None) -> tuple[float, float]:
    """``(E·Δ̄², E)`` with Δ̄ the certified sensitivity (what a plan states)."""
    E = strategy_error(strategy, workload, reduction)
    return E * certified_sensitivity(strategy, participation).value ** 2, E


def optimize_bisr(n: int, bands: int, *, workload: ToeplitzWorkload | None = None,
                  reduction: Reduction = "total", participation: Participation | None = None,
                  max_iter: int = 1000) -> LongOptimum:
    """The p-band banded inverse minimising ``E·S`` (module docstring) for n steps, started from
    (and never certified worse than) the closed form :func:`closed_form_bisr`."""
    from scipy.optimize import minimize

    n = integer("n", n, 2, PrivacyError)
    p = min(integer("bands", bands, 1, PrivacyError), n)
    w = workload or ToeplitzWorkload.prefix()
    t0 = time.perf_counter()
    start = closed_form_bisr(n, p)
    best, best_E = certified_objective(start, w, reduction, participation)
    if p == 1:
        return LongOptimum(start, best, best_E, 0, time.perf_counter() - t0, "one band: C = I")
    impulse = np.zeros(n)
    impulse[0] = 1.0

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        val, grad, _ = bisr_objective(_coefficients(u), n, w, reduction, participation, impulse)
        a = np.exp(u)
        A1 = 1.0 + float(np.sum(a))
        g = grad[1:]
        return val, -a * g / A1 + a * float(np.dot(a, g)) / (A1 * A1)

    res = minimize(fun, _variables(start.coef), jac=True, method="L-BFGS-B",
                   bounds=[(-60.0, 60.0)] * (p - 1),
                   options={"maxiter": max_iter, "maxcor": 20, "ftol": 1e-10, "gtol": 1e-9})
    u = np.asarray(res.x, dtype=np.float64)
    if not math.isfinite(fun(u)[0]):
        raise SolverError(f"BISR optimisation at n={n}, p={p} ended at a non-invertible strategy")
    strategy = BandedInverse(_coefficients(u), n)
    try:
        value, E = certified_objective(strategy, w, reduction, participation)
    except NumericRangeError:  # Σ|r_j| reached 1: the series' certificate does not apply
        value, E = math.inf, math.inf
    message = str(res.message)
    if not value < best:
        strategy, value, E = start, best, best_E
        message += "; not below the closed form (certified): closed form kept"
    return LongOptimum(strategy, value, E, int(res.nit), time.perf_counter() - t0, message)
