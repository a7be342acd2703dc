"""`factorize report`: every plan kind and released results give a self-contained, valid HTML
(and Markdown) report whose numbers are the plan's own (and, per table, its precision); the
results report draws one panel per table in value labels, pages every answer (or writes and
links one tidy file per table), states ρ as (ε, δ) and shows the ledger's history. The reports
in a real browser: ``test_report_browser``."""

from __future__ import annotations

import base64
import csv
from html.parser import HTMLParser

import numpy as np
import pytest

from factorize.cli import main
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import save_plan
from factorize.kinds.projection.build import build_projection_plan
from factorize.kinds.projection.codec import save_projection_plan
from factorize.privacy import TestRandom
from factorize.report.plan_report import plan_report
from factorize.report.render import to_html, write_report

VOID = {"meta", "img", "br", "hr", "link", "input"}


class Checker(HTMLParser):
    """Tag balance, and every resource inline (data: URIs only, no script, no links out)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.images = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" or tag == "link" or tag == "iframe":
            self.errors.append(f"<{tag}> is not allowed")
        if tag == "img":
            self.images += 1
            if not str(a.get("src", "")).startswith("data:image/png;base64,"):
                self.errors.append("an image is not inline")
            else:
                png = base64.b64decode(a["src"].split(",", 1)[1])
                if png[:8] != b"\x89PNG\r\n\x1a\n":
                    self.errors.append("an inline image is not a PNG")
            if not a.get("alt"):
                self.errors.append("an image has no alt text")
        for k, v in attrs:
            if k in ("href", "src") and v and not v.startswith("data:"):
                self.errors.append(f"external reference {k}={v[:40]!r}")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}>")
        else:
            self.stack.pop()


def check_html(text: str) -> Checker:
    assert text.startswith("<!DOCTYPE html>")
    c = Checker()
    c.feed(text)
    c.close()
    assert not c.errors, c.errors
    assert not c.stack, f"unclosed tags {c.stack}"
    assert "http://" not in text and "https://" not in text
    return c


@pytest.fixture(scope="module")
def plans():
    marg = "marginals:2x2x2x2:2"
    return {
        "factorization": build_plan("prefix:32", "epsilon=1,delta=1e-6"),
        "factorization-2d": build_plan("kron(prefix:8,prefix:8)", "rho=0.5", norm="gamma_2"),
        "ellipsoid": build_plan("prefix:32", "epsilon=1,delta=1e-6", mechanism="ellipsoid"),
        "least-squares": build_plan(marg, "epsilon=1,delta=1e-6", mechanism="least-squares"),
        "laplace": build_plan("allrange:16", "epsilon=1"),
        "jl": build_projection_plan("allrange:16", "epsilon=1", "jl", n=500, rng=TestRandom(1)),
        "covariance": build_projection_plan(marg, "epsilon=1,delta=1e-6", "covariance", n=100),
        "relaxed-projection": build_projection_plan("parity:6:2", "epsilon=1,delta=1e-6",
                                                    "relaxed-projection", n=100),
    }


@pytest.mark.parametrize("kind", ["factorization", "factorization-2d", "ellipsoid", "least-squares",
                                  "laplace", "jl", "covariance", "relaxed-projection"])
def test_every_plan_kind_gives_a_valid_self_contained_report(plans, kind, tmp_path):
    plan = plans[kind]
    rep = plan_report(plan)
    text = to_html(rep)
    c = check_html(text)
    assert c.images >= 1
    # the numbers are the plan's own (no recomputation drift)
    if hasattr(plan, "expected_error") and "rmse" in plan.expected_error:
        e, b = plan.expected_error, plan.bounds
        assert rep.numbers["rmse"] == e["rmse"]
        assert rep.numbers["per_query_std_max"] == e["per_query_std_max"]
        assert rep.numbers["expected_max_bound"] == e["expected_max_bound"]
        assert (rep.numbers["upper"], rep.numbers["lower"], rep.numbers["gap"]) == (b["upper"], b["lower"], b["gap"])
        for key in ("rmse", "expected_max_bound"):
            assert f"{e[key]:.6g}" in text
        assert f"{b['lower']:.10g}" in text and f"{b['upper']:.10g}" in text
        # an optimal Gaussian plan can never lose to a baseline computed on the spot (with
        # Laplace noise the γ_F certificate does not bind, and the report says so)
        if plan.noise.family != "gaussian":
            assert "does not bind" in text
            # and never claims optimality: no "optimal to within the gap",
            # no table row saying the certificate binds every mechanism with this guarantee
            assert "optimal to within" not in text and "every factorization mechanism with this guarantee" not in text
            assert "— not this plan" in text
            if plan.bounds.get("laplace_factorization"):
                assert f"{plan.bounds['laplace_factorization']['value']:.6g}" in text
            # the plan chose its strategy among the candidates: no baseline beats it
            assert all(v >= e["rmse"] * (1 - 1e-9) for v in rep.numbers["baselines"].values())
        elif plan.provenance["mechanism"] == "factorization" and plan.norm == "gamma_f":
            assert all(v >= e["rmse"] * (1 - 1e-9) for v in rep.numbers["baselines"].values())
    else:
        assert rep.numbers["upper_rmse"] == plan.bounds["upper_rmse"]
        assert f"{plan.bounds['upper_rmse']:.6g}" in text
    _check_precision_section(plan, rep)
    md = tmp_path / "r.md"
    files = write_report(rep, md)
    assert md.read_text().startswith("# ")
    assert all(f.exists() and f.read_bytes()[:4] == b"\x89PNG" for f in files[1:])


def _check_precision_section(plan, rep) -> None:
    """The plan report's per-table precision is ``executor.precision``'s for the plan's own
    workload (every table, its cells, std min/max/RMS and the hint); a kind without per-query
    deviations lists its tables and says why there are none."""
    from factorize.executor.labels import workload_tables
    from factorize.executor.precision import precision_hint, table_precision
    from factorize.plan.embedded import plan_workload

    W = plan_workload(plan)
    section = next(s for s in rep.sections if s.title == "Precision per table")
    tables = workload_tables(W, plan.domain)
    assert [r[0] for r in section.table[1:]] == [t.name for t in tables]
    assert [r[1] for r in section.table[1:]] == [f"{t.rows:,}" for t in tables]
    try:
        prec = table_precision(plan, W)
    except NotImplementedError:
        words = " ".join(section.paragraphs)
        assert section.table[0] == ["table", "cells"]
        assert "no per-query standard error" in words or "states its error for all queries" in words
        return
    assert section.table[0] == ["table", "cells", "std min", "std max", "std RMS"]
    assert rep.numbers["tables"] == [{"name": t.name, "cells": t.cells, "std_min": t.std_min,
                                      "std_max": t.std_max, "std_rms": t.std_rms} for t in prec]
    assert [r[4] for r in section.table[1:]] == [f"{t.std_rms:.4g}" for t in prec]
    hint = precision_hint(prec)
    assert rep.numbers["precision_hint"] == hint
    assert (f"Hint: {hint}." in section.paragraphs) if hint else not any(
        p.startswith("Hint") for p in section.paragraphs)


def test_plan_reports_of_local_and_structured_plans_state_their_precision_per_table():
    """Every plan kind has its report: a local plan and a structured plan of named tables
    (the hint when the smallest table is the least precise), besides those above."""
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.structured.build import build_structured_plan

    local = build_local_plan("marginals:2x3:2", "epsilon=1", n=1000)
    rep = plan_report(local)
    check_html(to_html(rep))
    _check_precision_section(local, rep)
    assert "states its error for all queries" in " ".join(
        next(s for s in rep.sections if s.title == "Precision per table").paragraphs)
    structured = build_structured_plan("vstack(marginals:6x2x3:2,kron(total:6,identity:2,total:3))",
                                       "rho=0.5")
    rep = plan_report(structured, baselines=False)
    check_html(to_html(rep))
    _check_precision_section(structured, rep)


def test_zcdp_is_stated_as_epsilon_delta_by_the_privacy_conversions(plans):
    """A ρ-zCDP plan's report gives ε at several δ from ``privacy.zcdp`` (CKS20 Cor. 13 and
    Bun–Steinke), and the words quote the first at δ = 10⁻⁶."""
    from factorize.privacy.zcdp import zcdp_epsilon, zcdp_to_approx_dp
    from factorize.report.plan_report import DELTAS

    plan = plans["factorization-2d"]
    rep = plan_report(plan, baselines=False)
    section = rep.sections[0]
    rho = plan.guarantee.rho
    assert section.table[1:] == [[f"{d:g}", f"{zcdp_epsilon(rho, d):.4g}", f"{zcdp_to_approx_dp(rho, d):.4g}"]
                                 for d in DELTAS]
    assert f"ε = {zcdp_epsilon(rho, 1e-6):.4g} at δ = 10⁻⁶" in section.paragraphs[0]
    assert zcdp_epsilon(rho, 1e-6) < zcdp_to_approx_dp(rho, 1e-6)


def test_results_reports_for_marginals_cdf_and_projection(plans, tmp_path):
    from factorize.executor.output import write_answers
    from factorize.executor.release import release_dense
    from factorize.report.results_report import results_report
    from workloads import parse_workload

    for kind, spec in (("least-squares", "marginals:2x2x2x2:2"), ("factorization", "prefix:32")):
        plan = plans[kind]
        W = parse_workload(spec)
        h = np.zeros(W.shape[1])
        h[[1, 5, 9]] = [40, 30, 30]
        rel = release_dense(plan, h, TestRandom(2), workload=W)
        out = tmp_path / f"{kind}.csv"
        write_answers(out, rel.columns(), rel.metadata)
        rep = results_report(out)
        text = to_html(rep)
        check_html(text)
        assert rep.numbers["n_answers"] == W.shape[0]
        assert rep.numbers["estimate_sum"] == pytest.approx(float(rel.estimate.sum()), rel=1e-12)
        assert "NOT PRIVATE" in text  # test-mode answers say so
    # a projection release has no intervals: the bound is reported instead
    from factorize.kinds.projection.plan import moment_layout
    from factorize.kinds.projection.release import release_projection

    plan = plans["covariance"]
    W = parse_workload("marginals:2x2x2x2:2")
    lay = moment_layout(W)
    v = lay.moments(np.array([[0, 1, 0, 1], [1, 1, 0, 0]]), np.array([60, 40]))
    rel = release_projection(plan, v, 100, TestRandom(3), workload=W)
    out = tmp_path / "cov.json"
    write_answers(out, {"query": np.arange(rel.estimate.size), "estimate": rel.estimate}, rel.metadata)
    rep = results_report(out)
    check_html(to_html(rep))
    assert rep.numbers["rmse_bound"] == rel.metadata["rmse_bound"]


def test_cli_report(plans, tmp_path, capsys):
    p = tmp_path / "a.plan"
    save_plan(plans["factorization"], p)
    q = tmp_path / "j.plan"
    save_projection_plan(plans["jl"], q)
    assert main(["report", str(p), "--out", str(tmp_path / "a.html")]) == 0
    check_html((tmp_path / "a.html").read_text())
    assert main(["report", str(q), "--out", str(tmp_path / "j.md")]) == 0
    assert (tmp_path / "j_files").is_dir()
    assert main(["report", str(p), "--out", str(tmp_path / "a.txt")]) == 2
    assert main(["report", "--out", str(tmp_path / "x.html")]) == 2
    (tmp_path / "bad.plan").write_bytes(b"not a plan")
    assert main(["report", str(tmp_path / "bad.plan"), "--out", str(tmp_path / "b.html")]) == 2
    assert not (tmp_path / "b.html").exists()
    assert "error" in capsys.readouterr().err


def test_gamma_f_report_says_when_a_baseline_wins_the_worst_query():
    """The default γ_F plan minimises the RMSE; where a baseline has a smaller worst-query std
    (the identity-plus-total workload: the marginal-tables baseline measures the total alone)
    the report says so and suggests --norm gamma_2; prefix:64 is not beaten."""
    for spec in ("vstack(identity:32,total:32)", "prefix:64"):
        _worst_query_case(spec)


def _worst_query_case(spec: str) -> None:
    plan = build_plan(spec, "epsilon=1,delta=1e-6")
    rep = plan_report(plan)
    text = to_html(rep)
    from factorize.report.baselines import baselines as compute
    from workloads import parse_workload

    best = min((bl.max_std, bl.name) for bl in compute(parse_workload(spec), plan.guarantee,
                                                       plan.relation) if bl.applies)
    if spec.startswith("vstack"):
        assert best[0] < plan.expected_error["per_query_std_max"]
    if best[0] < plan.expected_error["per_query_std_max"]:
        assert rep.numbers["worst_query_beaten_by"] == best[1]
        assert "--norm gamma_2" in text
    else:
        assert "worst_query_beaten_by" not in rep.numbers and "--norm gamma_2" not in text


SCHEMA = {"format": "factorize-domain-schema", "version": 1, "description": "test",
          "attributes": [{"name": "age", "kind": "integer", "min": 17, "max": 36},
                         {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
                         {"name": "race", "kind": "categorical", "values": ["White", "Black", "Other"]}]}


def _release(tmp_path, workload: str, *extra: str, plan_args: tuple[str, ...] = ()):
    """A plan of ``workload`` over :data:`SCHEMA` run on 500 records (``extra``: run options)."""
    import json

    from factorize.cli.plan import main as cli

    rng = np.random.default_rng(0)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    data = tmp_path / "d.csv"
    data.write_text("age,sex,race\n" + "".join(
        f"{rng.integers(17, 37)},{['Female', 'Male'][rng.integers(2)]},"
        f"{['White', 'Black', 'Other'][rng.integers(3)]}\n" for _ in range(500)))
    plan, out = tmp_path / "p.plan", tmp_path / "a.csv"
    assert cli(["plan", "--workload", workload, "--domain", str(tmp_path / "schema.json"),
                "--privacy", "rho=0.5", *plan_args, "--out", str(plan)]) == 0
    assert cli(["run", str(plan), "--data", str(data), "--out", str(out), *extra]) == 0
    return out


def test_results_report_draws_one_panel_per_table_in_value_labels(tmp_path, monkeypatch):
    """One panel per table, titled with its name, axes in the schema's value labels: the age
    CDF per sex as two lines with their bands (ticks: ages, not codes), small tables as bars
    named by their cells, a larger two-attribute table as a heat map; the post-processed column
    drawn; every answer in the document, table by table."""
    from factorize.executor.output import read_answers
    from factorize.report import plots
    from factorize.report.results_report import results_report

    drawn = []
    real = plots._png

    def capture(fig):  # what each panel shows, read off the figure before it is saved
        ax = fig.axes[0]
        drawn.append({"title": ax.get_title(), "x": [t.get_text() for t in ax.get_xticklabels()],
                      "y": [t.get_text() for t in ax.get_yticklabels()], "lines": len(ax.get_lines()),
                      "images": len(ax.get_images()), "bars": len(ax.patches)})
        return real(fig)

    monkeypatch.setattr(plots, "_png", capture)
    out = _release(tmp_path, "vstack(kron(prefix[age],identity[sex],total[race]),marginals[age,sex,race]:2)",
                   "--seed", "1", plan_args=("--postprocess", "nonneg"))
    rep = results_report(out)
    check_html(to_html(rep))
    cols, _ = read_answers(out)
    names = list(dict.fromkeys(cols["table"]))
    assert names == ["cdf(age) by sex", "age,sex", "age,race", "sex,race"]
    panels = next(s for s in rep.sections if s.title == "Tables").panels
    assert [p.table for p in panels] == names == rep.numbers["panels"]
    cdf, age_sex, age_race, sex_race = drawn
    assert cdf["title"] == "cdf(age) by sex" and cdf["x"] == [str(a) for a in range(17, 37, 2)]
    assert cdf["lines"] >= 2 and "cdf lines (2)" in panels[0].caption
    assert age_sex["bars"] == 40 and age_sex["x"][:2] == ["17, Female", "17, Male"]
    assert age_race["images"] == 1 and age_race["y"][0] == "17" and age_race["x"] == ["White", "Black", "Other"]
    assert sex_race["bars"] == 6 and "Female, White" in sex_race["x"]
    answers = next(s for s in rep.sections if s.title == "Answers")
    assert sum(len(p.rows) - 1 for p in answers.pages) == cols["estimate"].size
    first = answers.pages[0]
    assert first.rows[0] == ["query", "age", "sex", "estimate", "std error", "95% low", "95% high",
                             "post-processed"]
    assert first.rows[1][1:3] == ["age ≤ 17", "Female"] and first.summary == "cdf(age) by sex: answers: all 40"


def test_results_report_says_which_panels_it_draws_and_writes_tidy_files_beyond_the_inline_limit(tmp_path):
    """With more tables than panels the report says how many are drawn; with more answers than
    it inlines, each table's answers are a tidy CSV beside the report (``--tables``' names and
    columns), linked, holding exactly the answers file's rows of that table."""
    from factorize.executor.output import read_answers
    from factorize.report.results_report import results_report

    out = _release(tmp_path, "marginals[age,sex,race]:2", "--seed", "2")
    rep = results_report(out, max_panels=2, inline_answers=10)
    tables = next(s for s in rep.sections if s.title == "Tables")
    assert [p.table for p in tables.panels] == ["age,sex", "age,race"]
    assert "panels are drawn for the first 2 of them" in tables.paragraphs[0]
    assert [r[2] for r in tables.table[1:]] == ["bars", "heat map", "not drawn"]  # 40, 60, 6 cells
    files = write_report(rep, tmp_path / "r.html")
    tidy = sorted(f.name for f in files if f.suffix == ".csv")
    assert tidy == ["age__race.csv", "age__sex.csv", "sex__race.csv"]
    text = (tmp_path / "r.html").read_text()
    assert '<a href="r_files/tables/age__sex.csv">' in text
    cols, _ = read_answers(out)
    lines = (tmp_path / "r_files" / "tables" / "age__race.csv").read_text().splitlines()
    assert '# table: "age,race"' in lines
    body = list(csv.DictReader([x for x in lines if not x.startswith("# ")]))
    rows = cols["table"] == "age,race"
    assert [r["race"] for r in body] == list(cols["race"][rows])
    assert [float(r["estimate"]) for r in body] == list(cols["estimate"][rows])
    assert [float(r["ci_high"]) for r in body] == list(cols["ci_high"][rows])


