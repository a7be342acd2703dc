"""Moment-matrix projections (Nikolov 2023, §6; Dwork, Nikolov & Talwar 2014, §4): the spectraplex / trace-ball
projection against cvxpy, the Frank–Wolfe elliptope projection against cvxpy's SDP and its
certified gap, and the exact 2-way-marginal ↔ ±1-moment conversion against direct counts."""

from __future__ import annotations

import math
import time

import cvxpy as cp
import numpy as np
import pytest

from factorize.geometry.moment_bodies import (
    GAP_FLOOR,
    MomentProjection,
    elliptope_diameter_sq,
    marginals_to_moments,
    moments_to_marginals,
    project_second_moment,
    project_to_elliptope,
)
from workloads import marginals
from workloads.marginal_builders import marginal_subsets

CLARABEL_TIGHT = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def _sym_noise(rng: np.random.Generator, m: int, sigma: float) -> np.ndarray:
    E = np.triu(rng.normal(0.0, sigma, (m, m)), 1)
    return E + E.T


def _pm1_moments(B: np.ndarray) -> np.ndarray:
    """Σ (1, s)(1, s)ᵀ with s = 2b − 1, straight from the records."""
    X = np.hstack([np.ones((B.shape[0], 1)), 2.0 * B - 1.0])
    return X.T @ X


def _direct_tables(B: np.ndarray) -> np.ndarray:
    """The 2-way marginal counts c[p, i, j] = #{b_a = i, b_b = j}, pair p = (a, b) lexicographic."""
    d = B.shape[1]
    out = []
    for a, b in marginal_subsets(d, 2):
        out.append([[np.sum((B[:, a] == i) & (B[:, b] == j)) for j in (0, 1)] for i in (0, 1)])
    return np.asarray(out, dtype=np.float64)


def _f(Z: np.ndarray, A: np.ndarray, n: float) -> float:
    S = 0.5 * (A + A.T)
    np.fill_diagonal(S, n)
    return 0.5 * float(np.sum((Z - S) ** 2))


def _cvxpy_elliptope(A: np.ndarray, n: float) -> tuple[float, np.ndarray]:
    m = A.shape[0]
    S = 0.5 * (A + A.T)
    np.fill_diagonal(S, n)
    Z = cp.Variable((m, m), symmetric=True)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(Z - S)), [Z >> 0, cp.diag(Z) == n])
    prob.solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    return float(prob.value), Z.value


# ---------------------------------------------------------------------------------
# covariance / second moments
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [4, 6, 8])
@pytest.mark.parametrize("inequality", [False, True])
def test_second_moment_projection_matches_cvxpy(d, inequality):
    rng = np.random.default_rng(10 * d + inequality)
    A = rng.standard_normal((d, d)) * 3.0  # not symmetric: the projection symmetrises
    if inequality:
        A -= 4.0 * np.eye(d)  # negative-heavy, so the inequality is inactive for some seeds
    t = 5.0
    X = cp.Variable((d, d), symmetric=True)
    cons = [X >> 0, (cp.trace(X) <= t) if inequality else (cp.trace(X) == t)]
    cp.Problem(cp.Minimize(cp.sum_squares(X - A)), cons).solve(solver=cp.CLARABEL, **CLARABEL_TIGHT)
    P = project_second_moment(A, t, inequality=inequality)
    np.testing.assert_allclose(P, X.value, atol=1e-6)
    assert np.array_equal(P, P.T)
    assert np.linalg.eigvalsh(P)[0] >= -1e-12
    tr = float(np.trace(P))
    assert (tr <= t + 1e-12) if inequality else tr == pytest.approx(t, abs=1e-12)


def test_trace_inequality_inactive_is_the_psd_part_and_the_origin_is_kept():
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    lam = np.array([-2.0, -0.5, 0.3, 0.7, 1.0])
    M = (Q * lam) @ Q.T
    np.testing.assert_allclose(project_second_moment(M, 10.0, inequality=True),
                               (Q * np.maximum(lam, 0)) @ Q.T, atol=1e-12)
    # -I is projected to the origin (in the trace ball, not on the spectraplex)
    np.testing.assert_allclose(project_second_moment(-np.eye(4), 2.0, inequality=True), 0.0, atol=1e-15)
    np.testing.assert_allclose(project_second_moment(-np.eye(4), 2.0), 0.5 * np.eye(4), atol=1e-12)


