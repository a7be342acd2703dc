"""The subset algebra and the marginal planner against independent truth.

Truth used: dense matrices and numpy SVDs on small domains (the projectors, WᵀW, the
trace norm, row norms of W X^{-1/2}, the strategy); the generic SDP planner
(``factorize.planner.routes.solve``) on small marginal workloads; closed forms (identity and
total query: 1; all-k-way marginals over binary attributes: ``γ₂ = γ_F = ||W||_tr/√(Nk)``
with ``λ_T = C(d−|T|, k−|T|)·2^{d−k}``); and the certificate formulas of
``factorize.planner.certificate`` evaluated on dense matrices.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from factorize.planner import certificate
from factorize.planner.marginal_algebra import (
    AlgebraCoefficients,
    MarginalFamily,
    apply_algebra,
    closure,
    gram_eigenvalues,
    marginal_family,
    mask_of,
    projector_dense,
    row_norm_coefficients,
    strategy_matvec,
    strategy_pinv_matvec,
    subset_dim,
    subset_of,
    trace_norm,
)
from factorize.planner.marginal_optimum import solve_marginals, verify_marginal_solution
from factorize.planner.routes import solve
from solvers.errors import CertificateGapError
from tests.raw_adult import ADULT_DOMAIN
from workloads import (
    DenseWorkload,
    KronWorkload,
    SparseWorkload,
    VStackWorkload,
    identity,
    marginals,
    marginals_upto,
    parity,
    parse_workload,
    prefix,
    total,
)

SMALL_SIZES = [(2, 3, 4), (3, 3), (2, 2, 2, 2), (2, 1, 3)]


def small_workloads():
    out = []
    for sizes in SMALL_SIZES:
        for way in range(len(sizes) + 1):
            out.append((f"marginals{sizes}:{way}", marginals(sizes, way)))
        out.append((f"upto{sizes}:2", marginals_upto(sizes, min(2, len(sizes)))))
    # an arbitrary family with a repeated block and the total query
    out.append(("custom", _family_workload((2, 3, 4), [(0, 2), (), (1,), (0, 2), (0, 1, 2)])))
    return out


def _family_workload(sizes, subsets):
    return VStackWorkload([KronWorkload([identity(n) if j in S else total(n)
                                         for j, n in enumerate(sizes)]) for S in subsets])


def _dense_algebra(sizes, coeffs: dict[int, float]) -> np.ndarray:
    return sum(c * projector_dense(sizes, t) for t, c in coeffs.items())


def _all_masks(d):
    return range(1 << d)


# ------------------------------------------------------------------------------ (a) algebra
@pytest.mark.parametrize("sizes", SMALL_SIZES)
def test_projectors_are_an_orthogonal_resolution_of_identity(sizes):
    N = math.prod(sizes)
    total_p = np.zeros((N, N))
    Ps = {t: projector_dense(sizes, t) for t in _all_masks(len(sizes))}
    for t, P in Ps.items():
        np.testing.assert_allclose(P @ P, P, atol=1e-12)
        np.testing.assert_allclose(P, P.T, atol=1e-15)
        assert round(np.trace(P)) == subset_dim(sizes, t)
        assert np.linalg.matrix_rank(P) == subset_dim(sizes, t) if subset_dim(sizes, t) else np.allclose(P, 0)
        np.testing.assert_allclose(np.diag(P), subset_dim(sizes, t) / N, atol=1e-14)
        for u, Q in Ps.items():
            if u != t:
                np.testing.assert_allclose(P @ Q, 0, atol=1e-12)
        total_p += P
    np.testing.assert_allclose(total_p, np.eye(N), atol=1e-12)


@pytest.mark.parametrize("name, W", small_workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_gram_spectrum_and_trace_norm_match_dense(name, W):
    fam = marginal_family(W)
    assert fam is not None and fam.shape == W.shape
    Wd = W.dense()
    G = Wd.T @ Wd
    lam = gram_eigenvalues(fam)
    assert set(lam) == set(closure(fam))
    assert all(v > 0 for v in lam.values())
    # WᵀW = Σ_T λ_T P_T (so the eigenvalue off the closure is 0)
    np.testing.assert_allclose(_dense_algebra(fam.sizes, {t: float(v) for t, v in lam.items()}), G,
                               atol=1e-9 * np.max(G))
    sv = np.linalg.svd(Wd, compute_uv=False)
    assert trace_norm(fam) == pytest.approx(float(np.sum(sv)), rel=1e-12)
    # multiset of eigenvalues: λ_T with multiplicity dim_T
    eig = np.sort(np.linalg.eigvalsh(G))[::-1]
    expect = sorted([float(v) for t, v in lam.items() for _ in range(subset_dim(fam.sizes, t))], reverse=True)
    np.testing.assert_allclose(eig[:len(expect)], expect, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(eig[len(expect):], 0, atol=1e-9 * max(1.0, eig[0]))


@pytest.mark.parametrize("name, W", small_workloads(), ids=lambda v: v if isinstance(v, str) else "")
def test_row_norm_coefficients_match_dense(name, W):
    fam = marginal_family(W)
    rng = np.random.default_rng(7)
    Wd = W.dense()
    coeffs = {t: float(rng.uniform(0.3, 3.0)) for t in _all_masks(fam.d)}
    c = row_norm_coefficients(fam)
    # per projector: w P_T wᵀ is c_{S,T} for T ⊆ S and 0 otherwise, the same on every row
    offsets = np.cumsum((0,) + fam.rows)
    for b, S in enumerate(fam.subsets):
        rows = Wd[offsets[b]:offsets[b + 1]]
        smask = mask_of(S)
        for t in _all_masks(fam.d):
            vals = np.einsum("ij,jk,ik->i", rows, projector_dense(fam.sizes, t), rows)
            expect = c.get((smask, t), 0.0)
            np.testing.assert_allclose(vals, expect, rtol=1e-10, atol=1e-10)
        # the formula of the brief, attribute by attribute
        for t in _all_masks(fam.d):
            if (smask, t) in c:
                n = fam.sizes
                formula = (math.prod(1 - 1 / n[j] for j in subset_of(t))
                           * math.prod(1 / n[j] for j in S if not t >> j & 1)
                           * math.prod(n[j] for j in range(fam.d) if j not in S))
                assert c[(smask, t)] == pytest.approx(formula, rel=1e-13)
    # row norms of W X^{-1/2} for a random X in the algebra
    Xih = _dense_algebra(fam.sizes, {t: v ** -0.5 for t, v in coeffs.items()})
    R = Wd @ Xih
    norms2 = np.einsum("ij,ij->i", R, R)
    for b, S in enumerate(fam.subsets):
        smask = mask_of(S)
        expect = sum(cv / coeffs[t] for (s, t), cv in c.items() if s == smask)
        np.testing.assert_allclose(norms2[offsets[b]:offsets[b + 1]], expect, rtol=1e-10)


@pytest.mark.parametrize("sizes", SMALL_SIZES)
def test_strategy_matvec_matches_dense(sizes):
    rng = np.random.default_rng(3)
    d = len(sizes)
    subs = [subset_of(t) for t in _all_masks(d) if rng.random() < 0.7]
    vals = [float(rng.uniform(0.1, 4.0)) for _ in subs]
    x = AlgebraCoefficients(sizes=sizes, subsets=tuple(subs), values=tuple(vals))
    A = _dense_algebra(sizes, {mask_of(T): math.sqrt(v) for T, v in zip(subs, vals, strict=True)})
    N = math.prod(sizes)
    h = rng.normal(size=N)
    np.testing.assert_allclose(strategy_matvec(x, h), A @ h, atol=1e-12)
    H = rng.normal(size=(N, 3))
    np.testing.assert_allclose(strategy_matvec(x, H), A @ H, atol=1e-12)
    np.testing.assert_allclose(strategy_pinv_matvec(x, h), np.linalg.pinv(A) @ h, atol=1e-10)
    np.testing.assert_allclose(A.T @ A, _dense_algebra(sizes, {mask_of(T): v for T, v in zip(subs, vals, strict=True)}),
                               atol=1e-12)
    assert not np.any(apply_algebra(sizes, {}, h))


# ------------------------------------------------------------------------------ detection
def test_detector_reports_sizes_subsets_rows():
    fam = marginal_family(parse_workload("marginals_upto:3x3x2:2"))
    assert fam.sizes == (3, 3, 2)
    assert fam.subsets == ((), (0,), (1,), (2,), (0, 1), (0, 2), (1, 2))
    assert fam.rows == (1, 3, 3, 2, 9, 6, 6)
    assert fam.N == 18 and fam.k == 30


def test_detector_generic_forms():
    # factor types by value: a dense identity, a sparse all-ones row, nested products/stacks
    eye3 = DenseWorkload(np.eye(3))
    ones4 = SparseWorkload(sp.csr_array(np.ones((1, 4))))
    W = VStackWorkload([KronWorkload([eye3, ones4]),
                        VStackWorkload([KronWorkload([KronWorkload([total(3)]), identity(4)])])])
    fam = marginal_family(W)
    assert fam.sizes == (3, 4) and fam.subsets == ((0,), (1,))
    # different factorisations of the same domain are refined: I_6 = I_2 ⊗ I_3
    W = VStackWorkload([identity(6), KronWorkload([identity(2), total(3)]), total(6)])
    fam = marginal_family(W)
    assert fam.sizes == (2, 3) and fam.subsets == ((0, 1), (0,), ())
    expected = _family_workload((2, 3), [(0, 1), (0,), ()]).dense()
    np.testing.assert_array_equal(W.dense(), expected)
    # a single block is a family too; size-1 attributes are in no subset
    assert marginal_family(identity(5)).subsets == ((0,),)
    assert marginal_family(marginals((2, 1, 3), 3)).subsets == ((0, 2),)


@pytest.mark.parametrize("W", [
    VStackWorkload([KronWorkload([identity(2), total(3)]), KronWorkload([prefix(2), total(3)])]),
    parity(4, 2),
    VStackWorkload([KronWorkload([DenseWorkload(2 * np.eye(2)), total(3)])]),
    VStackWorkload([KronWorkload([identity(2), DenseWorkload([[1.0, 0.0, 1.0]])])]),
    DenseWorkload(marginals((2, 3), 1).dense()),
    # I_3 ⊗ 1ᵀ_2 and I_2 ⊗ 1ᵀ_3 group the 6 cells in ways no product domain makes marginal
    VStackWorkload([KronWorkload([identity(3), total(2)]), KronWorkload([identity(2), total(3)])]),
    VStackWorkload([KronWorkload([identity(2), DenseWorkload([[0.0, 1.0], [1.0, 0.0]])])]),
], ids=["prefix-block", "parity", "scaled-identity", "not-all-ones", "dense", "no-refinement",
        "permutation"])
def test_detector_rejects_non_marginals(W):
    assert marginal_family(W) is None
    with pytest.raises(ValueError, match="not a stack of marginal blocks"):
        solve_marginals(W, "gamma_f")


# ------------------------------------------------------------------------------ (b) planner
def _dense_plan_check(W, sol):
    """The plan as dense matrices: R·A = W, its norms equal the certified upper bound, and the
    SVD-based certificate formulas of factorize.planner.certificate reproduce the lower bound."""
    fam = sol.family
    Wd = W.dense()
    xm = {mask_of(T): v for T, v in zip(sol.x.subsets, sol.x.values, strict=True)}
    A = _dense_algebra(fam.sizes, {t: math.sqrt(v) for t, v in xm.items()})
    R = Wd @ np.linalg.pinv(A)
    assert np.max(np.abs(R @ A - Wd)) < 1e-9
    a12 = np.sqrt(np.max(np.sum(A * A, axis=0)))
    assert a12 == pytest.approx(1.0, rel=1e-12)
    N = Wd.shape[1]
    q = np.full(N, 1.0 / N)
    if sol.norm == "gamma_f":
        value = np.linalg.norm(R) / math.sqrt(Wd.shape[0]) * a12
        lower = certificate.gamma_f_lower(Wd, q)
    else:
        value = np.sqrt(np.max(np.sum(R * R, axis=1))) * a12
        wmap = {mask_of(S): w for S, w in zip(sol.weight_subsets, sol.weights, strict=True)}
        mult = dict(fam.unique())
        p = np.concatenate([np.full(r, wmap[mask_of(S)] / (r * mult[mask_of(S)]))
                            for S, r in zip(fam.subsets, fam.rows, strict=True)])
        lower = certificate.gamma_2_lower(Wd, p, q)
    assert value <= sol.upper * (1 + 1e-12)
    assert value == pytest.approx(sol.upper, rel=1e-10)
    assert lower == pytest.approx(sol.lower, rel=1e-10)


@pytest.mark.parametrize("spec", ["marginals:2x3x4:2", "marginals_upto:3x3x2:2", "marginals:2x2x2x2:1",
                                  "marginals:2x1x3:1"])
@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_agrees_with_generic_sdp_planner(spec, norm):
    sol = solve_marginals(spec, norm)
    ref = solve(spec, norm)
    assert sol.verified and sol.gap <= 1e-9
    assert sol.value == pytest.approx(ref.value, rel=1e-6)
    # the two certified intervals overlap
    assert sol.lower <= ref.upper * (1 + 1e-12) and ref.lower <= sol.upper * (1 + 1e-12)
    _dense_plan_check(parse_workload(spec), sol)


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_custom_family_dense_plan(norm):
    W = _family_workload((2, 3, 4), [(0, 2), (), (1,), (0, 2), (0, 1, 2)])
    sol = solve_marginals(W, norm)
    assert sol.gap <= 1e-9
    _dense_plan_check(W, sol)


@pytest.mark.parametrize("sizes, subsets", [
    ((5, 10, 10, 100, 2), [(2, 4), (0, 3), (0, 1, 3), (0, 3, 4), (3,), (0,), (2, 3, 4), (2, 3),
                           (0, 2, 3), (0, 2, 3)]),
    ((1, 3, 100, 100), [(2, 3), (2, 3), (0, 2), (1, 2, 3), (2, 3), (1, 3), (0, 1)]),
    ((2, 2, 3, 3, 5, 2, 10, 2), [(1, 3, 4), (1, 4, 7), (1, 5, 7), (2, 3, 5), (4, 5, 7), (0, 2, 7),
                                 (0, 3, 4), (0, 6), (0, 1, 2), (3, 6, 7), (4, 6), (3,), (0, 3, 5)]),
])
def test_heterogeneous_nested_families_reach_tight_gaps(sizes, subsets):
    """Uneven sizes and nested blocks (some with zero dual weight): the γ₂ Newton method
    still certifies to 1e-9 (these once stalled near 1e-8 on a cancellation)."""
    fam = MarginalFamily(sizes=sizes, subsets=tuple(subsets),
                         rows=tuple(math.prod(sizes[j] for j in S) for S in subsets))
    g2 = solve_marginals(fam, "gamma_2", gap_tol=1e-9)
    gf = solve_marginals(fam, "gamma_f", gap_tol=1e-9)
    assert gf.lower <= g2.upper  # γ_F ≤ γ₂


# ------------------------------------------------------------------------------ (c) closed forms
@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
@pytest.mark.parametrize("spec", ["marginals:6:1", "identity:5", "marginals:7:0", "marginals:4x3:2",
                                  "marginals:1:1", "marginals:2x5:0"])
def test_identity_and_total_are_one(spec, norm):
    sol = solve_marginals(spec, norm)
    assert sol.lower <= 1.0 <= sol.upper
    assert sol.gap <= 1e-12


def _binary_kway_gamma(d: int, k: int) -> float:
    """||W||_tr / √(N·rows) for all k-way marginals over d binary attributes."""
    tr = sum(math.comb(d, t) * math.sqrt(math.comb(d - t, k - t) * 2 ** (d - k)) for t in range(k + 1))
    return tr / math.sqrt(2 ** d * math.comb(d, k) * 2 ** k)


def test_binary_closed_form_small():
    assert _binary_kway_gamma(4, 1) == pytest.approx(1.5, rel=1e-15)
    for norm in ("gamma_f", "gamma_2"):
        sol = solve_marginals("marginals:2x2x2x2:1", norm)
        assert sol.lower <= 1.5 <= sol.upper


# ------------------------------------------------------------------------------ (d) big cases
@pytest.fixture
def no_densify(monkeypatch):
    """Any attempt to densify a stack or a product fails the test."""
    def refuse(self, max_entries):
        raise AssertionError("the marginal planner densified a structured workload")
    monkeypatch.setattr(VStackWorkload, "_dense", refuse)
    monkeypatch.setattr(KronWorkload, "_dense", refuse)


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_twenty_binary_attributes_two_way(norm, no_densify):
    W = marginals([2] * 20, 2)
    sol = solve_marginals(W, norm)  # in the subset algebra: no_densify refuses any N-sized matrix
    assert sol.verified and sol.gap <= 1e-6
    truth = _binary_kway_gamma(20, 2)  # γ₂ = γ_F here: all rows have equal norm by symmetry
    assert sol.lower <= truth * (1 + 1e-12) and truth <= sol.upper * (1 + 1e-12)
    assert sol.summary_dict()["shape"] == [760, 2 ** 20]
    # the plan at N = 2^20: unit column norm, and W A⁺ A h = W h
    e = np.zeros(2 ** 20)
    e[123457] = 1.0
    col = strategy_matvec(sol.x, e)
    assert float(col @ col) == pytest.approx(1.0, rel=1e-12)
    h = np.random.default_rng(1).random(2 ** 20)
    back = strategy_pinv_matvec(sol.x, strategy_matvec(sol.x, h))
    some = VStackWorkload([W.blocks[0], W.blocks[95], W.blocks[-1]])  # a few blocks keep this quick
    np.testing.assert_allclose(some.matvec(back), some.matvec(h), rtol=1e-10)


def _adult_sizes():
    if not ADULT_DOMAIN.exists():
        pytest.skip(f"Adult domain file {ADULT_DOMAIN} is missing")
    return [int(v) for v in json.loads(ADULT_DOMAIN.read_text()).values()]


@pytest.mark.parametrize("norm", ["gamma_f", "gamma_2"])
def test_adult_two_way(norm, no_densify):
    sizes = _adult_sizes()
    W = marginals(sizes, 2)
    sol = solve_marginals(W, norm)
    assert sol.verified and sol.gap <= 1e-6
    N = math.prod(sizes)
    assert N > 2 ** 53
    summary = json.loads(json.dumps(sol.summary_dict()))
    assert summary["shape"] == [W.shape[0], N] and isinstance(summary["shape"][1], int)
    assert summary["method"] == "algebra" and summary["subsets"] == 91
    assert summary["verified"] is True and summary["norm"] == norm
    if norm == "gamma_f":
        # closed form from the exact integer eigenvalues
        fam = marginal_family(W)
        assert sol.lower <= trace_norm(fam) / math.sqrt(N * fam.k) * (1 + 1e-12) <= sol.upper * (1 + 2e-12)
    else:
        assert len(summary["block_weights"]["weights"]) == 91
        assert sol.value >= solve_marginals(W, "gamma_f").lower  # γ₂ ≥ γ_F


# ------------------------------------------------------------------------------ (e) hostile
def test_tampered_coefficients_are_rejected():
    W = parse_workload("marginals:2x3x4:2")
    fam = marginal_family(W)
    for norm in ("gamma_f", "gamma_2"):
        sol = solve_marginals(W, norm)
        assert verify_marginal_solution(fam, sol)[3]
        vals = list(sol.x.values)
        # a zero coefficient on a T with λ_T > 0: R·A ≠ W
        zero = dataclasses.replace(sol, x=dataclasses.replace(sol.x, values=tuple([0.0] + vals[1:])))
        *_, passed, failures = verify_marginal_solution(fam, zero)
        assert not passed and any("R·A ≠ W" in f for f in failures)
        # dropping a subset altogether is the same
        dropped = dataclasses.replace(sol, x=AlgebraCoefficients(fam.sizes, sol.x.subsets[1:], tuple(vals[1:])))
        assert not verify_marginal_solution(fam, dropped)[3]
        for bad in (-1.0, math.nan, math.inf):
            t = dataclasses.replace(sol, x=dataclasses.replace(sol.x, values=tuple([bad] + vals[1:])))
            assert not verify_marginal_solution(fam, t)[3]
        # a valid but worse plan: still verifies, with a visibly larger gap
        worse = dataclasses.replace(sol, x=dataclasses.replace(sol.x, values=tuple([vals[0] * 4] + vals[1:])))
        u2, _, g2, ok, _ = verify_marginal_solution(fam, worse)
        assert ok and u2 > sol.upper * (1 + 1e-6) and g2 > 1e-6
        # the stored upper/lower numbers play no part in verification
        lie = dataclasses.replace(sol, upper=0.5, lower=100.0)
        assert verify_marginal_solution(fam, lie)[:3] == verify_marginal_solution(fam, sol)[:3]
        # a plan for another domain
        other = dataclasses.replace(sol, x=dataclasses.replace(sol.x, sizes=(2, 3, 5)))
        assert not verify_marginal_solution(fam, other)[3]
    sol = solve_marginals(W, "gamma_2")
    for weights, subsets in [((-1.0,) + sol.weights[1:], sol.weight_subsets),
                             ((0.0,) * len(sol.weights), sol.weight_subsets),
                             (sol.weights[:-1] + (1.0,), sol.weight_subsets[:-1] + ((0, 1, 2),)),
                             (None, None)]:
        t = dataclasses.replace(sol, weights=weights, weight_subsets=subsets)
        assert not verify_marginal_solution(fam, t)[3]


def test_planner_refusals():
    with pytest.raises(ValueError, match="approx_gamma_2"):
        solve_marginals("marginals:2x3:1", "approx_gamma_2")
    with pytest.raises(ValueError, match="unknown norm"):
        solve_marginals("marginals:2x3:1", "gamma_3")
    with pytest.raises(CertificateGapError):
        solve_marginals("marginals:2x3x4:2", "gamma_2", gap_tol=-1.0)
    with pytest.raises(ValueError):
        MarginalFamily(sizes=(2, 3), subsets=((1, 0),), rows=(6,))
    with pytest.raises(ValueError):
        MarginalFamily(sizes=(2, 3), subsets=((0,),), rows=(3,))