def test_results_report_shows_the_datasets_ledger_history(tmp_path):
    """A release charged to a ledger: with the ledger, the dataset's budget, spent, remaining
    and every charge, this one marked and its file matched to the recorded SHA-256 (a changed
    file is said not to be the one released); without it, the charge and why no history."""
    from factorize.cli import main as cli
    from factorize.report.results_report import results_report

    ledger = tmp_path / "L.db"
    assert cli(["budget", "create", str(ledger), "--new", "--dataset", "people", "--budget", "rho=2"]) == 0
    out = _release(tmp_path, "marginals[age,sex,race]:1", "--ledger", str(ledger), "--dataset", "people")
    rep = results_report(out, ledger=ledger)
    book = next(s for s in rep.sections if s.title == "Privacy-budget ledger")
    assert "budget ρ=2-zCDP, spent ρ=0.5, remaining ρ=1.5, 1 charge(s)" in book.paragraphs[0]
    assert book.table[1][0] == "#1 (this release)" and book.table[1][-1] == "this file"
    assert rep.numbers["ledger"]["output_matches"] is True
    check_html(to_html(rep))
    html = tmp_path / "r.html"  # the same through the CLI
    assert cli(["report", "--results", str(out), "--ledger", str(ledger), "--out", str(html)]) == 0
    assert "remaining ρ=1.5" in html.read_text(encoding="utf-8")
    bare = results_report(out)
    assert "charge #1" in next(s for s in bare.sections if s.title == "Privacy-budget ledger").paragraphs[0]
    out.write_text(out.read_text().replace("# test_mode: false", "# test_mode: false "))
    changed = results_report(out, ledger=ledger)
    assert changed.numbers["ledger"]["output_matches"] is False
    assert "is not the one charge #1 recorded" in " ".join(
        next(s for s in changed.sections if s.title == "Privacy-budget ledger").paragraphs)


