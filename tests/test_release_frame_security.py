"""The release frame.

4. Nothing charged without a release, nothing released lost: every check that can fail
   deterministically runs before the charge — each is run here through the CLI with a
   ledger, and each must exit 2, charge nothing and leave every file as it was.
5. The bytes verified are the bytes charged: the plan file is opened once; the ledger records
   the SHA-256 of the bytes that were verified and the guarantee the verification
   established.
6. Outputs safe to open: no text cell of a CSV the executor writes starts a formula.
"""

from __future__ import annotations

import builtins
import csv
import dataclasses
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from factorize.cli.plan import main
from factorize.io import container
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import save_plan
from factorize.ledger import Ledger
from tests.plan_fixtures import identity_certificate, small_plan
from workloads import Domain

PRIVACY = "epsilon=0.5,delta=1e-6"
BUDGET = {"type": "approx_dp", "epsilon": 5.0, "delta": 1e-5}


def _marginal_plan(path: Path, attributes: list[str], privacy: str = PRIVACY, **kw) -> Path:
    """A plan of the 1-way marginals over binary/ternary attributes (identity certificate)."""
    sizes = [2, 3, 2][: len(attributes)]
    plan = small_plan(f"marginals:{'x'.join(map(str, sizes))}:1", privacy, **kw)
    plan = dataclasses.replace(plan, domain=Domain(attributes, sizes))
    save_plan(plan, path)
    return path


def _records(path: Path, attributes: list[str], n: int = 40, bad: str | None = None) -> Path:
    """``n`` records of codes over ``attributes`` (quoted header); ``bad``: a last line as is."""
    rng = np.random.default_rng(1)
    sizes = [2, 3, 2][: len(attributes)]
    rows = [",".join(str(int(rng.integers(0, s))) for s in sizes) for _ in range(n)]
    head = ",".join(json.dumps(a) for a in attributes)
    path.write_text(head + "\n" + "\n".join(rows + ([bad] if bad else [])) + "\n")
    return path


