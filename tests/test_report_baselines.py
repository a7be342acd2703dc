"""Baselines of the report (``factorize.report.baselines``) against independent truth.

Truth used: closed forms (the analytic-Gaussian condition of Balle & Wang 2018 evaluated with
scipy's normal CDF; σ = Δ/√(2ρ); Laplace b = Δ₁/ε; the sensitivities √(#tables), √2, √(N−1),
√(L+1), √(2L) of simple strategies), a brute-force dense ``R = W·pinv(A)`` for a tree built
from explicit intervals, the marginal algebra's row norms ``Σ_{T⊆S} c_{S,T}/λ_T`` for the
least-squares projector, ``privacy.replace_sensitivity`` on the dense strategies, and the
optimal γ_F plan (``build_plan``): under Gaussian noise and add/remove neighbours no
factorization — hence no baseline — can have a smaller RMSE than the optimal one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm as normal

from factorize.kinds.factorization.build import build_plan
from factorize.plan.rules import choose_grid
from factorize.planner.marginal_algebra import (
    gram_eigenvalues,
    marginal_family,
    row_norm_coefficients,
)
from factorize.privacy import (
    ZCDP,
    ApproxDP,
    PureDP,
    calibrate,
    discretized_sensitivity,
    laplace_scale,
    replace_sensitivity,
)
from factorize.report.baselines import (
    NAME_DIRECT,
    NAME_IDENTITY,
    NAME_MARGINAL,
    NAME_MARGINAL_LS,
    NAME_TREE,
    Baseline,
    baselines,
    baselines_for_plan,
    direct_baseline,
    identity_baseline,
    is_range_workload,
    marginal_baselines,
    tree_baseline,
    tree_strategy,
)
from workloads import parse_workload

APPROX = ApproxDP(1.0, 1e-6)
NAMES = [NAME_DIRECT, NAME_IDENTITY, NAME_TREE, NAME_MARGINAL, NAME_MARGINAL_LS]


def _cert(value, exact):
    """A certified sensitivity: never below the exact value, above it by at most 1e-13."""
    return exact <= value <= exact * (1 + 1e-13)


def _balle_wang_delta(eps: float, sigma: float, sens: float) -> float:
    """δ of the Gaussian mechanism (Balle & Wang 2018, Thm. 8), straight from the formula."""
    a = sens / (2 * sigma)
    b = eps * sigma / sens
    return normal.cdf(a - b) - math.exp(eps) * normal.cdf(-a - b)


def _by_name(bs: list[Baseline]) -> dict[str, Baseline]:
    return {b.name: b for b in bs}


# ---------------------------------------------------------------------------------------
# identity workload: closed forms


def test_identity_workload_direct_equals_histogram_equals_analytic_sigma():
    N = 8
    for exact in (False, True):
        bs = _by_name(baselines(f"identity:{N}", APPROX, exact=exact))
        d, h = bs[NAME_DIRECT], bs[NAME_IDENTITY]
        assert d.applies and h.applies
        assert d.sensitivity == h.sensitivity and _cert(d.sensitivity, 1.0) and d.sensitivity_exact
        grid = choose_grid(d.sensitivity, N, "l2") if exact else None
        sigma = calibrate(APPROX, sensitivity_l2=d.sensitivity, grid=grid, dim=N).scale
        for b in (d, h):
            assert b.noise_family == "gaussian" and b.noise_scale == sigma
            assert b.rmse == sigma  # R = I (or W = I): every query has std σ, exactly
            assert np.all(b.per_query_std == sigma) and b.max_std == sigma
            assert b.residual == 0.0
            assert (b.noise["grid"] is not None) == exact
        assert d.rmse == h.rmse and d.expected_max_bound == h.expected_max_bound
        if not exact:
            # independent check of the analytic Gaussian: σ satisfies the condition with
            # equality up to the calibration's tiny upward rounding, 0.999σ does not
            assert _balle_wang_delta(1.0, sigma, 1.0) <= 1e-6
            assert _balle_wang_delta(1.0, 0.999 * sigma, 1.0) > 1e-6
            assert d.expected_max_bound == pytest.approx(sigma * math.sqrt(2 * math.log(2 * N)),
                                                         rel=1e-15)


def test_zcdp_identity_closed_form():
    rho = 0.5
    b = direct_baseline("identity:5", ZCDP(rho), exact=False)
    assert b.rmse == pytest.approx(1.0 / math.sqrt(2 * rho), rel=1e-14)


# ---------------------------------------------------------------------------------------
# the hierarchical tree


def _binary_tree_by_intervals(N: int) -> np.ndarray:
    """Binary tree over N = 2^L cells written out interval by interval (root first)."""
    rows, size = [], N
    while size >= 1:
        for start in range(0, N, size):
            r = np.zeros(N)
            r[start:start + size] = 1.0
            rows.append(r)
        size //= 2
    return np.array(rows)


def test_tree_strategy_structure():
    A = tree_strategy(16, 2)
    assert np.array_equal(A, _binary_tree_by_intervals(16))
    # padded trees: every record lies in exactly one node per level
    for N, b in [(10, 4), (1000, 16), (7, 2), (1, 2), (16, 16)]:
        A = tree_strategy(N, b)
        L = math.ceil(math.log(N, b) - 1e-12) if N > 1 else 0
        assert np.all(A.sum(axis=0) == L + 1)
        assert np.all(A.sum(axis=1) >= 1)  # no empty node
        assert np.array_equal(A[-N:], np.eye(N))


def test_prefix_binary_tree_against_brute_force_pinv():
    spec, N = "prefix:16", 16
    W = parse_workload(spec).dense()
    A = _binary_tree_by_intervals(N)
    R = W @ np.linalg.pinv(A)
    assert np.max(np.abs(R @ A - W)) < 1e-10
    for exact in (False, True):
        b = tree_baseline(spec, APPROX, branching=(2,), exact=exact)
        assert b.applies and b.params["branching"] == 2 and b.params["levels"] == 5
        assert b.strategy_rows == 31
        assert _cert(b.sensitivity, math.sqrt(5))  # one node per level, 5 levels
        assert b.residual < 1e-10  # R A = W
        grid = choose_grid(b.sensitivity, 31, "l2") if exact else None
        sigma = calibrate(APPROX, sensitivity_l2=b.sensitivity, grid=grid, dim=31).scale
        assert b.noise_scale == sigma
        np.testing.assert_allclose(b.per_query_std, sigma * np.linalg.norm(R, axis=1),
                                   rtol=1e-10)
        assert b.rmse == pytest.approx(sigma * np.linalg.norm(R) / math.sqrt(16), rel=1e-10)


def test_best_branching_is_the_minimum():
    per_b = {bb: tree_baseline("allrange:16", APPROX, branching=(bb,)) for bb in (2, 4, 8, 16)}
    best = tree_baseline("allrange:16", APPROX)
    assert best.rmse == min(r.rmse for r in per_b.values())
    assert per_b[best.params["branching"]].rmse == best.rmse
    assert best.params["rmse_by_branching"] == {bb: r.rmse for bb, r in per_b.items()}
    assert f"{best.params['branching']} children" in best.description


def test_range_detection():
    assert is_range_workload(parse_workload("prefix:8").dense())
    assert is_range_workload(parse_workload("width:9:3").dense())
    assert is_range_workload(parse_workload("allrange:5").dense())
    assert not is_range_workload(parse_workload("prefix:3x3").dense())  # rectangles
    assert not is_range_workload(np.array([[1.0, 0.0, 1.0]]))  # gap
    assert not is_range_workload(np.array([[2.0, 2.0, 0.0]]))  # not 0/1
    assert not is_range_workload(np.zeros((2, 3)))
    t = tree_baseline("prefix:3x3", APPROX)
    assert not t.applies and "range" in t.reason


# ---------------------------------------------------------------------------------------
# the optimal γ_F plan never loses (Gaussian noise, add/remove neighbours)


@pytest.mark.parametrize("spec", ["identity:8", "prefix:16", "allrange:8", "width:16:4",
                                  "marginals:2x3x4:2"])
@pytest.mark.parametrize("guarantee,exact", [(APPROX, True), (ZCDP(0.5), True),
                                             (APPROX, False)])
def test_no_baseline_beats_the_optimal_gamma_f_plan(spec, guarantee, exact):
    plan = build_plan(spec, guarantee, exact=exact)
    optimal = plan.expected_error["rmse"]
    bs = baselines(spec, guarantee, exact=exact)
    assert [b.name for b in bs] == NAMES
    applied = [b for b in bs if b.applies]
    assert len(applied) >= 2
    for b in applied:
        assert b.rmse >= optimal * (1 - 1e-9), (b.name, b.rmse, optimal)
        assert b.noise_family == plan.noise.family == "gaussian"
        assert b.noise["sampler"] == plan.noise.sampler
        assert b.residual < 1e-9


def test_baselines_for_plan_uses_the_plans_settings():
    from tests.plan_fixtures import small_plan

    plan = small_plan("prefix:8", "epsilon=1", relation="replace")
    got = baselines_for_plan(plan)
    want = baselines("prefix:8", PureDP(1.0), "replace")
    assert [(b.name, b.rmse, b.sensitivity) for b in got] == \
        [(b.name, b.rmse, b.sensitivity) for b in want]
    assert all(b.noise_family == "laplace" for b in got if b.applies)


# ---------------------------------------------------------------------------------------
# marginals


@pytest.mark.parametrize("spec,tables,nonempty", [("marginals:2x3x4:2", 3, 3),
                                                  ("marginals_upto:2x3x4:2", 7, 6),
                                                  ("marginals:2x2x2x2x2x2x2x2:2", 28, 28)])
def test_marginal_table_sensitivities(spec, tables, nonempty):
    W = parse_workload(spec).dense()
    plain, ls = marginal_baselines(spec, APPROX)
    assert plain.params["tables"] == ls.params["tables"] == tables
    for b in (plain, ls):
        assert _cert(b.sensitivity, math.sqrt(tables))  # one cell of every table per record
        assert b.sensitivity_exact
    l1, _ = marginal_baselines(spec, PureDP(1.0))
    assert _cert(l1.sensitivity, tables) and l1.noise_family == "laplace"
    rep, _ = marginal_baselines(spec, APPROX, "replace")
    # replacing a record moves one count in every non-total table: √(2·#non-empty tables)
    assert rep.sensitivity == pytest.approx(math.sqrt(2 * nonempty), rel=1e-9)
    assert rep.sensitivity == replace_sensitivity(W, "l2").value
    # "W directly" is the same strategy and the same numbers
    direct = direct_baseline(spec, APPROX)
    assert (direct.sensitivity, direct.rmse) == (plain.sensitivity, plain.rmse)


def test_marginal_least_squares_against_the_algebra():
    spec = "marginals_upto:2x3x4:2"
    W = parse_workload(spec)
    fam = marginal_family(W)
    lam = gram_eigenvalues(fam)
    coef = row_norm_coefficients(fam)
    # ||p_i||² = w_i (WᵀW)⁺ w_iᵀ = Σ_{T⊆S} c_{S,T}/λ_T for a row of table S
    expected = np.concatenate([
        np.full(rows, sum(c / lam[t] for (s, t), c in coef.items() if s == mask))
        for mask, rows in zip(fam.masks, fam.rows, strict=True)])
    plain, ls = marginal_baselines(W, APPROX, exact=False)
    sigma = plain.noise_scale
    assert ls.noise_scale == sigma and ls.strategy_rows == plain.strategy_rows
    np.testing.assert_allclose((ls.per_query_std / sigma) ** 2, expected, rtol=1e-10)
    assert ls.params["rank"] == sum(int(np.prod([fam.sizes[j] - 1 for j in range(fam.d)
                                                 if t >> j & 1])) for t in lam)
    assert ls.residual < 1e-10
    assert np.all(ls.per_query_std <= plain.per_query_std * (1 + 1e-12))  # P_ii ≤ 1
    assert ls.rmse < plain.rmse


# ---------------------------------------------------------------------------------------
# pure DP: Laplace with the L1 sensitivity


def test_pure_dp_uses_laplace_with_l1_sensitivity():
    spec, eps = "prefix:16", 0.5
    Wd = parse_workload(spec).dense()
    g = PureDP(eps)
    bs = _by_name(baselines(spec, g, exact=False))
    expect_l1 = {NAME_DIRECT: 16.0, NAME_IDENTITY: 1.0}
    for name, l1 in expect_l1.items():
        b = bs[name]
        assert b.noise_family == "laplace" and b.sensitivity_norm == "l1"
        assert _cert(b.sensitivity, l1)
        assert b.noise_scale == laplace_scale(eps, b.sensitivity) == pytest.approx(l1 / eps, rel=1e-13)
        assert b.noise["sampler"] == "float"
    sd = math.sqrt(2) * 16 / eps
    assert bs[NAME_DIRECT].rmse == pytest.approx(sd, rel=1e-13)
    assert bs[NAME_DIRECT].expected_max_bound == pytest.approx(sd * 4, rel=1e-13)  # sd·||I||_F
    assert bs[NAME_IDENTITY].rmse == pytest.approx(
        math.sqrt(2) / eps * np.linalg.norm(Wd) / 4, rel=1e-14)
    t = tree_baseline(spec, g, branching=(2,), exact=False)
    assert _cert(t.sensitivity, 5.0) and t.noise_scale == pytest.approx(10.0, rel=1e-13)
    # exact lattice noise: discrete Laplace on choose_grid's grid, inflated L1 sensitivity
    b = direct_baseline(spec, g)
    grid = choose_grid(b.sensitivity, 16, "l1")
    assert b.noise["sampler"] == "discrete_laplace" and b.noise["grid"] == grid
    assert b.noise_scale == laplace_scale(eps, discretized_sensitivity(b.sensitivity, 16, grid, "l1"))


# ---------------------------------------------------------------------------------------
# replace neighbours: exact values, no blind doubling


def test_replace_sensitivities_match_privacy_and_closed_forms():
    spec = "prefix:16"
    Wd = parse_workload(spec).dense()
    A_tree = _binary_tree_by_intervals(16)
    checks = [
        # (baseline, dense strategy, closed-form L2, closed-form L1)
        (lambda g: direct_baseline(spec, g, "replace"), Wd, math.sqrt(15), 15.0),
        (lambda g: identity_baseline(spec, g, "replace"), np.eye(16), math.sqrt(2), 2.0),
        (lambda g: tree_baseline(spec, g, "replace", branching=(2,)), A_tree, math.sqrt(8), 8.0),
    ]
    for make, A, l2, l1 in checks:
        b2, b1 = make(APPROX), make(PureDP(1.0))
        assert b2.sensitivity == replace_sensitivity(A, "l2").value
        assert b2.sensitivity == pytest.approx(l2, rel=1e-9)
        assert b1.sensitivity == replace_sensitivity(A, "l1").value and _cert(b1.sensitivity, l1)
        assert b2.sensitivity_exact and b1.sensitivity_exact
        assert b2.noise["relation"] == b1.noise["relation"] == "replace"
    # the same strategy under add/remove: √16 = 4, 1, √5 (replace is not 2× of these)
    add = _by_name(baselines(spec, APPROX))
    assert _cert(add[NAME_DIRECT].sensitivity, 4.0) and _cert(add[NAME_IDENTITY].sensitivity, 1.0)


def test_zero_replace_sensitivity_is_skipped_with_a_reason():
    b = direct_baseline("total:5", APPROX, "replace")  # the count n is public under replace
    assert not b.applies and "zero" in b.reason and b.rmse is None


# ---------------------------------------------------------------------------------------
# structure and limits


def test_kronecker_workload_keeps_factors_and_agrees_with_dense():
    spec = "prefix:4x4"
    Wd = parse_workload(spec).dense()
    for make in (direct_baseline, identity_baseline):
        kron, dense = make(spec, APPROX), make(Wd, APPROX)
        assert kron.params["kron_factors"] == 2 and dense.params["kron_factors"] == 1
        assert kron.sensitivity == pytest.approx(dense.sensitivity, rel=1e-13)
        assert kron.rmse == pytest.approx(dense.rmse, rel=1e-12)
        np.testing.assert_allclose(kron.per_query_std, dense.per_query_std, rtol=1e-12)


def test_too_large_is_skipped_not_densified():
    bs = baselines("prefix:64", APPROX, max_entries=1000)
    assert [b.name for b in bs] == NAMES
    for b in bs[:3]:
        assert not b.applies and "forms densely" in b.reason and "max_entries" not in b.reason
    assert not bs[3].applies and "marginal" in bs[3].reason
    d = bs[0].to_dict()
    assert d["applies"] is False and d["rmse"] is None


def test_to_dict_is_plain_data():
    import json

    for b in baselines("prefix:8", APPROX):
        text = json.dumps(b.to_dict(per_query=True))
        assert b.name in text
