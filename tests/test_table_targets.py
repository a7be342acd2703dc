"""Per-table weights and targets (``plan.table_targets``): the plan measures D·W, releases W.

Checked against independent truth: the weighted objective Σ_t w_t·var_t from the dense
reconstruction D⁻¹R (and a second planner on the same D·W); the worst SE/target against the
plan's γ₂ certificate; optimality's exchange inequality Σ_t (w'_t − w_t)(v'_t − v_t) ≤ 0 (the
stated direction); a seeded release against the release of D·W itself (exactly D⁻¹ times);
post-processing on the unscaled counts (integers); the verifier refusing a tampered record.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from factorize.cli import main
from factorize.executor.pipeline import run
from factorize.executor.precision import per_query_std, table_precision, target_status
from factorize.kinds import load_plan, save_plan, verify_plan
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.structured.build import build_structured_plan
from factorize.plan.errors import PlanError
from factorize.plan.table_targets import (
    KEY,
    parse_request,
    scaled_workload,
    stated_scales,
    table_parts,
    with_targets,
)
from factorize.postprocess.plan_option import with_postprocess
from workloads import Domain
from workloads.spec import parse_workload

DOM = Domain(["a", "b"], [3, 4])
#: three tables over a 3×4 domain: small enough for the dense planner's SDP
SPEC = "vstack(kron(prefix:3,identity:4),kron(identity:3,total:4),table(\"b alone\",kron(total:3,allrange:4)))"
NAMES = ["cdf(a) by b", "a", "b alone"]
MDOM = Domain(["a", "b", "c"], [2, 3, 4])
MSPEC = "marginals:2x3x4:2"


def _plan(spec, dom, text, request, *, norm="gamma_f", structured=None, multiplier=None, post=None):
    W = parse_workload(spec)
    DW, record = scaled_workload(W, dom, text, request, multiplier)
    if structured is None:
        plan = build_plan(DW, "rho=0.5", domain=dom, norm=norm, postprocess=post)
    else:
        plan = build_structured_plan(DW, "rho=0.5", domain=dom, norm=norm, strategy=structured)
        if post is not None:
            plan = with_postprocess(plan, post, W)
    return with_targets(plan, record), W


def _variances(plan, W, dom):
    """Per-table total variance of the released answers (W's), from the plan's stated numbers."""
    return np.array([t.cells * t.std_rms ** 2 for t in table_precision(plan, W)])


# -- the request ---------------------------------------------------------------------------

def test_request_syntax():
    assert parse_request('age,sex=4; cdf(age) by sex=1 ;*=2', "weights") == {
        "age,sex": ("weight", 4.0), "cdf(age) by sex": ("weight", 1.0), "*": ("weight", 2.0)}
    assert parse_request('"x;y=z"=se:2;b=halfwidth:5', "targets") == {
        "x;y=z": ("se", 2.0), "b": ("halfwidth", 5.0)}
    for bad, request in (("a", "weights"), ("a=0", "weights"), ("a=-1", "weights"), ("a=nan", "weights"),
                         ("a=1;a=2", "weights"), ("a=2", "targets"), ("a=sd:2", "targets"),
                         ('"a=1', "weights"), ("", "weights"), ("=3", "weights")):
        with pytest.raises(PlanError):
            parse_request(bad, request)


def test_unknown_missing_and_single_tables_are_refused():
    W = parse_workload(SPEC)
    with pytest.raises(PlanError, match="no table named 'age'.*'cdf\\(a\\) by b'; 'a'; 'b alone'"):
        scaled_workload(W, DOM, "age=2", "weights", None)
    with pytest.raises(PlanError, match="no target for table\\(s\\) 'a', 'b alone'"):
        scaled_workload(W, DOM, "cdf(a) by b=se:1", "targets", None)
    with pytest.raises(PlanError, match="did you mean: 'b,a' is 'a,b'"):
        scaled_workload(parse_workload(MSPEC), MDOM, "b,a=2", "weights", None)
    with pytest.raises(PlanError, match="the workload has one"):
        scaled_workload(parse_workload("kron(prefix:3,identity:4)"), DOM, "*=2", "weights", None)


def test_the_scaled_workload_is_D_times_W_with_every_table_name_kept():
    for spec, dom in ((SPEC, DOM), (MSPEC, MDOM), ("scale(3,marginals_upto:2x3:2)", Domain(["a", "b"], [2, 3]))):
        W = parse_workload(spec)
        parts = table_parts(W, dom)
        d = np.exp(np.linspace(-1.0, 1.5, len(parts)))
        text = ";".join(f'"{p.name}"={float(x * x)!r}' for p, x in zip(parts, d, strict=True))
        DW, record = scaled_workload(W, dom, text, "weights", None)
        D = np.concatenate([np.full(p.stop - p.start, math.sqrt(float(x * x))) for p, x in zip(parts, d, strict=True)])
        assert np.abs(DW.dense() - D[:, None] * W.dense()).max() <= 1e-12 * np.abs(W.dense()).max()
        assert [p.name for p in table_parts(DW, dom)] == [p.name for p in parts]
        assert [t["scale"] for t in record["tables"]] == [math.sqrt(float(x * x)) for x in d]


# -- the objective -------------------------------------------------------------------------

def test_weights_give_the_weighted_objective_of_the_dense_counterpart_and_move_tables_their_way():
    base = build_plan(SPEC, "rho=0.5", domain=DOM)
    W = parse_workload(SPEC)
    v0 = _variances(base, W, DOM)
    rng = np.random.default_rng(7)
    for w in ([float(x) for x in np.exp(rng.uniform(-2.5, 2.5, 3))],):
        plan, _ = _plan(SPEC, DOM, ";".join(f'"{n}"={x!r}' for n, x in zip(NAMES, w, strict=True)), "weights")
        assert verify_plan(plan).passed
        # the dense counterpart: W = (D⁻¹R)·A, var_i = v·‖(D⁻¹R)_i‖²
        R = plan.factorization.R_factors[0]
        d = stated_scales(plan).rows(0, R.shape[0])
        var = plan.noise.variance_bound * np.sum((R / d[:, None]) ** 2, axis=1)
        per_table = np.array([var[p.start:p.stop].sum() for p in table_parts(W, DOM)])
        weighted = float(np.dot(w, per_table))
        k = W.shape[0]
        assert weighted == pytest.approx(plan.expected_error["rmse"] ** 2 * k, rel=1e-9)
        v1 = _variances(plan, W, DOM)
        assert v1 == pytest.approx(per_table, rel=1e-9)
        # both plans optimal (gaps ≤ 1e-6): Σ_t (w_t − 1)(v1_t − v0_t) ≤ 0 up to the gaps
        slack = 1e-5 * (float(np.dot(w, v1)) + float(v0.sum()))
        assert float(np.dot(np.asarray(w) - 1.0, v1 - v0)) <= slack
        assert v1.sum() >= v0.sum() * (1 - 1e-6)  # the unweighted total can only grow
    # one table up-weighted 16×: its variance falls, strictly
    plan, _ = _plan(SPEC, DOM, f'"{NAMES[0]}"=16', "weights")
    v1 = _variances(plan, W, DOM)
    assert v1[0] < 0.9 * v0[0] and v1.sum() > v0.sum()


def test_the_residual_planner_takes_the_weights_natively_and_agrees_with_the_dense_one():
    text = "a,b=9;b,c=0.25"
    residual, W = _plan(MSPEC, MDOM, text, "weights", structured="residual")
    dense, _ = _plan(MSPEC, MDOM, text, "weights")
    assert residual.family == "residual" and verify_plan(residual).passed and verify_plan(dense).passed
    k = W.shape[0]
    w = np.array([9.0, 1.0, 0.25])
    for plan in (residual, dense):
        assert float(np.dot(w, _variances(plan, W, MDOM))) == pytest.approx(
            plan.expected_error["rmse"] ** 2 * k, rel=1e-9)
    # two algorithms, one optimum of Σ w_t var_t per unit of noise (the certificates' gaps ≤ 1e-6)
    per_unit = [p.expected_error["rmse"] / p.noise.scale * p.noise.base_sensitivity for p in (residual, dense)]
    assert per_unit[0] == pytest.approx(per_unit[1], rel=1e-5)


@pytest.mark.parametrize("structured", ["residual", None])
def test_targets_under_gamma_2_the_worst_ratio_is_the_certified_value(structured):
    from factorize.plan.manifest import Z_NOISE

    text = "a,b=se:1;a,c=halfwidth:6;*=se:3"
    plan, W = _plan(MSPEC, MDOM, text, "targets", norm="gamma_2", structured=structured, multiplier=Z_NOISE)
    check = verify_plan(plan)
    assert check.passed, check.failures
    tables = table_precision(plan, W)
    st = target_status(plan, tables)
    targets = [1.0, 6.0 / Z_NOISE, 3.0]
    ratio = max(t.std_max / s for t, s in zip(tables, targets, strict=True))
    assert st.ratio == pytest.approx(ratio, rel=1e-12)
    assert st.ratio == pytest.approx(plan.expected_error["per_query_std_max"], rel=1e-12)
    bounds = plan.certificate if structured else plan.bounds
    v = plan.expected_error["noise_variance"] if structured else plan.noise.variance_bound
    unit = math.sqrt(v) / plan.noise.base_sensitivity  # the deviation per unit of γ₂
    assert bounds["lower"] * unit * (1 - 1e-12) <= st.ratio <= bounds["upper"] * unit * (1 + 1e-12)
    assert st.ratio / unit - bounds["lower"] <= max(bounds["gap"], 1e-6) * bounds["upper"]
    # the budget that meets every target exactly: ρ·r² (σ ∝ 1/√ρ)
    assert st.budget == f"rho={0.5 * st.ratio ** 2:.6g}" and st.met == (st.ratio <= 1)
    if structured == "residual":  # re-planned at that budget, the worst target is met to rounding
        DW, record = scaled_workload(W, MDOM, text, "targets", Z_NOISE)
        again = with_targets(build_structured_plan(DW, st.budget, domain=MDOM, norm="gamma_2",
                                                   strategy="residual"), record)
        assert target_status(again, table_precision(again, W)).ratio == pytest.approx(1.0, abs=1e-4)


# -- the plan file -------------------------------------------------------------------------

def test_a_tampered_weight_or_scale_is_refused(tmp_path):
    plan, _ = _plan(MSPEC, MDOM, "a,b=9", "weights", structured="residual")
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    assert verify_plan(load_plan(path)).passed

    def tampered(change):
        rec = {**plan.workload[KEY], "tables": [dict(t) for t in plan.workload[KEY]["tables"]]}
        change(rec["tables"][0])
        p = replace(plan, workload={**plan.workload, KEY: rec})
        save_plan(p, tmp_path / "t.plan")  # digests recomputed: only the verifier stands in the way
        return verify_plan(load_plan(tmp_path / "t.plan"))

    for change in (lambda t: t.update(weight=4.0), lambda t: t.update(weight=16.0, scale=4.0),
                   lambda t: t.update(weight="9"), lambda t: t.update(se=1.0),
                   lambda t: t.update(name="a,c"), lambda t: t.pop("weight"),
                   lambda t: t.update(rows=[0, 5])):
        check = tampered(change)
        assert not check.passed
        assert any(c["name"] == "table targets" and not c["ok"] for c in check.checks)
    bare = replace(plan, workload={**plan.workload, KEY: "weights"})
    assert any(c["name"] == "table targets" and not c["ok"] for c in verify_plan(bare).checks)


def test_a_half_width_converted_for_other_noise_is_refused():
    from factorize.plan.manifest import CHEBYSHEV_NOISE, Z_NOISE

    W = parse_workload(MSPEC)
    DW, record = scaled_workload(W, MDOM, "a,b=halfwidth:4;*=se:3", "targets", CHEBYSHEV_NOISE)
    plan = build_structured_plan(DW, "rho=0.5", domain=MDOM, strategy="residual")  # Gaussian: c = Z_NOISE
    with pytest.raises(PlanError, match="another noise"):
        with_targets(plan, record)
    forged = replace(plan, workload={**plan.workload, KEY: record})
    assert any(c["name"] == "table targets" and not c["ok"] for c in verify_plan(forged).checks)
    DW, record = scaled_workload(W, MDOM, "a,b=halfwidth:4;*=se:3", "targets", Z_NOISE)
    plan = with_targets(build_structured_plan(DW, "rho=0.5", domain=MDOM, strategy="residual"), record)
    assert verify_plan(plan).passed and record["tables"][0]["scale"] == Z_NOISE / 4


def test_cli_plans_prints_and_refuses(tmp_path, capsys):
    out = tmp_path / "t.plan"
    args = ["plan", "--workload", "marginals[a,b,c]:2", "--domain", "a=2,b=3,c=4", "--privacy", "rho=0.5",
            "--norm", "gamma_2", "--out", str(out)]
    assert main([*args, "--table-targets", "a,b=se:1;*=se:3"]) == 0
    text = capsys.readouterr().out
    assert "target se 1  achieved" in text and "the budget that meets every target exactly: rho=" in text
    assert main(["inspect", str(out)]) == 0 and "target se 3" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0 and "ok   table targets" in capsys.readouterr().out
    assert main([*args, "--table-targets", "age=se:1"]) == 2
    assert "no table named 'age'; the workload's tables are 'a,b'; 'a,c'; 'b,c'" in capsys.readouterr().err
    assert main([*args, "--table-targets", "a,b=se:1", "--table-weights", "a,b=2"]) == 2
    assert main([*args, "--table-weights", "a,b=2", "--mechanism", "ellipsoid"]) == 2


# -- the release ---------------------------------------------------------------------------

@pytest.mark.parametrize("structured", ["residual", "union", None])
def test_seeded_answers_are_D_inverse_times_those_of_the_scaled_workload(tmp_path, structured):
    plan, W = _plan(MSPEC, MDOM, "a,b=9;b,c=0.3", "weights", structured=structured)
    h = np.random.default_rng(1).integers(0, 40, MDOM.size)
    np.save(tmp_path / "h.npy", h)
    save_plan(plan, tmp_path / "w.plan")
    plain = replace(plan, workload={k: v for k, v in plan.workload.items() if k != KEY})
    save_plan(plain, tmp_path / "dw.plan")  # the same plan of D·W, releasing D·W's answers
    a = run(str(tmp_path / "w.plan"), str(tmp_path / "h.npy"), str(tmp_path / "w.csv"), seed=5)
    b = run(str(tmp_path / "dw.plan"), str(tmp_path / "h.npy"), str(tmp_path / "dw.csv"), seed=5)
    d = stated_scales(plan).rows(0, W.shape[0])
    assert np.array_equal(a.estimate, np.asarray(b.estimate) / d)
    assert np.array_equal(np.asarray(a.std_error), np.asarray(b.std_error) / d)
    for col in ("ci_low", "ci_high"):  # est/d ∓ half/d: (est ∓ half)/d up to one rounding each
        assert np.allclose(np.asarray(getattr(a, col)), np.asarray(getattr(b, col)) / d, rtol=1e-14, atol=0)
    assert np.allclose(np.asarray(a.std_error), per_query_std(plan), rtol=1e-12)
    assert a.metadata["workload"] == MSPEC and a.metadata["table_targets"]["tables"][0]["scale"] == 3.0
    assert np.abs(a.estimate - W.matvec(h)).max() < 12 * float(np.max(a.std_error))
    with open(tmp_path / "w.csv") as f:
        assert '# workload: "marginals:2x3x4:2"' in f.read()
    # the answers' tables are W's, under W's names (labels of D·W keep every name)
    (tmp_path / "t").mkdir()
    c = run(str(tmp_path / "w.plan"), str(tmp_path / "h.npy"), str(tmp_path / "w2.csv"), seed=5,
            tables=str(tmp_path / "t"))
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["a__b.csv", "a__c.csv", "b__c.csv"]
    assert np.array_equal(c.estimate, a.estimate)
    import csv

    with open(tmp_path / "t" / "a__b.csv") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    assert [float(r["estimate"]) for r in rows] == list(a.estimate[:6])
    assert list(rows[0])[:2] == ["a", "b"]


@pytest.mark.parametrize("structured", ["residual", None])
def test_integer_post_processing_rounds_the_unscaled_counts(tmp_path, structured):
    plan, W = _plan(MSPEC, MDOM, "a,b=2;b,c=0.5", "weights", structured=structured, post="integer")
    assert verify_plan(plan).passed
    np.save(tmp_path / "h.npy", np.random.default_rng(2).integers(0, 40, MDOM.size))
    save_plan(plan, tmp_path / "p.plan")
    rel = run(str(tmp_path / "p.plan"), str(tmp_path / "h.npy"), str(tmp_path / "a.csv"), seed=3)
    pp = rel.postprocessed
    assert pp is not None and "failed" not in rel.metadata["postprocess"]
    assert np.array_equal(pp, np.rint(pp)) and pp.min() >= 0  # √2-scaled counts would not round so
    totals = [pp[p.start:p.stop].sum() for p in table_parts(W, MDOM)]
    assert max(totals) == min(totals)  # one total: the tables of one histogram
