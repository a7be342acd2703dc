"""The privacy-budget ledger: composition (exact at the boundary), type
rules, history, the hash chain and its anchor (tampering, rollback, deletion, the one-entry
lag after a crash), concurrent processes, and ``factorize budget``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import pytest

from factorize.ledger import BudgetExceeded, Ledger, LedgerError, LedgerTampered
from factorize.ledger.chain import canonical as _canonical
from factorize.ledger.chain import entry_hash as _entry_hash
from factorize.ledger.composition import exact, exact_str

ROOT = Path(__file__).resolve().parents[1]
SHA = "ab" * 32


def PURE(e: float) -> dict:
    return {"type": "pure_dp", "epsilon": e}


def APPROX(e: float, d: float) -> dict:
    return {"type": "approx_dp", "epsilon": e, "delta": d}


def ZCDP(r: float) -> dict:
    return {"type": "zcdp", "rho": r}


def _book(tmp_path: Path, budget: dict, relation: str | None = None, name: str = "d") -> Ledger:
    book = Ledger.create(tmp_path / "L.db")
    book.create_dataset(name, budget, relation=relation)
    return book


def _charge(book: Ledger, g: dict, dataset: str = "d", relation: str = "add_remove"):
    return book.charge(dataset, g, plan_sha256=SHA, relation=relation)


# ------------------------------------------------------------------ composition, exactness

def test_ten_charges_of_a_tenth_fill_epsilon_one_exactly(tmp_path):
    book = _book(tmp_path, PURE(1.0))
    for _ in range(10):
        _charge(book, PURE(0.1))
    assert book.remaining("d") == {"epsilon": Fraction(0)}
    with pytest.raises(BudgetExceeded):
        _charge(book, PURE(0.1))
    with pytest.raises(BudgetExceeded):
        _charge(book, PURE(1e-300))  # nothing at all is left
    assert len(book.history("d")) == 10


def test_exact_sums_where_floats_would_round_either_way(tmp_path):
    # floats: 0.1 + 0.2 > 0.3, so a float check would refuse a release that exactly fits
    assert 0.1 + 0.2 > 0.3
    book = _book(tmp_path, PURE(0.3))
    _charge(book, PURE(0.1))
    _charge(book, PURE(0.2))
    assert book.remaining("d") == {"epsilon": Fraction(0)}
    # floats: 1.0 + 1e-17 == 1.0, so a float check would let tiny charges through forever
    assert 1.0 + 1e-17 <= 1.0
    book2 = Ledger.create(tmp_path / "M.db")
    book2.create_dataset("d", PURE(1.0))
    _charge(book2, PURE(1.0))
    with pytest.raises(BudgetExceeded):
        _charge(book2, PURE(1e-17))


def test_exact_numbers_are_the_printed_decimals():
    assert exact(0.1) == Fraction(1, 10) and exact(1e-6) == Fraction(1, 10 ** 6)
    assert exact_str(Fraction(1, 10 ** 6)) == "0.000001"
    assert exact_str(Fraction(5, 2)) == "2.5" and exact_str(Fraction(0)) == "0"
    assert exact_str(Fraction(1, 3)) == "1/3"


def test_approx_budget_basic_composition_and_delta(tmp_path):
    book = _book(tmp_path, APPROX(1.0, 1e-6))
    _charge(book, APPROX(0.25, 5e-7))
    _charge(book, PURE(0.25))  # pure: costs (ε, 0)
    _charge(book, APPROX(0.25, 5e-7))
    assert book.spent("d") == {"epsilon": Fraction(3, 4), "delta": Fraction(1, 10 ** 6)}
    with pytest.raises(BudgetExceeded, match="δ"):  # ε is left, δ is not
        _charge(book, APPROX(0.1, 1e-12))
    _charge(book, PURE(0.25))  # a pure release still fits
    assert book.remaining("d") == {"epsilon": Fraction(0), "delta": Fraction(0)}


def test_zcdp_budget_adds_rho_and_converts_pure_by_eps_squared_over_two(tmp_path):
    book = _book(tmp_path, ZCDP(0.5))
    c = _charge(book, PURE(0.5))  # ρ = 0.5² / 2 = 0.125
    assert c.cost == {"rho": Fraction(1, 8)}
    _charge(book, ZCDP(0.25))
    assert book.remaining("d") == {"rho": Fraction(1, 8)}
    with pytest.raises(BudgetExceeded):
        _charge(book, ZCDP(0.125000001))
    _charge(book, ZCDP(0.125))
    assert book.remaining("d") == {"rho": Fraction(0)}


def test_type_rules(tmp_path):
    book = Ledger.create(tmp_path / "L.db")
    book.create_dataset("pure", PURE(1.0))
    book.create_dataset("approx", APPROX(1.0, 1e-6))
    book.create_dataset("z", ZCDP(1.0))
    with pytest.raises(LedgerError, match="loosely"):  # zCDP onto (ε, δ): refused, says why
        _charge(book, ZCDP(0.1), "approx")
    with pytest.raises(LedgerError, match="does not imply zCDP"):
        _charge(book, APPROX(0.1, 1e-9), "z")
    for g in (APPROX(0.1, 1e-9), ZCDP(0.1)):
        with pytest.raises(LedgerError, match="pure"):
            _charge(book, g, "pure")
    for name in ("pure", "approx", "z"):
        assert book.history(name) == []  # refusals charge nothing
    with pytest.raises(LedgerError) as e:
        _charge(book, ZCDP(0.1), "approx")
    assert not isinstance(e.value, BudgetExceeded)


def test_budget_exceeded_message_and_nothing_recorded(tmp_path):
    book = _book(tmp_path, APPROX(1.0, 1e-6))
    _charge(book, APPROX(0.75, 1e-7))
    n = book.verify()["entries"]
    with pytest.raises(BudgetExceeded) as e:
        _charge(book, APPROX(0.5, 1e-7))
    msg = str(e.value)
    assert "budget" in msg and "costs ε=0.5, δ=0.0000001" in msg
    assert "spent ε=0.75, δ=0.0000001" in msg and "remaining ε=0.25, δ=0.0000009" in msg
    assert book.verify()["entries"] == n


def test_relation_is_fixed_per_dataset(tmp_path):
    book = _book(tmp_path, PURE(1.0))
    _charge(book, PURE(0.1), relation="add_remove")
    with pytest.raises(LedgerError, match="neighbours"):
        _charge(book, PURE(0.1), relation="replace")
    book.create_dataset("r", PURE(1.0), relation="replace")
    with pytest.raises(LedgerError, match="neighbours"):
        _charge(book, PURE(0.1), "r", relation="add_remove")
    _charge(book, PURE(0.1), "r", relation="replace")


def test_bad_requests(tmp_path):
    book = _book(tmp_path, PURE(1.0))
    with pytest.raises(LedgerError, match="unknown dataset"):
        _charge(book, PURE(0.1), "other")
    with pytest.raises(LedgerError, match="already"):
        book.create_dataset("d", PURE(2.0))
    with pytest.raises(LedgerError, match="SHA-256"):
        book.charge("d", PURE(0.1), plan_sha256="nope", relation="add_remove")
    with pytest.raises(ValueError):
        _charge(book, {"type": "pure_dp", "epsilon": -1.0})
    with pytest.raises(ValueError):
        book.create_dataset("x", {"type": "approx_dp", "epsilon": 1.0, "delta": 0.0})
    with pytest.raises(TypeError):
        Ledger(tmp_path / "L.db")


def test_history_and_mark_released(tmp_path):
    book = _book(tmp_path, APPROX(1.0, 1e-6))
    a = _charge(book, APPROX(0.5, 1e-7))
    b = _charge(book, PURE(0.25))
    book.mark_released(a.id, "cd" * 32)
    h = book.history("d")
    assert [r["id"] for r in h] == [a.id, b.id] == [1, 2]
    assert h[0]["status"] == "released" and h[0]["output_sha256"] == "cd" * 32
    assert h[0]["released_at"] is not None
    assert h[1]["status"] == "charged" and h[1]["output_sha256"] is None
    assert h[0]["guarantee"] == APPROX(0.5, 1e-7) and h[0]["cost"] == {"epsilon": "0.5",
                                                                       "delta": "0.0000001"}
    assert h[1]["cost"] == {"epsilon": "0.25", "delta": "0"}
    assert book.spent("d") == {"epsilon": Fraction(3, 4), "delta": Fraction(1, 10 ** 7)}
    book.mark_released(b.id, None)  # a run without an output file
    assert book.history("d")[1]["status"] == "released"
    with pytest.raises(LedgerError, match="already"):
        book.mark_released(a.id, "cd" * 32)
    with pytest.raises(LedgerError, match="no charge"):
        book.mark_released(99, None)
    assert book.spent("d") == {"epsilon": Fraction(3, 4), "delta": Fraction(1, 10 ** 7)}


# ------------------------------------------------------------------ missing, create, anchor

def test_missing_ledger_is_refused_never_created(tmp_path):
    p = tmp_path / "none.db"
    with pytest.raises(LedgerError, match="no ledger") as e:
        Ledger.open(p)
    assert not isinstance(e.value, LedgerTampered)
    assert not p.exists()


def test_create_refuses_to_overwrite(tmp_path):
    book = _book(tmp_path, PURE(1.0))
    _charge(book, PURE(0.5))
    with pytest.raises(LedgerError, match="already exists"):
        Ledger.create(book.path)
    fresh = Ledger.create(book.path, overwrite=True)
    assert fresh.datasets() == [] and fresh.verify()["entries"] == 1


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for s in statements:
            conn.execute(s)
    conn.close()


@pytest.fixture
def used(tmp_path) -> Ledger:
    """A ledger with two datasets, three charges (one released)."""
    book = _book(tmp_path, APPROX(1.0, 1e-6))
    book.create_dataset("z", ZCDP(1.0))
    c = _charge(book, APPROX(0.25, 1e-7))
    book.mark_released(c.id, "cd" * 32)
    _charge(book, ZCDP(0.25), "z")
    _charge(book, PURE(0.125))
    assert Ledger.open(book.path).verify()["anchor"] == "current"
    return book


TAMPER = {
    "event body edited": ["UPDATE events SET body = replace(body, '0.25', '0.02') WHERE kind='charge'"],
    "charge cost edited": ["UPDATE charges SET cost = '{\"delta\":\"0\",\"epsilon\":\"0\"}' WHERE id=1"],
    "charge status edited": ["UPDATE charges SET status='charged' WHERE id=1"],
    "budget raised": ["UPDATE datasets SET budget = replace(budget, '1.0', '9.0') WHERE name='d'"],
    "charge row deleted": ["DELETE FROM charges WHERE id=3"],
    "charge row added": [("INSERT INTO charges SELECT id+10, dataset, guarantee, cost, plan_sha256, "
                          "relation, status, output_sha256, charged_at, released_at, event_seq, "
                          "release_seq FROM charges WHERE id=1")],
    "dataset deleted": ["DELETE FROM datasets WHERE name='z'"],
    "last entry deleted": ["DELETE FROM events WHERE seq=(SELECT max(seq) FROM events)",
                           "DELETE FROM charges WHERE id=3"],
    "middle entry deleted": ["DELETE FROM events WHERE seq=4"],
    "entries reordered": ["UPDATE events SET seq=-1 WHERE seq=5", "UPDATE events SET seq=5 WHERE seq=6",
                          "UPDATE events SET seq=6 WHERE seq=-1"],
    "everything dropped": ["DROP TABLE charges"],
}


@pytest.mark.parametrize("what", sorted(TAMPER))
def test_tampered_rows_are_detected(used, what):
    _sql(used.path, *TAMPER[what])
    with pytest.raises(LedgerTampered):
        Ledger.open(used.path)
    with pytest.raises(LedgerTampered):  # an open Ledger object re-verifies on every use
        used.remaining("d")
    with pytest.raises(LedgerTampered):
        _charge(used, PURE(0.01))


def test_rechained_rewrite_is_caught_by_the_anchor(used):
    """Rewriting an entry *and* recomputing the chain defeats the chain alone; the anchor's
    head hash catches it (rewriting the anchor too is not detectable: documented)."""
    conn = sqlite3.connect(used.path)
    rows = conn.execute("SELECT seq, kind, body FROM events ORDER BY seq").fetchall()
    prev = "0" * 64
    with conn:
        for seq, kind, body in rows:
            if kind == "release":
                body = _canonical(dict(json.loads(body), output_sha256="ee" * 32))
                conn.execute("UPDATE charges SET output_sha256=? WHERE id=1", ("ee" * 32,))
            h = _entry_hash(prev, seq, kind, body)
            conn.execute("UPDATE events SET body=?, prev_hash=?, hash=? WHERE seq=?",
                         (body, prev, h, seq))
            prev = h
    conn.close()
    with pytest.raises(LedgerTampered, match="history differs"):
        Ledger.open(used.path)


def test_older_copy_of_the_database_is_detected(used, tmp_path):
    old = tmp_path / "old.db"
    shutil.copyfile(used.path, old)
    _charge(used, PURE(0.125))
    shutil.copyfile(old, used.path)  # roll the budget back by one charge
    with pytest.raises(LedgerTampered, match="older copy"):
        Ledger.open(used.path)


def test_deleted_database_with_anchor_left_is_detected(used):
    used.path.unlink()
    with pytest.raises(LedgerTampered, match="missing"):
        Ledger.open(used.path)
    assert not used.path.exists()  # and never re-created


def test_garbage_database_with_anchor_is_detected(used):
    used.path.write_bytes(b"not a database" * 100)
    with pytest.raises(LedgerTampered):
        Ledger.open(used.path)


def test_deleted_or_foreign_anchor_is_detected(used, tmp_path):
    saved = used.anchor_path.read_bytes()
    used.anchor_path.unlink()
    with pytest.raises(LedgerTampered, match="anchor"):
        Ledger.open(used.path)
    other = Ledger.create(tmp_path / "other.db")
    shutil.copyfile(other.anchor_path, used.anchor_path)
    with pytest.raises(LedgerTampered, match="replaced"):
        Ledger.open(used.path)
    used.anchor_path.write_bytes(saved)
    Ledger.open(used.path).verify()


def test_anchor_lagging_by_the_last_commit_is_accepted_and_repaired(used, monkeypatch):
    """A crash between the SQLite commit and the anchor write leaves the anchor one entry
    behind: accepted (the chain is valid and extends the anchored head), then repaired."""
    def crash(*a, **k):
        raise KeyboardInterrupt("killed after the commit, before the anchor")

    monkeypatch.setattr(Ledger, "_write_anchor", crash)
    with pytest.raises(KeyboardInterrupt):
        _charge(used, PURE(0.125))
    monkeypatch.undo()
    assert used.history("d")[-1]["status"] == "charged"  # the charge is committed
    assert used.verify()["anchor"].startswith("behind by one")
    Ledger.open(used.path)
    assert used.verify()["anchor"] == "current"


def test_an_anchor_that_cannot_be_written_never_lags_by_two(used, monkeypatch):
    def broken(*a, **k):
        raise OSError("disk full")

    n = used.verify()["entries"]
    monkeypatch.setattr(Ledger, "_write_anchor", broken)
    with pytest.raises(OSError):
        _charge(used, PURE(0.0625))  # committed, anchor not written
    with pytest.raises(OSError):
        _charge(used, PURE(0.0625))  # refused before committing: the anchor would lag by two
    monkeypatch.undo()
    assert used.verify()["entries"] == n + 1
    assert [c["status"] for c in used.history("d")][-1] == "charged"
    assert len(used.history("d")) == 3
    Ledger.open(used.path)


def test_anchor_lagging_by_two_is_refused(used, tmp_path):
    stale = tmp_path / "stale.head"
    shutil.copyfile(used.anchor_path, stale)
    _charge(used, PURE(0.0625))
    _charge(used, PURE(0.0625))
    shutil.copyfile(stale, used.anchor_path)
    with pytest.raises(LedgerTampered, match="more than one"):
        Ledger.open(used.path)


def test_crash_during_create_leaves_an_openable_ledger(tmp_path, monkeypatch):
    monkeypatch.setattr(Ledger, "_write_anchor", lambda *a, **k: None)
    Ledger.create(tmp_path / "L.db")
    monkeypatch.undo()
    assert not (tmp_path / "L.db.head").exists()
    book = Ledger.open(tmp_path / "L.db")  # genesis only, no anchor: the one-entry lag
    assert book.anchor_path.exists() and book.verify()["anchor"] == "current"


# ------------------------------------------------------------------ concurrency (processes)

_WORKER = """
import os, sys, time
import factorize.privacy.guarantees  # imported before the race, not during it
from factorize.ledger import Ledger, BudgetExceeded
book = Ledger.open(sys.argv[1])
open(sys.argv[2], "w").close()  # ready
while not os.path.exists(sys.argv[3]):  # the starting gun
    time.sleep(0.0005)