def test_report_of_a_plan_carrying_a_custom_matrix_and_its_search_table(tmp_path):
    """A workload with a ``file:`` factor: the report rebuilds it from the plan's own arrays
    (it used to parse the bare spec and fail: 'not among the matrices this plan carries'), and
    shows the strategy search's table."""
    from factorize.kinds.structured.build import build_structured_plan

    path = tmp_path / "g.npy"
    np.save(path, np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]))
    plan = build_structured_plan(f"vstack(kron(file:{path},identity:3),kron(identity:4,total:3))",
                                 "rho=0.5")
    path.unlink()  # the report must not need it
    report = plan_report(plan, baselines=False)
    search = next(s for s in report.sections if s.title == "Strategy search")
    families = {row[0] for row in search.table[1:]}
    assert plan.family in families and "dense" not in families  # structured families only here
    assert any(row[3] == "chosen" and row[0] == plan.family for row in search.table[1:])


def test_reports_say_whether_the_answers_come_from_one_estimate(tmp_path):
    """Issue 29 item 2: a family that estimates blocks apart (union) says so in the plan report,
    the answers' metadata and the results report; one that has one estimate says that."""
    from factorize.executor.output import read_answers
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.report.results_report import results_report
    from factorize.structured.families import ONE_ESTIMATE, SEPARATE_ESTIMATES

    for strategy, words in (("union", SEPARATE_ESTIMATES), ("kron", ONE_ESTIMATE)):
        plan = build_structured_plan("vstack(marginals:6x2x3:2,kron(total:6,identity:2,total:3))",
                                     "rho=0.5", strategy=strategy)
        rep = plan_report(plan, baselines=False)
        assert f"Estimates: {words}." in next(
            s for s in rep.sections if s.title == "Precision per table").paragraphs
        assert rep.numbers["estimates"] == words
    out = _release(tmp_path, "vstack(marginals[age,sex,race]:2,kron(prefix[age],identity[sex],total[race]))",
                   "--seed", "1", plan_args=("--strategy", "union"))
    _, meta = read_answers(out)
    assert meta["estimates"] == SEPARATE_ESTIMATES
    paras = next(s for s in results_report(out).sections
                 if s.title == "How these answers were produced").paragraphs
    assert f"Estimates: {SEPARATE_ESTIMATES}." in paras
