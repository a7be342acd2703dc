"""``factorize.engines.spark_engine``: Spark (local mode) gives the DuckDB engine's histograms
and the DuckDB engine's error messages, and ``factorize run --engine spark`` releases exactly
what ``--engine duckdb`` releases.

Spark must start here (pyspark is installed by the ``test`` extra, Java 17/21 must be on the
machine): if it cannot, the tests FAIL with the reason -- they are never skipped. One
SparkSession serves the whole module.
"""

from __future__ import annotations

import datetime
import decimal
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from factorize.engines import DataError, histogram_duckdb
from tests.engine_files import spark, write_csv, write_parquet  # noqa: F401 (spark: a fixture)
from workloads import Domain

#: Spark in local mode starts a JVM (~10 s) and these tests take about a minute: they run
#: with the full suite (README: `python -m pytest -q -m ""`), not in the default run.
pytestmark = pytest.mark.spark

SENTINEL = 987654
DOM = Domain(["a", "b", "c"], [3, 4, 5])
ROOT = Path(__file__).resolve().parent.parent


# -- helpers ----------------------------------------------------------------------------------


def hist_spark(*args, **kwargs):
    from factorize.engines.spark_engine import histogram_spark

    return histogram_spark(*args, **kwargs)


def reference(records: np.ndarray, domain: Domain) -> np.ndarray:
    return np.bincount(np.ravel_multi_index(tuple(records.T), domain.sizes), minlength=domain.size)


def random_records(rng: np.random.Generator, domain: Domain, n: int) -> np.ndarray:
    return np.stack([rng.integers(0, s, n) for s in domain.sizes], axis=1)


def _refusal(fn, fn_args, sentinel: object = SENTINEL, **kwargs) -> DataError:
    with pytest.raises(DataError) as info:
        fn(*fn_args, **kwargs)
    both = str(info.value) + "\n" + info.value.for_holder()
    assert str(sentinel) not in both, both
    return info.value


def spark_message(fn_args, sentinel: object = SENTINEL, **kwargs) -> str:
    """The counted rendering (``factorize data check``); the public one, ``str``, has no
    counts (tests/test_security_refusals.py)."""
    return _refusal(hist_spark, fn_args, sentinel, **kwargs).for_holder()


def same_error(path, domain, **kwargs) -> str:
    """Both engines refuse ``path`` with the same DataError texts, public and counted (which
    show no sentinel); returns the counted one."""
    expected = _refusal(histogram_duckdb, (path, domain), object(), **kwargs)
    got = _refusal(hist_spark, (path, domain), **kwargs)
    assert str(got) == str(expected)
    assert got.for_holder() == expected.for_holder()
    return got.for_holder()


def same_histogram(path, domain, expected=None, **kwargs) -> np.ndarray:
    h_duck = histogram_duckdb(path, domain, **kwargs)
    h = hist_spark(path, domain, **kwargs)
    assert h.dtype == np.int64 and h.shape == (domain.size,)
    np.testing.assert_array_equal(h, h_duck)
    if expected is not None:
        np.testing.assert_array_equal(h, expected)
    return h


# -- identical histograms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes,n,seed",
    [((3, 4, 5), 1000, 0), ((1,), 5, 4), ((2, 1, 9, 3), 3000, 2), ((50, 40), 20000, 3)],
)
def test_identical_histograms_csv_and_parquet(spark, tmp_path, sizes, n, seed):
    rng = np.random.default_rng(seed)
    domain = Domain([f"x{j}" for j in range(len(sizes))], sizes)
    recs = random_records(rng, domain, n)
    cols = {a: recs[:, j] for j, a in enumerate(domain.attributes)}
    pq_path = write_parquet(tmp_path / "r.parquet", cols)
    csv_path = tmp_path / "r.csv"
    pacsv.write_csv(pa.table(cols), csv_path)  # quoted header, plain integer fields
    for path in (pq_path, str(csv_path)):
        same_histogram(path, domain, reference(recs, domain))


