"""Lower-triangular Toeplitz strategies for long horizons: the records (banded Toeplitz, BLT),
their error on a Toeplitz workload in O(n·parameters), and their certified L2 sensitivity
under single and multiple participation, computed from the stored parameters alone.

Setting (Denisov et al., "Improved Differential Privacy for SGD via Optimal Private Linear
Operators on Adaptive Streams", NeurIPS 2022, §2; Choquette-Choo et al., "Multi-Epoch Matrix
Factorization Mechanisms for Private Machine Learning", ICML 2023, §2). A workload ``W``
(n × n, lower triangular) is factored ``W = B·C``; step t of training adds the correlated noise
``σ·(C⁻¹z)_t`` (z standard Gaussian); the released ``W·x + σ·B·z`` is ``B(Cx + σz)``, so the
privacy is that of ``Cx + σz`` with the L2 sensitivity Δ of C, and the error is
``σ²‖B‖_F² = σ²‖W C⁻¹‖_F²`` in total, ``σ² max_i ‖(W C⁻¹)_i‖²`` at the worst step.

**Toeplitz algebra.** A lower-triangular Toeplitz matrix is its first column, i.e. the first n
coefficients of a power series (its generating function). Products and inverses of such
matrices are products and reciprocals of series, so ``W C⁻¹`` is lower-triangular Toeplitz with
first column ``s = w·(1/c)`` (series arithmetic), and, its row i holding ``s_0 … s_i``,

    ‖W C⁻¹‖_F² = Σ_k (n − k)·s_k²,     max_i ‖(W C⁻¹)_i‖² = Σ_k s_k²  (the last row).

Three strategy records, each stored as its parameters only (kilobytes at n = 10⁶):

* :class:`BandedToeplitz` (McKenna, "Scaling up the Banded Matrix Factorization Mechanism for
  Differentially Private ML", 2024, §3): ``C_ij = c_{i−j}`` for ``0 ≤ i − j < b``;
* :class:`BLT`, buffered linear Toeplitz (Dvijotham, McMahan, Pillutla, Steinke & Thakurta,
  "Efficient and Near-Optimal Noise Generation for Streaming Differential Privacy", 2024, §3):
  ``c_0 = 1``, ``c_k = Σ_i ω_i θ_i^{k−1}`` (k ≥ 1), b buffers (θ_i, ω_i). ``C⁻¹`` is again a
  BLT; step t's noise needs b buffers of the model's size (``training.stream``).
* :class:`BandedInverse` (the banded inverse square root, Kalinin, McKenna, Upadhyay &
  Lampert, ICLR 2026): ``C⁻¹`` has p bands ``r_0 … r_{p−1}`` and C is the series ``1/r``,
  computed with a certified entrywise error (``training.series``); step t's noise needs the
  last p − 1 draws.

**Sensitivity** (:func:`certified_sensitivity`). One record changes the per-step contributions
at the steps of a participation pattern π by vectors of norm ≤ 1, so (``privacy.participation``)

    Δ² = max_π max_{Y ∈ elliptope} ⟨X_ππ, Y⟩ ≤ max_π Σ_{s,t∈π} |X_st|,   X = CᵀC,

with equality when ``X_ππ ≥ 0``. For a Toeplitz C, column j is ``(0,…,0, c_0, …, c_{n−1−j})``:

    X_st = Σ_{k=0}^{n−1−max(s,t)} c_k c_{k+|s−t|} =: T(|s−t|, n − 1 − max(s,t)).

* single participation: ``Δ² = T(0, n−1) = Σ_k c_k²`` (column 0 is the longest), exact;
* ``epochs=K`` (n = K·p, π_i = {i, i+p, …}): every ``X_st`` of every pattern is a prefix sum of
  ``c_k c_{k+dp}`` (d < K), so all p patterns are evaluated in O(K·n), with signs: the bound is
  ``max_i Σ |X_st|``; attained (Y = 𝟙𝟙ᵀ) when the worst pattern's block is non-negative;
* ``k=K,min_sep=B``: with ``K' = min(K, ⌊(n−1)/B⌋ + 1)`` participations possible and a pattern
  ``p_1 < … < p_m`` (gaps ≥ B): ``p_a ≥ (a−1)B`` and ``p_b − p_a ≥ (b−a)B``; with ``e`` the
  non-increasing envelope ``e_k = max_{j≥k} |c_j|`` (reverse cumulative maximum),

      |X_{p_a p_a}| ≤ T(0, n−1−(a−1)B),   |X_{p_a p_b}| ≤ Σ_{k ≤ n−1−(b−1)B} e_k e_{k+(b−a)B},

  since T(0, L) grows with L and ``e`` decreases (for columns of length ≤ 2,048 — banded
  strategies, small n — also ``≤ max_{d ≥ (b−a)B, L ≤ n−1−(b−1)B} |T(d, L)|``, every lag
  tabulated with its running maximum over prefix lengths, whichever is smaller). Summing (every term ≥ 0, so m = K' is worst):
  a bound valid for **any** coefficients — the closed form of Choquette-Choo et al. (NeurIPS
  2023) and McKenna (2024, Thm 2 of arXiv:2405.13763) evaluated at the pattern 0, B, …,
  (K'−1)B is exact only for non-negative non-increasing coefficients, and is reached here as
  the lower bound: the value ``⟨X_ππ, Y⟩`` of that pattern for Y = I and Y = 𝟙𝟙ᵀ. Both meet for
  non-negative non-increasing c (and, for a b-banded C with B ≥ b, for any c: the columns of a
  pattern are then orthogonal, and Δ² is a sum of column norms). Cost O(K'·m) for a column of
  length m (m = b banded, n for a BLT), plus O(m²) for the lag table when m ≤ 2,048.

**Floating point.** The coefficients are computed from the parameters with an entrywise bound
(:class:`CertifiedColumn`: ``|c_k − ĉ_k| ≤ ε_k``; banded: exact; banded inverse: from the
residual of the series reciprocal, ``training.series``). Every product and prefix sum
is bounded with Higham's inner-product bound ``γ_n`` (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., Lemma 3.1, Thm 3.4) and rounded in the safe direction
(``factorize.numerics``): the upper bound can only rise, the attained value only fall.
Magnitudes: coefficients below 2⁻⁴⁸⁰ are moved into ε and every nonzero ε is at least 2⁻⁴⁸⁰,
so every product is a normal number; a coefficient above 2⁴⁸⁰ is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from factorize.numerics import (
    MAX_MAGNITUDE,
    MIN_MAGNITUDE,
    NumericRangeError,
    gamma,
    integer,
    round_down,
    round_up,
)
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

__all__ = ["BLT", "BandedInverse", "BandedToeplitz", "CertifiedColumn", "LongSensitivity", "LongStrategy", "Reduction",
           "ToeplitzWorkload", "certified_sensitivity", "dense_strategy", "error_and_gradient",
           "pattern_value_and_gradient", "strategy_error", "strategy_from_dict", "worst_pattern"]

Reduction = Literal["total", "max"]
#: ``exact`` when the attained value is within this relative distance of the upper bound
#: (the rounding allowances at n = 10⁶ are about 1e-10).
EXACT_RTOL = 1e-8
#: Columns up to this length also get the exact per-lag bound of the min-sep sensitivity.
LAG_TABLE_MAX = 2048


# ------------------------------------------------------------------------------ workloads


@dataclass(frozen=True)
class ToeplitzWorkload:
    """A lower-triangular Toeplitz workload with rational generating function ``num(x)/den(x)``
    (``den[0] = 1``): prefix sums ``1/(1 − x)``; prefix sums of momentum-β averaged gradients
    (the model of SGD with heavy-ball momentum, Denisov et al. 2022, §5)
    ``1/((1 − x)(1 − βx))``."""

    name: str
    num: tuple[float, ...]
    den: tuple[float, ...]

    @classmethod
    def prefix(cls) -> ToeplitzWorkload:
        return cls("prefix", (1.0,), (1.0, -1.0))

    @classmethod
    def momentum(cls, beta: float) -> ToeplitzWorkload:
        if not 0.0 <= float(beta) < 1.0:
            raise PrivacyError(f"momentum beta must lie in [0, 1), got {beta!r}")
        b = float(beta)
        return cls(f"momentum={b!r}", (1.0,), (1.0, -(1.0 + b), b))

    def apply(self, r: np.ndarray) -> np.ndarray:
        """First column of ``W·R`` for a lower-triangular Toeplitz R with first column r."""
        from scipy.signal import lfilter

        if self.name == "prefix":
            return np.cumsum(r)
        return np.asarray(lfilter(self.num, self.den, r))

    def adjoint(self, g: np.ndarray) -> np.ndarray:
        """The transpose of :meth:`apply` (the anti-causal filter)."""
        from scipy.signal import lfilter

        if self.name == "prefix":
            return np.cumsum(g[::-1])[::-1]
        return np.asarray(lfilter(self.num, self.den, g[::-1]))[::-1]

    def dense(self, n: int) -> np.ndarray:
        """The n × n matrix (tests and small n only)."""
        from scipy.linalg import toeplitz

        col = self.apply(np.eye(n)[:, 0])
        return np.tril(toeplitz(col))


def error_and_gradient(r: np.ndarray, workload: ToeplitzWorkload,
                       reduction: Reduction = "total") -> tuple[float, np.ndarray]:
    """``(E, ∂E/∂r)`` for C⁻¹ with first column ``r`` (length n): ``E = ‖W C⁻¹‖_F²`` (total) or
    the largest row norm² (max), module docstring; O(n) after the workload's filter."""
    n = r.size
    s = workload.apply(r)
    if reduction == "total":
        wts = np.arange(n, 0, -1, dtype=np.float64)
    elif reduction == "max":
        wts = np.ones(n)
    else:
        raise PrivacyError(f"reduction must be 'total' or 'max', got {reduction!r}")
    value = float(np.dot(wts, s * s))
    return value, workload.adjoint(2.0 * wts * s)


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class CertifiedColumn:
    """The first column c of an exact C: ``|c_k − value_k| ≤ error_k`` (k < len(value)) and
    ``c_k = 0`` for ``len(value) ≤ k < n``."""

    value: np.ndarray
    error: np.ndarray
    n: int


