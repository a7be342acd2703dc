"""The scaling benchmark (``python -m benchmarks --suite scale``): its pure pieces and one real run.

Independent truths: synthetic timings with a known power law (the fit), hand-built rows
whose PASS/FAIL is evident (the targets), the limits of ``reports/bench_core.md`` (the skip
rules), and a real subprocess run whose certificate the child re-checked.
"""

from __future__ import annotations

import json
import math
import signal

import pytest

from benchmarks.harness import json_safe
from benchmarks.suites import core
from benchmarks.suites import scale as bs


def _row(spec, norm, method, seconds=None, gap=1e-8, status="ok", backend=None, family=None, N=None):
    family = family or spec.split(":")[0]
    N = N if N is not None else (int(spec.split(":")[1]) if spec.split(":")[1].isdigit() else 64)
    r = {"workload": spec, "spec": spec, "family": family, "N": N, "k": N, "norm": norm,
         "method": method, "backend": backend or ("scs" if method == "sdp" else "numpy"),
         "status": status, "peak_rss_mb": 150.0}
    if status == "ok":
        r.update(value=2.0, lower=2.0 / (1 + gap), gap=gap, seconds=seconds)
    else:
        r["detail"] = "why"
    return r


# -- the fit ---------------------------------------------------------------------------
def test_fit_recovers_a_known_exponent():
    pts = [(n, 3e-9 * n ** 2.8) for n in (256, 512, 1024, 2048)]
    fit = bs.fit_exponent(pts)
    assert fit["exponent"] == pytest.approx(2.8, abs=1e-12)
    assert math.exp(fit["log_intercept"]) == pytest.approx(3e-9, rel=1e-9)
    assert fit["rms_log_residual"] < 1e-12
    wiggle = [(n, s * f) for (n, s), f in zip(pts, (1.05, 0.95, 1.04, 0.97), strict=True)]
    assert bs.fit_exponent(wiggle)["exponent"] == pytest.approx(2.8, abs=0.05)


def test_fit_needs_two_distinct_sizes():
    assert bs.fit_exponent([(64, 1.0), (64, 2.0)]) is None
    assert bs.fit_exponent([(64, 1.0), (128, 0.0)]) is None  # a zero time has no logarithm


def test_scaling_fits_pick_their_rows():
    rows = [_row(f"prefix:{n}", "gamma_f", "dual", seconds=1e-9 * n ** 3) for n in (256, 512, 1024, 2048)]
    rows.append(_row("prefix:64", "gamma_f", "dual", seconds=50.0))  # below N = 256: not fitted
    rows.append(_row("prefix:4096", "gamma_f", "dual", status="time limit"))  # not finished
    rows += [_row(f"prefix:{n}", "gamma_f", "sdp", seconds=1e-6 * n ** 3.5) for n in (64, 128)]
    rows += [_row(f"allrange:{n}", "gamma_f", "sdp", seconds=1e-5 * n ** 3.2) for n in (16, 32, 64)]
    fits = {(f["solver"], f["family"], f["norm"]): f for f in bs.scaling_fits(rows)}
    assert fits["dual", "prefix", "gamma_f"]["exponent"] == pytest.approx(3.0, abs=1e-9)
    assert fits["dual", "prefix", "gamma_f"]["points"] == 4
    assert fits["scs", "prefix", "gamma_f"]["exponent"] is None  # 2 points, 3 needed
    assert fits["scs", "allrange", "gamma_f"]["exponent"] == pytest.approx(3.2, abs=1e-9)
    assert fits["dual", "allrange", "gamma_2"]["model_exponent"] == 4
    assert fits["dual", "prefix", "gamma_2"]["model_exponent"] == 3


# -- targets and the comparison with the SDP ---------------------------------------------
def test_targets_pass_fail_and_na():
    m20 = bs.MARGINALS_20
    rows = [
        _row("prefix:1024", "gamma_f", "dual", seconds=10.0),                    # PASS
        _row("prefix:2048", "gamma_f", "dual", seconds=130.0),                   # FAIL: too slow
        _row("prefix:1024", "gamma_2", "dual", seconds=30.0, gap=1e-5),          # FAIL: gap
        _row(m20, "gamma_f", "dual", status="skipped", family="marginals", N=2**20),
        _row(m20, "gamma_f", "algebra", seconds=0.5, family="marginals", N=2**20),  # PASS
        _row(m20, "gamma_2", "algebra", status="time limit", family="marginals", N=2**20),  # FAIL
    ]                                                                             # allrange:128: N/A
    got = {t["target"]: t for t in bs.evaluate_targets(rows)}
    assert got["γ_F prefix:1024 ≤ 12 s"]["result"] == "PASS"
    assert got["γ_F prefix:2048 ≤ 120 s"]["result"] == "FAIL"
    assert got["γ₂ prefix:1024 ≤ 60 s"]["result"] == "FAIL"
    assert "gap" in got["γ₂ prefix:1024 ≤ 60 s"]["why"]
    assert got["γ_F allrange:128 ≤ 30 s"]["result"] == "N/A"
    assert got["γ_F 2-way marginals, 20 binary attrs ≤ 60 s"]["result"] == "PASS"
    assert got["γ₂ 2-way marginals, 20 binary attrs ≤ 60 s"]["result"] == "FAIL"
    assert "time limit" in got["γ₂ 2-way marginals, 20 binary attrs ≤ 60 s"]["why"]
    assert got["never slower than the generic SDP where both finish"]["result"] == "N/A"


