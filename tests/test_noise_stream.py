"""The noise stream and continual counting (factorize.training.stream / continual): outputs
equal the dense C⁻¹z for the same z, the covariance is C⁻¹C⁻ᵀ ⊗ I (Monte Carlo over the d
independent coordinates), the state is O(b·d), the sampler's moments and law, test-mode
reproducibility and labels, and one ledger charge per run."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from factorize.privacy.guarantees import ZCDP, ApproxDP, PrivacyError
from factorize.privacy.participation import Participation
from factorize.training.banded import sqrt_coefficients
from factorize.training.continual import ContinualCounter
from factorize.training.stream import (
    CorrelatedNoise,
    StreamRandom,
    calibrate_sigma,
    noise_stream,
    open_private_stream,
)
from factorize.training.toeplitz import (
    BLT,
    BandedToeplitz,
    LongStrategy,
    certified_sensitivity,
    dense_strategy,
)

STRATEGIES: list[LongStrategy] = [BandedToeplitz(np.array([1.2, -0.3, 0.5, 0.1]), 48),
              BandedToeplitz(sqrt_coefficients(6), 48),
              BandedToeplitz(np.array([2.0]), 48),
              BLT(np.array([0.9, 0.5]), np.array([0.3, 0.1]), 48),
              BLT(np.array([0.99, -0.4, 0.7]), np.array([-0.2, 0.5, 0.3]), 48)]


def _steps(rng: StreamRandom, n: int, d: int) -> np.ndarray:
    Z = np.empty((n, d))
    for t in range(n):
        rng.normals(t, Z[t])
    return Z


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: f"{s.kind}")
def test_stream_equals_dense_solve(strategy: BandedToeplitz | BLT) -> None:
    """Step t's output is (C⁻¹Z)_t for the dense C and the same Z (abs 1e-12), σ applied."""
    n, d = strategy.n, 7
    out = np.array([np.asarray(x) for x in noise_stream(strategy, d, StreamRandom.seeded(5), sigma=2.5)])
    Z = _steps(StreamRandom.seeded(5), n, d)
    ref = 2.5 * np.linalg.solve(dense_strategy(strategy), Z)
    assert out.shape == (n, d)
    assert np.abs(out - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("strategy", [STRATEGIES[0], STRATEGIES[4]], ids=["banded", "blt"])
def test_stream_covariance_monte_carlo(strategy: BandedToeplitz | BLT) -> None:
    """The d coordinates are independent replicas: the empirical covariance over d = 60,000 of
    the first 12 steps equals C⁻¹C⁻ᵀ entrywise within 5 standard errors
    (se_ij = √((Σ_ii Σ_jj + Σ_ij²)/d))."""
    n, d = 12, 60_000
    s = type(strategy)(**{k: v for k, v in vars(strategy).items() if k != "n"}, n=n)
    X = np.array([np.asarray(x) for x in noise_stream(s, d, StreamRandom.seeded(11))])
    emp = X @ X.T / d
    Ci = np.linalg.inv(dense_strategy(s))
    cov = Ci @ Ci.T
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / d)
    assert np.all(np.abs(emp - cov) <= 5 * se)


def test_state_is_bands_times_d() -> None:
    d = 1000
    assert CorrelatedNoise(BandedToeplitz(np.ones(16), 100), d).state_nbytes == 15 * d * 8
    assert CorrelatedNoise(BLT(np.array([0.9, 0.5, 0.1]), np.ones(3), 100), d).state_nbytes == 3 * d * 8
    st = noise_stream(BLT(np.array([0.9]), np.ones(1), 10 ** 6), 10 ** 5, StreamRandom.seeded(0))
    next(st)
    assert st.state_nbytes == 8 * 10 ** 5  # n = 10⁶ steps, one buffer: one vector of state


def test_sampler_law() -> None:
    """10⁶ draws: mean, variance, kurtosis within 5 standard errors; Kolmogorov–Smirnov
    p > 1e-4 (fixed seed, deterministic); two steps and two halves of a step uncorrelated."""
    m = 1_000_000
    z = np.empty(m + 1)
    StreamRandom.seeded(2).normals(0, z)
    assert abs(z.mean()) <= 5 / np.sqrt(m)
    assert abs(z.var() - 1) <= 5 * np.sqrt(2 / m)
    assert abs(stats.kurtosis(z)) <= 5 * np.sqrt(24 / m)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    w = np.empty(m + 1)
    StreamRandom.seeded(2).normals(1, w)
    assert abs(np.corrcoef(z, w)[0, 1]) <= 5 / np.sqrt(m)
    h = m // 2
    assert abs(np.corrcoef(z[:h], z[h:2 * h])[0, 1]) <= 5 / np.sqrt(h)


