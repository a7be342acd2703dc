"""The training plan: a long-horizon lower-triangular Toeplitz strategy C for the prefix-sum
workload ``W = L_n`` (DP-FTRL / DP-MF training: the model after step t is the running sum of
the noisy clipped gradients) or its momentum form ``W = L_n M_β`` (heavy-ball SGD: the prefix
sums of the momentum-β averages, ``M_β`` lower-triangular Toeplitz of ``β^k``; Denisov et al.
2022, §5), certified under multi-participation, with its Gaussian σ and its accuracy claims —
and the claims' one evaluation, shared by the builder and the verifier.

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
* ``objective``: the error per unit σ², ``E = ‖W C⁻¹‖_F²`` (``total``) or the worst step's
  ``max_i ‖(W C⁻¹)_i‖²`` (``max``), and the scale-free ``E·Δ̄²`` the optimiser minimised;
  evaluated in O(n·parameters) from the first column r of C⁻¹ — for s the first column of the
  lower-triangular Toeplitz ``W C⁻¹`` (``cumsum(r)``; with momentum ``cumsum(M_β r)``),
  ``‖W C⁻¹‖_F² = Σ_k (n − k)·s_k²`` and the last (largest) row's norm² is ``Σ_k s_k²``
  (``training.toeplitz``, module docstring);
* ``lower_bound``: a certified lower bound on ``E·Δ²`` of *every* factorization of W under the
  participation (``training.long_bound``: the SVD bound of L_n in closed form). With momentum,
  ``σ_j(L M_β) ≥ σ_j(L)/‖M_β⁻¹‖₂`` (Horn & Johnson, *Topics in Matrix Analysis*, 1991,
  Thm 3.3.16: ``σ_j(XY) ≤ σ_j(X)·σ_1(Y)`` with X = L M_β, Y = M_β⁻¹) and ``M_β⁻¹`` is the
  bidiagonal ``I − β·shift``, of norm ≤ 1 + β; leading blocks multiply for lower-triangular
  matrices, so every trace norm of the bound shrinks by at most 1 + β and the bound by
  ``(1 + β)²`` (rounded so that it can only fall).

A *dense* strategy (``kinds.training.dense``: the optimal multi-epoch strategy of
``training.multi_epoch`` for the prefix sums under ``epochs=K``, Choquette-Choo et al. 2023,
§4) stores its n × n matrix and a dual witness instead of parameters; its sensitivity comes from
its Gram matrix, its error from ``W C⁻¹`` and its lower bound from the witness (that module's
docstring), each O(n³) — prefix sums only; the total objective, or the worst step's with the
dual's row weights stored as well.

The evaluation imports numpy alone (no scipy.signal, which loads scipy.optimize): r comes from
``BLT.inverse_column`` (sums of b powers), ``BandedInverse.inverse_column`` (its stored bands)
or, for a banded C, from the blocked solve of
:func:`solve_banded_toeplitz`, which also applies ``M_β`` (the solve with ``(1, −β)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypedDict

import numpy as np

from factorize.plan.errors import PlanError
from factorize.training.certificate import CLAIM_SLACK  # the dense claims' slack

if TYPE_CHECKING:
    from factorize.privacy import Guarantee
    from factorize.privacy.participation import Participation
    from factorize.training.long_bound import LongLowerBound
    from factorize.training.toeplitz import LongSensitivity, LongStrategy

    from .dense import DenseStrategy

#: The objectives: total squared error (γ_F's) or the worst step's (γ₂'s).
Reduction = Literal["total", "max"]
REDUCTIONS: tuple[Reduction, ...] = ("total", "max")
#: Block length of :func:`solve_banded_toeplitz` (at least the number of bands).
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
    """``lower_bound``: ``value`` ≤ error·Δ² of every factorization of W (same reduction),
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
    """A training plan (module docstring): ``n`` steps of the ``workload`` (``prefix`` or
    ``momentum=β``), the ``participation`` (None: each record once), the ``strategy`` record (its parameters are the
    file's arrays), the ``guarantee`` and ``sigma`` (per unit L2 clipping norm), and the claims."""

    plan_kind: ClassVar[str] = "training"

    n: int
    participation: Participation | None
    strategy: LongStrategy | DenseStrategy
    guarantee: Guarantee
    sigma: float
    sensitivity: SensitivityClaim
    objective: ObjectiveClaim
    lower_bound: LowerBoundClaim
    workload: str = "prefix"
    provenance: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_strategy(cls, strategy: LongStrategy | DenseStrategy, participation: Participation | None,
                      guarantee: Guarantee, reduction: Reduction, workload: str = "prefix",
                      provenance: dict[str, Any] | None = None) -> TrainingPlan:
        """The plan of a given strategy for ``workload`` (``prefix`` or ``momentum=β``): σ
        calibrated and every claim derived (:func:`training_claims`) — what the builder writes
        after its optimiser."""
        from .dense import DenseStrategy

        c = training_claims(strategy, participation, guarantee, reduction, workload)
        sens = c.sensitivity
        slack = CLAIM_SLACK if isinstance(strategy, DenseStrategy) else 0.0
        up, down = 1.0 + slack, 1.0 - slack
        delta = sens.value * up  # σ calibrated to the Δ stated, never below the certified one
        return cls(n=strategy.n, participation=participation, strategy=strategy,
                   guarantee=guarantee, sigma=required_sigma(guarantee, delta),
                   sensitivity={"value": delta, "lower": sens.lower * down, "exact": sens.exact,
                                "method": sens.method},
                   objective={"reduction": reduction, "error": c.error * up,
                              "normalised": c.normalised * up * up * up},
                   lower_bound={"value": c.lower_bound.value * down,
                                "participations": c.lower_bound.participations,
                                "period": c.lower_bound.period, "how": c.lower_bound.how},
                   workload=workload, provenance=dict(provenance or {}))

    @property
    def reduction(self) -> Reduction:
        red = self.objective["reduction"]
        if red not in REDUCTIONS:
            raise PlanError(f"unknown objective reduction {red!r}; expected one of {REDUCTIONS}")
        return red

    def arrays(self) -> dict[str, np.ndarray]:
        """The strategy's parameters, the file's arrays (``theta``, ``omega``; ``coef``; or the
        dense ``matrix`` and its dual ``witness``; a banded inverse's ``coef`` are C⁻¹'s bands)."""
        from factorize.training.toeplitz import BLT

        from .dense import DenseStrategy

        s = self.strategy
        if isinstance(s, DenseStrategy):
            out = {"matrix": np.asarray(s.matrix), "witness": np.asarray(s.witness)}
            if s.weights is not None:
                out["weights"] = np.asarray(s.weights)
            return out
        if isinstance(s, BLT):
            return {"theta": np.asarray(s.theta), "omega": np.asarray(s.omega)}
        return {"coef": np.asarray(s.coef)}

    def strategy_header(self) -> dict[str, Any]:
        """The manifest's ``strategy``: its kind and size (the parameters are arrays)."""
        from factorize.training.toeplitz import BLT

        from .dense import DenseStrategy

        s = self.strategy
        if isinstance(s, DenseStrategy):
            return {"kind": s.kind, "lower_triangular": s.lower_triangular}
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
        from factorize.training.toeplitz import BLT, BandedInverse

        from .dense import DenseStrategy

        s, o, lb, sens = self.strategy, self.objective, self.lower_bound, self.sensitivity
        part = "each record in one step" if self.participation is None else self.participation.key
        if isinstance(s, DenseStrategy):
            size = (f"dense {s.n} × {s.n}, " + ("lower-triangular (streamable by forward substitution: "
                                             "state n·d floats)" if s.lower_triangular
                    else "not lower-triangular: no noise stream (plan with --streaming)")
                    + f"; dual witness {s.witness.shape[0]} × {s.witness.shape[1]}"
                    + ("" if s.weights is None else f" and {s.weights.size} row weights"))
        elif isinstance(s, BLT):
            size = f"BLT, {s.buffers} buffers ({2 * s.buffers} parameters θ, ω)"
        elif isinstance(s, BandedInverse):
            size = (f"banded inverse (BISR), C⁻¹ of {s.bands} bands (noise state: the last "
                    f"{s.bands - 1} draws)")
        else:
            size = f"banded Toeplitz, {s.bands} bands"
        per = "total over the n steps" if o["reduction"] == "total" else "at the worst step"
        ratio = o["normalised"] / lb["value"] if lb["value"] > 0 else math.inf
        return [
            f"training    {_workload_words(self.workload)} over n={self.n} steps; participation {part} "
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
            f"every factorization (ratio {ratio:.4f}, gap {ratio - 1.0:.3g}); {lb['how']}",
            "run         not a data pass: open the noise stream in the training loop with "
            "factorize.kinds.training.stream.open_stream(PLAN, d, ledger=..., dataset=...)",
        ]


