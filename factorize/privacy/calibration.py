"""Noise calibration (docs/math.md §6).

Given a privacy guarantee and the sensitivity of the strategy ``A``, choose the noise
distribution and its scale for the release ``A h + Z``.

Continuous ("float") calibrations
---------------------------------
* (ε, δ)-DP, Gaussian: the *analytic Gaussian mechanism* (Balle & Wang 2018, ICML, Thm. 8):
  ``N(0, σ² I)`` added to a query of L2 sensitivity Δ is (ε, δ)-DP **iff**

      δ(σ) := Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.

  δ(σ) is strictly decreasing in σ, so the optimal σ is the root of ``δ(σ) = δ``. Valid for
  every ε > 0. See :func:`analytic_gaussian_sigma` and :func:`gaussian_delta`.
* ρ-zCDP, Gaussian: ``σ = Δ/√(2ρ)``; ρ-zCDP implies ``(ρ + 2√(ρ ln(1/δ)), δ)``-DP
  (Bun & Steinke 2016, Prop. 1.3).
* ε-DP, Laplace: scale ``b = Δ₁/ε`` per coordinate.
* ε-DP, ℓ2-ball K-norm mechanism (docs/math.md §6.4): density ∝ ``exp(−ε‖z‖₂/Δ)`` on R^m, radius
  ~ Gamma(shape m, scale Δ/ε) times a uniform direction; ``E‖Z‖² = m(m+1)Δ²/ε²``.

Exact lattice ("discrete") calibrations
---------------------------------------
The exact-sampler route (see :mod:`factorize.privacy.sampling`) releases

    γ · ( round(A h / γ) + Y ),   Y_i i.i.d. discrete Gaussian / discrete Laplace on Z,

i.e. the real answers are *deterministically* rounded to the grid γZ and integer noise is added.

Sensitivity after rounding (:func:`discretized_sensitivity`): write ``round(y) = y + r`` with
``|r_i| ≤ γ/2`` per coordinate. For neighbours,
``round(y) − round(y') = (y − y') + (r − r')`` with ``|r_i − r'_i| ≤ γ``, hence
``‖round(y) − round(y')‖₂ ≤ ‖y − y'‖₂ + ‖r − r'‖₂ ≤ Δ₂ + γ√m`` and
``‖round(y) − round(y')‖₁ ≤ Δ₁ + γ m``. Only the coordinates where ``y`` and ``y'`` differ
can round differently (the measurement ``round(Ã h/γ)`` is computed exactly,
``privacy.lattice``), so ``m`` may be replaced by the *spread* s ≤ m, the most coordinates
a neighbouring change can move (``sensitivity.kron_spread``: the largest number of non-zeros
in a column of Ã, twice that under replace): ``Δ₂ + γ√s`` and ``Δ₁ + γs``. When every entry
of Ã is an integer and γ = 2⁻ᵏ ≤ 1, ``Ãh/γ`` is already an integer for every histogram h: the
rounding moves nothing, s = 0, and the sensitivity is Δ itself.

Discrete Gaussian accounting. Canonne, Kamath & Steinke 2020 ("The Discrete Gaussian for
Differential Privacy", NeurIPS; arXiv:2004.00010), multivariate theorem (Thm. 14 in the arXiv
version): if ``q`` maps into ``Z^m`` and ``Σ_j (q_j(x) − q_j(x'))² / σ_j² ≤ ε²`` for all
neighbours, then ``q(x) + Y`` with independent ``Y_j ~ N_Z(0, σ_j²)`` is ``½ε²``-concentrated
DP, i.e. ``ρ``-zCDP with ``ρ = Δ²/(2σ²)`` in lattice units -- *the same ρ as the continuous
Gaussian*. Rescaling by γ changes nothing: ``(Δ/γ)² / (2 (σ/γ)²) = Δ²/(2σ²)``.

* ρ-zCDP target: ``σ = Δ̃/√(2ρ)`` with ``Δ̃ = Δ₂ + γ√m`` -- directly from that theorem.
* (ε, δ) target: we do **not** use the analytic-Gaussian formula for the discrete Gaussian
  (it is exact only for the continuous one). Instead we use the zCDP guarantee above and the
  conversion of CKS20 Cor. 13 (from their Prop. 12, an improved Rényi-to-approximate-DP
  conversion, cf. Asoodeh et al. 2021): a ρ-zCDP mechanism is (ε, δ)-DP with

      δ = inf_{α > 1}  exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α .

  Every single α > 1 gives a *valid* δ bound, so numerical optimisation over α can only make
  the bound less tight, never invalid. We bisect for the largest ρ whose (numerically
  minimised) δ is ≤ δ_target, set ``σ = Δ̃/√(2ρ)``, round σ up, and re-verify the final σ at the
  chosen α with a small safety margin in log δ. The result is slightly larger than the analytic
  continuous σ (the conversion is not tight for Gaussians) and smaller than the simple
  ``ρ + 2√(ρ ln(1/δ))`` conversion would give. The Rényi order is searched on a log grid and
  then by golden section (no scipy.optimize: the verifier re-evaluates this on the run path).

Verification (``plan.checks``): a plan's (ε, δ) Gaussian σ is accepted when the calibration's
acceptance test holds at σ and fails at σ·(1 − 1e-9) (:func:`gaussian_approx_dp_holds`), so
no root finder is needed and σs of earlier calibrations verify.

Discrete Laplace accounting: for ``q`` into ``Z^m`` with L1 sensitivity Δ̃₁ (lattice units) and
``Y_j`` i.i.d. with ``P(y) ∝ exp(−|y|/t)``, the output density ratio for neighbours is at most
``exp(Σ_j |q_j(x) − q_j(x')| / t) ≤ exp(Δ̃₁/t)``, so ``t = Δ̃₁/ε`` (lattice units) gives ε-DP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from factorize.choices import NOISE_FAMILIES, SAMPLERS, NoiseFamily, Sampler
from factorize.numerics import U, is_power_of_two, positive_number, round_up

from .guarantees import (
    ZCDP,
    ApproxDP,
    Guarantee,
    Neighbouring,
    PrivacyError,
    PureDP,
    guarantee_from_dict,
)
from .sensitivity import Sensitivity

__all__ = [
    "gaussian_delta",
    "gaussian_log_delta",
    "analytic_gaussian_sigma",
    "gaussian_approx_dp_holds",
    "gaussian_sigma_threshold",
    "classical_gaussian_sigma",
    "zcdp_gaussian_sigma",
    "zcdp_to_approx_dp",
    "zcdp_delta",
    "zcdp_epsilon",
    "discrete_gaussian_sigma",
    "laplace_scale",
    "KNormParams",
    "l2_ball_knorm",
    "knorm_expected_sq_norm",
    "discretized_sensitivity",
    "NoiseSpec",
    "calibrate",
]


# --------------------------------------------------------------------------------------------
# validation helpers


def _up(x: float, ops: int = 2) -> float:
    """A computed privacy-critical quantity rounded up past the error of ``ops`` roundings
    (``numerics.round_up``: ×(1 + (ops+2)·2⁻⁵²), then one ulp)."""
    return round_up(x, ops)


#: Margin in log δ by which every calibration is certified: the floating-point evaluation of a
#: log δ bound (log_ndtr, log1p, a few products) is accurate to ~1e-15 absolute for the
#: parameter ranges accepted here; 1e-9 covers it with room, so δ holds for the exact value.
#: (The CKS20 conversion is evaluated as ``−α log1p(1/a)``, accurate for every α; the analytic
#: Gaussian's ``ε + log Φ(−a−b) − log Φ(a−b)`` cancels, losing about 2L·ulp(L)/ε with
#: L = ln(1/δ): within the margin for ε ≳ 1e-3, not below about ε = 1e-4 at δ = 1e-12.)
_LOG_SAFETY = 1e-9


def _delta(v: Any) -> float:
    x = positive_number("delta", v, PrivacyError)
    if not x < 1:
        raise PrivacyError(f"delta must satisfy 0 < delta < 1, got {v!r}")
    return x


# --------------------------------------------------------------------------------------------
# analytic Gaussian mechanism (Balle & Wang 2018)


def _log_delta_unit(epsilon: float, s: float) -> float:
    """A certified upper bound on log δ for noise std ``s`` relative to the sensitivity
    (s = σ/Δ, itself computed with one rounding); −inf when δ ≤ 0.

    δ = Φ(a − b) − e^ε Φ(−a − b), a = 1/(2s), b = εs. Evaluated as
    ``l₁ + log(−expm1(d))`` with ``l₁ = log Φ(a−b)``, ``l₂ = log Φ(−a−b)`` (``scipy.special.
    log_ndtr``, accurate where both terms are tiny and free of e^ε overflow) and
    ``d = ε + l₂ − l₁``. For small ε the two logs nearly cancel in d, so the rounding of l₁
    and l₂ (absolute ≈ u·|l|) is a *relative* error of about u·|l|/|d| in −expm1(d): at
    ε = 1e-5 more than the calibration's 1e-9 margin. So the function bounds the error
    instead of hoping it is small (``docs/math.md §10``; Higham's model, u = 2⁻⁵³):

    * x₁ = a − b and x₂ = −a − b are within ``e_x = 5u(|a| + |b|)`` of their exact values
      (s, the division, the product and the difference: one rounding each);
    * ``|d/dx log Φ(x)| = φ(x)/Φ(x) ≤ |x| + 1`` for every x (the Mills-ratio bound
      ``(1 − Φ(t))/φ(t) > 2/(t + √(t² + 4))``, Birnbaum 1942), and log_ndtr is accurate to a
      few ulps of Φ plus the rounding of the log: each lᵢ is within
      ``(|xᵢ| + 1 + e_x)·e_x + 16u(1 + |lᵢ|)`` of log Φ at the exact xᵢ;
    * d is within ``e_d = e₁ + e₂ + 4u(ε + |l₁| + |l₂|)`` of its exact value, and
      ``log(−expm1(·))`` decreases in d, so ``l₁ + e₁ + log(−expm1(d − e_d))`` bounds log δ
      from above, up to the rounding of that last evaluation (``+ 8u(|l₁| + |log(…)| + 1)``).

    If ``d − e_d ≥ 0`` the exact d is ≥ 0 and δ ≤ 0 (−inf). Floating-point error can only make
    the returned value larger, i.e. only add noise to a calibration that uses it.
    """
    from scipy import special  # here, not at import (start-up of the run path)

    u = U
    a = 0.5 / s
    b = epsilon * s
    x1, x2 = a - b, -a - b
    ex = 5.0 * u * (abs(a) + abs(b))
    l1 = float(special.log_ndtr(x1))
    if l1 == -math.inf:  # δ ≤ Φ(a − b) = 0 (σ/Δ = inf); also keeps −inf − −inf out below
        return -math.inf
    l2 = float(special.log_ndtr(x2))
    e1 = (abs(x1) + 1.0 + ex) * ex + 16.0 * u * (1.0 + abs(l1))
    e2 = (abs(x2) + 1.0 + ex) * ex + 16.0 * u * (1.0 + abs(l2))
    d = epsilon + l2 - l1  # log of the ratio of the two terms; δ > 0 iff d < 0
    ed = e1 + e2 + 4.0 * u * (epsilon + abs(l1) + abs(l2))
    d_low = d - ed
    if not d_low < 0:
        return -math.inf
    tail = math.log(-math.expm1(d_low))
    return l1 + e1 + tail + 8.0 * u * (abs(l1) + abs(tail) + 1.0)


def gaussian_log_delta(epsilon: float, sigma: float, l2_sensitivity: float) -> float:
    """Natural log of :func:`gaussian_delta` (−inf if the δ is 0 to working precision)."""
    eps = positive_number("epsilon", epsilon, PrivacyError)
    sig = positive_number("sigma", sigma, PrivacyError)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    return _log_delta_unit(eps, sig / sens)


def gaussian_delta(epsilon: float, sigma: float, l2_sensitivity: float) -> float:
    """Smallest δ for which ``N(0, σ²I)`` noise on an L2-sensitivity-Δ query is (ε, δ)-DP.

    The left-hand side of Balle & Wang 2018, Thm. 8:
    ``Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``, evaluated in log space (see
    :func:`gaussian_log_delta`). Exact characterisation: the mechanism is (ε, δ)-DP iff
    ``gaussian_delta(ε, σ, Δ) ≤ δ``.
    """
    ld = gaussian_log_delta(epsilon, sigma, l2_sensitivity)
    return 0.0 if ld == -math.inf else math.exp(ld)


def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest σ making the Gaussian mechanism (ε, δ)-DP (Balle & Wang 2018, analytic).

    Solves ``δ(σ) = δ`` (see :func:`gaussian_delta`) for ``s = σ/Δ`` by bracketing and
    ``brentq`` on ``log s`` with relative tolerance ~1e-13, in log space for δ. The root is then
    rounded *up* (by ≈ 1e-11 relative) and the result re-checked with :func:`gaussian_delta`;
    if the check fails σ is increased further, so the returned σ always satisfies
    ``gaussian_delta(ε, σ, Δ) ≤ δ``, while ``σ·(1 − 1e-9)`` does not. Valid for every ε > 0.

    The planner's calibration (and the local randomizer's): scipy's root finder, imported here
    only. The verifier does not call it: it evaluates the condition itself
    (:func:`gaussian_approx_dp_holds`, :func:`gaussian_sigma_threshold`), so the run path
    imports no scipy.optimize.
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = _delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    # margin in log δ covering the evaluation error of log δ(σ) (log_ndtr is accurate to a
    # few ulps; 1e-9 is six orders above that): the returned σ is valid for the exact δ(σ)
    target = math.log(dlt) - _LOG_SAFETY

    def f(log_s: float) -> float:
        return _log_delta_unit(eps, math.exp(log_s)) - target

    # δ(s) → 1 as s → 0 and → 0 as s → ∞, strictly decreasing: bracket around log s = 0.
    lo, hi = 0.0, 0.0
    while f(lo) <= 0:
        lo -= 1.0
        if lo < -800:
            raise PrivacyError("analytic Gaussian: cannot bracket the root (delta too close to 1?)")
    while f(hi) > 0:
        hi += 1.0
        if hi > 800:
            raise PrivacyError("analytic Gaussian: cannot bracket the root")
    # f may be -inf at hi (δ underflows); brentq needs finite values, so tighten the bracket.
    while f(hi) == -math.inf:
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    if f(hi) == -math.inf:
        log_s = hi
    else:
        from scipy import optimize  # here, not at import (start-up of the run path)

        log_s = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4e-15, maxiter=500)
    s = math.exp(log_s) * (1.0 + 1e-11)
    sigma = s * sens
    # Re-verify with the public evaluator (includes the division σ/Δ) and round up if needed.
    for _ in range(200):
        if gaussian_approx_dp_holds(eps, dlt, sigma, sens, discrete=False):
            return sigma
        sigma *= 1.0 + 1e-12
    raise PrivacyError("analytic Gaussian: verification of the calibrated sigma failed")


def _bisect_boundary(feasible: Any, lo: float, hi: float) -> float:
    """The feasible end of a bracket ``[lo, hi]`` (``feasible(lo)`` false, ``feasible(hi)``
    true, feasibility monotone) bisected until no float lies between its ends: the smallest
    feasible float up to the evaluation's own noise. Deterministic (about 60 evaluations)."""
    for _ in range(2100):  # every step halves the bracket or stops: far more than needed
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if feasible(mid):
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_approx_dp_holds(epsilon: float, delta: float, sigma: float, l2_sensitivity: float,
                             *, discrete: bool) -> bool:
    """Whether Gaussian noise of scale σ on a query of L2 sensitivity Δ is (ε, δ)-DP by the
    accounting :func:`calibrate` uses, certified with the log-δ margin ``_LOG_SAFETY``: the
    acceptance test of :func:`analytic_gaussian_sigma` (``discrete=False``: Balle & Wang's exact
    characterisation, ``log δ(σ) ≤ log δ − margin``) and of :func:`discrete_gaussian_sigma`
    (``discrete=True``: ρ = Δ²/(2σ²)-zCDP (CKS20 Thm. 14) and the CKS20 Cor. 13 bound, at the
    best α found, ``≤ log δ − margin`` — every α gives a valid bound, so a search that misses
    the optimum can only refuse, never wrongly accept).

    The calibrations return a σ that passes this very test (the same floating-point
    evaluation), and the verifier decides with it: the stated σ must pass (privacy) and
    ``σ·(1 − 1e-9)`` must not (the plan states the calibrated noise, not more). No root
    finder or optimiser of scipy is needed (start-up of the run path).
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    target = math.log(_delta(delta)) - _LOG_SAFETY
    sig = positive_number("sigma", sigma, PrivacyError)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    if not discrete:
        if not sig / sens > 0:
            return False  # σ/Δ underflows: no noise to speak of
        return gaussian_log_delta(eps, sig, sens) <= target
    rho = (sens / sig) ** 2 / 2.0
    if not math.isfinite(rho):
        return False  # σ/Δ so small that ρ overflows: far from private
    return _zcdp_log_delta(rho, eps)[0] <= target


def gaussian_sigma_threshold(epsilon: float, delta: float, l2_sensitivity: float, *,
                             discrete: bool, near: float | None = None) -> float:
    """The smallest σ passing :func:`gaussian_approx_dp_holds`, to adjacent floats: bracketed
    by halving / doubling from ``near`` (default Δ), then bisected on σ itself. The verifier's
    reference scale for (ε, δ) Gaussian noise — deterministic, no scipy root finder; the
    returned σ passes the test. The planner's calibrated σ (:func:`analytic_gaussian_sigma`,
    :func:`discrete_gaussian_sigma`) lies above it by its own round-up (about 1e-11, relative).
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = _delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)

    def holds(sigma: float) -> bool:
        return gaussian_approx_dp_holds(eps, dlt, sigma, sens, discrete=discrete)

    if near is not None:
        hi = positive_number("near", near, PrivacyError)
        lo = hi * (1.0 - 1e-9)
        if holds(hi) and not holds(lo):  # the verifier's case: a stated σ at the threshold
            return _bisect_boundary(holds, lo, hi)
    lo = hi = sens
    if holds(hi):
        lo = hi * 0.5
        while holds(lo):
            hi, lo = lo, lo * 0.5
            if not lo > 0:
                raise PrivacyError("Gaussian threshold: every scale passes (cannot bracket)")
    else:
        while not holds(hi):
            lo, hi = hi, hi * 2.0
            if not math.isfinite(hi):
                raise PrivacyError("Gaussian threshold: no finite scale passes (cannot bracket)")
    return _bisect_boundary(holds, lo, hi)


