"""The run path imports no solver.

Plans of every kind are built here, in the normal process (the planner may use anything).
Then, in a fresh process where ``cvxpy``, ``scs``, ``clarabel`` and ``mosek`` are made
unimportable (a meta-path finder that records the attempt and raises ImportError), the
``factorize`` command (``factorize.cli.main``, what ``python -m factorize`` runs) verifies,
inspects and runs each plan, creates and charges a budget, and plays the local model's
client and server. Every command must succeed, no blocked module may even be asked for, the
heavy modules a command does not need stay unloaded, and the released answers must be those
of the same seeded run in this process. One test runs the real ``python -m factorize run``
with the blocker installed by a ``sitecustomize`` module.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("cvxpy", "scs", "clarabel", "mosek")
#: Never loaded by the run path, whatever the plan kind: plotting, data frames, the planner,
#: the SDP back-ends, scipy's optimisers (the verifier evaluates calibrations, never searches).
NEVER = ("matplotlib", "pandas", "factorize.planner.routes", "scipy.optimize",
         "factorize.report", "solvers.backends", "solvers.sdp_gamma_f", "solvers.sdp_gamma_2",
         "solvers.sdp_approx_gamma_2")

BLOCKER = textwrap.dedent("""
    import sys, traceback
    BLOCKED = {blocked!r}
    ATTEMPTS = []

    class _Unimportable:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                ATTEMPTS.append({{"name": name, "stack": "".join(traceback.format_stack(limit=14)[:-1])}})
                print(f"BLOCKED IMPORT {{name}}", file=sys.stderr)
                raise ImportError(f"{{name}} is made unimportable by tests/test_solver_free.py")
            return None

    sys.meta_path.insert(0, _Unimportable())