@pytest.mark.parametrize("inequality", [False, True])
def test_second_moment_projection_idempotent_and_nonexpansive(inequality):
    rng = np.random.default_rng(11)
    t = 7.0
    for _ in range(20):
        A = rng.standard_normal((6, 6)) * 4
        B = A + rng.standard_normal((6, 6)) * rng.uniform(0.01, 5)
        PA = project_second_moment(A, t, inequality=inequality)
        PB = project_second_moment(B, t, inequality=inequality)
        assert np.linalg.norm(PA - PB) <= np.linalg.norm(A - B) * (1 + 1e-12) + 1e-12
        np.testing.assert_allclose(project_second_moment(PA, t, inequality=inequality), PA, atol=1e-12)


def test_second_moment_error_decreases_on_sparse_data():
    """n = 5 unit-norm records in R³⁰ (sensitivity body {M ⪰ 0, tr M = n}); noise σ = 1 per
    entry: the projection's Frobenius error is a fraction of the noisy one. Also 0/1 records
    with the trace inequality (tr ≤ n·d)."""
    rng = np.random.default_rng(5)
    d, n = 30, 5
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    M = X.T @ X
    noisy = M + _sym_noise(rng, d, 1.0) + np.diag(rng.normal(0, 1.0, d))
    P = project_second_moment(noisy, float(n))
    assert np.linalg.norm(P - M) < 0.35 * np.linalg.norm(noisy - M)
    B = (rng.random((n, d)) < 0.1).astype(float)
    M01 = B.T @ B
    noisy01 = M01 + _sym_noise(rng, d, 3.0) + np.diag(rng.normal(0, 3.0, d))
    P01 = project_second_moment(noisy01, float(n * d), inequality=True)
    assert np.linalg.norm(P01 - M01) < 0.6 * np.linalg.norm(noisy01 - M01)


# ---------------------------------------------------------------------------------
# Grothendieck relaxation: n·E_m by Frank–Wolfe
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("m", [3, 5, 7, 9])
def test_elliptope_projection_matches_cvxpy_within_the_certified_gap(m):
    rng = np.random.default_rng(m)
    n = 6.0
    A = rng.standard_normal((m, m)) * 4.0
    f_star, Z_star = _cvxpy_elliptope(A, n)
    res = project_to_elliptope(A, n, rng=np.random.default_rng(0), rel_gap_tol=1e-7)
    assert isinstance(res, MomentProjection)
    f = _f(res.M, A, n)
    assert res.objective == pytest.approx(f, rel=1e-12, abs=1e-12)
    tol = 1e-7 * max(1.0, f_star)  # Clarabel's objective accuracy at these settings
    assert f - f_star <= res.gap + tol  # the gap certifies the suboptimality
    assert res.gap <= 1e-7 * f + GAP_FLOOR * elliptope_diameter_sq(m, n)
    assert np.linalg.norm(res.M - Z_star) <= math.sqrt(2 * res.gap) + 1e-4  # strong convexity
    # feasibility: symmetric, diagonal exactly n, PSD to rounding
    assert np.array_equal(res.M, res.M.T)
    assert np.all(np.diag(res.M) == n)
    assert np.linalg.eigvalsh(res.M)[0] >= -1e-10 * n


@pytest.mark.parametrize("iters", [1, 3, 10, 30])
def test_plain_frank_wolfe_gap_bounds_the_true_suboptimality(iters):
    """The RelaxedProj of Dwork, Nikolov & Talwar 2014 (no Dykstra start): few iterations, so the gap is far from 0
    and its validity is what is tested; Clarkson's a-priori bound holds as well."""
    rng = np.random.default_rng(100 + iters)
    m, n = 8, 4.0
    A = rng.standard_normal((m, m)) * 6.0
    f_star, _ = _cvxpy_elliptope(A, n)
    res = project_to_elliptope(A, n, dykstra_iters=0, max_iters=iters, rel_gap_tol=0.0,
                               rng=np.random.default_rng(1))
    assert res.iterations == iters
    f = _f(res.M, A, n)
    tol = 1e-7 * max(1.0, f_star)
    assert f - f_star + tol >= 0.0
    assert f - f_star <= res.gap + tol
    assert res.gap > 1e-3  # a non-trivial certificate was tested
    assert res.clarkson_bound == pytest.approx(2 * elliptope_diameter_sq(m, n) / (iters + 2))
    assert f - f_star <= res.clarkson_bound
    assert np.all(np.diag(res.M) == n) and np.linalg.eigvalsh(res.M)[0] >= -1e-10 * n


def test_clarkson_budget_sets_the_iteration_count():
    rng = np.random.default_rng(2)
    m, n = 6, 3.0
    A = rng.standard_normal((m, m)) * 5
    c_f = elliptope_diameter_sq(m, n)
    assert c_f == 2 * n * n * m * m
    res = project_to_elliptope(A, n, alpha=c_f / 5, dykstra_iters=0, rel_gap_tol=0.0,
                               rng=np.random.default_rng(0))
    assert res.iterations == 8  # ⌈2 C_f / α⌉ − 2 = 10 − 2


