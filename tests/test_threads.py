"""The thread policy: ``--threads``, ``FACTORIZE_THREADS``, default 1, never
more than the usable cores; invalid values name the flag or the variable; the pools of a
``factorize`` process really have that size (numpy's and scipy's OpenBLAS alike)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from factorize import threads
from factorize.threads import ENV_VAR, ThreadsError, decide, parse_threads, usable_cores

ROOT = Path(__file__).resolve().parents[1]


def test_default_is_one_thread_whatever_the_cores():
    for cores in (1, 2, 64):
        d = decide(None, environ={}, cores=cores)
        assert (d.threads, d.source, d.usable_cores, d.capped) == (1, "default", cores, False)


def test_environment_override_and_the_option_wins():
    assert decide(None, environ={ENV_VAR: "3"}, cores=8).threads == 3
    assert decide(None, environ={ENV_VAR: "3"}, cores=8).source == ENV_VAR
    d = decide("2", environ={ENV_VAR: "3"}, cores=8)
    assert (d.threads, d.source) == (2, "--threads")
    assert decide(None, environ={ENV_VAR: "  "}, cores=8).source == "default"  # empty = unset
    assert decide(None, environ={ENV_VAR: "max"}, cores=6).threads == 6
    assert decide("ALL", environ={}, cores=6).threads == 6
    assert decide(4, environ={}, cores=6).threads == 4


@pytest.mark.parametrize("asked", ["3", "64", "max"])
def test_never_more_than_the_usable_cores(asked):
    d = decide(asked, environ={}, cores=2)
    assert d.threads <= 2
    if asked != "max":
        assert d.capped and d.requested == int(asked)
        assert "capped at the 2 usable cores" in d.describe()
    assert decide(None, environ={ENV_VAR: asked}, cores=2).threads <= 2
    # with the real core count too
    assert decide(asked).threads <= usable_cores() <= (os.cpu_count() or 1)


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", "", "2 threads"])
def test_invalid_values_name_the_flag_or_the_variable(bad):
    with pytest.raises(ThreadsError, match="--threads"):
        decide(bad, environ={}, cores=2)
    if bad.strip():
        with pytest.raises(ThreadsError, match=ENV_VAR):
            decide(None, environ={ENV_VAR: bad}, cores=2)
    with pytest.raises(ThreadsError):
        parse_threads(0)
    assert issubclass(ThreadsError, ValueError)


def test_usable_cores_is_the_affinity_lowered_by_a_cgroup_quota(tmp_path):
    affinity = len(os.sched_getaffinity(0))
    assert usable_cores(cgroup_root=str(tmp_path)) == affinity  # no cpu.max: affinity only
    for text, quota in (("max 100000\n", affinity), ("50000 100000\n", 1),
                        ("150000 100000\n", min(affinity, 2)), ("garbage\n", affinity)):
        (tmp_path / "cpu.max").write_text(text)
        assert usable_cores(cgroup_root=str(tmp_path)) == quota, text


def test_limited_sizes_the_loaded_pools_and_restores_them(monkeypatch):
    import numpy  # noqa: F401 - a BLAS is loaded
    from threadpoolctl import threadpool_info

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    before = {p["filepath"]: p["num_threads"] for p in threadpool_info()}
    with threads.limited(1):
        assert all(p["num_threads"] == 1 for p in threadpool_info())
        assert all(os.environ[v] == "1" for v in threads.POOL_ENV_VARS)
    assert {p["filepath"]: p["num_threads"] for p in threadpool_info()
            if p["filepath"] in before} == before
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_cli_refuses_invalid_values(monkeypatch, capsys):
    from factorize.cli import build_parser, main

    with pytest.raises(SystemExit) as exc:
        main(["solve", "--workload", "prefix:4", "--threads", "0"])
    assert exc.value.code == 2 and "--threads" in capsys.readouterr().err
    monkeypatch.setenv(ENV_VAR, "lots")
    assert main(["solve", "--workload", "prefix:4"]) == 2
    err = capsys.readouterr().err
    assert ENV_VAR in err and "'lots'" in err
    monkeypatch.delenv(ENV_VAR)
    # top level or on the sub-command; the sub-command's wins
    assert build_parser().parse_args(["--threads", "2", "solve", "--workload", "x"]).threads == "2"
    assert build_parser().parse_args(["--threads", "2", "run", "p", "--data", "d", "--out", "o",
                                      "--threads", "1"]).threads == "1"
    assert build_parser().parse_args(["local", "plan", "--workload", "x", "--privacy", "epsilon=1",
                                      "--n", "5", "--out", "o", "--threads", "max"]).threads == "max"


PROBE = textwrap.dedent("""
    import json, sys
    import factorize.cli.app as cli

    def probe(args):  # in place of the solve command: the pools as the command sees them
        import numpy, scipy.linalg  # numpy's and scipy's own OpenBLAS, loaded after the policy
        from factorize.threads import pool_info
        print(json.dumps(pool_info()))
        return 0

    assert "numpy" not in sys.modules
    cli._solve = probe
    sys.exit(cli.main(["solve", "--workload", "prefix:4", *sys.argv[1:]]))
""")


def _pools(*argv: str, env: dict[str, str] | None = None) -> list[dict]:
    e = {k: v for k, v in os.environ.items() if k not in threads.POOL_ENV_VARS and k != ENV_VAR}
    e.update(env or {}, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                       env=e, timeout=120)
    assert r.returncode == 0, r.stderr
    pools = json.loads(r.stdout)
    assert sum(p["user_api"] == "blas" for p in pools) >= 1
    return pools


def test_a_factorize_process_runs_with_the_decided_pool_size():
    cores = usable_cores()
    assert {p["num_threads"] for p in _pools()} == {1}
    assert {p["num_threads"] for p in _pools("--threads", "max")} == {cores}
    assert {p["num_threads"] for p in _pools(env={ENV_VAR: "64"})} == {cores}
    # an explicit OPENBLAS_NUM_THREADS is overridden: --threads / FACTORIZE_THREADS are the knob
    assert {p["num_threads"] for p in _pools(env={"OPENBLAS_NUM_THREADS": str(cores)})} == {1}
