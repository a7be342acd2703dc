"""The executor's measurement, computed exactly: ``q(h) = round(Ã h / γ) ∈ Zᵐ``.

A lattice release (docs/math.md §6.5, CKS20) is ``γ·(q(h) + Y)`` with exact integer noise Y. Its
privacy argument bounds ``‖q(h) − q(h')‖`` for neighbours by ``Δ(Ã)/γ + √m`` (rounding moves
each coordinate by at most ½) — a statement about the *exact* value of ``Ã h``. A float64
evaluation of ``A·h`` carries an error that grows with N and with n = Σh, so here q(h) is the
exact value, whatever the plan and the data:

1. **Measured strategy.** Each factor is truncated toward zero to 53 bits below its largest
   entry: with ``max|A_j| ∈ [2^(e−1), 2^e)``, ``Ã_j = trunc(A_j·2^(53−e))·2^(e−53) = Z_j·2^(e−53)``
   with integer ``|Z_j| < 2⁵³``. So ``|ã_ij| ≤ |a_ij|`` entrywise: the add/remove
   sensitivities (ℓ1 and ℓ2) of ``Ã = ⊗Ã_j`` never exceed those of ``A``; the verifier and the
   planner compute every sensitivity on Ã (:func:`measured_factors`), the strategy actually
   measured. The entries of Ã differ from A's by less than ``2^(e−53)``, a bias
   ``R(Ã − A)h`` that the plan's error bars account for.
2. **Certified float evaluation.** With ``S_j = Z_j·2⁻⁵³`` (entries in (−1, 1)), ``Ŷ = fl((⊗S_j)h)``
   satisfies ``|Ŷ − Y| ≤ c·(⊗|S_j|)h + 2⁻¹⁰⁰⁰``, ``c = Π(1 + γ_{N_j}) − 1`` (by induction over the
   factors, h ≥ 0; Higham Thm 3.5's product argument; the absolute term covers underflow).
   ``x̂ = Ŷ·2^T`` with ``T = Σe_j − log₂γ`` (γ a power of two: exact scaling). Wherever
   ``|x̂ − rint(x̂)| + err·2^T < ½(1 − 2⁻²⁰)``, the exact ``Y·2^T`` lies strictly inside the
   same rounding cell: ``q_i = rint(x̂_i)`` exactly.
3. **Exact fallback.** For the remaining coordinates (near a rounding boundary, or huge) the
   integer ``(⊗Z_j)h`` is computed exactly by multi-modular arithmetic: for primes p with
   ``N_j((p−1)/2)² < 2⁵³``, the product of symmetric residues is a float64 computation whose
   every partial sum is an integer below 2⁵³ — exact in any summation order — reduced mod p by
   ``fmod`` (exact); Garner's algorithm and Horner's rule in Python integers rebuild the value
   from enough primes (``Π p > 2·2^(53d)·n``), and it is rounded half-to-even exactly.

The histogram may be given densely (:func:`lattice_image`) or by its non-zero cells
(:func:`lattice_image_sparse`, for Kronecker blocks over domains too large to form): the
sparse contraction ``kron.kron_matvec_sparse`` sums at most ``N_j`` terms per entry at
factor j, as the dense one does, plus one sum over record chunks, whose ``γ`` is one more
factor of c; the exact path reduces mod p after every step in the same way.

So ``q(h)`` never depends on the summation order, the BLAS, or the machine: the test-mode
release is reproducible bit for bit, and the sensitivity bound holds for what is computed.
``round_to_grid`` (``privacy.sampling``) does the same for values that are already exact
(the integer moments of the projection plans).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from factorize.kron import kron_matvec, kron_matvec_sparse, sparse_chunk_records
from factorize.numerics import U, binade, gamma, is_power_of_two, round_up

from .guarantees import PrivacyError

__all__ = ["QuantizedFactor", "quantize", "measured_factors", "lattice_image", "lattice_image_sparse",
           "MANTISSA_BITS"]

MANTISSA_BITS = 53
_TIE_MARGIN = 0.5 * (1.0 - 2.0 ** -20)
_ABS = 2.0 ** -1000
#: Factors whose largest entry lies outside [2^-900, 2^900] are refused (the scaled
#: measured factor would not be a normal number).
_BINADE_RANGE = 900


@dataclass(frozen=True)
class QuantizedFactor:
    """``Ã = Z·2^(e−53)`` with Z a float64 array of integers, ``|Z| < 2⁵³`` (module docstring)."""

    Z: np.ndarray
    e: int

    @property
    def scaled(self) -> np.ndarray:
        """``Z·2⁻⁵³``: entries in (−1, 1), exact."""
        return np.ldexp(self.Z, -MANTISSA_BITS)

    @property
    def measured(self) -> np.ndarray:
        """``Ã = Z·2^(e−53)`` (exact: e is within ±900)."""
        return np.ldexp(self.Z, self.e - MANTISSA_BITS)


def quantize(A: np.ndarray) -> QuantizedFactor:
    """Truncate ``A`` toward zero to 53 bits below its largest entry (module docstring, step 1)."""
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2 or not np.all(np.isfinite(arr)):
        raise PrivacyError("a strategy factor must be a finite 2-D array")
    e = binade(arr)
    if not np.any(arr):
        return QuantizedFactor(np.zeros_like(arr), 0)
    if not -_BINADE_RANGE <= e <= _BINADE_RANGE:
        raise PrivacyError(f"a strategy factor's largest entry (2^{e}) is outside the range "
                           f"[2^-{_BINADE_RANGE}, 2^{_BINADE_RANGE}] where it can be measured exactly")
    # a·2^(53−e) is exact unless it is subnormal, in which case |·| < 1 and trunc gives 0
    Z = np.trunc(np.ldexp(arr, MANTISSA_BITS - e))
    return QuantizedFactor(Z, e)


def measured_factors(A_factors: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The strategy the executor measures: each factor quantized (module docstring, step 1)."""
    return [quantize(A).measured for A in A_factors]


