"""Exactness of the vectorised samplers of factorize.privacy.sampling (CKS20 Alg. 1–3).

Two kinds of test:

* **Exact, deterministic** checks of every random decision: the random bytes are scripted
  (:class:`ScriptedBytes`) or enumerated, and the decisions are compared with the exact
  rationals — Bernoulli(r/b) digit by digit, the rejection thresholds of uniform integers, and
  the table that reads a Bernoulli(exp(−1)) chain off a 16-bit word.
* **Statistical** checks of the laws: chi-square goodness of fit against the closed-form pmf,
  tail masses, rejection counts against their exact probabilities, and two-sample tests of
  the fixed-width path against the Python-integer (object) path and against a per-draw
  transcription of CKS20's reference code. Every one draws from ``TestRandom(seed)`` with a
  fixed seed (so a run is deterministic) and rejects at p < ``ALPHA`` = 1e-4: for a fresh seed a
  correct sampler fails one given test with probability 1e-4, and the whole module (≈ 60
  statistical assertions) with probability ≤ 0.6 %.
"""

from __future__ import annotations

import math
import multiprocessing
import os
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy import stats

from factorize.privacy import sampling as S
from factorize.privacy.sampling import (
    SecureRandom,
    TestRandom,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    lattice_sigma2,
)

ALPHA = 1e-4  # per-assertion false-failure probability of the statistical tests

#: σ² of the Adult ≤3-way release (σ = 1.00052 on the grid 2⁻²³): the fixed-width
#: production case, t = 8,392,971.
ADULT_SIGMA2 = lattice_sigma2(1.00052, 2.0**-23)[0]


class ScriptedBytes(TestRandom):
    """A random source that hands out prescribed bytes, in order (then fails)."""

    def __init__(self, data: bytes | list[int]) -> None:
        super().__init__(0)
        self._script = bytes(data)

    def _fill(self, nbytes: int) -> bytes:
        if nbytes > len(self._script):
            raise AssertionError("the script ran out of bytes")
        out, self._script = self._script[:nbytes], self._script[nbytes:]
        return out


def _u32(values: list[int]) -> bytes:
    return np.array(values, dtype="<u4").tobytes()


def _u16(values: list[int]) -> bytes:
    return np.array(values, dtype="<u2").tobytes()


# ============================================================================================
# exact checks of every decision


def _decide(r: int, b: int, d: int, script: bytes) -> tuple[bool, int]:
    """[V < r/b] for the uniform real V whose base-2^d digits are the top d bits of the
    scripted bytes, by its definition: read digits until the interval [lo, lo + 2^−dj) of
    the values V can still take lies on one side of r/b. Returns (outcome, bytes read)."""
    p = Fraction(r, b)
    lo, width = Fraction(0), Fraction(1)
    for j, byte in enumerate(script, start=1):
        width /= 2**d
        lo += (byte >> (8 - d)) * width
        if lo + width <= p:
            return True, j
        if lo >= p:
            return False, j
    raise AssertionError("undecided after the whole script")


@pytest.mark.parametrize("r, b", [(1, 3), (0, 5), (5, 5), (2, 7), (100, 256), (255, 257), (1, 8),
                                  (3, 2**58 + 1), (2**60 + 12345, 2**61 - 1)])
def test_bernoulli_ratio_takes_the_exact_decision(r, b):
    # Every first digit, and for the one that ties every second digit (third digit from a
    # fixed stream): the sampler's outcome and the bytes it reads are those of the definition.
    d = min(8, 62 - b.bit_length())
    tail = TestRandom(3).octets(64).tobytes()
    c = (r << d) // b
    scripts = [bytes([x << (8 - d)]) + tail for x in range(2**d) if x != c]
    scripts += [bytes([c << (8 - d), y]) + tail for y in range(256)] if c < 2**d else []
    for script in scripts:
        rng = ScriptedBytes(script)
        got = S._bern_ratio_fixed(rng, np.array([r], dtype=np.int64), b)
        want, used = _decide(r, b, d, script)
        assert bool(got[0]) == want and len(script) - len(rng._script) == used


