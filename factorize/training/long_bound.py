"""Certified lower bounds, at any n, on the error of every factorization of the prefix-sum
workload ``L_n`` (lower-triangular ones) — Toeplitz or not, banded or dense — per unit noise.

For ``L_n = B·C`` with sensitivity Δ (the largest column norm of C, or the multi-participation
sensitivity of ``privacy.participation``), the error per unit noise is ``‖B‖_F²·Δ²`` (total)
or ``max_i ‖b_i‖²·Δ²`` (the worst step).

**Single participation.** For q uniform on the n columns, ``‖L D_q^{1/2}‖_tr ≤ ‖B‖_F
‖C D_q^{1/2}‖_F`` (Hölder for Schatten norms) and ``‖C D_q^{1/2}‖_F² = ‖C‖_F²/n ≤ Δ²``, so

    ‖B‖_F²·Δ² ≥ ‖L_n‖_tr²/n,

the γ_F dual of docs/math.md §2.2 at uniform weights (Li, Miklau, Hay, McGregor & Rastogi, "The
Matrix Mechanism", VLDB J. 2015, Thm 3 — the SVD bound). The singular values of ``L_n`` are in
closed form: ``σ_j = 1/(2 sin((2j − 1)π/(4n + 2)))``, j = 1 … n (``L_nᵀL_n``'s inverse is the
tridiagonal ``T`` with 2 on the diagonal except a 1 in the corner, −1 off it, whose eigenvalues
are ``4 sin²((2j − 1)π/(4n + 2))``: Fichtenberger, Henzinger & Upadhyay, ICML 2023, §3).

**Participation** (``epochs=K`` or ``k=K,min_sep=B``). With K' ≤ K participations whose
period ``p = ⌊n/K'⌋`` is at least the separation required (epochs: K' = K, p = n/K), the
patterns ``π_i = {i, i + p, …, i + (K'−1)p}``, i < p, are allowed and partition
``S = {0, …, K'p − 1}``. Taking Y = I in the elliptope, ``Δ² ≥ tr X_{π_iπ_i}`` for each i, so
``Δ² ≥ (1/p)·Σ_{t∈S} ‖c_t‖²``; with q uniform on S the same Hölder step gives

    ‖B‖_F²·Δ² ≥ K'·‖L[:, S]‖_tr²/(K'p) ≥ K'·‖L_{K'p}‖_tr²/(K'p),

(``L_{K'p}`` is the leading block of ``L[:, S]``, and a submatrix's trace norm is at most the
matrix's). K' is the largest admissible: the bound grows with it. This is weaker than the
elliptope dual of ``planner.participation_bound`` (which also uses Y = 𝟙𝟙ᵀ) but needs no n × n
matrix; it is the single-participation bound at n' = K'p, scaled by K'.

**Max error**: ``max_i ‖b_i‖² ≥ ‖B‖_F²/n``, so the total bound over n bounds it.

**Certified evaluation.** ``sin x ≤ x − x³/3! + x⁵/5! − x⁷/7! + x⁹/9!`` for x ≥ 0 (an
alternating Taylor series truncated after a positive term), so ``σ_j ≥ 1/(2·p(x_j))`` with no
libm call. ``x_j = fl(fl((2j−1)·π̂)/(4n+2))`` is within 3u (relative) of ``(2j−1)π/(4n+2)``
(π̂ = fl(π) within u), and p is increasing on [0, π/2], so ``p`` is evaluated at
``x_j(1 + 8u)`` (one ulp up); Horner's rule is within ``γ_{2·9}·Σ|a_i|x^i`` of p (Higham, *Accuracy and
Stability*, eq. 5.3). The sum is ``math.fsum`` (correctly rounded), then rounded down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factorize.numerics import U, gamma, integer, round_down
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

__all__ = ["LongLowerBound", "prefix_lower_bound", "prefix_singular_values", "prefix_trace_norm_lower"]

# Taylor coefficients of sin up to x⁹ (exact in binary64 up to rounding of 1/k!, covered
# by the absolute-value term of the Horner bound below, which uses the same rounded values)
_SIN_COEF = (1.0, -1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0)


def prefix_singular_values(n: int) -> np.ndarray:
    """``σ_j = 1/(2 sin((2j − 1)π/(4n + 2)))`` in floating point (for tests and display)."""
    j = np.arange(1, n + 1, dtype=np.float64)
    return 1.0 / (2.0 * np.sin((2.0 * j - 1.0) * np.pi / (4.0 * n + 2.0)))


def prefix_trace_norm_lower(n: int) -> float:
    """A certified lower bound on ``‖L_n‖_tr = Σ_j σ_j`` (module docstring)."""
    n = integer("n", n, 1, PrivacyError)
    j = np.arange(1, n + 1, dtype=np.float64)
    x = (2.0 * j - 1.0) * math.pi / (4.0 * n + 2.0)
    x = x * (1.0 + 8.0 * U)  # ≥ the exact argument (8u covers 3u and this product's rounding)
    x = np.nextafter(x, np.inf)
    y = x * x
    # Horner on y: p(x) = x·(a0 + y(a1 + y(a2 + y(a3 + y·a4))))
    acc = np.full_like(x, _SIN_COEF[4])
    absacc = np.full_like(x, abs(_SIN_COEF[4]))
    for a in _SIN_COEF[3::-1]:
        acc = acc * y + a
        absacc = absacc * y + abs(a)
    p = acc * x
    absp = absacc * x
    # rounding of y = x² (u relative) and of the coefficients (u each) folded into the γ term
    bound = p + gamma(2 * 9 + 8) * absp * (1.0 + 1e-12)
    sigma_low = 1.0 / (2.0 * bound)
    total = math.fsum((sigma_low * (1.0 - 4.0 * U)).tolist())  # each 1/(2·b) within 2u
    return round_down(total, 2)


@dataclass(frozen=True)
class LongLowerBound:
    """``value ≤ ‖B‖_F²·Δ²`` (total) or ``max_i ‖b_i‖²·Δ²`` (max) for every factorization of
    ``L_n``; ``participations``, ``period``: the K' and p of the bound; ``how`` says how."""

    value: float
    reduction: str
    participations: int
    period: int
    how: str


def prefix_lower_bound(n: int, participation: Participation | None = None,
                       reduction: str = "total") -> LongLowerBound:
    """The certified lower bound of the module docstring for ``L_n``."""
    n = integer("n", n, 1, PrivacyError)
    if participation is None:
        Kp, p = 1, n
    elif participation.kind == "epochs":
        if n % participation.k:
            raise PrivacyError(f"epochs={participation.k} needs a number of steps divisible by "
                               f"{participation.k}, got {n}")
        Kp, p = participation.k, n // participation.k
    else:
        Kp = max(k for k in range(1, participation.k + 1) if k == 1 or n // k >= participation.min_sep)
        p = n // Kp
    m = Kp * p
    tr = prefix_trace_norm_lower(m)
    value = round_down(tr * tr / p, 2)
    how = (f"uniform-weight γ_F dual (SVD bound) of L_{m}, σ_j in closed form"
           + ("" if Kp == 1 else f", × {Kp} participations of period {p} (Y = I patterns)"))
    if reduction == "max":
        value = round_down(value / n, 1)
        how += "; max ≥ total / n"
    elif reduction != "total":
        raise PrivacyError(f"reduction must be 'total' or 'max', got {reduction!r}")
    return LongLowerBound(value, reduction, Kp, p, how)
