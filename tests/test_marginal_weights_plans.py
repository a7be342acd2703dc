"""Marginal-weight structured plans (OPT_M as a plan that verifies and runs).

Independent truths: the dense least-squares reconstruction ``W (AᵀA)⁺ Aᵀ`` of the dense
strategy, the dense row norms of R, the pure-DP objective evaluated in the subset algebra
(``pure_dp.evaluate.evaluate_marginal_weights``), and the exact arithmetic of the basis check
(a perturbed reconstruction's dense residual never exceeds the certified β).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from factorize.kinds.structured.build import build_structured_plan
from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
from factorize.kinds.structured.verify import verify_structured_plan
from factorize.structured.blocks import StructureError, Term
from factorize.structured.identity import reconstruction_residual
from factorize.structured.reconstruction import StructuredReconstruction
from factorize.structured.workload_blocks import workload_blocks
from tests.plan_fixtures import forge_structured_plan as _forge
from tests.plan_fixtures import structured_refusal as _refusal
from workloads.spec import parse_workload

IDTOTAL = "kron(vstack(identity:3,total:3),vstack(identity:4,total:4),vstack(identity:2,total:2))"
MARGINALS = "marginals:3x2x4x2:2"


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("mw")
    out = {}
    for name, spec, rel in (("idtotal", IDTOTAL, "add_remove"), ("marginals", MARGINALS, "add_remove"),
                            ("replace", MARGINALS, "replace")):
        plan = build_structured_plan(spec, "epsilon=1", strategy="marginal_weights", relation=rel)
        save_structured_plan(plan, d / f"{name}.plan")
        out[name] = (spec, d / f"{name}.plan")
    return out


def _dense(plan):
    A = plan.strategy.measured().dense()
    R = plan.reconstruction.rebased(plan.strategy.measured()).dense()
    return A, R


def test_reconstruction_is_the_dense_least_squares_one(plans):
    for name, (spec, path) in plans.items():
        plan = load_structured_plan(path)
        assert plan.family == "marginal_weights"
        W = parse_workload(spec).dense()
        A, R = _dense(plan)
        ols = W @ np.linalg.pinv(A.T @ A) @ A.T
        assert np.abs(R - ols).max() <= 1e-10 * max(1.0, np.abs(ols).max()), name
        assert np.abs(R @ A - W).max() <= 1e-12, name
        # several terms read one strategy block: the variances include their cross products
        assert plan.reconstruction.shared
        sq = plan.reconstruction.row_sq_norms()
        assert np.allclose(sq, np.sum(R * R, axis=1), rtol=1e-12, atol=1e-14), name


def test_error_equals_the_pure_dp_objective_in_the_algebra(plans):
    """The plan's ``Δ₁·‖R‖_F/√k`` (its RMSE per unit of noise std, times its sensitivity)
    against the subset algebra's ``√(‖A‖₁→₁² tr(W(AᵀA)⁺Wᵀ)/k)`` for the same weights."""
    from factorize.pure_dp.evaluate import evaluate_marginal_weights
    from factorize.pure_dp.structure import marginal_structure_of

    for name in ("idtotal", "marginals"):
        spec, path = plans[name]
        plan = load_structured_plan(path)
        fam = marginal_structure_of(parse_workload(spec))
        support = [(float(t), tuple(S)) for t, S in plan.provenance["strategy_choice"]["search"]["support"]]
        err = evaluate_marginal_weights(fam, support)
        e = plan.expected_error
        mine = math.sqrt(2.0) * plan.noise.base_sensitivity * e["rmse"] / math.sqrt(e["noise_variance"])
        assert mine == pytest.approx(err.rmse, rel=1e-9), name


def test_plans_verify_and_forgeries_are_refused(plans, tmp_path):
    spec, path = plans["idtotal"]
    check = verify_structured_plan(load_structured_plan(path))
    assert check.passed, check.failures

    def drop_term(body, arrays):
        body["strategy"]["terms"].pop(3)
        arrays["union.term_scale"] = np.delete(arrays["union.term_scale"], 3)

    def nudge_term(body, arrays):
        t = arrays["union.term_scale"].copy()
        t[5] *= 1 + 1e-6
        arrays["union.term_scale"] = t

    def heavier_block(body, arrays):
        b = arrays["union.block_scale"].copy()
        b[0] *= 1.5
        arrays["union.block_scale"] = b

    def better_runner_up(body, arrays):
        body["provenance"]["strategy_choice"]["runners_up"] = [
            {"family": "union", "rmse_at_epsilon_1": 0.5}]

    for edit, expect in ((drop_term, "W = R·A"), (nudge_term, "W = R·A"),
                         (heavier_block, ""), (better_runner_up, "runner-up")):
        dst = tmp_path / f"{edit.__name__}.plan"
        _forge(path, dst, edit)
        msg = _refusal(dst)
        assert expect in msg, (edit.__name__, msg)


