"""``factorize run --ledger`` under crashes, races and a bad ledger.

Each run is a real ``python -m factorize run`` process. Crashes: the process pauses at a fault
checkpoint (``factorize.ledger.faults``) and is killed with SIGKILL; afterwards the ledger must
open and verify, and every answer on disk (the output or a half-written temporary file) must
have a committed charge. Races: two runs that each fit the budget alone, both past
``Ledger.open`` before either charges — exactly one may release. A tampered, rolled-back,
deleted or missing ledger: the run exits 2 and writes nothing. Every plan kind that charges
the ledger (factorization, structured, projection) is run through the one pipeline.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from factorize.kinds.factorization.codec import save_plan
from factorize.ledger import Ledger, LedgerError, LedgerTampered
from factorize.ledger.faults import STEPS
from factorize.plan.files import file_sha256
from tests.plan_fixtures import small_plan

ROOT = Path(__file__).resolve().parents[1]
GUARANTEE = {"type": "approx_dp", "epsilon": 0.5, "delta": 1e-6}


#: Every kind that charges the ledger runs through the one pipeline (``executor.pipeline``):
#: every step for the factorization kind, the charge's own step (and the race) for the others
#: by default, the rest behind the slow mark (``pytest -m ""`` runs all).
KINDS = ("factorization", "structured", "projection")


def _kind_step_params():
    for kind in KINDS:
        for step in STEPS:
            slow = kind != "factorization" and step != "after_charge"
            yield pytest.param(kind, step, marks=pytest.mark.slow if slow else (),
                               id=f"{kind}-{step}")


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return {kind: _inputs(kind, tmp_path_factory.mktemp(kind)) for kind in KINDS}


@pytest.fixture(params=["factorization", "structured",
                        pytest.param("projection", marks=pytest.mark.slow)])
def inputs(request, plans):
    return plans[request.param]


def _inputs(kind, d):
    """A verified plan at (ε=0.5, δ=1e-6) of each charging kind and its data: prefix:8
    (identity factorization, no solver) on an int64 histogram; all 2-way marginals of three
    attributes (structured residual plan) and the covariance plan of parity:4:2 (projection,
    public n = 40) on records."""
    if kind == "factorization":
        plan = small_plan("prefix:8", "epsilon=0.5,delta=1e-6")
        assert plan.guarantee.to_dict() == GUARANTEE
        save_plan(plan, d / "p.plan")
        np.save(d / "h.npy", np.array([5, 0, 3, 7, 1, 0, 2, 4], dtype=np.int64))
        return d / "p.plan", d / "h.npy"
    rng = np.random.default_rng(0)
    if kind == "structured":
        from factorize.kinds.structured.build import build_structured_plan
        from factorize.kinds.structured.plan import save_structured_plan

        plan = build_structured_plan("marginals:3x2x4:2", "epsilon=0.5,delta=1e-6")
        save_structured_plan(plan, d / "p.plan")
        rows = np.column_stack([rng.integers(0, n, 60) for n in (3, 2, 4)])
        header = "x0,x1,x2"
    else:
        from factorize.kinds.projection.build import build_projection_plan
        from factorize.kinds.projection.codec import save_projection_plan

        plan = build_projection_plan("parity:4:2", "epsilon=0.5,delta=1e-6", "covariance", n=40,
                                     relation="replace")
        save_projection_plan(plan, d / "p.plan")
        rows = rng.integers(0, 2, (40, 4))
        header = "x0,x1,x2,x3"
    (d / "data.csv").write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return d / "p.plan", d / "data.csv"


def _ledger(path: Path, budget: dict) -> Ledger:
    book = Ledger.create(path)
    book.create_dataset("adult", budget)
    return book


def _start(inputs, out: Path, ledger: Path, *, pause: str | None = None,
           marker: Path | None = None, sleep: float = 60.0) -> subprocess.Popen:
    plan, data = inputs
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("FACTORIZE_FAULT_PAUSE", None)
    if pause is not None:
        env.update(FACTORIZE_FAULT_PAUSE=pause, FACTORIZE_FAULT_MARKER=str(marker),
                   FACTORIZE_FAULT_SLEEP=str(sleep))
    return subprocess.Popen([sys.executable, "-m", "factorize", "run", str(plan), "--data",
                             str(data), "--out", str(out), "--ledger", str(ledger),
                             "--dataset", "adult"], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(marker: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended (rc {proc.returncode}) before the checkpoint: "
                                 f"{proc.stderr.read()}")
        assert time.monotonic() < deadline, "checkpoint not reached"
        time.sleep(0.01)


def _finish(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def _answer_files(out: Path) -> list[Path]:
    """The output and any temporary file of it (half-written answers)."""
    return sorted(p for p in out.parent.iterdir()
                  if p == out or (p.name.startswith(f".{out.name}.") and p.name.endswith(".tmp")))


@pytest.mark.parametrize("kind, step", list(_kind_step_params()))
def test_kill_9_at_each_step_leaves_no_answers_without_a_charge(plans, tmp_path, kind, step):
    inputs = plans[kind]
    L, out, marker = tmp_path / "L.db", tmp_path / "answers.csv", tmp_path / "marker"
    _ledger(L, {"type": "approx_dp", "epsilon": 1.0, "delta": 1e-5})
    proc = _start(inputs, out, L, pause=step, marker=marker)
    _wait_for(marker, proc)
    os.kill(proc.pid, signal.SIGKILL)
    rc, _ = _finish(proc)
    assert rc == -signal.SIGKILL

    book = Ledger.open(L)  # opens: chain, tables and anchor consistent
    assert book.verify()["anchor"] == "current"
    history = book.history("adult")
    files = _answer_files(out)
    if step == "before_charge":
        assert history == [] and files == []
    else:
        (c,) = history
        assert c["status"] == "charged" and c["output_sha256"] is None  # never marked released
        assert c["guarantee"] == GUARANTEE and c["plan_sha256"] == file_sha256(inputs[0])
    if step == "after_charge":
        assert files == []
    if step == "during_write":
        # the answers were half written into an unnamed file (O_TMPFILE): a kill leaves none,
        # neither at the destination nor under a hidden name
        assert files == []
    if step == "after_write":
        assert files == [out]
        assert "charge_id" in out.read_text()  # the output names its charge
    # the invariant, whatever the step: answers on disk ⇒ a committed charge
    assert not files or len(history) == 1

    # the ledger stays usable: the charge of the killed run stays spent
    if step == "during_write":  # a partial file a dead process left (no O_TMPFILE) is removed
        stale = tmp_path / f".again.csv.partial.{2 ** 22 + 7}.deadbeef.tmp"
        stale.write_text("half")
    out2 = tmp_path / "again.csv"
    rc, err = _finish(_start(inputs, out2, L))
    assert rc == 0, err
    assert [c["status"] for c in Ledger.open(L).history("adult")] == (
        ["released"] if step == "before_charge" else ["charged", "released"])
    assert Ledger.open(L).history("adult")[-1]["output_sha256"] == file_sha256(out2)
    assert _answer_files(out2) == [out2]


def test_two_runs_racing_for_the_last_budget_exactly_one_succeeds(inputs, tmp_path):
    """Both runs open the ledger and read the data, then pause just before charging and
    wake together (each alone fits: the budget is exactly one run's guarantee)."""
    L = tmp_path / "L.db"
    _ledger(L, GUARANTEE)
    outs = [tmp_path / "a.csv", tmp_path / "b.csv"]
    markers = [tmp_path / "ma", tmp_path / "mb"]
    procs = [_start(inputs, o, L, pause="before_charge", marker=m, sleep=3.0)
             for o, m in zip(outs, markers, strict=True)]
    for m, p in zip(markers, procs, strict=True):
        _wait_for(m, p)
    assert Ledger.open(L).history("adult") == []  # both past Ledger.open, neither charged yet
    results = [_finish(p) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 4], results  # 4: BudgetExceeded's exit code
    loser_err = next(err for rc, err in results if rc == 4)
    assert "budget" in loser_err and "exceeded" in loser_err
    (c,) = Ledger.open(L).history("adult")
    assert c["status"] == "released"
    written = [o for o in outs if o.exists()]
    assert len(written) == 1 and c["output_sha256"] == file_sha256(written[0])
    assert _answer_files(outs[0]) + _answer_files(outs[1]) == written


def _edit_row(L: Path, tmp: Path) -> None:
    conn = sqlite3.connect(L)
    with conn:
        conn.execute("UPDATE datasets SET budget = replace(budget, '1.0', '2.0')")
    conn.close()


def _delete_row(L: Path, tmp: Path) -> None:
    conn = sqlite3.connect(L)
    with conn:
        conn.execute("DELETE FROM charges")
    conn.close()


def _older_copy(L: Path, tmp: Path) -> None:
    shutil.copyfile(tmp / "before.db", L)


def _delete_db(L: Path, tmp: Path) -> None:
    L.unlink()


def _delete_all(L: Path, tmp: Path) -> None:
    for p in (L, Path(f"{L}.head"), Path(f"{L}.lock")):
        p.unlink()


@pytest.mark.parametrize("damage", [_edit_row, _delete_row, _older_copy, _delete_db, _delete_all],
                         ids=lambda f: f.__name__.strip("_"))
def test_run_refuses_a_tampered_or_missing_ledger_and_writes_nothing(inputs, tmp_path, damage):
    L = tmp_path / "L.db"
    book = _ledger(L, {"type": "approx_dp", "epsilon": 1.0, "delta": 1e-5})
    shutil.copyfile(L, tmp_path / "before.db")
    relation = "replace" if "projection" in str(inputs[0].parent) else "add_remove"
    c = book.charge("adult", GUARANTEE, plan_sha256=file_sha256(inputs[0]), relation=relation)
    book.mark_released(c.id, None)
    damage(L, tmp_path)
    expected = LedgerError if damage is _delete_all else LedgerTampered
    with pytest.raises(LedgerError) as e:
        Ledger.open(L)
    assert type(e.value) is expected
    out = tmp_path / "out" / "answers.csv"
    out.parent.mkdir()  # factorize never creates the output folder
    rc, err = _finish(_start(inputs, out, L))
    assert rc == (2 if damage is _delete_all else 5), err  # 5: LedgerTampered's exit code
    assert ("no ledger" if damage is _delete_all else str(L)) in err
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
    assert L.exists() == (damage not in (_delete_db, _delete_all))  # never re-created
