"""The training plan: a long-horizon lower-triangular Toeplitz strategy C for the prefix-sum
workload ``L_n`` (DP-FTRL / DP-MF training: the model after step t is the running sum of the
noisy clipped gradients), certified under multi-participation, with its Gaussian σ and its
accuracy claims — and the claims' one evaluation, shared by the builder and the verifier.

Setting (Denisov et al., "Improved Differential Privacy for SGD via Optimal Private Linear
Operators on Adaptive Streams", NeurIPS 2022, §2; Choquette-Choo et al., "Multi-Epoch Matrix
Factorization Mechanisms for Private Machine Learning", ICML 2023, §2). Step t adds
``σ·(C⁻¹z)_t`` to the clipped gradient sum (``training.stream``); the privacy is that of the
Gaussian mechanism ``Cx + σz`` at the L2 sensitivity Δ of C under the plan's participation
(``training.toeplitz.certified_sensitivity``, from the stored parameters alone), the add/remove
relation (one record's clipped contributions, each of norm ≤ 1, appear or not). What the plan
claims (:func:`training_claims`):

* ``sensitivity``: the certified upper bound Δ̄ (and the attained lower value, whether they
  meet, how it was obtained);
* ``sigma``: at least the σ the guarantee needs at Δ̄ — zCDP: ``σ = Δ̄/√(2ρ)`` (Bun & Steinke,
  "Concentrated Differential Privacy", TCC 2016, Prop. 1.6); (ε, δ): the analytic Gaussian's
  condition (Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy", ICML
  2018, Thm 8; ``privacy.gaussian``);
* ``objective``: the error per unit σ², ``E = ‖L_n C⁻¹‖_F²`` (``total``) or the worst step's
  ``max_i ‖(L_n C⁻¹)_i‖²`` (``max``), and the scale-free ``E·Δ̄²`` the optimiser minimised;
  evaluated in O(n·parameters) from the first column r of C⁻¹ — for ``s = cumsum(r)`` (the
  first column of ``L_n C⁻¹``), ``‖L_n C⁻¹‖_F² = Σ_k (n − k)·s_k²`` and the last row's norm² is
  ``Σ_k s_k²`` (``training.toeplitz``, module docstring);
* ``lower_bound``: a certified lower bound on ``E·Δ²`` of *every* factorization of ``L_n``
  under the participation (``training.long_bound``: the SVD bound of L_n in closed form).

The evaluation imports numpy alone (no scipy.signal, which loads scipy.optimize): r comes from
``BLT.inverse_column`` (sums of b powers) or, for a banded C, from the blocked recurrence of
:func:`banded_inverse_column`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

import numpy as np

from factorize.plan.errors import PlanError

if TYPE_CHECKING:
    from factorize.privacy import Guarantee
    from factorize.privacy.participation import Participation
    from factorize.training.long_bound import LongLowerBound
    from factorize.training.toeplitz import LongSensitivity, LongStrategy

#: The workloads a training plan serves (the lower bound is L_n's: prefix sums only).
WORKLOADS = ("prefix",)
#: The objectives: total squared error (γ_F's) or the worst step's (γ₂'s).
Reduction = Literal["total", "max"]
REDUCTIONS: tuple[Reduction, ...] = ("total", "max")
#: Block length of :func:`banded_inverse_column` (at least the number of bands).
BLOCK = 256


class SensitivityClaim(TypedDict):
    """``sensitivity``: Δ̄ ≥ Δ₂ under the participation, the attained ``lower`` ≤ Δ₂, whether
    they meet (``exact``) and how (``training.toeplitz.LongSensitivity``)."""

    value: float
    lower: float
    exact: bool
    method: str


class ObjectiveClaim(TypedDict):
    """``objective``: the ``reduction``, the error per unit σ² and ``normalised`` = error·Δ̄²."""

    reduction: str
    error: float
    normalised: float


class LowerBoundClaim(TypedDict):
    """``lower_bound``: ``value`` ≤ error·Δ² of every factorization of L_n (same reduction),
    the participations K' and period p it uses, and how it was obtained."""

    value: float
    participations: int
    period: int
    how: str


@dataclass(frozen=True)
class TrainingClaims:
    """What :func:`training_claims` derives from a strategy, its participation, guarantee and
    reduction: the certified sensitivity, the σ the guarantee needs there, the error per unit
    σ², and the certified lower bound."""

    sensitivity: LongSensitivity
    sigma: float
    error: float
    lower_bound: LongLowerBound

    @property
    def normalised(self) -> float:
        return self.error * self.sensitivity.value ** 2


