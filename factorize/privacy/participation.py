"""L2 sensitivity of a streaming strategy when one record takes part in several steps
(multi-participation: DP-FTRL / DP-MF training, continual counting), as a certified upper bound.

Setting (Choquette-Choo et al., "Multi-Epoch Matrix Factorization Mechanisms for Private
Machine Learning", ICML 2023, §2). A strategy ``A`` (m × n, one column per step) is applied to
the matrix ``G`` (n × d) of per-step contributions; one record changes the rows ``t ∈ π`` of G by
vectors ``g_t`` with ``‖g_t‖₂ ≤ 1`` (clipping), for a *participation pattern* π. Then

    Δ² = max_π max_{‖g_t‖≤1} ‖A Σ_{t∈π} e_t g_tᵀ‖_F² = max_π max_{Y ∈ 𝓔_π} ⟨X_ππ, Y⟩,   X = AᵀA,

𝓔_π the Gram matrices of unit vectors (the elliptope: Y ⪰ 0, diag Y = 1). Two relations
(:class:`Participation`):

* ``epochs=K``: n = K·b steps in K epochs of b; the record takes part once per epoch at the same
  position: π_i = {i, i + b, …, i + (K−1)b}, i < b.
* ``k=K,min_sep=B``: at most K steps, any two at least B apart (Choquette-Choo et al., NeurIPS
  2023, "(k, b)-participation").

Bounds. For every π: ``max_Y ⟨X_ππ, Y⟩ ≤ Σ_{s,t∈π} |X_st|`` (|Y_st| ≤ 1), with equality when
``X_ππ ≥ 0`` entrywise (Y = 𝟙𝟙ᵀ, all g_t equal, is then optimal): the value is *exact* for the
non-negative Gram matrices of prefix-sum factorizations. ``X`` is computed as ``fl(AᵀA)``,
within ``E = γ_m |A|ᵀ|A|`` of the exact Gram (Higham's inner-product bound), so ``|X_st| ≤
|X̂_st| + E_st``, and ``X_st ≥ X̂_st − E_st`` decides exactness.

* epochs: the b patterns are enumerated: ``max_i Σ_{s,t∈π_i} (|X̂| + E)_st``.
* min-sep: maximising a quadratic over patterns is combinatorial; the bound relaxes it to a
  linear one, ``Σ_{s,t∈π}|X_st| ≤ Σ_{s∈π} r_s`` with ``r_s = |X_ss| + (the K−1 largest |X_st|
  over t at distance ≥ B from s)``, maximised over patterns exactly by dynamic programming
  (positions at least B apart, at most K of them). The pattern it picks gives a lower bound
  ``Σ_{s,t∈π} X_st`` when X ≥ 0 there; the result is exact when both meet.

Floating-point error only raises the bound: every sum is rounded up (``numerics.round_up``).
Cost: one m×n Gram (O(m n²)), then O(n·b) (epochs) or O(n² + n·K) (min-sep).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .guarantees import PrivacyError


@dataclass(frozen=True)
class Participation:
    """How often one record takes part: ``epochs`` (K epochs, same position in each) or
    ``min_sep`` (at most ``k`` steps at least ``min_sep`` apart)."""

    kind: str
    k: int
    min_sep: int = 1

    @classmethod
    def parse(cls, text: str) -> Participation:
        """``"epochs=K"`` or ``"k=K,min_sep=B"`` (K, B positive integers)."""
        t = text.replace(" ", "")
        m = re.fullmatch(r"epochs=([0-9]+)", t)
        if m:
            return cls("epochs", _positive(m.group(1), "epochs"))
        m = re.fullmatch(r"k=([0-9]+),min_sep=([0-9]+)", t)
        if m:
            return cls("min_sep", _positive(m.group(1), "k"), _positive(m.group(2), "min_sep"))
        raise PrivacyError(f"participation must be 'epochs=K' or 'k=K,min_sep=B', got {text!r}")

    @property
    def key(self) -> str:
        return f"epochs={self.k}" if self.kind == "epochs" else f"k={self.k},min_sep={self.min_sep}"


def _positive(s: str, name: str) -> int:
    v = int(s)
    if v < 1:
        raise PrivacyError(f"participation {name} must be at least 1, got {v}")
    return v


@dataclass(frozen=True)
class ParticipationSensitivity:
    """``value ≥ Δ₂`` under ``participation``; ``exact``: the value is also attained (up to the
    rounding allowance), ``lower`` the attained value (0 when none is certified)."""

    value: float
    lower: float
    exact: bool
    participation: Participation


def gram_bounds(A: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(X̂, E)``: ``fl(AᵀA)`` and ``E ≥ |AᵀA − X̂|`` entrywise (module docstring)."""
    from factorize.numerics import check_magnitudes, gamma, round_up_array

    A = check_magnitudes(np.asarray(A, dtype=np.float64), "the strategy")
    m = A.shape[0]
    X = A.T @ A
    absA = np.abs(A)
    g = gamma(m + 2)
    E = round_up_array((absA.T @ absA) * (g / (1.0 - g)), 3)
    return X, E