def test_never_slower_than_the_sdp():
    rows = [_row("prefix:64", "gamma_f", "sdp", seconds=0.5),
            _row("prefix:64", "gamma_f", "sdp", seconds=100.0, backend="clarabel"),
            _row("prefix:64", "gamma_f", "dual", seconds=0.05),
            _row("allrange:16", "gamma_2", "sdp", seconds=0.9, backend="clarabel"),
            _row("allrange:16", "gamma_2", "sdp", status="time limit"),
            _row("allrange:16", "gamma_2", "dual", seconds=1.8),
            _row("prefix:512", "gamma_f", "dual", seconds=3.0)]  # no SDP finished: no comparison
    bs.add_sdp_ratios(rows)
    assert rows[2]["sdp_ratio"] == pytest.approx(0.1)  # against the fastest SDP (SCS), not Clarabel
    assert rows[1]["sdp_ratio"] == pytest.approx(200.0)
    assert rows[5]["sdp_ratio"] == pytest.approx(2.0)
    assert "sdp_ratio" not in rows[6]
    bad = bs.sdp_violations(rows)
    assert len(bad) == 1 and "allrange:16" in bad[0] and "clarabel" in bad[0]
    last = bs.evaluate_targets(rows)[-1]
    assert last["result"] == "FAIL" and "allrange:16" in last["why"]
    ok = [r for r in rows if r["spec"] != "allrange:16"]
    assert bs.evaluate_targets(ok)[-1]["result"] == "PASS"


# -- skip rules --------------------------------------------------------------------------
@pytest.mark.parametrize("family,N,norm,backend,skipped", [
    ("prefix", 64, "gamma_f", "clarabel", False),
    ("prefix", 128, "gamma_f", "clarabel", True),
    ("allrange", 128, "gamma_2", "clarabel", True),
    ("prefix", 256, "gamma_2", "scs", False),
    ("prefix", 512, "gamma_f", "scs", True),
    ("random", 512, "gamma_f", "scs", True),
    ("allrange", 64, "gamma_2", "scs", False),
    ("allrange", 128, "gamma_2", "scs", True),
    ("allrange", 128, "gamma_f", "scs", False),
    ("marginals", 64, "gamma_2", "scs", False),
    ("marginals", 2**20, "gamma_f", "scs", True),
])
def test_sdp_skip_rules(family, N, norm, backend, skipped):
    reason = bs.sdp_skip_reason(family, N, norm, backend)
    assert (reason is not None) == skipped
    if skipped:
        assert reason.startswith("skipped: ")


def test_skip_reasons_say_why():
    assert "cannot form the matrix" in bs.sdp_skip_reason("marginals", 2**20, "gamma_f", "scs")
    assert "OOM" in bs.sdp_skip_reason("prefix", 128, "gamma_f", "clarabel")
    assert bs.sdp_skip_reason("allrange", 16, "gamma_f", "clarabel", quick=True) is None
    assert "--quick" in bs.sdp_skip_reason("prefix", 64, "gamma_f", "clarabel", quick=True)
    assert bs.dual_skip_reason(2048, 2048) is None
    assert "cannot form the matrix" in bs.dual_skip_reason(2**20, 760)


def test_plan_runs_quick_suite():
    planned = bs.plan_runs(bs.quick_cases(), ("scs", "clarabel"), quick=True)
    by = {(r["spec"], r["norm"], r["method"], r["backend"]): r for r in planned}
    assert len(planned) == 3 * 2 * 3 + 2  # 3 cases × 2 norms × (scs, clarabel, dual) + algebra
    assert "skip" in by["prefix:64", "gamma_f", "sdp", "clarabel"]
    assert "skip" not in by["prefix:64", "gamma_f", "sdp", "scs"]
    assert "skip" not in by["allrange:16", "gamma_2", "sdp", "clarabel"]
    marg = bs.binary_marginals_spec(6)
    assert by[marg, "gamma_2", "algebra", "numpy"]["N"] == 64
    assert by[marg, "gamma_2", "algebra", "numpy"]["k"] == 60


