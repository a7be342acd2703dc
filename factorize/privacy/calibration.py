"""Noise calibration (docs/math.md §6): ``NoiseSpec`` and :func:`calibrate`.

Given a privacy guarantee and the sensitivity of the strategy ``A``, choose the noise
distribution and its scale for the release ``A h + Z``. One module per job, every name
re-exported here:

* :mod:`.gaussian` -- (ε, δ)-DP Gaussian noise: the analytic Gaussian mechanism (Balle & Wang
  2018), the discrete Gaussian's σ (Canonne, Kamath & Steinke 2020, "CKS20"), and the
  certified acceptance test the verifier decides with;
* :mod:`.zcdp` -- ρ-zCDP: the Gaussian's σ and the conversions to (ε, δ)-DP (Bun & Steinke
  2016; CKS20 Cor. 13);
* this module -- the closed forms for pure DP (Laplace, discrete Laplace, ℓ2 K-norm), the
  sensitivity after lattice rounding, ``NoiseSpec`` and :func:`calibrate`, which dispatches.

Continuous ("float") calibrations
---------------------------------
* (ε, δ)-DP, Gaussian: the *analytic Gaussian mechanism* (Balle & Wang 2018, ICML, Thm. 8),
  exact: σ is the root of ``δ(σ) = δ`` (:mod:`.gaussian`).
* ρ-zCDP, Gaussian: ``σ = Δ/√(2ρ)``; ρ-zCDP implies ``(ρ + 2√(ρ ln(1/δ)), δ)``-DP
  (Bun & Steinke 2016, Prop. 1.3) (:mod:`.zcdp`).
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

Discrete Gaussian accounting (:mod:`.gaussian`): by CKS20 Thm. 14 the discrete Gaussian is
ρ-zCDP with ``ρ = Δ²/(2σ²)``, the same ρ as the continuous Gaussian, in lattice units or not.

* ρ-zCDP target: ``σ = Δ̃/√(2ρ)`` with ``Δ̃ = Δ₂ + γ√m`` (:mod:`.zcdp`).
* (ε, δ) target: the zCDP guarantee and the conversion of CKS20 Cor. 13, not the
  analytic-Gaussian formula (exact only for the continuous Gaussian).

Discrete Laplace accounting: for ``q`` into ``Z^m`` with L1 sensitivity Δ̃₁ (lattice units) and
``Y_j`` i.i.d. with ``P(y) ∝ exp(−|y|/t)``, the output density ratio for neighbours is at most
``exp(Σ_j |q_j(x) − q_j(x')| / t) ≤ exp(Δ̃₁/t)``, so ``t = Δ̃₁/ε`` (lattice units) gives ε-DP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from factorize.choices import NOISE_FAMILIES, SAMPLERS, NoiseFamily, Sampler
from factorize.numerics import is_power_of_two, positive_number

from ._common import LOG_SAFETY as LOG_SAFETY
from ._common import check_delta as check_delta
from ._common import privacy_round_up
from .gaussian import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    discrete_gaussian_sigma,
    gaussian_approx_dp_holds,
    gaussian_delta,
    gaussian_log_delta,
    gaussian_sigma_threshold,
)
from .gaussian import bisect_boundary as bisect_boundary
from .gaussian import log_delta_unit as log_delta_unit
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
from .zcdp import ALPHA_GRID as ALPHA_GRID
from .zcdp import INV_GOLDEN as INV_GOLDEN
from .zcdp import golden_min as golden_min
from .zcdp import log_conv as log_conv
from .zcdp import zcdp_delta, zcdp_epsilon, zcdp_gaussian_sigma, zcdp_to_approx_dp
from .zcdp import zcdp_log_delta as zcdp_log_delta

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
# Laplace and K-norm


def laplace_scale(epsilon: float, l1_sensitivity: float) -> float:
    """Laplace scale ``b = Δ₁/ε`` per coordinate (ε-DP)."""
    return privacy_round_up(positive_number("l1_sensitivity", l1_sensitivity, PrivacyError) / positive_number("epsilon", epsilon, PrivacyError), 1)


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
    theta = privacy_round_up(positive_number("l2_sensitivity", l2_sensitivity, PrivacyError) / positive_number("epsilon", epsilon, PrivacyError), 1)
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
        return privacy_round_up(s + g * math.sqrt(mm), 3)
    if n == "l1":
        return privacy_round_up(s + g * mm, 2)
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
    def from_dict(cls, data: Mapping[str, Any]) -> NoiseSpec:
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


def calibrate(  # noqa: C901 (counted allow-list)
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
