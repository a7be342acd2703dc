"""Raw data in, inside the engine: DuckDB maps raw columns to codes with the
plan's public domain schema; values outside the schema are refused per column (no value quoted,
the counts in the data holder's rendering only) or go to the catch-all / clamped code; CSV, Parquet and DuckDB tables or views;
blank lines in a CSV and string-typed Parquet columns get clear errors; plans carry the
schema; a raw-string copy of Adult releases exactly what the coded file releases (test mode).
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from factorize.cli.plan import main
from factorize.engines import DataError, histogram_duckdb, marginals_duckdb
from factorize.executor.data import load_histogram, load_marginals
from factorize.kinds.factorization.codec import load_plan, save_plan
from tests import raw_adult
from tests.plan_fixtures import identity_certificate
from workloads import Domain
from workloads.schema import DomainSchema, read_domain

SECRET = 987654  # must never appear in a message
SCHEMA = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
    {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
    {"name": "age", "kind": "integer", "min": 17, "max": 20, "outside": "clamp"},
    {"name": "pay", "kind": "numeric", "edges": [0, 10.5, 100], "closed": "left", "outside": "catch_all",
     "catch_all_label": "unknown"},
]})
DOM = SCHEMA.domain()  # sizes 2, 4, 3
HAVE_ADULT = raw_adult.ADULT_CSV.is_file() and raw_adult.ADULT_DOMAIN.is_file()
needs_adult = pytest.mark.skipif(not HAVE_ADULT, reason=f"Adult data not found in {raw_adult.ADULT_DIR}")


def reference(domain: Domain, columns: dict[str, list], type_classes: dict[str, str]) -> np.ndarray:
    """The histogram by the schema's pure-Python mapping."""
    codes = np.column_stack([[domain.schema[a].encode(v, type_classes[a]) for v in columns[a]]
                             for a in domain.attributes])
    assert (codes >= 0).all()
    return np.bincount(np.ravel_multi_index(tuple(codes.T), domain.sizes), minlength=domain.size)


def write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join("" if v is None else str(v) for v in r)
                                                     for r in rows]) + "\n", encoding="utf-8")
    return path


# -- mapping, catch-all and clamp ---------------------------------------------------------------


def test_random_raw_records_csv_parquet_and_table_match_the_reference(tmp_path):
    rng = np.random.default_rng(3)
    n = 3000
    sex = [["Female", " Male", "Male "][i] for i in rng.integers(0, 3, n)]
    age = [int(x) for x in rng.integers(10, 30, n)]  # clamped below 17 and above 20
    pay = [float(x) for x in rng.choice([-1.0, 0.0, 10.5, np.nextafter(10.5, 0), 99.99, 100.0, 1e9, 5.0], n)]
    pay_text = [repr(x) for x in pay]
    pay_text[:5] = ["", "abc", "nan", "1e999", "  7  "]  # catch-all: missing, unparsable, NaN, overflow
    cols = {"sex": sex, "age": [str(a) for a in age], "pay": pay_text}
    want = reference(DOM, cols, {"sex": "text", "age": "text", "pay": "text"})
    csv_path = write_csv(tmp_path / "raw.csv", ["age", "pay", "sex"],
                         [[a, f'"{p}"', s] for a, p, s in zip(age, pay_text, sex, strict=True)])
    np.testing.assert_array_equal(histogram_duckdb(csv_path, DOM), want)
    # typed Parquet: integer age, float pay (the same values), text sex
    pq.write_table(pa.table({"sex": sex, "age": pa.array(age, pa.int16()), "pay": pay}), tmp_path / "raw.parquet")
    want_typed = reference(DOM, {"sex": sex, "age": age, "pay": pay}, {"sex": "text", "age": "integer", "pay": "float"})
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "raw.parquet", DOM), want_typed)
    # the same as a table and as a view of a DuckDB database file
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE people AS SELECT * FROM read_parquet('{tmp_path / 'raw.parquet'}')")
    con.execute("CREATE SCHEMA s")
    con.execute("CREATE VIEW s.adults AS SELECT sex, CAST(age AS VARCHAR) AS age, pay, 1 AS extra FROM main.people")
    con.execute("CREATE VIEW s.broken AS SELECT * FROM people")  # resolves in schema s: no such table
    con.close()
    np.testing.assert_array_equal(histogram_duckdb(f"{db}::people", DOM), want_typed)
    np.testing.assert_array_equal(histogram_duckdb(f"{db}::s.adults", DOM, allow_extra_columns=True), want_typed)
    np.testing.assert_array_equal(load_histogram(f"{db}::people", DOM), want_typed)
    with pytest.raises(DataError, match="refers to a table or view that does not resolve"):
        histogram_duckdb(f"{db}::s.broken", DOM)
    m = load_marginals(f"{db}::s.adults", DOM, [(0, 2)], allow_extra_columns=True)
    np.testing.assert_array_equal(m[(0, 2)], want_typed.reshape(DOM.sizes).sum(axis=1).ravel())