def test_value_types_order_and_extra_columns(spark, tmp_path):
    """Parquet integer/bool/float/decimal/string columns, in another order, with extra columns."""
    rng = np.random.default_rng(7)
    dom = Domain(["i8", "u16", "flag", "f", "dec", "s"], [3, 300, 2, 6, 4, 11])
    recs = random_records(rng, dom, 2000)
    cols = {
        "extra": pa.array(rng.normal(size=2000)),
        "s": pa.array(recs[:, 5].astype(np.int16)),
        "dec": pa.array([decimal.Decimal(int(v)) for v in recs[:, 4]], pa.decimal128(20, 3)),
        "f": pa.array(recs[:, 3].astype(np.float32)),
        "flag": pa.array(recs[:, 2].astype(bool)),
        "u16": pa.array(recs[:, 1].astype(np.uint32)),
        "i8": pa.array(recs[:, 0].astype(np.int8)),
    }
    path = write_parquet(tmp_path / "types.pq", cols)
    same_histogram(path, dom, reference(recs, dom), allow_extra_columns=True)
    assert "['extra']" in same_error(path, dom)  # without allow_extra_columns
    # columns=: file columns named differently from the attributes; other columns ignored
    renamed = Domain(["A", "B", "C", "D", "E", "F"], dom.sizes)
    same_histogram(path, renamed, reference(recs, dom), columns=list(dom.attributes))
    # codes stored as text in a typed file: the same clear error from both engines
    cols["s"] = pa.array([f" {v}.0" if v % 3 == 0 else f"+{v}" for v in recs[:, 5]])
    text = write_parquet(tmp_path / "text.pq", cols)
    msg = same_error(text, dom, allow_extra_columns=True)
    assert "['s']" in msg and "hold text" in msg and "--domain" in msg


def test_csv_extra_columns_and_column_order(spark, tmp_path):
    rng = np.random.default_rng(6)
    recs = random_records(rng, DOM, 400)
    order = ["c", "zz", "a", "b"]
    rows = [[int(r[2]), SENTINEL, int(r[0]), int(r[1])] for r in recs]
    path = write_csv(tmp_path / "perm.csv", order, rows)
    msg = same_error(path, DOM)
    assert "has column(s) ['zz'] that are not domain attributes" in msg
    same_histogram(path, DOM, reference(recs, DOM), allow_extra_columns=True)


def test_csv_integer_spellings_classified_like_duckdb(spark, tmp_path):
    """One column per spelling (row 1: a valid 0, row 2: the spelling), so that the message
    classifies each spelling separately; valid spellings give DuckDB's histogram."""
    valid = ["3", "3.", "3.0", "+1", "-0", "-0.00", "003", " 2 ", "00000000000000000000000000001", '" 1 "']
    invalid = ["1.5", "abc", "1e3", "0x10", "1_000", '"\t1"', "-1", "4", "99999999999999999999",
               "-00000000000000000001", "+", "", '""', "nan", "inf", "٣", '"1\n"', f"{SENTINEL}"]
    size = 4
    header = [f"v{i}" for i in range(len(valid))]
    good = write_csv(tmp_path / "good.csv", header, [["0"] * len(valid), valid])
    dom_good = Domain(header, [size] * len(valid))
    h = same_histogram(good, dom_good)
    assert h.sum() == 2
    header = [f"w{i}" for i in range(len(invalid))]
    bad = write_csv(tmp_path / "bad.csv", header, [["0"] * len(invalid), invalid])
    dom_bad = Domain(header, [size] * len(invalid))
    msg = same_error(bad, dom_bad)
    assert f"invalid values in {len(invalid)} column(s) of 2 rows" in msg


@pytest.mark.parametrize(
    "bad,kind",
    [(None, "missing (NULL/empty/NaN)"), ("1.5", "not an integer"), (f"abc{SENTINEL}", "not an integer"),
     (SENTINEL, "outside 0..3"), (-1, "outside 0..3")],
)
def test_bad_csv_values_same_message(spark, tmp_path, bad, kind):
    rows = [[0, 1, 2], [2, 3, 4], [1, bad, 1], [0, 0, 0]]
    path = write_csv(tmp_path / "bad.csv", ["a", "b", "c"], rows)
    msg = same_error(path, DOM)
    assert f"column 'b': 1 row {kind}" in msg and "of 4 rows" in msg


def test_bad_typed_parquet_values_same_message(spark, tmp_path):
    a = pa.array([0, 1, 2, -1, SENTINEL, None, 0, 1], pa.int64())
    b = pa.array([0.0, 1.0, 1.5, float("nan"), float("inf"), None, -0.0, 1e300], pa.float64())
    c = pa.array([decimal.Decimal(v) for v in (0, 1, 10**25 + SENTINEL, 2, 3, 4, 0, 1)], pa.decimal128(38, 0))
    e = pa.array([True, False, None, True, True, False, True, False])
    f = pa.array([0, 1, 2, 3, 255, 0, 1, 2], pa.uint8())
    path = write_parquet(tmp_path / "bad.parquet", {"a": a, "b": b, "c": c, "e": e, "f": f})
    dom = Domain(["a", "b", "c", "e", "f"], [3, 4, 5, 1, 4])
    msg = same_error(path, dom)
    assert "invalid values in 5 column(s) of 8 rows" in msg
    assert "column 'b': 2 rows missing (NULL/empty/NaN), 2 rows not an integer, 1 row outside 0..3" in msg
    assert "column 'e': 1 row missing (NULL/empty/NaN), 4 rows outside 0..0" in msg


