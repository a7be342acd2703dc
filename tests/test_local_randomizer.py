"""Client randomizers of the local model (factorize.kinds.local.randomizer).

Independent truth: closed forms (m = 1 randomized response, m = 2, 3), quadrature of the sphere
marginal, mpmath, an exact output density written here from the mechanism's definition (not the
module's), and Monte Carlo with stated tolerances: a sample mean is accepted within 5 standard
errors computed from the KNOWN variance (Var Y_i = B²/m − a_i²; E Y_i⁴ = 3B⁴/(m(m+2))), so a
single check fails by chance with probability < 6e-7; all rngs are seeded TestRandoms, so the
run is deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special, stats

from factorize.kinds.local.randomizer import (
    NORM_TOLERANCE,
    UNIT_BALL_DIAMETER,
    GaussianLocalRandomizer,
    L2Randomizer,
    hemisphere_threshold,
    l2_scale,
    sphere_mean_abs,
    strategy_diameter,
)
from factorize.privacy import SecureRandom, TestRandom, analytic_gaussian_sigma

Z = 5.0  # standard errors allowed in every Monte Carlo comparison


def coth_half(eps: float) -> float:
    return (math.exp(eps) + 1.0) / (math.exp(eps) - 1.0)


def unit(m: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(m)
    return v / np.linalg.norm(v)


def inputs_for(m: int) -> list[np.ndarray]:
    """a = 0, a unit basis vector, a random unit vector, ‖a‖ = 0.3, ‖a‖ = 1 − 1e-9."""
    e1 = np.zeros(m)
    e1[0] = 1.0
    return [np.zeros(m), e1, unit(m, 1), 0.3 * unit(m, 2), (1 - 1e-9) * unit(m, 3)]


# ============================================================================================
# the scale B


@pytest.mark.parametrize("eps", [0.05, 0.5, 1.0, 2.0, 5.0])
def test_scale_m1_is_randomized_response(eps):
    assert L2Randomizer(eps, 1).scale == pytest.approx(coth_half(eps), rel=1e-13)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_scale_closed_forms_m2_m3(eps):
    # c_2 = E|cos φ| = 2/π, c_3 = E|t| for t uniform on [−1, 1] (Archimedes) = 1/2
    assert l2_scale(eps, 2) == pytest.approx(coth_half(eps) * math.pi / 2, rel=1e-13)
    assert l2_scale(eps, 3) == pytest.approx(coth_half(eps) * 2.0, rel=1e-13)


@pytest.mark.parametrize("m", [2, 3, 4, 5, 7, 10, 20, 50])
def test_scale_against_quadrature(m):
    # c_m = ∫|t|(1−t²)^{(m−3)/2} / ∫(1−t²)^{(m−3)/2} over [−1, 1], by quad with the algebraic weight
    w = (m - 3) / 2.0
    # weight "alg" supplies (1−t)^w on [0, 1]; the factor (1+t)^w is in the integrand
    num = integrate.quad(lambda t: t * (1 + t) ** w, 0.0, 1.0, weight="alg", wvar=(0.0, w),
                         epsabs=0, epsrel=1e-13)[0]
    den = integrate.quad(lambda t: (1 + t) ** w, 0.0, 1.0, weight="alg", wvar=(0.0, w),
                         epsabs=0, epsrel=1e-13)[0]
    c = num / den
    assert sphere_mean_abs(m) == pytest.approx(c, rel=1e-10)
    assert l2_scale(0.7, m) == pytest.approx(coth_half(0.7) / c, rel=1e-10)


@pytest.mark.parametrize("m", [2, 5, 50])
def test_scale_against_monte_carlo(m):
    # c_m = E|Z_1|, Z uniform on the sphere (independent sampler: numpy normals, normalised)
    g = np.random.default_rng(100 + m).standard_normal((400_000, m))
    t = np.abs(g[:, 0]) / np.linalg.norm(g, axis=1)
    se = t.std() / math.sqrt(t.size)
    assert abs(t.mean() - sphere_mean_abs(m)) <= Z * se


def test_scale_large_m_against_mpmath():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for m in [1, 2, 17, 63, 64, 65, 1000, 99_999, 100_000, 10**7]:
        half = mpmath.mpf(m) / 2
        exact = mpmath.gamma(half) / (mpmath.sqrt(mpmath.pi) * mpmath.gamma(half + 0.5))
        assert sphere_mean_abs(m) == pytest.approx(float(exact), rel=2e-14), m
    # B/√m increases to coth(ε/2)·√(π/2) (Γ((m+1)/2)/Γ(m/2) ≤ √(m/2))
    lim = coth_half(1.0) * math.sqrt(math.pi / 2)
    vals = [l2_scale(1.0, m) / math.sqrt(m) for m in [10, 100, 10**4, 10**5]]
    assert all(v < lim for v in vals) and vals == sorted(vals)
    assert vals[-1] == pytest.approx(lim, rel=1e-5)


def test_hemisphere_threshold_certified():
    # p' = K/2⁵³ never exceeds e^ε/(e^ε+1): checked with exact rationals against mpmath's e^ε
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60
    for eps in [1e-12, 1e-3, 0.1, 1.0, 2.5, 10.0, 30.0, 40.0, 1e3]:
        k = hemisphere_threshold(eps)
        assert 2**52 < k < 2**53
        assert mpmath.mpf(k) / (2**53 - k) <= mpmath.exp(mpmath.mpf(eps))
        r = L2Randomizer(eps, 3)
        assert r.effective_epsilon <= eps
        if eps <= 10:
            assert r.effective_epsilon == pytest.approx(eps, rel=1e-9)
    with pytest.raises(ValueError):
        L2Randomizer(1e-17, 3)


# ============================================================================================
# norm, unbiasedness, covariance


@pytest.mark.parametrize("m", [1, 2, 5, 50])
def test_norm_is_B(m):
    r = L2Randomizer(1.3, m)
    for a in inputs_for(m):
        Y = r.randomize_batch(np.tile(a, (500, 1)), TestRandom(7))
        np.testing.assert_allclose(np.linalg.norm(Y, axis=1), r.scale, rtol=1e-13)
        assert np.linalg.norm(r.randomize(a, TestRandom(8))) == pytest.approx(r.scale, rel=1e-13)


@pytest.mark.parametrize("eps", [0.5, 2.0])
@pytest.mark.parametrize("m", [1, 2, 5, 50])
def test_unbiased_and_second_moments(m, eps):
    r = L2Randomizer(eps, m)
    B, n = r.scale, 200_000
    for j, a in enumerate(inputs_for(m)):
        Y = r.randomize_batch(np.tile(a, (n, 1)), TestRandom(1000 * m + j))
        var = B**2 / m - a**2  # exact per-coordinate variance
        se = np.sqrt(var / n)
        assert np.all(np.abs(Y.mean(axis=0) - a) <= Z * se + 1e-12), (m, j)
        # E[Y_i²] = B²/m for every input; Var(Y_i²) = B⁴(3/(m(m+2)) − 1/m²)
        sd2 = B**2 * math.sqrt(max(3.0 / (m * (m + 2)) - 1.0 / m**2, 0.0) / n)
        assert np.all(np.abs((Y**2).mean(axis=0) - B**2 / m) <= Z * sd2 + 1e-9 * B**2)
        assert r.noise_covariance_trace(a) == pytest.approx(B**2 - a @ a, rel=1e-14)
        np.testing.assert_allclose(np.diag(r.noise_covariance(a)), var, rtol=1e-14)
    assert r.coordinate_variance_bound == pytest.approx(B**2 / m)


# ============================================================================================
# privacy: the exact output density


def exact_density(z: np.ndarray, a: np.ndarray, eps: float) -> np.ndarray:
    """Density of Y/B at unit directions z (rows) w.r.t. the uniform law on the sphere, from the
    mechanism's definition: mixture over ã = ±a/‖a‖ (P(+) = ½ + ‖a‖/2) of hemisphere-uniform
    laws (density 2p on {⟨z,ã⟩ > 0}, 2(1−p) on the other side), p = e^ε/(e^ε+1)."""
    p = math.exp(eps) / (math.exp(eps) + 1.0)
    r = float(np.linalg.norm(a))
    u = a / r if r > 0 else np.eye(a.size)[0]
    q = 0.5 + r / 2
    dens = np.zeros(z.shape[0])
    for at, w in ((u, q), (-u, 1.0 - q)):
        s = z @ at
        assert np.all(s != 0.0)  # grids avoid the boundary (a null set for m ≥ 2)
        dens += w * np.where(s > 0, 2 * p, 2 * (1 - p))
    return dens


def direction_grid(m: int) -> np.ndarray:
    if m == 1:
        return np.array([[1.0], [-1.0]])
    if m == 2:
        phi = (np.arange(720) + 0.37) * (2 * math.pi / 720)
        return np.stack([np.cos(phi), np.sin(phi)], axis=1)
    k = np.arange(3000) + 0.5  # Fibonacci sphere
    zc = 1 - 2 * k / 3000
    th = math.pi * (1 + math.sqrt(5)) * k
    rr = np.sqrt(1 - zc**2)
    return np.stack([rr * np.cos(th), rr * np.sin(th), zc], axis=1)


def privacy_inputs(m: int) -> list[np.ndarray]:
    g = np.random.default_rng(42 + m)
    out = [np.zeros(m), unit(m, 5), -unit(m, 5)]
    for _ in range(25):
        v = g.standard_normal(m)
        out.append(v / np.linalg.norm(v) * g.uniform(0, 1) ** (1 / m))
    out.append(unit(m, 6))
    return out


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("m", [1, 2, 3])
def test_exact_density_ratio_bounded_and_tight(m, eps):
    z = direction_grid(m)
    ins = privacy_inputs(m)
    D = np.array([exact_density(z, a, eps) for a in ins])
    assert np.all(D > 0)
    ratio = D.max(axis=0) / D.min(axis=0)
    assert ratio.max() <= math.exp(eps) + 1e-12
    # tight: antipodal unit inputs attain e^ε (every z off the boundary)
    tight = D[1] / D[2]
    assert np.max(tight) == pytest.approx(math.exp(eps), rel=1e-12)
    # a = 0 gives the uniform law
    np.testing.assert_allclose(D[0], 1.0, rtol=1e-14)
    # the module's density and ratio bound agree with the definition (p' differs by ~1e-16)
    r = L2Randomizer(eps, m)
    for a, d in zip(ins, D, strict=True):
        np.testing.assert_allclose(r.output_density(z * r.scale, a), d, rtol=1e-12)
    assert math.exp(eps) * (1 - 1e-12) <= r.density_ratio_bound() <= math.exp(eps) + 1e-12


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_sampler_matches_exact_density_m1(eps):
    r, n = L2Randomizer(eps, 1), 200_000
    for j, a in enumerate([1.0, -1.0, 0.4, 0.0, -0.75]):
        Y = r.randomize_batch(np.full((n, 1), a), TestRandom(300 + j))
        pplus = exact_density(np.array([[1.0]]), np.array([a]), eps)[0] / 2  # weight ½ per point
        assert set(np.unique(Y)) <= {r.scale, -r.scale}
        f = float(np.mean(Y > 0))
        assert abs(f - pplus) <= Z * math.sqrt(pplus * (1 - pplus) / n)


@pytest.mark.parametrize("m", [2, 3])
def test_sampler_matches_exact_density_histogram(m):
    """m = 2: the angle to u in 16 bins (edges include ±π/2); m = 3: t = ⟨Y/B, u⟩ in 10 bins
    (uniform on [−1, 1] for the uniform law, Archimedes). Bin probabilities from exact_density."""
    eps, n = 1.0, 200_000
    r = L2Randomizer(eps, m)
    for j, a in enumerate([np.zeros(m), unit(m, 9), 0.5 * unit(m, 10)]):
        Y = r.randomize_batch(np.tile(a, (n, 1)), TestRandom(400 + 10 * m + j)) / r.scale
        u = a / np.linalg.norm(a) if np.linalg.norm(a) > 0 else np.eye(m)[0]
        if m == 2:
            v = np.array([-u[1], u[0]])
            stat = np.arctan2(Y @ v, Y @ u)
            edges = np.linspace(-math.pi, math.pi, 17)
            mids = 0.5 * (edges[1:] + edges[:-1])
            probe = np.outer(np.cos(mids), u) + np.outer(np.sin(mids), v)
        else:
            stat = Y @ u
            edges = np.linspace(-1.0, 1.0, 11)
            mids = 0.5 * (edges[1:] + edges[:-1])
            w = np.cross(u, [0.3, 0.4, 0.5])
            w /= np.linalg.norm(w)
            probe = np.outer(mids, u) + np.outer(np.sqrt(1 - mids**2), w)
        probs = exact_density(probe, a, eps) / (edges.size - 1)  # density constant on each bin
        assert probs.sum() == pytest.approx(1.0)
        counts = np.histogram(stat, bins=edges)[0]
        assert np.all(np.abs(counts / n - probs) <= Z * np.sqrt(probs * (1 - probs) / n)), (m, j)


# ============================================================================================
# subgaussian constant (exact 1-D integrals)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 50])
@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
def test_subgaussian_constant(m, eps):
    """E exp(⟨θ, Y−a⟩²/σ²) ≤ 2 for θ = u (hemisphere-weighted marginal) and θ ⊥ u (uniform
    marginal), a ∈ {0, u, ½u}; t = ⟨θ, Y/B⟩ has density ∝ (1−t²)^{(m−3)/2} under the uniform law."""
    r = L2Randomizer(eps, m)
    B, s = r.scale, r.subgaussian_constant()
    assert s <= min(math.sqrt(3.6) * B / math.sqrt(m) + 1 / math.sqrt(math.log(2)),
                    (B + 1) / math.sqrt(math.log(2))) + 1e-12
    w = (m - 3) / 2.0
    norm = special.beta(0.5, (m - 1) / 2)  # ∫_{−1}^{1} (1−t²)^w dt

    def half(sign, shift):
        # ∫_0^1 exp((sign·B·t − shift)²/s²) (1−t)^w (1+t)^w dt / norm
        f = lambda t: math.exp((sign * B * t - shift) ** 2 / s**2) * (1 + t) ** w
        return integrate.quad(f, 0.0, 1.0, weight="alg", wvar=(0.0, w), epsrel=1e-10)[0] / norm

    for rad in (0.0, 1.0, 0.5):
        p = math.exp(eps) / (math.exp(eps) + 1)
        q = 0.5 + rad / 2
        pi = q * p + (1 - q) * (1 - p)
        if m == 1:
            val = pi * math.exp((B - rad) ** 2 / s**2) + (1 - pi) * math.exp((B + rad) ** 2 / s**2)
            assert val <= 2.0
            continue
        along = 2 * pi * half(1, rad) + 2 * (1 - pi) * half(-1, rad)  # θ = u, ⟨θ,a⟩ = ‖a‖
        perp = half(1, 0.0) + half(-1, 0.0)  # θ ⊥ u
        assert along <= 2.0 and perp <= 2.0, (along, perp)


# ============================================================================================
# batch vs single, rng handling


def test_batch_and_single_agree_in_distribution():
    m, n, eps = 5, 4000, 1.0
    r = L2Randomizer(eps, m)
    a = 0.7 * unit(m, 11)
    rng = TestRandom(21)
    single = np.array([r.randomize(a, rng) for _ in range(n)])
    batch = r.randomize_batch(np.tile(a, (n, 1)), TestRandom(22))
    var = r.scale**2 / m - a**2
    assert np.all(np.abs(single.mean(0) - batch.mean(0)) <= Z * np.sqrt(2 * var / n))
    u = a / np.linalg.norm(a)
    f1, f2 = np.mean(single @ u > 0), np.mean(batch @ u > 0)
    pool = 0.5 * (f1 + f2)
    assert abs(f1 - f2) <= Z * math.sqrt(2 * pool * (1 - pool) / n)

    g = GaussianLocalRandomizer(eps, 1e-6, m)
    single = np.array([g.randomize(a, rng) for _ in range(n)])
    batch = g.randomize_batch(np.tile(a, (n, 1)), TestRandom(23))
    assert np.all(np.abs(single.mean(0) - batch.mean(0)) <= Z * g.sigma * math.sqrt(2 / n))


def test_rng_reproducible_and_secure_default():
    r = L2Randomizer(1.0, 4)
    A = np.tile(0.5 * unit(4, 3), (10, 1))
    np.testing.assert_array_equal(r.randomize_batch(A, TestRandom(5)),
                                  r.randomize_batch(A, TestRandom(5)))
    for rng in (None, SecureRandom()):
        Y = r.randomize_batch(A, rng)
        np.testing.assert_allclose(np.linalg.norm(Y, axis=1), r.scale, rtol=1e-13)
        assert GaussianLocalRandomizer(1.0, 1e-6, 4).randomize(A[0], rng).shape == (4,)
    with pytest.raises(TypeError):
        r.randomize(A[0], np.random.default_rng(0))
    assert r.randomize_batch(np.zeros((0, 4)), TestRandom(1)).shape == (0, 4)


# ============================================================================================
# Gaussian randomizer


def test_gaussian_sigma_is_project_calibration():
    g = GaussianLocalRandomizer(0.8, 1e-7, 12)
    # the accepted inputs' diameter: 2(1 + 2·NORM_TOLERANCE), rounded up
    assert g.sigma == analytic_gaussian_sigma(0.8, 1e-7, UNIT_BALL_DIAMETER) and g.scale == g.sigma
    assert UNIT_BALL_DIAMETER > 2.0 * (1 + 2e-12)
    assert g.noise_covariance_trace() == pytest.approx(12 * g.sigma**2)
    g15 = GaussianLocalRandomizer(0.8, 1e-7, 12, sensitivity=1.5)
    assert g15.sigma == analytic_gaussian_sigma(0.8, 1e-7, 1.5)


def test_gaussian_from_strategy_uses_exact_diameter():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 40))
    A /= np.linalg.norm(A, axis=0).max()
    brute = max(np.linalg.norm(A[:, i] - A[:, j]) for i in range(40) for j in range(40))
    d = strategy_diameter(A)
    assert brute <= d <= brute * (1 + 1e-12)
    g = GaussianLocalRandomizer.from_strategy(1.0, 1e-6, A)
    assert g.sensitivity == d and g.sigma == analytic_gaussian_sigma(1.0, 1e-6, d)
    # identity columns: diameter √2 exactly (up to the rounding margin)
    assert strategy_diameter(np.eye(5)) == pytest.approx(math.sqrt(2), rel=1e-14)
    assert strategy_diameter(np.eye(5)) >= math.sqrt(2)
    with pytest.raises(ValueError):
        GaussianLocalRandomizer.from_strategy(1.0, 1e-6, 2 * np.eye(3))  # columns outside the ball
    with pytest.raises(ValueError):
        GaussianLocalRandomizer.from_strategy(1.0, 1e-6, np.zeros((3, 4)))


def test_gaussian_unbiased_variance_and_normal():
    m, n = 5, 100_000
    g = GaussianLocalRandomizer(1.0, 1e-6, m)
    for j, a in enumerate([np.zeros(m), unit(m, 4), 0.3 * unit(m, 5)]):
        Y = g.randomize_batch(np.tile(a, (n, 1)), TestRandom(600 + j))
        s2 = g.sigma**2
        assert np.all(np.abs(Y.mean(0) - a) <= Z * g.sigma / math.sqrt(n))
        assert np.all(np.abs(Y.var(0) - s2) <= Z * s2 * math.sqrt(2 / n))
    z = ((Y - a) / g.sigma).ravel()
    assert stats.kstest(z, "norm").pvalue > 1e-4


# ============================================================================================
# bad input


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), True, "1", None])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError):
        L2Randomizer(eps, 3)
    with pytest.raises(ValueError):
        GaussianLocalRandomizer(eps, 1e-6, 3)


@pytest.mark.parametrize("dim", [0, -2, 2.5, True, "3"])
def test_bad_dim(dim):
    with pytest.raises(ValueError):
        L2Randomizer(1.0, dim)
    with pytest.raises(ValueError):
        GaussianLocalRandomizer(1.0, 1e-6, dim)


@pytest.mark.parametrize("delta", [0.0, 1.0, -1e-6, float("nan")])
def test_bad_delta_and_sensitivity(delta):
    with pytest.raises(ValueError):
        GaussianLocalRandomizer(1.0, delta, 3)
    with pytest.raises(ValueError):
        GaussianLocalRandomizer(1.0, 1e-6, 3, sensitivity=0.0)


def test_bad_inputs():
    m = 4
    rz = [L2Randomizer(1.0, m), GaussianLocalRandomizer(1.0, 1e-6, m)]
    u = unit(m, 1)
    for r in rz:
        r.randomize(u * (1 + 0.5 * NORM_TOLERANCE), TestRandom(0))  # within tolerance: accepted
        for bad in [u * (1 + 1e-9), u * 2, np.r_[u, 0.0], u[:3], u.reshape(m, 1),
                    np.full(m, np.nan), np.r_[np.inf, 0, 0, 0]]:
            with pytest.raises(ValueError):
                r.randomize(bad, TestRandom(0))
        with pytest.raises(ValueError):
            r.randomize_batch(np.tile(u, (3, 1))[:, :3], TestRandom(0))  # wrong width
        with pytest.raises(ValueError):
            r.randomize_batch(u, TestRandom(0))  # 1-D batch
        with pytest.raises(ValueError):
            r.randomize_batch(np.vstack([u, 1.01 * u]), TestRandom(0))
    with pytest.raises(ValueError):
        rz[0].output_density(np.ones((2, m + 1)), u)
    with pytest.raises(ValueError):
        rz[0].noise_covariance_trace(2 * u)


def test_log_gamma_half_ratio_against_mpmath():
    """The ℓ2 randomizer's Γ ratio (math.lgamma below m = 64, the asymptotic series above)
    within 2e-14 relative of a 50-digit evaluation, for every m up to 200."""
    mpmath = pytest.importorskip("mpmath")
    from factorize.kinds.local.randomizer import _log_gamma_half_ratio

    mpmath.mp.dps = 50
    for m in range(1, 201):
        want = mpmath.loggamma(mpmath.mpf(m + 1) / 2) - mpmath.loggamma(mpmath.mpf(m) / 2)
        assert abs(_log_gamma_half_ratio(m) - float(want)) <= 2e-14 * abs(float(want)), m
