"""The shared Kronecker strategy under Gaussian noise (``structured.shared_kron_gaussian``):
the alternating descent never increases its objective, the objective is the dense truth, the
``kron`` plan verifies and states the dense error, and the Gaussian auto route is never worse
than the union plan."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.privacy import sampled_variance
from factorize.structured.shared_kron_gaussian import optimize_kron_l2
from factorize.structured.workload_blocks import workload_blocks
from workloads import parse_workload

#: matrix factors on both attributes, a summed-out attribute in some blocks
UNION = "vstack(kron(identity:4,prefix:8),kron(total:4,identity:8),kron(identity:4,total:8))"
#: three attributes, the last summed out by every block (measured summed out)
SUMMED = "vstack(kron(prefix:4,total:3,total:2),kron(total:4,allrange:3,total:2),kron(identity:4,identity:3,total:2))"
#: weighted blocks, ranges on both attributes
WEIGHTED = "vstack(kron(allrange:8,identity:4),scale(2,kron(identity:8,allrange:4)),kron(prefix:8,prefix:4))"
SPECS = [UNION, SUMMED]


def _blocks(spec: str):
    from factorize.plan.rules import default_domain

    W = parse_workload(spec)

    dom = default_domain(W)
    return W, list(dom.sizes), workload_blocks(W, dom.sizes)


def _dense_objective(W: np.ndarray, factors: list[np.ndarray]) -> float:
    """``Δ₂² ‖W A⁺‖_F²`` for the dense ``A = ⊗_j A_j`` (Δ₂ its largest column norm)."""
    A = factors[0]
    for F in factors[1:]:
        A = np.kron(A, F)
    delta2 = float(np.max(np.sum(A * A, axis=0)))
    RA = W @ np.linalg.pinv(A)
    return delta2 * float(np.sum(RA * RA))


@pytest.mark.parametrize("spec", [UNION, SUMMED, WEIGHTED])
def test_descent_never_increases_and_is_the_dense_objective(spec):
    W, sizes, wb = _blocks(spec)
    res = optimize_kron_l2(sizes, wb)
    h = res.history
    assert len(h) == res.sweeps + 1 and res.sweeps >= 1
    assert all(b <= a for a, b in zip(h, h[1:], strict=False)), h
    assert res.value == h[-1]
    truth = _dense_objective(W.dense(), res.factors)
    assert abs(res.value - truth) <= 1e-9 * truth, (res.value, truth)


def test_descent_improves_on_its_uniform_start():
    """On UNION the per-attribute start is not the joint optimum: the sweeps lower it."""
    W, sizes, wb = _blocks(UNION)
    res = optimize_kron_l2(sizes, wb)
    assert res.history[-1] < res.history[0] * (1 - 1e-4), res.history


def test_sweep_cap_is_respected():
    W, sizes, wb = _blocks(UNION)
    res = optimize_kron_l2(sizes, wb, max_sweeps=1)
    assert res.sweeps == 1 and len(res.history) == 2


@pytest.mark.parametrize("spec", SPECS + [WEIGHTED])
def test_gaussian_kron_plan_verifies_and_states_the_dense_error(spec):
    plan = build_structured_plan(spec, "rho=0.5", strategy="kron")
    assert plan.family == "kron" and plan.noise.family == "gaussian"
    assert plan.provenance["strategy_choice"]["search"]["family"] == "shared kronecker (L2)"
    check = verify_structured_plan(plan)
    assert check.passed, check.failures
    W = parse_workload(spec).dense()
    A = plan.strategy.measured().dense()
    assert A.shape[1] == W.shape[1] <= 512
    delta2 = math.sqrt(float(np.max(np.sum(A * A, axis=0))))
    RA = W @ np.linalg.pinv(A)
    dense_total = delta2 ** 2 * float(np.sum(RA * RA))
    # the plan's total variance per unit of the noise's variance per unit Δ₂²
    assert abs(plan.noise.base_sensitivity - delta2) <= 1e-9 * delta2  # certified Δ₂ = dense
    v = sampled_variance(plan.noise)
    stated = plan.expected_error["total_variance"] / v * plan.noise.base_sensitivity ** 2
    assert abs(stated - dense_total) <= 1e-9 * dense_total, (stated, dense_total)
    score = plan.provenance["strategy_choice"]["gaussian_rmse_per_sigma"]
    truth = math.sqrt(dense_total / W.shape[0])
    assert abs(score - truth) <= 1e-9 * truth, (score, truth)
    assert abs(plan.certificate["achieved"] - truth) <= 1e-9 * truth


@pytest.mark.parametrize("spec", [UNION, WEIGHTED])
def test_gaussian_auto_is_never_worse_than_union(spec):
    union = build_structured_plan(spec, "rho=0.5", strategy="union")
    auto = build_structured_plan(spec, "rho=0.5")
    check = verify_structured_plan(auto)
    assert check.passed, check.failures
    search = auto.provenance["strategy_search"]
    scores = {r["family"]: r["score"] for r in search["tried"]}
    assert {"union", "kron", "subset_algebra"} <= set(scores)
    assert search["chosen"] == auto.family
    assert auto.expected_error["rmse"] <= union.expected_error["rmse"] * (1 + 1e-12)
    assert all(v >= scores[auto.family] for v in scores.values())
    # the union family measured alone scores what the search recorded for it
    assert abs(scores["union"] - union.expected_error["rmse"]) <= 1e-12 * scores["union"]


@pytest.mark.parametrize("where", ["chosen", "runner-up"])
def test_a_forged_gaussian_choice_score_is_refused(tmp_path, where):
    # the verifier re-derives the chosen family's score and checks no other family is stated
    # better
    from factorize.cli import main
    from tests.plan_fixtures import forge_structured_plan, structured_refusal

    src, dst = tmp_path / "g.plan", tmp_path / "forged.plan"
    assert main(["plan", "--workload", "vstack(scale(3,kron(total:16,allrange:32)),kron(allrange:16,allrange:32))",
                 "--privacy", "epsilon=1,delta=1e-6", "--out", str(src)]) == 0

    def edit(body, arrays):
        search = body["provenance"]["strategy_search"]
        tried = search["tried"]
        mine = next(r for r in tried if r["family"] == search["chosen"])
        other = next(r for r in tried if r["family"] != search["chosen"] and r["score"] is not None)
        if where == "chosen":
            mine["score"] *= 0.9
        else:
            other["score"] = mine["score"] * 0.5

    forge_structured_plan(src, dst, edit)
    assert "strategy_search" in structured_refusal(dst)