def _freeze_bands(record: Any, what: str) -> None:
    """Validate and freeze a banded record's ``coef`` (finite, ``coef[0] ≠ 0``) and ``n`` (≥ 1),
    in place (``BandedToeplitz``, ``BandedInverse``)."""
    c = np.array(record.coef, dtype=np.float64).ravel()
    n = integer("n", record.n, 1, PrivacyError)
    if c.size < 1 or not np.all(np.isfinite(c)) or c[0] == 0.0:
        raise PrivacyError(f"{what} needs finite coefficients with coef[0] ≠ 0")
    c.setflags(write=False)
    object.__setattr__(record, "coef", c)
    object.__setattr__(record, "n", n)


@dataclass(frozen=True)
class BandedToeplitz:
    """``C_ij = coef[i − j]`` for ``0 ≤ i − j < b = len(coef)``, n × n (McKenna 2024, §3)."""

    coef: np.ndarray
    n: int

    kind = "banded_toeplitz"

    def __post_init__(self) -> None:
        _freeze_bands(self, "a banded Toeplitz strategy")

    @property
    def bands(self) -> int:
        return int(self.coef.size)

    def certified_column(self) -> CertifiedColumn:
        """The stored coefficients are the column (exact; truncated at n)."""
        m = min(self.bands, self.n)
        return CertifiedColumn(self.coef[:m].copy(), np.zeros(m), self.n)

    def inverse_column(self) -> np.ndarray:
        """First column of C⁻¹ (floating point; for the error, not for privacy)."""
        from scipy.signal import lfilter

        impulse = np.zeros(self.n)
        impulse[0] = 1.0
        return np.asarray(lfilter([1.0], self.coef, impulse))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "coef": [float(v) for v in self.coef]}