@pytest.mark.parametrize("dykstra_iters", [0, 100])
def test_a_point_in_the_body_is_returned_unchanged(dykstra_iters):
    rng = np.random.default_rng(4)
    m, n = 12, 40.0
    s = rng.choice([-1.0, 1.0], size=(15, m))
    cut = s.T @ s / 15  # a point of the cut polytope
    V = rng.standard_normal((m, m))
    V /= np.linalg.norm(V, axis=0)
    Z = n * (0.5 * cut + 0.5 * V.T @ V)  # relative interior of n·E_m
    Z = 0.5 * (Z + Z.T)
    np.fill_diagonal(Z, n)
    res = project_to_elliptope(Z, n, dykstra_iters=dykstra_iters, rng=np.random.default_rng(0))
    np.testing.assert_allclose(res.M, Z, atol=1e-11 * n)
    assert res.iterations == 1
    assert res.gap <= GAP_FLOOR * elliptope_diameter_sq(m, n)
    # the diagonal of the input is not released: it is ignored
    Zd = Z + np.diag(rng.normal(0, 100, m))
    np.testing.assert_allclose(project_to_elliptope(Zd, n, rng=np.random.default_rng(0)).M, Z, atol=1e-11 * n)


def test_elliptope_projection_idempotent_and_nonexpansive():
    rng = np.random.default_rng(8)
    m, n = 9, 10.0
    for _ in range(3):
        A = rng.standard_normal((m, m)) * 15
        B = A + _sym_noise(rng, m, rng.uniform(0.1, 10))
        ra = project_to_elliptope(A, n, rel_gap_tol=1e-8, rng=np.random.default_rng(0))
        rb = project_to_elliptope(B, n, rel_gap_tol=1e-8, rng=np.random.default_rng(0))
        SA, SB = 0.5 * (A + A.T), 0.5 * (B + B.T)
        np.fill_diagonal(SA, 0)
        np.fill_diagonal(SB, 0)
        slack = math.sqrt(2 * ra.gap) + math.sqrt(2 * rb.gap)
        assert np.linalg.norm(ra.M - rb.M) <= np.linalg.norm(SA - SB) + slack + 1e-9
        again = project_to_elliptope(ra.M, n, rng=np.random.default_rng(0))
        np.testing.assert_allclose(again.M, ra.M, atol=1e-9 * n)


def test_relaxed_projection_reduces_error_on_sparse_marginals():
    """n = 12 records, d = 30 binary attributes, all 2-way marginals released with Gaussian
    noise σ = 4 per cell: tables → ±1 moments → projection onto n·E_31 → tables. The moment
    error and the table error both shrink well below the noisy ones; the run is fast."""
    rng = np.random.default_rng(30)
    n, d = 12, 30
    B = (rng.random((n, d)) < 0.2).astype(float)
    tables = _direct_tables(B)
    noisy_tables = tables + rng.normal(0.0, 4.0, tables.shape)
    M = _pm1_moments(B)
    M_noisy = marginals_to_moments(noisy_tables, n=n)
    res = project_to_elliptope(M_noisy, n, rng=np.random.default_rng(0))
    off = ~np.eye(d + 1, dtype=bool)
    assert np.linalg.norm((res.M - M)[off]) < 0.5 * np.linalg.norm((M_noisy - M)[off])
    proj_tables = moments_to_marginals(res.M)
    assert np.linalg.norm(proj_tables - tables) < 0.5 * np.linalg.norm(noisy_tables - tables)
    assert res.gap <= 1e-3 * res.objective


# ---------------------------------------------------------------------------------
# 2-way marginals of binary attributes ↔ the (d+1)×(d+1) ±1 moment matrix
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seed,n,d,p", [(0, 1, 2, 0.5), (1, 37, 5, 0.3), (2, 500, 12, 0.1),
                                        (3, 2000, 25, 0.7)])
def test_marginal_moment_conversion_is_exact(seed, n, d, p):
    rng = np.random.default_rng(seed)
    B = (rng.random((n, d)) < p).astype(float)
    tables = _direct_tables(B)
    M = _pm1_moments(B)
    assert np.array_equal(marginals_to_moments(tables), M)
    assert np.array_equal(marginals_to_moments(tables.reshape(-1), d, n=n), M)
    assert np.array_equal(moments_to_marginals(M), tables)
    assert np.array_equal(marginals_to_moments(moments_to_marginals(M)), M)