def test_bernoulli_ratio_decides_positions_independently():
    # a batch reads one digit per position, then the ties' next digits in position order
    r = np.array([1, 1, 1, 2], dtype=np.int64)
    out = S._bern_ratio_fixed(ScriptedBytes([84, 85, 86, 85, 0, 255]), r, 3)
    # 1/3: c = 85 (84 wins, 86 loses, 85 ties); 2/3: c = 170 (85 wins); ties: 0 wins, 255 loses
    assert list(out) == [True, True, False, True]
    out = S._bern_ratio_fixed(ScriptedBytes([85, 85, 0, 255]), r[:2], 3)
    assert list(out) == [True, False]


def test_uniform_below_rejection_threshold_is_exact():
    bound = 3
    last = 2**32 - 2**32 % bound - 1  # the largest accepted 32-bit word
    # words last (accepted), last+1 .. 2^32−1 (rejected, redrawn from the next words)
    rng = ScriptedBytes(_u32([last, last + 1, 2**32 - 1, 5, 7]))
    out = S._uniform_below(rng, bound, 3)
    assert list(out) == [last % bound, 5 % bound, 7 % bound]
    # exact uniformity: the accepted words split evenly over the residues
    assert (last + 1) % bound == 0
    # a power-of-two bound has no rejection; 2^32 takes every word as is
    assert list(S._uniform_below(ScriptedBytes(_u32([2**32 - 1, 0])), 2**32, 2)) == [2**32 - 1, 0]
    # 64-bit words for bounds above 2^32
    b64 = 2**40 + 3
    last64 = 2**64 - 2**64 % b64 - 1
    rng = ScriptedBytes(np.array([last64 + 1, last64], dtype="<u8").tobytes())
    assert list(S._uniform_below(rng, b64, 1)) == [last64 % b64]


def test_chain_table_is_exact():
    # #{u < 13·7! : K > k} = 13·7!/k! for k ≤ 7: each prefix of the chain has probability 1/k!.
    table = S._CHAIN_TABLE
    u = np.arange(2**16)
    steps = sum((u < S._CHAIN_SPAN // math.factorial(k)).astype(int) for k in range(1, 8))
    for k in range(1, 8):
        assert int((steps[: S._CHAIN_SPAN] >= k).sum()) == S._CHAIN_SPAN // math.factorial(k)
    assert (table[S._CHAIN_SPAN:] == 3).all()  # rejected words
    assert (table[: S._CHAIN_SPAN] != 3).all()
    assert list(np.flatnonzero(table == 2)) == list(range(13))  # K > 7: the chain continues
    # the decided mass of success is Σ_{K odd ≤ 7} P(K) exactly, as a rational
    succ = Fraction(int((table == 1).sum()), S._CHAIN_SPAN)
    exact = sum(Fraction(1, math.factorial(j - 1)) - Fraction(1, math.factorial(j)) for j in (1, 3, 5, 7))
    assert succ == exact


def test_bern_exp_minus_one_rejects_and_continues():
    # a rejected word (≥ 13·7!) is redrawn; a word below 13 continues the chain with A_8 ~ Bernoulli(1/8)
    # (one byte: digit < ⌊256/8⌋ = 32 succeeds), then A_9 (digit < ⌊256/9⌋ = 28).
    words = _u16([65535, 0, 65519]) + _u16([40000]) + bytes([0, 200])
    out = S._bern_exp_minus_one(ScriptedBytes(words), 3)
    # position 0: 65535 rejected → redraw 40000 (steps = 1: 40000 ≥ 65520/2 → K = 2, failure)
    # position 1: word 0 → A_8 succeeds (digit 0), A_9 fails (digit 200): K = 9, odd → success
    # position 2: 65519 ≥ 32760 → K = 2 → failure
    assert list(out) == [False, True, False]


# ============================================================================================
# laws: goodness of fit against the closed-form pmf


def _dgauss_probs(sigma2: Fraction, edges: np.ndarray) -> np.ndarray:
    """Exact-to-1e-15 masses of N_Z(0, σ²) in the bins [edges[i], edges[i+1]) (integers),
    plus the two tails, by mpmath sums (σ small) or the Euler–Maclaurin integral (σ large)."""
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    s = mpmath.sqrt(s2)
    if s < 2000:
        L = int(40 * s) + 10
        w = np.array([float(mpmath.exp(-mpmath.mpf(x) ** 2 / (2 * s2))) for x in range(-L, L + 1)])
        w /= w.sum()
        cdf = np.concatenate([[0.0], np.cumsum(w)])
        idx = np.clip(edges + L, 0, 2 * L + 1)
        inner = np.diff(cdf[idx])
        return np.concatenate([[cdf[idx[0]]], inner, [1.0 - cdf[idx[-1]]]])
    # σ ≥ 2000: the sum over integers equals the Gaussian integral to relative 1e-100 (Poisson
    # summation), and each bin of width ≥ 1 its integral up to the endpoint corrections
    z = [float(mpmath.ncdf((mpmath.mpf(int(e)) - mpmath.mpf(1) / 2) / s)) for e in edges]
    return np.diff(np.concatenate([[0.0], z, [1.0]]))


def _gof(x: np.ndarray, probs: np.ndarray, edges: np.ndarray) -> float:
    obs = np.bincount(np.searchsorted(edges, x, side="right"), minlength=edges.size + 1)
    exp = probs * x.size
    # merge bins until every expected count ≥ 20
    mo, me, ao, ae = [], [], 0.0, 0.0
    for o, e in zip(obs, exp, strict=True):
        ao, ae = ao + o, ae + e
        if ae >= 20:
            mo.append(ao)
            me.append(ae)
            ao = ae = 0.0
    mo[-1] += ao
    me[-1] += ae
    me_arr = np.array(me) * (sum(mo) / sum(me))
    return float(stats.chisquare(mo, me_arr).pvalue)


def _edges(sigma2: Fraction) -> np.ndarray:
    s = math.sqrt(float(sigma2))
    if s < 30:
        W = int(6 * s) + 2
        return np.arange(-W, W + 2)
    return np.unique(np.round(np.linspace(-5 * s, 5 * s, 101)).astype(np.int64))


GAUSS_CASES = [
    Fraction(1, 100),  # tiny: P(±1) ≈ 2e^{-50}, all zeros
    Fraction(1, 4),
    Fraction(1),
    Fraction(109, 10),  # σ ≈ 3.3, rational
    Fraction(10**4),
    Fraction(0.3**2 * 37),  # a float's 2^-k denominator: the acceptance runs on Python ints
    ADULT_SIGMA2,  # σ ≈ 8.4·10^6: fixed width, t = 8,392,971
    Fraction(10**24 + 1, 3),  # σ ≈ 5.8·10^11: den > 2^62, acceptance on Python ints
]


@pytest.mark.parametrize("sigma2", GAUSS_CASES, ids=str)
def test_discrete_gaussian_fits_the_pmf(sigma2):
    n = 200_000
    x = discrete_gaussian(sigma2, n, TestRandom(1000 + GAUSS_CASES.index(sigma2)))
    assert x.dtype == np.int64 and x.shape == (n,)
    edges = _edges(sigma2)
    if float(sigma2) < 0.05:
        assert np.all(x == 0)  # P(x ≠ 0) < 1e-21
        return
    assert _gof(x, _dgauss_probs(sigma2, edges), edges) > ALPHA


def test_discrete_gaussian_huge_sigma_object_samples():
    s2 = Fraction(10**40 + 7, 3)  # σ ≈ 5.8e19: samples beyond int64
    x = discrete_gaussian(s2, 4000, TestRandom(5))
    assert x.dtype == object
    z = np.array([float(v) for v in x]) / math.sqrt(float(s2))
    assert stats.kstest(z, "norm").pvalue > ALPHA


@pytest.mark.parametrize("t", [Fraction(1, 3), Fraction(1, 2), 1, Fraction(7, 3), 100, 8392971])
def test_discrete_laplace_fits_the_pmf(t):
    n = 200_000
    x = discrete_laplace(t, n, TestRandom(77 + int(float(t) * 3)))
    q = mpmath.exp(-1 / mpmath.mpf(Fraction(t).numerator) * Fraction(t).denominator)
    W = int(10 * float(t)) + 3
    edges = np.unique(np.round(np.linspace(-W, W + 1, min(2 * W + 2, 201))).astype(np.int64))

    def cdf(k: int) -> float:  # P(X < k) for P(x) = c·q^|x|, c = (1 − q)/(1 + q)
        c = (1 - q) / (1 + q)
        if k <= 0:
            return float(c * q ** (1 - k) / (1 - q))
        return float(1 - c * q**k / (1 - q))

    cd = np.array([cdf(int(e)) for e in edges])
    probs = np.diff(np.concatenate([[0.0], cd, [1.0]]))
    assert _gof(x, probs, edges) > ALPHA


# ============================================================================================
# tails


@pytest.mark.parametrize("sigma2, k", [(Fraction(10**4), 3), (Fraction(10**4), 4), (ADULT_SIGMA2, 4),
                                       (Fraction(9, 4), 3)])
def test_discrete_gaussian_tail_mass(sigma2, k):
    n = 1_000_000
    x = discrete_gaussian(sigma2, n, TestRandom(int(k * 101 + float(sigma2) % 97)))
    s = math.sqrt(float(sigma2))
    cut = math.ceil(k * s)
    if s < 2000:
        num = mpmath.nsum(lambda y: mpmath.exp(-y**2 / (2 * mpmath.mpf(float(sigma2)))), [cut, mpmath.inf])
        tot = 1 + 2 * mpmath.nsum(lambda y: mpmath.exp(-y**2 / (2 * mpmath.mpf(float(sigma2)))), [1, mpmath.inf])
        p = float(2 * num / tot)
    else:
        p = float(2 * mpmath.ncdf(-(mpmath.mpf(cut) - mpmath.mpf(1) / 2) / s))
    hits = int((np.abs(x) >= cut).sum())
    assert stats.binomtest(hits, n, p).pvalue > ALPHA
    assert np.abs(x).max() < 7 * s + 2  # P(|X| ≥ 7σ) < 3e-12 per sample


def test_discrete_laplace_tail_mass():
    n, t = 1_000_000, 100
    x = discrete_laplace(t, n, TestRandom(4242))
    q = math.exp(-1 / t)
    for k in (5, 8):
        cut = k * t
        p = 2 * q**cut / (1 + q)  # P(|X| ≥ cut) = 2 q^cut/(1+q)
        assert stats.binomtest(int((np.abs(x) >= cut).sum()), n, p).pvalue > ALPHA


# ============================================================================================
# rejection counts


def _dlap_accept_probability(s: int, t: int) -> float:
    q = mpmath.exp(-mpmath.mpf(1) / t)
    p_d = (1 - mpmath.exp(-1)) / (t * (1 - q))  # P(D = 1) = (1/t) Σ_{u<t} e^{−u/t}
    p_zero = 1 - mpmath.exp(-mpmath.mpf(s) / t)  # P(Y = 0) = P(X < s)
    return float(p_d * (1 - p_zero / 2))


@pytest.mark.parametrize("s, t", [(1, 1), (1, 2), (3, 7), (7, 3), (1, 100), (1, 8392971)])
def test_discrete_laplace_rejection_count(s, t):
    m = 400_000
    y = S._dlap_batch(TestRandom(s * 1000 + t), s, t, m)
    assert stats.binomtest(y.size, m, _dlap_accept_probability(s, t)).pvalue > ALPHA


def _dgauss_accept_probability(sigma2: Fraction, t: int) -> float:
    """P(accept) of CKS20 Alg. 3 per Laplace candidate: Σ_y P_Lap(y)·exp(−(|y| − σ²/t)²/(2σ²))."""
    s2 = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    q = mpmath.exp(-mpmath.mpf(1) / t)
    c = (1 - q) / (1 + q)

    def g(y):
        return c * q**y * mpmath.exp(-((y - s2 / t) ** 2) / (2 * s2))

    if t < 10**4:  # the terms beyond 80t + 10σ are below 1e-30 of the sum
        return float(2 * mpmath.fsum(g(y) for y in range(80 * t + 10 * int(mpmath.sqrt(s2)))) - g(0))
    # Euler–Maclaurin: the sum over y ≥ 0 is the integral + g(0)/2 + O(g'(0)), g' ~ g/t
    return float(2 * mpmath.quad(g, [0, s2 / t, 10 * t, mpmath.inf]))


@pytest.mark.parametrize("sigma2", [Fraction(1, 4), Fraction(109, 10), Fraction(10**4), ADULT_SIGMA2],
                         ids=str)
def test_discrete_gaussian_rejection_count(sigma2):
    p, q = sigma2.numerator, sigma2.denominator
    t = math.isqrt(p // q) + 1
    rng = TestRandom(99 + t % 1000)
    y = np.concatenate([S._dlap_batch(rng, 1, t, 1 << 16) for _ in range(6)])
    acc = S._dgauss_accept(rng, S._GaussConstants(p, q, t), y)
    assert stats.binomtest(int(acc.sum()), y.size, _dgauss_accept_probability(sigma2, t)).pvalue > ALPHA


@pytest.mark.parametrize("gamma", [0, Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7),
                                   Fraction(10**30 + 1, 10**30), Fraction(1, 2**70), Fraction(3, 2**61),
                                   Fraction(0.05)],
                         ids=str)
def test_bernoulli_exp_counts(gamma):
    n = 400_000
    b = bernoulli_exp(gamma, n, TestRandom(int(float(gamma) * 1000) + 3))
    assert b.dtype == bool
    p = math.exp(-float(gamma))
    if p == 1.0:
        assert b.all()
    else:
        assert stats.binomtest(int(b.sum()), n, p).pvalue > ALPHA


def test_bernoulli_exp_minus_one_counts():
    n = 1_000_000
    assert stats.binomtest(int(S._bern_exp_minus_one(TestRandom(8), n).sum()), n, math.exp(-1)).pvalue > ALPHA
    v = S._geometric_exp_minus_one(TestRandom(9), n)
    probs = np.array([(1 - math.exp(-1)) * math.exp(-k) for k in range(10)])
    obs = np.bincount(np.minimum(v, 10), minlength=11)
    assert stats.chisquare(obs, np.append(probs, 1 - probs.sum()) * n).pvalue > ALPHA


# ============================================================================================
# the fixed-width path against the Python-integer path and the per-draw reference


def _two_sample(a: np.ndarray, b: np.ndarray, edges: np.ndarray) -> float:
    ca = np.bincount(np.searchsorted(edges, a, side="right"), minlength=edges.size + 1)
    cb = np.bincount(np.searchsorted(edges, b, side="right"), minlength=edges.size + 1)
    keep = (ca + cb) >= 20
    table = np.vstack([np.append(ca[keep], ca[~keep].sum()), np.append(cb[keep], cb[~keep].sum())])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table).pvalue)


