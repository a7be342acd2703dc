"""Analytic gradients of the pure-DP objectives against central finite differences, and the
objectives against their dense definition ‖A‖₁² tr(W (AᵀA)⁺ Wᵀ) (np.linalg.pinv, column L1
norms)."""

from __future__ import annotations

import numpy as np
import pytest

from factorize.pure_dp.evaluate import dense_laplace_objective, marginal_strategy_dense
from factorize.pure_dp.l1_marginal_weights import MarginalWeightsObjective, candidate_subsets
from factorize.pure_dp.p_identity import PIdentityObjective, p_identity_strategy
from factorize.pure_dp.structure import marginal_structure_of
from workloads import parse_workload

#: Central differences with step h have truncation error O(h²·f''') and rounding error
#: O(u·|f|/h); with h = 1e-5·(1 + |x|) both stay below 1e-7 relative to the gradient's norm.
FD_RTOL = 1e-6


def _fd_gradient(fun, x: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    for i in range(x.size):
        h = 1e-5 * (1.0 + abs(x[i]))
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (fun(x + e) - fun(x - e)) / (2.0 * h)
    return g


def _workload_gram(spec: str) -> tuple[np.ndarray, np.ndarray]:
    W = np.asarray(parse_workload(spec).dense(), dtype=np.float64)
    return W, W.T @ W


@pytest.mark.parametrize("spec,p", [("prefix:12", 3), ("allrange:9", 5), ("random:7x10:seed=3", 2)])
def test_p_identity_gradient_matches_finite_differences(spec: str, p: int) -> None:
    W, G = _workload_gram(spec)
    obj = PIdentityObjective(G, W.shape[0])
    rng = np.random.default_rng(11)
    theta = rng.random(p * W.shape[1])
    theta[::4] = 0.0  # entries on the bound: f is smooth there too (c_j = 1 + Σθ stays > 0)
    f, g = obj.value_and_grad(theta)
    fd = _fd_gradient(obj.value, theta)
    assert np.linalg.norm(g - fd) <= FD_RTOL * np.linalg.norm(fd)
    assert f == pytest.approx(dense_laplace_objective(W, p_identity_strategy(theta, W.shape[1])), rel=1e-11)


def test_p_identity_objective_equals_dense_definition_with_large_theta() -> None:
    W, G = _workload_gram("prefix:16")
    obj = PIdentityObjective(G, 16)
    theta = 50.0 * np.random.default_rng(2).random(4 * 16)
    A = p_identity_strategy(theta, 16)
    assert np.allclose(np.abs(A).sum(axis=0), 1.0, rtol=0, atol=1e-14)  # ‖A‖₁ = 1 by construction
    assert obj.value(theta) == pytest.approx(dense_laplace_objective(W, A), rel=1e-9)


@pytest.mark.parametrize("spec", ["marginals:2x3x2:2", "marginals_upto:3x2x4:2", "marginals:2x2x2x2:3"])
def test_marginal_weights_gradient_and_value(spec: str) -> None:
    fam = marginal_structure_of(spec)
    obj = MarginalWeightsObjective(fam, candidate_subsets(fam))
    theta = 0.2 + np.random.default_rng(5).random(obj.size)
    f, g = obj.value_and_grad(theta)
    fd = _fd_gradient(obj.value, theta)
    assert np.linalg.norm(g - fd) <= FD_RTOL * np.linalg.norm(fd)
    W = np.asarray(parse_workload(spec).dense(), dtype=np.float64)
    A = marginal_strategy_dense(fam.sizes, list(zip(theta, obj.subsets, strict=True)))
    assert f == pytest.approx(dense_laplace_objective(W, A), rel=1e-10)


def test_marginal_weights_objective_is_infinite_when_a_marginal_is_unsupported() -> None:
    fam = marginal_structure_of("marginals:2x3x2:2")
    obj = MarginalWeightsObjective(fam, candidate_subsets(fam))
    theta = np.zeros(obj.size)
    theta[obj.subsets.index((0,))] = 1.0  # only attribute 0 measured
    assert obj.value(theta) == float("inf")