def test_table_layout_is_the_marginal_workloads():
    """The flat tables are the answers of workloads.marginals([2]*d, 2) on the histogram
    (attribute 0 the most significant bit of the cell index)."""
    rng = np.random.default_rng(9)
    n, d = 60, 5
    B = (rng.random((n, d)) < 0.4).astype(int)
    h = np.bincount(B @ (1 << np.arange(d - 1, -1, -1)), minlength=2 ** d).astype(float)
    y = marginals([2] * d, 2).matvec(h)
    np.testing.assert_array_equal(y, _direct_tables(B).reshape(-1))
    np.testing.assert_array_equal(moments_to_marginals(_pm1_moments(B.astype(float))).reshape(-1), y)


def test_noisy_tables_give_the_least_squares_moments():
    """For inconsistent tables the conversion is the least-squares fit of the moment
    parameters (n, Σs_a, Σs_a s_b): compared with lstsq on the map L = W F⁺ built from the
    marginal workload W and the parity characters F over the 2^d cells."""
    d = 4
    cells = (np.arange(2 ** d)[:, None] >> np.arange(d - 1, -1, -1)[None, :]) & 1
    s = 2.0 * cells - 1.0
    pairs = marginal_subsets(d, 2)
    F = np.vstack([np.ones(2 ** d), s.T, np.array([s[:, a] * s[:, b] for a, b in pairs])])
    L = marginals([2] * d, 2).dense() @ np.linalg.pinv(F)
    y = np.random.default_rng(12).normal(5.0, 3.0, L.shape[0])
    theta = np.linalg.lstsq(L, y, rcond=None)[0]
    M = marginals_to_moments(y)
    np.testing.assert_allclose(M[0, 0], theta[0], atol=1e-12)
    np.testing.assert_allclose(np.diag(M), theta[0], atol=1e-12)
    np.testing.assert_allclose(M[0, 1:], theta[1:d + 1], atol=1e-12)
    np.testing.assert_allclose([M[a + 1, b + 1] for a, b in pairs], theta[d + 1:], atol=1e-12)


# ---------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------
def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="square"):
        project_second_moment(np.ones((2, 3)), 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        project_second_moment(np.array([[1.0, np.nan], [0.0, 1.0]]), 1.0)
    with pytest.raises(ValueError, match="trace"):
        project_second_moment(np.eye(2), 0.0)
    with pytest.raises(ValueError, match="trace"):
        project_second_moment(np.eye(2), math.inf, inequality=True)
    with pytest.raises(ValueError, match="square"):
        project_to_elliptope(np.ones((3,)), 1.0)
    with pytest.raises(ValueError, match="non-finite"):
        project_to_elliptope(np.full((3, 3), np.inf), 1.0)
    with pytest.raises(ValueError, match="n must be"):
        project_to_elliptope(np.eye(3), -1.0)
    with pytest.raises(ValueError, match="max_iters"):
        project_to_elliptope(np.eye(3), 1.0, max_iters=0)
    with pytest.raises(ValueError, match="d\\(d−1\\)/2"):
        marginals_to_moments(np.ones((4, 2, 2)))
    with pytest.raises(ValueError, match="not 5"):
        marginals_to_moments(np.ones((3, 2, 2)), 5)
    with pytest.raises(ValueError, match="shape"):
        marginals_to_moments(np.ones((3, 2, 3)))
    with pytest.raises(ValueError, match="3×3"):
        moments_to_marginals(np.eye(2))


# ---------------------------------------------------------------------------------
# scale (d = 100): the default (Dykstra start) run is ~0.2 s; the plain Frank–Wolfe of Dwork, Nikolov & Talwar 2014
# with 50 linear steps ~0.7–3 s on a loaded 2-core machine, so it is kept out of the default
# run. The time bounds are regression guards, generous for shared machines.
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dykstra_iters,max_iters", [
    (100, None),
    pytest.param(0, 50, marks=pytest.mark.slow),
])
def test_d100_runs_in_seconds(dykstra_iters, max_iters):
    rng = np.random.default_rng(100)
    n, d = 50, 100
    B = (rng.random((n, d)) < 0.3).astype(float)
    M = _pm1_moments(B)
    noisy = M + _sym_noise(rng, d + 1, 30.0)
    t0 = time.perf_counter()
    res = project_to_elliptope(noisy, n, dykstra_iters=dykstra_iters, max_iters=max_iters,
                               rel_gap_tol=0.0 if max_iters else 1e-3, rng=np.random.default_rng(0))
    elapsed = time.perf_counter() - t0
    off = ~np.eye(d + 1, dtype=bool)
    assert np.linalg.norm((res.M - M)[off]) < 0.5 * np.linalg.norm((noisy - M)[off])
    assert res.iterations == (max_iters or 1)
    assert res.gap <= (0.05 if max_iters else 1e-3) * res.objective
    print(f"d=100 dykstra_iters={dykstra_iters}: {res.iterations} FW iterations, {elapsed:.2f} s, "
          f"gap/f = {res.gap / res.objective:.2e}")