def test_sampler_shapes_and_chunks() -> None:
    """Odd sizes and sizes across the chunk boundary fill every entry with finite values."""
    for d in (1, 2, 3, 7, (1 << 18) + 3):
        z = np.full(d, np.nan)
        StreamRandom.seeded(1).normals(3, z)
        assert np.all(np.isfinite(z))


def test_test_mode_reproducible_and_labelled() -> None:
    s = STRATEGIES[3]
    a = [x for x in noise_stream(s, 5, StreamRandom.seeded(9))]
    b = [x for x in noise_stream(s, 5, StreamRandom.seeded(9))]
    c = [x for x in noise_stream(s, 5, StreamRandom.seeded(10))]
    assert all(np.array_equal(x.noise, y.noise) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].noise, c[0].noise)
    assert all(x.test_mode and "TEST MODE" in x.label and "seed=9" in x.label for x in a)
    prod = next(noise_stream(s, 5))
    assert not prod.test_mode and "TEST MODE" not in prod.label
    assert not np.array_equal(next(noise_stream(s, 5)).noise, prod.noise)  # fresh OS key


def test_stream_ends_after_n_steps_and_exports() -> None:
    st = noise_stream(BLT(np.array([0.5]), np.array([0.2]), 3), 4, StreamRandom.seeded(0))
    steps = list(st)
    assert [x.t for x in steps] == [0, 1, 2]
    assert np.asarray(steps[0]) is steps[0].noise
    assert np.from_dlpack(steps[0]).shape == (4,)  # what torch / jax from_dlpack read


def test_rng_must_be_stream_random() -> None:
    with pytest.raises(PrivacyError):
        noise_stream(STRATEGIES[0], 3, np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(PrivacyError):
        StreamRandom(b"0" * 32, test_seed=None)
    import copy

    with pytest.raises(PrivacyError):  # a secret key is never serialised
        copy.deepcopy(StreamRandom.secure())


def test_calibration() -> None:
    from factorize.privacy.gaussian import gaussian_approx_dp_holds

    assert calibrate_sigma(ZCDP(0.5), 2.0) >= 2.0
    sig = calibrate_sigma(ApproxDP(1.0, 1e-6), 3.0)
    assert gaussian_approx_dp_holds(1.0, 1e-6, sig, 3.0, discrete=False)


def test_private_run_charges_once(tmp_path) -> None:
    """One charge for the whole run, before any noise, naming the run record's SHA-256; σ is
    calibrated to the certified sensitivity under the participation; a test-mode stream is
    refused with a ledger."""
    from factorize.ledger import Ledger

    L = tmp_path / "L.db"
    book = Ledger.create(L)
    book.create_dataset("users", {"type": "zcdp", "rho": 1.0})
    s = BandedToeplitz(sqrt_coefficients(8), 64)
    p = Participation.parse("k=4,min_sep=8")
    run = open_private_stream(s, 10, guarantee=ZCDP(0.25), participation=p, ledger=L, dataset="users")
    assert run.sensitivity == certified_sensitivity(s, p)
    assert run.sigma >= run.sensitivity.value / np.sqrt(0.5)
    hist = Ledger.open(L).history("users")
    assert len(hist) == 1 and hist[0]["plan_sha256"] == run.record_sha256
    for _ in run.stream:
        pass
    assert len(Ledger.open(L).history("users")) == 1
    with pytest.raises(PrivacyError):
        open_private_stream(s, 10, guarantee=ZCDP(0.25), participation=p, ledger=L, dataset="users",
                            rng=StreamRandom.seeded(0))


def test_continual_counter(tmp_path) -> None:
    """Prefix sums: the release minus the true prefix sum is σ·(L C⁻¹ z)_t (same z, test
    mode); one charge for the stream; refused past n."""
    from factorize.ledger import Ledger

    n = 20
    s = BLT(np.array([0.9, 0.5]), np.array([0.3, 0.1]), n)
    counts = np.arange(n, dtype=float) % 3
    ctr = ContinualCounter(s, guarantee=ZCDP(1.0), rng=StreamRandom.seeded(4))
    out = np.array([ctr.release([x]).value[0] for x in counts])
    Z = _steps(StreamRandom.seeded(4), n, 1)[:, 0]
    expect = np.cumsum(counts) + ctr.run.sigma * np.cumsum(np.linalg.solve(dense_strategy(s), Z))
    assert np.abs(out - expect).max() <= 1e-11
    with pytest.raises(PrivacyError):
        ctr.release([1.0])
    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("c", {"type": "zcdp", "rho": 1.0})
    ctr2 = ContinualCounter(s, guarantee=ZCDP(0.5), ledger=L, dataset="c")
    rel = [ctr2.release([1.0]) for _ in range(n)]
    assert "TEST MODE" not in rel[-1].label
    assert len(Ledger.open(L).history("c")) == 1
