"""``factorize.engines``: DuckDB (CSV / Parquet) and NumPy histograms, validation, privacy of messages.

Every bad-input test injects a sentinel value and checks that the DataError message does not
contain it: records are private, messages count rows and name columns only.
"""

from __future__ import annotations

import collections
import csv
import datetime
import decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from factorize.engines import (
    MAX_HISTOGRAM_CELLS,
    DataError,
    histogram_duckdb,
    histogram_from_npy,
    histogram_numpy,
)
from tests.engine_files import write_csv, write_parquet
from tests.hostile_files import write_object_npy
from workloads import Domain

SENTINEL = 987654

DOM = Domain(["a", "b", "c"], [3, 4, 5])


# -- helpers ----------------------------------------------------------------------------------


def raises_private(fn, *args, sentinel: object = SENTINEL, match: str | None = None, **kwargs) -> str:
    """Call ``fn``; assert it raises DataError whose message does not contain ``sentinel``."""
    with pytest.raises(DataError) as info:
        fn(*args, **kwargs)
    # the counted rendering (what `factorize data check` prints); the public one (str) has
    # no counts: tests/test_security_refusals.py
    msg = info.value.for_holder()
    assert str(sentinel) not in msg and str(sentinel) not in str(info.value), msg
    if match is not None:
        assert match in msg, msg
    return msg


def reference(records: np.ndarray, domain: Domain) -> np.ndarray:
    cells = np.ravel_multi_index(tuple(records.T), domain.sizes)
    return np.bincount(cells, minlength=domain.size)


def random_records(rng: np.random.Generator, domain: Domain, n: int) -> np.ndarray:
    return np.stack([rng.integers(0, s, n) for s in domain.sizes], axis=1)


def good_rows() -> list[list[object]]:
    return [[0, 1, 2], [2, 3, 4], [1, 0, 0], [0, 1, 2]]


# -- agreement on random data -----------------------------------------------------------------


@pytest.mark.parametrize(
    "sizes,n,seed",
    [((3, 4, 5), 1000, 0), ((7,), 50, 1), ((2, 1, 9, 3), 3000, 2), ((50, 40), 20000, 3), ((1,), 5, 4)],
)
def test_duckdb_matches_numpy_on_random_data(tmp_path, sizes, n, seed):
    rng = np.random.default_rng(seed)
    domain = Domain([f"x{j}" for j in range(len(sizes))], sizes)
    recs = random_records(rng, domain, n)
    expected = reference(recs, domain)
    h_np = histogram_numpy(recs, domain)
    assert h_np.dtype == np.int64 and h_np.shape == (domain.size,)
    np.testing.assert_array_equal(h_np, expected)

    cols = {a: recs[:, j] for j, a in enumerate(domain.attributes)}
    pq_path = write_parquet(tmp_path / "r.parquet", cols)
    csv_path = tmp_path / "r.csv"
    pacsv.write_csv(pa.table(cols), csv_path)  # quoted header, plain integer fields
    for path in (pq_path, csv_path, str(csv_path)):
        h = histogram_duckdb(path, domain)
        assert h.dtype == np.int64 and h.shape == (domain.size,)
        np.testing.assert_array_equal(h, expected)


def test_cell_order_is_domain_index_order(tmp_path):
    # record (a=1, b=2, c=3) lies in cell (1*4 + 2)*5 + 3 = 33
    path = write_csv(tmp_path / "one.csv", ["a", "b", "c"], [[1, 2, 3]])
    h = histogram_duckdb(path, DOM)
    assert h.sum() == 1 and h[33] == 1
    assert int(DOM.index(np.array([[1, 2, 3]]))[0]) == 33