def classical_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Classical ``σ = Δ √(2 ln(1.25/δ)) / ε`` (Dwork & Roth 2014, Thm. A.1) -- for comparison.

    Looser than :func:`analytic_gaussian_sigma` and valid only for ε < 1 (raises otherwise).
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = _delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    if not eps < 1:
        raise PrivacyError("the classical Gaussian bound is only valid for epsilon < 1")
    return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


# --------------------------------------------------------------------------------------------
# zCDP


def zcdp_gaussian_sigma(rho: float, l2_sensitivity: float) -> float:
    """``σ = Δ/√(2ρ)``: ``N(0, σ²I)`` on an L2-sensitivity-Δ query is ρ-zCDP (Bun & Steinke 2016).

    Also valid for the discrete Gaussian on Z^m with integer-valued query (CKS20, Thm. 14).
    """
    return _up(positive_number("l2_sensitivity", l2_sensitivity, PrivacyError) / math.sqrt(2.0 * positive_number("rho", rho, PrivacyError)), 2)


def zcdp_to_approx_dp(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP: ``ε = ρ + 2√(ρ ln(1/δ))`` (Bun & Steinke 2016)."""
    r = positive_number("rho", rho, PrivacyError)
    d = _delta(delta)
    return _up(r + 2.0 * math.sqrt(r * math.log(1.0 / d)) * (1.0 + 1e-12), 8)


def _log_conv(alpha_minus_1: float, rho: float, epsilon: float) -> float:
    """log of exp((α−1)(αρ−ε))/(α−1) · (1−1/α)^α at α = 1 + a (CKS20 Cor. 13 integrand)."""
    a = alpha_minus_1
    alpha = 1.0 + a
    # (1 − 1/α)^α = (a/α)^α ; log = α (log a − log1p(a)) = −α log1p(1/a). The last form has
    # no cancellation: log a − log1p(a) loses ~α·ulp(log a) (≈ 2e-9 at α = 1e6, more than the
    # certified log-δ margin), −α log1p(1/a) is accurate to a few ulps of α/a ≈ 1.
    return a * (alpha * rho - epsilon) - math.log(a) - alpha * math.log1p(1.0 / a)


_ALPHA_GRID = np.logspace(-8, 12, 161)


def _zcdp_log_delta(rho: float, epsilon: float) -> tuple[float, float]:
    """(min over α of the log-δ bound, the minimising α − 1). Any α gives a valid bound."""
    # Coarse log-grid over a = α − 1 ∈ [1e-8, 1e12], then golden-section search on log a
    # between the best point's neighbours (deterministic; no scipy.optimize on the run path).
    grid = _ALPHA_GRID
    alpha = 1.0 + grid
    log_a = np.log(grid)
    vals = grid * (alpha * rho - epsilon) - log_a - alpha * np.log1p(1.0 / grid)  # _log_conv
    k = int(np.argmin(vals))
    best_a, best_v = float(grid[k]), float(vals[k])
    if not math.isfinite(best_v):
        return best_v, best_a
    lo = math.log(grid[max(k - 1, 0)])
    hi = math.log(grid[min(k + 1, grid.size - 1)])
    u, v = _golden_min(lambda t: _log_conv(math.exp(t), rho, epsilon), lo, hi, 1e-11)
    if v < best_v:
        best_a, best_v = math.exp(u), v
    return best_v, best_a


#: 1/φ, the golden-section ratio.
_INV_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _golden_min(f: Any, lo: float, hi: float, xtol: float) -> tuple[float, float]:
    """Golden-section search for the minimum of ``f`` on ``[lo, hi]`` (unimodal there) until
    the bracket is narrower than ``xtol``: ``(x, f(x))`` of the best point evaluated (a NaN
    value is never the best). Deterministic; about 50 evaluations for the α search."""
    c = hi - _INV_GOLDEN * (hi - lo)
    d = lo + _INV_GOLDEN * (hi - lo)
    fc, fd = f(c), f(d)
    best_x, best_f = (c, fc) if not fd < fc else (d, fd)
    for _ in range(200):
        if not hi - lo > xtol:
            break
        if not fd < fc:  # the minimum lies in [lo, d]; NaN at d moves there too
            hi, d, fd = d, c, fc
            c = hi - _INV_GOLDEN * (hi - lo)
            fc = f(c)
            if fc < best_f:
                best_x, best_f = c, fc
        else:  # in [c, hi]
            lo, c, fc = c, d, fd
            d = lo + _INV_GOLDEN * (hi - lo)
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
    v, _ = _zcdp_log_delta(r, e)
    return min(1.0, _up(math.exp(v + _LOG_SAFETY), 2))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest ε (to ~1e-12 relative, rounded up) with ``zcdp_delta(ρ, ε) ≤ δ``."""
    r = positive_number("rho", rho, PrivacyError)
    d = _delta(delta)
    target = math.log(d)
    hi = zcdp_to_approx_dp(r, d)  # valid, so the tight conversion satisfies δ there
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _zcdp_log_delta(r, mid)[0] <= target:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-13 * hi:
            break
    return hi




def discrete_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """σ for the (multivariate) discrete Gaussian to be (ε, δ)-DP, via zCDP (CKS20).

    By CKS20 Thm. 14 the discrete Gaussian with parameter σ on an integer-valued query of L2
    sensitivity Δ is ρ-zCDP with ``ρ = Δ²/(2σ²)``; by CKS20 Cor. 13 that implies (ε, δ)-DP with
    ``δ = inf_α exp((α−1)(αρ−ε))/(α−1)(1−1/α)^α``. We bisect on log ρ for the largest ρ whose
    bound is ≤ δ·e^{−1e-9}, return ``σ = Δ/√(2ρ)`` rounded up, and re-verify (at the α found) that
    the returned σ satisfies the bound. ``Δ`` must already include any rounding inflation
    (:func:`discretized_sensitivity`). The same σ is also valid for the continuous Gaussian.
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = _delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    target = math.log(dlt) - _LOG_SAFETY

    def ok(rho: float) -> bool:
        return _zcdp_log_delta(rho, eps)[0] <= target

    # Feasible start: the simple conversion ρ + 2√(ρ L) = ε  ⇒  √ρ = √(L + ε) − √L.
    L = math.log(1.0 / dlt)
    rho_lo = (math.sqrt(L + eps) - math.sqrt(L)) ** 2 * (1 - 1e-6)
    while not ok(rho_lo):  # pragma: no cover - the simple conversion is valid; guard anyway
        rho_lo *= 0.5
        if rho_lo < 1e-300:
            raise PrivacyError("discrete Gaussian calibration failed to find a feasible rho")
    rho_hi = rho_lo * 2.0
    while ok(rho_hi):
        rho_lo = rho_hi
        rho_hi *= 2.0
        if rho_hi > 1e300:
            raise PrivacyError("discrete Gaussian calibration failed to bracket rho")
    for _ in range(200):
        mid = math.sqrt(rho_lo * rho_hi)
        if not (rho_lo < mid < rho_hi):
            break
        if ok(mid):
            rho_lo = mid
        else:
            rho_hi = mid
        if rho_hi / rho_lo - 1.0 <= 1e-12:
            break
    sigma = sens / math.sqrt(2.0 * rho_lo) * (1.0 + 1e-12)
    for _ in range(200):
        if gaussian_approx_dp_holds(eps, dlt, sigma, sens, discrete=True):
            return sigma
        sigma *= 1.0 + 1e-12
    raise PrivacyError("discrete Gaussian: verification of the calibrated sigma failed")


# --------------------------------------------------------------------------------------------
# Laplace and K-norm


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale ``b = Δ₁/ε`` per coordinate (ε-DP)."""
    return _up(positive_number("l1_sensitivity", l1_sensitivity, PrivacyError) / positive_number("epsilon", epsilon, PrivacyError), 1)


@dataclass(frozen=True)
class KNormParams:
    """ℓ2-ball K-norm mechanism on R^m: density ∝ exp(−ε‖z‖₂/Δ) (docs/math.md §6.4; Nikolov 2023, Lemmas 14–15).

    Sample ``Z = R·U`` with ``R ~ Gamma(shape=dim, scale=radius_scale)`` and ``U`` uniform on the
    unit sphere S^{m−1}; ``radius_scale = Δ/ε``. ``expected_sq_norm = m(m+1)Δ²/ε²``.
    """

    dim: int
    gamma_shape: float
    radius_scale: float
    expected_sq_norm: float


def knorm_expected_sq_norm(epsilon: float, l2_sensitivity: float, dim: int) -> float:
    """``E‖Z‖₂² = m(m+1)Δ²/ε²`` for the ℓ2 K-norm mechanism (Gamma(m) radius: E R² = m(m+1)θ²)."""
    m = _dim(dim)
    theta = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError) / positive_number("epsilon", epsilon, PrivacyError)
    return m * (m + 1) * theta * theta


