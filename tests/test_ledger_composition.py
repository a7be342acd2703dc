"""The ledger's layout: the budget arithmetic (``factorize.ledger.composition``) is
pure — no database, no files, no clock — and exact; the package loads its database side only
on first use; ``factorize budget create`` documents ``--neighbouring`` and still accepts the
deprecated ``--relation``."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from factorize.ledger import LedgerError
from factorize.ledger import composition as comp

ROOT = Path(__file__).resolve().parents[1]
_IO_MODULES = ("sqlite3", "_sqlite3", "fcntl", "hashlib", "json", "tempfile", "uuid",
               "datetime", "socket", "factorize.ledger.ledger", "factorize.ledger.storage",
               "factorize.ledger.lock", "factorize.ledger.anchor", "factorize.io")


def _loaded_after(statement: str) -> set[str]:
    """Which of the I/O modules ``statement`` loads in a fresh interpreter (beyond those the
    interpreter's start-up had loaded already)."""
    code = (f"import sys\nbefore = set(sys.modules)\n{statement}\n"
            f"print(' '.join(m for m in {_IO_MODULES!r} if m in set(sys.modules) - before))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    return set(out.split())


def test_composition_imports_no_sqlite_and_no_io():
    assert _loaded_after("import factorize.ledger.composition") == set()


def test_composition_source_has_no_io():
    """Only pure imports, and no built-in that reads or writes."""
    tree = ast.parse((ROOT / "factorize" / "ledger" / "composition.py").read_text("utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported <= {"__future__", "collections.abc", "fractions", "typing", ".errors"}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {"open", "print", "input", "exec", "eval", "__import__"}


def test_package_loads_its_database_side_on_first_use():
    assert _loaded_after("import factorize.ledger") == set()
    assert _loaded_after("from factorize.ledger import LedgerError, LedgerTampered") == set()
    assert {"sqlite3", "factorize.ledger.ledger"} <= _loaded_after(
        "from factorize.ledger import Ledger, Charge")
    import factorize.ledger as pkg

    assert set(pkg.__all__) == {"BudgetExceeded", "Charge", "Ledger", "LedgerError",
                                "LedgerTampered"}
    assert all(getattr(pkg, name) is not None for name in pkg.__all__)
    with pytest.raises(AttributeError):
        pkg.no_such_name  # noqa: B018


# ------------------------------------------------------------------ the arithmetic itself

def test_cost_table():
    pure, approx, zcdp = ({"type": "pure_dp", "epsilon": 0.3},
                          {"type": "approx_dp", "epsilon": 0.3, "delta": 1e-7},
                          {"type": "zcdp", "rho": 0.02})
    assert comp.charge_cost("pure_dp", pure) == {"epsilon": Fraction(3, 10)}
    assert comp.charge_cost("approx_dp", pure) == {"epsilon": Fraction(3, 10), "delta": 0}
    assert comp.charge_cost("approx_dp", approx) == {"epsilon": Fraction(3, 10),
                                                     "delta": Fraction(1, 10**7)}
    assert comp.charge_cost("zcdp", pure) == {"rho": Fraction(9, 200)}  # ε²/2, exact
    assert comp.charge_cost("zcdp", zcdp) == {"rho": Fraction(1, 50)}
    for budget_type, g in [("pure_dp", approx), ("pure_dp", zcdp), ("approx_dp", zcdp),
                           ("zcdp", approx), ("renyi", pure)]:
        with pytest.raises(LedgerError):
            comp.charge_cost(budget_type, g)


def test_sums_are_exact_and_equality_fits():
    budget = comp.budget_components({"type": "pure_dp", "epsilon": 1.0})
    spent = comp.nothing_spent("pure_dp")
    tenth = comp.charge_cost("pure_dp", {"type": "pure_dp", "epsilon": 0.1})
    for _ in range(10):
        assert not comp.exceeds(comp.add(spent, tenth), budget)
        spent = comp.add(spent, tenth)
    assert spent == budget and comp.remaining(budget, spent) == {"epsilon": 0}
    assert comp.exceeds(comp.add(spent, {"epsilon": Fraction(1, 10**300)}), budget)
    assert comp.exact_str(Fraction(9, 200)) == "0.045"
    assert comp.exact_str(Fraction(1, 3)) == "1/3"
    assert comp.describe({"epsilon": Fraction(1, 2), "delta": Fraction(1, 10**6)}) == \
        "ε=0.5, δ=0.000001"


# ------------------------------------------------------------------ factorize budget create

def _budget(*argv: str) -> int:
    from factorize.cli.budget import register

    parser = argparse.ArgumentParser(prog="factorize")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["budget", *argv])
    return args.func(args)


def test_neighbouring_is_documented_and_relation_is_a_hidden_alias(tmp_path, capsys):
    for sub in ("create", "show", "verify"):
        with pytest.raises(SystemExit):
            _budget(sub, "--help")
        text = capsys.readouterr().out
        assert "--relation" not in text
        assert ("--neighbouring" in text) == (sub == "create")
    L = str(tmp_path / "L.db")
    assert _budget("create", L, "--new", "--json") == 0
    assert _budget("create", L, "--dataset", "a", "--budget", "rho=0.5", "--neighbouring",
                   "replace", "--json") == 0
    assert _budget("create", L, "--dataset", "b", "--budget", "rho=0.5", "--relation",
                   "replace", "--json") == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[1]["dataset"]["relation"] == out[2]["dataset"]["relation"] == "replace"
    with pytest.raises(SystemExit):
        _budget("create", L, "--dataset", "c", "--budget", "rho=0.5", "--relation", "bogus")
    assert "invalid choice" in capsys.readouterr().err
    assert _budget("create", str(tmp_path / "M.db"), "--new", "--relation", "replace") == 2
    assert "--neighbouring belongs to a dataset" in capsys.readouterr().err