def _scans(monkeypatch) -> list[str]:
    """Record the grouping scans (``CREATE TEMP TABLE g``) the DuckDB engine runs."""
    seen: list[str] = []
    connect = duckdb.connect

    class Spy:
        def __init__(self, con):
            self._con = con

        def execute(self, sql, *args):
            if sql.startswith("CREATE TEMP TABLE g "):
                seen.append(sql)
            return self._con.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self._con, name)

    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: Spy(connect(*a, **k)))
    return seen


def test_one_quick_scan_when_every_value_has_its_code_else_the_full_mapping(tmp_path, monkeypatch):
    """The engine groups by the quick codes (schema_sql.quick_code_sql) in one scan; only
    when some value is refused or needs trimming does it map the data again with the full SQL
    (which counts the reasons). Both give the reference's histogram, and the same refusals."""
    rng = np.random.default_rng(11)
    n = 2000
    sex = [["Female", "Male"][i] for i in rng.integers(0, 2, n)]
    age = [int(x) for x in rng.integers(10, 30, n)]
    pay = [float(x) for x in rng.choice([-1.0, 0.0, 10.5, np.nextafter(10.5, 0), 99.99, 100.0, 1e9, np.nan], n)]
    types = {"sex": "text", "age": "integer", "pay": "float"}
    seen = _scans(monkeypatch)
    pq.write_table(pa.table({"sex": sex, "age": age, "pay": pay}), tmp_path / "clean.parquet")
    want = reference(DOM, {"sex": sex, "age": age, "pay": pay}, types)
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "clean.parquet", DOM), want)
    assert len(seen) == 1
    spaced = [" Male" if i % 97 == 0 else v for i, v in enumerate(sex)]  # found after trimming
    pq.write_table(pa.table({"sex": spaced, "age": age, "pay": pay}), tmp_path / "spaced.parquet")
    seen.clear()
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "spaced.parquet", DOM),
                                  reference(DOM, {"sex": spaced, "age": age, "pay": pay}, types))
    assert len(seen) == 2
    m = marginals_duckdb(tmp_path / "spaced.parquet", DOM, [(0,), (1, 2)])
    np.testing.assert_array_equal(m[(1, 2)], want.reshape(DOM.sizes).sum(axis=0).ravel())
    bad = pa.table({"sex": sex[:-1] + [f"S{SECRET}"], "age": pa.array(age[:-2] + [None, 18]), "pay": pay})
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "bad.parquet", DOM)
    assert str(SECRET) not in str(info.value)
    assert "column 'sex': 1 row not among the schema's 2 values" in info.value.for_holder()
    assert "column 'age': 1 row missing (NULL/empty/NaN)" in info.value.for_holder()


