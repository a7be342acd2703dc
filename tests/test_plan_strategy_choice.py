"""When the optimal γ_F factorization does not bind the plan's noise (Laplace under pure DP,
replace neighbours), the plan takes the best calibrated strategy among the optimum and the
standard candidates; under Gaussian add/remove noise the certified optimum is kept."""

from __future__ import annotations

import numpy as np
import pytest

from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.planner.strategies import candidate_factorizations
from workloads import parse_workload


@pytest.mark.parametrize("spec", ["prefix:16", "allrange:12", "marginals:2x3x2:2", "identity:5"])
def test_candidates_factor_the_workload_exactly(spec):
    W = parse_workload(spec).dense()
    cands = dict(candidate_factorizations(W))
    assert "histogram (identity strategy)" in cands and "W directly" in cands
    assert any(n.startswith("hierarchical") for n in cands) == spec.startswith(("prefix", "allrange", "identity"))
    for fact in cands.values():
        R, A = fact.R_factors[0], fact.A_factors[0]
        assert np.max(np.abs(R @ A - W)) <= 1e-10


def test_pure_dp_plan_takes_the_best_candidate_and_still_verifies():
    plan = build_plan("allrange:16", "epsilon=1")
    choice = plan.provenance["strategy_choice"]
    scores = choice["candidates"]
    assert choice["chosen"] == min(scores, key=scores.get)
    assert plan.expected_error["rmse"] == pytest.approx(min(scores.values()), rel=1e-12)
    # on all ranges the histogram strategy beats the γ_F optimum under Laplace noise by > 2×
    assert scores["optimal factorization"] > 2 * plan.expected_error["rmse"]
    check = verify_plan(plan, certificate=True)
    assert check.passed, check.failures
    # the certificate keeps the optimum's witness: a valid lower bound, now with a gap
    assert plan.bounds["lower"] <= plan.bounds["upper"] and plan.bounds["gap"] > 0.1


def test_replace_neighbours_may_take_a_tree():
    plan = build_plan("allrange:8", "epsilon=1,delta=1e-6", relation="replace")
    choice = plan.provenance["strategy_choice"]
    assert choice["chosen"].startswith("hierarchical tree")
    assert plan.expected_error["rmse"] < choice["candidates"]["optimal factorization"]
    assert verify_plan(plan, certificate=True).passed


def test_gaussian_add_remove_keeps_the_certified_optimum():
    plan = build_plan("allrange:16", "epsilon=1,delta=1e-6")
    assert plan.provenance["strategy_choice"] is None
    assert plan.bounds["gap"] <= 1e-6
