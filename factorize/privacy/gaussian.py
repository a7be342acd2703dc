"""Gaussian noise for (ε, δ)-DP (docs/math.md §6): the analytic Gaussian mechanism, the
discrete Gaussian's σ, and the certified acceptance test both are decided by.

Analytic Gaussian mechanism
---------------------------
(Balle & Wang 2018, ICML, Thm. 8): ``N(0, σ² I)`` added to a query of L2 sensitivity Δ is
(ε, δ)-DP **iff**

    δ(σ) := Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.

δ(σ) is strictly decreasing in σ, so the optimal σ is the root of ``δ(σ) = δ``. Valid for
every ε > 0. See :func:`analytic_gaussian_sigma` and :func:`gaussian_delta`. For comparison,
the classical ``σ = Δ √(2 ln(1.25/δ)) / ε`` (Dwork & Roth 2014, Thm. A.1; ε < 1 only):
:func:`classical_gaussian_sigma`.

Discrete Gaussian accounting
----------------------------
The exact lattice release ``γ · (round(A h / γ) + Y)`` (:mod:`.calibration`,
:mod:`factorize.privacy.sampling`). Canonne, Kamath & Steinke 2020 ("The Discrete Gaussian for
Differential Privacy", NeurIPS; arXiv:2004.00010), multivariate theorem (Thm. 14 in the arXiv
version): if ``q`` maps into ``Z^m`` and ``Σ_j (q_j(x) − q_j(x'))² / σ_j² ≤ ε²`` for all
neighbours, then ``q(x) + Y`` with independent ``Y_j ~ N_Z(0, σ_j²)`` is ``½ε²``-concentrated
DP, i.e. ``ρ``-zCDP with ``ρ = Δ²/(2σ²)`` in lattice units -- *the same ρ as the continuous
Gaussian*. Rescaling by γ changes nothing: ``(Δ/γ)² / (2 (σ/γ)²) = Δ²/(2σ²)``.

* ρ-zCDP target: ``σ = Δ̃/√(2ρ)`` with ``Δ̃ = Δ₂ + γ√m`` -- directly from that theorem
  (:func:`factorize.privacy.zcdp.zcdp_gaussian_sigma`).
* (ε, δ) target: we do **not** use the analytic-Gaussian formula for the discrete Gaussian
  (it is exact only for the continuous one). Instead we use the zCDP guarantee above and the
  conversion of CKS20 Cor. 13 (from their Prop. 12, an improved Rényi-to-approximate-DP
  conversion, cf. Asoodeh et al. 2021; evaluated in :mod:`.zcdp`): a ρ-zCDP mechanism is
  (ε, δ)-DP with

      δ = inf_{α > 1}  exp((α − 1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α .

  Every single α > 1 gives a *valid* δ bound, so numerical optimisation over α can only make
  the bound less tight, never invalid. We bisect for the largest ρ whose (numerically
  minimised) δ is ≤ δ_target, set ``σ = Δ̃/√(2ρ)``, round σ up, and re-verify the final σ at the
  chosen α with a small safety margin in log δ. The result is slightly larger than the analytic
  continuous σ (the conversion is not tight for Gaussians) and smaller than the simple
  ``ρ + 2√(ρ ln(1/δ))`` conversion would give (:func:`discrete_gaussian_sigma`).

Verification (``plan.checks``): a plan's (ε, δ) Gaussian σ is accepted when the calibration's
acceptance test holds at σ and fails at σ·(1 − 1e-9) (:func:`gaussian_approx_dp_holds`), so
no root finder is needed and σs of earlier calibrations verify
(:func:`gaussian_sigma_threshold`). scipy.special / scipy.optimize are imported inside the
functions that use them, never at import (start-up of the run path).
"""

from __future__ import annotations

import math
from typing import Any

from factorize.numerics import U, positive_number

from ._common import LOG_SAFETY, check_delta
from .guarantees import PrivacyError
from .zcdp import zcdp_log_delta

__all__ = [
    "gaussian_delta",
    "gaussian_log_delta",
    "analytic_gaussian_sigma",
    "gaussian_approx_dp_holds",
    "gaussian_sigma_threshold",
    "classical_gaussian_sigma",
    "discrete_gaussian_sigma",
]


# --------------------------------------------------------------------------------------------
# analytic Gaussian mechanism (Balle & Wang 2018)


def log_delta_unit(epsilon: float, s: float) -> float:
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
    return log_delta_unit(eps, sig / sens)


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
    dlt = check_delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    # margin in log δ covering the evaluation error of log δ(σ) (log_ndtr is accurate to a
    # few ulps; 1e-9 is six orders above that): the returned σ is valid for the exact δ(σ)
    target = math.log(dlt) - LOG_SAFETY

    def f(log_s: float) -> float:
        return log_delta_unit(eps, math.exp(log_s)) - target

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


def bisect_boundary(feasible: Any, lo: float, hi: float) -> float:
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
    accounting :func:`calibrate` uses, certified with the log-δ margin ``LOG_SAFETY``: the
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
    target = math.log(check_delta(delta)) - LOG_SAFETY
    sig = positive_number("sigma", sigma, PrivacyError)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    if not discrete:
        if not sig / sens > 0:
            return False  # σ/Δ underflows: no noise to speak of
        return gaussian_log_delta(eps, sig, sens) <= target
    rho = (sens / sig) ** 2 / 2.0
    if not math.isfinite(rho):
        return False  # σ/Δ so small that ρ overflows: far from private
    return zcdp_log_delta(rho, eps)[0] <= target


def gaussian_sigma_threshold(epsilon: float, delta: float, l2_sensitivity: float, *,
                             discrete: bool, near: float | None = None) -> float:
    """The smallest σ passing :func:`gaussian_approx_dp_holds`, to adjacent floats: bracketed
    by halving / doubling from ``near`` (default Δ), then bisected on σ itself. The verifier's
    reference scale for (ε, δ) Gaussian noise — deterministic, no scipy root finder; the
    returned σ passes the test. The planner's calibrated σ (:func:`analytic_gaussian_sigma`,
    :func:`discrete_gaussian_sigma`) lies above it by its own round-up (about 1e-11, relative).
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = check_delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)

    def holds(sigma: float) -> bool:
        return gaussian_approx_dp_holds(eps, dlt, sigma, sens, discrete=discrete)

    if near is not None:
        hi = positive_number("near", near, PrivacyError)
        lo = hi * (1.0 - 1e-9)
        if holds(hi) and not holds(lo):  # the verifier's case: a stated σ at the threshold
            return bisect_boundary(holds, lo, hi)
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
    return bisect_boundary(holds, lo, hi)


def classical_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Classical ``σ = Δ √(2 ln(1.25/δ)) / ε`` (Dwork & Roth 2014, Thm. A.1) -- for comparison.

    Looser than :func:`analytic_gaussian_sigma` and valid only for ε < 1 (raises otherwise).
    """
    eps = positive_number("epsilon", epsilon, PrivacyError)
    dlt = check_delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    if not eps < 1:
        raise PrivacyError("the classical Gaussian bound is only valid for epsilon < 1")
    return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


# --------------------------------------------------------------------------------------------
# discrete Gaussian (Canonne, Kamath & Steinke 2020): zCDP, then the CKS20 Cor. 13 conversion


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
    dlt = check_delta(delta)
    sens = positive_number("l2_sensitivity", l2_sensitivity, PrivacyError)
    target = math.log(dlt) - LOG_SAFETY

    def ok(rho: float) -> bool:
        return zcdp_log_delta(rho, eps)[0] <= target

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