@dataclass(frozen=True)
class TrainingPlan:
    """A training plan (module docstring): ``n`` steps of the prefix-sum workload, the
    ``participation`` (None: each record once), the ``strategy`` record (its parameters are the
    file's arrays), the ``guarantee`` and ``sigma`` (per unit L2 clipping norm), and the claims."""

    plan_kind: ClassVar[str] = "training"

    n: int
    participation: Participation | None
    strategy: LongStrategy
    guarantee: Guarantee
    sigma: float
    sensitivity: SensitivityClaim
    objective: ObjectiveClaim
    lower_bound: LowerBoundClaim
    workload: str = "prefix"
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_strategy(cls, strategy: LongStrategy, participation: Participation | None,
                      guarantee: Guarantee, reduction: Reduction,
                      provenance: dict[str, Any] | None = None) -> TrainingPlan:
        """The plan of a given strategy: σ calibrated and every claim derived
        (:func:`training_claims`) — what the builder writes after its optimiser."""
        c = training_claims(strategy, participation, guarantee, reduction)
        sens = c.sensitivity
        return cls(n=strategy.n, participation=participation, strategy=strategy,
                   guarantee=guarantee, sigma=c.sigma,
                   sensitivity={"value": sens.value, "lower": sens.lower, "exact": sens.exact,
                                "method": sens.method},
                   objective={"reduction": reduction, "error": c.error, "normalised": c.normalised},
                   lower_bound={"value": c.lower_bound.value,
                                "participations": c.lower_bound.participations,
                                "period": c.lower_bound.period, "how": c.lower_bound.how},
                   provenance=dict(provenance or {}))

    @property
    def reduction(self) -> Reduction:
        red = self.objective["reduction"]
        if red not in REDUCTIONS:
            raise PlanError(f"unknown objective reduction {red!r}; expected one of {REDUCTIONS}")
        return red

    def arrays(self) -> dict[str, np.ndarray]:
        """The strategy's parameters, the file's arrays (``theta``, ``omega`` or ``coef``)."""
        from factorize.training.toeplitz import BLT

        s = self.strategy
        if isinstance(s, BLT):
            return {"theta": np.asarray(s.theta), "omega": np.asarray(s.omega)}
        return {"coef": np.asarray(s.coef)}

    def strategy_header(self) -> dict[str, Any]:
        """The manifest's ``strategy``: its kind and size (the parameters are arrays)."""
        from factorize.training.toeplitz import BLT

        s = self.strategy
        if isinstance(s, BLT):
            return {"kind": s.kind, "buffers": s.buffers}
        return {"kind": s.kind, "bands": s.bands}

    def manifest(self) -> dict[str, Any]:
        return {
            "plan_kind": self.plan_kind, "workload": self.workload, "n": self.n,
            "participation": None if self.participation is None else self.participation.key,
            "neighbouring": "add_remove", "strategy": self.strategy_header(),
            "guarantee": self.guarantee.to_dict(),
            "noise": {"family": "gaussian", "sampler": "float", "sigma": self.sigma},
            "sensitivity": dict(self.sensitivity), "objective": dict(self.objective),
            "lower_bound": dict(self.lower_bound), "provenance": dict(self.provenance),
        }

    def summary_lines(self) -> list[str]:
        from factorize.training.toeplitz import BLT

        s, o, lb, sens = self.strategy, self.objective, self.lower_bound, self.sensitivity
        part = "each record in one step" if self.participation is None else self.participation.key
        size = (f"BLT, {s.buffers} buffers ({2 * s.buffers} parameters θ, ω)" if isinstance(s, BLT)
                else f"banded Toeplitz, {s.bands} bands")
        per = "total over the n steps" if o["reduction"] == "total" else "at the worst step"
        ratio = o["normalised"] / lb["value"] if lb["value"] > 0 else math.inf
        return [
            f"training    {self.workload} sums over n={self.n} steps; participation {part} "
            "(add/remove one record's clipped contributions)",
            f"strategy    {size}",
            f"guarantee   {self.guarantee}",
            f"noise       Gaussian σ = {self.sigma:.12g} per unit L2 clipping norm (float "
            "sampler: a ChaCha20 stream, drawn step by step in the training loop)",
            f"sensitivity Δ ≤ {sens['value']:.12g}" + (" (exact)" if sens["exact"] else
                                                       f" (attained ≥ {sens['lower']:.12g})")
            + f"; {sens['method']}",
            f"error       {per}, per unit σ²: {o['error']:.6g}; at σ: {self.sigma ** 2 * o['error']:.6g}"
            + (f" (RMS per step {math.sqrt(self.sigma ** 2 * o['error'] / self.n):.6g})"
               if o["reduction"] == "total" else ""),
            f"objective   error·Δ² = {o['normalised']:.6g} ≥ lower bound {lb['value']:.6g} for "
            f"every factorization (ratio {ratio:.4f}); {lb['how']}",
            "run         not a data pass: open the noise stream in the training loop with "
            "factorize.kinds.training.stream.open_stream(PLAN, d, ledger=..., dataset=...)",
        ]