def test_marginal_specs(tmp_path):
    assert "marginals:" + "x".join(["2"] * 20) + ":2" == bs.MARGINALS_20
    dom = tmp_path / "d.json"
    dom.write_text(json.dumps({"z": 85, "a": 9, "m": 2}))
    assert bs.adult_marginals_spec(dom) == "marginals:85x9x2:2"  # the JSON's key order
    cases = bs.full_cases(tmp_path / "missing.json")
    adult = next(c for c in cases if "Adult" in c.label)
    assert adult.unavailable and adult.unavailable.startswith("not available")
    assert [c.spec for c in cases[:6]] == [f"prefix:{n}" for n in (64, 128, 256, 512, 1024, 2048)]


# -- a child that printed no result ------------------------------------------------------
def _classify(**kw):
    base = {"exit_code": None, "term_signal": None, "killed_at_deadline": False, "stderr": "",
            "wall": 12.0, "time_limit": 300.0, "grace": 60.0, "memory_cap_gib": 16.0}
    return bs.classify_termination(**{**base, **kw})


def test_classify_termination():
    assert _classify(killed_at_deadline=True, term_signal=signal.SIGKILL)["status"] == "time limit"
    assert "out-of-memory killer" in _classify(term_signal=signal.SIGKILL)["detail"]
    assert _classify(term_signal=signal.SIGABRT,
                     stderr="memory allocation of 123 bytes failed")["status"] == "out of memory"
    assert _classify(exit_code=1, stderr="Traceback…\nMemoryError")["status"] == "out of memory"
    assert _classify(exit_code=1, stderr="Traceback…\nKeyError: 'x'")["status"] == "failed"


# -- rendering ---------------------------------------------------------------------------
def _report(rows):
    bs.add_sdp_ratios(rows)
    return {"meta": {"time_limit_s": 300.0, "wall_grace_s": 60.0, "memory_cap_gib": 16.0, "gap_tol": 1e-6,
                     "baseline_rss_mb": 121.0, "specs": {"prefix:1024": "prefix:1024"}},
            "rows": rows, "fits": bs.scaling_fits(rows), "targets": bs.evaluate_targets(rows),
            "violations": bs.sdp_violations(rows)}


def test_markdown_rendering():
    skipped = _row("prefix:1024", "gamma_f", "sdp", status="skipped")
    skipped["detail"] = "SCS beyond N = 256 (bench_core)"
    rows = [_row("prefix:1024", "gamma_f", "dual", seconds=9.87654),
            skipped,
            _row("prefix:64", "gamma_f", "sdp", seconds=0.5),
            _row("prefix:64", "gamma_f", "dual", seconds=0.0312)]
    md = bs.render_markdown(_report(rows))  # the machine, versions and command: the harness's header
    assert "RLIMIT_AS" in md and "fresh process" in md and "benchmarks.suites.scale --case" in md
    assert "| γ_F prefix:1024 ≤ 12 s | **PASS** |" in md
    assert "| γ_F prefix:2048 ≤ 120 s | **N/A** |" in md
    assert "skipped: SCS beyond N = 256 (bench_core)" in md
    assert "| 9.88 |" in md and "| 0.0312 |" in md and "| 0.062 |" in md  # seconds and × SDP
    assert "O(N³), independent of k" in md and "O(kN² + N³)" in md
    table = [ln for ln in md.splitlines() if ln.startswith("| prefix:")]
    assert len(table) == len(rows)
    assert "nan" not in md.lower()
    json.dumps(json_safe(_report(rows)), allow_nan=False)  # the JSON twin is strict JSON


def test_core_bench_markdown_accepts_a_dual_row_without_eps():
    rows = [{"workload": "prefix:16", "norm": "gamma_f", "backend": "scs", "status": "ok",
             "value": 1.69, "gap": 1e-9, "eps": None, "seconds": 0.05, "peak_rss_mb": 129.0}]
    core.add_ratios(rows)
    md = core.render_markdown(rows, 121.0, ("scs",), 300.0)
    assert "| prefix:16 | gamma_f | scs | ok | 1.6900000000 | 1.00e-09 | – | 0.05 | 1.0 |" in md


# -- end to end: one small case through the subprocess path ---------------------------------
def test_one_case_in_a_fresh_process():
    r = bs.run_case("prefix:8", "gamma_f", "dual", "numpy", time_limit=30.0, memory_cap_gib=8.0, grace=30.0)
    assert r["status"] == "ok", r
    assert r["gap"] <= 1e-6 and r["value"] > 1.0
    assert 0 < r["seconds"] < r["wall"]
    assert r["peak_rss_mb"] > 10


def test_a_case_past_its_wall_limit_is_killed_and_reported():
    # the child cannot even import the stack in 0.05 s: the parent kills it at the deadline
    r = bs.run_case("prefix:8", "gamma_f", "dual", "numpy", time_limit=0.05, grace=0.0)
    assert r["status"] == "time limit" and "killed at the wall limit" in r["detail"]
    assert r["wall"] >= 0.05