def test_small_int_parquet_types_threads_and_pq_suffix(tmp_path):
    rng = np.random.default_rng(5)
    recs = random_records(rng, DOM, 500)
    cols = {
        "a": pa.array(recs[:, 0].astype(np.int8)),
        "b": pa.array(recs[:, 1].astype(np.uint16)),
        "c": pa.array(recs[:, 2].astype(np.int32)),
    }
    path = write_parquet(tmp_path / "small.pq", cols)
    np.testing.assert_array_equal(histogram_duckdb(path, DOM, threads=1), reference(recs, DOM))


def test_column_order_in_file_differs_from_domain(tmp_path):
    rng = np.random.default_rng(6)
    recs = random_records(rng, DOM, 400)
    expected = reference(recs, DOM)
    order = ["c", "a", "b"]
    rows = [[int(r[DOM.attributes.index(k)]) for k in order] for r in recs]
    csv_path = write_csv(tmp_path / "perm.csv", order, rows)
    np.testing.assert_array_equal(histogram_duckdb(csv_path, DOM), expected)
    pq_path = write_parquet(tmp_path / "perm.parquet", {k: recs[:, DOM.attributes.index(k)] for k in order})
    np.testing.assert_array_equal(histogram_duckdb(pq_path, DOM), expected)


def test_columns_mapping_and_extra_columns(tmp_path):
    rng = np.random.default_rng(7)
    recs = random_records(rng, DOM, 300)
    expected = reference(recs, DOM)
    extra = np.full(len(recs), SENTINEL)
    data = {"C": recs[:, 2], "junk": extra, "A": recs[:, 0], "B": recs[:, 1]}
    path = write_parquet(tmp_path / "renamed.parquet", data)
    np.testing.assert_array_equal(histogram_duckdb(path, DOM, columns=["A", "B", "C"]), expected)
    # extra columns with the domain's own names: strict by default, ignored on request
    data2 = {"a": recs[:, 0], "b": recs[:, 1], "c": recs[:, 2], "junk": extra}
    path2 = write_parquet(tmp_path / "extra.parquet", data2)
    msg = raises_private(histogram_duckdb, path2, DOM, match="'junk'")
    assert "--ignore-extra-columns" in msg and "allow_extra_columns" not in msg
    np.testing.assert_array_equal(histogram_duckdb(path2, DOM, allow_extra_columns=True), expected)
    csv2 = write_csv(tmp_path / "extra.csv", ["junk", "a", "b", "c"], [[SENTINEL, *r] for r in recs.tolist()])
    raises_private(histogram_duckdb, csv2, DOM, match="'junk'")
    np.testing.assert_array_equal(histogram_duckdb(csv2, DOM, allow_extra_columns=True), expected)
    # bad columns arguments
    raises_private(histogram_duckdb, path, DOM, columns=["A", "B"], match="2 names")
    raises_private(histogram_duckdb, path, DOM, columns=["A", "A", "B"], match="repeats")
    raises_private(histogram_duckdb, path, DOM, columns="ABC", match="single string")


def test_csv_integer_spellings(tmp_path):
    # accepted: spaces around, explicit sign, integral decimals "3.0" / "3."
    path = tmp_path / "spell.csv"
    path.write_text('a,b,c\n 1 ,+2,3.0\n"0",0,4.\n-0,3,0\n', encoding="utf-8")
    h = histogram_duckdb(path, DOM)
    expected = reference(np.array([[1, 2, 3], [0, 0, 4], [0, 3, 0]]), DOM)
    np.testing.assert_array_equal(h, expected)
    # CRLF line endings and a UTF-8 byte order mark
    path2 = tmp_path / "crlf.csv"
    path2.write_bytes(b"\xef\xbb\xbfa,b,c\r\n1,2,3\r\n0,0,4\r\n")
    np.testing.assert_array_equal(histogram_duckdb(path2, DOM), reference(np.array([[1, 2, 3], [0, 0, 4]]), DOM))


