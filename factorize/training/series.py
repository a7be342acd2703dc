"""The reciprocal of a polynomial as a power series, with a certified entrywise error — the
first column of ``C = R⁻¹`` for a banded lower-triangular Toeplitz R (the banded inverse
square root strategies, ``training.toeplitz.BandedInverse``). Numpy only: the verifier's side.

**The series.** For ``r(x) = Σ_{j<p} r_j x^j`` (``r_0 ≠ 0``) the first n coefficients of
``c = 1/r`` solve ``r * c = δ`` (truncated convolution, δ the unit impulse):
``c_0 = 1/r_0``, ``c_t = −(Σ_{j=1}^{min(t,p−1)} r_j c_{t−j})/r_0``. :func:`inverse_series`
runs that recurrence for the first L = max(:data:`BLOCK`, p) entries and then block by block:
the equations of a block ``[s, s + L)`` read ``T_L c_blk = −H c_prev`` with ``T_L`` the leading
L × L block of R (its inverse: the Toeplitz matrix of ``c_0 … c_{L−1}``) and H the coupling to
the previous p − 1 entries, so ``c_blk = −(T_L⁻¹ H)·c_prev`` — O(n·p) flops in numpy.

**The certificate** (:func:`certified_inverse_series`), whatever algorithm produced ``ĉ``. Its
residual ``ρ = r * ĉ − δ`` (exact reals) gives ``r * (ĉ − c) = ρ``, i.e. ``ĉ − c = c * ρ``.
The coefficients of c are dominated by those of the majorant series
``M(x) = 1/(|r_0| − Σ_{j≥1} |r_j| x^j) = (1/|r_0|)·Σ_m (Σ_{j≥1} |r_j/r_0| x^j)^m``, whose sum is
``M(1) = 1/D``, ``D = |r_0| − Σ_{j≥1}|r_j|``, when D > 0 (then ``|c_k| ≤ 1/D`` for every k:
the series is summable and C bounded). Hence, with ``R_k = max_{i≤k} |ρ_i|``,

    |ĉ_k − c_k| ≤ Σ_{i≤k} |c_{k−i}|·|ρ_i| ≤ R_k·Σ_i m_i ≤ R_k / D.

``ρ`` is evaluated in floating point as p shifted products, each entry an inner product of at
most p + 1 terms (the impulse included): ``|ρ_k − ρ̂_k| ≤ γ_{p+1}·Σ|terms|`` (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2nd ed., Lemma 3.1 and eq. 3.5), the sum of absolute
terms computed the same way is within ``γ_{p+1}`` of its exact value (all terms ≥ 0), and an
underflowing product adds at most 2⁻¹⁰⁷⁵ (p + 2 of them per entry). D is ``math.fsum``
(correctly rounded) rounded down; every bound is rounded up (``factorize.numerics``), so the
certificate can only grow. ``D ≤ 0`` is refused: the bound does not apply (and the series
need not be bounded). For r of the square-root family (``r_0 > 0``, ``r_j ≤ 0``), ``D = r(1)``
and ``M = c`` exactly.
"""

from __future__ import annotations

import math

import numpy as np

from factorize.numerics import NumericRangeError, gamma, round_down, round_up_array

__all__ = ["BLOCK", "certified_inverse_series", "inverse_series"]

#: Block length of :func:`inverse_series` (at least the number of coefficients).
BLOCK = 256


def _coefficients(coef: np.ndarray) -> np.ndarray:
    r = np.asarray(coef, dtype=np.float64).ravel()
    if r.size < 1 or not np.all(np.isfinite(r)) or r[0] == 0.0:
        raise NumericRangeError("a series reciprocal needs finite coefficients with r_0 ≠ 0")
    return r


def inverse_series(coef: np.ndarray, n: int) -> np.ndarray:
    """The first n coefficients of ``1/r(x)`` (module docstring; floating point)."""
    r = _coefficients(coef)[:n]
    p = r.size
    q = p - 1
    c = np.zeros(n)
    L = min(n, max(BLOCK, p))
    c[0] = 1.0 / r[0]
    for t in range(1, L):
        m = min(t, q)
        c[t] = -float(np.dot(r[1:m + 1], c[t - 1::-1][:m])) / r[0]
    if n == L or q == 0:
        return c
    lag = np.arange(L)[:, None] - np.arange(L)[None, :]
    Tinv = np.where(lag >= 0, c[np.clip(lag, 0, None)], 0.0)
    i, k = np.arange(q)[:, None], np.arange(q)[None, :]
    H = np.zeros((L, q))
    H[:q] = np.where(k >= i, r[np.clip(i + q - k, 0, q)], 0.0)  # equation s+i, entry s−q+k
    M = Tinv @ H
    for s in range(L, n, L):
        e = min(s + L, n)
        c[s:e] = -(M[:e - s] @ c[s - q:s])
    return c


def certified_inverse_series(coef: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ĉ, ε)`` with ``|c_k − ĉ_k| ≤ ε_k`` for ``c = 1/r`` truncated at n (module docstring);
    :class:`NumericRangeError` when ``D = |r_0| − Σ_{j≥1}|r_j| ≤ 0``."""
    r = _coefficients(coef)[:n]
    p = r.size
    D = math.fsum([abs(float(r[0]))] + [-abs(float(v)) for v in r[1:]])  # correctly rounded
    if D > 0.0:
        D = round_down(D, 1)
    if not D > 0.0:
        raise NumericRangeError("the banded inverse's coefficients have Σ_{j≥1}|r_j| ≥ |r_0|: the "
                                "entrywise bound on its series reciprocal does not apply")
    c = inverse_series(r, n)
    if not np.all(np.isfinite(c)):
        raise NumericRangeError("the series reciprocal overflows binary64")
    res = r[0] * c
    tot = np.abs(res)
    for j in range(1, p):
        res[j:] += r[j] * c[:n - j]
        tot[j:] += abs(float(r[j])) * np.abs(c[:n - j])
    res[0] -= 1.0
    tot[0] += 1.0
    g = gamma(p + 1)
    rho = round_up_array(np.abs(res) + (g / (1.0 - g)) * tot * (1.0 + g) + (p + 2) * 2.0 ** -1074, 4)
    err = round_up_array(np.maximum.accumulate(rho) / D, 1)
    return c, err