# ------------------------------------------------------------------------------ evaluation


def solve_banded_toeplitz(coef: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y with ``C y = x`` for the lower-triangular banded Toeplitz C whose first column is
    ``coef`` (b bands, n = len(x)): ``Σ_{j<b} c_j y_{t−j} = x_t``. The first L =
    max(:data:`BLOCK`, b) entries by the recurrence; then block by block, ``T_L y_blk = x_blk −
    H y_prev`` with T_L the leading L × L block of C (its inverse: the lower-triangular Toeplitz
    matrix of C⁻¹'s first L entries) and H the coupling to the previous b − 1 entries:
    ``y_blk = T_L⁻¹ x_blk − (T_L⁻¹ H) y_prev`` — O(n·L) flops in numpy."""
    x = np.asarray(x, dtype=np.float64)
    n = x.size
    c = np.asarray(coef, dtype=np.float64)[:n]
    b = c.size
    y = np.zeros(n)
    L = min(n, max(BLOCK, b))
    for t in range(L):
        m = min(t, b - 1)
        y[t] = (x[t] - float(np.dot(c[1:m + 1], y[t - 1::-1][:m]))) / c[0]
    if n == L:
        return y
    head = np.zeros(L)
    head[0] = 1.0
    r = solve_banded_toeplitz(c, head)  # C⁻¹'s first L entries
    lag = np.arange(L)[:, None] - np.arange(L)[None, :]
    Tinv = np.where(lag >= 0, r[np.clip(lag, 0, None)], 0.0)
    q = b - 1
    i, j = np.arange(q)[:, None], np.arange(q)[None, :]
    H = np.zeros((L, q))
    H[:q] = np.where(j >= i, c[np.clip(i + q - j, 0, q)], 0.0)  # H[i, k] = c_{i+q−k}, k ≥ i
    M = Tinv @ H
    for s in range(L, n, L):
        e = min(s + L, n)
        blk = -(M[:e - s] @ y[s - q:s]) if q else np.zeros(e - s)
        if np.any(x[s:e]):
            blk += Tinv[:e - s, :e - s] @ x[s:e]
        y[s:e] = blk
    return y


def inverse_column(strategy: LongStrategy) -> np.ndarray:
    """The first column of C⁻¹ (floating point; for the error, never for privacy)."""
    from factorize.training.toeplitz import BLT, BandedInverse

    if isinstance(strategy, (BLT, BandedInverse)):
        return strategy.inverse_column()
    impulse = np.zeros(strategy.n)
    impulse[0] = 1.0
    return solve_banded_toeplitz(strategy.coef, impulse)


def momentum_beta(workload: str) -> float | None:
    """β of ``momentum=β`` (None for ``prefix``); any other name, or a β not in canonical form
    (``training.toeplitz.ToeplitzWorkload.momentum``'s name), is refused."""
    from factorize.training.toeplitz import ToeplitzWorkload

    if workload == "prefix":
        return None
    name, _, value = workload.partition("=")
    try:
        beta = float(value) if name == "momentum" else None
    except ValueError:
        beta = None
    if beta is None or ToeplitzWorkload.momentum(beta).name != workload:
        raise PlanError(f"unknown training workload {workload!r}; expected 'prefix' or "
                        "'momentum=β' (0 ≤ β < 1)")
    return beta


def _workload_words(workload: str) -> str:
    beta = momentum_beta(workload)
    return "prefix sums" if beta is None else f"prefix sums of momentum-{beta!r} averages"


def workload_error(workload: str, r: np.ndarray, reduction: Reduction) -> float:
    """``‖W R‖_F²`` (total) or its last (largest) row's norm² (max) for the lower-triangular
    Toeplitz R with first column r (module docstring)."""
    beta = momentum_beta(workload)
    s = np.cumsum(r if beta is None else solve_banded_toeplitz(np.array([1.0, -beta]), r))
    if reduction == "total":
        return float(np.dot(np.arange(r.size, 0, -1, dtype=np.float64), s * s))
    if reduction == "max":
        return float(np.dot(s, s))
    raise PlanError(f"unknown objective reduction {reduction!r}; expected one of {REDUCTIONS}")


def workload_lower_bound(workload: str, n: int, participation: Participation | None,
                         reduction: Reduction) -> LongLowerBound:
    """The certified lower bound on error·Δ² of every factorization of W (module docstring)."""
    from factorize.numerics import round_down, round_up
    from factorize.training.long_bound import LongLowerBound, prefix_lower_bound

    lb = prefix_lower_bound(n, participation, reduction)
    beta = momentum_beta(workload)
    if beta is None:
        return lb
    shrink = round_up((1.0 + beta) ** 2, 3)  # ≥ (1 + β)²
    return LongLowerBound(round_down(lb.value / shrink, 1), lb.reduction, lb.participations,
                          lb.period, lb.how + f"; ÷ (1 + β)² = {shrink!r} for the momentum filter "
                          "(σ_j(L M_β) ≥ σ_j(L)/‖M_β⁻¹‖₂)")


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


def training_claims(strategy: LongStrategy | DenseStrategy, participation: Participation | None,
                    guarantee: Guarantee, reduction: Reduction, workload: str = "prefix") -> TrainingClaims:
    """Every claim of a training plan for ``workload`` (``prefix`` or ``momentum=β``), derived
    from the strategy's parameters (module docstring): what the builder writes and the
    verifier re-derives."""
    from factorize.training.toeplitz import certified_sensitivity

    from .dense import DenseStrategy, dense_claims

    if isinstance(strategy, DenseStrategy):
        if workload != "prefix":
            raise PlanError("a dense training strategy is planned for the prefix sums, not "
                            f"{workload!r}")
        dsens, derror, dbound = dense_claims(strategy, participation, reduction)
        return TrainingClaims(dsens, required_sigma(guarantee, dsens.value), derror, dbound)
    sens = certified_sensitivity(strategy, participation)
    sigma = required_sigma(guarantee, sens.value)
    with np.errstate(all="ignore"):
        error = workload_error(workload, inverse_column(strategy), reduction)
    if not math.isfinite(error):
        raise PlanError("the strategy's inverse overflows: its error is not finite")
    return TrainingClaims(sens, sigma, error,
                          workload_lower_bound(workload, strategy.n, participation, reduction))
