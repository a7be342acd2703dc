"""JL mechanism (Nikolov 2023, Alg. 1, Thm 21): projection bits, the explicit error bound and its
minimiser, the Frank–Wolfe decode, the sensitivity, and the whole mechanism against the bound.

Truths used here are independent of the module: exact moments of Rademacher projections, brute
force over ℓ and over pairs of columns, Monte Carlo over fresh projections, and a numpy
Generator for the K-norm noise (radius ~ Gamma(ℓ, Δ/ε) times a uniform direction).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from factorize.geometry.jl import (
    choose_projection_dim,
    jl_decode,
    jl_distortion,
    jl_error_bound,
    jl_sensitivity,
    project_workload,
    sample_projection,
    workload_diameter,
)
from factorize.privacy import Neighbouring, PureDP, TestRandom, calibrate
from workloads import parse_workload


class _Words:
    """A fake rng: words(n) returns the given pattern (to pin the bit → sign mapping)."""

    def __init__(self, word: int) -> None:
        self.word = np.uint64(word)
        self.calls: list[int] = []

    def words(self, n: int) -> np.ndarray:
        self.calls.append(n)
        return np.full(n, self.word, dtype=np.uint64)


def _knorm(gen: np.random.Generator, ell: int, scale: float) -> np.ndarray:
    u = gen.standard_normal(ell)
    return u / np.linalg.norm(u) * gen.gamma(ell, scale)


# ------------------------------------------------------------------------------------------
# the projection


def test_projection_bits_map_to_signs_and_are_reproducible():
    # word 0b...0101: bit b = 1 for even b → entries 0, 2, 4, ... are −1/√ℓ, odd ones +1/√ℓ.
    fake = _Words(0x5555555555555555)
    T = sample_projection(3, 30, fake)  # 90 bits → 2 words
    assert fake.calls == [2]
    flat = T.ravel()
    s = 1 / math.sqrt(3)
    np.testing.assert_array_equal(flat[0::2], -s)
    np.testing.assert_array_equal(flat[1::2], s)
    np.testing.assert_array_equal(sample_projection(4, 5, _Words(0)), np.full((4, 5), 0.5))
    a = sample_projection(7, 11, TestRandom(3))
    b = sample_projection(7, 11, TestRandom(3))
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a * math.sqrt(7))) == {-1.0, 1.0}
    with pytest.raises(TypeError, match="words"):
        sample_projection(2, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="ell"):
        sample_projection(0, 2, TestRandom(0))


def test_projection_preserves_squared_norms_in_expectation():
    """E‖Tv‖² = ‖v‖² and Var‖Tv‖² = (2/ℓ)(‖v‖⁴ − Σv_i⁴) exactly for ±1/√ℓ entries. With M
    independent projections the mean is within 4.5 standard errors (two-sided tail < 1e-5);
    the sample variance within 15% (its relative s.e. is ≈ √(2/M)·1.2 ≈ 2.7% here)."""
    rng = TestRandom(11)
    ell, k, M = 6, 40, 4000
    v = np.random.default_rng(5).normal(size=k)
    vals = np.array([np.sum((sample_projection(ell, k, rng) @ v) ** 2) for _ in range(M)])
    nv2 = float(v @ v)
    var = 2.0 / ell * (nv2**2 - float(np.sum(v**4)))
    assert abs(vals.mean() - nv2) <= 4.5 * math.sqrt(var / M)
    assert vals.var(ddof=1) == pytest.approx(var, rel=0.15)
    # E[TᵀT] = I entrywise: off-diagonal entries of the mean have s.e. 1/√(ℓM).
    G = sum(T.T @ T for T in (sample_projection(ell, 12, rng) for _ in range(2000))) / 2000
    np.testing.assert_allclose(np.diag(G), 1.0, atol=1e-12)
    assert np.max(np.abs(G - np.eye(12))) <= 4.5 / math.sqrt(ell * 2000) * 1.5


# ------------------------------------------------------------------------------------------
# the explicit bound and its minimiser


@pytest.mark.parametrize("relation,symmetric", [("add_remove", False), ("replace", False),
                                                ("add_remove", True)])
def test_bound_is_minimised_at_the_returned_ell(relation, symmetric):
    W = parse_workload("allrange:12").dense()  # k = 78, N = 12
    k = W.shape[0]
    cn = np.linalg.norm(W, axis=0)
    L = workload_diameter(W)
    kw = {"diameter": L, "relation": relation, "symmetric": symmetric, "fw_gap": 3.0}
    best = choose_projection_dim(2000.0, 0.5, k, cn, **kw)
    brute = [jl_error_bound(ell, 2000.0, 0.5, k, cn, **kw).total for ell in range(1, k + 1)]
    assert best.ell == 1 + int(np.argmin(brute))
    assert best.total <= min(brute) * (1 + 1e-12)
    one = jl_error_bound(best.ell, 2000.0, 0.5, k, cn, **kw)
    assert one.total == pytest.approx(best.total, rel=1e-12)
    assert one.total**2 == pytest.approx(one.noise_sq + one.distortion_sq + one.gap_sq, rel=1e-12)
    assert one.gap_sq == 6.0 and one.rms == pytest.approx(one.total / math.sqrt(k))
    # E Δ² ≥ max_j ‖w_j‖² (add/remove: E‖Tw‖² = ‖w‖²), so M can never undercut it.
    if relation == "add_remove":
        assert one.sensitivity_sq >= cn.max() ** 2


def test_chosen_ell_against_the_seed_reference_n_epsilon():
    """Nikolov 2023 (Thm 21) takes ℓ ≈ nε for its Lemma 16 noise. With the ℓ2-ball noise the
    explicit bound's minimiser is below nε and grows like (nε)^{4/5} (module docstring):
    ℓ*(8x)/ℓ*(x) lies in [8^0.75, 8^0.85] once x ≫ log P."""
    cn = np.full(200, 10.0)
    ells = {}
    for ne in (400, 3200, 25600):
        b = choose_projection_dim(float(ne), 1.0, 20000, cn, diameter=10 * math.sqrt(2))
        assert 1 <= b.ell < ne
        ells[ne] = b.ell
    for lo, hi in ((400, 3200), (3200, 25600)):
        assert 8**0.75 <= ells[hi] / ells[lo] <= 8**0.85
    # ε scales like n: the minimiser depends on nε only through the product (same M, ρ).
    a = choose_projection_dim(3200.0, 1.0, 20000, cn, diameter=10 * math.sqrt(2))
    b = choose_projection_dim(6400.0, 0.5, 20000, cn, diameter=10 * math.sqrt(2))
    assert a.ell == b.ell


def test_bound_ingredients_dominate_monte_carlo():
    """Step (d) of the derivation, checked by Monte Carlo over 300 fresh projections: the
    a-priori M ≥ E Δ², L²ρ⁺ ≥ E δ⁺ and L²ρ⁻ ≥ E δ⁻ (Δ, δ± computed exactly per draw)."""
    W = parse_workload("allrange:8").dense()  # k = 36, N = 8
    k = W.shape[0]
    cn = np.linalg.norm(W, axis=0)
    L = workload_diameter(W)
    rng = TestRandom(21)
    for ell in (4, 16):
        b = jl_error_bound(ell, 1.0, 1.0, k, cn, diameter=L)
        d2, dp, dm = [], [], []
        for _ in range(300):
            TW = project_workload(sample_projection(ell, k, rng), W)
            d2.append(jl_sensitivity(TW) ** 2)
            p, m = jl_distortion(TW, W)
            dp.append(p)
            dm.append(m)
        assert np.mean(d2) <= b.sensitivity_sq
        assert np.mean(dp) <= L**2 * b.rho_plus
        assert np.mean(dm) <= L**2 * b.rho_minus


def test_bound_bad_input():
    cn = np.ones(4)
    with pytest.raises(ValueError, match="ell"):
        jl_error_bound(0, 10.0, 1.0, 3, cn)
    with pytest.raises(ValueError, match="n must"):
        jl_error_bound(2, -1.0, 1.0, 3, cn)
    with pytest.raises(ValueError, match="epsilon"):
        jl_error_bound(2, 10.0, math.inf, 3, cn)
    with pytest.raises(ValueError, match="column_norms"):
        jl_error_bound(2, 10.0, 1.0, 3, np.array([]))
    with pytest.raises(ValueError, match="column_norms"):
        jl_error_bound(2, 10.0, 1.0, 3, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="zero"):
        jl_error_bound(2, 10.0, 1.0, 3, np.zeros(3))
    with pytest.raises(ValueError, match="diameter"):
        jl_error_bound(2, 10.0, 1.0, 3, cn, diameter=2.5)
    with pytest.raises(ValueError, match="diameter"):
        jl_error_bound(2, 10.0, 1.0, 3, np.array([1.0, 3.0]), diameter=1.0)
    with pytest.raises(ValueError, match="relation"):
        jl_error_bound(2, 10.0, 1.0, 3, cn, relation="swap")
    with pytest.raises(ValueError, match="fw_gap"):
        choose_projection_dim(10.0, 1.0, 3, cn, fw_gap=-1.0)


# ------------------------------------------------------------------------------------------
# sensitivity


def test_sensitivity_exact_against_brute_force():
    gen = np.random.default_rng(8)
    for ell, N in ((5, 7), (3, 2), (9, 30)):
        TW = gen.normal(size=(ell, N))
        ar = max(np.linalg.norm(TW[:, j]) for j in range(N))
        pairs = itertools.combinations(range(N), 2)
        rp = max(np.linalg.norm(TW[:, i] - TW[:, j]) for i, j in pairs)
        assert jl_sensitivity(TW, "add_remove") == pytest.approx(ar, rel=1e-14)
        got = jl_sensitivity(TW, Neighbouring.REPLACE)
        assert rp <= got <= rp * (1 + 1e-9)  # an upper bound within 5e-10 (rigorous rounding)
        assert got <= 2 * ar * (1 + 1e-12)
    # near-duplicate columns (the Gram identity cancels) and a single column
    base = gen.normal(size=(4, 1))
    TW = np.hstack([base, base + 1e-9, base - 2e-9])
    assert jl_sensitivity(TW, "replace") == pytest.approx(3e-9 * 2, rel=1e-5)
    assert jl_sensitivity(base, "replace") == 0.0
    with pytest.raises(ValueError, match="relation"):
        jl_sensitivity(TW, "neighbours")
    with pytest.raises(ValueError, match="finite"):
        jl_sensitivity(np.array([[np.nan]]), "add_remove")


def test_noise_spec_for_the_plan():
    """The spec the plan needs: calibrate(PureDP(ε), Δ, dim=ℓ, family="l2_knorm")."""
    W = parse_workload("allrange:8").dense()
    TW = project_workload(sample_projection(6, 36, TestRandom(2)), W)
    d = jl_sensitivity(TW, "replace")
    spec = calibrate(PureDP(0.7), sensitivity_l2=d, dim=6, relation="replace", family="l2_knorm")
    assert spec.family == "l2_knorm" and spec.dim == 6 and spec.sampler == "float"
    assert spec.scale == pytest.approx(d / 0.7, rel=1e-12)
    assert spec.relation is Neighbouring.REPLACE


# ------------------------------------------------------------------------------------------
# decode


def test_decode_noiseless_recovers_the_answers():
    """ℓ ≥ N: TW is injective, z = TWh is attained only at x = h, so the decode returns Wh up
    to the FW gap: ‖TW(x − h)‖² ≤ 2·gap (step (a)), and the realised step (b) certificate
    ‖W(x − h)‖² ≤ 2·gap + n²(δ⁺ + δ⁻) holds."""
    gen = np.random.default_rng(4)
    W = (gen.random((30, 8)) < 0.5).astype(float)
    h = gen.multinomial(50, np.full(8, 1 / 8)).astype(float) + 1.0
    n = float(h.sum())
    TW = project_workload(sample_projection(24, 30, TestRandom(9)), W)
    z = TW @ h
    res = jl_decode(TW, z, n, W, gap_tol=1e-9 * n * n, max_iters=100000)
    assert res.converged and res.gap <= 1e-9 * n * n
    np.testing.assert_allclose(res.answers, W @ res.x, rtol=1e-12)
    assert np.sum((res.projected - z) ** 2) <= 2 * res.gap * (1 + 1e-9)
    err = np.linalg.norm(res.answers - W @ h)
    assert err <= 1e-3 * np.linalg.norm(W @ h)
    dp, dm = jl_distortion(TW, W)
    assert err**2 <= 2 * res.gap + n * n * (dp + dm)
    assert np.all(res.x >= 0) and res.x.sum() == pytest.approx(n)


@pytest.mark.parametrize("symmetric", [False, True])
def test_decode_obeys_the_deterministic_inequality(symmetric):
    """Steps (a)+(b) pointwise, for a small ℓ (large distortion) and arbitrary noise:
    ‖ŷ − Wh‖² ≤ ‖z̃ − TWh‖² + 2g + n²(δ⁺ + δ⁻), δ± realised for the drawn T (n·B₁: the pairs
    w_i ± w_j and 2w_j)."""
    W = parse_workload("allrange:10").dense()
    gen = np.random.default_rng(6)
    h = gen.multinomial(40, np.full(10, 0.1)).astype(float)
    for seed in range(4):
        TW = project_workload(sample_projection(3, W.shape[0], TestRandom(seed)), W)
        dp, dm = jl_distortion(TW, W, symmetric=symmetric)
        for scale in (0.0, 3.0, 30.0):
            z = TW @ h + scale * gen.normal(size=3)
            res = jl_decode(TW, z, 40.0, W, symmetric=symmetric, max_iters=3000)
            lhs = np.sum((res.answers - W @ h) ** 2)
            rhs = np.sum((z - TW @ h) ** 2) + 2 * res.gap + 1600.0 * (dp + dm)
            assert lhs <= rhs * (1 + 1e-9)
            if symmetric:
                assert np.abs(res.x).sum() <= 40.0 * (1 + 1e-12)


def test_jl_distortion_against_brute_force():
    gen = np.random.default_rng(12)
    W = gen.normal(size=(9, 6))
    TW = project_workload(sample_projection(4, 9, TestRandom(1)), W)
    T = sample_projection(4, 9, TestRandom(1))
    for symmetric in (False, True):
        vecs = [W[:, i] - W[:, j] for i, j in itertools.combinations(range(6), 2)]
        if symmetric:
            vecs += [W[:, i] + W[:, j] for i, j in itertools.combinations(range(6), 2)]
            vecs += [2 * W[:, j] for j in range(6)]
        diffs = [np.sum((T @ v) ** 2) - np.sum(v**2) for v in vecs]
        dp, dm = jl_distortion(TW, W, symmetric=symmetric)
        assert dp == pytest.approx(max(max(diffs), 0.0), rel=1e-10, abs=1e-12)
        assert dm == pytest.approx(max(max(-d for d in diffs), 0.0), rel=1e-10, abs=1e-12)


def test_decode_bad_input():
    W = np.ones((3, 2))
    TW = np.ones((2, 2))
    with pytest.raises(ValueError, match="z_noisy"):
        jl_decode(TW, np.ones(3), 5.0, W)
    with pytest.raises(ValueError, match="columns"):
        jl_decode(TW, np.ones(2), 5.0, np.ones((3, 4)))
    with pytest.raises(ValueError, match="n must"):
        jl_decode(TW, np.ones(2), 0.0, W)
    with pytest.raises(ValueError, match="gap_tol"):
        jl_decode(TW, np.ones(2), 5.0, W, gap_tol=-1.0)


# ------------------------------------------------------------------------------------------
# the whole mechanism against the bound


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_mechanism_error_is_below_the_explicit_bound(relation):
    """20 independent runs (fresh T from TestRandom, K-norm noise from a numpy Generator):
    the mean of ‖ŷ − Wh‖₂² must be below B² (B bounds the root-mean-square), the mean error
    below B. A bound under the empirical error would be a bug."""
    W = parse_workload("allrange:40").dense()  # k = 820, N = 40
    k = W.shape[0]
    n, eps = 1000.0, 1.0
    cn = np.linalg.norm(W, axis=0)
    L = workload_diameter(W)
    gen = np.random.default_rng(31)
    h = gen.multinomial(int(n), gen.dirichlet(np.full(40, 0.5))).astype(float)
    y = W @ h
    best = choose_projection_dim(n, eps, k, cn, diameter=L, relation=relation)
    ell = best.ell
    assert 1 < ell < k and best.useful  # a regime where the bound beats the trivial n·L
    sq, gaps = [], []
    for rep in range(20):
        TW = project_workload(sample_projection(ell, k, TestRandom(100 + rep)), W)
        d = jl_sensitivity(TW, relation)
        z = TW @ h + _knorm(gen, ell, d / eps)
        res = jl_decode(TW, z, n, W, noise_scale=d / eps)
        gaps.append(res.gap)
        sq.append(float(np.sum((res.answers - y) ** 2)))
    bound = jl_error_bound(ell, n, eps, k, cn, diameter=L, relation=relation, fw_gap=max(gaps))
    assert np.mean(sq) <= bound.total**2
    assert np.mean(np.sqrt(sq)) <= bound.total
    assert math.sqrt(np.mean(sq)) / math.sqrt(k) <= bound.rms


def test_operator_workload_matches_dense():
    """A workload object (matvec / rmatvec / shape, never densified by the decode) gives the
    same TW and the same decode as its dense matrix."""
    Wop = parse_workload("allrange:8")
    W = Wop.dense()
    T = sample_projection(5, W.shape[0], TestRandom(4))
    TW = project_workload(T, Wop)
    np.testing.assert_allclose(TW, T @ W, rtol=1e-13, atol=1e-12)
    z = TW @ np.arange(8.0) + 1.0
    a = jl_decode(TW, z, 28.0, Wop, max_iters=500)
    b = jl_decode(TW, z, 28.0, W, max_iters=500)
    np.testing.assert_allclose(a.answers, b.answers, rtol=1e-12, atol=1e-9)
    assert workload_diameter(Wop) == pytest.approx(workload_diameter(W))