@dataclass(frozen=True)
class BLT:
    """Buffered linear Toeplitz C: ``c_0 = 1``, ``c_k = Σ_i omega_i·theta_i^{k−1}`` (k ≥ 1),
    n × n (Dvijotham et al. 2024, §3, Def. 3.1)."""

    theta: np.ndarray
    omega: np.ndarray
    n: int

    kind = "blt"

    def __post_init__(self) -> None:
        th = np.array(self.theta, dtype=np.float64).ravel()
        om = np.array(self.omega, dtype=np.float64).ravel()
        n = integer("n", self.n, 1, PrivacyError)
        if th.shape != om.shape or th.size < 1 or not (np.all(np.isfinite(th)) and np.all(np.isfinite(om))):
            raise PrivacyError("a BLT needs as many finite theta as omega (at least one buffer)")
        if np.any(np.abs(th) >= 1.0):
            raise PrivacyError("a BLT's theta must lie in (−1, 1)")
        th.setflags(write=False)
        om.setflags(write=False)
        object.__setattr__(self, "theta", th)
        object.__setattr__(self, "omega", om)
        object.__setattr__(self, "n", n)

    @property
    def buffers(self) -> int:
        return int(self.theta.size)

    def certified_column(self) -> CertifiedColumn:
        """``ĉ`` and ``ε`` from (θ, ω). Powers by repeated multiplication (``cumprod``): with
        every step ``fl(aθ) = aθ(1 + δ) + η``, ``|δ| ≤ u``, ``|η| ≤ 2⁻¹⁰⁷⁵`` (Higham eq. 2.8),
        ``|p̂_j − θ^j| ≤ γ_j|θ|^j + j·2⁻¹⁰⁷⁴``, and ``|θ|^j ≤ (|p̂_j| + j·2⁻¹⁰⁷⁴)/(1 − γ_j)``;
        then ``ĉ_k = fl(Σ_i ω_i p̂_i)`` within ``γ_b Σ|ω_i||p̂_i|`` (+ b·2⁻¹⁰⁷⁴) of the sum."""
        n, b = self.n, self.buffers
        val = np.zeros(n)
        err = np.zeros(n)
        val[0] = 1.0
        if n == 1:
            return CertifiedColumn(val, err, n)
        P = np.empty((b, n - 1))
        P[:, 0] = 1.0
        if n > 2:
            P[:, 1:] = np.cumprod(np.repeat(self.theta[:, None], n - 2, axis=1), axis=1)
        g = gamma(n)
        tiny = 2.0 ** -1073 * n
        p_err = (g / (1.0 - g)) * (np.abs(P) + tiny) + tiny  # ≥ |p̂ − θ^j|, before rounding
        absw = np.abs(self.omega)
        val[1:] = self.omega @ P
        q = absw @ np.abs(P)
        gb = gamma(b + 2)
        err[1:] = gb * q * (1.0 + gb) + absw @ p_err + (b + 1) * 2.0 ** -1073
        err[1:] = _up(err[1:], 4)
        return CertifiedColumn(val, err, n)

    def inverse_column(self) -> np.ndarray:
        """First column of C⁻¹ (floating point; for the error, not for privacy). C⁻¹ is the BLT
        ``r_0 = 1``, ``r_k = Σ_j ω̂_j θ̂_j^{k−1}`` whose decays θ̂ are the eigenvalues of
        ``diag(θ) − 𝟙ωᵀ`` (the inverse system's state matrix, Dvijotham et al. 2024, §5),
        refined by Newton's method on the secular equation ``1 + Σ_i ω_i/(θ̂ − θ_i) = 0``
        (c(1/θ̂) = 0; the eigenvalues of the non-normal matrix lose digits when decays cluster
        near 1), with residues ``ω̂_j = Π_i (θ̂_j − θ_i)/Π_{i≠j}(θ̂_j − θ̂_i)``; powers by
        repeated multiplication. Agrees with the stream's own recurrence run in extended
        precision to ~1e-12 in the error at n = 10⁵ (a cascade of first-order filters with
        nearly cancelling poles and zeros does not: ~1e-8)."""
        th_hat = np.linalg.eigvals(np.diag(self.theta) - np.outer(np.ones(self.buffers), self.omega))
        th_hat = th_hat.astype(np.complex128)
        for _ in range(4):
            diff = th_hat[:, None] - self.theta[None, :]
            f = 1.0 + (self.omega[None, :] / diff).sum(axis=1)
            fp = -(self.omega[None, :] / diff ** 2).sum(axis=1)
            with np.errstate(all="ignore"):
                step = f / fp
            th_hat = th_hat - np.where(np.isfinite(step), step, 0.0)
        dd = th_hat[:, None] - th_hat[None, :]
        np.fill_diagonal(dd, 1.0)
        om_hat = np.prod(th_hat[:, None] - self.theta[None, :], axis=1) / np.prod(dd, axis=1)
        r = np.zeros(self.n)
        r[0] = 1.0
        if self.n > 1:
            P = np.ones((self.buffers, self.n - 1), dtype=np.complex128)
            if self.n > 2:
                P[:, 1:] = np.cumprod(np.repeat(th_hat[:, None], self.n - 2, axis=1), axis=1)
            r[1:] = (om_hat @ P).real
        return r

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "theta": [float(v) for v in self.theta],
                "omega": [float(v) for v in self.omega]}