def test_integer_columns_are_grouped_by_raw_value_when_duckdb_keeps_its_perfect_hash(tmp_path, monkeypatch):
    """An integer column (age) is grouped by its raw value when its Parquet statistics give
    DuckDB a small range (the plan keeps the perfect-hash aggregate), then mapped, clamped
    and checked on the grouped table: one scan, the reference's histogram, and its refusals
    counted without a second scan. A wide range (statistics up to 2**40) or a CSV (text)
    is mapped per row instead; the same histograms."""
    rng = np.random.default_rng(12)
    n = 1500
    sex = [["Female", "Male"][i] for i in rng.integers(0, 2, n)]
    age = [int(x) for x in rng.integers(10, 30, n)]
    pay = [float(x) for x in rng.uniform(-5, 200, n)]
    types = {"sex": "text", "age": "integer", "pay": "float"}
    seen = _scans(monkeypatch)
    pq.write_table(pa.table({"sex": sex, "age": age, "pay": pay}), tmp_path / "narrow.parquet")
    want = reference(DOM, {"sex": sex, "age": age, "pay": pay}, types)
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "narrow.parquet", DOM), want)
    assert len(seen) == 1 and '"age" AS "r1"' in seen[0]
    wide = age[:-1] + [2**40]  # clamped to 20, like the ages above 20
    pq.write_table(pa.table({"sex": sex, "age": wide, "pay": pay}), tmp_path / "wide.parquet")
    seen.clear()
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "wide.parquet", DOM),
                                  reference(DOM, {"sex": sex, "age": wide, "pay": pay}, types))
    assert len(seen) == 1 and '"r1"' not in seen[0]
    write_csv(tmp_path / "narrow.csv", ["sex", "age", "pay"], zip(sex, age, pay, strict=True))
    seen.clear()
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "narrow.csv", DOM), want)
    assert len(seen) == 1 and '"r1"' not in seen[0]
    m = marginals_duckdb(tmp_path / "narrow.parquet", DOM, [(1,), (0, 1)])
    np.testing.assert_array_equal(m[(0, 1)], want.reshape(DOM.sizes).sum(axis=2).ravel())
    refusing = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
        {"name": "age", "kind": "integer", "min": 12, "max": 27}]}).domain()
    pq.write_table(pa.table({"sex": sex, "age": pa.array(age[:-1] + [None])}), tmp_path / "bad.parquet")
    seen.clear()
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "bad.parquet", refusing)
    outside = sum(not 12 <= a <= 27 for a in age[:-1])
    assert f"column 'age': 1 row missing (NULL/empty/NaN), {outside} rows outside" in info.value.for_holder()
    assert len(seen) == 1 and '"age" AS "r1"' in seen[0]


def test_raw_grouped_integer_columns_under_every_outside_rule(tmp_path, monkeypatch):
    """Random integer columns for a categorical attribute of integer values (catch-all), an
    integer range (clamp, catch-all) and numeric bins (clamp): grouped by their raw values
    (the plan keeps the perfect hash) and mapped on the grouped table, every histogram equals
    the reference's."""
    schema = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "ci", "kind": "categorical", "values": [0, 1, 2, 5], "outside": "catch_all"},
        {"name": "ic", "kind": "integer", "min": -3, "max": 9, "outside": "clamp"},
        {"name": "io", "kind": "integer", "min": 0, "max": 4, "outside": "catch_all"},
        {"name": "nb", "kind": "numeric", "edges": [0, 2, 4, 6], "closed": "right", "outside": "clamp"}]})
    dom = schema.domain()
    rng = np.random.default_rng(21)
    seen = _scans(monkeypatch)
    for trial in range(8):
        n = int(rng.integers(1, 300))
        cols = {"ci": [int(x) for x in rng.choice([0, 1, 2, 5, 3, 4], n)],
                "ic": [int(x) for x in rng.integers(-4, 11, n)],
                "io": [int(x) for x in rng.integers(0, 6, n)],
                "nb": [int(x) for x in rng.integers(-1, 8, n)]}
        path = tmp_path / f"t{trial}.parquet"
        pq.write_table(pa.table({k: pa.array(v, pa.int64()) for k, v in cols.items()}), path)
        seen.clear()
        want = reference(dom, cols, dict.fromkeys(cols, "integer"))
        np.testing.assert_array_equal(histogram_duckdb(path, dom), want)
        assert len(seen) == 1 and all(f'AS "r{j}"' in seen[0] for j in range(4)), seen


