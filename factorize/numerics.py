"""Sound floating-point arithmetic: rounding allowances and certified bounds.

Every number a privacy guarantee or a certificate rests on is computed here so that
floating-point error can only move it in the safe direction (an upper bound up, a lower
bound down). The model is IEEE 754 binary64 with round-to-nearest (Higham, *Accuracy and
Stability of Numerical Algorithms*, 2nd ed., §2.2):

* for normal results, ``fl(x ∘ y) = (x ∘ y)(1 + δ)``, ``|δ| ≤ u = 2⁻⁵³``, ∘ ∈ {+, −, ×, ÷, √}
  (Higham eq. 2.4); a sum or difference whose result is subnormal is exact, a product
  that underflows has absolute error ≤ 2⁻¹⁰⁷⁵ (Higham eq. 2.8);
* an inner product of length n evaluated in *any* order, with or without fused
  multiply-adds, satisfies ``|fl(xᵀy) − xᵀy| ≤ γ_n·|x|ᵀ|y|`` with ``γ_n = nu/(1 − nu)``
  when no underflow occurs (Higham Lemma 3.1 and Thm 3.4 / eq. 3.5). This covers numpy's
  pairwise sums, einsum and BLAS dot / gemv / gemm, which compute each output entry by
  additions and (possibly fused) multiplications of the given numbers; Strassen-type
  algorithms are not used by numpy's BLAS and are outside this model.

``round_up(x, ops)`` turns a value computed with at most ``ops`` roundings of relative size
u into a number that is at least the exact value: it multiplies by ``1 + (ops + 2)·2⁻⁵²``
and steps one ulp up, which dominates ``(1 + u)^ops`` for every ops < 2⁴⁰. Column norms
here are certified upper bounds in the same sense (``column_norms_upper``).

Magnitude range. The arguments above hold when no intermediate overflows and when
underflow is either impossible or covered by an absolute allowance. The functions here
either prove that from the input's range or refuse it (:class:`NumericRangeError`).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from factorize.errors import InputError

#: Unit roundoff of binary64.
U = 2.0 ** -53
#: Largest problem dimension these bounds are stated for (γ_n needs n·u < 1; far below).
MAX_DIM = 1 << 40


class NumericRangeError(InputError):
    """An array's magnitudes leave the range where a stated rounding argument holds."""


def gamma(n: int) -> float:
    """Higham's ``γ_n = n·u / (1 − n·u)``, rounded up (n < 2⁴⁰)."""
    n = int(n)
    if n < 0 or n > MAX_DIM:
        raise NumericRangeError(f"γ_n is stated for 0 ≤ n ≤ 2^40, got n={n}")
    if n == 0:
        return 0.0
    # n·u is exact (power-of-two scaling of an integer < 2^53); 1 − n·u is exact for n·u ≤ 1/2
    return round_up(n * U / (1.0 - n * U), 1)


def round_up(x: float, ops: int = 1) -> float:
    """A float ≥ the exact value of a non-negative quantity computed as ``x`` with at most
    ``ops`` relative roundings (module docstring). ``x`` must be finite and ≥ 0."""
    x = float(x)
    if not math.isfinite(x) or x < 0:
        raise NumericRangeError(f"round_up needs a finite non-negative value, got {x!r}")
    if x == 0.0:
        return 0.0
    y = x * (1.0 + (int(ops) + 2) * 2.0 ** -52)
    y = math.nextafter(y, math.inf)
    if not math.isfinite(y):
        raise NumericRangeError("a certified bound overflows binary64")
    return y


def round_down(x: float, ops: int = 1) -> float:
    """A float ≤ the exact value of a non-negative quantity computed as ``x`` with at most
    ``ops`` relative roundings (the mirror of :func:`round_up`; 0 stays 0)."""
    x = float(x)
    if not math.isfinite(x) or x < 0:
        raise NumericRangeError(f"round_down needs a finite non-negative value, got {x!r}")
    y = x * (1.0 - (int(ops) + 2) * 2.0 ** -52)
    return max(0.0, math.nextafter(y, -math.inf))


def round_up_array(x: np.ndarray, ops: int = 1) -> np.ndarray:
    """Elementwise :func:`round_up` of a non-negative array."""
    x = np.asarray(x, dtype=np.float64)
    if x.size and (not np.all(np.isfinite(x)) or float(x.min()) < 0):
        raise NumericRangeError("round_up_array needs finite non-negative values")
    with np.errstate(over="raise"):
        try:
            y = np.nextafter(x * (1.0 + (int(ops) + 2) * 2.0 ** -52), np.inf)
        except FloatingPointError:
            raise NumericRangeError("a certified bound overflows binary64") from None
    y[x == 0] = 0.0
    if not np.all(np.isfinite(y)):
        raise NumericRangeError("a certified bound overflows binary64")
    return y


def relative_gap(upper: float, lower: float) -> float:
    """``upper / lower − 1``; infinite when the lower bound is not positive."""
    return upper / lower - 1.0 if lower > 0 else math.inf