t0 = time.time()
try:
    book.charge("d", {"type": "pure_dp", "epsilon": 0.2}, plan_sha256="ab" * 32,
                relation="add_remove")
except BudgetExceeded:
    sys.exit(3)
"""


def test_concurrent_processes_never_exceed_the_budget(tmp_path):
    """Eight processes, all past Ledger.open (each saw the whole budget unspent), charge 0.2
    at the same instant against ε = 1: exactly five succeed (BEGIN IMMEDIATE + the lock
    serialise read-check-insert)."""
    book = _book(tmp_path, PURE(1.0))
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(8)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(book.path), str(r), str(go)],
                              env=env, stderr=subprocess.PIPE, text=True) for r in ready]
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    t_go = time.time()
    go.touch()
    codes = [p.wait(timeout=60) for p in procs]
    errs = [p.stderr.read() for p in procs]
    for p in procs:
        p.stderr.close()
    assert sorted(codes) == [0] * 5 + [3] * 3, (codes, errs)
    assert book.remaining("d") == {"epsilon": Fraction(0)}
    history = book.history("d")
    assert len(history) == 5 and book.verify()["anchor"] == "current"
    last = datetime.fromisoformat(history[-1]["charged_at"]).timestamp()
    assert last - t_go < 1.0, "the processes did not race (charges spread over > 1 s)"


# ------------------------------------------------------------------ factorize budget

def _budget(*argv: str) -> int:
    """``factorize budget …`` through cli_budget.register (independent of cli.py's wiring)."""
    from factorize.cli.budget import register

    parser = argparse.ArgumentParser(prog="factorize")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["budget", *argv])
    return args.func(args)


