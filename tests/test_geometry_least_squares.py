"""Frank–Wolfe least-squares projection onto n·K, against cvxpy's QP and its own gap."""

from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from factorize.geometry.least_squares import project_least_squares
from workloads import parse_workload


@pytest.mark.parametrize("symmetric", [False, True])
def test_matches_cvxpy_qp(symmetric):
    W = parse_workload("allrange:8").dense()
    rng = np.random.default_rng(0)
    x_true = rng.multinomial(20, np.ones(8) / 8).astype(float)
    y_noisy = W @ x_true + rng.normal(0, 5, W.shape[0])
    res = project_least_squares(W, y_noisy, 20.0, symmetric=symmetric, gap_tol=1e-9, max_iters=200000)
    x = cp.Variable(8)
    cons = [cp.norm1(x) <= 20] if symmetric else [x >= 0, cp.sum(x) == 20]
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W @ x - y_noisy)), cons)
    prob.solve(solver=cp.CLARABEL)
    f = 0.5 * float(np.sum((res.y - y_noisy) ** 2))
    assert f - prob.value <= res.gap + 1e-6  # the FW gap certifies the suboptimality
    assert f == pytest.approx(prob.value, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(res.y, W @ res.x, atol=1e-9)
    if not symmetric:
        assert np.all(res.x >= -1e-12) and res.x.sum() == pytest.approx(20.0)


def test_projection_never_increases_the_error_and_helps_when_sparse():
    """y ∈ n·K, so ||ŷ − y|| ≤ ||ỹ − y|| (projection onto a convex set containing y); with
    n = 10 records and 120 marginal queries the error drops several-fold."""
    W = parse_workload("marginals:2x2x2x2x2x2:2").dense()
    rng = np.random.default_rng(1)
    x_true = np.zeros(64)
    x_true[rng.integers(0, 64, 10)] += 1
    y = W @ x_true
    y_noisy = y + rng.normal(0, 3, y.size)
    res = project_least_squares(W, y_noisy, 10.0, gap_tol=1e-3, max_iters=20000)
    assert np.linalg.norm(res.y - y) <= np.linalg.norm(y_noisy - y)
    assert np.linalg.norm(res.y - y) < 0.5 * np.linalg.norm(y_noisy - y)


def test_clarkson_budget_and_bad_input():
    """Without a gap target the iteration count is Clarkson's: T = ⌈2·diam²/α⌉ − 2 with
    diam² = 4n²·max||w_j||² (prefix:16: max||w_j||² = 16, n = 5 → 1600)."""
    W = parse_workload("prefix:16").dense()
    y_noisy = np.random.default_rng(2).normal(0, 10, 16)
    res = project_least_squares(W, y_noisy, 5.0, alpha=16.0, gap_tol=-np.inf)
    assert res.iterations == 2 * 1600 // 16 - 2
    assert res.clarkson_bound <= 16.0
    with pytest.raises(ValueError, match="finite"):
        project_least_squares(W, np.full(16, np.nan), 5.0)
    with pytest.raises(ValueError, match="positive"):
        project_least_squares(W, np.ones(16), 0.0)
