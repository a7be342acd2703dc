"""``python -m benchmarks``: the suite registry, the command line and the common harness.

Independent truths: the interface every suite must have, what ``--list`` prints, the header a
report must carry (machine, versions, load, the command as typed), timings of calls whose
result and duration are known (a sleeping child killed at its deadline; pytest-benchmark's
statistics against the rounds recorded), ratios of hand-built rows, that the wheel leaves the
benchmarks out, and one real run of the cheapest suite. No expensive benchmark runs here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import tomllib

import pytest

import benchmarks as bench
from benchmarks import INTERFACE, SUITES, load_suite, main, report_path, suite_parser
from benchmarks.harness import (
    Harness,
    Report,
    add_ratios,
    interleaved,
    json_safe,
    measure,
    previous_body,
    run_process,
)
from factorize.cli import main as factorize_main
from factorize.errors import InternalError

STACK = ("python", "numpy", "scipy", "cvxpy", "scs", "clarabel", "duckdb", "pyarrow")


# -- the registry ------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(SUITES))
def test_every_registered_suite_has_the_interface(name):
    mod = load_suite(name)
    for attr in INTERFACE:
        assert hasattr(mod, attr), f"{name} lacks {attr}"
    assert name == mod.NAME
    assert isinstance(mod.SUMMARY, str) and mod.SUMMARY.strip() and "\n" not in mod.SUMMARY
    assert callable(mod.add_arguments) and callable(mod.run)
    parser = suite_parser(name)
    assert isinstance(parser, argparse.ArgumentParser)
    args = parser.parse_args([])  # every option has a default
    assert args.out == report_path(mod) and args.out.startswith("reports/") and args.out.endswith(".md")
    # no suite option may collide with the bench command's own (they would never reach the suite)
    own = {s for a in parser._actions for s in a.option_strings}
    assert not own & {"--suite", "--list", "--threads"}


def test_the_converted_scripts_are_gone():
    from benchmarks.harness import REPO_ROOT

    for name in SUITES:
        assert not (REPO_ROOT / "reports" / f"bench_{name}.py").exists()
    assert not list((REPO_ROOT / "reports").glob("*.py"))  # every benchmark is a suite
    assert not (REPO_ROOT / "factorize" / "bench_scale.py").exists()
    assert not (REPO_ROOT / "factorize" / "pure_dp" / "bench_table.py").exists()
    assert not list((REPO_ROOT / "factorize" / "bench").rglob("*.py"))  # moved to benchmarks/, not installed
    assert {"executor", "raw"} <= set(SUITES)


def test_the_benchmarks_are_not_installed():
    """The wheel's packages (setuptools' discovery with pyproject's patterns) are factorize,
    solvers and workloads; ``benchmarks`` runs from a checkout only, and ``factorize`` has no
    ``bench`` command."""
    from setuptools import find_packages

    from benchmarks.harness import REPO_ROOT

    find = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    packages = find_packages(str(REPO_ROOT), include=find["packages"]["find"]["include"])
    assert {p.split(".")[0] for p in packages} == {"factorize", "solvers", "workloads"}
    assert "factorize.bench" not in packages
    with pytest.raises(SystemExit) as exc:
        factorize_main(["bench", "--list"])
    assert exc.value.code == 2


def test_no_mention_of_the_old_scripts():
    """The docs and reports name the suites' commands, not the scripts they replaced."""
    from benchmarks.harness import REPO_ROOT

    texts = [REPO_ROOT / "README.md", REPO_ROOT / "ARCHITECTURE.md", *sorted((REPO_ROOT / "docs").glob("*.md")),
             *(REPO_ROOT / "reports" / f"bench_{name}.md" for name in ("executor", "raw"))]
    for path in texts:
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            for script in ("bench_executor.py", "bench_raw.py"):
                assert script not in text, f"{path.name} mentions {script}"


def test_unknown_suite():
    with pytest.raises(ValueError, match="unknown benchmark suite"):
        load_suite("nope")
    with pytest.raises(SystemExit) as exc:
        main(["--suite", "nope"])
    assert exc.value.code == 2