def test_several_problems_same_message_with_and_without_ansi(spark, tmp_path):
    rows = [[0, 1, 2], [None, 1, 1], ["", 1, 1], [SENTINEL, 7, "x"], [1.5, 1, 9], [0, 0, 0],
            ["99999999999999999999999", "-5", "2.0"]]
    path = write_csv(tmp_path / "many.csv", ["a", "b", "c"], rows)
    key = "spark.sql.ansi.enabled"
    before = spark.conf.get(key)
    try:
        for ansi in ("true", "false"):
            spark.conf.set(key, ansi)
            msg = same_error(path, DOM)
    finally:
        spark.conf.set(key, before)
    assert "column 'a': 2 rows missing (NULL/empty/NaN), 1 row not an integer, 2 rows outside 0..2" in msg


def test_domain_with_more_than_31_attributes(spark, tmp_path):
    """Keys hold 2 bits of status per column: wider domains use several mask columns."""
    d = 40
    sizes = [1] * d
    sizes[0], sizes[33], sizes[39] = 2, 3, 2
    dom = Domain([f"x{j}" for j in range(d)], sizes)
    rng = np.random.default_rng(11)
    recs = random_records(rng, dom, 300)
    cols = {a: recs[:, j] for j, a in enumerate(dom.attributes)}
    path = write_parquet(tmp_path / "wide.parquet", cols)
    same_histogram(path, dom, reference(recs, dom))
    cols["x35"] = np.where(np.arange(300) % 7 == 0, SENTINEL, 0)
    cols["x2"] = pa.array([None if i % 50 == 0 else 0 for i in range(300)], pa.int64())
    bad = write_parquet(tmp_path / "wide_bad.parquet", cols)
    msg = same_error(bad, dom)
    assert "column 'x2': 6 rows missing" in msg and "column 'x35': 43 rows outside 0..0" in msg


# -- bad files and columns --------------------------------------------------------------------


def test_missing_repeated_and_unsupported_columns(spark, tmp_path):
    path = write_csv(tmp_path / "m.csv", ["a", "c", "zz"], [[0, SENTINEL, 1]])
    assert "lacks column(s) ['b']" in same_error(path, DOM)
    pq_path = write_parquet(tmp_path / "m.parquet", {"a": [0], "c": [SENTINEL]})
    assert "lacks column(s) ['b']" in same_error(pq_path, DOM)
    nohdr = write_csv(tmp_path / "nohdr.csv", ["1", str(SENTINEL), "2"], [[0, 1, 2]])
    assert "header row" in same_error(nohdr, DOM)
    dup = write_csv(tmp_path / "dup.csv", ["a", "b", "c", "b"], [[0, 1, 2, SENTINEL]])
    assert "more than one column named ['b']" in same_error(dup, DOM)
    date = write_parquet(tmp_path / "date.parquet",
                         {"a": [0], "b": [datetime.date(2000 + SENTINEL % 1000, 1, 1)], "c": [0]})
    assert "column 'b' has type DATE" in same_error(date, DOM)


def test_empty_inputs(spark, tmp_path):
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b,c\n", encoding="utf-8")
    assert "no records" in same_error(header_only, DOM)
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    assert "is empty" in same_error(empty, DOM)
    blank = tmp_path / "b.csv"
    blank.write_text("\na,b,c\n0,0,0\n", encoding="utf-8")
    assert "empty line" in same_error(blank, DOM)
    pq_path = write_parquet(tmp_path / "e.parquet", {k: pa.array([], pa.int64()) for k in DOM.attributes})
    assert "no records" in same_error(pq_path, DOM)


def test_java_pattern_is_duckdb_integer_pattern():
    from factorize.engines.duckdb_engine import INTEGER_PATTERN
    from factorize.engines.spark_engine import _JAVA_INTEGER

    assert INTEGER_PATTERN == r"[+-]?[0-9]+(\.0*)?"
    assert _JAVA_INTEGER == r"^[+-]?([0-9]+)(?:\.0*)?\z"


def test_paths_refused_before_spark_runs(spark, tmp_path):
    for name in ("d.txt", "d.csv.gz", "d"):
        (tmp_path / name).write_text("a,b,c\n0,0,0\n")
        assert "unsupported data file suffix" in spark_message((tmp_path / name, DOM))
    assert "does not exist" in spark_message((tmp_path / "nope.parquet", DOM))
    assert "glob" in spark_message((str(tmp_path / "*.csv"), DOM))
    with pytest.raises(DataError, match="path"):
        hist_spark(12, DOM)