def test_integer_keys_are_packed_into_one_key_and_unpacked_exactly(tmp_path, monkeypatch):
    """The quick scan packs the keys that are integers ``% size`` (two booleans, bins, an
    integer range read from a float column) into one mixed-radix key ``vk`` when that needs
    fewer perfect-hash bits (sizes 2, 2, 3, 5: 5 bits instead of 2 + 2 + 2 + 3 = 9), keeps the
    text's ENUM key apart, and unpacks it on the grouped table: the reference's histogram and
    marginals, on random data with every bin edge; a NULL or refused value in a packed
    column makes the key NULL and the full mapping counts the refusal per column, in the
    second scan."""
    schema = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "t", "kind": "categorical", "values": ["a", "b", "c"]},
        {"name": "b1", "kind": "categorical", "values": [False, True]},
        {"name": "b2", "kind": "categorical", "values": [True, False]},
        {"name": "nb", "kind": "numeric", "edges": [0, 10, 20, 1000], "closed": "left", "outside": "clamp"},
        {"name": "ir", "kind": "integer", "min": 1, "max": 5}]})
    dom = schema.domain()
    rng = np.random.default_rng(22)
    n = 2500
    cols = {"t": [["a", "b", "c"][i] for i in rng.integers(0, 3, n)],
            "b1": [bool(x) for x in rng.integers(0, 2, n)], "b2": [bool(x) for x in rng.integers(0, 2, n)],
            "nb": [float(x) for x in rng.choice([-1.0, 0.0, 9.999, 10.0, 19.5, 20.0, 999.9, 1000.0, 5e6], n)],
            "ir": [float(x) for x in rng.integers(1, 6, n)]}
    types = {"t": "text", "b1": "boolean", "b2": "boolean", "nb": "float", "ir": "float"}
    seen = _scans(monkeypatch)
    pq.write_table(pa.table(cols), tmp_path / "p.parquet")
    want = reference(dom, cols, types)
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "p.parquet", dom), want)
    assert len(seen) == 1 and ' AS "vk"' in seen[0] and ' AS "v0"' in seen[0]
    assert not any(f' AS "v{j}"' in seen[0] for j in range(1, 5)), seen[0]
    m = marginals_duckdb(tmp_path / "p.parquet", dom, [(1, 3), (0, 4)])
    np.testing.assert_array_equal(m[(1, 3)], want.reshape(dom.sizes).sum(axis=(0, 2, 4)).ravel())
    np.testing.assert_array_equal(m[(0, 4)], want.reshape(dom.sizes).sum(axis=(1, 2, 3)).ravel())
    bad = dict(cols, b2=pa.array(cols["b2"][:-1] + [None]), ir=cols["ir"][:-2] + [7.0, 2.5])
    pq.write_table(pa.table(bad), tmp_path / "bad.parquet")
    seen.clear()
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "bad.parquet", dom)
    assert "column 'b2': 1 row missing (NULL/empty/NaN)" in info.value.for_holder(), info.value
    assert "column 'ir':" in str(info.value) and len(seen) == 2, (info.value, seen)


def test_table_input_errors(tmp_path):
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT 'Male' AS sex, 18 AS age, 1.0 AS pay")
    con.close()
    with pytest.raises(DataError, match="has no table or view 'nope'"):
        histogram_duckdb(f"{db}::nope", DOM)
    with pytest.raises(DataError, match="does not exist"):
        histogram_duckdb(f"{tmp_path / 'missing.duckdb'}::t", DOM)
    with pytest.raises(DataError, match="TABLE or SCHEMA.TABLE"):
        histogram_duckdb(f"{db}::a.b.c", DOM)
    with pytest.raises(DataError, match="--engine duckdb"):
        load_histogram(f"{db}::t", DOM, engine="spark")
    with pytest.raises(DataError, match="lacks column"):
        histogram_duckdb(f"{db}::t", Domain(["x"], [2]))


