"""The re-checkable lower bound for pure-DP factorization mechanisms:
RMSE ≥ √2·γ_F(W)/ε under Laplace noise, checked against random and standard strategies
(an independent computation of each strategy's Laplace error) and refused when forged."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.plan.lower_bound import laplace_factorization_bound
from factorize.planner.strategies import tree_strategy
from factorize.privacy import ZCDP, PureDP
from workloads import parse_workload


def _laplace_rmse(W: np.ndarray, A: np.ndarray, eps: float) -> float:
    """Per-query RMSE of R = W·A⁺ with continuous Laplace noise at the L1 sensitivity."""
    R = W @ np.linalg.pinv(A)
    assert np.allclose(R @ A, W, atol=1e-9)
    delta1 = np.abs(A).sum(axis=0).max()
    return math.sqrt(2.0) * delta1 / eps * np.linalg.norm(R) / math.sqrt(W.shape[0])


@pytest.mark.parametrize("spec", ["prefix:32", "allrange:16", "kron(prefix:4,identity:4)"])
def test_no_strategy_beats_the_bound(spec):
    """Random full-rank strategies and b-ary trees all stay above √2·L/ε."""
    plan = build_plan(spec, "epsilon=0.5")
    bound = plan.bounds["laplace_factorization"]
    assert bound["measure"] == "rmse"
    W = parse_workload(spec).dense()
    N = W.shape[1]
    rng = np.random.default_rng(7)
    candidates = [np.eye(N), W] + [rng.standard_normal((N + j, N)) for j in range(0, 40, 4)]
    if spec.startswith("prefix") or spec.startswith("allrange"):
        candidates += [tree_strategy(N, b) for b in (2, 4, 8)]
    for A in candidates:
        assert _laplace_rmse(W, A, 0.5) >= bound["value"]
    assert plan.expected_error["rmse"] >= bound["value"]


def test_the_bound_is_tight_for_the_identity():
    """For identity:n the histogram's Laplace RMSE is √2/ε and γ_F = 1: the bound meets it
    (up to the certificate's gap and the downward rounding)."""
    b = laplace_factorization_bound("gamma_f", 1.0, PureDP(2.0), "add_remove")
    assert b["value"] == pytest.approx(math.sqrt(2.0) / 2.0, rel=1e-14) and b["value"] < math.sqrt(2) / 2
    plan = build_plan("identity:32", "epsilon=2")
    lap = plan.bounds["laplace_factorization"]["value"]
    assert lap == pytest.approx(math.sqrt(2.0) / 2.0, rel=1e-6)
    assert plan.expected_error["rmse"] / lap - 1.0 < 2e-3  # the lattice's inflation only


def test_only_where_it_applies():
    assert laplace_factorization_bound("gamma_f", 1.0, ZCDP(0.5), "add_remove") is None
    assert laplace_factorization_bound("gamma_f", 1.0, PureDP(1.0), "replace") is None
    assert laplace_factorization_bound("approx_gamma_2", 1.0, PureDP(1.0), "add_remove") is None
    assert "laplace_factorization" not in build_plan("prefix:8", "rho=0.5").bounds or \
        build_plan("prefix:8", "rho=0.5").bounds["laplace_factorization"] is None
    g2 = build_plan("prefix:16", "epsilon=1", norm="gamma_2").bounds["laplace_factorization"]
    assert g2["measure"] == "per_query_std_max"


def test_a_forged_bound_is_refused():
    plan = build_plan("prefix:16", "epsilon=1")
    assert verify_plan(plan).passed
    genuine = plan.bounds["laplace_factorization"]
    for forged in (dict(genuine, value=genuine["value"] * 1.5), dict(genuine, measure="per_query_std_max"),
                   dict(genuine, binds="every mechanism")):
        failures = verify_plan(dataclasses.replace(
            plan, bounds={**plan.bounds, "laplace_factorization": forged})).failures
        assert any("laplace_factorization" in f for f in failures), forged
    # a plan written before the bound states none
    assert verify_plan(dataclasses.replace(plan, bounds={**plan.bounds, "laplace_factorization": None})).passed