@dataclass(frozen=True)
class BandedInverse:
    """A banded inverse: ``C⁻¹`` is lower-triangular Toeplitz with p bands, ``(C⁻¹)_ij =
    coef[i − j]`` for ``0 ≤ i − j < p = len(coef)``, and C its inverse, the series ``1/r(x)``
    of ``r(x) = Σ_j coef[j] x^j`` (dense, computed from the coefficients with a certified
    entrywise error, ``training.series``). The banded inverse square root (BISR) of Kalinin,
    McKenna, Upadhyay & Lampert, "Back to Square Roots: An Optimal Bound on the Matrix
    Factorization Error for Multi-Epoch Differentially Private SGD" (ICLR 2026,
    arXiv:2505.12128): r truncates ``(1 − x)^{1/2}``, the inverse of the square-root
    factorization ``L = C·C`` (``training.bisr``). Step t's noise ``Σ_{j<p} r_j z_{t−j}`` needs the last p − 1
    draws (``training.stream``)."""

    coef: np.ndarray
    n: int

    kind = "banded_inverse"

    def __post_init__(self) -> None:
        _freeze_bands(self, "a banded inverse strategy")

    @property
    def bands(self) -> int:
        return int(self.coef.size)

    def certified_column(self) -> CertifiedColumn:
        """C's first column ``1/r`` with its entrywise bound (``training.series``)."""
        from .series import certified_inverse_series

        value, error = certified_inverse_series(self.coef, self.n)
        return CertifiedColumn(value, error, self.n)

    def inverse_column(self) -> np.ndarray:
        """First column of C⁻¹: the stored coefficients, zero beyond p (exact)."""
        r = np.zeros(self.n)
        m = min(self.bands, self.n)
        r[:m] = self.coef[:m]
        return r

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n, "coef": [float(v) for v in self.coef]}


