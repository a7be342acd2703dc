"""Exact noise samplers on the integers, and lattice release (docs/math.md §6.5).

Floating-point noise is attackable (Mironov 2012), so a production release adds noise sampled
*exactly* on a lattice ``γZ``. This module implements, from the description in Canonne, Kamath &
Steinke 2020 ("The Discrete Gaussian for Differential Privacy", NeurIPS; arXiv:2004.00010):

* Bernoulli(exp(−γ)) for rational γ ≥ 0 (CKS20 Alg. 1) -- :func:`bernoulli_exp`;
* the discrete Laplace ``P(x) ∝ exp(−|x|·s/t)`` (CKS20 Alg. 2) -- :func:`discrete_laplace`;
* the discrete Gaussian ``P(x) ∝ exp(−x²/(2σ²))`` by rejection from the discrete Laplace with
  scale ``t = ⌊σ⌋ + 1`` (CKS20 Alg. 3) -- :func:`discrete_gaussian`.

Exactness. Every random decision is a comparison of integers built from uniform random bytes:
Bernoulli(a/b) compares the base-2^d digits of a uniform real with those of a/b, exactly
(:func:`_bern_ratio_fixed`), uniform integers below a bound are drawn by rejection of the top
partial range (no modulo bias), and Bernoulli(exp(−1)) reads the whole chain of CKS20 Alg. 1 off
one uniform integer below 10! (:func:`_bern_exp_minus_one`). Parameters are exact rationals
(:class:`fractions.Fraction`); a float parameter is converted *exactly* (``Fraction(x)``), so the
sampler is exact for the binary rational the float denotes. Each sampler below states, next to
its code, why its output has exactly the claimed law.

Speed. Every loop of the algorithms runs on a batch of candidates in lock-step, with numpy
int64 arithmetic, carrying only the positions still undecided into the next round; there is no
per-draw Python code. The fixed-width path covers every parameter whose intermediate integers
provably stay below 2⁶² (each function states its bound); the others — and an astronomically
unlikely tail sample — run on Python integers (numpy ``object`` arrays), where Bernoulli(a/b)
is decided from a 64-bit uniform word against a rigorously bracketed float approximation of
a/b and, in the (≈1e-12 probability) ambiguous case, refined with further words and exact
integer arithmetic. Nothing is ever truncated or approximated.

Randomness. Samplers take an explicit ``rng`` that must be a :class:`SecureRandom` (one
``os.urandom`` stream read in blocks of up to 1 MiB; the production default, used when ``rng``
is None) or a :class:`TestRandom` (seeded numpy PCG64, reproducible, ``is_test_mode = True``:
outputs drawn with it are **not private** and callers must mark them so).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterator
from fractions import Fraction
from numbers import Rational, Real
from typing import Any

import numpy as np

from .guarantees import PrivacyError

__all__ = [
    "RandomSourceError",
    "SecureRandom",
    "TestRandom",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "round_to_grid",
    "lattice_sigma2",
    "lattice_laplace_scale",
    "sample_on_grid",
    "sampled_variance",
    "sample_lattice",
    "sample_float_noise",
    "add_noise",
]

#: Every intermediate integer of the fixed-width (int64) path is at most this (< 2⁶³ − 1).
_FIXED_MAX = 1 << 62
#: Largest denominator b of the fixed-width Bernoulli(a/b): b < 2⁶¹, so b·2^d ≤ 2⁶² with d ≥ 1.
_RATIO_MAX = (1 << 61) - 1
#: Digit width (bits) of the fixed-width Bernoulli(a/b): one random byte per digit.
_DIGIT_BITS = 8
#: 13·7! = 65,520 ≤ 2¹⁶: a uniform integer below it decides the first 7 steps of a
#: Bernoulli(exp(−1)) chain (:func:`_bern_exp_minus_one`).
_CHAIN_SPAN = 13 * math.factorial(7)
_CHAIN_STEPS = 7


def _chain_table() -> np.ndarray:
    """The outcome of the Bernoulli(exp(−1)) chain for each 16-bit word u (int8): 1 success,
    0 failure, 2 the chain goes on past step 7 (u < 13), 3 the word is rejected (u ≥ 13·7!).
    With S = #{k ≤ 7 : u < 13·7!/k!} steps succeeded, the first failure is K = S + 1 and the
    outcome is [K odd] = [S even]."""
    u = np.arange(1 << 16, dtype=np.int64)
    steps = sum((u < _CHAIN_SPAN // math.factorial(k)).astype(np.int64) for k in range(1, _CHAIN_STEPS + 1))
    out = np.where(steps % 2 == 0, 1, 0).astype(np.int8)
    out[steps == _CHAIN_STEPS] = 2
    out[_CHAIN_SPAN:] = 3
    return out


_CHAIN_TABLE = _chain_table()
#: Candidates per vectorised batch: bounds the temporaries (a few MB) and keeps them in cache.
_BATCH = 1 << 16


# ============================================================================================
# randomness sources


class RandomSourceError(PrivacyError, TypeError):
    """``rng`` is neither a :class:`SecureRandom` nor a :class:`TestRandom` (e.g. a numpy
    Generator, whose outputs are neither secure nor marked as test-only). A ``TypeError``
    as well as a :class:`PrivacyError`, so callers that catch either keep working."""


class _RandomSource:
    """One stream of uniform random bytes, served in order as bytes, 32- or 64-bit words.

    A request is served from the unread rest of the current block, topped up with a fresh block
    (:meth:`_fill`). Words are read at offsets aligned to their width (up to 7 bytes of the
    stream are skipped): the bytes handed out are disjoint pieces of one uniform stream, so
    every value is uniform and independent of every other. ``randbelow`` gives exact uniform
    integers below any bound.
    """

    is_test_mode: bool = False
    _buf: bytes = b""
    _pos: int = 0

    def _fill(self, nbytes: int) -> bytes:  # pragma: no cover - abstract
        """At least ``nbytes`` fresh uniform bytes."""
        raise NotImplementedError

    def _take(self, nbytes: int, align: int) -> memoryview:
        pos = -(-self._pos // align) * align
        end = pos + nbytes
        if end > len(self._buf):
            head = self._buf[pos:]
            self._buf = head + self._fill(nbytes - len(head)) if head else self._fill(nbytes)
            pos, end = 0, nbytes
        self._pos = end
        return memoryview(self._buf)[pos:end]

    def octets(self, n: int) -> np.ndarray:
        """``n`` independent uniform bytes (uint8, read-only)."""
        return np.frombuffer(self._take(int(n), 1), dtype=np.uint8)

    def words16(self, n: int) -> np.ndarray:
        """``n`` independent uniform 16-bit words (uint16, read-only)."""
        return np.frombuffer(self._take(2 * int(n), 2), dtype=np.uint16)

    def words32(self, n: int) -> np.ndarray:
        """``n`` independent uniform 32-bit words (uint32, read-only)."""
        return np.frombuffer(self._take(4 * int(n), 4), dtype=np.uint32)

    def words(self, n: int) -> np.ndarray:
        """``n`` independent uniform 64-bit words (uint64, read-only)."""
        return np.frombuffer(self._take(8 * int(n), 8), dtype=np.uint64)

    def randbelow(self, bound: int) -> int:
        """Uniform integer in ``[0, bound)`` for any Python int ``bound ≥ 1`` (rejection, exact)."""
        bound = int(bound)
        if bound < 1:
            raise PrivacyError("bound must be >= 1")
        k = (bound - 1).bit_length()  # 2^(k-1) < bound <= 2^k, so acceptance >= 1/2
        if k == 0:
            return 0
        nw = (k + 63) // 64
        mask = (1 << k) - 1
        while True:
            x = int.from_bytes(self.words(nw).tobytes(), "little") & mask
            if x < bound:
                return x


class SecureRandom(_RandomSource):
    """Cryptographically secure randomness from the OS (``os.urandom``, as ``secrets`` uses).

    The production default. ``is_test_mode`` is False. Bytes are read in blocks that double from
    4 KiB up to 1 MiB (one ``getrandom`` call per block instead of one per draw). No byte is
    ever handed out twice: reads hold a lock (threads), a process forked after a read drops
    the inherited block, and a copy or unpickled instance starts without one.
    """

    is_test_mode = False
    _BLOCK_MIN = 1 << 12
    _BLOCK_MAX = 1 << 20

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """No buffered bytes, a fresh lock, this process's id."""
        self._lock, self._buf, self._pos, self._pid = threading.Lock(), b"", 0, os.getpid()

    def __getstate__(self) -> dict[str, Any]:
        return {}  # never the buffered bytes, nor the lock

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._reset()

    def _fill(self, nbytes: int) -> bytes:
        block = min(self._BLOCK_MAX, max(self._BLOCK_MIN, 2 * len(self._buf)))
        return os.urandom(max(nbytes, block))

    def _take(self, nbytes: int, align: int) -> memoryview:
        if self._pid != os.getpid():  # a forked child: no inherited bytes, a fresh lock
            self._reset()
        with self._lock:
            return super()._take(nbytes, align)

    def __repr__(self) -> str:
        return "SecureRandom()"