def participation_sensitivity(A: Any, participation: Participation) -> ParticipationSensitivity:
    """The certified L2 sensitivity of strategy ``A`` (m × n: one column per step) under
    ``participation`` (module docstring)."""
    X, E = gram_bounds(A)
    n = X.shape[0]
    if participation.kind == "epochs":
        return _epochs(X, E, participation, n)
    return _min_sep(X, E, participation, n)


def _epochs(X: np.ndarray, E: np.ndarray, p: Participation, n: int) -> ParticipationSensitivity:
    from factorize.numerics import round_down, round_up

    if n % p.k:
        raise PrivacyError(f"epochs={p.k} needs a number of steps divisible by {p.k}, got {n}")
    b = n // p.k
    upper = np.abs(X) + E
    low = X - E
    best_up, best_low, exact = 0.0, 0.0, True
    for i in range(b):
        idx = np.arange(i, n, b)
        up = round_up(math.fsum(upper[np.ix_(idx, idx)].ravel().tolist()), idx.size ** 2 + 2)
        block = low[np.ix_(idx, idx)]
        nonneg = bool(np.all(block >= 0))
        lo = round_down(math.fsum(block.ravel().tolist()), idx.size ** 2 + 2) if nonneg else 0.0
        best_up = max(best_up, up)
        best_low = max(best_low, lo)
        exact = exact and nonneg
    return _result(best_up, best_low, exact, p)


def _min_sep(X: np.ndarray, E: np.ndarray, p: Participation, n: int) -> ParticipationSensitivity:
    from factorize.numerics import round_down, round_up

    K, B = p.k, p.min_sep
    absX = np.abs(X) + E
    idx = np.arange(n)
    r = np.empty(n)
    for s in range(n):
        far = absX[s, np.abs(idx - s) >= B]
        top = np.sort(far)[::-1][:K - 1] if K > 1 else np.zeros(0)
        r[s] = round_up(math.fsum([float(absX[s, s]), *top.tolist()]), K + 2)
    # best Σ_{s∈π} r_s over patterns: f[t][j] = best with j picks among steps ≥ t
    pick, value = _dp_patterns(r, K, B)
    upper = round_up(value, n + 2)
    block = (X - E)[np.ix_(pick, pick)]
    nonneg = bool(np.all(block >= 0))
    lower = round_down(math.fsum(block.ravel().tolist()), pick.size ** 2 + 2) if nonneg else 0.0
    return _result(upper, lower, nonneg and lower >= upper * (1.0 - 1e-12), p)


def _dp_patterns(r: np.ndarray, K: int, B: int) -> tuple[np.ndarray, float]:
    """The pattern (steps at least B apart, at most K) maximising ``Σ r_s`` (r ≥ 0), and that sum."""
    n = r.size
    best = np.zeros((n + 1, K + 1))
    take = np.zeros((n, K + 1), dtype=bool)
    for t in range(n - 1, -1, -1):
        nxt = min(n, t + B)
        for j in range(1, K + 1):
            with_t = r[t] + best[nxt, j - 1]
            if with_t > best[t + 1, j]:
                best[t, j], take[t, j] = with_t, True
            else:
                best[t, j] = best[t + 1, j]
    out, t, j = [], 0, K
    while t < n and j > 0:
        if take[t, j]:
            out.append(t)
            t, j = min(n, t + B), j - 1
        else:
            t += 1
    return np.asarray(out, dtype=np.int64), float(best[0, K])


def _result(upper_sq: float, lower_sq: float, exact: bool, p: Participation) -> ParticipationSensitivity:
    from factorize.numerics import round_down, round_up

    return ParticipationSensitivity(round_up(math.sqrt(upper_sq), 1), round_down(math.sqrt(lower_sq), 1),
                                    exact, p)
