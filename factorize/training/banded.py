"""Banded Toeplitz strategies for long horizons, optimised without n × n matrices (McKenna,
"Scaling up the Banded Matrix Factorization Mechanism for Differentially Private ML", 2024, §3;
the banded family of Choquette-Choo, McMahan, Rush & Thakurta, "Amplified Banded Matrix
Factorization", NeurIPS 2023, §3).

The strategy ``C`` is lower-triangular Toeplitz with b bands ``c_0 … c_{b−1}``
(:class:`~factorize.training.toeplitz.BandedToeplitz`). Its inverse is the series ``1/c(x)``:
the first column ``r`` of C⁻¹ is the impulse response of the all-pole filter ``1/c`` (a
recurrence of order b − 1, O(n·b)); the error ``E(r)`` is ``‖W C⁻¹‖_F²`` or the max row norm²
(``toeplitz.error_and_gradient``). Gradient by the adjoint of the recurrence: with ``g = ∂E/∂r``
and ``v = (1/c)ᵀ g`` (the anti-causal filter),

    ∂E/∂c_m = −Σ_k v_k r_{k−m}          (from ``c * r = δ``: ``dc * r + c * dr = 0``),

b dot products of length n. The objective is ``E(r)·S(c)`` with S the smooth sensitivity² of
``toeplitz.pattern_value_and_gradient`` (``‖c‖²`` for single participation; exact for any c
when the participations are at least b apart, the columns of a pattern then being disjoint),
scale-invariant; L-BFGS (scipy) minimises its logarithm from the truncated square-root
factorization ``c_k = binom(2k, k)/4^k`` (Fichtenberger, Henzinger & Upadhyay, "Constant
Matters: Fine-grained Error Bound on Differentially Private Continual Observation", ICML 2023).
The result is returned with ``‖c‖ = 1``; its sensitivity is always re-certified from the
stored coefficients (``toeplitz.certified_sensitivity``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from factorize.errors import SolverError
from factorize.numerics import integer
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .toeplitz import (
    BLT,
    BandedInverse,
    BandedToeplitz,
    Reduction,
    ToeplitzWorkload,
    error_and_gradient,
    pattern_value_and_gradient,
)

__all__ = ["LongOptimum", "banded_objective", "optimize_banded", "sqrt_coefficients"]


@dataclass(frozen=True)
class LongOptimum:
    """An optimised long-horizon strategy: ``objective = error · sensitivity²`` by the smooth
    sensitivity the optimiser used (certify with ``toeplitz.certified_sensitivity``)."""

    strategy: BandedToeplitz | BLT | BandedInverse
    objective: float
    error: float
    iterations: int
    seconds: float
    message: str


def sqrt_coefficients(b: int) -> np.ndarray:
    """``binom(2k, k)/4^k``, k < b: the series of ``(1 − x)^{−1/2}`` (C = L^{1/2})."""
    out = np.ones(b)
    for k in range(1, b):
        out[k] = out[k - 1] * (2 * k - 1) / (2 * k)
    return out


def banded_objective(c: np.ndarray, n: int, workload: ToeplitzWorkload, reduction: Reduction,
               participation: Participation | None, impulse: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``(log(E·S), its gradient in c, E)`` (module docstring); ``impulse`` = e_0 of length n."""
    from scipy.signal import lfilter

    with np.errstate(all="ignore"):
        r = np.asarray(lfilter([1.0], c, impulse))
        if not np.all(np.isfinite(r)):
            return math.inf, np.zeros_like(c), math.inf
        E, g = error_and_gradient(r, workload, reduction)
        v = np.asarray(lfilter([1.0], c, g[::-1]))[::-1]
    dE = np.array([-np.dot(v[m:], r[:n - m]) for m in range(c.size)])
    S, dS = pattern_value_and_gradient(c, n, participation)
    if not (math.isfinite(E) and E > 0 and S > 0):
        return math.inf, np.zeros_like(c), math.inf
    return math.log(E) + math.log(S), dE / E + dS / S, E


def optimize_banded(n: int, bands: int, *, workload: ToeplitzWorkload | None = None,
                    reduction: Reduction = "total", participation: Participation | None = None,
                    max_iter: int = 500, init: np.ndarray | None = None) -> LongOptimum:
    """The b-banded Toeplitz strategy minimising ``E·S`` (module docstring) for n steps."""
    from scipy.optimize import minimize

    n = integer("n", n, 1, PrivacyError)
    b = min(integer("bands", bands, 1, PrivacyError), n)
    w = workload or ToeplitzWorkload.prefix()
    impulse = np.zeros(n)
    impulse[0] = 1.0
    x0 = sqrt_coefficients(b) if init is None else np.asarray(init, dtype=np.float64)[:b]
    t0 = time.perf_counter()

    def fun(c: np.ndarray) -> tuple[float, np.ndarray]:
        val, grad, _ = banded_objective(c, n, w, reduction, participation, impulse)
        return val, grad

    res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "maxcor": 20, "ftol": 1e-13, "gtol": 1e-10})
    c = np.asarray(res.x, dtype=np.float64)
    logJ, _, E = banded_objective(c, n, w, reduction, participation, impulse)
    if not math.isfinite(logJ):
        raise SolverError(f"banded optimisation at n={n}, b={b} ended at a non-invertible strategy")
    scale = float(np.linalg.norm(c))
    return LongOptimum(BandedToeplitz(c / scale, n), math.exp(logJ), E * scale * scale,
                       int(res.nit), time.perf_counter() - t0, str(res.message))