def test_values_outside_the_schema_are_counted_per_column_never_shown(tmp_path):
    rows = [["Male", 18, 1.0], [f"S{SECRET}", 18, 1.0], [None, "x", 2.0], ["Female", f"{SECRET}.5", 3.0],
            ["Male", 17, 4.0], ["Female", "", 5.0]]
    path = write_csv(tmp_path / "bad.csv", ["sex", "age", "pay"], rows)
    with pytest.raises(DataError) as info:
        histogram_duckdb(path, DOM)
    msg = info.value.for_holder()  # the counted rendering (factorize data check)
    assert str(SECRET) not in msg and str(SECRET) not in str(info.value)
    assert "column 'sex': 1 row missing (NULL/empty/NaN), 1 row not among the schema's 2 values" in msg
    assert "column 'age': 1 row missing (NULL/empty/NaN), 2 rows not an integer" in msg
    assert "'pay'" not in msg  # catch-all: every value has a code
    assert "2 column(s) of 6 rows" in msg and '"outside": "catch_all"' in msg
    # the same through `factorize run`: exit 2, nothing written, no value shown
    plan = tmp_path / "p.plan"
    save_plan(_small_plan(DOM), plan)
    out = tmp_path / "a.csv"
    rc = main(["run", str(plan), "--data", str(path), "--out", str(out)])
    assert rc == 2 and not out.exists()


def test_numeric_out_of_range_refused_and_column_types(tmp_path):
    dom = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "x", "kind": "numeric", "edges": [0, 1, 2], "closed": "right"},
        {"name": "s", "kind": "categorical", "values": ["a", "b"]}]}).domain()
    pq.write_table(pa.table({"x": [0.0, 0.5, 2.0, float(SECRET)], "s": ["a", "b", "a", "b"]}), tmp_path / "x.parquet")
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "x.parquet", dom)
    assert "column 'x': 2 rows outside the schema's bins (0, 2]" in info.value.for_holder()
    assert str(SECRET) not in str(info.value)
    pq.write_table(pa.table({"x": [0.5], "s": [1.5]}), tmp_path / "t.parquet")
    with pytest.raises(DataError, match="column 's' has type DOUBLE: it holds numbers but the schema lists text"):
        histogram_duckdb(tmp_path / "t.parquet", dom)
    pq.write_table(pa.table({"x": pa.array([0], pa.date32()), "s": ["a"]}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match="column 'x' has type DATE, which the domain schema cannot map"):
        histogram_duckdb(tmp_path / "d.parquet", dom)


# -- blank lines, string-typed Parquet -----------------------------------------------------------


@pytest.mark.parametrize("text,line", [("a,b\n0,1\n\n1,2\n", 3), ("a,b\n0,1\n1,2\n\n", 4),
                                       ("a,b\r\n0,1\r\n\r\n1,2\r\n", 3)])
def test_blank_lines_in_csv_are_refused(tmp_path, text, line):
    path = tmp_path / "b.csv"
    path.write_bytes(text.encode())
    with pytest.raises(DataError, match="has a blank line") as info:
        histogram_duckdb(path, Domain(["a", "b"], [2, 3]))
    assert f"line {line} is blank" in info.value.for_holder() and f"line {line}" not in str(info.value)
    raw = tmp_path / "raw.csv"
    raw.write_text("sex,age,pay\nMale,18,1\n\nFemale,19,2\n")
    with pytest.raises(DataError, match="has a blank line") as info:
        histogram_duckdb(raw, DOM)
    assert "line 3 is blank" in info.value.for_holder()


def test_a_quoted_field_may_hold_an_empty_line(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('a,b,note\n0,1,"first\n\nsecond"\n1,2,x\n')
    h = histogram_duckdb(path, Domain(["a", "b"], [2, 3]), allow_extra_columns=True)
    assert h[1] == 1 and h[5] == 1 and h.sum() == 2


def test_string_typed_parquet(tmp_path):
    plain = Domain(["sex", "age"], [2, 4])
    # integer codes stored as strings in a typed file: a clear error naming both fixes
    pq.write_table(pa.table({"sex": ["0", "1", "1"], "age": ["3", "0", " 2 "]}), tmp_path / "codes.parquet")
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "codes.parquet", plain)
    msg = str(info.value)
    assert "['sex', 'age']" in msg and "integer type" in msg and "--domain" in msg
    # raw labels against a domain of sizes only: the same error, no value quoted
    pq.write_table(pa.table({"sex": ["Male", "Female"], "age": ["17", "18"]}), tmp_path / "raw.parquet")
    with pytest.raises(DataError) as info:
        histogram_duckdb(tmp_path / "raw.parquet", plain)
    msg = str(info.value).replace(str(tmp_path), "<tmp>")  # the temporary path may hold "17"
    assert "hold text" in msg and "domain schema" in msg and "--domain" in msg
    assert "Male" not in msg and "17" not in msg
    # with a schema listing the string values they are decoded (dictionary-encoded too)
    schema = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": [
        {"name": "sex", "kind": "categorical", "values": ["Female", "Male"]},
        {"name": "age", "kind": "integer", "min": 17, "max": 20}]}).domain()
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "raw.parquet", schema), np.bincount([4, 1], minlength=8))
    pq.write_table(pa.table({"sex": pa.array(["Male", "Female"]).dictionary_encode(), "age": [17, 18]}),
                   tmp_path / "dict.parquet")
    np.testing.assert_array_equal(histogram_duckdb(tmp_path / "dict.parquet", schema), np.bincount([4, 1], minlength=8))
    # integer codes (as strings) against a schema of labels: refused, not silently mis-coded
    with pytest.raises(DataError, match="column 'sex': rows not among the schema's 2 values") as info:
        histogram_duckdb(tmp_path / "codes.parquet", schema)
    assert "column 'sex': 3 rows not among the schema's 2 values" in info.value.for_holder()


