"""Post-processing of marginal tables (``factorize.postprocess``): the consistent projection
against dense least squares, ``nonneg`` (non-negative, consistent, one total; equal to the dense
projection of the histogram on a decomposable family) and ``integer`` (integer tables of one
total agreeing exactly where they share attributes), the dense ``integer``, and the plan-time
option (recorded, verified, refused where a plan cannot serve it)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from factorize.executor.postprocess import integer_consistent, nonneg_consistent
from factorize.postprocess.consistency import Consistency
from factorize.postprocess.errors import PostprocessError
from factorize.postprocess.nonneg import project_nonneg
from factorize.postprocess.raking import RAKE_TOL
from factorize.postprocess.rounding import controlled_round, round_rows, round_tables
from factorize.postprocess.tables import marginal, marginal_layout
from workloads.spec import parse_workload

# (spec, sizes): 2-way of 3 attributes (a cycle), ≤2-way, a chain {a,b},{b,c} with a repeated
# and a nested table, and 3-way tables (a level with three parents)
CHAIN = ("vstack(kron(identity:2,identity:3,total:4),kron(total:2,identity:3,identity:4),"
         "kron(total:2,identity:3,identity:4),kron(total:2,identity:3,total:4))")
CASES = [("marginals:2x3x4:2", (2, 3, 4)), ("marginals_upto:3x2x4x5:2", (3, 2, 4, 5)),
         (CHAIN, (2, 3, 4)), ("marginals:2x3x2x3:3", (2, 3, 2, 3))]


def _release(spec, sizes, seed, sigma=3.0, rate=1.0):
    """(layout, dense W, true histogram, noisy answers) of a small workload."""
    W = parse_workload(spec)
    rng = np.random.default_rng(seed)
    Wd = W.dense()
    h = rng.poisson(rate, size=Wd.shape[1]).astype(np.float64)
    return marginal_layout(W, sizes), Wd, h, Wd @ h + sigma * rng.normal(size=Wd.shape[0])


def _disagreement(layout, tables):
    """The largest difference between two tables on the attributes they share."""
    worst = 0.0
    for (S, s), (T, t) in itertools.combinations(zip(layout.tables, tables, strict=True), 2):
        shared = tuple(j for j in S if j in T)
        worst = max(worst, float(np.abs(marginal(s, S, shared) - marginal(t, T, shared)).max()))
    return worst


@pytest.mark.parametrize(("spec", "sizes"), CASES)
def test_the_consistent_projection_is_weighted_least_squares_over_histograms(spec, sizes):
    layout, _, _, y = _release(spec, sizes, 0)
    b, c = layout.targets(y)
    c = c * np.random.default_rng(1).uniform(0.5, 2.0, size=c.size)
    mu = Consistency(sizes, layout.tables, c).project(b)
    Ms = [parse_workload("kron(" + ",".join(f"identity:{n}" if j in T else f"total:{n}"
                                             for j, n in enumerate(sizes)) + ")").dense()
          for T in layout.tables]
    A = np.vstack([math.sqrt(w) * M for w, M in zip(c, Ms, strict=True)])
    rhs = np.concatenate([math.sqrt(w) * t.ravel() for w, t in zip(c, b, strict=True)])
    x = np.linalg.lstsq(A, rhs, rcond=None)[0]
    assert max(float(np.abs(m.ravel() - M @ x).max()) for m, M in zip(mu, Ms, strict=True)) < 1e-10
    fixed = Consistency(sizes, layout.tables, c).project(b, total=7.5)
    assert all(abs(float(t.sum()) - 7.5) < 1e-10 for t in fixed)


@pytest.mark.parametrize(("spec", "sizes"), CASES)
def test_nonneg_tables_are_non_negative_consistent_with_one_total(spec, sizes):
    layout, Wd, h, y = _release(spec, sizes, 2, sigma=4.0, rate=0.5)
    fit = project_nonneg(layout, y, max_iter=5000, tol=1e-9)
    assert fit.converged and all(float(t.min()) >= 0.0 for t in fit.tables)
    # raking fits each level to the levels below it to RAKE_TOL of the total: two tables
    # differ on what they share by at most twice that (exactly where a level has ≤ 2 parents)
    assert _disagreement(layout, fit.tables) <= 2.0 * fit.disagreement + 1e-12
    if spec != "marginals:2x3x2x3:3":
        assert fit.disagreement <= RAKE_TOL * max(1.0, fit.n_hat)
    else:
        assert fit.disagreement <= 1e-6 * max(1.0, fit.n_hat)
    assert all(abs(float(t.sum()) - fit.n_hat) <= 1e-9 * max(1.0, fit.n_hat) for t in fit.tables)
    ls = Consistency(sizes, layout.tables, layout.targets(y)[1]).project(layout.targets(y)[0])
    assert fit.n_hat == pytest.approx(max(0.0, float(ls[0].sum())), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_nonneg_equals_the_dense_projection_on_a_decomposable_family(seed):
    """Tables {a,b}, {b,c} (twice) and {b}: a junction tree, so the local polytope is the
    marginal polytope and the projection is the dense ``nonneg`` of the histogram."""
    layout, Wd, _, y = _release(CHAIN, (2, 3, 4), 10 + seed, sigma=3.0, rate=0.5)
    fit = project_nonneg(layout, y, max_iter=20000, tol=1e-11)
    dense = nonneg_consistent(parse_workload(CHAIN), y, max_iter=100000, tol=1e-12)
    assert fit.n_hat == pytest.approx(dense["n_hat"], rel=1e-9)
    assert np.abs(layout.answers(fit.tables) - dense["answers"]).max() <= 1e-6


def test_on_a_cycle_the_local_projection_fits_no_worse_than_the_dense_one():
    """All 2-way tables of 3 attributes: the local polytope contains the marginal polytope,
    so its projection is at least as close to the release."""
    layout, Wd, _, y = _release("marginals:2x3x4:2", (2, 3, 4), 5, sigma=4.0, rate=0.5)
    fit = project_nonneg(layout, y, max_iter=20000, tol=1e-11)
    dense = nonneg_consistent(parse_workload("marginals:2x3x4:2"), y, max_iter=100000, tol=1e-12)
    assert np.sum((layout.answers(fit.tables) - y) ** 2) <= np.sum((dense["answers"] - y) ** 2) + 1e-6


@pytest.mark.parametrize(("spec", "sizes"), CASES)
def test_integer_tables_are_integers_of_one_total_and_agree_where_they_share(spec, sizes):
    layout, _, _, y = _release(spec, sizes, 3, sigma=3.0, rate=2.0)
    fit = project_nonneg(layout, y, max_iter=5000, tol=1e-9)
    r = round_tables(layout, fit.tables)
    assert r.total == math.floor(fit.n_hat + 0.5)
    for t in r.tables:
        assert t.dtype.kind == "i" and int(t.min()) >= 0 and int(t.sum()) == r.total
    assert r.disagreement == _disagreement(layout, r.tables)
    # three parents per 3-way table in marginals:2x3x2x3:3: the third repaired by unit cycles
    assert r.disagreement == 0 and not r.unforced
    assert max(float(np.abs(t - f).max()) for t, f in zip(r.tables, fit.tables, strict=True)) < 2.0


def test_largest_remainders_give_each_row_its_total_from_floors_and_ceilings():
    rng = np.random.default_rng(4)
    v = rng.uniform(0, 5, size=(50, 7))
    v[3] = 0.0
    targets = np.floor(v.sum(axis=1) + rng.integers(-2, 3, size=50)).clip(0).astype(np.int64)
    x = round_rows(v, targets)
    assert np.array_equal(x.sum(axis=1), targets)
    sums = v.sum(axis=1, keepdims=True)
    scaled = np.where(sums > 0, v * targets[:, None] / np.where(sums > 0, sums, 1), targets[:, None] / 7)
    assert np.all((x == np.floor(scaled)) | (x == np.ceil(scaled)))


def test_controlled_rounding_keeps_integer_line_sums_cell_by_cell():
    rng = np.random.default_rng(5)
    for _ in range(20):
        y = rng.uniform(0, 3, size=(3, 6, 5))
        # integer line sums: move the fractional part of each row sum into its last cell
        y[:, :, -1] += np.ceil(y.sum(axis=2)) - y.sum(axis=2)
        y[:, -1, :] += np.ceil(y.sum(axis=1)) - y.sum(axis=1)
        rows, cols = np.rint(y.sum(axis=2)), np.rint(y.sum(axis=1))
        x = controlled_round(y, rows, cols)
        assert x is not None
        assert np.array_equal(x.sum(axis=2), rows) and np.array_equal(x.sum(axis=1), cols)
        assert np.all((x == np.floor(y + 1e-9)) | (x == np.ceil(y - 1e-9)))


def test_dense_integer_is_one_integer_histogram():
    W = parse_workload("marginals:2x3x4:2")
    _, Wd, _, y = _release("marginals:2x3x4:2", (2, 3, 4), 6)
    pp = integer_consistent(W, y, max_iter=5000, tol=1e-10)
    h = pp["histogram"]
    assert h.dtype.kind == "i" and int(h.min()) >= 0 and int(h.sum()) == pp["total"]
    assert pp["total"] == math.floor(pp["n_hat"] + 0.5)
    assert np.array_equal(pp["answers"], Wd @ h)


def test_a_workload_whose_answers_do_not_determine_their_tables_is_refused():
    with pytest.raises(PostprocessError, match="block 0's factor on attribute 0 .4×5. does not have full column rank"):
        marginal_layout(parse_workload("kron(width:5:2,identity:2)"), (5, 2))
    with pytest.raises(PostprocessError, match="released values"):
        marginal_layout(parse_workload("marginals:2x3:1"), (2, 3)).targets(np.zeros(4))


# ---------------------------------------------------------------------------------------
# plan time: recorded, verified, refused


@pytest.fixture(scope="module")
def marginal_plan():
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.postprocess.plan_option import with_postprocess
    from workloads import Domain

    plan = build_structured_plan("marginals:3x4x2:2", "rho=0.5", domain=Domain(["a", "b", "c"], [3, 4, 2]),
                                 strategy="residual")
    return with_postprocess(plan, "integer")


def test_the_option_is_recorded_saved_and_verified(marginal_plan, tmp_path):
    from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
    from factorize.kinds.structured.verify import verify_structured_plan

    assert marginal_plan.postprocess == {"method": "integer", "max_iter": 5000, "tol": 1e-2}
    save_structured_plan(marginal_plan, tmp_path / "p.plan")
    back = load_structured_plan(tmp_path / "p.plan")
    assert back.postprocess == marginal_plan.postprocess
    check = verify_structured_plan(back)
    assert check.passed and check.ok("postprocess")
    assert any(line.startswith("postprocess integer:") for line in back.summary_lines())


@pytest.mark.parametrize("post", [
    {"method": "least_squares", "max_iter": 10, "tol": 1e-7},
    {"method": "integer", "max_iter": 0, "tol": 1e-7},
    {"method": "nonneg", "max_iter": 10**9, "tol": 1e-7},
    {"method": "nonneg", "max_iter": 2.5, "tol": 1e-7},
    {"method": "nonneg", "max_iter": 10, "tol": -1.0},
    {"method": "integer", "max_iter": 10, "tol": float("nan")},
    {"method": "integer", "max_iter": 10},
])
def test_the_verifier_refuses_bad_parameters(marginal_plan, post):
    from factorize.kinds.structured.verify import verify_structured_plan

    check = verify_structured_plan(dataclasses.replace(marginal_plan, postprocess=post), certificate=False)
    assert not check.passed and any(f.startswith("postprocess") for f in check.failures), check.failures


def test_the_verifier_refuses_post_processing_of_tables_the_answers_do_not_determine(tmp_path):
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.kinds.structured.plan import load_structured_plan, save_structured_plan
    from factorize.kinds.structured.verify import verify_structured_plan
    from tests.plan_fixtures import forge_structured_plan
    from workloads import Domain

    plan = build_structured_plan("kron(width:5:2,identity:2)", "rho=0.5", domain=Domain(["a", "b"], [5, 2]),
                                 strategy="union")
    save_structured_plan(plan, tmp_path / "u.plan")

    def edit(body, arrays):
        body["postprocess"] = {"method": "nonneg", "max_iter": 10, "tol": 1e-7}

    forge_structured_plan(tmp_path / "u.plan", tmp_path / "f.plan", edit)
    check = verify_structured_plan(load_structured_plan(tmp_path / "f.plan"), certificate=False)
    assert any(f.startswith("postprocess") and "full column rank" in f for f in check.failures)


def test_plan_time_refusals_say_why(tmp_path, capsys):
    from factorize.cli.plan import main

    out = str(tmp_path / "p.plan")
    assert main(["plan", "--workload", "kron(width:5:2,identity:2)", "--domain", "a=5,b=2",
                 "--privacy", "rho=0.5", "--strategy", "union", "--postprocess", "nonneg",
                 "--out", out]) == 2
    assert "does not have full column rank" in capsys.readouterr().err
    assert main(["plan", "--workload", "marginals:2x2x2x2x2x2:2", "--privacy", "rho=0.1",
                 "--neighbouring", "replace", "--public-n", "100", "--mechanism", "covariance",
                 "--postprocess", "integer", "--out", out]) == 2
    assert "does not apply" in capsys.readouterr().err
    assert main(["plan", "--workload", "marginals:2x3:1", "--domain", "a=2,b=3", "--privacy", "rho=0.5",
                 "--strategy", "residual", "--postprocess", "nonneg", "--out", out]) == 0
    assert "postprocess nonneg: the released tables projected" in capsys.readouterr().out


def test_run_writes_integer_tables_beside_the_estimates_and_is_bounded_in_time(tmp_path, capsys):
    import json

    from factorize.cli.plan import main

    rng = np.random.default_rng(7)
    data = tmp_path / "d.csv"
    rows = np.column_stack([rng.integers(0, n, 100) for n in (3, 4, 2)])
    data.write_text("a,b,c\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    plan = tmp_path / "p.plan"
    assert main(["plan", "--workload", "marginals:3x4x2:2", "--domain", "a=3,b=4,c=2",
                 "--privacy", "rho=0.002", "--postprocess", "integer", "--out", str(plan)]) == 0
    assert "postprocess integer:" in capsys.readouterr().out
    out = tmp_path / "a.json"
    assert main(["run", str(plan), "--data", str(data), "--out", str(out), "--seed", "1"]) == 0
    assert "integer tables of total" in capsys.readouterr().out
    d = json.loads(out.read_text())
    pp = np.array([a["estimate_postprocessed"] for a in d["answers"]])
    layout = marginal_layout(parse_workload("marginals:3x4x2:2"), (3, 4, 2))
    tables = [pp[layout.offsets[o]:layout.offsets[o + 1]].reshape(layout.shape(layout.tables[t]))
              for o, t in enumerate(layout.block_table)]
    meta = d["metadata"]["postprocess"]
    assert meta["iterations"] > 0 and meta["converged"]  # the release had negative cells
    assert np.array_equal(pp, np.rint(pp)) and pp.min() >= 0
    assert {float(t.sum()) for t in tables} == {float(meta["total"])}
    assert _disagreement(layout, tables) == 0.0 and meta["disagreement"] == 0
    slow = tmp_path / "b.json"
    assert main(["run", str(plan), "--data", str(data), "--out", str(slow), "--seed", "2",
                 "--postprocess-time-limit", "0.000001"]) == 0
    meta = json.loads(slow.read_text())["metadata"]["postprocess"]
    assert meta["iterations"] <= 1 and "failed" not in meta


def test_dense_plans_record_and_verify_integer_and_refuse_a_second_projection():
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.verify import verify_plan
    from factorize.postprocess.plan_option import record, with_postprocess
    from tests.plan_fixtures import small_plan

    plan = with_postprocess(small_plan("prefix:8", "rho=0.5"), "integer")
    assert plan.postprocess == record("integer", structured=False)
    assert small_plan("prefix:8", "rho=0.5", postprocess="integer").postprocess == plan.postprocess
    assert verify_plan(plan, certificate=False).passed
    bad = dataclasses.replace(plan, postprocess={"method": "integer", "max_iter": 2000, "tol": -1.0})
    assert any(f.startswith("postprocess") for f in verify_plan(bad, certificate=False).failures)
    ls = build_plan("prefix:8", "epsilon=1,delta=1e-6", mechanism="least-squares")
    with pytest.raises(PostprocessError, match="already post-processes"):
        with_postprocess(ls, "nonneg")
