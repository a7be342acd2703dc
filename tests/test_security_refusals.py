"""Refusals carry no number derived from the records, and a data source cannot read other
files.

1. Whoever writes a plan chooses its domain, and the refusal of out-of-domain records reaches
   them before any charge: with counts in it, plans over sizes 20, 30, 40 would read off a
   column's CDF and n for free. The messages of ``run`` (DuckDB and Spark), of the engines'
   other refusals (empty data, missing columns, blank or malformed CSV lines, bad histogram
   entries, bad local messages) and of the δ < 1/n check carry none; the counts live in the
   same exceptions' ``holder_message`` and are printed by ``factorize data check`` only.
2. ``--data FILE.duckdb::VIEW``: a view of the file over ``read_csv`` / ``glob`` would run on
   the executor's machine. The database is attached, then external access is switched off
   and the configuration locked, so such a view is refused, before any charge.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest

from factorize.cli import main
from factorize.engines import DataError, histogram_duckdb, histogram_from_npy, marginals_duckdb
from factorize.engines.duckdb_engine import attach_sealed
from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import save_plan
from factorize.ledger.ledger import Ledger
from factorize.privacy import PrivacyError, parse_guarantee
from factorize.privacy.policy import check_guarantee
from tests.engine_files import spark  # noqa: F401 - the module's Spark session (Spark tests only)
from tests.plan_fixtures import identity_certificate
from workloads import Domain
from workloads.schema import DomainSchema

N_RECORDS = 4871
SIZES = (20, 30, 40)


def _records(seed: int = 26) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 60, N_RECORDS), rng.integers(0, 3, N_RECORDS)


def _write_records(path: Path, age: np.ndarray, b: np.ndarray) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["age", "b"])
        w.writerows(zip(age.tolist(), b.tolist(), strict=True))
    return path


def _plan(tmp_path: Path, domain: Domain, privacy: str = "epsilon=1,delta=1e-6") -> Path:
    spec = "marginals:" + "x".join(map(str, domain.sizes)) + ":1"
    path = tmp_path / f"p{'_'.join(map(str, domain.sizes))}_{privacy.replace('=', '').replace(',', '_')}.plan"
    save_plan(build_plan(spec, privacy, domain=domain, certificate=identity_certificate(spec)), path)
    return path


def _schema_domain(k: int) -> Domain:
    return DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "age", "kind": "integer", "min": 0, "max": k - 1},
        {"name": "b", "kind": "integer", "min": 0, "max": 2}]}).domain()


def _ledger(tmp_path: Path) -> Path:
    book = Ledger.create(tmp_path / "L.db")
    book.create_dataset("d", {"type": "approx_dp", "epsilon": 100.0, "delta": 1e-3})
    return tmp_path / "L.db"


def _history(ledger: Path) -> list:
    return Ledger.open(ledger).history("d")


def _run(capsys, plan: Path, data: str, out: Path, ledger: Path | None = None, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    args = ["run", str(plan), "--data", data, "--out", str(out), *extra]
    if ledger is not None:
        args += ["--ledger", str(ledger), "--dataset", "d"]
    rc = main(args)
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def _digits(text: str, tmp_path: Path) -> set[str]:
    """The numbers in ``text`` once the temporary folder (whose name may hold digits) is cut."""
    return set(re.findall(r"\d+", text.replace(str(tmp_path), "<tmp>")))


# -- no counts in refusals --------------------------------------------------------------------


def _assert_count_free(messages: dict[int, str], age: np.ndarray, tmp_path: Path) -> None:
    """Messages for the plans of sizes 20/30/40: identical apart from the stated range, and
    no number in them but that range (the true n and counts are absent)."""
    canonical = {k: m.replace(f"0..{k - 1}", "0..K") for k, m in messages.items()}
    assert len(set(canonical.values())) == 1, canonical
    for k, m in messages.items():
        assert f"0..{k - 1}" in m, m
        assert _digits(m, tmp_path) <= {"0", str(k - 1)}, m  # nothing derived from the data
        for secret in (N_RECORDS, int((age > k - 1).sum())):
            assert str(secret) not in m.replace(str(tmp_path), "<tmp>"), (secret, m)


@pytest.mark.parametrize("kind", ["sizes", "schema"])
def test_run_refusals_do_not_count_rows_duckdb(tmp_path, capsys, kind):
    age, b = _records()
    data = _write_records(tmp_path / "r.csv", age, b)
    ledger = _ledger(tmp_path)
    messages = {}
    for k in SIZES:
        domain = Domain(["age", "b"], [k, 3]) if kind == "sizes" else _schema_domain(k)
        out = tmp_path / f"a{k}.csv"
        rc, text = _run(capsys, _plan(tmp_path, domain), str(data), out, ledger)
        assert rc == 2 and not out.exists(), text
        assert "column 'age'" in text and "'b'" not in text and "data check" in text, text
        messages[k] = text
        with pytest.raises(DataError) as info:  # the same refusal in Python; counts for the holder
            histogram_duckdb(data, domain)
        assert str(info.value) in text
        assert f"{int((age > k - 1).sum())} rows" in info.value.holder_message
        assert f"of {N_RECORDS} rows" in info.value.holder_message
    _assert_count_free(messages, age, tmp_path)
    assert _history(ledger) == []  # refused before any charge
    # positive control: the full domain runs, and is charged
    rc, text = _run(capsys, _plan(tmp_path, Domain(["age", "b"], [60, 3])), str(data), tmp_path / "ok.csv", ledger)
    assert rc == 0, text
    assert len(_history(ledger)) == 1


@pytest.mark.spark
def test_run_refusals_do_not_count_rows_spark(tmp_path, capsys, spark):  # noqa: F811
    age, b = _records()
    data = _write_records(tmp_path / "r.csv", age, b)
    ledger = _ledger(tmp_path)
    messages = {}
    duck = {}
    for k in SIZES:
        out = tmp_path / f"a{k}.csv"
        plan = _plan(tmp_path, Domain(["age", "b"], [k, 3]))
        rc, text = _run(capsys, plan, str(data), out, ledger, "--engine", "spark")
        assert rc == 2 and not out.exists(), text
        messages[k] = text
        rc, duck[k] = _run(capsys, plan, str(data), out, ledger)
        assert rc == 2
    assert messages == duck  # the same words from both engines
    _assert_count_free(messages, age, tmp_path)
    assert _history(ledger) == []


def test_other_refusals_on_the_run_path_carry_no_data_number(tmp_path):
    """Empty data, missing columns, blank and malformed CSV lines, bad histogram entries:
    the message has no number from the data, the holder rendering has it."""
    dom = Domain(["a", "b"], [2, 3])
    cases = []
    (tmp_path / "empty.csv").write_text("a,b\n")
    cases.append(("empty.csv", None))
    (tmp_path / "cols.csv").write_text("a,x7,y7,z7,w7\n" + "0,1,1,1,1\n" * 3)
    cases.append(("cols.csv", "it has 5 columns, 4 of them not in the domain"))
    (tmp_path / "blank.csv").write_text("a,b\n" + "0,1\n" * 11 + "\n1,1\n")
    cases.append(("blank.csv", "line 13 is blank"))
    (tmp_path / "fields.csv").write_text("a,b\n" + "0,1\n" * 16 + "0,1,1,1,1,1,1\n")
    cases.append(("fields.csv", "line 18: expected 2 fields"))
    h = np.zeros(dom.size)
    h[[1, 4, 5]] = -1.0
    np.save(tmp_path / "neg.npy", h)
    cases.append(("neg.npy", "3 entries are negative"))
    for name, counted in cases:
        with pytest.raises(DataError) as info:
            (histogram_from_npy if name.endswith(".npy") else histogram_duckdb)(tmp_path / name, dom)
        msg = str(info.value)
        assert _digits(msg, tmp_path) <= {"0"}, msg  # ">= 0": the rule, not the data
        if counted is not None:
            assert counted in info.value.holder_message, info.value.holder_message
    # marginals say the same
    with pytest.raises(DataError) as info:
        marginals_duckdb(tmp_path / "blank.csv", dom, [(0,)])
    assert _digits(str(info.value), tmp_path) == set()


def test_local_aggregate_refusal_does_not_count_messages(tmp_path):
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.protocol import aggregate_file, write_messages

    plan = build_local_plan("prefix:4", "epsilon=1", n=20000, eta=0.1, alpha=0.2)
    Y = np.ones((537, plan.A.shape[0]))
    Y[[3, 40, 41], 0] = np.nan
    write_messages(tmp_path / "m.parquet", Y, "0" * 64, test_mode=True)
    with pytest.raises(DataError, match="non-finite") as info:
        aggregate_file(plan, tmp_path / "m.parquet")
    assert _digits(str(info.value), tmp_path) == set(), info.value
    assert "3 of 537 messages" in info.value.holder_message


def test_delta_refusal_states_delta_never_n(tmp_path, capsys):
    g = parse_guarantee("epsilon=1,delta=1e-3")
    with pytest.raises(PrivacyError) as info:
        check_guarantee(g, n=N_RECORDS)
    assert str(N_RECORDS) not in str(info.value) and "not below 1/n" in str(info.value)
    check_guarantee(g, n=999)  # below 1/δ: no refusal
    age, b = _records()
    data = _write_records(tmp_path / "r.csv", age, b)
    ledger = _ledger(tmp_path)
    rc, text = _run(capsys, _plan(tmp_path, Domain(["age", "b"], [60, 3]), "epsilon=1,delta=1e-3"),
                    str(data), tmp_path / "a.csv", ledger)
    assert rc == 2 and "not below 1/n" in text and str(N_RECORDS) not in text, text
    assert _history(ledger) == []


# -- factorize data check ---------------------------------------------------------------------


def test_data_check_prints_the_exact_counts(tmp_path, capsys):
    rng = np.random.default_rng(7)
    n = 3163
    age = [str(v) for v in rng.integers(-5, 45, n)]
    b = [str(v) for v in rng.integers(0, 4, n)]
    for i in rng.choice(n, 29, replace=False):
        age[i] = ""
    for i in rng.choice(n, 17, replace=False):
        b[i] = "x"
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["age", "b"])
        w.writerows(zip(age, b, strict=True))
    ages = [int(v) for v in age if v]
    missing, outside = age.count(""), sum(not 0 <= v <= 19 for v in ages)
    bad_b, b_out = b.count("x"), sum(v not in ("x", "0", "1", "2") for v in b)
    capsys.readouterr()
    rc = main(["data", "check", "--domain", "age=20,b=3", "--data", str(path)])
    out = capsys.readouterr().out
    assert rc == 2
    assert out.startswith("NOT DIFFERENTIALLY PRIVATE")
    assert f"of {n} rows" in out
    assert (f"column 'age': {missing} rows missing (NULL/empty/NaN), {outside} rows outside 0..19"
            in out), out
    assert f"column 'b': {bad_b} rows not an integer, {b_out} rows outside 0..2" in out, out
    # a plan's domain, and data that passes: the record count
    plan = _plan(tmp_path, Domain(["age", "b"], [60, 3]))
    age2, b2 = _records()
    ok = _write_records(tmp_path / "ok.csv", age2, b2)
    rc = main(["data", "check", "--plan", str(plan), "--data", str(ok)])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith("NOT DIFFERENTIALLY PRIVATE")
    assert re.search(rf"^records\s+{N_RECORDS}$", out, re.M), out
    # its help says so too
    with pytest.raises(SystemExit):
        main(["data", "check", "--help"])
    assert "NOT differentially private" in capsys.readouterr().out


# -- no file reads through a DuckDB source ----------------------------------------------------

SECRET = 918273645


@pytest.fixture()
def hostile_db(tmp_path):
    """A database with a table, a view over it, a view over another CSV (read_csv), a view
    listing a folder (glob), and a view over a table macro that reads the CSV."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "passwords.csv").write_text(f"age,b\n{SECRET % 60},{SECRET % 3}\n7,1\n")
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT (i % 60)::INTEGER AS age, (i % 3)::INTEGER AS b FROM range(600) r(i)")
    con.execute("CREATE VIEW tv AS SELECT age, b FROM w.main.t")
    con.execute(f"CREATE VIEW v AS SELECT * FROM read_csv('{other / 'passwords.csv'}')")
    con.execute(f"CREATE VIEW g AS SELECT length(file) % 60 AS age, 0 AS b FROM glob('{other}/*')")
    con.execute(f"CREATE MACRO m() AS TABLE SELECT * FROM read_csv('{other / 'passwords.csv'}')")
    con.execute("CREATE VIEW vm AS SELECT * FROM m()")
    con.close()
    return db, other