# -- plans carry the schema ----------------------------------------------------------------------


def _small_plan(domain: Domain):
    from factorize.kinds.factorization.build import build_plan

    spec = "marginals:" + "x".join(map(str, domain.sizes)) + ":1"
    return build_plan(spec, "epsilon=1,delta=1e-6", domain=domain, certificate=identity_certificate(spec))


def test_plans_carry_the_schema_and_old_plans_load(tmp_path):
    from pathlib import Path

    plan = _small_plan(DOM)
    path = tmp_path / "p.plan"
    save_plan(plan, path)
    again = load_plan(path)
    assert again.domain == DOM and again.domain.schema == SCHEMA
    assert again.manifest()["domain"]["schema"] == SCHEMA.to_dict()
    # a plan of sizes only has no schema field, as before
    plain = _small_plan(Domain(["a", "b"], [2, 3]))
    save_plan(plain, tmp_path / "q.plan")
    assert "schema" not in load_plan(tmp_path / "q.plan").manifest()["domain"]
    old = Path(__file__).parent / "data" / "pre_spread_prefix16_laplace.plan"
    from factorize import kinds

    assert kinds.load_plan(old).domain.schema is None


def test_a_forged_schema_in_a_plan_is_refused(tmp_path):
    from factorize.kinds.factorization.codec import SCHEMA_VERSION
    from factorize.plan.files import FORMAT, PlanFormatError, read_plan_container, write_plan_container

    path = tmp_path / "p.plan"
    save_plan(_small_plan(DOM), path)
    m, arrays = read_plan_container(path, FORMAT, SCHEMA_VERSION)
    m = {k: v for k, v in m.items() if k not in ("arrays", "content_sha256", "format", "schema_version")}
    m["domain"]["schema"]["attributes"][1]["max"] = 21  # 5 codes, the domain says 4
    write_plan_container(tmp_path / "f.plan", FORMAT, SCHEMA_VERSION + 1, m, arrays)
    with pytest.raises(PlanFormatError, match="differ from the domain's"):
        load_plan(tmp_path / "f.plan")
    m["domain"]["schema"]["version"] = 9
    write_plan_container(tmp_path / "g.plan", FORMAT, SCHEMA_VERSION + 1, m, arrays)
    with pytest.raises(PlanFormatError, match="version 9 is not supported"):
        load_plan(tmp_path / "g.plan")


# -- raw-string Adult == coded Adult -------------------------------------------------------------


def _numbers(lines: list[str]) -> dict[str, list[str]]:
    """The answers file's query numbers and released numbers, column by column, as written
    (the cell labels differ: codes for a domain of sizes, the schema's labels for raw data)."""
    import csv

    rows = list(csv.reader(x for x in lines if not x.startswith("#")))
    header, body = rows[0], rows[1:]
    keep = [c for c in ("query", "table", "estimate", "std_error", "ci_low", "ci_high") if c in header]
    assert {"query", "estimate", "std_error"} <= set(keep), header
    return {c: [r[header.index(c)] for r in body] for c in keep}


