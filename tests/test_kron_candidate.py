"""Per-factor standard strategies for Kronecker workloads under Laplace noise:
the objective factorizes exactly, the plan chooses the product, the verifier recomputes it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.planner.strategies import kron_candidate, per_factor_objective
from workloads import parse_workload


@pytest.mark.parametrize("family,norm", [("laplace", "gamma_f"), ("laplace", "gamma_2"),
                                         ("gaussian", "gamma_f")])
def test_objective_of_the_product_is_the_product_of_objectives(family, norm):
    leaves = [parse_workload(s).dense() for s in ("prefix:8", "vstack(identity:3,total:3)", "allrange:4")]
    name, fact = kron_candidate(leaves, family, norm)
    A, R = fact.A_dense(), fact.R_dense()
    np.testing.assert_allclose(R @ A, np.kron(np.kron(leaves[0], leaves[1]), leaves[2]), atol=1e-9)
    sens = np.max(np.abs(A).sum(axis=0) if family == "laplace" else np.linalg.norm(A, axis=0))
    err = np.linalg.norm(R) if norm == "gamma_f" else np.max(np.linalg.norm(R, axis=1))
    from factorize.factorization import Factorization

    per = np.prod([per_factor_objective(Factorization((r,), (a,)), family, norm)
                   for r, a in zip(fact.R_factors, fact.A_factors, strict=True)])
    assert sens * err == pytest.approx(per, rel=1e-12)


def test_laplace_kron_plan_takes_the_per_factor_product_and_verifies():
    spec = "kron(vstack(identity:6,total:6),prefix:16)"
    plan = build_plan(spec, "epsilon=1")
    choice = plan.provenance["strategy_choice"]
    per_factor = [n for n in choice["candidates"] if n.startswith("per-factor standard")]
    assert len(per_factor) == 1
    # the optimised Kronecker strategy (p-Identity factors) starts from no worse than the
    # per-factor standard choice, so it wins or ties
    assert choice["chosen"] == "optimized kronecker (seed 0)"
    assert choice["candidates"][choice["chosen"]] <= choice["candidates"][per_factor[0]]
    assert choice["candidates"][choice["chosen"]] <= min(choice["candidates"].values())
    assert verify_plan(plan).passed
    forged = dict(choice["candidates"])
    forged[choice["chosen"]] *= 0.9
    plan = dataclasses.replace(plan, provenance={**plan.provenance,
                                                 "strategy_choice": dict(choice, candidates=forged)})
    assert any(f.startswith("strategy choice") for f in verify_plan(plan).failures)
