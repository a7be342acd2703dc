"""The certificate of a dense training strategy under multi-participation, and its solver-free
check: an upper bound (the stored strategy's objective at its re-certified sensitivity) and a
lower bound (a stored dual witness), both re-derived from the stored arrays alone — numpy, one
SVD, the sensitivity of ``privacy.participation``; no scipy.optimize, no cvxpy.

Objective. A strategy ``A`` (m × n, one column per step) with reconstruction ``R`` (``W ≈ R A``)
and Gaussian noise of standard deviation ``Δ`` (its L2 sensitivity under the participation
relation, ``privacy.participation``) per unit noise multiplier has total squared error
``Δ² ‖R‖_F²`` (Denisov et al., "Improved Differential Privacy for SGD via Optimal Private
Linear Operators on Adaptive Streams", NeurIPS 2022, §3; Choquette-Choo et al., "Multi-Epoch
Matrix Factorization Mechanisms for Private Machine Learning", ICML 2023, §3). The upper bound is
``round_up(Δ̄² · ‖R‖̄_F²)`` with ``Δ̄`` the certified sensitivity and ``‖R‖̄_F`` a certified
Frobenius norm, stated for the factorization (R, A) whose residual ``‖W − R A‖_max`` is checked.

Lower bound, ``epochs=K`` (witness :class:`EpochsWitness`). The exact program is

    min tr(W X⁻¹ Wᵀ)  s.t.  X ≻ 0,  max_{Y ∈ 𝓔} ⟨X_ππ, Y⟩ ≤ 1 for every pattern π,

and by SDP duality of the elliptope 𝓔 (Goemans & Williamson 1995; Nesterov 1998) the pattern
constraint is ``∃ d_π ≥ 0: Diag(d_π) ⪰ X_ππ, 𝟙ᵀd_π ≤ 1``. Lagrange multipliers ``Z_π ⪰ 0``
(K × K) on the LMIs and ``ν_π`` on the sums give, for every feasible X and ``Z = ⊕_π Z_π`` (on
the pattern coordinates) with ``diag Z_π ≤ ν_π 𝟙``,

    tr(W X⁻¹ Wᵀ) ≥ tr(W X⁻¹ Wᵀ) + ⟨Z, X⟩ − Σ_π ν_π ≥ 2 ‖W Z^{1/2}‖_tr − Σ_π ν_π

(the inner minimum over X ≻ 0 is at ``X = C^{1/2}(C^{1/2} Z C^{1/2})^{-1/2} C^{1/2}``, C = WᵀW:
the γ_F dual of docs/math.md §4.1 with the diagonal weights replaced by a block-PSD matrix).
The witness stores ``F`` (n × K): Z is *defined* as ``B Bᵀ`` with ``B`` the n × (b·K) matrix whose
row t is ``F_t`` placed in the column block of t's pattern — PSD and block-diagonal by
construction, nothing to check — and ``ν_π := max_{t∈π} ‖F_t‖²``. Scaling B by √s and
maximising over s > 0 gives

    lower = T² / N,   T ≤ ‖W B‖_tr (certified: ``norms.trace_norm_lower_bound`` minus the
    rounding of the product), N ≥ Σ_π max_{t∈π} ‖F_t‖² (rounded up).

Worst step (``reduction="max"``, the γ₂-type objective: step t's error variance per unit noise
is ``Δ² ‖R_t‖² = (W X⁻¹ Wᵀ)_tt`` at unit sensitivity). The program is
``min_X max_t (W X⁻¹ Wᵀ)_tt`` over the same feasible set. For any weights ``p ≥ 0`` (not all 0)
and every feasible X, ``max_t e_t ≥ Σ_t p_t e_t / Σ_t p_t`` and ``Σ_t p_t e_t =
tr(D_p^{1/2} W X⁻¹ Wᵀ D_p^{1/2})`` is the total-error objective of the row-weighted workload
``D_p^{1/2} W``, bounded below as above: weak duality needs nothing more (by Sion's minimax
theorem — the simplex is compact, e_t convex in X — the best such bound equals the optimum; the
single-participation case is the γ₂ dual of Lee, Shraibman & Špalek, "A Direct Product Theorem
for Discrepancy", CCC 2008 — docs/math.md §4.2: ``γ₂(W) ≥ ‖D_p^{1/2} W D_q^{1/2}‖_tr /
√(Σp·Σq)``, here with the block-PSD Z in place of D_q). The witness also stores ``p`` (:attr:`EpochsWitness.weights`); the verifier
computes ``s = fl(√p)`` and *defines* the weights as ``s_t²`` (exact reals), so

    lower = T² / (N · S),   T ≤ ‖D_s W B‖_tr (certified, the product's rounding with one more
    rounding for ``fl(s_t W_tj)``), N as above, S ≥ Σ_t s_t² (rounded up).

Lower bound, ``k=K,min_sep=B`` (witness :class:`PatternWitness`): the multipliers of
``planner.participation_bound`` (a relaxation over the arithmetic-progression patterns),
re-derived by :func:`pattern_bound_value` (moved here so that a verifier needs no solver).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from factorize.numerics import frobenius_upper, gamma, relative_gap, round_down, round_up
from factorize.planner.errors import PlannerError
from factorize.privacy.participation import Participation, participation_sensitivity

#: Relative slack the builder leaves in a dense strategy's claims, which a verifier re-derives
#: with matrix products and an SVD whose summation order may differ from the builder's (BLAS
#: threads, another machine): the sensitivity and the error are stated that much above the
#: certified values (σ calibrated to the stated Δ), the attained sensitivity and the lower bound
#: that much below theirs (``multi_epoch``, ``kinds.training.plan``). Measured: the dense lower
#: bound at n = 2,048, 4 epochs, re-derived 3.5·10⁻¹⁶ lower (relative) under one BLAS thread than
#: under the two it was planned with, so a plan stated without slack failed its own verification.
#: The long-horizon strategies' figures are sums in a fixed order (no slack). The verifiers'
#: ``same_number`` (1e-9) accepts claims within the slack.
CLAIM_SLACK = 1e-12

#: Default limit on ``‖W − R A‖_max / ‖W‖_max``.
DEFAULT_RESIDUAL_TOL = 1e-9


@dataclass(frozen=True)
class EpochsWitness:
    """``F`` (n × K): row t is step t's row of the dual factor B; ``weights`` (one per row of W,
    ≥ 0): the row weights p of the worst-step bound, None for the total (module docstring)."""

    factor: np.ndarray
    weights: np.ndarray | None = None


@dataclass(frozen=True)
class PatternWitness:
    """Multipliers ``a``, ``c`` of ``planner.participation_bound`` over its patterns."""

    a: np.ndarray
    c: np.ndarray


@dataclass(frozen=True)
class TrainingSolution:
    """A dense strategy ``A`` (m × n, one column per step) and reconstruction ``R`` for the
    workload W (k × n) under ``participation``, with its certified figures:
    ``sensitivity ≥ Δ₂(A)``, ``objective ≥ Δ² ‖R‖_F²`` (total squared error per unit noise
    multiplier; ``reduction="max"``: ``Δ² max_t ‖R_t‖²``, the worst step's) and ``lower ≤`` the
    optimum of the exact program; ``witness`` re-derives ``lower``. ``streaming``: A is
    lower-triangular (step t's noise depends on steps ≤ t)."""

    participation: Participation
    strategy: np.ndarray
    reconstruction: np.ndarray
    sensitivity: float
    objective: float
    lower: float
    witness: EpochsWitness | PatternWitness
    streaming: bool
    seconds: float = 0.0
    iterations: int = 0
    details: dict[str, float] = field(default_factory=dict)
    reduction: str = "total"

    @property
    def gap(self) -> float:
        """``objective / lower − 1``."""
        return relative_gap(self.objective, self.lower)


@dataclass(frozen=True)
class TrainingCheck:
    """What :func:`check_training_certificate` re-derived, and whether every claim held."""

    passed: bool
    sensitivity: float
    upper: float
    lower: float
    residual: float
    failures: tuple[str, ...] = ()

    @property
    def gap(self) -> float:
        return relative_gap(self.upper, self.lower)


def epochs_lower_bound(W: np.ndarray, participation: Participation, factor: np.ndarray,
                       weights: np.ndarray | None = None) -> float:
    """``T² / N`` of the module docstring for the witness ``factor`` (n × K), certified; with
    row ``weights`` p (the worst-step bound), ``T² / (N·S)`` for the workload ``D_s W``,
    ``s = fl(√p)``, ``S ≥ Σ s_t²``."""
    from factorize.norms import trace_norm_lower_bound

    W = np.asarray(W, dtype=np.float64)
    F = np.asarray(factor, dtype=np.float64)
    n = W.shape[1]
    pats = epoch_patterns(n, participation)
    K = participation.k
    if F.shape != (n, K) or not np.all(np.isfinite(F)):
        raise PlannerError(f"an epochs witness must be a finite {n} × {K} array, got shape {F.shape}")
    S = 1.0
    extra = 0  # roundings of the workload's entries before the product
    if weights is not None:
        p = np.asarray(weights, dtype=np.float64)
        if p.shape != (W.shape[0],) or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise PlannerError(f"the witness's row weights must be {W.shape[0]} finite non-negative "
                               f"numbers, got shape {p.shape}")
        s = np.sqrt(p)
        # the weights are defined as the exact squares s_t² of the computed roots: each
        # square is within u of fl(s_t²), fsum rounds once
        S = round_up(math.fsum((s * s).tolist()), 2)
        if S <= 0.0:
            return 0.0
        W = s[:, None] * W  # fl(s_t W_tj) = s_t W_tj (1 + δ), |δ| ≤ u
        extra = 1
    WB = np.hstack([W[:, pat] @ F[pat] for pat in pats])
    absWB = np.hstack([np.abs(W[:, pat]) @ np.abs(F[pat]) for pat in pats])
    # fl(WB) is within γ_K |W||B| entrywise (Higham eq. 3.5), γ_{K+1} with the rounded
    # entries of D_s W (|fl(D_s W)| ≤ (1 + u)|D_s W| folded into γ); a matrix of rank ≤ r has
    # ‖E‖_tr ≤ √r ‖E‖_F
    err = round_up(math.sqrt(min(WB.shape)) * gamma(K + 2 + 2 * extra) * frobenius_upper(absWB), 3)
    T = max(0.0, trace_norm_lower_bound(WB) - err)
    T = round_down(T, 1)
    sq = np.sum(F * F, axis=1)
    nu = [round_up(float(np.max(sq[pat])), K + 1) for pat in pats]
    N = round_up(math.fsum(nu), len(nu) + 1)
    if N <= 0.0 or T <= 0.0:
        return 0.0
    if weights is None:
        return round_down(T * T / N, 3)
    return round_down(T * T / round_up(N * S, 1), 3)


def epoch_patterns(n: int, participation: Participation) -> list[np.ndarray]:
    """The b = n/K patterns ``{i, i + b, …, i + (K−1)b}`` of ``epochs=K``."""
    from factorize.privacy.guarantees import PrivacyError

    if participation.kind != "epochs":
        raise PrivacyError(f"epoch patterns need epochs=K, got {participation.key}")
    if n % participation.k:
        raise PrivacyError(f"epochs={participation.k} needs a number of steps divisible by "
                           f"{participation.k}, got {n}")
    b = n // participation.k
    return [np.arange(i, n, b) for i in range(b)]


def bound_patterns(n: int, p: Participation) -> list[np.ndarray]:
    """The patterns of ``planner.participation_bound``: ``epochs=K`` — all b = n/K of them;
    ``k=K,min_sep=B`` — the arithmetic progressions ``{i, i+B, …}`` of K steps that fit."""
    if p.kind == "epochs":
        return epoch_patterns(n, p)
    span = (p.k - 1) * p.min_sep
    return [np.arange(i, i + span + 1, p.min_sep) for i in range(n - span)] or [np.arange(1)]


def membership(n: int, pats: list[np.ndarray]) -> np.ndarray:
    """The n × |patterns| 0/1 matrix of which step lies in which pattern."""
    S = np.zeros((n, len(pats)))
    for i, pat in enumerate(pats):
        S[pat, i] = 1.0
    return S


def pattern_bound_value(W: np.ndarray, pats: list[np.ndarray], a: np.ndarray, c: np.ndarray) -> float:
    """``2‖W B‖_tr − Σ(a + c)`` of ``planner.participation_bound`` (its module docstring), with
    a certified lower bound on the trace norm and the sum rounded up; may be negative for poor
    multipliers."""
    from factorize.norms import trace_norm_lower_bound
    from factorize.privacy.guarantees import PrivacyError

    n = W.shape[1]
    a, c = np.asarray(a, dtype=np.float64), np.asarray(c, dtype=np.float64)
    if a.shape != (len(pats),) or c.shape != (len(pats),) or np.any(a < 0) or np.any(c < 0) \
            or not (np.all(np.isfinite(a)) and np.all(np.isfinite(c))):
        raise PrivacyError("participation multipliers must be finite, non-negative, one pair per pattern")
    S = membership(n, pats)
    B = np.hstack([np.diag(np.sqrt(S @ a)), S * np.sqrt(c)[None, :]])
    # ‖WB‖_tr of the exact product: fl(WB) is within γ_n |W||B| entrywise, and a matrix of
    # rank ≤ r has ‖E‖_tr ≤ √r ‖E‖_F
    WB = W @ B
    err = round_up(math.sqrt(min(WB.shape)) * gamma(n + 2) * frobenius_upper(np.abs(W) @ np.abs(B)), 3)
    tr = trace_norm_lower_bound(WB) - err
    # Z := BBᵀ exactly for the computed B. Its rank-one part is Σ_π c'_π 𝟙_π𝟙_πᵀ with
    # c'_π = fl(√c_π)² (the entries of B's pattern columns are exact copies); its diagonal part
    # d_t = fl(√fl((Sa)_t))² ≤ (Sa)_t (1 + γ_P)(1 + u)², so Σ_t d_t X_tt ≤ (1 + γ_{P+3}) Σ_π a_π
    # for every feasible X (Σ_{t∈π} X_tt ≤ 1): the multipliers charged are those, rounded up
    c_eff = np.sqrt(c) ** 2
    charge = math.fsum(a.tolist()) * (1.0 + gamma(len(pats) + 3)) + math.fsum(c_eff.tolist())
    return 2.0 * tr - round_up(charge, 2 * len(pats) + 4)


def solution_figures(W: np.ndarray, participation: Participation, A: np.ndarray,
                     R: np.ndarray, reduction: str = "total") -> tuple[float, float, float]:
    """``(Δ̄, upper, residual)``: the certified sensitivity of A, ``round_up(Δ̄²‖R‖̄_F²)``
    (``reduction="max"``: ``round_up(Δ̄² max_t ‖R_t‖̄²)``, certified row norms) and
    ``‖W − R A‖_max / ‖W‖_max``."""
    W = np.asarray(W, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if A.ndim != 2 or R.ndim != 2 or A.shape[1] != W.shape[1] or R.shape != (W.shape[0], A.shape[0]):
        raise PlannerError(f"strategy {A.shape} and reconstruction {R.shape} do not fit the "
                           f"workload {W.shape}")
    if not (np.all(np.isfinite(A)) and np.all(np.isfinite(R))):
        raise PlannerError("the strategy and reconstruction must be finite")
    sens = participation_sensitivity(A, participation).value
    fro = error_norm_upper(R, reduction)
    upper = round_up(sens * sens * fro * fro, 3)
    wmax = float(np.max(np.abs(W)))
    residual = float(np.max(np.abs(W - R @ A))) / wmax if wmax > 0 else 0.0
    return sens, upper, residual


def error_norm_upper(R: np.ndarray, reduction: str = "total") -> float:
    """A certified upper bound on ``‖R‖_F`` (total) or ``max_t ‖R_t‖`` (max: the worst step)."""
    from factorize.numerics import max_upper, row_norms_upper

    if reduction == "total":
        return frobenius_upper(R, "the reconstruction")
    if reduction == "max":
        return max_upper(row_norms_upper(R, "l2", "the reconstruction"))
    raise PlannerError(f"reduction must be 'total' or 'max', got {reduction!r}")


def witness_lower_bound(W: np.ndarray, participation: Participation,
                        witness: EpochsWitness | PatternWitness, reduction: str = "total") -> float:
    """The certified lower bound a witness gives (module docstring) for the ``reduction``:
    an epochs witness bounds the worst step only with row weights, the total only without;
    a pattern witness bounds the total."""
    if isinstance(witness, EpochsWitness):
        if (reduction == "max") != (witness.weights is not None):
            raise PlannerError(f"an epochs witness {'without' if reduction == 'max' else 'with'} "
                               f"row weights does not bound the {reduction!r} objective")
        return epochs_lower_bound(W, participation, witness.factor, witness.weights)
    if reduction != "total":
        raise PlannerError("a min-sep pattern witness bounds the total squared error only")
    value = pattern_bound_value(np.asarray(W, dtype=np.float64), bound_patterns(W.shape[1], participation),
                                witness.a, witness.c)
    return max(0.0, value)


def check_training_certificate(W: np.ndarray, solution: TrainingSolution, *,
                               residual_tol: float = DEFAULT_RESIDUAL_TOL) -> TrainingCheck:
    """Re-derive a solution's figures from its stored arrays and compare them with its claims:
    the re-certified sensitivity and objective may not exceed the stated ones, the witness's
    bound may not fall below the stated lower bound, the residual stays within
    ``residual_tol`` and a streaming strategy is lower-triangular."""
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or not np.all(np.isfinite(W)):
        raise PlannerError("the workload must be a finite 2-D array")
    sens, upper, residual = solution_figures(W, solution.participation, solution.strategy,
                                             solution.reconstruction, solution.reduction)
    lower = witness_lower_bound(W, solution.participation, solution.witness, solution.reduction)
    failures = []
    if sens > solution.sensitivity:
        failures.append(f"sensitivity {sens!r} exceeds the stated {solution.sensitivity!r}")
    if upper > solution.objective:
        failures.append(f"objective {upper!r} exceeds the stated {solution.objective!r}")
    if lower < solution.lower:
        failures.append(f"the witness certifies {lower!r}, below the stated lower bound {solution.lower!r}")
    if lower > upper:
        failures.append(f"lower bound {lower!r} above the objective {upper!r}: inconsistent certificate")
    if residual > residual_tol:
        failures.append(f"‖W − RA‖_max / ‖W‖_max = {residual:.3g} exceeds {residual_tol:.3g}")
    if solution.streaming and np.any(np.triu(solution.strategy, 1)):
        failures.append("a streaming strategy must be lower-triangular")
    return TrainingCheck(not failures, sens, upper, lower, residual, tuple(failures))
