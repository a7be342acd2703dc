"""Tests for factorize.privacy.calibration, checked against independent high-precision truth."""

import itertools
import json
import math

import numpy as np
import pytest

from factorize.privacy.calibration import (
    NoiseSpec,
    analytic_gaussian_sigma,
    calibrate,
    classical_gaussian_sigma,
    discrete_gaussian_sigma,
    discretized_sensitivity,
    gaussian_delta,
    gaussian_log_delta,
    knorm_expected_sq_norm,
    l2_ball_knorm,
    laplace_scale,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_gaussian_sigma,
    zcdp_to_approx_dp,
)
from factorize.privacy.guarantees import ZCDP, ApproxDP, Neighbouring, PrivacyError, PureDP
from factorize.privacy.sampling import TestRandom, sample_float_noise
from factorize.privacy.sensitivity import Sensitivity, add_remove_sensitivity

CASES = [
    (0.01, 1e-5),
    (0.1, 1e-6),
    (0.5, 1e-6),
    (1.0, 1e-6),
    (1.0, 1e-12),
    (2.0, 1e-3),
    (5.0, 1e-9),
    (20.0, 1e-6),
    (100.0, 1e-10),
    (1e-4, 0.5),
    (3.0, 1e-100),
    (0.1, 1e-300),
    (700.0, 1e-5),
]


# ------------------------------------------------------------------ analytic Gaussian


@pytest.mark.parametrize("eps, delta", CASES)
def test_analytic_sigma_is_smallest_feasible(eps, delta):
    for sens in (1.0, 0.37, 12.5):
        sigma = analytic_gaussian_sigma(eps, delta, sens)
        assert gaussian_delta(eps, sigma, sens) <= delta
        assert gaussian_delta(eps, sigma * (1 - 1e-7), sens) > delta  # tight to 1e-7
        # scale invariance σ ∝ Δ
        assert sigma / sens == pytest.approx(analytic_gaussian_sigma(eps, delta, 1.0), rel=1e-10)


def _mp_delta(mp, eps, s):
    eps, s = mp.mpf(eps), mp.mpf(s)
    return mp.ncdf(1 / (2 * s) - eps * s) - mp.exp(eps) * mp.ncdf(-1 / (2 * s) - eps * s)


def test_analytic_sigma_against_mpmath():
    mp = pytest.importorskip("mpmath", reason="mpmath not installed (pip install mpmath)").mp
    mp.dps = 60
    for eps, delta in CASES:
        sigma = analytic_gaussian_sigma(eps, delta, 1.0)
        d = mp.mpf(delta)
        # Independent truth: bisection at 60 digits on the Balle–Wang equation.
        lo, hi = mp.mpf(sigma) * (1 - mp.mpf("1e-7")), mp.mpf(sigma) * (1 + mp.mpf("1e-7"))
        assert _mp_delta(mp, eps, lo) > d > _mp_delta(mp, eps, hi)
        for _ in range(90):
            mid = (lo + hi) / 2
            if _mp_delta(mp, eps, mid) > d:
                lo = mid
            else:
                hi = mid
        rel = float((mp.mpf(sigma) - hi) / hi)
        assert 0 <= rel <= 1e-8, (eps, delta, rel)  # above the true root by the log-δ margin only
        assert _mp_delta(mp, eps, sigma) <= d  # and truly feasible


def test_gaussian_delta_against_mpmath():
    mp = pytest.importorskip("mpmath", reason="mpmath not installed (pip install mpmath)").mp
    mp.dps = 50
    for eps, s in itertools.product([0.05, 1.0, 8.0, 60.0], [0.05, 0.3, 1.0, 4.0, 30.0]):
        want = _mp_delta(mp, eps, s)
        got = gaussian_delta(eps, s, 1.0)
        if want < mp.mpf("1e-300"):
            assert got < 1e-290
        else:
            assert got == pytest.approx(float(want), rel=1e-9)
        assert gaussian_log_delta(eps, 2 * s, 2.0) == pytest.approx(math.log(got), rel=1e-12) if got > 0 else True