def test_basis_check_is_certified_on_perturbed_reconstructions():
    """β bounds the dense residual of reconstructions perturbed term by term (the check is an
    upper bound, and it is not vacuous: β tracks the perturbation)."""
    plan = build_structured_plan(IDTOTAL, "epsilon=1", strategy="marginal_weights")
    W = parse_workload(IDTOTAL)
    wblocks = workload_blocks(W, plan.domain.sizes)
    measured = plan.strategy.measured()
    rec = plan.reconstruction.rebased(measured)
    A = measured.dense()
    Wd = W.dense()
    rng = np.random.default_rng(0)
    for delta in (0.0, 1e-13, 1e-9, 1e-4):
        terms = [Term(t.out_block, t.in_block, t.scale * (1 + delta * rng.standard_normal()), t.attrs,
                      t.names) for t in rec.terms]
        r2 = StructuredReconstruction(rec.out_rows, terms, rec.arrays, measured)
        beta = reconstruction_residual(r2, wblocks)
        true = float(np.abs(r2.dense() @ A - Wd).max())
        assert true <= beta, (delta, true, beta)
        assert beta <= max(1e-12, 50 * true), (delta, true, beta)


def test_a_strategy_that_misses_an_interaction_is_refused():
    from factorize.structured import marginal_weights_build as marginal_weights

    W = parse_workload(MARGINALS)
    sizes = (3, 2, 4, 2)
    wblocks = workload_blocks(W, sizes)
    # every 1-way marginal but no 2-way one: the 2-way workload is outside the row space
    with pytest.raises(StructureError, match="no chosen subset covers"):
        marginal_weights.build(sizes, wblocks, [(1.0, (j,)) for j in range(4)], "gamma_f")


def test_laplace_auto_picks_the_lower_error_family_and_says_so():
    plan = build_structured_plan(IDTOTAL, "epsilon=1")
    search = plan.provenance["strategy_search"]
    assert search["chosen"] == plan.family == "marginal_weights"
    scores = {r["family"]: r["score"] for r in search["tried"]}
    assert scores["marginal_weights"] == plan.expected_error["rmse"]
    assert all(v is None or v >= scores["marginal_weights"] for v in scores.values())
    assert "union" in scores
    choice = plan.provenance["strategy_choice"]  # the family's own search record
    # the score is before the lattice rounding's inflation (here 3·10⁻⁵: γ·spread/Δ)
    inflation = plan.noise.sensitivity / plan.noise.base_sensitivity
    assert inflation - 1 < 1e-4
    # (and the discrete Laplace variance bound differs from 2b² by < 10⁻⁶)
    assert choice["rmse_at_epsilon_1"] * inflation == pytest.approx(plan.expected_error["rmse"], rel=1e-6)
    lines = "\n".join(plan.summary_lines())
    assert "chosen marginal_weights" in lines and "  union  " in lines
    # reproducible from the recorded seed
    again = build_structured_plan(IDTOTAL, "epsilon=1", search_seed=search["seed"])
    assert np.array_equal(again.encoding["union.block_scale"], plan.encoding["union.block_scale"])


def test_run_end_to_end_and_monte_carlo_variance(plans, tmp_path):
    """The executor's release equals R(γq + Y) densely; over 600 test-mode releases the
    empirical variance of every answer matches the stated std error (χ² band)."""
    from scipy import stats

    from factorize.executor.output import read_answers
    from factorize.executor.pipeline import run
    from factorize.executor.structured import measure as structured_measure
    from factorize.executor.structured import release
    from factorize.privacy import TestRandom, sample_lattice
    from factorize.structured.strategy import marginal_of

    spec, path = plans["idtotal"]
    sizes = (3, 4, 2)
    rng = np.random.default_rng(3)
    codes = np.column_stack([rng.integers(0, n, 400) for n in sizes])
    data = tmp_path / "data.csv"
    data.write_text("x0,x1,x2\n" + "\n".join(",".join(map(str, r)) for r in codes) + "\n")
    out = tmp_path / "answers.csv"
    rel = run(str(path), str(data), str(out), seed=11)
    plan = load_structured_plan(path)
    A, R = _dense(plan)
    h = np.bincount(np.ravel_multi_index(codes.T, sizes), minlength=math.prod(sizes))
    q = np.rint(A @ h / plan.noise.grid)
    Y = sample_lattice(np.zeros(q.size, dtype=np.int64), plan.noise, TestRandom(11))
    dense = R @ (plan.noise.grid * q + Y)
    assert np.abs(rel.estimate - dense).max() <= 1e-9 * max(1.0, np.abs(dense).max())
    cols, meta = read_answers(out)
    assert meta["test_mode"] is True
    truth = parse_workload(spec).dense() @ h
    assert np.mean((cols["ci_low"] <= truth) & (truth <= cols["ci_high"])) >= 0.9
    assert meta["ci"]["n_upper"] < 10 * len(codes)  # n bounded from the release, not 2^53

    check = verify_structured_plan(plan)

    class Tables(dict):
        n_records = int(h.sum())

    tables = Tables({T: marginal_of(h, sizes, T) for T in plan.strategy.supports()})
    qm = structured_measure(plan, tables)
    runs = 600
    est = np.empty((runs, plan.shape[0]))
    for r in range(runs):
        est[r] = release(plan, check, qm, TestRandom(500 + r)).estimate
    se = release(plan, check, qm, TestRandom(0)).std_error
    ratio = est.var(axis=0, ddof=1) / se ** 2
    k = se.size
    lo = stats.chi2.ppf(0.005 / k, runs - 1) / (runs - 1)
    hi = stats.chi2.ppf(1 - 0.005 / k, runs - 1) / (runs - 1)
    # Laplace noise has heavier tails than the χ² band assumes: widen by its kurtosis (×2)
    assert np.all(ratio >= 1 - 2 * (1 - lo)) and np.all(ratio <= 1 + 2 * (hi - 1)), (ratio.min(), ratio.max())