@pytest.mark.parametrize("spelling", ["1.5", "0x1", "1e0", "1_0", "abc", "NaN", "inf", "1 2", "٣"])
def test_csv_non_integers_are_refused_not_coerced(tmp_path, spelling):
    # DuckDB's own casts would turn "1.5" into 2, "0x1" into 1 and "1_0" into 10.
    path = tmp_path / "bad.csv"
    path.write_text(f'a,b,c\n0,0,0\n1,"{spelling}",1\n', encoding="utf-8")
    msg = raises_private(histogram_duckdb, path, DOM, sentinel=spelling, match="column 'b': 1 row not an integer")
    assert "'a'" not in msg and "'c'" not in msg


def test_parquet_value_types(tmp_path):
    recs = np.array([[0, 1, 2], [2, 3, 4], [1, 0, 0]])
    expected = reference(recs, DOM)
    cases = {
        "float": pa.array(recs[:, 2].astype(np.float64)),
        "float32": pa.array(recs[:, 2].astype(np.float32)),
        "decimal": pa.array([decimal.Decimal(f"{v}.00") for v in recs[:, 2]], pa.decimal128(6, 2)),
    }
    for name, col in cases.items():
        path = write_parquet(tmp_path / f"{name}.parquet", {"a": recs[:, 0], "b": recs[:, 1], "c": col})
        np.testing.assert_array_equal(histogram_duckdb(path, DOM), expected, err_msg=name)
    # codes stored as text in a typed file: a clear error naming the fixes
    for name, col in (("string", pa.array([str(v) for v in recs[:, 2]])),
                      ("dictionary", pa.array([str(v) for v in recs[:, 2]]).dictionary_encode())):
        path = write_parquet(tmp_path / f"{name}.parquet", {"a": recs[:, 0], "b": recs[:, 1], "c": col})
        with pytest.raises(DataError, match=r"\['c'\] .* hold text.*integer type.*--domain"):
            histogram_duckdb(path, DOM)
    dom2 = Domain(["flag", "c"], [2, 5])
    path = write_parquet(tmp_path / "bool.parquet", {"flag": [True, False, True], "c": [1, 2, 1]})
    np.testing.assert_array_equal(histogram_duckdb(path, dom2), reference(np.array([[1, 1], [0, 2], [1, 1]]), dom2))


# -- bad values -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize(
    "bad,kind",
    [
        (SENTINEL, "outside 0..3"),
        (-SENTINEL, "outside 0..3"),
        (4, "outside 0..3"),
        (-1, "outside 0..3"),
        (SENTINEL + 0.5, "not an integer"),
        (1.5, "not an integer"),
        (f"abc{SENTINEL}", "not an integer"),
        (None, "missing"),
        (float("nan"), None),
        (float("inf"), "not an integer"),
        (10**25 + SENTINEL, "outside 0..3"),
    ],
)
def test_bad_values_are_counted_per_column_without_values(tmp_path, fmt, bad, kind):
    rows = good_rows() + [[1, bad, 1], [0, 0, 0]]
    if fmt == "csv":
        path = write_csv(tmp_path / "bad.csv", ["a", "b", "c"], rows)
        if isinstance(bad, float) and np.isnan(bad):
            kind = "not an integer"  # the text "nan" is not an integer
        if bad is None:
            kind = "missing"
    else:
        if bad is None or isinstance(bad, float):
            colb = pa.array([r[1] for r in rows], pa.float64())
        elif isinstance(bad, str):
            colb = pa.array([str(r[1]) for r in rows])
        elif abs(bad) > 2**62:
            colb = pa.array([decimal.Decimal(r[1]) for r in rows], pa.decimal128(38, 0))
        else:
            colb = pa.array([r[1] for r in rows], pa.int64())
        if isinstance(bad, float) and np.isnan(bad):
            kind = "missing"  # a float NaN is a missing value
        path = write_parquet(tmp_path / "bad.parquet", {"a": [r[0] for r in rows], "b": colb, "c": [r[2] for r in rows]})
    if fmt == "parquet" and isinstance(bad, str):  # a text column of a typed file: refused as such
        msg = raises_private(histogram_duckdb, path, DOM, sentinel=SENTINEL, match="['b'] of Parquet file")
        assert "hold text" in msg
        assert bad not in msg
        return
    msg = raises_private(histogram_duckdb, path, DOM, sentinel=SENTINEL, match=f"column 'b': 1 row {kind}")
    assert "of 6 rows" in msg and "'a'" not in msg and "'c'" not in msg
    if isinstance(bad, str):
        assert bad not in msg


