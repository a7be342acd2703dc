"""zCDP (docs/math.md §6): the Gaussian's σ for ρ-zCDP and the conversions from ρ-zCDP to
(ε, δ)-DP.

* ρ-zCDP, Gaussian: ``σ = Δ/√(2ρ)`` (Bun & Steinke 2016); the same σ for the discrete Gaussian
  on an integer-valued query (Canonne, Kamath & Steinke 2020, Thm. 14; :mod:`.gaussian`):
  :func:`zcdp_gaussian_sigma`.
* ρ-zCDP implies ``(ρ + 2√(ρ ln(1/δ)), δ)``-DP (Bun & Steinke 2016, Prop. 1.3):
  :func:`zcdp_to_approx_dp`.
* The tighter conversion of CKS20 Cor. 13 (Canonne, Kamath & Steinke 2020, "The Discrete
  Gaussian for Differential Privacy", NeurIPS; from their Prop. 12, an improved
  Rényi-to-approximate-DP conversion, cf. Asoodeh et al. 2021): a ρ-zCDP mechanism is
  (ε, δ)-DP with

      δ = inf_{α > 1}  exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α .

  Every single α > 1 gives a *valid* δ bound, so numerical optimisation over α can only make
  the bound less tight, never invalid (:func:`zcdp_delta`, :func:`zcdp_epsilon`; the discrete
  Gaussian's (ε, δ) calibration, :func:`factorize.privacy.gaussian.discrete_gaussian_sigma`).
  The Rényi order is searched on a log grid and then by golden section (no scipy.optimize:
  the verifier re-evaluates this on the run path).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from factorize.numerics import positive_number

from ._common import LOG_SAFETY, check_delta, privacy_round_up
from .guarantees import PrivacyError

__all__ = [
    "zcdp_gaussian_sigma",
    "zcdp_to_approx_dp",
    "zcdp_delta",
    "zcdp_epsilon",
]


# --------------------------------------------------------------------------------------------
# zCDP


def zcdp_gaussian_sigma(rho: float, l2_sensitivity: float) -> float:
    """``σ = Δ/√(2ρ)``: ``N(0, σ²I)`` on an L2-sensitivity-Δ query is ρ-zCDP (Bun & Steinke 2016).

    Also valid for the discrete Gaussian on Z^m with integer-valued query (CKS20, Thm. 14).
    """
    return privacy_round_up(positive_number("l2_sensitivity", l2_sensitivity, PrivacyError) / math.sqrt(2.0 * positive_number("rho", rho, PrivacyError)), 2)


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP: ``ε = ρ + 2√(ρ ln(1/δ))`` (Bun & Steinke 2016)."""
    r = positive_number("rho", rho, PrivacyError)
    d = check_delta(delta)
    return privacy_round_up(r + 2.0 * math.sqrt(r * math.log(1.0 / d)) * (1.0 + 1e-12), 8)


def log_conv(alpha_minus_1: float, rho: float, epsilon: float) -> float:
    """log of exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α at α = 1 + a (CKS20 Cor. 13 integrand)."""
    a = alpha_minus_1
    alpha = 1.0 + a
    # (1 − 1/α)^α = (a/α)^α ; log = α (log a − log1p(a)) = −α log1p(1/a). The last form has
    # no cancellation: log a − log1p(a) loses ~α·ulp(log a) (≈ 2e-9 at α = 1e6, more than the
    # certified log-δ margin), −α log1p(1/a) is accurate to a few ulps of α/a ≈ 1.
    return a * (alpha * rho - epsilon) - math.log(a) - alpha * math.log1p(1.0 / a)


ALPHA_GRID = np.logspace(-8, 12, 161)


def zcdp_log_delta(rho: float, epsilon: float) -> tuple[float, float]:
    """(min over α of the log-δ bound, the minimising α − 1). Any α gives a valid bound."""
    # Coarse log-grid over a = α − 1 ∈ [1e-8, 1e12], then golden-section search on log a
    # between the best point's neighbours (deterministic; no scipy.optimize on the run path).
    grid = ALPHA_GRID
    alpha = 1.0 + grid
    log_a = np.log(grid)
    vals = grid * (alpha * rho - epsilon) - log_a - alpha * np.log1p(1.0 / grid)  # log_conv
    k = int(np.argmin(vals))
    best_a, best_v = float(grid[k]), float(vals[k])
    if not math.isfinite(best_v):
        return best_v, best_a
    lo = math.log(grid[max(k - 1, 0)])
    hi = math.log(grid[min(k + 1, grid.size - 1)])
    u, v = golden_min(lambda t: log_conv(math.exp(t), rho, epsilon), lo, hi, 1e-11)
    if v < best_v:
        best_a, best_v = math.exp(u), v
    return best_v, best_a


#: 1/φ, the golden-section ratio.
INV_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def golden_min(f: Any, lo: float, hi: float, xtol: float) -> tuple[float, float]:
    """Golden-section search for the minimum of ``f`` on ``[lo, hi]`` (unimodal there) until
    the bracket is narrower than ``xtol``: ``(x, f(x))`` of the best point evaluated (a NaN
    value is never the best). Deterministic; about 50 evaluations for the α search."""
    c = hi - INV_GOLDEN * (hi - lo)
    d = lo + INV_GOLDEN * (hi - lo)
    fc, fd = f(c), f(d)
    best_x, best_f = (c, fc) if not fd < fc else (d, fd)
    for _ in range(200):
        if not hi - lo > xtol:
            break
        if not fd < fc:  # the minimum lies in [lo, d]; NaN at d moves there too
            hi, d, fd = d, c, fc
            c = hi - INV_GOLDEN * (hi - lo)
            fc = f(c)
            if fc < best_f:
                best_x, best_f = c, fc
        else:  # in [c, hi]
            lo, c, fc = c, d, fd
            d = lo + INV_GOLDEN * (hi - lo)
            fd = f(d)
            if fd < best_f:
                best_x, best_f = d, fd
    return best_x, best_f


def zcdp_delta(rho: float, epsilon: float) -> float:
    """δ such that ρ-zCDP implies (ε, δ)-DP, by the conversion of CKS20 Cor. 13:

    ``δ = inf_{α>1} exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α`` (infimum found numerically; every α
    gives a valid bound, so the returned value is always a valid δ). Tighter than
    :func:`zcdp_to_approx_dp`.
    """
    r = positive_number("rho", rho, PrivacyError)
    e = positive_number("epsilon", epsilon, PrivacyError)
    v, _ = zcdp_log_delta(r, e)
    return min(1.0, privacy_round_up(math.exp(v + LOG_SAFETY), 2))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε (to ~1e-12 relative, rounded up) with ``zcdp_delta(ρ, ε) ≤ δ``."""
    r = positive_number("rho", rho, PrivacyError)
    d = check_delta(delta)
    target = math.log(d)
    hi = zcdp_to_approx_dp(r, d)  # valid, so the tight conversion satisfies δ there
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if zcdp_log_delta(r, mid)[0] <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi
