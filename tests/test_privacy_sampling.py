"""Tests for the exact samplers in factorize.privacy.sampling, against exact pmfs."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from factorize.privacy.calibration import calibrate
from factorize.privacy.guarantees import ZCDP, ApproxDP, PrivacyError, PureDP
from factorize.privacy.sampling import (
    SecureRandom,
    TestRandom,
    _bern_ratio_obj,
    _dgauss_stream,
    _uniform_below,
    add_noise,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    lattice_laplace_scale,
    lattice_sigma2,
    round_to_grid,
    sample_float_noise,
    sample_on_grid,
)

P_MIN = 1e-4  # chi-square p-value threshold (seeds are fixed, so results are deterministic)


# ------------------------------------------------------------------ exact reference pmfs


def dgauss_pmf(sigma2, lo, hi):
    """Exact-to-float64 pmf of N_Z(0, σ²) on [lo, hi], normalised over a range of ±(40σ + 10)."""
    s2 = float(sigma2)
    L = int(40 * math.sqrt(s2)) + 10
    x = np.arange(-L, L + 1, dtype=np.float64)
    logw = -(x**2) / (2 * s2)
    w = np.exp(logw - logw.max())
    Z = w.sum()
    return w[(x >= lo) & (x <= hi)] / Z, x, w / Z


def dlap_pmf(t, xs):
    q = math.exp(-1 / float(t))
    return (1 - q) / (1 + q) * q ** np.abs(xs)


def chi2_pvalue(samples, support, probs):
    """Chi-square GOF on the given support (tails outside pooled); bins merged until E ≥ 20."""
    n = samples.size
    counts = np.array([(samples == v).sum() for v in support], dtype=float)
    below = (samples < support[0]).sum()
    above = (samples > support[-1]).sum()
    p_in = probs.sum()
    # split the remaining mass between the two tails symmetrically (pmfs here are symmetric)
    tail = max(0.0, (1 - p_in) / 2)
    obs = [below] + list(counts) + [above]
    exp = [tail * n] + list(probs * n) + [tail * n]
    # merge adjacent bins until every expected count ≥ 20
    mo, me = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(obs, exp, strict=True):
        acc_o += o
        acc_e += e
        if acc_e >= 20:
            mo.append(acc_o)
            me.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0 or acc_o > 0:
        mo[-1] += acc_o
        me[-1] += acc_e
    mo, me = np.array(mo), np.array(me)
    me *= mo.sum() / me.sum()
    return stats.chisquare(mo, me).pvalue


def dgauss_gof(samples, sigma2):
    s = math.sqrt(float(sigma2))
    W = int(6 * s) + 2
    if W <= 2000:
        probs, _, _ = dgauss_pmf(sigma2, -W, W)
        return chi2_pvalue(samples, np.arange(-W, W + 1), probs)
    # large σ: ~200 equal-width bins of exact probability mass
    _, x, p = dgauss_pmf(sigma2, 0, 0)
    edges = np.linspace(-W, W, 201).round()
    cdf = np.concatenate([[0.0], np.cumsum(p)])
    idx = np.searchsorted(x, edges)  # mass of x < edge = cdf[idx]
    mass = np.diff(np.concatenate([[0.0], cdf[idx], [1.0]]))
    obs = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=mass.size)
    return stats.chisquare(obs, mass * samples.size).pvalue


# ------------------------------------------------------------------ discrete Gaussian


@pytest.mark.parametrize(
    "sigma2, n",
    [
        (Fraction(1, 4), 300_000),  # σ = 0.5
        (1, 300_000),
        (Fraction(109, 10), 300_000),  # σ ≈ 3.3, non-integer rational
        (10_000, 300_000),  # σ = 100
        (Fraction(10**8), 200_000),  # σ = 1e4
    ],
)
def test_discrete_gaussian_goodness_of_fit(sigma2, n):
    rng = TestRandom(20240601 + n + int(float(sigma2) * 10))
    x = discrete_gaussian(sigma2, n, rng)
    assert x.dtype == np.int64 and x.shape == (n,)
    assert dgauss_gof(x, sigma2) > P_MIN
    # mean and variance against the exact moments; variance ≤ σ² (CKS20 Cor. 9)
    _, xs, p = dgauss_pmf(sigma2, 0, 0)
    var = float((p * xs**2).sum())
    assert var <= float(sigma2) * (1 + 1e-12)
    m4 = float((p * xs**4).sum())
    se_var = math.sqrt((m4 - var**2) / n)
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5 * se_var


def test_discrete_gaussian_test_has_power():
    # The same GOF test rejects a 5% wrong σ, and the naive rounded continuous Gaussian.
    rng = TestRandom(7)
    x = discrete_gaussian(Fraction(109, 10), 300_000, rng)
    assert dgauss_gof(x, Fraction(109, 10) * Fraction(21, 20) ** 2) < 1e-6
    naive = np.rint(rng.generator.normal(0, 0.5, 300_000)).astype(np.int64)
    assert dgauss_gof(naive, Fraction(1, 4)) < 1e-6


def test_discrete_gaussian_float_parameter_is_exact_rational():
    # 0.3**2 as a float has a 2^-k denominator: exercises the big-integer acceptance path.
    s2 = 0.3**2 * 37
    rng = TestRandom(11)
    x = discrete_gaussian(s2, 60_000, rng)
    assert x.dtype == np.int64
    assert dgauss_gof(x, Fraction(s2)) > P_MIN


def test_discrete_gaussian_huge_sigma_object_path():
    s2 = Fraction(10**40 + 7, 3)  # σ ≈ 5.8e19: beyond int64 for intermediate products
    x = discrete_gaussian(s2, 3000, TestRandom(5))
    assert x.dtype == object  # samples exceed int64 range
    z = np.array([float(v) for v in x]) / math.sqrt(float(s2))
    assert stats.kstest(z, "norm").pvalue > P_MIN


def test_discrete_gaussian_large_sigma_int64_overflow_path():
    # σ = 1e6: 2pqt² > 2^62, so the acceptance test runs on Python ints; still exact.
    x = discrete_gaussian(10**12, 20_000, TestRandom(6))
    assert x.dtype == np.int64
    assert stats.kstest(x / 1e6, "norm").pvalue > P_MIN


@pytest.mark.parametrize("t", [5, 10, 11, 23, 40])
def test_discrete_gaussian_any_t_is_correct(t):
    # CKS20 Alg. 3 is correct for every Laplace scale t; only speed depends on t ≈ σ (for
    # t ≪ σ the acceptance probability collapses, so the test stays within σ/2 ≤ t ≤ 4σ).
    x = np.concatenate(list(_dgauss_stream(TestRandom(100 + t), 100, 1, t, 100_000)))
    assert dgauss_gof(x, 100) > P_MIN


# ------------------------------------------------------------------ discrete Laplace


@pytest.mark.parametrize("t", [Fraction(1, 2), 1, Fraction(7, 3), 100, 0.7])
def test_discrete_laplace_goodness_of_fit(t):
    n = 300_000
    x = discrete_laplace(t, n, TestRandom(31 + int(float(t) * 100)))
    assert x.dtype == np.int64
    W = int(12 * float(t)) + 3
    support = np.arange(-W, W + 1)
    assert chi2_pvalue(x, support, dlap_pmf(t, support)) > P_MIN
    q = math.exp(-1 / float(t))
    var = 2 * q / (1 - q) ** 2
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    # fourth moment of the two-sided geometric, for the variance standard error
    xs = np.arange(-60 * int(float(t) + 1), 60 * int(float(t) + 1) + 1)
    m4 = float((dlap_pmf(t, xs) * xs.astype(float) ** 4).sum())
    assert abs(x.var() - var) < 5 * math.sqrt((m4 - var**2) / n)


def test_discrete_laplace_extreme_scales():
    tiny = discrete_laplace(Fraction(1, 10**30), 5000, TestRandom(1))
    assert np.all(tiny == 0)
    huge = discrete_laplace(Fraction(2**70), 3000, TestRandom(2))
    assert huge.dtype == object
    a = np.abs(np.array([float(v) for v in huge])) / 2.0**70
    assert stats.kstest(a, "expon").pvalue > P_MIN


# ------------------------------------------------------------------ primitives


@pytest.mark.parametrize(
    "gamma", [0, Fraction(1, 3), 1, Fraction(5, 2), 7, Fraction(10**30 + 1, 10**30), 0.05]
)
def test_bernoulli_exp(gamma):
    n = 200_000
    b = bernoulli_exp(gamma, n, TestRandom(int(float(gamma) * 1000) + 3))
    p = math.exp(-float(gamma))
    assert b.dtype == bool
    assert abs(b.mean() - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_uniform_below_unbiased():
    rng = TestRandom(9)
    for bound in [3, 7, 1000, 2**33 + 5, 2**62 + 12345]:
        u = _uniform_below(rng, bound, 200_000)
        assert u.min() >= 0 and u.max() < bound
        bins = np.minimum((u.astype(object) * 10 // bound).astype(np.int64), 9)
        assert stats.chisquare(np.bincount(bins, minlength=10)).pvalue > P_MIN if bound >= 10 else True
    u = _uniform_below(rng, 7, 140_000)
    assert stats.chisquare(np.bincount(u, minlength=7)).pvalue > P_MIN
    big = _uniform_below(rng, 3 * 2**70, 2000)
    assert big.dtype == object and all(0 <= v < 3 * 2**70 for v in big)
    tops = np.array([int(v) * 8 // (3 * 2**70) for v in big])
    assert stats.chisquare(np.bincount(tops, minlength=8)).pvalue > P_MIN


class _ScriptedRandom(TestRandom):
    """Feeds prescribed 64-bit words (to force the ambiguous branch of the big-int Bernoulli)."""

    def __init__(self, words):
        super().__init__(0)
        self._words = list(words)

    def words(self, n):
        out, self._words = self._words[:n], self._words[n:]
        return np.array(out, dtype=np.uint64)


def test_big_integer_bernoulli_resolves_ambiguity_exactly():
    a = np.array([10**40], dtype=object)
    b = 3 * 10**40  # p = 1/3; W = ⌊2^64/3⌋ straddles p, so more words are needed
    W = 2**64 // 3
    assert _bern_ratio_obj(_ScriptedRandom([W, 0]), a, b)[0]  # 0.0101…01|000… < 1/3
    assert not _bern_ratio_obj(_ScriptedRandom([W, 2**64 - 1]), a, b)[0]  # …|111… > 1/3
    # one ambiguous extension is not enough when the next word also matches 1/3's expansion
    assert _bern_ratio_obj(_ScriptedRandom([W, W, 0]), a, b)[0]
    assert not _bern_ratio_obj(_ScriptedRandom([W, W, 2**64 - 1]), a, b)[0]
    # far from the boundary: decided from the first word alone
    assert _bern_ratio_obj(_ScriptedRandom([0]), a, b)[0]
    assert not _bern_ratio_obj(_ScriptedRandom([2**64 - 1]), a, b)[0]


# ------------------------------------------------------------------ randomness sources


def test_secure_random_path():
    rng = SecureRandom()
    assert rng.is_test_mode is False
    x = discrete_gaussian(Fraction(9, 4), 50_000, rng)
    assert x.dtype == np.int64 and x.shape == (50_000,)
    assert abs(x.var() / 2.25 - 1) < 0.05
    y = discrete_laplace(3, (10, 20), rng)
    assert y.dtype == np.int64 and y.shape == (10, 20)
    z = discrete_gaussian(4, 100)  # default rng is SecureRandom
    assert z.dtype == np.int64
    assert rng.randbelow(1) == 0 and 0 <= rng.randbelow(2**200) < 2**200


def test_test_random_is_flagged_and_reproducible():
    assert TestRandom(1).is_test_mode is True
    assert TestRandom.__test__ is False
    a = discrete_gaussian(50, 1000, TestRandom(42))
    b = discrete_gaussian(50, 1000, TestRandom(42))
    c = discrete_gaussian(50, 1000, TestRandom(43))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_rng_type_is_enforced():
    for bad in [np.random.default_rng(0), 42, "urandom"]:
        with pytest.raises(TypeError):
            discrete_gaussian(1, 10, bad)
        with pytest.raises(TypeError):
            discrete_laplace(1, 10, bad)


def test_sampler_parameter_validation():
    for bad in [0, -1, Fraction(0), math.inf, math.nan, "1", True]:
        with pytest.raises(PrivacyError):
            discrete_gaussian(bad, 3, TestRandom(0))
        with pytest.raises(PrivacyError):
            discrete_laplace(bad, 3, TestRandom(0))
    with pytest.raises(PrivacyError):
        discrete_gaussian(1, -3, TestRandom(0))
    assert discrete_gaussian(1, 0, TestRandom(0)).shape == (0,)
    assert discrete_laplace(1, (2, 0), TestRandom(0)).shape == (2, 0)
    assert discrete_gaussian(1, (3, 4, 5), TestRandom(0)).shape == (3, 4, 5)


# ------------------------------------------------------------------ lattice release


@pytest.mark.parametrize("sigma", [1e-3, 0.3, 1.0, 7.77, 1000.5, 2**15 + 0.5, 123456.7, 3e7])
@pytest.mark.parametrize("grid", [1.0, 0.01, 0.37])
def test_lattice_sigma2_rounds_up_slightly(sigma, grid):
    s2, t = lattice_sigma2(sigma, grid)
    exact = (Fraction(sigma) / Fraction(grid)) ** 2
    assert s2 >= exact
    assert float(s2 / exact) - 1 <= 2.0**-15
    assert t >= 1
    b = lattice_laplace_scale(sigma, grid)
    ex = Fraction(sigma) / Fraction(grid)
    assert b >= ex and float(b / ex) - 1 <= 2.0**-20


def test_round_to_grid():
    k = round_to_grid([0.0, 0.26, -0.26, 1.0, 0.124], 0.25)
    assert list(k) == [0, 1, -1, 4, 0]
    with pytest.raises(PrivacyError):
        round_to_grid([np.nan], 0.125)
    with pytest.raises(PrivacyError):
        round_to_grid([1.0], 0.0)
    with pytest.raises(PrivacyError, match="power of two"):
        round_to_grid([1.0], 0.1)  # v/γ would be an inexact division
    # exact far beyond 2^53: Python integers, the exact multiple
    big = round_to_grid([1e300, -3.0 * 2.0 ** 70], 2.0 ** -30)
    assert big.dtype == object
    assert big[0] == Fraction(1e300) * 2 ** 30 and big[1] == -3 * 2 ** 100
    # ties to even, exactly
    assert list(round_to_grid([0.125, 0.375, -0.125], 0.25)) == [0, 2, 0]


def test_sample_on_grid_gaussian():
    m = 400
    values = np.linspace(-50, 50, m)
    spec = calibrate(ApproxDP(1.0, 1e-6), 1.0, grid=2.0 ** -4, dim=m)
    rng = TestRandom(77)
    reps = np.stack([sample_on_grid(values, spec, rng) for _ in range(200)])
    assert reps.dtype == np.float64 and reps.shape == (200, m)
    k = reps / 2.0 ** -4
    assert np.allclose(k, np.rint(k), atol=1e-6)  # on the lattice
    err = (reps - values).ravel()
    assert abs(err.mean()) < 5 * spec.scale / math.sqrt(err.size)
    assert abs(err.var() / spec.scale**2 - 1) < 0.02  # ≈ σ² (+ rounding term ≤ γ²/12)


def test_sample_on_grid_laplace_and_zcdp_large_sigma():
    spec = calibrate(PureDP(0.5), sensitivity_l1=2.0, grid=0.5, dim=10)
    y = sample_on_grid(np.arange(10.0), spec, TestRandom(3))
    assert np.allclose(y / 0.5, np.rint(y / 0.5))
    spec = calibrate(ZCDP(1e-6), 1.0, grid=2.0 ** -13, dim=5000)  # σ/γ ≈ 7e6: multiple-of-t path
    y = sample_on_grid(np.zeros((1000, 5)), spec, TestRandom(4))
    assert y.shape == (1000, 5)
    assert abs(y.std() / spec.scale - 1) < 0.05


def test_sample_on_grid_refuses_unsafe_use():
    float_spec = calibrate(ApproxDP(1.0, 1e-6), 1.0)
    with pytest.raises(PrivacyError, match="discrete sampler"):
        sample_on_grid(np.zeros(3), float_spec, TestRandom(0))
    with pytest.raises(PrivacyError, match="power of two"):
        calibrate(ApproxDP(1.0, 1e-6), 1.0, grid=0.1, dim=3)
    spec = calibrate(ApproxDP(1.0, 1e-6), 1.0, grid=0.125, dim=3)
    with pytest.raises(PrivacyError, match="dim=3"):
        sample_on_grid(np.zeros(4), spec, TestRandom(0))
    with pytest.raises(TypeError):
        sample_on_grid(np.zeros(3), spec, np.random.default_rng(0))


def test_add_noise_dispatch():
    spec = calibrate(ApproxDP(1.0, 1e-6), 1.0)
    y = add_noise(np.zeros(100_000), spec, TestRandom(8))
    assert abs(y.std() / spec.scale - 1) < 0.02
    spec_l = calibrate(PureDP(1.0), sensitivity_l1=1.0)
    z = sample_float_noise(spec_l, 100_000, TestRandom(9))
    assert abs(z.var() / 2 - 1) < 0.03
    spec_d = calibrate(ApproxDP(1.0, 1e-6), 1.0, grid=0.125, dim=3)
    w = add_noise(np.zeros(3), spec_d, TestRandom(1))
    assert np.allclose(w / 0.125, np.rint(w / 0.125))