@pytest.mark.parametrize("view", ["v", "g", "vm"])
def test_a_view_that_reads_files_is_refused_before_the_charge(tmp_path, capsys, hostile_db, view):
    db, other = hostile_db
    # the attack works on a plain read-only attach: the view reads the other file
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{db}' AS s (READ_ONLY)")
    assert con.execute(f"SELECT count(*) FROM s.{view}").fetchone()[0] >= 1
    con.close()
    ledger = _ledger(tmp_path)
    out = tmp_path / "a.csv"
    plan = _plan(tmp_path, Domain(["age", "b"], [60, 3]))  # the other file's schema, guessed
    rc, text = _run(capsys, plan, f"{db}::{view}", out, ledger)
    assert rc == 2 and not out.exists(), text
    assert f"the view '{view}'" in text and "reads files" in text, text
    assert str(SECRET) not in text and "passwords" not in text and str(other) not in text
    assert _history(ledger) == []
    with pytest.raises(DataError, match="reads files"):
        histogram_duckdb(f"{db}::{view}", Domain(["age", "b"], [60, 3]))
    # a guessed narrow domain learns nothing either: the same refusal, not a count
    rc, narrow = _run(capsys, _plan(tmp_path, Domain(["age", "b"], [8, 3])), f"{db}::{view}", out, ledger)
    assert rc == 2 and narrow.replace(str(tmp_path), "") == text.replace(str(tmp_path), "")