# ------------------------------------------------------------------------------ evaluation


def banded_inverse_column(coef: np.ndarray, n: int) -> np.ndarray:
    """The first column r of C⁻¹ for the banded Toeplitz C with first column ``coef`` (b bands):
    ``Σ_{j<b} c_j r_{t−j} = [t = 0]``. The first L = max(:data:`BLOCK`, b) entries by the
    recurrence; then block by block, ``T_L r_blk = −H r_prev`` with T_L the leading L × L block
    of C (whose inverse is the lower-triangular Toeplitz matrix of r[:L]) and H the coupling to
    the previous b − 1 entries: ``r_blk = −(T_L⁻¹ H) r_prev``, O(n·b) flops in numpy."""
    c = np.asarray(coef, dtype=np.float64)[:n]
    b = c.size
    r = np.zeros(n)
    r[0] = 1.0 / c[0]
    if b == 1 or n == 1:
        return r
    L = min(n, max(BLOCK, b))
    for t in range(1, L):
        m = min(t, b - 1)
        r[t] = -float(np.dot(c[1:m + 1], r[t - 1::-1][:m])) / c[0]
    if n == L:
        return r
    q = b - 1
    i, j = np.arange(q)[:, None], np.arange(q)[None, :]
    H = np.where(j >= i, c[np.clip(i + q - j, 0, q)], 0.0)  # H[i, k] = c_{i+q−k}, k ≥ i
    lag = np.arange(L)[:, None] - np.arange(q)[None, :]
    Tinv = np.where(lag >= 0, r[np.clip(lag, 0, None)], 0.0)  # T_L⁻¹[:, :q]
    M = Tinv @ H
    for s in range(L, n, L):
        e = min(s + L, n)
        r[s:e] = -(M[:e - s] @ r[s - q:s])
    return r


def inverse_column(strategy: LongStrategy) -> np.ndarray:
    """The first column of C⁻¹ (floating point; for the error, never for privacy)."""
    from factorize.training.toeplitz import BLT

    if isinstance(strategy, BLT):
        return strategy.inverse_column()
    return banded_inverse_column(strategy.coef, strategy.n)


def prefix_error(r: np.ndarray, reduction: Reduction) -> float:
    """``‖L_n R‖_F²`` (total) or its last (largest) row's norm² (max) for the lower-triangular
    Toeplitz R with first column r (module docstring)."""
    s = np.cumsum(r)
    if reduction == "total":
        return float(np.dot(np.arange(r.size, 0, -1, dtype=np.float64), s * s))
    if reduction == "max":
        return float(np.dot(s, s))
    raise PlanError(f"unknown objective reduction {reduction!r}; expected one of {REDUCTIONS}")


def required_sigma(guarantee: Guarantee, sensitivity: float) -> float:
    """The σ the guarantee needs at L2 sensitivity Δ (module docstring; ``training.stream.
    calibrate_sigma``); pure DP is refused (the stream's noise is Gaussian)."""
    from factorize.training.stream import calibrate_sigma

    return calibrate_sigma(guarantee, sensitivity)


def sigma_suffices(guarantee: Guarantee, sigma: float, sensitivity: float) -> bool:
    """Whether Gaussian noise of σ gives ``guarantee`` at sensitivity Δ: zCDP ``σ ≥ Δ/√(2ρ)``
    rounded up; (ε, δ) the analytic Gaussian's acceptance test itself at σ."""
    from factorize.privacy import ZCDP, ApproxDP
    from factorize.privacy.gaussian import gaussian_approx_dp_holds

    if isinstance(guarantee, ApproxDP):
        return gaussian_approx_dp_holds(guarantee.epsilon, guarantee.delta, sigma, sensitivity,
                                        discrete=False)
    if isinstance(guarantee, ZCDP):
        return sigma >= required_sigma(guarantee, sensitivity)
    raise PlanError(f"a training plan's Gaussian noise gives zCDP or (ε, δ)-DP, not {guarantee}")


def training_claims(strategy: LongStrategy, participation: Participation | None,
                    guarantee: Guarantee, reduction: Reduction) -> TrainingClaims:
    """Every claim of a training plan, derived from the strategy's parameters (module
    docstring): what the builder writes and the verifier re-derives."""
    from factorize.training.long_bound import prefix_lower_bound
    from factorize.training.toeplitz import certified_sensitivity

    sens = certified_sensitivity(strategy, participation)
    sigma = required_sigma(guarantee, sens.value)
    with np.errstate(all="ignore"):
        error = prefix_error(inverse_column(strategy), reduction)
    if not math.isfinite(error):
        raise PlanError("the strategy's inverse overflows: its error is not finite")
    return TrainingClaims(sens, sigma, error, prefix_lower_bound(strategy.n, participation, reduction))