# ---------------------------------------------------------------- certified spectral margins
#: Constant c of the eigen/singular-value error model below.
SPECTRAL_SAFETY = 4.0


def spectral_allowance(shape: tuple[int, int], spectral_norm: float) -> float:
    """Absolute error bound on one computed singular value / eigenvalue of a matrix.

    LAPACK's SVD and symmetric eigensolvers are backward stable: each computed value is
    within ``c · max(m, n) · u · ||M||₂`` of the exact one (Demmel, *Applied Numerical Linear
    Algebra*, 1997, Thm 5.5 / §5.4), with a modest constant, taken as c = 4.
    """
    return SPECTRAL_SAFETY * max(shape) * U * spectral_norm


def certified_psd_margin(S: np.ndarray) -> float:
    """``λ̂_min(S) − allowance`` of the symmetrised ``S``: when positive, ``S`` is PSD as an
    exact matrix (one symmetric eigenvalue problem)."""
    S = 0.5 * (S + S.T)
    eig = np.linalg.eigvalsh(S)
    spectral = float(max(abs(eig[0]), abs(eig[-1])))
    return float(eig[0]) - spectral_allowance(S.shape, spectral)


# ------------------------------------------------------------------------------ input checks
# The one set of argument checks (planner, privacy, geometry, workloads): booleans and
# strings are never numbers, non-finite values are refused, and the caller chooses the
# exception class of its layer (WorkloadError, PrivacyError, …; all InputErrors).


def is_int(x: Any) -> bool:
    """A Python int that is not a bool (a JSON integer read from a plan or ledger file)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(v: Any) -> bool:
    """A finite Python int or float, never a bool (a JSON number read from a file)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def is_positive_number(v: Any) -> bool:
    """:func:`is_number` and > 0."""
    return is_number(v) and v > 0