def test_known_value_balle_wang():
    # ε = 1, δ = 1e-5, Δ = 1: σ ≈ 3.73 (analytic) versus 4.84 (classical, formally needs ε < 1).
    sigma = analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    assert 3.6 < sigma < 3.8
    assert sigma < 1.0 * math.sqrt(2 * math.log(1.25 / 1e-5))


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.5, 0.9, 0.999])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-12])
def test_analytic_below_classical(eps, delta):
    assert analytic_gaussian_sigma(eps, delta, 2.0) < classical_gaussian_sigma(eps, delta, 2.0)
    assert classical_gaussian_sigma(eps, delta, 2.0) == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25 / delta)) / eps
    )


def test_classical_refuses_large_epsilon():
    with pytest.raises(PrivacyError, match="epsilon < 1"):
        classical_gaussian_sigma(1.0, 1e-6, 1.0)


def test_analytic_monotone():
    eps_grid = [1e-3, 0.01, 0.1, 0.5, 1, 2, 5, 10, 50, 200]
    delta_grid = [0.3, 1e-2, 1e-4, 1e-6, 1e-9, 1e-15, 1e-40]
    for delta in delta_grid:
        s = [analytic_gaussian_sigma(e, delta, 1.0) for e in eps_grid]
        assert all(a > b for a, b in zip(s, s[1:], strict=False))
    for eps in eps_grid:
        s = [analytic_gaussian_sigma(eps, d, 1.0) for d in delta_grid]
        assert all(a < b for a, b in zip(s, s[1:], strict=False))


def test_gaussian_delta_decreasing_in_sigma():
    sig = np.geomspace(0.01, 100, 200)
    d = [gaussian_delta(1.0, s, 1.0) for s in sig]
    assert all(a >= b for a, b in zip(d, d[1:], strict=False))
    assert d[0] > 0.99


@pytest.mark.parametrize(
    "call",
    [
        lambda: analytic_gaussian_sigma(0, 1e-6, 1),
        lambda: analytic_gaussian_sigma(1, 0, 1),
        lambda: analytic_gaussian_sigma(1, 1, 1),
        lambda: analytic_gaussian_sigma(1, 1e-6, 0),
        lambda: analytic_gaussian_sigma(1, 1e-6, math.inf),
        lambda: analytic_gaussian_sigma(math.nan, 1e-6, 1),
        lambda: gaussian_delta(1, -1, 1),
        lambda: zcdp_gaussian_sigma(0, 1),
        lambda: laplace_scale(1, -1),
        lambda: zcdp_to_approx_dp(1, 1),
    ],
)
def test_calibration_input_validation(call):
    with pytest.raises(PrivacyError):
        call()


# ------------------------------------------------------------------ zCDP, Laplace, K-norm


def test_zcdp_closed_forms():
    # certified: never below the closed form, above it by a few ulps only
    assert zcdp_gaussian_sigma(0.5, 1.0) == pytest.approx(1.0, rel=2e-15)
    assert zcdp_gaussian_sigma(0.5, 1.0) >= 1.0
    assert zcdp_gaussian_sigma(2.0, 3.0) == pytest.approx(1.5, rel=2e-15)
    assert zcdp_gaussian_sigma(0.01, 7.0) == pytest.approx(7.0 / math.sqrt(0.02), rel=2e-15)
    assert zcdp_to_approx_dp(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * math.log(1e6)), rel=2e-12)
    assert laplace_scale(0.5, 3.0) == pytest.approx(6.0, rel=2e-15)
    assert laplace_scale(0.5, 3.0) >= 6.0


def _mp_conv_log_delta(mp, rho, eps, alpha):
    rho, eps, alpha = mp.mpf(rho), mp.mpf(eps), mp.mpf(alpha)
    return (alpha - 1) * (alpha * rho - eps) - mp.log(alpha - 1) + alpha * mp.log(1 - 1 / alpha)


def _mp_min_log_delta(mp, rho, eps):
    """Independent high-precision infimum over α of the CKS20 Cor. 13 bound (grid + golden section)."""
    f = lambda u: _mp_conv_log_delta(mp, rho, eps, 1 + mp.exp(u))  # noqa: E731
    grid = [mp.mpf(k) / 4 for k in range(-80, 120)]
    vals = [f(u) for u in grid]
    k = min(range(len(vals)), key=lambda i: vals[i])
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    invphi = (mp.sqrt(5) - 1) / 2
    c, d = b - invphi * (b - a), a + invphi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(120):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - invphi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + invphi * (b - a)
            fd = f(d)
    return min(fc, fd, vals[k])