LongStrategy = BandedToeplitz | BLT | BandedInverse


def strategy_from_dict(data: dict[str, Any]) -> LongStrategy:
    """The record of :meth:`BandedToeplitz.to_dict` / :meth:`BLT.to_dict` /
    :meth:`BandedInverse.to_dict`."""
    kind = data.get("kind")
    try:
        if kind == BandedToeplitz.kind:
            return BandedToeplitz(np.asarray(data["coef"], dtype=np.float64), data["n"])
        if kind == BLT.kind:
            return BLT(np.asarray(data["theta"], dtype=np.float64),
                       np.asarray(data["omega"], dtype=np.float64), data["n"])
        if kind == BandedInverse.kind:
            return BandedInverse(np.asarray(data["coef"], dtype=np.float64), data["n"])
    except (KeyError, TypeError) as exc:
        raise PrivacyError(f"a {kind} strategy record lacks or mistypes a field: {exc}") from None
    raise PrivacyError(f"unknown long-horizon strategy kind {kind!r}")


def dense_strategy(strategy: LongStrategy) -> np.ndarray:
    """The n × n matrix C (tests and small n only)."""
    from scipy.linalg import toeplitz

    if isinstance(strategy, BandedToeplitz):
        col = np.zeros(strategy.n)
        m = min(strategy.bands, strategy.n)
        col[:m] = strategy.coef[:m]
    else:
        col = strategy.certified_column().value
    return np.tril(toeplitz(col))