def _count(n: Any, name: str) -> int:
    """A non-negative integer count (a spread of 0: no coordinate is rounded, module
    docstring)."""
    if isinstance(n, bool) or int(n) != n or int(n) < 0:
        raise PrivacyError(f"{name} must be a non-negative integer, got {n!r}")
    return int(n)


def _dim(dim: Any) -> int:
    if isinstance(dim, bool) or int(dim) != dim or int(dim) < 1:
        raise PrivacyError(f"dim must be a positive integer, got {dim!r}")
    return int(dim)


def l2_ball_knorm(epsilon: float, l2_sensitivity: float, dim: int) -> KNormParams:
    """Parameters of the ε-DP ℓ2 K-norm mechanism for an L2-sensitivity-Δ query into R^dim."""
    m = _dim(dim)
    theta = _up(positive_number("l2_sensitivity", l2_sensitivity, PrivacyError) / positive_number("epsilon", epsilon, PrivacyError), 1)
    return KNormParams(m, float(m), theta, knorm_expected_sq_norm(epsilon, l2_sensitivity, m))


# --------------------------------------------------------------------------------------------
# discretisation


def discretized_sensitivity(sensitivity: float, m: int, grid: float, norm: str) -> float:
    """Sensitivity after deterministic rounding of each coordinate to ``grid·Z``; ``m`` is
    the number of coordinates that can differ between neighbours (at most the number of
    released coordinates; the spread of the module docstring).

    ``round(y) = y + r`` with ``|r_i| ≤ γ/2``, so for neighbours ``|r_i − r'_i| ≤ γ`` on the
    ``m`` coordinates that can move (0 on the others) and
    ``‖round(y) − round(y')‖₂ ≤ Δ₂ + ‖r − r'‖₂ ≤ Δ₂ + γ√m`` (``norm="l2"``),
    ``‖round(y) − round(y')‖₁ ≤ Δ₁ + γm`` (``norm="l1"``).
    """
    s = float(sensitivity)
    if not math.isfinite(s) or s < 0:
        raise PrivacyError(f"sensitivity must be finite and >= 0, got {sensitivity!r}")
    mm = _count(m, "m")
    g = positive_number("grid", grid, PrivacyError)
    n = str(norm).lower()
    # Rounded up by a few ulps so float rounding never makes the bound too small.
    if n == "l2":
        return _up(s + g * math.sqrt(mm), 3)
    if n == "l1":
        return _up(s + g * mm, 2)
    raise PrivacyError(f"norm must be 'l1' or 'l2', got {norm!r}")