def test_zcdp_conversion_against_exact_gaussian_and_simple_bound():
    # For the Gaussian mechanism with σ = Δ/√(2ρ): exact δ (Balle–Wang) ≤ CKS20 conversion δ, and
    # at ε = ρ + 2√(ρ ln 1/δ) the conversion gives at most δ (it is tighter than the simple one).
    for rho in [1e-4, 0.01, 0.5, 3.0]:
        sigma = 1.0 / math.sqrt(2 * rho)
        for eps in [0.1, 1.0, 4.0]:
            exact = gaussian_delta(eps, sigma, 1.0)
            conv = zcdp_delta(rho, eps)
            assert exact <= conv * (1 + 1e-9) + 1e-300
        for delta in [1e-3, 1e-8]:
            e_simple = zcdp_to_approx_dp(rho, delta)
            assert zcdp_delta(rho, e_simple) <= delta
            e_tight = zcdp_epsilon(rho, delta)
            assert e_tight < e_simple
            assert zcdp_delta(rho, e_tight) <= delta * (1 + 1e-9)
            assert zcdp_delta(rho, e_tight * (1 - 1e-6)) > delta


def test_zcdp_delta_against_mpmath_minimum():
    mp = pytest.importorskip("mpmath", reason="mpmath not installed (pip install mpmath)").mp
    mp.dps = 40
    for rho, eps in [(0.01, 0.5), (0.5, 3.0), (0.1, 0.05), (2.0, 20.0), (1e-3, 1.0)]:
        best = float(_mp_min_log_delta(mp, rho, eps))
        got = math.log(zcdp_delta(rho, eps))
        assert got >= best - 1e-12  # never claims better than the true infimum
        assert got <= best + 2e-9  # and attains it, up to the certified 1e-9 margin


@pytest.mark.parametrize("eps, delta", [(0.1, 1e-5), (1.0, 1e-6), (1.0, 1e-10), (5.0, 1e-9), (50.0, 1e-6)])
def test_discrete_gaussian_sigma(eps, delta):
    mp = pytest.importorskip("mpmath", reason="mpmath not installed (pip install mpmath)").mp
    mp.dps = 40
    sens = 2.5
    sigma = discrete_gaussian_sigma(eps, delta, sens)
    analytic = analytic_gaussian_sigma(eps, delta, sens)
    L = math.log(1 / delta)
    simple = sens / math.sqrt(2 * (math.sqrt(L + eps) - math.sqrt(L)) ** 2)
    assert analytic < sigma < simple
    assert sigma < 1.15 * analytic
    # Independent certificate: some α with the CKS20 Cor. 13 bound ≤ δ at ρ = Δ²/(2σ²).
    rho = (mp.mpf(sens) / mp.mpf(sigma)) ** 2 / 2
    assert _mp_min_log_delta(mp, rho, eps) <= mp.log(delta)
    # and it is the smallest such σ up to 1e-8 (relative)
    rho2 = (mp.mpf(sens) / (mp.mpf(sigma) * (1 - mp.mpf("1e-8")))) ** 2 / 2
    assert _mp_min_log_delta(mp, rho2, eps) > mp.log(delta)


def test_knorm():
    p = l2_ball_knorm(0.5, 2.0, 7)
    assert p.dim == 7 and p.gamma_shape == 7.0
    assert p.radius_scale == pytest.approx(4.0, rel=1e-15)
    assert p.expected_sq_norm == pytest.approx(7 * 8 * 16.0)
    assert knorm_expected_sq_norm(0.5, 2.0, 7) == pytest.approx(7 * 8 * 16.0)
    with pytest.raises(PrivacyError):
        l2_ball_knorm(1.0, 1.0, 0)