def _forged(src: Path, dst: Path, edit) -> Path:
    """``src`` rewritten with ``edit(manifest body)`` and valid digests (the project's writer,
    as anyone who can rewrite the file can)."""
    from factorize.plan.files import FORMAT
    from factorize.plan.files import write_plan_container as _write

    with open(src, "rb") as fh:
        n = int.from_bytes(fh.read(8), "little")
        version = json.loads(json.loads(fh.read(n))["__metadata__"]["manifest"])["schema_version"]
    manifest, arrays = container.read(src, FORMAT, version)
    body = {k: v for k, v in manifest.items()
            if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    edit(body)
    _write(dst, FORMAT, version, body, arrays)
    return dst


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` but the ledger's files → its bytes (None for a folder)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        if p.name.startswith("L.db"):
            continue
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


# ---------------------------------------------------------------------------------------
# every deterministic check before the charge


@pytest.fixture()
def world(tmp_path):
    """A plan of marginals on a,b, valid records, a ledger with room for the release, a
    previous release ``prev.csv`` and a tables folder holding a previous ``a.csv``."""
    _marginal_plan(tmp_path / "p.plan", ["a", "b"])
    _records(tmp_path / "d.csv", ["a", "b"])
    Ledger.create(tmp_path / "L.db").create_dataset("d", BUDGET)
    (tmp_path / "prev.csv").write_text("# a previous, paid-for release\n")
    (tmp_path / "tabs").mkdir()
    (tmp_path / "tabs" / "a.csv").write_text("# a previous table\n")
    return tmp_path


def _argv(w: Path, *, plan="p.plan", data="d.csv", out="prev.csv", overwrite=True, ledger=True,
          extra=()) -> list[str]:
    argv = ["run", str(w / plan), "--data", str(w / data), "--out", str(w / out)]
    if overwrite:
        argv.append("--overwrite")
    if ledger:
        argv += ["--ledger", str(w / "L.db"), "--dataset", "d"]
    return argv + [str(x) for x in extra]


def _case_out_is_a_folder(w):
    (w / "dir.csv").mkdir()
    return _argv(w, out="dir.csv"), "is a folder"


def _case_out_exists(w):
    return _argv(w, overwrite=False), "exists"


def _case_out_folder_missing(w):
    return _argv(w, out="missing/a.csv"), "does not exist"


def _case_out_unknown_suffix(w):
    return _argv(w, out="a.txt"), "unknown suffix"


def _case_out_name_too_long(w):
    return _argv(w, out="x" * 240 + ".csv"), "too long"


def _case_out_is_the_data(w):
    return _argv(w, out="d.csv"), "is --data"


def _case_ledger_without_dataset(w):
    return _argv(w, ledger=False, extra=["--ledger", w / "L.db"]), "go together"


def _case_seed_with_ledger(w):
    return _argv(w, extra=["--seed", 1]), "--seed"


def _case_tables_folder_missing(w):
    return _argv(w, extra=["--tables", w / "nope"]), "does not exist"


def _case_tables_file_exists(w):
    return _argv(w, out="new.csv", overwrite=False, extra=["--tables", w / "tabs"]), "exists"


def _case_tables_file_is_the_data(w):
    (w / "t2").mkdir()
    _records(w / "t2" / "b.csv", ["a", "b"])
    return _argv(w, data="t2/b.csv", extra=["--tables", w / "t2"]), "is --data"


def _case_tables_file_is_the_plan(w):
    (w / "t3").mkdir()
    _marginal_plan(w / "t3" / "a.csv", ["a", "b"])
    return _argv(w, plan="t3/a.csv", extra=["--tables", w / "t3"]), "is the plan"


def _case_tables_file_is_the_ledger(w):
    (w / "t4").mkdir()
    Ledger.create(w / "t4" / "a.csv").create_dataset("d", BUDGET)
    argv = _argv(w, ledger=False, extra=["--ledger", w / "t4" / "a.csv", "--dataset", "d",
                                          "--tables", w / "t4"])
    return argv, "is a ledger file"


def _case_tables_file_is_out(w):
    return _argv(w, out="tabs/a.csv", extra=["--tables", w / "tabs"]), "is --out"


def _case_tables_folder_is_the_data(w):
    return _argv(w, extra=["--tables", w / "d.csv"]), "does not exist"


def _case_plan_refused_weak_guarantee(w):
    _marginal_plan(w / "w.plan", ["a", "b"], "epsilon=30,delta=1e-6", allow_weak_guarantee=True)
    return _argv(w, plan="w.plan"), "protects too little"


def _case_plan_refused_forged_guarantee(w):
    def stronger(body):  # claims ε = 0.25 with the noise of ε = 0.5
        body["guarantee"]["epsilon"] = 0.25
        body["noise"]["guarantee"]["epsilon"] = 0.25

    _forged(w / "p.plan", w / "f.plan", stronger)
    return _argv(w, plan="f.plan"), "UNDER-NOISED"


def _case_plan_corrupt(w):
    data = bytearray((w / "p.plan").read_bytes())
    data[-3] ^= 0xFF
    (w / "x.plan").write_bytes(bytes(data))
    return _argv(w, plan="x.plan"), "SHA-256"


def _case_float_noise(w):
    plan = build_plan("prefix:8", "epsilon=1", noise_family="l2_knorm",
                      certificate=identity_certificate("prefix:8"))
    save_plan(plan, w / "k.plan")
    np.save(w / "h.npy", np.arange(8))
    return _argv(w, plan="k.plan", data="h.npy"), "allow-float-noise"


def _case_data_missing_column(w):
    _records(w / "m.csv", ["a", "c"])
    return _argv(w, data="m.csv"), ""  # the data errors' wording is the engines' (not pinned)


def _case_data_outside_the_domain(w):
    _records(w / "o.csv", ["a", "b"], bad="1,7")
    return _argv(w, data="o.csv"), ""


def _case_data_value_not_in_the_schema(w):
    schema = {"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "a", "kind": "categorical", "values": ["no", "yes"]},
        {"name": "b", "kind": "categorical", "values": ["x", "y", "z"]}]}
    (w / "s.json").write_text(json.dumps(schema))
    assert main(["plan", "--workload", "marginals:2x3:1", "--domain", str(w / "s.json"),
                 "--privacy", PRIVACY, "--out", str(w / "s.plan")]) == 0
    (w / "s.csv").write_text("a,b\n" + "no,x\nyes,z\n" * 20 + "maybe,y\n")
    return _argv(w, plan="s.plan", data="s.csv"), ""


def _case_delta_not_below_one_over_n(w):
    _marginal_plan(w / "n.plan", ["a", "b"], "epsilon=1,delta=1e-3")
    _records(w / "n.csv", ["a", "b"], n=1000)
    return _argv(w, plan="n.plan", data="n.csv"), "1/n"


def _case_budget_exceeded(w):
    Ledger.open(w / "L.db").create_dataset("small", {"type": "approx_dp", "epsilon": 0.1, "delta": 1e-5})
    argv = _argv(w, ledger=False, extra=["--ledger", w / "L.db", "--dataset", "small"])
    return argv, "budget"


def _case_local_plan_with_ledger(w):
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.plan import save_local_plan

    save_local_plan(build_local_plan("identity:3", "epsilon=1", n=100, randomizer="l2"), w / "l.lplan")
    return _argv(w, plan="l.lplan"), "already-randomized"


CASES = {name[len("_case_"):]: fn for name, fn in globals().items() if name.startswith("_case_")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_deterministic_check_runs_before_the_charge(world, case, capsys):
    """Each check, with a ledger: refused (exit 2; 4 for a charge past the budget), nothing
    charged, no file changed or created."""
    argv, needle = CASES[case](world)
    before = _snapshot(world)
    capsys.readouterr()
    assert main(argv) == (4 if case == "budget_exceeded" else 2)
    err = capsys.readouterr().err
    assert needle in err, err
    book = Ledger.open(world / "L.db")
    assert all(book.history(ds) == [] for ds in book.datasets())
    assert _snapshot(world) == before


def test_the_same_run_without_the_fault_is_charged_and_writes(world):
    """The control of the cases above: the base invocation succeeds, charges once, replaces the
    previous release (``--overwrite``) and writes the tables."""
    assert main(_argv(world, extra=["--tables", world / "tabs"])) == 0
    (c,) = Ledger.open(world / "L.db").history("d")
    assert c["status"] == "released"
    assert not (world / "prev.csv").read_text().startswith("# a previous")
    assert sorted(p.name for p in (world / "tabs").iterdir()) == ["a.csv", "b.csv"]
    assert not (world / "tabs" / "a.csv").read_text().startswith("# a previous")


def test_a_table_file_it_cannot_write_is_refused_before_verification(world, monkeypatch):
    import factorize.kinds.factorization.verify as checks

    calls = []
    real = checks.verify_plan
    monkeypatch.setattr(checks, "verify_plan", lambda *a, **k: calls.append(1) or real(*a, **k))
    argv, _ = _case_tables_file_exists(world)
    assert main(argv) == 2
    assert calls == []
    assert main(_argv(world, extra=["--tables", world / "tabs"])) == 0 and calls == [1]


def test_table_file_names(tmp_path):
    from factorize.executor.labels import Table
    from factorize.executor.tables import table_file_names, table_file_stem

    assert table_file_stem("a>b") == table_file_stem("a b") == "a_b"
    assert table_file_stem("sex,income>50K") == "sex__income_50K"
    assert table_file_stem("cdf(age) by sex") == "cdf_age__by_sex"
    assert table_file_stem("total") == "total" and table_file_stem(".x") == "_x"
    # names whose files would coincide — exactly, or but for case, which a case-insensitive
    # file system does not tell apart — get -2, -3, … in table order
    tables = [Table(n, 0, 1, ()) for n in ("a>b", "a_b", "a b", "A", "a", "a-2")]
    assert table_file_names(tables) == ["a_b.csv", "a_b-2.csv", "a_b-3.csv", "A.csv", "a-2.csv", "a-2-2.csv"]


def test_tables_whose_names_collide_get_distinct_files(world):
    attrs = ["a>b", "a_b", "a b"]
    _marginal_plan(world / "c.plan", attrs)
    _records(world / "c.csv", attrs)
    (world / "t5").mkdir()
    assert main(_argv(world, plan="c.plan", data="c.csv", extra=["--tables", world / "t5"])) == 0
    files = sorted((world / "t5").iterdir())
    assert [p.name for p in files] == ["a_b-2.csv", "a_b-3.csv", "a_b.csv"]
    lines = {p.name: p.read_text().splitlines() for p in files}
    named = {name: json.loads(next(ln for ln in text if ln.startswith("# table: "))[len("# table: "):])
             for name, text in lines.items()}
    assert named == {"a_b.csv": "a>b", "a_b-2.csv": "a_b", "a_b-3.csv": "a b"}


# ---------------------------------------------------------------------------------------
# the bytes verified are the bytes charged


def _opens_of(monkeypatch, target: Path) -> list[str]:
    """Record every open of ``target`` (builtins.open, io.open, os.open)."""
    seen: list[str] = []
    want = os.path.realpath(target)

    def counting(real):
        def opener(file, *a, **k):
            if isinstance(file, (str, bytes, os.PathLike)) and \
                    os.path.realpath(os.fsdecode(file)) == want:
                seen.append(real.__name__)
            return real(file, *a, **k)
        return opener

    monkeypatch.setattr(builtins, "open", counting(builtins.open))
    monkeypatch.setattr(io, "open", counting(io.open))
    monkeypatch.setattr(os, "open", counting(os.open))
    return seen


@pytest.mark.parametrize("kind", ["factorization", "structured"])
def test_the_plan_file_is_opened_once(world, monkeypatch, kind):
    from factorize.executor.pipeline import run

    if kind == "structured":
        assert main(["plan", "--workload", "marginals:2x3:1", "--domain", "a=2,b=3", "--privacy",
                     PRIVACY, "--strategy", "residual", "--out", str(world / "s.plan")]) == 0
        plan = world / "s.plan"
    else:
        plan = world / "p.plan"
    (world / "t").mkdir()
    seen = _opens_of(monkeypatch, plan)
    run(str(plan), str(world / "d.csv"), str(world / "new.csv"), ledger=str(world / "L.db"),
        dataset="d", tables=str(world / "t"))
    assert len(seen) == 1, seen
    (c,) = Ledger.open(world / "L.db").history("d")
    assert c["plan_sha256"] == hashlib.sha256(plan.read_bytes()).hexdigest()


def test_a_plan_replaced_during_verification_is_charged_as_verified(world, monkeypatch):
    """The file is replaced (by a valid plan of another guarantee) while it is verified: the
    ledger records the digest of the bytes that were verified, and their guarantee."""
    import factorize.kinds.factorization.verify as checks
    from factorize.executor.output import read_answers

    path = world / "p.plan"
    original = path.read_bytes()
    _marginal_plan(world / "other.plan", ["a", "b"], "epsilon=0.25,delta=1e-6")
    real = checks.verify_plan

    def verify_then_swap(*a, **k):
        out = real(*a, **k)
        os.replace(world / "other.plan", path)
        return out

    monkeypatch.setattr(checks, "verify_plan", verify_then_swap)
    assert main(_argv(world, out="new.csv", overwrite=False)) == 0
    assert path.read_bytes() != original  # the swap happened
    (c,) = Ledger.open(world / "L.db").history("d")
    assert c["plan_sha256"] == hashlib.sha256(original).hexdigest()
    assert c["guarantee"] == {"type": "approx_dp", "epsilon": 0.5, "delta": 1e-6}
    _, meta = read_answers(world / "new.csv")
    assert meta["plan_sha256"] == hashlib.sha256(original).hexdigest()


def test_the_charge_is_the_guarantee_verification_established(world, monkeypatch):
    """The pipeline charges ``check.derived['guarantee']`` (set by the noise check), not what
    the plan object states: a kind that reported a cheaper guarantee changes nothing."""
    from factorize.kinds.factorization.codec import load_plan
    from factorize.kinds.factorization.kind import FactorizationKind
    from factorize.kinds.factorization.verify import verify_plan
    from factorize.privacy import ApproxDP

    check = verify_plan(load_plan(world / "p.plan"))
    assert check.passed and check.derived["guarantee"] == ApproxDP(0.5, 1e-6)
    monkeypatch.setattr(FactorizationKind, "guarantee", lambda self, plan: ApproxDP(0.01, 1e-9))
    assert main(_argv(world, out="new.csv", overwrite=False)) == 0
    (c,) = Ledger.open(world / "L.db").history("d")
    assert c["guarantee"] == {"type": "approx_dp", "epsilon": 0.5, "delta": 1e-6}


@pytest.mark.parametrize("epsilon", [0.25, 1.0])
def test_a_forged_guarantee_is_refused(world, epsilon, capsys):
    """The manifest's guarantee (both places it is stated) rewritten with valid digests: a
    stronger claim is under-noised, a weaker one not the calibrated scale — refused, nothing
    charged."""
    def edit(body):
        body["guarantee"]["epsilon"] = epsilon
        body["noise"]["guarantee"]["epsilon"] = epsilon

    _forged(world / "p.plan", world / "f.plan", edit)
    assert main(_argv(world, plan="f.plan", out="new.csv", overwrite=False)) == 2
    assert "noise" in capsys.readouterr().err
    assert Ledger.open(world / "L.db").history("d") == []


def test_read_plan_bytes_limits(tmp_path):
    from factorize.plan.files import PlanFormatError, read_plan_bytes

    p = _marginal_plan(tmp_path / "p.plan", ["a", "b"])
    got = read_plan_bytes(p)
    assert got.data == p.read_bytes() and got.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    with pytest.raises(PlanFormatError, match="more than the limit"):
        read_plan_bytes(p, limit=len(got.data) - 1)
    with pytest.raises(PlanFormatError, match="not a regular file"):
        read_plan_bytes(tmp_path)
    os.mkfifo(tmp_path / "fifo.plan")  # refused at once, not waited on
    with pytest.raises(PlanFormatError, match="not a regular file"):
        read_plan_bytes(tmp_path / "fifo.plan")
    with pytest.raises(PlanFormatError, match="no such file"):
        read_plan_bytes(tmp_path / "missing.plan")


# ---------------------------------------------------------------------------------------
# outputs safe to open in a spreadsheet

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

SCHEMA = {"format": "factorize-domain-schema", "version": 1, "attributes": [
    {"name": "x", "kind": "categorical", "values": ["@SUM(1+1)", "=1+2"]},
    {"name": "=y", "kind": "categorical", "values": ["+a", "-b", "ok"]}]}


def _csv_cells(path: Path) -> list[list[str]]:
    """The cells of a CSV as a spreadsheet splits them (the ``#`` lines too)."""
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))


def test_schema_values_that_look_like_formulas_are_neutralised(tmp_path):
    from factorize.executor.output import read_answers

    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    rng = np.random.default_rng(2)
    rows = [f'"{SCHEMA["attributes"][0]["values"][rng.integers(2)]}",'
            f'"{SCHEMA["attributes"][1]["values"][rng.integers(3)]}"' for _ in range(40)]
    (tmp_path / "d.csv").write_text('x,"=y"\n' + "\n".join(rows) + "\n")
    assert main(["plan", "--workload", "marginals:2x3:1", "--domain", str(tmp_path / "s.json"),
                 "--privacy", "rho=0.5", "--out", str(tmp_path / "p.plan")]) == 0
    (tmp_path / "tabs").mkdir()
    assert main(["run", str(tmp_path / "p.plan"), "--data", str(tmp_path / "d.csv"), "--out",
                 str(tmp_path / "a.csv"), "--seed", "1", "--tables", str(tmp_path / "tabs")]) == 0
    files = [tmp_path / "a.csv", *sorted((tmp_path / "tabs").iterdir())]
    assert [p.name for p in files] == ["a.csv", "_y.csv", "x.csv"]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for row in _csv_cells(path):
            for cell in row:
                assert not cell.startswith(TRIGGERS), (path.name, cell)
        body = [line for line in text.splitlines() if not line.startswith("#")]
        for line in body[1:]:  # numbers stay numbers: the text fields are quoted, the rest parse
            for cell in next(csv.reader([line], quoting=csv.QUOTE_NONNUMERIC)):
                assert isinstance(cell, (str, float))
    answers = (tmp_path / "a.csv").read_text(encoding="utf-8")
    assert '"\'@SUM(1+1)"' in answers and '"\'=y"' in answers
    assert (tmp_path / "tabs" / "x.csv").read_text().splitlines()[-2].startswith('"\'@SUM(1+1)",')
    assert (tmp_path / "tabs" / "_y.csv").read_text().count('"\'=y",estimate') == 1
    # reading back returns the labels as they were, and the metadata as written
    cols, meta = read_answers(tmp_path / "a.csv")
    assert list(cols["x"]) == ["@SUM(1+1)", "=1+2", "", "", ""]
    assert list(cols["=y"]) == ["", "", "+a", "-b", "ok"]
    assert list(cols["table"]) == ["x", "x", "=y", "=y", "=y"]
    assert meta["domain"]["schema"]["attributes"][1]["values"] == ["+a", "-b", "ok"]


def test_text_cells_neutralised_numbers_kept(tmp_path):
    """The rule on every kind of text cell, and a negative estimate in a float column stays a
    number; JSON and Parquet keep the values as they are."""
    import pyarrow as pa

    from factorize.executor.output import read_answers, write_answers

    labels = ["=1+1", "+1", "-3.2", "@A1", "\tx", "\rx", "'=x", "'plain", "ok", ""]
    k = len(labels)
    cols = {"query": np.arange(k), "label": np.array(labels, dtype=object),
            "cell": pa.array(labels).dictionary_encode(), "estimate": -3.2 * np.ones(k)}
    meta = {"note": "a, =HYPERLINK(1)", "list": ["-x", "ok", -1.5]}
    write_answers(tmp_path / "a.csv", cols, meta)
    rows = _csv_cells(tmp_path / "a.csv")
    body = rows[len(meta) + 1:]
    for row in rows[:len(meta) + 1] + [r[1:3] for r in body]:  # every text cell
        assert not any(c.startswith(TRIGGERS) for c in row), row
    assert [r[1] for r in body] == ["'" + v if v[:1] in "=+-@\t\r'" and v else v for v in labels]
    assert [r[3] for r in body] == ["-3.2"] * k
    raw = (tmp_path / "a.csv").read_text().splitlines()[len(meta) + 1]
    assert raw.endswith(",-3.2") and raw.startswith('0,"\'=1+1"')
    for suffix in ("csv", "json", "parquet"):
        write_answers(tmp_path / f"b.{suffix}", cols, meta)
        back, m = read_answers(tmp_path / f"b.{suffix}")
        assert list(back["label"]) == labels and list(back["cell"]) == labels, suffix
        assert m == meta and np.all(back["estimate"] == -3.2)
