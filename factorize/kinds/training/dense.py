"""The dense multi-epoch strategy of a training plan and its claims, re-derived from the stored
matrix and dual witness alone (numpy and ``training.certificate``; no scipy.optimize).

Setting (Choquette-Choo et al., "Multi-Epoch Matrix Factorization Mechanisms for Private
Machine Learning", ICML 2023, §2–§4): the prefix-sum workload ``W = L_n`` of n = K·b steps under
``epochs=K`` (record i takes part at steps i, i + b, …). The builder (``training.multi_epoch``)
solves the exact program ``min tr(W X⁻¹ Wᵀ)`` over the elliptope-dual sensitivity constraints
and stores the strategy ``C`` (n × n, unit certified sensitivity; lower-triangular when planned
with ``--streaming``, ``training.streaming``: the same ``CᵀC``) and the dual witness ``F`` (n × K).

Claims (:func:`dense_claims`), each recomputed by the verifier:

* sensitivity: ``privacy.participation.participation_sensitivity`` of C under ``epochs=K`` —
  ``Δ² ≤ max_π Σ|X_ππ|`` with X = CᵀC and its rounding bound (every |Y_ij| ≤ 1 on the
  elliptope), rounded up;
* error per unit σ²: ``‖R‖_F²`` for ``R = W C⁻¹``, a certified Frobenius upper bound of the
  computed R, stated for the factorization (R, C) whose relative residual ``‖W − R C‖_max /
  ‖W‖_max`` must stay within ``training.certificate.DEFAULT_RESIDUAL_TOL``;
* lower bound on ``error·Δ²`` of every factorization: the dual witness's ``T²/N``
  (``training.certificate.epochs_lower_bound``: T a certified lower bound on ``‖W B‖_tr``, N the
  multipliers rounded up), so floating-point error can only lower it.

Worst step (objective ``max``, the γ₂-type one; ``training.multi_epoch``'s (P∞)): the error is
``max_t ‖R_t‖²`` (certified row norms, rounded up) and the plan also stores the dual's row
``weights`` p (one per step); the lower bound is ``T²/(N·S)`` for the row-weighted workload
``D_s W``, ``s = fl(√p)``, ``S ≥ Σ s_t²`` (weak duality: ``max_t e_t ≥ Σ p_t e_t / Σ p_t``;
``training.certificate``). A total plan stores no weights; a worst-step plan must.

Noise: step t adds ``σ·(C⁻¹z)_t``, by forward substitution when C is lower-triangular
(``kinds.training.stream``); a dense C that is not lower-triangular cannot be streamed (step t's
noise would depend on later steps' z).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from factorize.plan.errors import PlanError

if TYPE_CHECKING:
    from factorize.privacy.participation import Participation
    from factorize.training.long_bound import LongLowerBound
    from factorize.training.toeplitz import LongSensitivity

#: What the lower bound states it is.
WITNESS_HOW = ("dual witness F (n × K) of the exact multi-epoch program: T²/N, T ≤ ‖W B‖_tr "
               "certified, N ≥ Σ_π max_{t∈π} ‖F_t‖² (training.certificate)")
#: What the worst-step lower bound states it is.
WITNESS_HOW_MAX = ("dual witness F (n × K) and row weights p of the exact multi-epoch worst-step "
                   "program: T²/(N·S), T ≤ ‖D_s W B‖_tr certified (s = √p), N ≥ Σ_π max_{t∈π} "
                   "‖F_t‖², S ≥ Σ s_t² (training.certificate)")
#: What the sensitivity states it is.
SENSITIVITY_METHOD = ("dense Gram bound: Δ² ≤ max over epoch patterns π of Σ|(CᵀC)_ππ| plus its "
                      "rounding bound (privacy.participation)")


@dataclass(frozen=True)
class DenseStrategy:
    """A dense strategy ``matrix`` C (n × n, one column per step) and the dual ``witness`` F
    (n × K) certifying its gap under ``epochs=K``; ``weights``: the dual's row weights p (n,
    non-negative) of a worst-step plan, None for a total one (module docstring)."""

    kind: ClassVar[str] = "dense"

    matrix: np.ndarray
    witness: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        C, F, p = self.matrix, self.witness, self.weights
        if C.ndim != 2 or C.shape[0] != C.shape[1] or C.shape[0] < 2:
            raise PlanError(f"a dense training strategy is a square matrix of n ≥ 2 steps, got {C.shape}")
        if F.ndim != 2 or F.shape[0] != C.shape[0] or F.shape[1] < 1:
            raise PlanError(f"the dual witness must be n × K (n = {C.shape[0]}), got {F.shape}")
        if not (np.all(np.isfinite(C)) and np.all(np.isfinite(F))):
            raise PlanError("the dense strategy and its witness must be finite")
        if p is not None and (p.shape != (C.shape[0],) or not np.all(np.isfinite(p))
                              or np.any(p < 0)):
            raise PlanError(f"the dual row weights must be {C.shape[0]} finite non-negative numbers, "
                            f"got shape {p.shape}")

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def lower_triangular(self) -> bool:
        """Whether C is lower-triangular (streamable)."""
        return not bool(np.any(np.triu(self.matrix, 1)))


def prefix_matrix(n: int) -> np.ndarray:
    """``L_n``: the n × n lower-triangular matrix of ones (the prefix sums)."""
    return np.tril(np.ones((n, n)))


def dense_claims(strategy: DenseStrategy, participation: Participation | None,
                 reduction: str = "total") -> tuple[LongSensitivity, float, LongLowerBound]:
    """``(sensitivity, error per unit σ², lower bound)`` of the module docstring, for the total
    squared error or (``reduction="max"``) the worst step's."""
    from factorize.numerics import round_up
    from factorize.privacy.participation import participation_sensitivity
    from factorize.training.certificate import DEFAULT_RESIDUAL_TOL, epochs_lower_bound, error_norm_upper
    from factorize.training.long_bound import LongLowerBound
    from factorize.training.toeplitz import LongSensitivity

    if participation is None or participation.kind != "epochs":
        raise PlanError("a dense training strategy is certified under epochs=K participation")
    n, K = strategy.n, participation.k
    if n % K or strategy.witness.shape[1] != K:
        raise PlanError(f"epochs={K} over n={n} steps needs K | n and an n × {K} witness, got "
                        f"{strategy.witness.shape}")
    if reduction not in ("total", "max"):
        raise PlanError(f"unknown objective reduction {reduction!r}; expected 'total' or 'max'")
    if (reduction == "max") != (strategy.weights is not None):
        raise PlanError("a dense worst-step plan stores the dual's row weights and a total one "
                        f"does not; this {reduction!r} plan " +
                        ("lacks them" if reduction == "max" else "has them"))
    C = strategy.matrix
    W = prefix_matrix(n)
    ps = participation_sensitivity(C, participation)
    sens = LongSensitivity(ps.value, ps.lower, ps.exact, participation, SENSITIVITY_METHOD)
    try:
        R = np.linalg.solve(C.T, W.T).T
    except np.linalg.LinAlgError:
        raise PlanError("the dense strategy is singular") from None
    residual = float(np.max(np.abs(W - R @ C)))
    if not residual <= DEFAULT_RESIDUAL_TOL:
        raise PlanError(f"the strategy reproduces the workload only to {residual:.3g} (relative, max "
                        f"entry), above {DEFAULT_RESIDUAL_TOL:g}")
    norm = error_norm_upper(R, reduction)
    error = round_up(norm * norm, 1)
    lower = epochs_lower_bound(W, participation, strategy.witness, strategy.weights)
    how = WITNESS_HOW if reduction == "total" else WITNESS_HOW_MAX
    bound = LongLowerBound(lower, reduction, K, n // K, how)
    return sens, error, bound