def test_malformed_csv_and_corrupt_parquet_withhold_spark_messages(spark, tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text(f"a,b,c\n0,1,2\n1,2,3,{SENTINEL}\n", encoding="utf-8")
    short = tmp_path / "short.csv"
    short.write_text(f"a,b,c\n0,1,2\n{SENTINEL},2\n", encoding="utf-8")
    quote = tmp_path / "quote.csv"
    quote.write_text(f'a,b,c\n0,1,2\n1,"{SENTINEL},3\n', encoding="utf-8")
    for path in (ragged, short, quote):
        with pytest.raises(DataError):
            histogram_duckdb(path, DOM)
        msg = spark_message((path, DOM))
        assert "cannot parse CSV file" in msg and "withheld" in msg
    # a session not made by spark_session(): CSV column pruning is disabled for the query
    # (else the ragged rows would pass) and restored afterwards
    key = "spark.sql.csv.parser.columnPruning.enabled"
    spark.conf.set(key, "true")
    try:
        assert "cannot parse CSV file" in spark_message((ragged, DOM), spark=spark)
        assert spark.conf.get(key) == "true"
    finally:
        spark.conf.set(key, "false")
    bad_pq = tmp_path / "corrupt.parquet"
    bad_pq.write_bytes(b"PAR1" + str(SENTINEL).encode() * 10 + b"PAR1")
    assert "Spark cannot read Parquet file" in spark_message((bad_pq, DOM))


def test_quoted_line_break_same_as_duckdb(spark, tmp_path):
    path = tmp_path / "nl.csv"
    path.write_text('a,b,c\n0,1,2\n0,"1\n2",3\n"1",1,"1"\n', encoding="utf-8")
    assert "column 'b': 1 row not an integer" in same_error(path, DOM)


# -- DataFrames and directories ---------------------------------------------------------------


def test_dataframe_input_and_spark_written_directory(spark, tmp_path):
    rng = np.random.default_rng(9)
    recs = random_records(rng, DOM, 3000)
    expected = reference(recs, DOM)
    df = spark.createDataFrame([tuple(int(v) for v in r) for r in recs], ["c", "b", "a"]).toDF("a", "b", "c")
    np.testing.assert_array_equal(hist_spark(df, DOM), expected)
    # a Spark dataset directory of part files (Parquet and CSV) read by path
    out = tmp_path / "table.parquet"
    df.repartition(3).write.parquet(str(out))
    np.testing.assert_array_equal(hist_spark(out, DOM), expected)
    out_csv = tmp_path / "table.csv"
    df.repartition(2).write.option("header", True).csv(str(out_csv))
    np.testing.assert_array_equal(hist_spark(out_csv, DOM), expected)
    # bad values in a DataFrame: same counts, subject "Spark DataFrame"
    bad = spark.createDataFrame([(0, 1, 2), (SENTINEL, None, 1)], "a long, b long, c long")
    msg = spark_message((bad, DOM))
    assert msg.startswith("Spark DataFrame: invalid values in 2 column(s) of 2 rows")
    assert "column 'a': 1 row outside 0..2; column 'b': 1 row missing (NULL/empty/NaN)" in msg


# -- end to end -------------------------------------------------------------------------------


def test_cli_run_engine_spark_releases_what_duckdb_releases(spark, tmp_path):
    from factorize.cli import main
    from factorize.kinds.factorization.build import build_plan
    from factorize.kinds.factorization.codec import save_plan

    domain = Domain(["a", "b"], [2, 3])
    plan = build_plan("marginals:2x3:2", "epsilon=1,delta=1e-6", domain=domain)
    plan_path = tmp_path / "m.plan"
    save_plan(plan, plan_path)
    rng = np.random.default_rng(3)
    recs = random_records(rng, domain, 500)
    data = write_parquet(tmp_path / "r.parquet", {"a": recs[:, 0], "b": recs[:, 1]})
    outs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"{engine}.csv"
        rc = main(["run", str(plan_path), "--engine", engine, "--data", str(data), "--out", str(out), "--seed", "1"])
        assert rc == 0
        outs[engine] = out.read_text(encoding="utf-8")
    assert outs["spark"] == outs["duckdb"]
    assert "estimate" in outs["spark"]


# -- Spark that cannot start ------------------------------------------------------------------


def test_spark_that_cannot_start_says_why(tmp_path):
    code = (
        "from factorize.engines.spark_engine import spark_session, SparkUnavailableError\n"
        "try:\n    spark_session()\nexcept SparkUnavailableError as e:\n    print('REFUSED', e)\n"
    )
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java-here")}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert "REFUSED cannot start a Spark session" in res.stdout, res.stdout + res.stderr
    assert "Java 17 or 21" in res.stdout and "no-java-here" in res.stdout