class _Dense:
    """A histogram as its N counts (``lattice_image``)."""

    def __init__(self, counts: np.ndarray) -> None:
        self.counts = counts
        self.weights = counts.astype(np.float64)

    def apply(self, S: Sequence[np.ndarray]) -> np.ndarray:
        return kron_matvec(S, self.weights)

    def chunk_terms(self, m: int) -> int:
        return 1

    def residues(self, Zs: Sequence[np.ndarray], p: int) -> np.ndarray:
        return _residues(Zs, self.counts, p)


class _Sparse:
    """A histogram as its non-zero cells' codes and counts (``lattice_image_sparse``)."""

    def __init__(self, codes: np.ndarray, counts: np.ndarray) -> None:
        self.codes = codes
        self.counts = counts
        self.weights = counts.astype(np.float64)

    def apply(self, S: Sequence[np.ndarray]) -> np.ndarray:
        return kron_matvec_sparse(S, self.codes, self.weights)

    def chunk_terms(self, m: int) -> int:
        """Terms of the final sum over record chunks (``kron_matvec_sparse``)."""
        return max(1, -(-self.codes.shape[0] // sparse_chunk_records(m)))

    def residues(self, Zs: Sequence[np.ndarray], p: int) -> np.ndarray:
        X = _sym_mod(np.remainder(self.counts, p).astype(np.float64), p)
        r = kron_matvec_sparse([_sym_mod(Z, p) for Z in Zs], self.codes, X,
                               reduce=lambda a: _sym_mod(a, p)).astype(np.int64)
        return np.where(r < 0, r + p, r)


def _check_grid(grid: float) -> None:
    if not is_power_of_two(grid):
        raise PrivacyError(f"the grid must be a power of two (the exact measurement scales by it); "
                           f"got {grid!r}")


def _check_counts(counts: np.ndarray) -> int:
    """n = Σ counts, refusing negative counts and n ≥ 2⁵³."""
    if counts.size and int(counts.min()) < 0:
        raise PrivacyError("the histogram has negative counts")
    n = int(counts.sum(dtype=np.uint64)) if counts.size else 0
    if n >= 2 ** 53 or (counts.size and int(counts.max()) >= 2 ** 53):
        raise PrivacyError("the histogram counts exceed 2^53 records")
    return n


def lattice_image(A_factors: Sequence[np.ndarray], h: np.ndarray, grid: float) -> np.ndarray:
    """``round_half_even(Ã h / γ)`` exactly, ``Ã = ⊗ quantize(A_j)``, for a histogram h of
    non-negative integer counts (module docstring). Returns int64, or a numpy object array
    of Python integers when some |q_i| ≥ 2⁶²."""
    _check_grid(grid)
    counts = np.asarray(h)
    if counts.ndim != 1 or counts.dtype.kind not in "iu":
        raise PrivacyError("the histogram must be a 1-D integer array")
    qf = [quantize(A) for A in A_factors]
    N = math.prod(q.Z.shape[1] for q in qf)
    if counts.size != N:
        raise PrivacyError(f"histogram of length {counts.size}, the strategy has N={N} columns")
    n = _check_counts(counts)
    return _lattice(qf, _Dense(counts), n, grid)


def lattice_image_sparse(A_factors: Sequence[np.ndarray], codes: np.ndarray, counts: np.ndarray,
                         grid: float) -> np.ndarray:
    """:func:`lattice_image` for the histogram given by its non-zero cells: ``codes`` (distinct
    rows of attribute codes, one column per factor) and their ``counts``; the N-cell
    histogram is never formed (``kron.kron_matvec_sparse``: the same per-factor dot-product
    lengths, plus one sum over record chunks, counted in the rounding allowance)."""
    _check_grid(grid)
    codes = np.asarray(codes)
    counts = np.asarray(counts)
    if codes.ndim != 2 or codes.dtype.kind not in "iu" or codes.shape[1] != len(A_factors):
        raise PrivacyError(f"codes must be an integer array with one column per factor ({len(A_factors)})")
    if counts.ndim != 1 or counts.dtype.kind not in "iu" or counts.shape[0] != codes.shape[0]:
        raise PrivacyError("counts must be a 1-D integer array, one per row of codes")
    qf = [quantize(A) for A in A_factors]
    cols = np.array([q.Z.shape[1] for q in qf], dtype=np.int64)
    if codes.size and (bool((codes < 0).any()) or bool((codes >= cols).any())):
        raise PrivacyError("a cell code lies outside its factor's columns")
    n = _check_counts(counts)
    return _lattice(qf, _Sparse(codes.astype(np.int64), counts.astype(np.int64)), n, grid)


def _lattice(qf: Sequence[QuantizedFactor], hist: _Dense | _Sparse, n: int, grid: float) -> np.ndarray:
    """Steps 2–3 of the module docstring for either histogram form."""
    g_exp = math.frexp(float(grid))[1] - 1
    T = sum(q.e for q in qf) - g_exp
    S = [q.scaled for q in qf]
    Y = hist.apply(S)
    B = hist.apply([np.abs(s) for s in S])
    c = 1.0
    for s in S:
        c *= 1.0 + gamma(max(s.shape[1], 1))
    c *= 1.0 + gamma(hist.chunk_terms(Y.size))
    c = round_up(c - 1.0 + 4 * (len(S) + 1) * U, 2)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        err = (c * B / (1.0 - c) + _ABS) * (1.0 + 8 * U)
        x = np.ldexp(Y, T)
        errT = np.ldexp(err, T) * (1.0 + 4 * U) + _ABS
        k = np.rint(x)
        dist = np.abs(x - k)
        ok = np.isfinite(x) & np.isfinite(errT) & (np.abs(k) < 2.0 ** 62) & (dist + errT < _TIE_MARGIN)
    out = np.zeros(k.size, dtype=np.int64)
    out[ok] = k[ok].astype(np.int64)
    if bool(ok.all()):
        return out
    todo = np.flatnonzero(~ok)
    exact = _exact_rounded(qf, hist, n, T, todo)
    if any(abs(v) >= 2 ** 62 for v in exact):
        obj = out.astype(object)
        obj[todo] = exact
        return obj
    out[todo] = np.array(exact, dtype=np.int64)
    return out


# ---------------------------------------------------------------------------------------
# exact multi-modular evaluation


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37):  # deterministic for n < 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


@lru_cache(maxsize=64)
def _primes(bound: int, count: int) -> tuple[int, ...]:
    """The ``count`` largest primes below ``bound``."""
    out: list[int] = []
    p = bound - 1
    while len(out) < count and p > 2:
        if _is_prime(p):
            out.append(p)
        p -= 1
    if len(out) < count:
        raise PrivacyError("not enough primes for the exact measurement")
    return tuple(out)


def _sym_mod(x: np.ndarray, p: int) -> np.ndarray:
    """Symmetric residues in [−(p−1)/2, (p−1)/2] of float64 integers |x| < 2⁵³ (exact: the
    quotient estimate q = floor(x/p) may be off by one, but p·q and x − p·q are exact
    integers below 2⁵³, and one correction on each side restores the range)."""
    fp = float(p)
    r = np.floor(x * (1.0 / fp))
    r *= -fp
    r += x
    r[r < 0] += fp
    r[r >= fp] -= fp
    r[r > (p - 1) / 2.0] -= fp
    return r


def _residues(Zs: Sequence[np.ndarray], counts: np.ndarray, p: int) -> np.ndarray:
    """``(⊗Z_j)h mod p`` as int64 in [0, p) (every float64 partial sum an integer < 2⁵³)."""
    X = _sym_mod(np.remainder(counts.astype(np.int64), p).astype(np.float64), p)
    X = X.reshape([Z.shape[1] for Z in Zs])
    for axis, Z in enumerate(Zs):
        X = _sym_mod(np.moveaxis(np.tensordot(_sym_mod(Z, p), X, axes=([1], [axis])), 0, axis), p)
    r = X.reshape(-1).astype(np.int64)
    return np.where(r < 0, r + p, r)


def _exact_rounded(qf: Sequence[QuantizedFactor], hist: _Dense | _Sparse, n: int, T: int,
                   todo: np.ndarray) -> list[int]:
    """``round_half_even((⊗Z_j)h · 2^(T−53d))`` exactly, for the coordinates ``todo``."""
    d = len(qf)
    n_max = max(max(q.Z.shape[1] for q in qf), 1)
    bound = int(2.0 * math.sqrt((2.0 ** 53 - 1) / n_max)) + 1  # N_j((p−1)/2)² < 2^53
    bound = min(bound, 1 << 26)
    need_bits = MANTISSA_BITS * d + max(n, 1).bit_length() + 2  # Π p > 2·2^(53d)·n
    count = need_bits // (bound.bit_length() - 2) + 2
    primes = _primes(bound, count)
    M = 1
    used: list[int] = []
    for p in primes:
        used.append(p)
        M *= p
        if M.bit_length() > need_bits:
            break
    # only the factor rows the wanted coordinates use: a (Π|rows_j|)-entry tensor ≤ m
    idx = np.unravel_index(todo, [q.Z.shape[0] for q in qf])
    rows = [np.unique(i) for i in idx]
    Zs = [q.Z[r] for q, r in zip(qf, rows, strict=True)]
    pos = np.ravel_multi_index([np.searchsorted(r, i) for r, i in zip(rows, idx, strict=True)],
                               [r.size for r in rows])
    res = [hist.residues(Zs, p)[pos] for p in used]
    # Garner: mixed-radix digits v_k, Y = v_0 + p_0(v_1 + p_1(v_2 + ...)), all in int64
    digits: list[np.ndarray] = []
    for k, p in enumerate(used):
        t = res[k].copy()
        for l in range(k):
            inv = pow(used[l], -1, p)
            t = np.remainder(t - digits[l], p)
            t = np.remainder(t * inv, p)
        digits.append(t)
    out: list[int] = []
    shift = T - MANTISSA_BITS * d
    half_M = M // 2
    for i in range(todo.size):
        Y = 0
        for k in range(len(used) - 1, -1, -1):
            Y = Y * used[k] + int(digits[k][i])
        if half_M < Y:
            Y -= M
        out.append(_round_shift(Y, shift))
    return out


def _round_shift(Y: int, shift: int) -> int:
    """``round_half_even(Y·2^shift)`` for Python integers."""
    if shift >= 0:
        return Y << shift
    t = -shift
    q, r = divmod(Y, 1 << t)  # floor division: 0 ≤ r < 2^t
    twice = 2 * r
    if twice > (1 << t) or (twice == (1 << t) and q % 2 == 1):
        q += 1
    return q