def real_number(name: str, value: Any, error: type[Exception] = InputError) -> float:
    """``float(value)`` for a finite real number (int, float, numpy scalar, Fraction);
    ``error`` for a bool, a string, NaN or ±inf."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise error(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise error(f"{name} must be finite, got {v}")
    return v


def positive_number(name: str, value: Any, error: type[Exception] = InputError) -> float:
    """:func:`real_number` that is also > 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.number)):
        raise error(f"{name} must be a positive number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise error(f"{name} must be a positive number (finite and > 0), got {value!r}")
    return v


def integer(name: str, value: Any, minimum: int | None = None,
            error: type[Exception] = InputError) -> int:
    """``int(value)`` for an integer (Python or numpy; never a bool, float or string) that is
    at least ``minimum`` when one is given."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise error(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        what = {0: "a non-negative integer (>= 0)", 1: "a positive integer (>= 1)"}.get(
            minimum, f"an integer >= {minimum}")
        raise error(f"{name} must be {what}, got {v}")
    return v


def is_power_of_two(x: float) -> bool:
    """True for a finite positive normal binary64 number 2^k."""
    x = float(x)
    if not (math.isfinite(x) and x >= 2.0 ** -1022):
        return False
    mantissa, _ = math.frexp(x)
    return mantissa == 0.5


def binade(a: np.ndarray) -> int:
    """The exponent e with ``max|a| ∈ [2^(e−1), 2^e)`` (``math.frexp``), 0 for a zero array."""
    m = float(np.max(np.abs(a))) if a.size else 0.0
    if m == 0.0:
        return 0
    return math.frexp(m)[1]


# ---------------------------------------------------------------------------------------
# certified column and row norms

#: Nonzero entries of the arrays whose norms are certified must lie in this range, so that
#: every square and pairwise product is a normal number and no sum of up to 2^40 of them
#: overflows: [2^-480, 2^480].
MIN_MAGNITUDE = 2.0 ** -480
MAX_MAGNITUDE = 2.0 ** 480


def check_magnitudes(A: Any, what: str) -> np.ndarray:
    """``A`` as a finite float64 array whose nonzero entries have magnitudes in
    [2⁻⁴⁸⁰, 2⁴⁸⁰]; :class:`NumericRangeError` otherwise (with both numbers)."""
    arr = np.asarray(A, dtype=np.float64)
    if arr.size == 0:
        return arr
    if not np.all(np.isfinite(arr)):
        raise NumericRangeError(f"{what} has non-finite entries")
    mags = np.abs(arr)
    big = float(mags.max())
    if big > MAX_MAGNITUDE:
        raise NumericRangeError(f"{what} has an entry of magnitude {big:.3g} > 2^480: outside the "
                                "range where its norms are certified (squares would overflow)")
    nz = mags[mags > 0]
    if nz.size and float(nz.min()) < MIN_MAGNITUDE:
        raise NumericRangeError(f"{what} has a nonzero entry of magnitude {float(nz.min()):.3g} < "
                                "2^-480: outside the range where its norms are certified "
                                "(squares would underflow)")
    return arr


def unit_scale(A: np.ndarray, what: str = "the matrix") -> tuple[np.ndarray, int]:
    """``(S, e)`` with ``A = S·2^e`` exactly and ``max|S| ∈ [½, 1)`` (S = 0, e = 0 for a zero
    matrix; scaling by a power of two is exact for every finite entry, subnormal or not, when
    the result is normal). Refuses nonzero entries below ``2⁻⁴⁸⁰·max|A|``: the certified norms
    of S need its nonzero entries in [2⁻⁴⁸⁰, 1)."""
    arr = np.asarray(A, dtype=np.float64)
    if arr.size and not np.all(np.isfinite(arr)):
        raise NumericRangeError(f"{what} has non-finite entries")
    if arr.size == 0 or not np.any(arr):
        return np.zeros_like(arr), 0
    e = binade(arr)  # scaling by 2^-e is exact for every finite entry, subnormal ones included
    mags = np.abs(arr)
    nz = mags[mags > 0]
    if float(nz.min()) < math.ldexp(MIN_MAGNITUDE, e):
        raise NumericRangeError(f"{what}: a nonzero entry {float(nz.min()):.3g} is below 2^-480 "
                                f"times the largest ({float(mags.max()):.3g}): outside the range "
                                "where its norms are certified (squares would underflow)")
    return np.ldexp(arr, -e), e


def scaled_norm_upper(factors: list[np.ndarray], kind: str, what: str = "the matrix") -> float:
    """Certified upper bound on a norm of ``⊗ factors`` that is the product of the factors'
    norms: ``"col_max"`` (‖·‖_{1→2}), ``"row_max"`` (‖·‖_{2→∞}) or ``"frobenius"``; each factor
    unit-scaled first, so no square underflows."""
    value = 1.0
    e_total = 0
    for F in factors:
        S, e = unit_scale(F, what)
        e_total += e
        if S.size == 0:
            return 0.0
        if kind == "col_max":
            v = max_upper(column_norms_upper(S, "l2", what))
        elif kind == "row_max":
            v = max_upper(row_norms_upper(S, "l2", what))
        elif kind == "frobenius":
            v = frobenius_upper(S, what)
        else:
            raise InputError(f"unknown norm kind {kind!r}")
        value = product_upper([value, v])
    try:
        out = math.ldexp(value, e_total)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise NumericRangeError(f"a norm of {what} overflows binary64")
    return round_up(max(out, 2.0 ** -1022) if value > 0 else 0.0, 1)


def column_norms_upper(A: Any, norm: str, what: str = "the matrix") -> np.ndarray:
    """Certified upper bounds on the p-norms (p = 1, 2) of the columns of a dense m×N matrix.

    With entries in the range of :func:`check_magnitudes`, the squares |a|² ∈ [2⁻⁹⁶⁰, 2⁹⁶⁰]
    are normal and a sum of m ≤ 2⁴⁰ of them is finite, so the computed s̃ of Σ a² (or Σ|a|)
    satisfies ``s ≤ s̃ / (1 − γ_m)`` (inner product bound). The returned values are
    ``√(s̃)·(1 + γ_m)`` (resp. ``s̃·(1 + γ_m)/(1 − γ_m)``), rounded up: ≥ the exact norms.
    """
    arr = check_magnitudes(A, what)
    if arr.ndim != 2:
        raise NumericRangeError(f"{what} must be 2-D, got shape {arr.shape}")
    m = arr.shape[0]
    g = gamma(max(m, 1))
    if norm == "l1":
        s = np.abs(arr).sum(axis=0)
        return round_up_array(s * ((1.0 + g) / (1.0 - g)), 3)
    if norm == "l2":
        s = np.einsum("ij,ij->j", arr, arr)
        return round_up_array(np.sqrt(s) * (1.0 + g), 3)
    raise InputError(f"norm must be 'l1' or 'l2', got {norm!r}")


def row_norms_upper(R: Any, norm: str = "l2", what: str = "the matrix") -> np.ndarray:
    """Certified upper bounds on the row p-norms (:func:`column_norms_upper` of Rᵀ)."""
    arr = np.asarray(R, dtype=np.float64)
    if arr.ndim != 2:
        raise NumericRangeError(f"{what} must be 2-D, got shape {arr.shape}")
    return column_norms_upper(arr.T, norm, what)


def max_upper(values: np.ndarray) -> float:
    """The largest of certified upper bounds (0 for none)."""
    return float(np.max(values)) if values.size else 0.0


def product_upper(values: Any) -> float:
    """A certified upper bound on the exact product of non-negative floats."""
    vals = [float(v) for v in values]
    out = 1.0
    for v in vals:
        if not (math.isfinite(v) and v >= 0):
            raise NumericRangeError(f"product_upper needs finite non-negative factors, got {v!r}")
        out *= v
    if not math.isfinite(out):
        raise NumericRangeError("a certified product overflows binary64")
    return round_up(out, max(len(vals) - 1, 0))


def frobenius_upper(R: Any, what: str = "the matrix") -> float:
    """A certified upper bound on ``‖R‖_F``."""
    arr = np.asarray(R, dtype=np.float64)
    col = column_norms_upper(arr.reshape(-1, 1), "l2", what)
    return float(col[0])