def test_cli_plans_the_idtotal_product_structured(tmp_path):
    """``factorize plan`` under Laplace noise sends a workload of marginals too large to
    densify to the structured route, where marginal weights win; ``inspect`` says so."""
    from factorize.cli.plan import main

    out = tmp_path / "p.plan"
    spec = "kron(" + ",".join(f"vstack(identity:{n},total:{n})" for n in (20, 30, 7, 4, 2)) + ")"
    assert main(["plan", "--workload", spec, "--privacy", "epsilon=1", "--out", str(out)]) == 0
    plan = load_structured_plan(out)
    assert plan.family == "marginal_weights"
    assert verify_structured_plan(plan).passed


def test_marginal_workloads_carry_the_marginal_algebra_certificate(plans):
    """On a stack of marginals the lower bound is the marginal planner's re-verified γ_F
    optimum (not the per-factor product, 1 for identities); a larger stated lower is refused."""
    from factorize.planner.marginal_optimum import solve_marginals
    from factorize.structured import marginal_weights_build as marginal_weights

    spec, path = plans["marginals"]
    plan = load_structured_plan(path)
    assert plan.certificate["method"] == marginal_weights.CERTIFICATE_MARGINAL
    assert plan.certificate["lower"] == pytest.approx(solve_marginals(spec).lower, rel=1e-12)
    assert plan.certificate["lower"] > 1.5
    lap = plan.certificate["laplace_factorization"]["value"]
    assert lap == pytest.approx(math.sqrt(2) * plan.certificate["lower"], rel=1e-12)
    assert verify_structured_plan(plan).passed
    plan = dataclasses.replace(plan, certificate={**plan.certificate,
                                                  "lower": plan.certificate["lower"] * 1.001})
    assert not verify_structured_plan(plan).passed


def test_search_reuses_the_union_certificate_and_it_equals_the_familys_own():
    """In the strategy search the marginal-weights plan of a union that is not made of
    marginals carries the union family's certificate (the k×k trace bound is formed once); its
    lower bound equals the one the family computes on its own, and it re-verifies."""
    from factorize.structured.marginal_weights_build import certificate
    from factorize.structured.union import CERTIFICATE, CERTIFICATE_GRAM
    from factorize.structured.workload_blocks import workload_blocks
    from workloads import parse_workload

    spec = "vstack(kron(prefix:8,total:6),kron(total:8,prefix:6),kron(identity:8,prefix:6))"
    searched = build_structured_plan(spec, "epsilon=1")
    tried = {r["family"] for r in searched.provenance["strategy_search"]["tried"]}
    assert "marginal_weights" in tried
    alone = build_structured_plan(spec, "epsilon=1", strategy="marginal_weights",
                                  memo={})
    own, _ = certificate(workload_blocks(parse_workload(spec), [8, 6]), "gamma_f", None,
                         parse_workload(spec))
    memo: dict = {}
    build_structured_plan(spec, "epsilon=1", strategy="union", memo=memo)
    reused = build_structured_plan(spec, "epsilon=1", strategy="marginal_weights", memo=memo)
    assert reused.certificate["method"] in (CERTIFICATE, CERTIFICATE_GRAM)
    # prefix factors leave no symmetry to reduce by: no symmetry bound, the family's own stands
    assert "symmetry" not in reused.certificate
    for plan in (reused, alone):  # the family's own bound, or the subspace bound above it
        sub = plan.certificate.get("subspace")
        if sub is None:
            assert plan.certificate["lower"] == pytest.approx(own["lower"], rel=1e-12)
        else:
            assert plan.certificate["lower"] == sub["lower"] > own["lower"]
    assert reused.certificate["lower"] == alone.certificate["lower"]
    assert verify_structured_plan(reused).passed
