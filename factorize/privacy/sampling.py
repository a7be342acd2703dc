"""Exact noise samplers on the integers, and lattice release (docs/math.md §6.5).

Floating-point noise is attackable (Mironov 2012), so a production release adds noise sampled
*exactly* on a lattice ``γZ``. This module implements, from the description in Canonne, Kamath &
Steinke 2020 ("The Discrete Gaussian for Differential Privacy", NeurIPS; arXiv:2004.00010):

* Bernoulli(exp(−γ)) for rational γ ≥ 0 (CKS20 Alg. 1): for γ ∈ [0, 1], draw A_k ~
  Bernoulli(γ/k) for k = 1, 2, … until the first failure at step K; return [K is odd]. For γ > 1,
  require ⌊γ⌋ successes of Bernoulli(exp(−1)) and one success of Bernoulli(exp(−(γ − ⌊γ⌋))).
* the discrete Laplace ``P(x) ∝ exp(−|x|·s/t)`` (CKS20 Alg. 2) -- :func:`discrete_laplace`;
* the discrete Gaussian ``P(x) ∝ exp(−x²/(2σ²))`` by rejection from the discrete Laplace with
  scale ``t = ⌊σ⌋ + 1``, accepting with probability ``exp(−(|Y| − σ²/t)²/(2σ²))`` (CKS20 Alg. 3)
  -- :func:`discrete_gaussian`.

Exactness. Every random decision is a comparison of integers: Bernoulli(a/b) is ``U < a`` for a
uniform integer ``U ∈ [0, b)``, and uniform integers are drawn from raw 32/64-bit words by
rejection of the top partial range (no modulo bias). Parameters are exact rationals
(:class:`fractions.Fraction`); a float parameter is converted *exactly* (``Fraction(x)``), so the
sampler is exact for the binary rational the float denotes.

Speed. The algorithms are vectorised: a batch of candidates runs each loop in lock-step with
numpy int64 arithmetic, and only the positions still undecided (or rejected) are carried into
the next round. When a quantity could exceed the int64 range (huge parameters, or an
astronomically unlikely tail sample), those positions fall back to Python integers
(numpy ``object`` arrays); for Bernoulli(a/b) with big integers the comparison is decided from a
64-bit uniform word and a rigorously bracketed float approximation of a/b, and in the (≈1e-12
probability) ambiguous case refined with further random words and exact integer arithmetic.
Nothing is ever truncated or approximated.

Randomness. Samplers take an explicit ``rng`` that must be a :class:`SecureRandom` (``os.urandom``;
the production default, used when ``rng`` is None) or a :class:`TestRandom` (seeded numpy PCG64,
reproducible, ``is_test_mode = True``: outputs drawn with it are **not private** and callers must
mark them so).
"""

from __future__ import annotations

import math
import os
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

_LIMIT = 1 << 62  # int64 safety bound for intermediate products
_U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
_U32_MAX = np.uint64(0xFFFFFFFF)


# ============================================================================================
# randomness sources


class RandomSourceError(PrivacyError, TypeError):
    """``rng`` is neither a :class:`SecureRandom` nor a :class:`TestRandom` (e.g. a numpy
    Generator, whose outputs are neither secure nor marked as test-only). A ``TypeError``
    as well as a :class:`PrivacyError`, so callers that catch either keep working."""