def test_several_problems_are_all_counted(tmp_path):
    rows = good_rows() + [[None, 1, 1], ["", 1, 1], [SENTINEL, 7, "x"], [1.5, 1, 9], [0, 0, 0]]
    path = write_csv(tmp_path / "many.csv", ["a", "b", "c"], rows)
    msg = raises_private(histogram_duckdb, path, DOM)
    assert "column 'a': 2 rows missing (NULL/empty/NaN), 1 row not an integer, 1 row outside 0..2" in msg
    assert "column 'b': 1 row outside 0..3" in msg
    assert "column 'c': 1 row not an integer, 1 row outside 0..4" in msg
    assert "3 column(s) of 9 rows" in msg


def test_huge_unsigned_values_are_out_of_range(tmp_path):
    big = 2**64 - SENTINEL
    path = write_parquet(
        tmp_path / "u64.parquet",
        {"a": pa.array([0, 1], pa.uint64()), "b": pa.array([1, big], pa.uint64()), "c": pa.array([0, 0], pa.uint8())},
    )
    msg = raises_private(histogram_duckdb, path, DOM, sentinel=big, match="column 'b': 1 row outside 0..3")
    assert str(SENTINEL) not in msg


def test_unsupported_column_type(tmp_path):
    path = write_parquet(
        tmp_path / "date.parquet", {"a": [0], "b": [datetime.date(2000 + SENTINEL % 1000, 1, 1)], "c": [0]}
    )
    raises_private(histogram_duckdb, path, DOM, match="column 'b' has type DATE")


# -- bad files --------------------------------------------------------------------------------


def test_missing_columns(tmp_path):
    path = write_csv(tmp_path / "m.csv", ["a", "c", "zz"], [[0, SENTINEL, 1]])
    msg = raises_private(histogram_duckdb, path, DOM, match="lacks column(s) ['b']")
    assert "zz" not in msg  # other header fields are counted, not named, when a column is missing
    pq_path = write_parquet(tmp_path / "m.parquet", {"a": [0], "c": [SENTINEL]})
    raises_private(histogram_duckdb, pq_path, DOM, match="lacks column(s) ['b']")


def test_file_without_header_row_does_not_leak_first_record(tmp_path):
    path = write_csv(tmp_path / "nohdr.csv", ["1", str(SENTINEL), "2"], [[0, 1, 2]])
    msg = raises_private(histogram_duckdb, path, DOM, match="header row")
    assert "lacks column(s) ['a', 'b', 'c']" in msg


def test_repeated_column_name(tmp_path):
    path = write_csv(tmp_path / "dup.csv", ["a", "b", "c", "b"], [[0, 1, 2, SENTINEL]])
    raises_private(histogram_duckdb, path, DOM, match="more than one column named ['b']")


def test_malformed_csv_rows(tmp_path):
    path = tmp_path / "ragged.csv"
    path.write_text(f"a,b,c\n0,1,2\n1,2,3,{SENTINEL}\n", encoding="utf-8")
    raises_private(histogram_duckdb, path, DOM, match="line 3: expected 3 fields, found 4")
    path2 = tmp_path / "short.csv"
    path2.write_text(f"a,b,c\n0,1,2\n{SENTINEL},2\n", encoding="utf-8")
    raises_private(histogram_duckdb, path2, DOM, match="line 3")
    path3 = tmp_path / "quote.csv"
    path3.write_text(f'a,b,c\n0,1,2\n1,"{SENTINEL},3\n', encoding="utf-8")
    raises_private(histogram_duckdb, path3, DOM, match="cannot parse CSV file")