# --------------------------------------------------------------------------------------------
# NoiseSpec and calibrate()



@dataclass(frozen=True)
class NoiseSpec:
    """What noise to add, and why it is private.

    ``family``: "gaussian" | "laplace" | "l2_knorm". ``scale``: σ (Gaussian std parameter),
    b (Laplace scale) or Δ/ε (K-norm radius scale), in the units of ``A h``.
    ``sensitivity``: the sensitivity value the scale was calibrated to (after discretisation
    inflation when ``grid`` is set); ``sensitivity_norm``: "l1" | "l2"; ``relation``: the
    neighbouring relation. ``guarantee``: the privacy guarantee. ``sampler``:
    "discrete_gaussian" | "discrete_laplace" (exact lattice samplers on ``grid·Z``) or "float"
    (floating-point sampling, vulnerable to Mironov-2012 attacks; fine for simulation).
    ``grid``: lattice spacing γ > 0 for the discrete samplers, None for "float".
    ``dim``: number of released coordinates m (needed for discretisation and K-norm).
    ``base_sensitivity``: sensitivity before discretisation inflation. ``accounting``: the
    result used to calibrate.
    """

    family: NoiseFamily
    scale: float
    sensitivity: float
    sensitivity_norm: str
    relation: Neighbouring
    guarantee: Guarantee
    sampler: Sampler
    grid: float | None = None
    dim: int | None = None
    base_sensitivity: float | None = None
    accounting: str = ""
    spread: int | None = None

    def __post_init__(self) -> None:
        if self.family not in NOISE_FAMILIES:
            raise PrivacyError(f"noise family must be one of {NOISE_FAMILIES}, got {self.family!r}")
        if self.sampler not in SAMPLERS:
            raise PrivacyError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}")
        object.__setattr__(self, "scale", positive_number("scale", self.scale, PrivacyError))
        sens = float(self.sensitivity)
        if not math.isfinite(sens) or sens < 0:
            raise PrivacyError(f"sensitivity must be finite and >= 0, got {self.sensitivity!r}")
        object.__setattr__(self, "sensitivity", sens)
        if self.sensitivity_norm not in ("l1", "l2"):
            raise PrivacyError(f"sensitivity_norm must be 'l1' or 'l2', got {self.sensitivity_norm!r}")
        object.__setattr__(self, "relation", Neighbouring.parse(self.relation))
        if not isinstance(self.guarantee, (ApproxDP, ZCDP, PureDP)):
            raise PrivacyError(f"guarantee must be ApproxDP, ZCDP or PureDP, got {self.guarantee!r}")
        expected = {"gaussian": "l2", "l2_knorm": "l2", "laplace": "l1"}[self.family]
        if self.sensitivity_norm != expected:
            raise PrivacyError(f"{self.family} noise is calibrated to {expected} sensitivity")
        if self.sampler == "float":
            if self.grid is not None:
                raise PrivacyError("a float sampler has no grid")
        else:
            want = {"discrete_gaussian": "gaussian", "discrete_laplace": "laplace"}[self.sampler]
            if self.family != want:
                raise PrivacyError(f"sampler {self.sampler!r} requires family {want!r}")
            object.__setattr__(self, "grid", positive_number("grid", self.grid, PrivacyError))
            if self.dim is None:
                raise PrivacyError(
                    "a discrete sampler spec needs dim (the rounding inflation depends on it)"
                )
        if self.dim is not None:
            object.__setattr__(self, "dim", _dim(self.dim))
        if self.spread is not None:
            object.__setattr__(self, "spread", _count(self.spread, "spread"))
            if self.dim is None or self.spread > self.dim or self.grid is None:
                raise PrivacyError("a spread needs a grid and a dim, and is at most dim")
        if self.base_sensitivity is not None:
            object.__setattr__(self, "base_sensitivity", float(self.base_sensitivity))

    @property
    def is_exact(self) -> bool:
        """True when the spec requires an exact lattice sampler."""
        return self.sampler != "float"

    @property
    def variance_bound(self) -> float:
        """Upper bound on the per-coordinate noise variance (in the units of ``A h``).

        Gaussian: σ² (the discrete Gaussian has variance ≤ σ², CKS20 Cor. 9). Laplace: 2b²
        (the discrete Laplace on γZ with scale b has smaller variance). K-norm: E‖Z‖²/m.
        """
        if self.family == "gaussian":
            return self.scale**2
        if self.family == "laplace":
            return 2.0 * self.scale**2
        if self.dim is None:
            raise PrivacyError("K-norm variance needs dim")
        return (self.dim + 1) * self.scale**2

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            "scale": self.scale,
            "sensitivity": self.sensitivity,
            "sensitivity_norm": self.sensitivity_norm,
            "relation": self.relation.key,
            "guarantee": self.guarantee.to_dict(),
            "sampler": self.sampler,
            "grid": self.grid,
            "dim": self.dim,
            "base_sensitivity": self.base_sensitivity,
            "accounting": self.accounting,
            **({} if self.spread is None else {"spread": self.spread}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "NoiseSpec":
        required = ("family", "scale", "sensitivity", "sensitivity_norm", "relation", "guarantee", "sampler")
        missing = [k for k in required if k not in data]
        if missing:
            raise PrivacyError(f"noise spec dict is missing {missing}")
        known = set(required) | {"grid", "dim", "base_sensitivity", "accounting", "spread"}
        extra = set(data) - known
        if extra:
            raise PrivacyError(f"noise spec dict has unexpected keys {sorted(extra)}")
        return cls(
            family=data["family"],
            scale=data["scale"],
            sensitivity=data["sensitivity"],
            sensitivity_norm=data["sensitivity_norm"],
            relation=Neighbouring.parse(data["relation"]),
            guarantee=guarantee_from_dict(data["guarantee"]),
            sampler=data["sampler"],
            grid=data.get("grid"),
            dim=data.get("dim"),
            base_sensitivity=data.get("base_sensitivity"),
            accounting=data.get("accounting", ""),
            spread=data.get("spread"),
        )


def _sens_value(s: Any, norm: str, relation: Neighbouring | None) -> tuple[float | None, Neighbouring | None]:
    if s is None:
        return None, relation
    if isinstance(s, Sensitivity):
        if s.norm != norm:
            raise PrivacyError(f"sensitivity_{norm} was given a {s.norm} sensitivity")
        if relation is not None and s.relation is not relation:
            raise PrivacyError(
                f"sensitivities disagree on the neighbouring relation ({relation.key} vs {s.relation.key})"
            )
        return s.value, s.relation
    v = float(s)
    if not math.isfinite(v) or v < 0:
        raise PrivacyError(f"sensitivity_{norm} must be finite and >= 0, got {s!r}")
    return v, relation


_ACCOUNTING_ANALYTIC = "analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8)"
_ACCOUNTING_DISCRETE = "discrete Gaussian: rho-zCDP (CKS20 Thm. 14) -> (eps, delta) by CKS20 Cor. 13"


def calibrate(
    guarantee: Guarantee,
    sensitivity_l2: float | Sensitivity | None = None,
    sensitivity_l1: float | Sensitivity | None = None,
    grid: float | None = None,
    *,
    dim: int | None = None,
    relation: Neighbouring | str | None = None,
    family: str | None = None,
    spread: int | None = None,
    reference: float | None = None,
) -> NoiseSpec:
    """Choose the noise for ``guarantee``: Gaussian for ApproxDP / ZCDP, Laplace for PureDP.

    ``sensitivity_l2`` / ``sensitivity_l1``: floats or :class:`Sensitivity` objects (their
    relation is recorded; floats default to ``relation`` or add/remove). ``grid``: when given,
    the release is rounded to ``grid·Z`` and an exact discrete sampler is required; the
    sensitivity is inflated by :func:`discretized_sensitivity` (needs ``dim`` = m, the number of
    rows of A), or by the smaller ``spread`` when given: the most coordinates neighbours can
    move (``sensitivity.kron_spread``), recorded in the spec. ``family="l2_knorm"`` selects the ℓ2 K-norm mechanism for PureDP (float only).

    * ApproxDP, float: analytic Gaussian (Balle & Wang 2018).
    * ApproxDP, grid: discrete Gaussian, zCDP (CKS20 Thm. 14) + CKS20 Cor. 13 conversion.
    * ZCDP: σ = Δ̃/√(2ρ) (float or discrete Gaussian).
    * PureDP: Laplace b = Δ̃₁/ε (float or discrete Laplace); or K-norm with scale Δ₂/ε.

    ``reference`` (the verifier's call, with a plan's stated scale): for (ε, δ) Gaussian noise
    the scale returned is :func:`gaussian_sigma_threshold` searched from it — the smallest
    scale passing the acceptance test of the calibrations, found without scipy.optimize —
    instead of the planner's search; every other calibration is a closed form and ignores it.
    """
    if not isinstance(guarantee, (ApproxDP, ZCDP, PureDP)):
        raise PrivacyError(f"guarantee must be ApproxDP, ZCDP or PureDP, got {guarantee!r}")
    rel = Neighbouring.parse(relation) if relation is not None else None
    s2, rel = _sens_value(sensitivity_l2, "l2", rel)
    s1, rel = _sens_value(sensitivity_l1, "l1", rel)
    rel = rel or Neighbouring.ADD_REMOVE
    if grid is not None:
        grid = positive_number("grid", grid, PrivacyError)
        if not is_power_of_two(grid):
            raise PrivacyError(f"the lattice grid must be a power of two (the release divides by "
                               f"it exactly), got {grid!r}")
        if dim is None:
            raise PrivacyError("calibrate(grid=...) needs dim (number of released coordinates m)")
    if dim is not None:
        dim = _dim(dim)
    if spread is not None:
        spread = _count(spread, "spread")
        if grid is None or dim is None or spread > dim:
            raise PrivacyError("calibrate(spread=...) needs a grid and spread <= dim")
    # coordinates a neighbour moves (grid plans: dim is given, checked above; unused otherwise)
    moving = spread if spread is not None else dim if dim is not None else 0

    if isinstance(guarantee, PureDP):
        fam = family or "laplace"
        if fam == "laplace":
            if s1 is None:
                raise PrivacyError("pure DP with Laplace noise needs sensitivity_l1")
            sens = discretized_sensitivity(s1, moving, grid, "l1") if grid is not None else s1
            if not sens > 0:
                raise PrivacyError("sensitivity is 0: no noise is needed (refusing to calibrate)")
            return NoiseSpec(
                "laplace",
                laplace_scale(guarantee.epsilon, sens),
                sens,
                "l1",
                rel,
                guarantee,
                "discrete_laplace" if grid is not None else "float",
                grid,
                dim,
                s1,
                "laplace: ratio of densities <= exp(L1 sensitivity / scale)",
                spread,
            )
        if fam == "l2_knorm":
            if grid is not None:
                raise PrivacyError("no exact lattice sampler for the l2 K-norm mechanism; use grid=None")
            if s2 is None or dim is None:
                raise PrivacyError("the l2 K-norm mechanism needs sensitivity_l2 and dim")
            if not s2 > 0:
                raise PrivacyError("sensitivity is 0: no noise is needed (refusing to calibrate)")
            p = l2_ball_knorm(guarantee.epsilon, s2, dim)
            return NoiseSpec(
                "l2_knorm", p.radius_scale, s2, "l2", rel, guarantee, "float", None, dim, s2,
                "l2 K-norm mechanism (MATH.md §3): density ∝ exp(-eps ||z||_2 / Delta)",
            )
        raise PrivacyError(f"family {fam!r} cannot give pure DP; use 'laplace' or 'l2_knorm'")

    fam = family or "gaussian"
    if fam != "gaussian":
        raise PrivacyError(f"family {fam!r} is not supported for {type(guarantee).__name__}; use 'gaussian'")
    if s2 is None:
        raise PrivacyError("Gaussian noise needs sensitivity_l2")
    sens = discretized_sensitivity(s2, moving, grid, "l2") if grid is not None else s2
    if not sens > 0:
        raise PrivacyError("sensitivity is 0: no noise is needed (refusing to calibrate)")
    if isinstance(guarantee, ZCDP):
        sigma = zcdp_gaussian_sigma(guarantee.rho, sens)
        acc = "zCDP Gaussian sigma = Delta/sqrt(2 rho)" + (
            " (discrete Gaussian: CKS20 Thm. 14)" if grid is not None else ""
        )
    elif reference is not None:
        sigma = gaussian_sigma_threshold(guarantee.epsilon, guarantee.delta, sens,
                                         discrete=grid is not None, near=reference)
        acc = _ACCOUNTING_DISCRETE if grid is not None else _ACCOUNTING_ANALYTIC
    elif grid is None:
        sigma = analytic_gaussian_sigma(guarantee.epsilon, guarantee.delta, sens)
        acc = _ACCOUNTING_ANALYTIC
    else:
        sigma = discrete_gaussian_sigma(guarantee.epsilon, guarantee.delta, sens)
        acc = _ACCOUNTING_DISCRETE
    return NoiseSpec(
        "gaussian", sigma, sens, "l2", rel, guarantee,
        "discrete_gaussian" if grid is not None else "float", grid, dim, s2, acc, spread,
    )