def test_listing_and_the_cli_import_nothing_heavy():
    """Building the command line imports no suite; listing imports every suite but no numpy."""
    from benchmarks.harness import REPO_ROOT

    code = ("import sys\n"
            "import benchmarks as b\n"
            "b.build_parser()\n"
            "assert not [m for m in sys.modules if m.startswith('benchmarks.suites.')], 'suite imported'\n"
            "b.list_suites()\n"
            "print('numpy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert out.stdout.strip() == "False"


# -- the CLI ---------------------------------------------------------------------------------
def test_bench_list(capsys):
    assert main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [ln.split()[0] for ln in lines if not ln.startswith("(")]
    assert names == list(bench.suite_names())
    assert [n for n, _ in bench.list_suites()] == names
    assert all(len(ln.split(None, 1)) == 2 for ln in lines)  # a name and its one-line summary
    assert not any(ln.startswith("(") for ln in lines)  # no benchmark is left a script of its own
    assert {"executor", "raw"} <= set(names)


def test_suite_options_are_the_suites(capsys):
    # scale keeps its options; a dry run solves and writes nothing
    assert main(["--suite", "scale", "--quick", "--dry-run", "--solvers", "scs"]) == 0
    out = capsys.readouterr().out
    assert "runs attempted" in out and "prefix:64" in out
    with pytest.raises(SystemExit) as exc:  # an option of another suite
        main(["--suite", "core", "--dry-run"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:  # factorize's commands refuse unknown options
        factorize_main(["check", "x.safetensors", "--quick"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["--suite", "core", "--help"])
    assert exc.value.code == 0
    assert "--time-limit" in capsys.readouterr().out
    assert main(["--help"]) == 0
    assert "pure_dp_table" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:  # the thread count is checked as factorize checks it
        main(["--threads", "0", "--list"])
    assert exc.value.code == 2


def test_cheapest_suite_end_to_end(tmp_path, capsys):
    out = tmp_path / "sub" / "bench_pure_dp_table.md"
    assert main(["--suite", "pure_dp_table", "--only", "identity:256", "--out", str(out)]) == 0
    md = out.read_text()
    assert md.startswith("# Pure-DP strategy optimizer")
    assert f"- command: `python -m benchmarks --suite pure_dp_table --only identity:256 --out {out}`" in md
    assert "- machine: " in md and "- load average (1, 5, 15 min): " in md and "- versions: " in md
    assert "identity:256" in md and "≤ok" in md
    data = json.loads(out.with_suffix(".json").read_text())
    h = data["bench"]
    assert h["suite"] == "pure_dp_table" and h["argv"] == ["--only", "identity:256", "--out", str(out)]
    assert set(STACK) <= set(h["versions"])
    assert {"CPU", "cores", "RAM", "OS"} <= set(h["machine"])
    assert len(h["load_average_start"]) == 3 and len(h["load_average_end"]) == 3
    assert h["duration_s"] > 0
    [row] = data["rows"]
    assert row["workload"] == "identity:256" and row["meets_target"]
    assert row["timing"]["times"] == [row["seconds"]] and len(row["timing"]["load_before"]) == 1


# -- the harness -------------------------------------------------------------------------------
def test_header_and_json(tmp_path):
    h = Harness("demo", ["--n", "3", "--label", "a b"], threads="2")
    h.uses("pyspark")
    report = Report("A demo", "| a | b |\n|---|---|\n| 1 | 2 |\n",
                    {"rows": [{"x": 1.0, "y": float("nan")}], "where": tmp_path})
    md, js = h.write(report, tmp_path / "bench_demo.md")
    text = md.read_text()
    lines = text.splitlines()
    assert lines[0] == "# A demo" and lines[1] == ""
    assert lines[2] == "- command: `python -m benchmarks --suite demo --threads 2 --n 3 --label 'a b'`"
    assert lines[3].startswith("- started: ") and "duration" in lines[3]
    assert lines[4].startswith("- machine: ") and "logical" in lines[4]
    assert lines[5].startswith("- versions: factorize ")
    for name in (*STACK, "pyspark"):
        assert f" {name} " in lines[5] + " " or f"{name} " in lines[5], name
    assert lines[6].startswith("- load average (1, 5, 15 min): ") and "at the start" in lines[6]
    assert lines[7].startswith("- BLAS / OpenMP threads: OMP_NUM_THREADS=")
    assert text.endswith("| 1 | 2 |\n")
    data = json.loads(js.read_text())
    assert js == md.with_suffix(".json")
    assert data["bench"]["command"] == "python -m benchmarks --suite demo --threads 2 --n 3 --label 'a b'"
    assert data["rows"] == [{"x": 1.0, "y": "nan"}] and data["where"] == str(tmp_path)
    with pytest.raises(InternalError, match="bench"):  # a suite's bug, not bad input
        h.write(Report("t", "", {"bench": 1}), tmp_path / "x.md")
    # a suite that rewrites one section reads its own text back, without title and header
    assert previous_body(md) == "| a | b |\n|---|---|\n| 1 | 2 |\n"
    old = tmp_path / "old.md"
    old.write_text("# Old report\n\nMachine: a box.\n\n## Section\n")  # written before the harness
    assert previous_body(old) == "Machine: a box.\n\n## Section\n"
    # the header is known by its shape, whatever command wrote it (`factorize bench` before the move)
    old.write_text("# Old report\n\n- command: `factorize bench --suite demo`\n- started: 2026-11-27\n\nrows\n")
    assert previous_body(old) == "rows\n"
    assert previous_body(tmp_path / "missing.md") is None


def test_json_safe():
    np = pytest.importorskip("numpy")
    got = json_safe({"a": np.float64(1.5), "b": np.arange(3), "c": (1, float("inf")), (1, 2): {3}})
    assert got == {"a": 1.5, "b": [0, 1, 2], "c": [1, "inf"], "(1, 2)": [3]}
    json.dumps(got, allow_nan=False)


def test_measure_and_interleaved():
    calls = []
    t = measure(lambda: calls.append(1) or len(calls), 3, warmup=2, check=lambda r: calls.append("checked"))
    assert len(t.times) == len(t.cpu) == len(t.load_before) == len(t.load_after) == 3
    assert t.result == 7 and calls.count("checked") == 3  # 2 warm-ups, then run/check × 3
    assert t.best <= t.median and t.as_dict()["best_s"] == t.best == min(t.times)
    # the statistics are pytest-benchmark's, of the rounds recorded
    d = t.as_dict()
    assert d["median_s"] == t.median == statistics.median(t.times)
    assert d["stats"]["rounds"] == 3 and d["stats"]["min"] == min(t.times) and d["stats"]["max"] == max(t.times)
    assert d["stats"]["mean"] == pytest.approx(statistics.mean(t.times))
    assert d["stats"]["stddev"] == pytest.approx(statistics.stdev(t.times))
    with pytest.raises(SystemExit):
        measure(lambda: 1, 2, check=lambda r: (_ for _ in ()).throw(SystemExit("mismatch")))
    order = []
    res = interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 2, warmup=1,
                      check=lambda name, r: order.append(name.upper()))
    assert order == ["a", "b", "a", "A", "b", "B", "a", "A", "b", "B"]
    assert set(res) == {"a", "b"} and all(len(v.times) == 2 for v in res.values())
    slow = measure(lambda: time.sleep(0.05))
    assert slow.best >= 0.05 and slow.cpu[0] < 0.05


def test_run_process():
    p = run_process([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"])
    assert (p.returncode, p.exit_code, p.term_signal, p.killed) == (3, 3, None, False)
    assert p.stdout.strip() == "out" and p.stderr.strip() == "err"
    assert p.peak_rss_mib > 1 and p.wall_s > 0 and p.cpu_s >= 0
    k = run_process([sys.executable, "-c", "import time; time.sleep(30)"], deadline=0.5)
    assert k.killed and k.returncode < 0 and k.term_signal == 9
    assert 0.5 <= k.wall_s < 30  # killed at the deadline, before its own 30 s were up
    assert set(k.as_dict()) >= {"wall_s", "cpu_s", "peak_rss_mib", "load_before", "load_after", "killed"}


def test_ratios_against_a_baseline_of_the_same_run():
    rows = [{"g": "x", "kind": "base", "s": 2.0}, {"g": "x", "kind": "base", "s": 1.0},
            {"g": "x", "kind": "other", "s": 3.0}, {"g": "y", "kind": "other", "s": 5.0},
            {"g": "x", "kind": "other", "s": None}]
    add_ratios(rows, value="s", group=lambda r: r["g"], baseline=lambda r: r["kind"] == "base", name="ratio")
    assert [r.get("ratio") for r in rows] == [2.0, 1.0, 3.0, None, None]  # y has no baseline
    add_ratios(rows, value="s", group=lambda r: r["g"], baseline=lambda r: r["kind"] == "base",
               name="vs_base", where=lambda r: r["kind"] != "base")
    assert [r.get("vs_base") for r in rows] == [None, None, 3.0, None, None]


def test_executor_section_startup_keeps_the_rest_of_the_report(tmp_path, monkeypatch):
    """``--section startup`` rewrites its own section and keeps every other line of ``--out``,
    whether the report was written before the harness or by it (its header then replaced)."""
    ex = load_suite("executor")
    calls = []

    def fake_section(quick, harness):
        calls.append(quick)
        return [ex.STARTUP_HEADING, "", f"new rows (quick={quick})", ""], {"rows": len(calls)}

    monkeypatch.setattr(ex, "startup_section", fake_section)
    out = tmp_path / "bench_executor.md"
    old_rows = "Measured 2026-11-23 by `factorize bench --suite executor`.\n\n| what | size | result |\n|---|---|---|\n"
    out.write_text(f"# {ex.TITLE}\n\n{old_rows}\n{ex.STARTUP_HEADING}\n\nold rows\n")
    for round_ in (1, 2):  # before the harness, then over the harness's own report
        assert main(["--suite", "executor", "--section", "startup", "--quick", "--out", str(out)]) == 0
        md = out.read_text()
        assert md.startswith(f"# {ex.TITLE}\n\n- command: `python -m benchmarks --suite executor --section startup")
        assert md.count("- command: ") == 1 and md.count(ex.STARTUP_HEADING) == 1
        assert old_rows in md and "old rows" not in md and md.endswith("new rows (quick=True)\n")
        assert json.loads(out.with_suffix(".json").read_text())["startup"] == {"rows": round_}
    # rows written by a full run name "the header above": that header's facts move into their text
    full = Harness("executor", [], threads="max")
    full.write(Report(ex.TITLE, f"Measured today by `x` {ex.HEADER_REF}.\n\n{ex.STARTUP_HEADING}\n\nold rows\n",
                      {"rows": ["kept"]}), out)
    assert main(["--suite", "executor", "--section", "startup", "--out", str(out)]) == 0
    md = out.read_text()
    assert ex.HEADER_REF not in md and "Measured today by `x` (on " in md and "at the start of that run)" in md
    assert "OPENBLAS_NUM_THREADS=" in md.split(ex.STARTUP_HEADING)[0].split("Measured today")[1]
    assert json.loads(out.with_suffix(".json").read_text())["rows"] == ["kept"]