def test_empty_inputs(tmp_path):
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b,c\n", encoding="utf-8")
    raises_private(histogram_duckdb, header_only, DOM, match="no records")
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    raises_private(histogram_duckdb, empty, DOM, match="is empty")
    blank = tmp_path / "b.csv"
    blank.write_text("\na,b,c\n0,0,0\n", encoding="utf-8")
    raises_private(histogram_duckdb, blank, DOM, match="empty line")
    pq_path = write_parquet(
        tmp_path / "e.parquet", {k: pa.array([], pa.int64()) for k in DOM.attributes}
    )
    raises_private(histogram_duckdb, pq_path, DOM, match="no records")


@pytest.mark.parametrize("name", ["d.txt", "d.json", "d.csv.gz", "d", "d.npy"])
def test_wrong_suffix(tmp_path, name):
    path = tmp_path / name
    path.write_text(f"a,b,c\n{SENTINEL},0,0\n", encoding="utf-8")
    raises_private(histogram_duckdb, path, DOM, match="unsupported data file suffix")


def test_missing_file_glob_and_corrupt_parquet(tmp_path):
    raises_private(histogram_duckdb, tmp_path / "nope.csv", DOM, match="does not exist")
    raises_private(histogram_duckdb, tmp_path / "*.csv", DOM, match="glob")
    bad = tmp_path / "corrupt.parquet"
    bad.write_bytes(b"PAR1" + str(SENTINEL).encode() * 10)
    raises_private(histogram_duckdb, bad, DOM, match="cannot read Parquet file")
    text = tmp_path / "text.parquet"
    text.write_text(f"a,b,c\n{SENTINEL},0,0\n", encoding="utf-8")
    raises_private(histogram_duckdb, text, DOM, match="cannot read Parquet file")


def test_domain_too_large_for_a_histogram(tmp_path):
    path = write_csv(tmp_path / "x.csv", ["a", "b"], [[0, 0]])
    big = Domain(["a", "b"], [2**20, 2**21])
    assert big.size > MAX_HISTOGRAM_CELLS
    raises_private(histogram_duckdb, path, big, match="marginals")
    raises_private(histogram_numpy, np.zeros((1, 2), dtype=int), big, match="marginals")
    raises_private(histogram_duckdb, path, {"a": 2, "b": 2}, match="workloads.Domain")


# -- histogram_numpy --------------------------------------------------------------------------


def test_numpy_engine_validation():
    ok = np.array([[0, 1, 2], [2, 3, 4]])
    np.testing.assert_array_equal(histogram_numpy(ok.astype(np.float32), DOM), reference(ok, DOM))
    np.testing.assert_array_equal(histogram_numpy(ok.astype(np.uint8), DOM), reference(ok, DOM))
    dom2 = Domain(["f", "g"], [2, 2])
    np.testing.assert_array_equal(histogram_numpy(np.array([[True, False]]), dom2), [0, 0, 1, 0])
    for bad, kind in [
        (SENTINEL, "1 row outside 0..3"),
        (-SENTINEL, "1 row outside 0..3"),
        (SENTINEL + 0.5, "1 row not an integer"),
        (np.inf, "1 row not an integer"),
        (np.nan, "1 row missing"),
    ]:
        recs = np.array([[0, 1, 2], [1, bad, 1]], dtype=np.float64 if isinstance(bad, float) else np.int64)
        raises_private(histogram_numpy, recs, DOM, match=f"column 'b': {kind}")
    raises_private(histogram_numpy, np.zeros((0, 3), dtype=int), DOM, match="no records")
    raises_private(histogram_numpy, np.zeros((4, 2), dtype=int), DOM, match="shape (4, 2)")
    raises_private(histogram_numpy, np.zeros(3, dtype=int), DOM, match="2-D")
    raises_private(histogram_numpy, np.array([["0", "1", str(SENTINEL)]]), DOM, match="dtype")