""").format(blocked=BLOCKED)

DRIVER = BLOCKER + textwrap.dedent("""
    import contextlib, io, json
    from factorize.cli import main

    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse
                rc = exc.code
        results.append({"argv": argv, "rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()})
    json.dump({"results": results, "attempts": ATTEMPTS, "modules": sorted(sys.modules)},
              sys.__stdout__)
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def blocked_cli(commands: list[list[str]], cwd: Path) -> dict:
    """Run ``factorize`` commands in one fresh process with the solvers unimportable."""
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(commands)], capture_output=True,
                       text=True, cwd=cwd, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert not out["attempts"], "a solver was imported:\n" + "\n".join(
        f"{a['name']}:\n{a['stack']}" for a in out["attempts"][:2])
    for res in out["results"]:
        assert res["rc"] == 0, (res["argv"], res["stdout"][-1500:], res["stderr"][-1500:])
    loaded = set(out["modules"])
    assert not loaded & set(NEVER), sorted(loaded & set(NEVER))
    return out


# ------------------------------------------------------------------------------ the plans

DOMAIN4 = {"a": 3, "b": 2, "c": 4, "d": 2}


def _write_records(path: Path, names: list[str], codes: np.ndarray) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        w.writerows(codes.tolist())


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict:
    """kind → (plan file, data file, extra run arguments); data and plans are tiny."""
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import save_plan
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.plan import save_local_plan
    from factorize.kinds.local.protocol import encode_codes, write_messages
    from factorize.kinds.projection.build import build_projection_plan
    from factorize.kinds.projection.codec import save_projection_plan
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.kinds.structured.plan import save_structured_plan
    from factorize.plan.files import file_sha256
    from factorize.privacy import TestRandom
    from workloads import Domain

    d = tmp_path_factory.mktemp("solver_free")
    rng = np.random.default_rng(5)
    np.save(d / "h8.npy", np.bincount(rng.integers(0, 8, 400), minlength=8).astype(np.int64))
    dom4 = Domain(list(DOMAIN4), list(DOMAIN4.values()))
    _write_records(d / "rec4.csv", list(DOMAIN4),
                   np.column_stack([rng.integers(0, s, 300) for s in DOMAIN4.values()]))
    bits = rng.integers(0, 2, (3, 5))[rng.integers(0, 3, 60)]
    _write_records(d / "bits.csv", [f"a{i}" for i in range(5)], bits)
    dom_bits = Domain([f"a{i}" for i in range(5)], [2] * 5)
    out: dict = {}

    def dense(name, plan, data, *extra):
        save_plan(plan, d / f"{name}.plan")
        out[name] = (d / f"{name}.plan", d / data, list(extra))

    dense("dense", build_plan("prefix:8", "epsilon=1,delta=1e-6"), "h8.npy")
    dense("kron", build_plan("kron(prefix:4,identity:2)", "rho=0.5"), "h8.npy")
    dense("laplace", build_plan("prefix:8", "epsilon=1"), "h8.npy")
    dense("least_squares", build_plan("marginals:2x2x2:2", "epsilon=1,delta=1e-6",
                                      mechanism="least-squares"), "h8.npy")
    for name, spec, strategy in (
            ("residual", "marginals:3x2x4x2:2", None),
            ("union", "vstack(kron(prefix:3,identity:2,total:4,total:2),"
                      "kron(total:3,total:2,allrange:4,identity:2))", "union")):
        plan = build_structured_plan(spec, "rho=0.5", norm="gamma_f", domain=dom4, strategy=strategy)
        save_structured_plan(plan, d / f"{name}.plan")
        out[name] = (d / f"{name}.plan", d / "rec4.csv", [])
    for kind in ("covariance", "relaxed-projection"):
        plan = build_projection_plan("parity:5:2", "epsilon=1,delta=1e-6", kind, n=60,
                                     relation="replace", domain=dom_bits)
        save_projection_plan(plan, d / f"{kind}.plan")
        out[kind] = (d / f"{kind}.plan", d / "bits.csv", [])
    plan = build_projection_plan("prefix:8", "epsilon=1", "jl", n=400, relation="replace")
    save_projection_plan(plan, d / "jl.plan")
    out["jl"] = (d / "jl.plan", d / "h8.npy", ["--allow-float-noise"])

    lp = build_local_plan("marginals:2x3:2", "epsilon=1", n=1000,
                          domain=Domain(["a", "b"], [2, 3]))
    save_local_plan(lp, d / "l.lplan")
    codes = np.column_stack([rng.integers(0, 2, 200), rng.integers(0, 3, 200)])
    write_messages(d / "m.parquet", encode_codes(lp, codes, TestRandom(3)), file_sha256(d / "l.lplan"),
                   True)
    out["local"] = (d / "l.lplan", d / "m.parquet", [])
    return out


def _reference(plan: Path, data: Path, out: Path, extra: list[str], **kw):
    """The same release in this process (solvers importable), same seed."""
    from factorize.executor.output import read_answers
    from factorize.executor.pipeline import run

    run(str(plan), str(data), str(out), allow_float_noise="--allow-float-noise" in extra, **kw)
    return read_answers(out)


def _same_answers(path: Path, ref: tuple) -> None:
    from factorize.executor.output import read_answers

    cols, meta = read_answers(path)
    ref_cols, ref_meta = ref
    assert set(cols) == set(ref_cols)
    for name, v in cols.items():
        if np.asarray(v).dtype.kind in "fi":
            np.testing.assert_allclose(v, ref_cols[name], rtol=1e-9, atol=1e-9, err_msg=name)
        else:
            assert list(v) == list(ref_cols[name]), name
    assert meta["plan_sha256"] == ref_meta["plan_sha256"]


CENTRAL = ("dense", "kron", "laplace", "least_squares", "residual", "union", "covariance",
           "relaxed-projection", "jl")


@pytest.mark.parametrize("kind", CENTRAL)
def test_verify_inspect_run_without_solvers(plans, tmp_path, kind):
    plan, data, extra = plans[kind]
    ans = tmp_path / "answers.csv"
    commands = [["verify", str(plan)], ["inspect", str(plan)],
                ["run", str(plan), "--data", str(data), "--out", str(ans), "--seed", "7", *extra]]
    if kind == "dense":  # the budget commands and a charged run, on the same process
        ledger = str(tmp_path / "ledger.db")
        commands += [["budget", "create", ledger, "--new", "--dataset", "d", "--budget",
                      "epsilon=4,delta=1e-5"],
                     ["run", str(plan), "--data", str(data), "--out", str(tmp_path / "charged.json"),
                      "--ledger", ledger, "--dataset", "d"],
                     ["budget", "show", ledger, "--json"], ["budget", "verify", ledger]]
    out = blocked_cli(commands, tmp_path)
    verify, inspect, run = out["results"][:3]
    assert "PASS" in verify["stdout"].splitlines()[-1]
    assert inspect["stdout"].startswith("status      VERIFIED")
    assert "NOT PRIVATE" in run["stdout"]
    _same_answers(ans, _reference(plan, data, tmp_path / "ref.csv", extra, seed=7))
    loaded = set(out["modules"])
    if data.suffix == ".npy":  # no SQL engine for a histogram file
        assert "duckdb" not in loaded
    assert "pyarrow.parquet" not in loaded  # answers in CSV / JSON, data not Parquet
    if kind == "kron":  # zCDP: no root finding, so no scipy.optimize
        assert "scipy.optimize" not in loaded
    if kind == "dense":
        show = json.loads(out["results"][5]["stdout"])
        (ds,) = show["datasets"]
        assert ds["spent"]["epsilon"] == "1" and len(ds["history"]) == 1
        assert json.loads((tmp_path / "charged.json").read_text())["metadata"]["test_mode"] is False


def test_local_client_and_aggregate_without_solvers(plans, tmp_path):
    from factorize.kinds.local.plan import load_local_plan

    plan, messages, _ = plans["local"]
    ans = tmp_path / "answers.csv"
    out = blocked_cli([["local", "verify", str(plan)], ["local", "inspect", str(plan)],
                       ["local", "client", str(plan), "--record", "a=1,b=2"],
                       ["local", "aggregate", str(plan), "--messages", str(messages), "--out",
                        str(ans)]], tmp_path)
    verify, inspect, client, _ = out["results"]
    assert verify["stdout"].strip().endswith("PASS")
    assert inspect["stdout"].startswith("status      VERIFIED")
    message = json.loads(client["stdout"])["message"]
    lp = load_local_plan(plan)
    assert len(message) == lp.randomizer["dim"] == lp.A.shape[0] and np.all(np.isfinite(message))
    # the ℓ2 randomizer's messages all have the same norm B
    assert np.linalg.norm(message) == pytest.approx(float(lp.randomizer["scale"]), rel=1e-9)
    _same_answers(ans, _reference(plan, messages, tmp_path / "ref.csv", [], expect="local"))
    assert "duckdb" in out["modules"] and "scipy.optimize" not in out["modules"]


def test_python_m_factorize_run_with_the_solvers_unimportable(plans, tmp_path):
    """The real entry point, ``python -m factorize run``, with the blocker in sitecustomize."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    plan, data, _ = plans["kron"]
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    r = subprocess.run([sys.executable, "-m", "factorize", "run", str(plan), "--data", str(data),
                        "--out", str(tmp_path / "a.parquet"), "--seed", "1"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "BLOCKED IMPORT" not in r.stderr, r.stderr
    assert "released    8 answers" in r.stdout
    # and the blocker does block: the SDP back-ends cannot be imported in that process
    r = subprocess.run([sys.executable, "-c", "import solvers.backends"], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode != 0 and "BLOCKED IMPORT cvxpy" in r.stderr


# ------------------------------------------------- planning without an SDP loads no back-end

#: What planning loads only when it solves an SDP.
SDP_ONLY = ("cvxpy", "scs", "clarabel", "mosek", "solvers.backends", "solvers.sdp_gamma_f",
            "solvers.sdp_gamma_2", "solvers.sdp_approx_gamma_2")

PLAN_DRIVER = textwrap.dedent("""
    import contextlib, io, json, sys
    from factorize.cli import main

    results = []
    for argv in json.loads(sys.argv[1]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            results.append({"rc": main(argv), "stdout": out.getvalue()})
    json.dump({"results": results, "modules": sorted(sys.modules)}, sys.__stdout__)
""")


def _fresh(code: str, *args: str, cwd: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       cwd=cwd, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_pure_dp_and_dual_plans_load_no_sdp_backend(tmp_path):
    """planner.routes.solve checks the back-end (SolverOptions, require_backend) without cvxpy
    and imports the SDP modules only to solve an SDP: a pure-DP plan and a zCDP plan whose
    dual solver certifies load none of them, and both plans verify."""
    commands = [["plan", "--workload", "prefix:16", "--privacy", "epsilon=1",
                 "--out", str(tmp_path / "pure.plan")],
                ["plan", "--workload", "prefix:16", "--privacy", "rho=0.5",
                 "--out", str(tmp_path / "zcdp.plan")]]
    out = _fresh(PLAN_DRIVER, json.dumps(commands), cwd=tmp_path)
    assert [r["rc"] for r in out["results"]] == [0, 0], out["results"]
    assert not set(out["modules"]) & set(SDP_ONLY), sorted(set(out["modules"]) & set(SDP_ONLY))
    assert "factorize.planner.routes" in out["modules"]  # the planner did run
    from factorize import kinds
    
    for name in ("pure.plan", "zcdp.plan"):
        assert kinds.verify_plan(kinds.load_plan(str(tmp_path / name))).failures == []


def test_sdp_route_still_loads_its_backend(tmp_path):
    """The lazy import is no dead end: an explicit SDP solve loads cvxpy and certifies."""
    code = textwrap.dedent("""
        import json, sys
        from factorize.planner.routes import solve
        r = solve("prefix:4", "gamma_f", method="sdp")
        json.dump({"gap": r.gap, "modules": sorted(sys.modules)}, sys.stdout)
    """)
    out = _fresh(code, cwd=tmp_path)
    assert out["gap"] <= 1e-6 and "cvxpy" in out["modules"]


def test_require_backend_checks_without_cvxpy(tmp_path, monkeypatch):
    """The availability check finds the back-ends' modules without importing them, and
    refuses a back-end whose module is missing (as cvxpy's installed_solvers would)."""
    code = textwrap.dedent("""
        import json, sys
        from solvers.options import SolverOptions, require_backend
        for b in ("scs", "clarabel"):
            require_backend(SolverOptions(backend=b))
        json.dump({"modules": sorted(sys.modules)}, sys.stdout)
    """)
    out = _fresh(code, cwd=tmp_path)
    assert not set(out["modules"]) & {"cvxpy", "scs", "clarabel"}

    import importlib.util

    from solvers import options
    from solvers.errors import BackendUnavailableError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "clarabel" else real(name, *a))
    options.require_backend(options.SolverOptions(backend="scs"))
    with pytest.raises(BackendUnavailableError, match="clarabel is not installed"):
        options.require_backend(options.SolverOptions(backend="clarabel"))