PATH_CASES = [Fraction(1, 100), Fraction(1, 4), Fraction(109, 10), Fraction(10**4), ADULT_SIGMA2]


@pytest.mark.parametrize("sigma2", PATH_CASES, ids=str)
def test_fixed_width_path_matches_object_path(sigma2, monkeypatch):
    n = 100_000
    fixed = discrete_gaussian(sigma2, n, TestRandom(11))
    monkeypatch.setattr(S, "_FIXED_MAX", 0)  # every rational decision on Python ints
    monkeypatch.setattr(S, "_RATIO_MAX", 0)
    obj = discrete_gaussian(sigma2, n // 4, TestRandom(12))
    assert _two_sample(fixed, obj, _edges(sigma2)) > ALPHA


class Reference:
    """CKS20's reference samplers (their appendix code), one draw at a time on Python ints:
    the per-draw loop that the vectorised samplers replace."""

    def __init__(self, rng: TestRandom) -> None:
        self.rng = rng

    def bern_exp_le1(self, g: Fraction) -> bool:
        k = 1
        while self.rng.randbelow(g.denominator * k) < g.numerator:
            k += 1
        return k % 2 == 1

    def bern_exp(self, g: Fraction) -> bool:
        for _ in range(math.floor(g)):
            if not self.bern_exp_le1(Fraction(1)):
                return False
        return self.bern_exp_le1(g - math.floor(g))

    def geometric_exp_fast(self, g: Fraction) -> int:  # P(x) ∝ exp(−g·x), x ≥ 0
        s, t = g.numerator, g.denominator
        while True:
            u = self.rng.randbelow(t)
            if self.bern_exp(Fraction(u, t)):
                break
        v = 0
        while self.bern_exp(Fraction(1)):
            v += 1
        return (v * t + u) // s

    def dlaplace(self, scale: Fraction) -> int:
        while True:
            sign = self.rng.randbelow(2)
            mag = self.geometric_exp_fast(1 / scale)
            if not (sign == 1 and mag == 0):
                return -mag if sign else mag

    def dgauss(self, sigma2: Fraction) -> int:
        t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
        while True:
            y = self.dlaplace(Fraction(t))
            if self.bern_exp((abs(y) - sigma2 / t) ** 2 / (2 * sigma2)):
                return y


@pytest.mark.parametrize("sigma2", PATH_CASES + [Fraction(10**40 + 7, 3)], ids=str)
def test_vectorised_matches_per_draw_reference(sigma2):
    ref = Reference(TestRandom(21))
    r = np.array([ref.dgauss(sigma2) for _ in range(8000)], dtype=object)
    x = discrete_gaussian(sigma2, 80_000, TestRandom(22))
    s = math.sqrt(float(sigma2))
    if s > 1e15:  # beyond int64: compare in units of σ
        r = np.array([float(v) / s for v in r])
        x = np.array([float(v) / s for v in x])
        assert stats.ks_2samp(r, x).pvalue > ALPHA
        return
    assert _two_sample(x, r.astype(np.int64), _edges(sigma2)) > ALPHA


@pytest.mark.parametrize("t", [Fraction(1, 2), Fraction(7, 3), 100])
def test_discrete_laplace_matches_per_draw_reference(t):
    ref = Reference(TestRandom(31))
    r = np.array([ref.dlaplace(Fraction(t)) for _ in range(8000)])
    x = discrete_laplace(t, 80_000, TestRandom(32))
    W = int(8 * float(t)) + 2
    assert _two_sample(x, r, np.unique(np.round(np.linspace(-W, W, 60)).astype(np.int64))) > ALPHA


# ============================================================================================
# the random byte stream


def test_test_random_stream_is_the_generator_output():
    assert np.array_equal(TestRandom(5).words(7), np.random.PCG64(5).random_raw(7))
    a, b = TestRandom(6), np.random.PCG64(6).random_raw(4).astype("<u8").tobytes()
    assert a.octets(3).tobytes() == b[:3]
    assert a.words16(2).tobytes() == b[4:8]  # aligned to 2 bytes: byte 3 is skipped
    assert a.words(1).tobytes() == b[8:16]


def _child_draw(rng: SecureRandom, conn) -> None:  # pragma: no cover - runs in the child
    conn.send(rng.octets(64).tobytes())


def test_secure_random_fork_does_not_share_bytes():
    rng = SecureRandom()
    rng.octets(16)  # a block is now buffered
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child_draw, args=(rng, child))
    proc.start()
    theirs = parent.recv()
    proc.join()
    assert rng.octets(64).tobytes() != theirs
    assert rng._pid == os.getpid()


def test_secure_random_copies_do_not_share_bytes():
    import copy
    import pickle

    rng = SecureRandom()
    rng.octets(16)
    for twin in (copy.copy(rng), copy.deepcopy(rng), pickle.loads(pickle.dumps(rng))):
        assert twin._buf == b"" and twin.octets(64).tobytes() != rng.octets(64).tobytes()


def test_secure_random_threads_never_share_bytes():
    import threading

    rng = SecureRandom()
    out: list[bytes] = []

    def draw() -> None:
        for _ in range(200):
            out.append(rng.words(64).tobytes())

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    words = [w[i:i + 8] for w in out for i in range(0, len(w), 8)]
    assert len(set(words)) == len(words) == 4 * 200 * 64  # no word handed out twice