# -- histogram_from_npy -----------------------------------------------------------------------


def test_histogram_from_npy_roundtrip(tmp_path):
    h = np.zeros(DOM.size, dtype=np.int64)
    h[[3, 7, 7 + 1]] = [5, 1, 2]
    p = tmp_path / "h.npy"
    np.save(p, h)
    out = histogram_from_npy(p, DOM)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, h)
    np.save(p, h.astype(np.float64))
    np.testing.assert_array_equal(histogram_from_npy(p, DOM.size), h)
    np.save(p, h.astype(np.uint32))
    np.testing.assert_array_equal(histogram_from_npy(str(p), DOM), h)


def _write_object_npy(path: Path) -> None:
    """A .npy whose header declares an object dtype (its payload is never unpickled)."""
    write_object_npy(path, (DOM.size,), payload=str(SENTINEL).encode() * 3)


def test_histogram_from_npy_rejects_bad_files(tmp_path):
    p = tmp_path / "h.npy"
    good = np.zeros(DOM.size, dtype=np.int64)
    good[0] = 1

    def with_entry(dtype: type, value: float) -> np.ndarray:
        h = good.astype(dtype)
        h[5] = value
        return h

    cases: list[tuple[np.ndarray, str]] = [
        (with_entry(np.int64, -SENTINEL), "1 entry is negative"),
        (with_entry(np.float64, np.nan), "not finite"),
        (with_entry(np.float64, np.inf), "not finite"),
        (with_entry(np.float64, SENTINEL + 0.5), "1 entry is not integral"),
        (with_entry(np.float64, 2.0**64), "too large"),
    ]
    cases.append((np.append(good, SENTINEL), f"length {DOM.size + 1}, expected N={DOM.size}"))
    cases.append((good.reshape(6, 10), "1-D"))
    cases.append((np.zeros(DOM.size, dtype=np.int64), "all zeros"))
    cases.append((good.astype(bool), "dtype"))
    cases.append((good.astype(np.complex128), "dtype"))
    for arr, expected in cases:
        np.save(p, arr)
        raises_private(histogram_from_npy, p, DOM, match=expected)
    _write_object_npy(p)
    raises_private(histogram_from_npy, p, DOM, match="never unpickled")
    p.write_bytes(str(SENTINEL).encode() * 10)
    raises_private(histogram_from_npy, p, DOM, match="not a valid .npy")
    npz = tmp_path / "h.npz"
    np.savez(npz, h=good)
    raises_private(histogram_from_npy, npz, DOM, match=".npz")
    raises_private(histogram_from_npy, tmp_path / "missing.npy", DOM, match="does not exist")
    raises_private(histogram_from_npy, p, 0, match="positive int")


# -- real data: Adult -------------------------------------------------------------------------


def test_adult_marginal_matches_python_count(adult):
    csv_path, dom_path = adult
    full = Domain.from_json(dom_path)
    attrs = ["sex", "race", "income>50K"]
    domain = full.project(attrs)
    counts: collections.Counter[tuple[int, ...]] = collections.Counter()
    n = 0
    with open(csv_path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            counts[tuple(int(row[a]) for a in attrs)] += 1
            n += 1
    expected = np.zeros(domain.size, dtype=np.int64)
    for (s, r, i), c in counts.items():
        expected[(s * domain["race"] + r) * domain["income>50K"] + i] = c
    assert n == 48842 and expected.sum() == n

    # strict by default: Adult has 11 other columns
    raises_private(histogram_duckdb, csv_path, domain, match="not domain attributes")
    np.testing.assert_array_equal(histogram_duckdb(csv_path, domain, allow_extra_columns=True), expected)
    np.testing.assert_array_equal(histogram_duckdb(csv_path, domain, columns=attrs), expected)
    # the full 14-attribute CSV passes validation against the full domain's attribute set,
    # but N ~ 1e19 is refused with a pointer to marginals
    raises_private(histogram_duckdb, csv_path, full, match="marginals")