def test_knorm_sampler_moments():
    # Monte Carlo: E‖Z‖² = m(m+1)Δ²/ε² and isotropy (mean 0, equal coordinate variances).
    m, eps, sens = 5, 0.8, 1.5
    spec = calibrate(PureDP(eps), sensitivity_l2=sens, dim=m, family="l2_knorm")
    z = sample_float_noise(spec, (200_000, m), TestRandom(123))
    sq = (z**2).sum(axis=1)
    want = knorm_expected_sq_norm(eps, sens, m)
    se = sq.std() / math.sqrt(sq.size)
    assert abs(sq.mean() - want) < 5 * se
    assert np.all(np.abs(z.mean(axis=0)) < 5 * z.std(axis=0) / math.sqrt(z.shape[0]))
    cv = z.var(axis=0)
    assert cv.max() / cv.min() < 1.05
    # density ∝ exp(−ε‖z‖/Δ) ⇒ radius ~ Gamma(m, Δ/ε): mean radius m Δ/ε
    r = np.sqrt(sq)
    assert abs(r.mean() - m * sens / eps) < 5 * r.std() / math.sqrt(r.size)


# ------------------------------------------------------------------ discretisation


def test_discretized_sensitivity_formula():
    assert discretized_sensitivity(2.0, 16, 0.25, "l2") == pytest.approx(2.0 + 0.25 * 4, rel=1e-15)
    assert discretized_sensitivity(2.0, 16, 0.25, "l1") == pytest.approx(2.0 + 0.25 * 16, rel=1e-15)
    assert discretized_sensitivity(2.0, 16, 0.25, "l2") >= 3.0
    # no coordinate moves (a rounding-free strategy): the sensitivity itself, rounded up
    assert 1.0 <= discretized_sensitivity(1.0, 0, 0.1, "l2") <= 1.0 + 1e-14
    with pytest.raises(PrivacyError):
        discretized_sensitivity(1.0, -1, 0.1, "l2")
    with pytest.raises(PrivacyError):
        discretized_sensitivity(1.0, 3, 0.0, "l2")
    with pytest.raises(PrivacyError):
        discretized_sensitivity(1.0, 3, 0.1, "linf")


def test_discretized_sensitivity_holds_for_rounded_release():
    # Brute force: for random A, h and every add/remove neighbour, the rounded answers move by at
    # most the inflated sensitivity (and the inflation is needed: plain Δ is exceeded).
    rng = np.random.default_rng(99)
    exceeded_plain = False
    for _trial in range(30):
        m, N = rng.integers(2, 9), rng.integers(2, 9)
        A = rng.standard_normal((m, N))
        grid = float(rng.choice([0.05, 0.3, 1.0, 2.0]))
        h = rng.integers(0, 20, size=N).astype(float)
        d2 = add_remove_sensitivity(A, "l2").value
        d1 = add_remove_sensitivity(A, "l1").value
        k = np.rint(A @ h / grid)
        for x in range(N):
            for sgn in (1, -1):
                h2 = h.copy()
                h2[x] += sgn
                k2 = np.rint(A @ h2 / grid)
                diff = grid * (k - k2)
                assert np.linalg.norm(diff) <= discretized_sensitivity(d2, m, grid, "l2")
                assert np.abs(diff).sum() <= discretized_sensitivity(d1, m, grid, "l1")
                exceeded_plain |= np.linalg.norm(diff) > d2 * (1 + 1e-12)
    assert exceeded_plain


# ------------------------------------------------------------------ calibrate / NoiseSpec


def test_calibrate_choices():
    g = ApproxDP(1.0, 1e-6)
    s = calibrate(g, 2.0, 5.0)
    assert (s.family, s.sampler, s.grid, s.sensitivity_norm) == ("gaussian", "float", None, "l2")
    assert s.scale == analytic_gaussian_sigma(1.0, 1e-6, 2.0)
    assert s.relation is Neighbouring.ADD_REMOVE

    s = calibrate(g, 2.0, 5.0, grid=2.0 ** -7, dim=100)
    assert (s.family, s.sampler, s.grid, s.dim) == ("gaussian", "discrete_gaussian", 2.0 ** -7, 100)
    assert s.sensitivity == pytest.approx(2.0 + 2.0 ** -7 * 10, rel=1e-14)
    assert s.sensitivity >= 2.0 + 2.0 ** -7 * 10
    assert s.base_sensitivity == 2.0
    assert s.scale == discrete_gaussian_sigma(1.0, 1e-6, s.sensitivity)

    s = calibrate(ZCDP(0.5), 2.0)
    assert s.scale == pytest.approx(2.0) and s.sampler == "float"
    s = calibrate(ZCDP(0.5), 2.0, grid=0.5, dim=4)
    assert s.scale == pytest.approx(3.0) and s.sampler == "discrete_gaussian"

    s = calibrate(PureDP(0.5), sensitivity_l1=3.0)
    assert (s.family, s.sampler, s.sensitivity_norm) == ("laplace", "float", "l1")
    assert s.scale == pytest.approx(6.0)
    s = calibrate(PureDP(0.5), sensitivity_l1=3.0, grid=0.125, dim=8)
    assert s.sampler == "discrete_laplace" and s.scale == pytest.approx((3.0 + 1.0) / 0.5)

    s = calibrate(PureDP(0.5), sensitivity_l2=3.0, dim=4, family="l2_knorm")
    assert s.family == "l2_knorm" and s.scale == pytest.approx(6.0)
    assert s.variance_bound == pytest.approx(5 * 36.0)