class _RandomSource:
    """Common interface: raw uniform 64-bit words plus exact ``randbelow`` for big bounds."""

    is_test_mode: bool = False

    def words(self, n: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def words32(self, n: int) -> np.ndarray:
        """``n`` independent uniform 32-bit words (as uint64 values < 2^32)."""
        w = self.words((n + 1) // 2)
        return np.ascontiguousarray(w).view(np.uint32)[:n].astype(np.uint64)

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
            x = int.from_bytes(np.ascontiguousarray(self.words(nw)).tobytes(), "little") & mask
            if x < bound:
                return x


class SecureRandom(_RandomSource):
    """Cryptographically secure randomness from the OS (``os.urandom``, as ``secrets`` uses).

    The production default. ``is_test_mode`` is False.
    """

    is_test_mode = False
    _CHUNK = 1 << 24  # bytes per os.urandom call

    def words(self, n: int) -> np.ndarray:
        nbytes = 8 * int(n)
        if nbytes <= self._CHUNK:
            return np.frombuffer(os.urandom(nbytes), dtype=np.uint64)
        buf = b"".join(os.urandom(min(self._CHUNK, nbytes - i)) for i in range(0, nbytes, self._CHUNK))
        return np.frombuffer(buf, dtype=np.uint64)

    def __repr__(self) -> str:
        return "SecureRandom()"


class TestRandom(_RandomSource):
    """Reproducible randomness for tests: numpy ``PCG64(seed)``. **Outputs are not private.**

    ``is_test_mode`` is True so callers can mark anything produced with it as non-private.
    ``seed=None`` draws a fresh seed from the OS (still test mode).
    """

    __test__ = False  # not a pytest test class
    is_test_mode = True

    def __init__(self, seed: Any = None) -> None:
        self.seed = seed
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def words(self, n: int) -> np.ndarray:
        return self._gen.bit_generator.random_raw(int(n))

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


def _uniform_below(rng: _RandomSource, bound: Any, n: int) -> np.ndarray:
    """``n`` uniform integers, the i-th in ``[0, bound_i)`` (bound: int scalar or array, ≥ 1).

    int64 result for bounds < 2^63 (rejection from 32- or 64-bit words); object array of Python
    ints otherwise.
    """
    b: Any  # the bound(s) as uint64: an array, or one scalar
    if isinstance(bound, np.ndarray):
        if bound.dtype == object:
            return np.array([rng.randbelow(int(b)) for b in bound], dtype=object).reshape(bound.shape)
        bmax = int(bound.max()) if bound.size else 1
        b = bound.astype(np.uint64)
        scalar = False
    else:
        bmax = int(bound)
        if bmax >= (1 << 63):
            out = np.empty(n, dtype=object)
            for i in range(n):
                out[i] = rng.randbelow(bmax)
            return out
        b = np.uint64(bmax)
        scalar = True
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out.astype(np.int64)
    use32 = bmax <= (1 << 32)
    top = _U32_MAX if use32 else _U64_MAX
    # accept w iff w < 2^W − (2^W mod b), i.e. w <= top − rem; then w mod b is uniform.
    rem = (top % b + np.uint64(1)) % b
    thresh = top - rem
    idx = None
    while True:
        k = n if idx is None else idx.size
        w = rng.words32(k) if use32 else rng.words(k)
        if idx is None:
            ok = w <= thresh
            out[:] = w % b
            if ok.all():
                break
            idx = np.nonzero(~ok)[0]
        else:
            th = thresh if scalar else thresh[idx]
            bb = b if scalar else b[idx]
            ok = w <= th
            out[idx[ok]] = (w % bb)[ok]
            idx = idx[~ok]
            if idx.size == 0:
                break
    return out.astype(np.int64)


def _bern_ratio_obj(rng: _RandomSource, a: np.ndarray, b: Any) -> np.ndarray:
    """Bernoulli(a_i / b_i) for Python-int object arrays (0 ≤ a ≤ b), exactly.

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
        bi = int(b[i]) if isinstance(b, np.ndarray) else int(b)
        W = int(w[i])
        shift = 64
        while True:
            if (W + 1) * bi <= (ai << shift):
                res[i] = True
                break
            if W * bi >= (ai << shift):
                res[i] = False
                break
            W = (W << 64) | int(rng.words(1)[0])
            shift += 64
    return res


def _bern_ratio(rng: _RandomSource, a: Any, b: Any, n: int) -> np.ndarray:
    """Bernoulli(a/b), elementwise; a, b int64 arrays/scalars (0 ≤ a ≤ b < 2^63) or objects."""
    if _is_obj(a) or _is_obj(b) or (not isinstance(b, np.ndarray) and int(b) >= (1 << 63)):
        aa = a if _is_obj(a) else np.asarray(a).astype(object)
        if aa.ndim == 0:
            aa = np.full(n, int(aa), dtype=object)
        bb = b.astype(object) if isinstance(b, np.ndarray) else int(b)
        return _bern_ratio_obj(rng, aa, bb)
    return _uniform_below(rng, b, n) < a


def _take(x: Any, idx: np.ndarray) -> Any:
    return x[idx] if isinstance(x, np.ndarray) else x


def _bern_exp_minus_one(rng: _RandomSource, n: int) -> np.ndarray:
    """n i.i.d. Bernoulli(exp(−1)) (CKS20 Alg. 1 with γ = 1: A_k ~ Bernoulli(1/k))."""
    res = np.zeros(n, dtype=bool)
    idx = np.arange(n)
    k = 1
    while idx.size:
        a = _uniform_below(rng, k, idx.size) == 0  # Bernoulli(1/k)
        res[idx[~a]] = (k & 1) == 1
        idx = idx[a]
        k += 1
    return res


def _bern_exp_neg_le1(rng: _RandomSource, num: Any, den: Any, n: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) elementwise for 0 ≤ num ≤ den, den ≥ 1 (CKS20 Alg. 1, γ ≤ 1).

    Draw A_k ~ Bernoulli(γ/k), k = 1, 2, …, until the first A_k = 0; output 1 iff that k is odd.
    Bernoulli(γ/k) = Bernoulli(num/(den·k)); when den·k could overflow int64 it is drawn as the
    product Bernoulli(num/den)·Bernoulli(1/k) of independent draws (same law since γ ≤ 1).
    """
    res = np.zeros(n, dtype=bool)
    idx = np.arange(n)
    obj = _is_obj(num) or _is_obj(den)
    k = 1
    while idx.size:
        nn = _take(num, idx)
        dd = _take(den, idx)
        m = idx.size
        if obj:
            a = _bern_ratio(rng, nn, dd * k, m)
        else:
            dmax = int(dd.max()) if isinstance(dd, np.ndarray) else int(dd)
            if dmax <= _LIMIT // k:
                a = _uniform_below(rng, dd * k, m) < nn
            else:
                a = (_uniform_below(rng, dd, m) < nn) & (_uniform_below(rng, k, m) == 0)
        res[idx[~a]] = (k & 1) == 1
        idx = idx[a]
        k += 1
    return res


def _bern_exp_neg(rng: _RandomSource, num: Any, den: Any, n: int) -> np.ndarray:
    """Bernoulli(exp(−num/den)) elementwise for any num ≥ 0, den ≥ 1 (CKS20 Alg. 1)."""
    if not isinstance(num, np.ndarray):
        num = np.full(n, num, dtype=object if int(num) >= _LIMIT else np.int64)
    whole = num // den
    frac = num - whole * den
    res = _bern_exp_neg_le1(rng, frac, den, n)
    idx = np.nonzero(res & (whole > 0).astype(bool))[0]
    cnt = whole[idx]
    while idx.size:
        b = _bern_exp_minus_one(rng, idx.size)
        res[idx[~b]] = False
        idx = idx[b]
        cnt = cnt[b] - 1
        keep = (cnt > 0).astype(bool)
        idx = idx[keep]
        cnt = cnt[keep]
    return res


def _geometric_exp_minus_one(rng: _RandomSource, n: int) -> np.ndarray:
    """V with P(V = v) = (1 − e^{−1}) e^{−v}: count of Bernoulli(exp(−1)) successes before a failure."""
    v = np.zeros(n, dtype=np.int64)
    idx = np.arange(n)
    while idx.size:
        b = _bern_exp_minus_one(rng, idx.size)
        idx = idx[b]
        v[idx] += 1
    return v


# ============================================================================================
# exact rationals


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


_CHUNK = 1 << 20  # coordinates per vectorised batch (bounds temporary memory to ~100 MB)


def _chunked(core: Any, n: int) -> list[np.ndarray]:
    """Run ``core(k)`` for consecutive chunks of at most ``_CHUNK`` samples (i.i.d. draws)."""
    return [core(min(_CHUNK, n - i)) for i in range(0, n, _CHUNK)]


def _finish(parts: list[np.ndarray], n: int, shape: tuple[int, ...]) -> np.ndarray:
    out = np.concatenate(parts)[:n] if parts else np.zeros(0, dtype=np.int64)
    if out.dtype == object and (n == 0 or max(abs(int(v)) for v in out) < (1 << 63)):
        out = out.astype(np.int64)
    return out.reshape(shape)


# ============================================================================================
# discrete Laplace and discrete Gaussian cores


def _dlap_core(rng: _RandomSource, s: int, t: int, n: int) -> np.ndarray:
    """n i.i.d. samples with P(y) ∝ exp(−|y|·s/t) (CKS20 Alg. 2), s, t positive Python ints.

    U ~ Unif{0..t−1} kept with prob. exp(−U/t); V ~ Geometric(1 − e^{−1}); X = U + tV has
    P(X = x) ∝ exp(−x/t); Y = ⌊X/s⌋ has P(Y = y) ∝ exp(−ys/t); a fair sign B is attached and
    (B = 1, Y = 0) rejected to avoid double-counting 0.
    """
    parts: list[np.ndarray] = []
    got = 0
    rate = 0.5
    big = t >= _LIMIT or s >= _LIMIT
    while got < n:
        need = n - got
        batch = int(need / rate * 1.05) + 64
        u = _uniform_below(rng, t, batch)
        keep = _bern_exp_neg_le1(rng, u, t, batch)
        u = u[keep]
        v = _geometric_exp_minus_one(rng, u.size)
        vmax = int(v.max()) if v.size else 0
        if big or _is_obj(u) or (vmax > 0 and t > _LIMIT // vmax):
            x = u.astype(object) + v.astype(object) * t
        else:
            x = u + v * t
        y = x // s
        sign = _uniform_below(rng, 2, y.size) == 1
        ok = ~(sign & (y == 0).astype(bool))
        y = np.where(sign, -y, y)[ok]
        parts.append(y)
        got += y.size
        rate = max(y.size / batch, 0.02)
    return np.concatenate(parts)[:n] if len(parts) > 1 else parts[0][:n]


def _dgauss_core(rng: _RandomSource, p: int, q: int, t: int, n: int) -> np.ndarray:
    """n i.i.d. samples with P(y) ∝ exp(−y²/(2σ²)), σ² = p/q (CKS20 Alg. 3), any integer t ≥ 1.

    Y ~ discrete Laplace with scale t, accepted with probability exp(−(|Y| − σ²/t)²/(2σ²)).
    (The rejection is correct for every t > 0; t = ⌊σ⌋ + 1 makes it efficient.) With
    σ²/t = cn/cd in lowest terms, the exponent is ``(|Y|·cd − cn)² · q / (2 p cd²)``.
    """
    g = math.gcd(p, q * t)
    cn, cd = p // g, (q * t) // g
    den = 2 * p * cd * cd
    mult = q
    g2 = math.gcd(mult, den)
    mult //= g2
    den //= g2
    # int64 path: den < 2^62 and |A|·sqrt(mult) < 2^31 where A = |Y|·cd − cn.
    a_max = math.isqrt(_LIMIT // mult)
    # (|A| ≤ a_max needs cn ≤ a_max, since A ≥ −cn.)
    fast = den <= _LIMIT and cd <= _LIMIT and cn <= a_max
    parts: list[np.ndarray] = []
    got = 0
    rate = 0.5
    while got < n:
        need = n - got
        batch = int(need / rate * 1.05) + 64
        y = _dlap_core(rng, 1, t, batch)
        ay = np.abs(y)
        acc = np.zeros(batch, dtype=bool)
        if fast and not _is_obj(ay):
            safe = ay <= (a_max + cn) // cd  # then −cn ≤ A ≤ a_max and ay·cd ≤ 2^62
            sidx = np.nonzero(safe)[0]
            a = ay[sidx] * cd - cn  # |a| ≤ a_max, so a² · mult ≤ 2^62
            acc[sidx] = _bern_exp_neg(rng, a * a * mult, den, sidx.size)
            uidx = np.nonzero(~safe)[0]
        else:
            uidx = np.arange(batch)
        if uidx.size:
            a = ay[uidx].astype(object) * cd - cn
            acc[uidx] = _bern_exp_neg(rng, a * a * mult, den, uidx.size)
        out = y[acc]
        parts.append(out)
        got += out.size
        rate = max(out.size / batch, 0.02)
    return np.concatenate(parts)[:n] if len(parts) > 1 else parts[0][:n]


# ============================================================================================
# public samplers


def bernoulli_exp(gamma: Any, size: Any, rng: Any = None) -> np.ndarray:
    """i.i.d. Bernoulli(exp(−γ)) for a rational γ ≥ 0 (CKS20 Alg. 1), exact. Returns bools."""
    rng = _check_rng(rng)
    if isinstance(gamma, (int, np.integer)) and int(gamma) == 0:
        g = Fraction(0)
    else:
        g = _to_fraction("gamma", gamma)
    n, shape = _size(size)
    num, den = g.numerator, g.denominator
    if num < _LIMIT and den < _LIMIT:
        res = _bern_exp_neg(rng, np.full(n, num, dtype=np.int64), den, n)
    else:
        res = _bern_exp_neg(rng, np.full(n, num, dtype=object), den, n)
    return res.reshape(shape)


def discrete_laplace(scale_t: Any, size: Any, rng: Any = None) -> np.ndarray:
    """Exact i.i.d. samples on Z with ``P(x) ∝ exp(−|x|/t)`` (CKS20 Alg. 2).

    ``scale_t``: t > 0 as a Fraction, int, or float (a float is converted exactly to the binary
    rational it denotes -- the sampler is exact for that rational). ``rng``: SecureRandom (default)
    or TestRandom. Returns an int64 array of shape ``size`` (object dtype only if a sample
    exceeds the int64 range, which requires astronomically large scales).
    """
    rng = _check_rng(rng)
    t = _to_fraction("scale_t", scale_t)
    n, shape = _size(size)
    if n == 0:
        return np.zeros(shape, dtype=np.int64)
    # P(x) ∝ exp(−|x| · den/num): CKS20 Alg. 2 with (s, t) = (den, num).
    s_, t_ = t.denominator, t.numerator
    return _finish(_chunked(lambda k: _dlap_core(rng, s_, t_, k), n), n, shape)


def discrete_gaussian(sigma2: Any, size: Any, rng: Any = None) -> np.ndarray:
    """Exact i.i.d. samples on Z with ``P(x) ∝ exp(−x²/(2σ²))`` (CKS20 Alg. 3).

    ``sigma2``: σ² > 0 as a Fraction, int, or float (floats are converted exactly; note that a
    float with a long binary expansion makes the final acceptance test use Python big integers,
    which is exact but several times slower -- pass a Fraction with a small denominator for
    speed, or use :func:`sample_on_grid`, which chooses such a rational). ``rng``: SecureRandom
    (default) or TestRandom. The variance of the output is at most σ² (CKS20 Cor. 9).
    """
    rng = _check_rng(rng)
    s2 = _to_fraction("sigma2", sigma2)
    n, shape = _size(size)
    if n == 0:
        return np.zeros(shape, dtype=np.int64)
    p, q = s2.numerator, s2.denominator
    t = math.isqrt(p // q) + 1  # ⌊σ⌋ + 1, since ⌊√x⌋ = isqrt(⌊x⌋)
    return _finish(_chunked(lambda k: _dgauss_core(rng, p, q, t, k), n), n, shape)


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
        p, q = s2.numerator, s2.denominator
        y = _finish(_chunked(lambda c: _dgauss_core(rng, p, q, t, c), k.size), k.size, k.shape)
    else:
        b = lattice_laplace_scale(noise_spec.scale, grid)
        y = discrete_laplace(b, k.shape, rng)
    if y.dtype == object or k.dtype == object or (k.size and (np.max(np.abs(y)) >= 2**62
                                                               or np.max(np.abs(k)) >= 2**62)):
        total = np.array([int(a) + int(c) for a, c in zip(k.ravel(), y.ravel(), strict=True)], dtype=object)
        return (total.astype(np.float64) * grid).reshape(k.shape)
    return (k.astype(np.int64) + y).astype(np.float64) * grid


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