def strategy_error(strategy: LongStrategy, workload: ToeplitzWorkload | None = None,
                   reduction: Reduction = "total") -> float:
    """``‖W C⁻¹‖_F²`` (or the max row norm²) of the strategy, at unit noise (floating point)."""
    w = workload or ToeplitzWorkload.prefix()
    return error_and_gradient(strategy.inverse_column(), w, reduction)[0]


def worst_pattern(n: int, participation: Participation | None) -> tuple[int, int]:
    """``(K', B)``: the pattern 0, B, …, (K'−1)B where the sensitivity of a non-negative
    non-increasing Toeplitz column is attained (module docstring; epochs: B = n/K)."""
    if participation is None:
        return 1, 1
    if participation.kind == "epochs":
        if n % participation.k:
            raise PrivacyError(f"epochs={participation.k} needs a number of steps divisible by "
                               f"{participation.k}, got {n}")
        return participation.k, n // participation.k
    B = participation.min_sep
    return min(participation.k, (n - 1) // B + 1), B


def pattern_value_and_gradient(c: np.ndarray, n: int,
                               participation: Participation | None) -> tuple[float, np.ndarray]:
    """``Σ_{s,t∈π} X_st`` at the pattern of :func:`worst_pattern` and its gradient in the
    column c (length m ≤ n, zero beyond) — the optimisers' smooth sensitivity², equal to Δ² for
    non-negative non-increasing c; the result is always certified afterwards by
    :func:`certified_sensitivity`. O(K'·m): per lag d = jB one prefix sum of ``c_k c_{k+d}``;
    ``∂T(d, L)/∂c_k = [k ≤ L] c_{k+d} + [d ≤ k ≤ L + d] c_{k−d}``."""
    m = c.size
    Kp, B = worst_pattern(n, participation)
    value = 0.0
    grad = np.zeros(m)
    for j in range(Kp):
        d = j * B
        if d >= m:
            break
        w = 1.0 if j == 0 else 2.0
        Ls = np.minimum(n - 1 - np.arange(j, Kp) * B, m - 1 - d)
        Ls = Ls[Ls >= 0]
        if Ls.size == 0:
            continue
        cum = np.cumsum(c[:m - d] * c[d:])
        value += w * float(np.sum(cum[Ls]))
        count = np.zeros(m - d + 1)
        np.add.at(count, Ls + 1, -1.0)
        count[0] += Ls.size
        count = np.cumsum(count)[:m - d]  # number of terms whose prefix contains k
        grad[:m - d] += w * count * c[d:]
        grad[d:] += w * count * c[:m - d]
    return value, grad


# ---------------------------------------------------------------------------- sensitivity


@dataclass(frozen=True)
class LongSensitivity:
    """``value ≥ Δ₂`` under ``participation`` (None: single participation) and ``lower ≤ Δ₂``
    (a value ⟨X_ππ, Y⟩ attained by a pattern); ``exact`` when they agree to 1e-8."""

    value: float
    lower: float
    exact: bool
    participation: Participation | None
    method: str


def _up(x: np.ndarray, ops: int = 1) -> np.ndarray:
    """Elementwise upward rounding of a non-negative array past ``ops`` roundings."""
    y = np.nextafter(np.asarray(x, dtype=np.float64) * (1.0 + (ops + 2) * 2.0 ** -52), np.inf)
    y[x == 0] = 0.0
    if not np.all(np.isfinite(y)):
        raise NumericRangeError("a certified bound overflows binary64")
    return y


def _down(x: np.ndarray, ops: int = 1) -> np.ndarray:
    """Elementwise downward rounding of an array past ``ops`` roundings (signed values)."""
    x = np.asarray(x, dtype=np.float64)
    f = (ops + 2) * 2.0 ** -52
    y = np.where(x >= 0, x * (1.0 - f), x * (1.0 + f))
    return np.where(x == 0, 0.0, np.nextafter(y, -np.inf))


class _Column:
    """The certified column in the form the bounds use: ``ĉ`` (tiny entries moved into ε),
    ``a_up ≥ |c|``, ``a_low ≤ |c|`` (≥ 0), the envelope ``e ≥ max_{j≥k}|c_j|``, and prefix sums
    with their error."""

    def __init__(self, col: CertifiedColumn) -> None:
        c = np.asarray(col.value, dtype=np.float64).copy()
        eps = np.asarray(col.error, dtype=np.float64).copy()
        if not (np.all(np.isfinite(c)) and np.all(np.isfinite(eps)) and np.all(eps >= 0)):
            raise NumericRangeError("the strategy's coefficients are not finite")
        big = float(np.max(np.abs(c) + eps)) if c.size else 0.0
        if big > MAX_MAGNITUDE:
            raise NumericRangeError(f"a coefficient of magnitude {big:.3g} exceeds 2^480")
        small = (np.abs(c) < MIN_MAGNITUDE) & (c != 0)
        eps[small] = _up(eps[small] + np.abs(c[small]), 1)
        c[small] = 0.0
        eps[(eps > 0) & (eps < MIN_MAGNITUDE)] = MIN_MAGNITUDE
        self.n = col.n
        self.m = c.size
        self.c, self.eps = c, eps
        self.a_up = _up(np.abs(c) + eps, 1)
        self.a_low = np.maximum(_down(np.abs(c) - eps, 1), 0.0)
        self.nonneg = bool(np.all(c - eps >= 0))
        self.g = gamma(self.m + 4)
        self.diag_up = self._cum_up(_up(self.a_up * self.a_up, 1))
        self.diag_low = self._cum_low(np.maximum(_down(self.a_low * self.a_low, 1), 0.0))

    def _cum_up(self, t: np.ndarray) -> np.ndarray:
        """``U_L ≥ Σ_{k≤L} t_k`` for non-negative float terms (cumsum within γ_m of the sum)."""
        return _up(np.cumsum(t) / (1.0 - self.g), 2)

    def _cum_low(self, t: np.ndarray) -> np.ndarray:
        return np.maximum(_down(np.cumsum(t) * (1.0 - self.g), 2), 0.0)

    @staticmethod
    def at(arr: np.ndarray, L: np.ndarray | int) -> np.ndarray:
        """``arr`` read at prefix lengths L (L < 0: 0; L beyond the column: its total)."""
        L = np.asarray(L)
        if arr.size == 0:
            return np.zeros(L.shape)
        out = arr[np.clip(L, 0, arr.size - 1)]
        return np.where(L < 0, 0.0, out)

    def cross(self, d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Prefix sums over k of the lag-d products: ``(S, E, A)`` with ``|Σ_{k≤L} c_k c_{k+d} −
        S_L| ≤ E_L`` and ``A_L ≥ Σ_{k≤L} e_k e_{k+d}`` (envelope), for L < m − d (empty if d ≥ m)."""
        if d >= self.m:
            z = np.zeros(0)
            return z, z, z
        c0, c1 = self.c[:self.m - d], self.c[d:]
        e0, e1 = self.eps[:self.m - d], self.eps[d:]
        prod = c0 * c1
        # |c_k c_{k+d} − fl(ĉ_k ĉ_{k+d})| ≤ u|ĉĉ| + |ĉ_k|ε_{k+d} + ε_k|ĉ_{k+d}| + ε_k ε_{k+d}
        eta = _up(np.abs(c0) * e1 + e0 * np.abs(c1) + e0 * e1 + np.abs(prod) * 2.0 ** -52, 4)
        S = np.cumsum(prod)
        E = _up((np.cumsum(np.abs(prod)) * self.g + np.cumsum(eta)) / (1.0 - self.g), 4)
        env = np.maximum.accumulate(self.a_up[::-1])[::-1]
        A = self._cum_up(_up(env[:self.m - d] * env[d:], 1))
        return S, E, A

    def lag_max(self, d0: int, L: np.ndarray) -> np.ndarray:
        """``M ≥ max_{d ≥ d0} max_{L' ≤ L} |Σ_{k≤L'} c_k c_{k+d}|`` for each prefix length in L:
        every lag's prefix sums (O(m²): used when m ≤ :data:`LAG_TABLE_MAX`)."""
        out = np.zeros(np.asarray(L).shape)
        for d in range(d0, self.m):
            S, E, _ = self.cross(d)
            run = np.maximum.accumulate(_up(np.abs(S) + E, 1))
            out = np.maximum(out, self.at(run, L))
        return out


def certified_sensitivity(strategy: LongStrategy, participation: Participation | None = None) -> LongSensitivity:
    """The certified L2 sensitivity of a Toeplitz strategy, recomputed from its parameters
    (module docstring), for single participation (None), ``epochs=K`` or ``k=K,min_sep=B``."""
    col = _Column(strategy.certified_column())
    n = col.n
    if participation is None:
        up = float(col.at(col.diag_up, n - 1))
        low = float(col.at(col.diag_low, n - 1))
        return _result(up, low, participation, "column 0 (single participation)")
    if participation.kind == "epochs":
        return _epochs(col, participation)
    return _min_sep(col, participation)


def _epochs(col: _Column, p: Participation) -> LongSensitivity:
    n, K = col.n, p.k
    if n % K:
        raise PrivacyError(f"epochs={K} needs a number of steps divisible by {K}, got {n}")
    per = n // K
    i = np.arange(per)
    up = np.zeros(per)
    low_one = np.zeros(per)   # Y = 𝟙𝟙ᵀ
    low_diag = np.zeros(per)  # Y = I
    low_abs = np.zeros(per)   # Σ|terms| of low_one: its summation error is ≤ γ·low_abs
    for a in range(K):
        d_up = col.at(col.diag_up, n - 1 - i - a * per)
        d_low = col.at(col.diag_low, n - 1 - i - a * per)
        up += d_up
        low_one += d_low
        low_diag += d_low
        low_abs += d_low
    for j in range(1, K):
        S, E, _ = col.cross(j * per)
        for b in range(j, K):
            L = n - 1 - i - b * per
            s, e = col.at(S, L), col.at(E, L)
            up += 2.0 * _up(np.abs(s) + e, 1)
            lo = _down(s - e, 1)
            low_one += 2.0 * lo
            low_abs += 2.0 * np.abs(lo)
    ops = 2 * K * K + 4
    best_up = round_up(float(np.max(up)), ops)
    g = gamma(ops)
    low = np.maximum(low_one - g * low_abs, low_diag * (1.0 - g))
    best_low = round_down(max(float(np.max(low)), 0.0), 2)
    return _result(best_up, best_low, p, "all epoch patterns, elliptope bound Σ|X_st|")


def _min_sep(col: _Column, p: Participation) -> LongSensitivity:
    n, K, B = col.n, p.k, p.min_sep
    Kp = min(K, (n - 1) // B + 1)
    a = np.arange(Kp)
    up = float(np.sum(col.at(col.diag_up, n - 1 - a * B)))
    diag_low = float(np.sum(col.at(col.diag_low, n - 1 - a * B)))
    off_up, off_low, off_abs = 0.0, 0.0, 0.0
    for j in range(1, Kp):
        S, E, A = col.cross(j * B)
        L = n - 1 - np.arange(j, Kp) * B
        env_bound = col.at(A, L)
        if col.m <= LAG_TABLE_MAX:
            env_bound = np.minimum(env_bound, col.lag_max(j * B, L))
        off_up += float(np.sum(env_bound))
        lo = _down(col.at(S, L) - col.at(E, L), 1)
        off_low += float(np.sum(lo))
        off_abs += float(np.sum(np.abs(lo)))
    ops = 2 * Kp * Kp + 4
    g = gamma(ops)
    upper = round_up(up + 2.0 * off_up, ops)
    lower = max(diag_low * (1.0 - g), diag_low + 2.0 * off_low - g * (diag_low + 2.0 * off_abs))
    lower = round_down(max(lower, 0.0), 2)
    return _result(upper, lower, p, f"min-sep envelope bound, {Kp} participations; attained at "
                   f"steps 0, {B}, …, {(Kp - 1) * B}")


def _result(upper_sq: float, lower_sq: float, p: Participation | None, method: str) -> LongSensitivity:
    up = round_up(math.sqrt(upper_sq), 1)
    low = round_down(math.sqrt(max(lower_sq, 0.0)), 1)
    return LongSensitivity(up, low, low >= up * (1.0 - EXACT_RTOL), p, method)