def test_calibrate_with_sensitivity_objects():
    s2 = Sensitivity(2.0, "l2", Neighbouring.REPLACE, True)
    s1 = Sensitivity(4.0, "l1", Neighbouring.REPLACE, False)
    spec = calibrate(ApproxDP(1, 1e-6), s2, s1)
    assert spec.relation is Neighbouring.REPLACE
    with pytest.raises(PrivacyError, match="disagree"):
        calibrate(ApproxDP(1, 1e-6), s2, Sensitivity(4.0, "l1", Neighbouring.ADD_REMOVE, True))
    with pytest.raises(PrivacyError, match="l1 sensitivity"):
        calibrate(ApproxDP(1, 1e-6), s1)
    with pytest.raises(PrivacyError, match="disagree"):
        calibrate(ApproxDP(1, 1e-6), s2, relation="add_remove")


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(guarantee=ApproxDP(1, 1e-6), sensitivity_l2=1.0, grid=0.125), "needs dim"),
        (dict(guarantee=ApproxDP(1, 1e-6), sensitivity_l1=1.0), "needs sensitivity_l2"),
        (dict(guarantee=PureDP(1), sensitivity_l2=1.0), "needs sensitivity_l1"),
        (dict(guarantee=ApproxDP(1, 1e-6), sensitivity_l2=0.0), "no noise is needed"),
        (dict(guarantee=PureDP(1), sensitivity_l2=1.0, dim=3, family="l2_knorm", grid=0.125), "K-norm"),
        (dict(guarantee=PureDP(1), sensitivity_l1=1.0, family="gaussian"), "cannot give pure DP"),
        (dict(guarantee=ZCDP(1), sensitivity_l2=1.0, family="laplace"), "not supported"),
        (dict(guarantee="epsilon=1", sensitivity_l2=1.0), "guarantee must be"),
        (dict(guarantee=ApproxDP(1, 1e-6), sensitivity_l2=-1.0), ">= 0"),
    ],
)
def test_calibrate_errors(kwargs, fragment):
    with pytest.raises(PrivacyError, match=fragment):
        calibrate(**kwargs)


def test_noise_spec_round_trip_and_validation():
    specs = [
        calibrate(ApproxDP(1, 1e-6), 2.0, 5.0),
        calibrate(ApproxDP(0.3, 1e-9), 2.0, 5.0, grid=2.0 ** -7, dim=50, relation="replace"),
        calibrate(ZCDP(0.1), 2.0),
        calibrate(PureDP(2), sensitivity_l1=1.0, grid=1.0, dim=3),
        calibrate(PureDP(2), sensitivity_l2=1.0, dim=3, family="l2_knorm"),
    ]
    for s in specs:
        assert NoiseSpec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    base = specs[1].to_dict()
    for change, fragment in [
        ({"family": "cauchy"}, "family"),
        ({"sampler": "urandom"}, "sampler"),
        ({"scale": 0.0}, "scale"),
        ({"grid": None}, "grid"),
        ({"dim": None}, "dim"),
        ({"sensitivity_norm": "l1"}, "l2 sensitivity"),
        ({"sampler": "discrete_laplace"}, "requires family"),
        ({"sampler": "float"}, "no grid"),
    ]:
        with pytest.raises(PrivacyError, match=fragment):
            NoiseSpec.from_dict({**base, **change})
    with pytest.raises(PrivacyError, match="missing"):
        NoiseSpec.from_dict({"family": "gaussian"})
    with pytest.raises(PrivacyError, match="unexpected"):
        NoiseSpec.from_dict({**base, "colour": "red"})