def test_budget_cli(tmp_path, capsys):
    L = str(tmp_path / "L.db")
    assert _budget("create", L, "--dataset", "d", "--budget", "epsilon=1") == 2  # no --new
    assert "no ledger" in capsys.readouterr().err and not os.path.exists(L)
    assert _budget("create", L, "--new", "--dataset", "d", "--budget", "epsilon=1,delta=1e-6") == 0
    assert _budget("create", L, "--new") == 2
    assert "already exists" in capsys.readouterr().err
    assert _budget("create", L, "--dataset", "z", "--budget", "rho=0.5", "--neighbouring",
                   "replace") == 0
    assert _budget("create", L, "--dataset", "z2", "--budget", "rho=0.5", "--relation",
                   "replace") == 0  # the old spelling still works
    assert _budget("create", L, "--dataset", "z", "--budget", "rho=1") == 2
    assert _budget("create", L, "--dataset", "q", "--budget", "epsilon=0") == 2
    capsys.readouterr()
    book = Ledger.open(L)
    book.charge("d", APPROX(0.25, 1e-7), plan_sha256=SHA, relation="add_remove")
    assert _budget("show", L, "--dataset", "d", "--json") == 0
    s = json.loads(capsys.readouterr().out)
    (d,) = s["datasets"]
    assert d["budget"] == APPROX(1.0, 1e-6) and d["remaining"] == {"epsilon": "0.75",
                                                                    "delta": "0.0000009"}
    assert d["history"][0]["status"] == "charged"
    assert _budget("show", L) == 0
    out = capsys.readouterr().out
    assert "remaining   ε=0.75, δ=0.0000009" in out and "ρ=0.5" in out
    assert _budget("verify", L) == 0 and "ok" in capsys.readouterr().out
    assert _budget("show", L, "--dataset", "nope") == 2
    _sql(Path(L), "UPDATE datasets SET budget = replace(budget, '0.5', '5.0') WHERE name='z'")
    capsys.readouterr()
    assert _budget("verify", L) == 5  # LedgerTampered's exit code
    assert "tampered" in capsys.readouterr().err
    assert _budget("verify", L, "--json") == 5
    assert json.loads(capsys.readouterr().out)["tampered"] is True
    assert _budget("show", L) == 5