class TestRandom(_RandomSource):
    """Reproducible randomness for tests: numpy ``PCG64(seed)``. **Outputs are not private.**

    ``is_test_mode`` is True so callers can mark anything produced with it as non-private.
    ``seed=None`` draws a fresh seed from the OS (still test mode). The byte stream is the
    generator's 64-bit outputs in order (little-endian), drawn only as needed, so ``words(n)``
    on a fresh source is ``PCG64(seed).random_raw(n)``.
    """

    __test__ = False  # not a pytest test class
    is_test_mode = True

    def __init__(self, seed: Any = None) -> None:
        self.seed = seed
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def _fill(self, nbytes: int) -> bytes:
        raw: np.ndarray = self._gen.bit_generator.random_raw(-(-nbytes // 8))
        return raw.astype("<u8").tobytes()

    @property
    def generator(self) -> np.random.Generator:
        """The underlying numpy Generator (for float samplers in tests)."""
        return self._gen

    def __repr__(self) -> str:
        return f"TestRandom(seed={self.seed!r})"


def _check_rng(rng: Any) -> _RandomSource:
    if rng is None:
        return SecureRandom()
    if not isinstance(rng, (SecureRandom, TestRandom)):
        raise RandomSourceError(
            f"rng must be a SecureRandom or TestRandom instance, got {type(rng).__name__}"
        )
    return rng


# ============================================================================================
# uniform integers and Bernoulli(a/b)


def _is_obj(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def _uniform_below(rng: _RandomSource, bound: int, n: int) -> np.ndarray:
    """``n`` uniform integers in ``[0, bound)`` for a Python int ``bound ≥ 1``.

    Exact: a uniform W-bit word w (W = 32 for bound ≤ 2³², else 64) is accepted iff
    ``w < L = 2^W − (2^W mod bound)``; L is a multiple of bound, so an accepted ``w mod bound``
    is uniform, and each word is accepted with probability ``L/2^W > 1/2``. int64 result for
    bound < 2⁶³ (every value is below the bound); an object array of Python ints otherwise
    (:meth:`_RandomSource.randbelow`).
    """
    bound = int(bound)
    if bound >= (1 << 63):
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = rng.randbelow(bound)
        return out
    if bound == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    bits = 32 if bound <= (1 << 32) else 64
    draw = rng.words32 if bits == 32 else rng.words
    if bound == (1 << bits):  # only when bits = 32: every word is a sample
        return draw(n).astype(np.int64)
    utype = np.uint32 if bits == 32 else np.uint64
    b, last = utype(bound), utype((1 << bits) - (1 << bits) % bound - 1)
    w = draw(n)
    out = (w % b).astype(np.int64)
    redo = np.flatnonzero(w > last)
    while redo.size:  # rejected words are replaced by fresh, independent ones
        w = draw(redo.size)
        out[redo] = w % b
        redo = redo.take(np.flatnonzero(w > last))
    return out


def _bern_ratio_fixed(rng: _RandomSource, r: np.ndarray, b: int) -> np.ndarray:
    """Bernoulli(r_i/b) for an int64 array ``r`` with ``0 ≤ r_i ≤ b`` and an int ``1 ≤ b < 2⁶¹``.

    Exactness. Let V be a uniform real in [0, 1) written in base 2^d, with d = 8 bits (fewer when
    b > 2⁵⁴): V = (D + V')/2^d with D a uniform digit (one random byte) and V' uniform and
    independent of D. The outcome is [V < r/b], which has probability r/b. With
    ``c = ⌊r·2^d/b⌋``, ``V < r/b ⇔ D + V' < r·2^d/b``: if D < c this holds (D + V' < D + 1 ≤ c), if
    D > c it fails (D + V' ≥ c + 1 > r·2^d/b), and if D = c it holds iff ``V' < r'/b`` with
    ``r' = r·2^d − c·b ∈ [0, b)``: the same question for the next digit (decided, a failure, when
    r' = 0). A round leaves a position
    undecided with probability 2^−d (one byte per decision on average × 1/(1 − 2^−d)), and the
    question ends with probability 1.
    Fixed width: r·2^d ≤ b·2^d < 2⁶² and c·b ≤ r·2^d, with d = min(8, 62 − bitlen(b)) ≥ 1
    (bitlen(b) ≤ 61).
    """
    d = min(_DIGIT_BITS, 62 - b.bit_length())
    out = np.empty(r.size, dtype=bool)
    idx: np.ndarray | None = None
    while True:
        digit = rng.octets(r.size)
        if d < _DIGIT_BITS:
            digit = digit >> np.uint8(_DIGIT_BITS - d)
        scaled = r << d
        c = scaled // b
        if idx is None:
            np.less(digit, c, out=out)
        else:
            out[idx] = digit < c
        tie = np.flatnonzero(digit == c)
        r = scaled.take(tie) - c.take(tie) * b
        live = np.flatnonzero(r)  # r' = 0: V ≥ c/2^d = r/b, decided (a failure)
        if not live.size:
            return out
        tie, r = tie.take(live), r.take(live)
        idx = tie if idx is None else idx.take(tie)


def _bern_ratio_obj(rng: _RandomSource, a: np.ndarray, b: int) -> np.ndarray:
    """Bernoulli(a_i/b) for Python-int object arrays (0 ≤ a ≤ b, b any positive int), exactly.

    Let ``V = (W + V')/2^64`` be a uniform real with leading 64-bit word W; the outcome is
    ``[V < p]``. If a rigorous lower bound on p exceeds ``(W+1)/2^64`` the outcome is 1; if W/2^64
    exceeds an upper bound on p it is 0 (p and W/2^64 are known to relative error ≤ 2^-53; the
    margins below are ≫ that). Otherwise more words of V are drawn and compared exactly.
    """
    n = a.shape[0]
    res = np.zeros(n, dtype=bool)
    if n == 0:
        return res
    p = (a / b).astype(np.float64)  # Python int true division: correctly rounded
    w = rng.words(n)
    u = w.astype(np.float64) * (2.0**-64)
    lo = p * (1.0 - 1e-12) - 1e-15
    hi = p * (1.0 + 1e-12) + 1e-15
    res[:] = u < lo
    amb = np.nonzero(~res & ~(u > hi))[0]
    for i in amb:
        ai = int(a[i])
        W = int(w[i])
        shift = 64
        while True:
            if (W + 1) * b <= (ai << shift):
                res[i] = True
                break
            if W * b >= (ai << shift):
                res[i] = False
                break
            W = (W << 64) | int(rng.words(1)[0])
            shift += 64
    return res


def _bern_ratio(rng: _RandomSource, r: np.ndarray, b: int) -> np.ndarray:
    """Bernoulli(r_i/b), 0 ≤ r_i ≤ b: the fixed-width path when r is int64 and b < 2⁶¹."""
    if _is_obj(r) or b > _RATIO_MAX:
        return _bern_ratio_obj(rng, r.astype(object), b)
    return _bern_ratio_fixed(rng, r, b)


# ============================================================================================
# Bernoulli(exp(−γ)) (CKS20 Alg. 1) and the geometric count


def _bern_exp_minus_one(rng: _RandomSource, n: int) -> np.ndarray:
    """n i.i.d. Bernoulli(exp(−1)): CKS20 Alg. 1 with γ = 1, its chain read off a 16-bit word.

    Alg. 1 draws A_k ~ Bernoulli(γ/k) = Bernoulli(1/k), k = 1, 2, …, until the first failure,
    at step K, and returns [K odd]; P(K > k) = P(A_1 … A_k all succeed) = 1/k!, and
    P(K odd) = Σ_{j odd} (1/(j−1)! − 1/j!) = e^{−1}. Here U is uniform on [0, 13·7!) (a 16-bit
    word, rejected and redrawn when ≥ 13·7! = 65,520: probability 2.4·10⁻⁴), and the events
    ``{U < 13·7!/k!}``, k = 1…7, are nested with probabilities exactly 1/k! (7! divides 13·7!),
    so ``K = 1 + #{k ≤ 7 : U < 13·7!/k!}`` has P(K > k) = 1/k! for k ≤ 7 (the table
    :data:`_CHAIN_TABLE` holds [K odd] for each word). When U < 13 (K > 7, probability 1/7!) the
    chain goes on with fresh, independent A_8, A_9, … (:func:`_bern_ratio_fixed`), so
    P(K > k) = (1/7!)·Π_{j=8..k} 1/j = 1/k! for every k: K has exactly the law of Alg. 1.
    Two random bytes per decision; int64/int8 throughout.
    """
    code = _CHAIN_TABLE.take(rng.words16(n))
    redo = np.flatnonzero(code == 3)
    while redo.size:  # rejected words are replaced by fresh, independent ones
        code[redo] = _CHAIN_TABLE.take(rng.words16(redo.size))
        redo = redo.take(np.flatnonzero(code.take(redo) == 3))
    res = code == 1
    idx = np.flatnonzero(code == 2)
    k = _CHAIN_STEPS + 1
    while idx.size:
        a = _bern_ratio_fixed(rng, np.ones(idx.size, dtype=np.int64), k)  # A_k ~ Bernoulli(1/k)
        if k & 1:
            res[np.compress(~a, idx)] = True
        idx = np.compress(a, idx)
        k += 1
    return res


def _bern_exp_frac(rng: _RandomSource, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num_i/den)) for ``0 ≤ num_i ≤ den`` (CKS20 Alg. 1, γ ∈ [0, 1]).

    Exactness: Alg. 1 verbatim — A_k ~ Bernoulli(γ/k) = Bernoulli(num/(den·k)), k = 1, 2, …,
    until the first failure at K; output [K odd]. Then P(K > k) = γ^k/k! and
    P(K odd) = Σ_{j odd} (γ^{j−1}/(j−1)! − γ^j/j!) = e^{−γ}. Every A_k is an exact
    Bernoulli(a/b) (:func:`_bern_ratio`); when den·k reaches the fixed-width bound 2⁶¹ it is
    the product Bernoulli(num/den)·Bernoulli(1/k) of independent draws — the same law, since
    γ/k = (num/den)·(1/k) with both factors in [0, 1]. Fixed width: num ≤ den < 2⁶¹ and
    den·k < 2⁶¹ (else the product form, each factor within the bound); the object path runs
    when num holds Python ints or den ≥ 2⁶¹.
    """
    a = _bern_ratio(rng, num, den)  # k = 1
    res = ~a
    idx = np.flatnonzero(a)
    cur = num.take(idx)
    k = 2
    while idx.size:
        if _is_obj(cur) or den * k <= _RATIO_MAX:
            a = _bern_ratio(rng, cur, den * k)
        else:
            a = _bern_ratio(rng, cur, den) & _bern_ratio_fixed(rng, np.ones(cur.size, dtype=np.int64), k)
        if k & 1:
            res[np.compress(~a, idx)] = True
        keep = np.flatnonzero(a)
        idx, cur = idx.take(keep), cur.take(keep)
        k += 1
    return res


def _bern_exp_neg(rng: _RandomSource, num: np.ndarray, den: int) -> np.ndarray:
    """Bernoulli(exp(−num_i/den)) for any integers ``num_i ≥ 0`` (int64 or Python ints), den ≥ 1.

    Exactness (CKS20 Alg. 1, γ > 1): with γ = w + f, w = ⌊γ⌋ and f ∈ [0, 1),
    exp(−γ) = exp(−1)^w · exp(−f); the output is 1 iff w independent Bernoulli(exp(−1)) and one
    independent Bernoulli(exp(−f)) all succeed (the order of independent draws does not change
    the law; the whole part goes first so that rejected positions skip the fractional chain).
    Fixed width: for int64 num ≤ 2⁶² and den ≤ 2⁶², ``w = num // den`` and ``f·den = num − w·den``
    are int64 too (a larger den turns num into Python ints); ``f·den < den`` fits int64 whenever
    den < 2⁶¹, even when num holds Python ints.
    """
    n = num.shape[0]
    if den > _FIXED_MAX and not _is_obj(num):
        num = num.astype(object)
    whole = num // den
    rest = num - whole * den
    if _is_obj(rest) and den <= _RATIO_MAX:
        rest = rest.astype(np.int64)
    res = np.ones(n, dtype=bool)
    idx = np.flatnonzero((whole > 0).astype(bool))
    cnt = whole.take(idx)
    while idx.size:
        b = _bern_exp_minus_one(rng, idx.size)
        res[np.compress(~b, idx)] = False
        keep = np.flatnonzero(b & (cnt > 1).astype(bool))
        idx, cnt = idx.take(keep), cnt.take(keep) - 1
    live = np.flatnonzero(res)
    res[live] = _bern_exp_frac(rng, rest.take(live), den)
    return res


def _geometric_exp_minus_one(rng: _RandomSource, n: int) -> np.ndarray:
    """V with P(V = v) = (1 − e^{−1}) e^{−v}: the number of Bernoulli(exp(−1)) successes before
    the first failure (CKS20 Alg. 2, step 4), so P(V ≥ v) = e^{−v}. int64 counts."""
    v = np.zeros(n, dtype=np.int64)
    idx = np.arange(n)
    while idx.size:
        idx = np.compress(_bern_exp_minus_one(rng, idx.size), idx)
        v[idx] += 1
    return v


def _fair_bits(rng: _RandomSource, n: int) -> np.ndarray:
    """n independent fair bits (bool), eight per random byte."""
    return np.unpackbits(rng.octets((n + 7) // 8))[:n].astype(bool)


# ============================================================================================
# exact rationals and batching


def _to_fraction(name: str, x: Any) -> Fraction:
    if isinstance(x, bool):
        raise PrivacyError(f"{name} must be a positive number, got {x!r}")
    if isinstance(x, Fraction):
        f = x
    elif isinstance(x, (int, np.integer)):
        f = Fraction(int(x))
    elif isinstance(x, Rational):
        f = Fraction(int(x.numerator), int(x.denominator))
    elif isinstance(x, (float, np.floating, Real)):
        xf = float(x)
        if not math.isfinite(xf):
            raise PrivacyError(f"{name} must be finite, got {x!r}")
        f = Fraction(xf)  # exact binary value of the float
    else:
        raise PrivacyError(f"{name} must be a Fraction, int or float, got {type(x).__name__}")
    if not f > 0:
        raise PrivacyError(f"{name} must be > 0, got {x!r}")
    return f


def _size(size: Any) -> tuple[int, tuple[int, ...]]:
    shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise PrivacyError(f"size must be non-negative, got {size!r}")
    return math.prod(shape), shape


def _stream(n: int, batch: Callable[[int], np.ndarray], rate: float) -> Iterator[np.ndarray]:
    """``n`` i.i.d. samples in pieces: ``batch(m)`` returns the accepted samples of ``m``
    candidates (all i.i.d. with the target law); m ≤ ``_BATCH`` is sized by the acceptance rate
    seen so far (``rate`` before the first batch). The first ``n − got`` samples of a batch are
    kept — a number that depends on counts only, never on values, so the kept samples are i.i.d.
    """
    got = tried = accepted = 0
    while got < n:
        if accepted:
            rate = accepted / tried
        m = min(_BATCH, int((n - got) / max(rate, 1e-3) * 1.02) + 32)
        y = batch(m)
        tried, accepted = tried + m, accepted + y.size
        y = y[: n - got]
        got += y.size
        if y.size:
            yield y


def _finish(parts: list[np.ndarray], n: int, shape: tuple[int, ...]) -> np.ndarray:
    out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if out.dtype == object and (n == 0 or max(abs(int(v)) for v in out) < (1 << 63)):
        out = out.astype(np.int64)
    return out.reshape(shape)


# ============================================================================================
# discrete Laplace and discrete Gaussian


def _dlap_rate(s: int, t: int) -> float:
    """Approximate acceptance rate of :func:`_dlap_batch` (batch sizing only, never a decision):
    P(D = 1) = (1 − e^{−1})/(t(1 − e^{−1/t})) times P(not (B = 1, Y = 0)) = (1 + e^{−s/t})/2."""
    if t > (1 << 1000) or s > (1 << 1000):
        return 0.5
    ratio = s / t
    return -math.expm1(-1.0) / (-t * math.expm1(-1.0 / t)) * (1.0 + math.exp(-ratio)) / 2.0


def _dlap_batch(rng: _RandomSource, s: int, t: int, m: int) -> np.ndarray:
    """The accepted samples of m candidates of CKS20 Alg. 2: P(y) ∝ exp(−|y|·s/t), s, t ≥ 1.

    Exactness (CKS20 Thm 35 / Alg. 2): U ~ Unif{0, …, t−1} kept iff D ~ Bernoulli(exp(−U/t))
    succeeds, so P(U = u | kept) ∝ exp(−u/t); V ≥ 0 with P(V = v) ∝ exp(−v)
    (:func:`_geometric_exp_minus_one`); X = U + tV then has P(X = x) ∝ exp(−x/t) on x ≥ 0 (each x
    is one pair (u, v)); Y = ⌊X/s⌋ has P(Y = y) ∝ Σ_{x=ys}^{ys+s−1} exp(−x/t) ∝ exp(−ys/t); a fair
    sign B is attached and (B = 1, Y = 0) rejected, so 0 is not counted twice and
    P(±y) ∝ exp(−|y|s/t) on Z.
    Fixed width: U < t < 2⁶¹ (:func:`_bern_exp_frac` with den = t), V·t + U < 2⁶² checked per
    batch (else X in Python ints), X//s in int64 for s < 2⁶²; larger t or s run on Python ints.
    """
    u = _uniform_below(rng, t, m)
    u = np.compress(_bern_exp_frac(rng, u, t), u)
    v = _geometric_exp_minus_one(rng, u.size)
    vmax = int(v.max()) if v.size else 0
    if _is_obj(u) or t >= _FIXED_MAX or s >= _FIXED_MAX or (vmax + 1) * t > _FIXED_MAX:
        x = u.astype(object) + v.astype(object) * t
    else:
        x = u + v * t
    y = x // s
    sign = _fair_bits(rng, y.size)
    keep = ~(sign & (y == 0).astype(bool))
    return np.compress(keep, np.where(sign, -y, y))


class _GaussConstants:
    """The rationals of CKS20 Alg. 3 for σ² = p/q and Laplace scale t, in lowest terms.

    With σ²/t = cn/cd, the acceptance exponent is
    ``(|Y| − σ²/t)²/(2σ²) = (|Y|·cd − cn)² · mult / den`` with ``mult/den = q/(2p·cd²)`` reduced.
    Fixed width (``fixed``): den ≤ 2⁶², cd ≤ 2⁶² and cn ≤ a_max = ⌊√(2⁶²/mult)⌋; a candidate with
    ``|Y| ≤ y_max = ⌊(a_max + cn)/cd⌋`` then has −cn ≤ A = |Y|·cd − cn ≤ a_max, so |A| ≤ a_max,
    |Y|·cd ≤ 2·a_max ≤ 2³², and the numerator A²·mult ≤ 2⁶²: all int64. Other candidates (and
    all, when not ``fixed``) use Python ints.
    """

    def __init__(self, p: int, q: int, t: int) -> None:
        g = math.gcd(p, q * t)
        self.cn, self.cd = p // g, (q * t) // g
        den, mult = 2 * p * self.cd * self.cd, q
        g2 = math.gcd(mult, den)
        self.mult, self.den = mult // g2, den // g2
        a_max = math.isqrt(_FIXED_MAX // self.mult) if self.mult <= _FIXED_MAX else 0
        self.fixed = self.den <= _FIXED_MAX and self.cd <= _FIXED_MAX and self.cn <= a_max
        self.y_max = (a_max + self.cn) // self.cd if self.fixed else -1


def _dgauss_accept(rng: _RandomSource, c: _GaussConstants, y: np.ndarray) -> np.ndarray:
    """CKS20 Alg. 3's acceptance: Bernoulli(exp(−(|y| − σ²/t)²/(2σ²))) for each candidate y.

    Exactness (CKS20 Thm 37 / Alg. 3): Y discrete Laplace with P(y) ∝ exp(−|y|/t), accepted with
    probability exp(−(|y| − σ²/t)²/(2σ²)); the product is ∝ exp(−y²/(2σ²)) (expand the square:
    the cross term −2|y|σ²/t over 2σ² cancels the Laplace exponent −|y|/t, the rest is
    constant), for every t > 0. The exponent is the exact rational of :class:`_GaussConstants`.
    """
    ay = np.abs(y)
    acc = np.zeros(y.size, dtype=bool)
    if c.fixed and not _is_obj(ay):
        small = ay <= c.y_max
        sidx = np.flatnonzero(small)
        a = ay.take(sidx) * c.cd - c.cn
        acc[sidx] = _bern_exp_neg(rng, a * a * c.mult, c.den)
        bidx = np.flatnonzero(~small)
    else:
        bidx = np.arange(y.size)
    if bidx.size:
        a = ay.take(bidx).astype(object) * c.cd - c.cn
        acc[bidx] = _bern_exp_neg(rng, a * a * c.mult, c.den)
    return acc


def _dgauss_stream(rng: _RandomSource, p: int, q: int, t: int, n: int) -> Iterator[np.ndarray]:
    """n i.i.d. samples with P(y) ∝ exp(−y²/(2σ²)), σ² = p/q (CKS20 Alg. 3), any integer t ≥ 1
    (correct for every t; t = ⌊σ⌋ + 1 makes the acceptance rate high), in pieces."""
    c = _GaussConstants(p, q, t)

    def batch(m: int) -> np.ndarray:
        y = _dlap_batch(rng, 1, t, m)
        return np.compress(_dgauss_accept(rng, c, y), y)

    return _stream(n, batch, 0.5 * _dlap_rate(1, t))


def _dlap_stream(rng: _RandomSource, s: int, t: int, n: int) -> Iterator[np.ndarray]:
    """n i.i.d. samples with P(y) ∝ exp(−|y|·s/t) (CKS20 Alg. 2), in pieces."""
    return _stream(n, lambda m: _dlap_batch(rng, s, t, m), _dlap_rate(s, t))


# ============================================================================================
# public samplers


def bernoulli_exp(gamma: Any, size: Any, rng: Any = None) -> np.ndarray:
    """i.i.d. Bernoulli(exp(−γ)) for a rational γ ≥ 0 (CKS20 Alg. 1), exact. Returns bools.

    Exactness: :func:`_bern_exp_neg` (whole part, then the fractional chain of Alg. 1)."""
    rng = _check_rng(rng)
    if isinstance(gamma, (int, np.integer)) and int(gamma) == 0:
        g = Fraction(0)
    else:
        g = _to_fraction("gamma", gamma)
    n, shape = _size(size)
    num, den = g.numerator, g.denominator
    nums = np.full(n, num, dtype=np.int64 if num <= _FIXED_MAX else object)
    return _bern_exp_neg(rng, nums, den).reshape(shape)


def discrete_laplace(scale_t: Any, size: Any, rng: Any = None) -> np.ndarray:
    """Exact i.i.d. samples on Z with ``P(x) ∝ exp(−|x|/t)`` (CKS20 Alg. 2; :func:`_dlap_batch`).

    ``scale_t``: t > 0 as a Fraction, int, or float (a float is converted exactly to the binary
    rational it denotes -- the sampler is exact for that rational). ``rng``: SecureRandom (default)
    or TestRandom. Returns an int64 array of shape ``size`` (object dtype only if a sample
    exceeds the int64 range, which requires astronomically large scales).
    """
    rng = _check_rng(rng)
    t = _to_fraction("scale_t", scale_t)
    n, shape = _size(size)
    # P(x) ∝ exp(−|x| · den/num): CKS20 Alg. 2 with (s, t) = (den, num).
    return _finish(list(_dlap_stream(rng, t.denominator, t.numerator, n)), n, shape)


def discrete_gaussian(sigma2: Any, size: Any, rng: Any = None) -> np.ndarray:
    """Exact i.i.d. samples on Z with ``P(x) ∝ exp(−x²/(2σ²))`` (CKS20 Alg. 3; :func:`_dgauss_accept`).

    ``sigma2``: σ² > 0 as a Fraction, int, or float (floats are converted exactly; note that a
    float with a long binary expansion makes the final acceptance test use Python big integers,
    which is exact but several times slower -- pass a Fraction with a small denominator for
    speed, or use :func:`sample_on_grid`, which chooses such a rational). ``rng``: SecureRandom
    (default) or TestRandom. The variance of the output is at most σ² (CKS20 Cor. 9).
    """
    rng = _check_rng(rng)
    s2 = _to_fraction("sigma2", sigma2)
    n, shape = _size(size)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1, since ⌊√x⌋ = isqrt(⌊x⌋)
    return _finish(list(_dgauss_stream(rng, p, q, t, n)), n, shape)
# ============================================================================================
# lattice release


def round_to_grid(values: Any, grid: float) -> np.ndarray:
    """Exact deterministic rounding of each value to the nearest point of ``grid·Z`` (ties to
    the even multiple); returns the integer multipliers: int64, or a numpy object array of
    Python integers when some exceeds 2⁶². ``grid`` must be a power of two, so ``v/γ`` is an
    exact scaling of the float v (a result that underflows is below ½ and rounds to 0), and
    ``|v − γ·k| ≤ γ/2`` holds exactly — the rounding inflation of
    ``calibration.discretized_sensitivity`` is then a statement about the computed values.
    (Strategy measurements ``A·h`` go through ``privacy.lattice.lattice_image``, which
    computes the exact product first.)"""
    from factorize.numerics import is_power_of_two

    g = float(grid)
    if not is_power_of_two(g):
        raise PrivacyError(f"grid must be a power of two, got {grid!r}")
    v = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        raise PrivacyError("values to release must be finite")
    with np.errstate(over="ignore", under="ignore"):
        x = np.ldexp(v, -(math.frexp(g)[1] - 1))
        k = np.rint(x)
    big = ~(np.abs(k) < 2.0 ** 62)
    if not big.any():
        return k.astype(np.int64)
    out = k.astype(object)
    for i in np.flatnonzero(big.ravel()):
        out.flat[i] = round(Fraction(float(v.flat[i])) / Fraction(g))  # half-to-even, exact
    return out


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def lattice_sigma2(sigma: float, grid: float) -> tuple[Fraction, int]:
    """The rational σ²/γ² actually sampled for a Gaussian spec, rounded *up*, and the t to use.

    Returns ``(sigma2_lattice, t)`` with ``sigma2_lattice ≥ (σ/γ)²`` exactly (Fractions of the
    float values), relative excess ≤ 2^-15, chosen with a small denominator so the fast int64
    path applies: for σ/γ < 2^10 a denominator 2^k with ``2^k (σ/γ)² ≥ 2^20``; for σ/γ ≥ 2^10 an
    integer; for σ/γ ≥ 2^15 an integer multiple of ``t = ⌊σ/γ⌋ + 1`` (so σ²/t is an integer).
    Larger noise only strengthens the privacy guarantee (ρ = Δ²/(2σ²) decreases).
    """
    exact = (Fraction(float(sigma)) / Fraction(float(grid))) ** 2
    if exact < (1 << 20):
        # choose q = 2^k with q·exact ≥ 2^20
        k = max(0, 21 - (exact.numerator.bit_length() - exact.denominator.bit_length()))
        q = 1 << k
        s2 = Fraction(_ceil_div(exact.numerator * q, exact.denominator), q)
        return s2, math.isqrt(s2.numerator // s2.denominator) + 1
    if exact < (1 << 30):
        s2 = Fraction(_ceil_div(exact.numerator, exact.denominator))
        return s2, math.isqrt(s2.numerator) + 1
    t = math.isqrt(exact.numerator // exact.denominator) + 1
    r = _ceil_div(exact.numerator, exact.denominator * t)
    return Fraction(r * t), t


def lattice_laplace_scale(scale: float, grid: float) -> Fraction:
    """The rational b/γ actually sampled for a Laplace spec, rounded *up* (relative ≤ 2^-20)."""
    exact = Fraction(float(scale)) / Fraction(float(grid))
    if exact >= (1 << 20):
        return Fraction(_ceil_div(exact.numerator, exact.denominator))
    k = max(0, 21 - (exact.numerator.bit_length() - exact.denominator.bit_length()))
    q = 1 << k
    return Fraction(_ceil_div(exact.numerator * q, exact.denominator), q)


def sampled_variance(noise_spec: Any) -> float:
    """Per-coordinate variance bound of the noise :func:`sample_lattice` / :func:`add_noise`
    actually draw for ``noise_spec`` (a ``NoiseSpec``), in the units of ``A h``.

    Discrete Gaussian on γZ with the rational σ²/γ² of :func:`lattice_sigma2`: variance ≤
    σ_lattice²·γ² (CKS20 Cor. 9); discrete Laplace with b/γ of :func:`lattice_laplace_scale`:
    variance ≤ 2·b_lattice²·γ². Both lattice parameters are rounded up from the spec's, so
    these bound the spec's own ``variance_bound`` from above; the factor 1 + 10⁻¹² covers the
    float conversion. A float sampler draws the spec's distribution: ``variance_bound``.
    """
    if noise_spec.sampler == "discrete_gaussian":
        s2, _ = lattice_sigma2(noise_spec.scale, noise_spec.grid)
        return float(s2) * noise_spec.grid ** 2 * (1.0 + 1e-12)
    if noise_spec.sampler == "discrete_laplace":
        b = lattice_laplace_scale(noise_spec.scale, noise_spec.grid)
        return 2.0 * float(b) ** 2 * noise_spec.grid ** 2 * (1.0 + 1e-12)
    return noise_spec.variance_bound


def sample_on_grid(values: Any, noise_spec: Any, rng: Any = None) -> np.ndarray:
    """Exact lattice release of float values: ``γ · (round(values/γ) + Y)`` (see
    :func:`round_to_grid` and :func:`sample_lattice`); returns floats."""
    return sample_lattice(round_to_grid(values, _discrete_grid(noise_spec)), noise_spec, rng)


def _discrete_grid(noise_spec: Any) -> float:
    sampler = getattr(noise_spec, "sampler", None)
    if sampler not in ("discrete_gaussian", "discrete_laplace"):
        raise PrivacyError(
            f"a lattice release needs a discrete sampler spec, got sampler={sampler!r}; "
            "calibrate(..., grid=γ, dim=m) produces one"
        )
    return noise_spec.grid


def sample_lattice(k: Any, noise_spec: Any, rng: Any = None) -> np.ndarray:
    """Exact lattice release of the exact integer image k = round(Ã h/γ): ``γ·(k + Y)`` with
    integer noise Y; returns floats.

    ``noise_spec``: a :class:`~factorize.privacy.calibration.NoiseSpec` with sampler
    "discrete_gaussian" or "discrete_laplace" and grid γ, whose sensitivity already includes
    the rounding inflation (``calibration.discretized_sensitivity``); at most
    ``noise_spec.dim`` coordinates may be released. Y is sampled exactly: discrete Gaussian
    with σ²_lattice ≥ (σ/γ)² or discrete Laplace with scale ≥ b/γ (:func:`lattice_sigma2`,
    :func:`lattice_laplace_scale`). ``k + Y`` is exact integer arithmetic; the final
    multiplication by γ in floating point is post-processing and cannot weaken privacy.
    """
    rng = _check_rng(rng)
    grid = _discrete_grid(noise_spec)
    k = np.asarray(k)
    if k.dtype != object and k.dtype.kind not in "iu":
        raise PrivacyError("the lattice image must be integers")
    dim = getattr(noise_spec, "dim", None)
    if dim is None:
        raise PrivacyError("noise spec has no dim: the rounding inflation cannot be checked")
    if k.size > dim:
        raise PrivacyError(
            f"releasing {k.size} coordinates but the noise was calibrated for dim={dim} "
            "(rounding inflation γ·sqrt(m) / γ·m would be too small)"
        )
    if noise_spec.sampler == "discrete_gaussian":
        s2, t = lattice_sigma2(noise_spec.scale, grid)
        pieces = _dgauss_stream(rng, s2.numerator, s2.denominator, t, k.size)
    else:
        b = lattice_laplace_scale(noise_spec.scale, grid)
        pieces = _dlap_stream(rng, b.denominator, b.numerator, k.size)
    flat = k.reshape(-1)
    out = np.empty(k.size, dtype=np.float64)
    start = 0
    for y in pieces:
        kk = flat[start:start + y.size]
        if (y.dtype == object or kk.dtype == object
                or np.max(np.abs(y)) >= _FIXED_MAX or np.max(np.abs(kk)) >= _FIXED_MAX):
            total = np.array([int(a) + int(c) for a, c in zip(kk, y, strict=True)], dtype=object)
            out[start:start + y.size] = total.astype(np.float64) * grid
        else:
            out[start:start + y.size] = (kk.astype(np.int64) + y).astype(np.float64) * grid
        start += y.size
    return out.reshape(k.shape)


def _float_generator(rng: _RandomSource) -> np.random.Generator:
    if isinstance(rng, TestRandom):
        return rng.generator
    seed = int.from_bytes(os.urandom(32), "little")
    return np.random.Generator(np.random.PCG64(seed))


def sample_float_noise(noise_spec: Any, shape: Any, rng: Any = None) -> np.ndarray:
    """Floating-point noise for a spec with sampler "float" (simulation / non-exact use only).

    Gaussian N(0, σ²), Laplace(0, b), or the ℓ2 K-norm vector (radius ~ Gamma(m, Δ/ε) times a
    uniform direction; ``shape[-1]`` must equal the spec's dim). Floating-point samplers are
    vulnerable to Mironov-2012 attacks; use :func:`sample_on_grid` for production releases.
    """
    rng = _check_rng(rng)
    gen = _float_generator(rng)
    n, shp = _size(shape)
    fam = noise_spec.family
    if fam == "gaussian":
        return gen.normal(0.0, noise_spec.scale, size=shp)
    if fam == "laplace":
        return gen.laplace(0.0, noise_spec.scale, size=shp)
    if fam == "l2_knorm":
        m = noise_spec.dim
        if not shp or shp[-1] != m:
            raise PrivacyError(f"K-norm noise needs shape (..., {m})")
        z = gen.standard_normal(size=shp)
        z /= np.linalg.norm(z, axis=-1, keepdims=True)
        r = gen.gamma(shape=float(m), scale=noise_spec.scale, size=shp[:-1] + (1,))
        return z * r
    raise PrivacyError(f"unknown noise family {fam!r}")


def add_noise(values: Any, noise_spec: Any, rng: Any = None) -> np.ndarray:
    """Release ``values`` with the noise of ``noise_spec``: exact lattice sampling for discrete
    samplers (:func:`sample_on_grid`), floating-point noise for sampler "float"."""
    if noise_spec.sampler == "float":
        v = np.asarray(values, dtype=np.float64)
        return v + sample_float_noise(noise_spec, v.shape, rng)
    return sample_on_grid(values, noise_spec, rng)
