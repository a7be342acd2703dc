"""The first hour's crashes, each as a regression at the command line.

* ``plan --workload marginals:2x5:2 --privacy epsilon=1`` died with ``AttributeError: nit``
  (scipy ≥ 1.17 leaves ``nit`` out of an L-BFGS-B result that stops at once);
* ``report PLAN`` died for every structured plan (``'StructuredPlan' … no attribute 'bounds'``);
* ``kron(allrange:64,allrange:64)`` (N = 4096, k = 4.3M) was refused: the any-mechanism bound
  densified it;
* a union of Kronecker products with k ≫ N went to the dense route (k·N·N work, a 300 MB R).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.cli import main
from factorize.kinds import load_plan


def _plan(tmp_path, spec: str, privacy: str, *extra: str, name: str = "p.plan"):
    out = tmp_path / name
    assert main(["plan", "--workload", spec, "--privacy", privacy, "--out", str(out), *extra]) == 0
    return out


def test_lbfgsb_start_at_the_optimum_takes_zero_iterations():
    """A start that already meets the tolerances: scipy returns no ``nit``; zero iterations."""
    from factorize.pure_dp.optimizer import lbfgsb

    def fun(x):
        return float(np.sum((x - 1.0) ** 2)), 2.0 * (x - 1.0)

    x, value, iterations = lbfgsb(fun, np.ones(4), maxiter=50)
    assert iterations == 0 and value == 0.0
    np.testing.assert_array_equal(x, np.ones(4))


def test_pure_dp_full_cross_table_plans_and_verifies(tmp_path):
    """marginals:2x5:2 is the full 2×5 table: the identity strategy is optimal, so the Laplace
    plan's RMSE is the Laplace standard deviation √2/ε of one cell (L1 sensitivity 1)."""
    p = _plan(tmp_path, "marginals:2x5:2", "epsilon=1")
    assert main(["verify", str(p)]) == 0
    plan = load_plan(p)
    assert plan.noise.family == "laplace"
    assert plan.expected_error["rmse"] == pytest.approx(math.sqrt(2.0), rel=1e-3)


@pytest.mark.parametrize("strategy,privacy", [("residual", "epsilon=1,delta=1e-6"),
                                              ("union", "rho=0.5"),
                                              ("marginal_weights", "epsilon=1")])
def test_report_of_every_structured_family(tmp_path, strategy, privacy):
    """The report of a structured plan quotes the plan's own certificate and errors, and its
    per-query standard deviations equal √v·‖r_i‖ from the densified reconstruction."""
    from factorize.report.plan_report import _structured_accuracy, plan_report

    p = _plan(tmp_path, "marginals:3x4x2:1", privacy, "--strategy", strategy)
    out = tmp_path / "r.md"
    assert main(["report", str(p), "--out", str(out), "--no-baselines"]) == 0
    plan = load_plan(p)
    assert plan.family == strategy
    text = out.read_text()
    c, e = plan.certificate, plan.expected_error
    assert f"{c['lower']:.10g}" in text and f"{c['upper']:.10g}" in text
    assert f"{e['rmse']:.6g}" in text and "structured factorization" in text
    rep = plan_report(plan, baselines=False)
    assert rep.numbers["lower"] == c["lower"] and rep.numbers["rmse"] == e["rmse"]
    assert rep.numbers["strategy_rows"] == plan.strategy.m
    std = _structured_accuracy(plan).std
    R = plan.reconstruction.dense()
    independent = math.sqrt(e["noise_variance"]) * np.linalg.norm(R, axis=1)
    np.testing.assert_allclose(std, independent, rtol=1e-12)
    assert std.max() == pytest.approx(e["per_query_std_max"], rel=1e-12)


def test_large_kronecker_product_plans_factor_by_factor(tmp_path):
    """kron(allrange:64,allrange:64): 4 326 400 queries over 4096 cells — planned per factor
    (two 2080×64 solves), the Kronecker product certified, never densified. γ_F of a Kronecker
    product is the product of the factors' (MATH.md): the plan's certificate equals the square
    of allrange:64's own."""
    p = _plan(tmp_path, "kron(allrange:64,allrange:64)", "epsilon=1,delta=1e-6")
    one = _plan(tmp_path, "allrange:64", "epsilon=1,delta=1e-6", name="one.plan")
    assert main(["verify", str(p)]) == 0
    plan, factor = load_plan(p), load_plan(one)
    assert plan.shape == (2080 ** 2, 4096) and len(plan.factorization.A_factors) == 2
    assert plan.bounds["any_mechanism"] is None
    assert plan.bounds["lower"] == pytest.approx(factor.bounds["lower"] ** 2, rel=1e-9)
    assert plan.bounds["upper"] == pytest.approx(factor.bounds["upper"] ** 2, rel=1e-9)


def test_union_with_many_more_queries_than_cells_goes_structured(tmp_path):
    """vstack(scale(3,kron(total:16,allrange:32)),kron(allrange:16,allrange:32)): k = 72 336,
    N = 512 — under Gaussian noise a structured union plan (per-block Kronecker factors), not
    the dense route's 72 336 × 512 matrices."""
    spec = "vstack(scale(3,kron(total:16,allrange:32)),kron(allrange:16,allrange:32))"
    p = _plan(tmp_path, spec, "epsilon=1,delta=1e-6")
    plan = load_plan(p)
    # Gaussian auto keeps the better of the union family and one shared Kronecker strategy
    assert type(plan).__name__ == "StructuredPlan" and plan.family in ("union", "kron")
    assert plan.shape == (528 + 136 * 528, 512)
    assert p.stat().st_size < 2_000_000
    assert main(["verify", str(p)]) == 0



@pytest.mark.parametrize("privacy", ["epsilon=1", "rho=0.1", "epsilon=1,delta=1e-6"])
def test_a_workload_invariant_under_replace_neighbours_is_refused_with_its_reason(privacy, tmp_path):
    # total:16 under replace neighbours: the plan was built under pure DP and then refused by
    # its own verifier ("math domain error"), and refused as "zero sensitivity" under zCDP
    from factorize.cli import main

    out = tmp_path / "t.plan"
    assert main(["plan", "--workload", "total:16", "--privacy", privacy, "--neighbouring",
                 "replace", "--out", str(out)]) == 2
    assert not out.exists()
    assert main(["plan", "--workload", "vstack(total:8,prefix:8)", "--privacy", privacy,
                 "--neighbouring", "replace", "--out", str(out)]) == 0
    assert main(["verify", str(out)]) == 0


def test_a_laplace_union_over_thousands_of_cells_goes_to_the_structured_families(tmp_path):
    # vstack(kron(prefix:64,total:64),kron(total:64,prefix:64)) under pure DP, N = 4,096: the
    # dense route ran for over 20 minutes; the structured families plan it in about a second
    from factorize.kinds.structured.plan import StructuredPlan

    out = tmp_path / "u.plan"
    assert main(["plan", "--workload", "vstack(kron(prefix:64,total:64),kron(total:64,prefix:64))",
                 "--privacy", "epsilon=1", "--out", str(out)]) == 0
    plan = load_plan(out)
    assert isinstance(plan, StructuredPlan) and plan.family in ("kron", "union", "marginal_weights")
    assert main(["verify", str(out)]) == 0