def test_tables_and_views_over_tables_still_run(tmp_path, capsys, hostile_db):
    db, _ = hostile_db
    dom = Domain(["age", "b"], [60, 3])
    want = np.zeros(dom.size, dtype=np.int64)
    np.add.at(want, (np.arange(600) % 60) * 3 + np.arange(600) % 3, 1)
    for name in ("t", "tv"):
        np.testing.assert_array_equal(histogram_duckdb(f"{db}::{name}", dom), want)
        m = marginals_duckdb(f"{db}::{name}", dom, [(0,), (0, 1)])
        np.testing.assert_array_equal(m[(0, 1)], want)
    ledger = _ledger(tmp_path)
    rc, text = _run(capsys, _plan(tmp_path, dom), f"{db}::t", tmp_path / "a.csv", ledger)
    assert rc == 0, text
    assert len(_history(ledger)) == 1


def test_sealed_connection_cannot_be_reopened(tmp_path, hostile_db):
    db, other = hostile_db
    con = duckdb.connect(":memory:")
    try:
        attach_sealed(con, db, "src")
        assert con.execute("SELECT count(*) FROM src.t").fetchone()[0] == 600
        for sql in ("SET enable_external_access = true", "RESET enable_external_access",
                    "SET lock_configuration = false", "RESET lock_configuration"):
            with pytest.raises(duckdb.Error, match="locked"):
                con.execute(sql)
        for sql in (f"SELECT * FROM read_csv('{other / 'passwords.csv'}')", f"SELECT * FROM glob('{other}/*')",
                    "SELECT * FROM src.v", "SELECT * FROM src.g", "SELECT * FROM src.vm"):
            with pytest.raises(duckdb.PermissionException):
                con.execute(sql)
        assert con.execute("SELECT current_setting('enable_external_access')").fetchone()[0] is False
    finally:
        con.close()


def test_schema_draft_from_a_hostile_view_is_refused(tmp_path, hostile_db):
    from factorize.engines.schema_draft import draft_schema_dict

    db, _ = hostile_db
    with pytest.raises(DataError) as info:
        draft_schema_dict(f"{db}::v")
    assert str(SECRET) not in str(info.value)
    assert draft_schema_dict(f"{db}::t")["attributes"]  # a table drafts as before