@pytest.fixture(scope="module")
def adult_files(tmp_path_factory):
    if not HAVE_ADULT:
        pytest.skip(f"Adult data not found in {raw_adult.ADULT_DIR}")
    d = tmp_path_factory.mktemp("adult")
    codes, names = raw_adult.read_coded()
    return {"dir": d, "codes": codes, "names": names, "schema": raw_adult.write_schema(d / "schema.json"),
            "csv": raw_adult.write_raw(d / "raw.csv", codes, names),
            "parquet": raw_adult.write_raw(d / "raw.parquet", codes, names)}


@needs_adult
def test_raw_adult_marginals_equal_the_coded_file(adult_files):
    coded = Domain.from_json(raw_adult.ADULT_DOMAIN)
    schema = read_domain(adult_files["schema"])
    assert schema.sizes == coded.sizes and schema.schema is not None
    subsets = [(i, j) for i in range(14) for j in range(i + 1, 14)]
    want = marginals_duckdb(raw_adult.ADULT_CSV, coded, subsets)
    for key in ("csv", "parquet"):
        got = marginals_duckdb(adult_files[key], schema, subsets)
        assert got.n_records == want.n_records == 48842
        for s in subsets:
            np.testing.assert_array_equal(got[s], want[s], err_msg=f"{key} {s}")


@needs_adult
def test_raw_adult_releases_equal_coded_releases_through_the_cli(adult_files, capsys):
    d = adult_files["dir"]
    spec = "marginals:85x9x100x16x7x15x6x5x2x100x100x99x42x2:2"
    for name, domain in (("raw", adult_files["schema"]), ("coded", raw_adult.ADULT_DOMAIN)):
        assert main(["plan", "--workload", spec, "--privacy", "rho=0.5", "--domain", str(domain),
                     "--out", str(d / f"{name}.plan")]) == 0
    runs = {"raw": adult_files["csv"], "coded": raw_adult.ADULT_CSV}
    answers = {}
    for name, data in runs.items():
        out = d / f"answers_{name}.csv"
        assert main(["run", str(d / f"{name}.plan"), "--data", str(data), "--out", str(out), "--seed", "11"]) == 0
        lines = out.read_text().splitlines()
        assert "# test_mode: true" in lines
        answers[name] = _numbers(lines)
    capsys.readouterr()
    assert len(answers["raw"]["estimate"]) == 148137
    assert answers["raw"] == answers["coded"]  # the same released numbers, query by query
    from factorize import kinds

    assert kinds.load_plan(d / "raw.plan").domain.schema == DomainSchema.from_json(adult_files["schema"])


# -- the draft convenience ----------------------------------------------------------------------


def test_draft_says_loudly_that_it_is_not_public(tmp_path):
    from factorize.engines.schema_draft import draft_schema_command

    path = write_csv(tmp_path / "people.csv", ["sex", "age", "pay"],
                     [["Male", 18, 1.5], ["Female", 19, 250.0], ["Male", 30, 3.25]])
    lines = draft_schema_command(str(path), str(tmp_path / "draft.json"))
    text = "\n".join(lines)
    assert "NOT PUBLIC" in text and "people.csv" in text and "drafted_from_data" in text
    doc = json.loads((tmp_path / "draft.json").read_text())
    assert "NOT PUBLIC" in doc["drafted_from_data"]["warning"] and doc["drafted_from_data"]["file"] == "people.csv"
    assert "NOT PUBLIC" in doc["description"]
    with pytest.raises(ValueError, match="drafted from the data file 'people.csv'"):
        read_domain(tmp_path / "draft.json")
    del doc["drafted_from_data"]  # a person reviewed it
    (tmp_path / "reviewed.json").write_text(json.dumps(doc))
    dom = read_domain(tmp_path / "reviewed.json")
    assert dom.attributes == ("sex", "age", "pay") and dom.schema["sex"].values == ("Female", "Male")
    assert histogram_duckdb(path, dom).sum() == 3
    # the command line (factorize schema draft|check)
    from factorize.cli import main

    assert main(["schema", "check", str(tmp_path / "reviewed.json")]) == 0
    assert main(["schema", "draft", str(path), "--out", str(tmp_path / "d2.json"), "--columns", "sex"]) == 0
    assert "drafted_from_data" in (tmp_path / "d2.json").read_text()
