"""DuckDB and Spark map every raw value the same way: hostile raw values --
Unicode spaces, look-alikes, NFD against NFC, case, signs, exponents, ``-0.0``, subnormals,
non-finite values, huge integers, non-ASCII digits -- mapped by the pure-Python reference of
``docs/schema.md`` (:meth:`AttributeSchema.encode`), by the schema's SQL row by row (DuckDB:
the full mapping, the refused-as-NULL mapping and the quick keys), and end to end by the
DuckDB engine (CSV and Parquet, text and typed columns) and, behind the ``spark`` mark, by
the Spark engine on the same files. Every attribute kind is covered, with the refuse, clamp
and catch-all rules.

End to end, each file is measured twice, with one ``row`` attribute numbering the records so
that a marginal table ``(row, attribute)`` gives every record's code:

* as written: the engine refuses it, and its per-column counts of missing, malformed and
  outside values equal the reference's;
* with every value the reference refuses replaced by one it accepts: the engine accepts it,
  and every record has the reference's code.

Together: the engine accepts exactly the values the reference accepts (the second run), with
the same codes, and refuses the others for the same reasons (the counts of the first)."""

from __future__ import annotations

import decimal
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from factorize.engines import DataError, marginals_duckdb
from factorize.engines._common import format_schema_problems
from factorize.engines.schema_sql import code_sql, quick_code_sql, quick_key_code
from tests.engine_files import spark  # noqa: F401 (a fixture)
from tests.test_schema_sql import _duckdb_codes
from workloads.schema import MISSING, OUTSIDE, UNPARSED, AttributeSchema, DomainSchema

D = decimal.Decimal

ATTRIBUTES = [
    {"name": "cat", "kind": "categorical",
     "values": ["Female", "Male", "Café", "New\u00a0York", "18", "0.2", "true"]},
    {"name": "cat_other", "kind": "categorical", "values": ["Female", "Male", "Café", "18"],
     "outside": "catch_all"},
    {"name": "flag", "kind": "categorical", "values": [False, True]},
    {"name": "flag_other", "kind": "categorical", "values": [True], "outside": "catch_all"},
    {"name": "cat_int", "kind": "categorical", "values": [18, 0, -18, 2**53]},
    {"name": "cat_int_other", "kind": "categorical", "values": [0, 1, 18], "outside": "catch_all"},
    {"name": "age", "kind": "integer", "min": 17, "max": 90, "outside": "clamp"},
    {"name": "age_refuse", "kind": "integer", "min": -20, "max": 20},
    {"name": "age_other", "kind": "integer", "min": 0, "max": 20, "outside": "catch_all"},
    {"name": "score", "kind": "numeric", "edges": [0, 0.2, 0.5, 1], "closed": "left", "outside": "catch_all"},
    {"name": "score_refuse", "kind": "numeric", "edges": [-1, 0, 0.2, 1e300], "closed": "right"},
    # integer edges, equally spaced inside: binned by arithmetic on typed columns (quick_code_sql)
    {"name": "step_clamp", "kind": "numeric", "edges": [0, 10, 20, 30, 40], "closed": "right",
     "outside": "clamp"},
    {"name": "step_other", "kind": "numeric", "edges": [-20, 0, 5, 10, 15, 100], "closed": "left",
     "outside": "catch_all"},
]
SCHEMA = DomainSchema.from_dict({"format": "factorize-domain-schema", "version": 1, "attributes": ATTRIBUTES})

#: Raw text values, each read by every attribute (as CSV text and as a Parquet string column).
TEXT: list[str | None] = [
    # the schema's own spellings, and U+0020 spaces around them (the only character trimmed)
    "Female", "Male", "18", "0.2", "true", "Café", "New\u00a0York",
    " Female ", "  18", "0.2 ", " TRUE ", "   Male",
    # other spaces are part of the value: no-break, thin, ideographic, tab, line breaks,
    # zero-width, byte-order mark, next line, line separator
    "Female\u00a0", "\u00a0Female", "18\u00a0", "\u00a018", "0.2\u00a0", "true\u00a0", "Female\u2009",
    "18\u2009", "Female\u3000", "\u300018", "0.2\u3000", "Female\t", "\t18", "18\n", "\r18",
    "\u200bFemale", "\ufeff18", "18\u0085", "Male\u2028", "18\u202f", "New York", "New\u2007York",
    # look-alikes and case
    "F\u0435male", "\uff26emale", "female", "FEMALE", "MaIe", "Ma1e", "\u0406\u0438",
    # NFD against the listed NFC "Café" (and the other way round)
    "Cafe\u0301", "CAFÉ", "Cafe",
    # booleans: any ASCII case, nothing else folded
    "TRUE", "True", "tRuE", "FALSE", "false", "\uff34\uff32\uff35\uff25", "tru\u0435", "FAL\u017fE",
    "t", "1", "0", "yes",
    # non-ASCII digits: Arabic-Indic, extended Arabic-Indic, fullwidth, Devanagari, superscript
    "\u0661\u0668", "\u06f1\u06f8", "\uff11\uff18", "\u0967\u096e", "1\u2078", "\u00b2",
    "0.\u0662", "\uff10.\uff12",
    # signs and zeros
    "+18", "-18", "018", "0018", "18.0", "18.000", "18.", "18.5", "+0", "-0", "-0.0", "+0.0", "00",
    "--18", "+-18", "- 18", "18-", "-", "+",
    # exponents and decimals
    "1.8e1", "1.8E+1", "180e-1", "2e-1", ".2", "0.20", "+.2", "2E-1", "0.2e0", "1e", "e1", ".", "-.",
    "0x12", "1_8", "1,8", "18f", "18d", "18L", "0.5", "1.5", "1.0000000000000002",
    "0.19999999999999999999", "0.2000000000000000111", "0.20000000000000004", "0.19999999999999998",
    # non-finite
    "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-1e-400",
    # subnormals and the smallest normal
    "4.9e-324", "2.5e-324", "2.4e-324", "-5e-324", "2.2250738585072014e-308",
    # integers beyond int64 (and beyond Python's 4300-digit int() limit)
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "9" * 30, "-" + "9" * 30, "0" * 30 + "18", "-" + "0" * 30, "1" + "0" * 5000,
    "-" + "9" * 5000, "9007199254740992", "9007199254740993", "1e300", "1.0e300",
    # missing and blank
    None, "", " ", "    ", "\u00a0", "\t",
]
#: Text that only a Parquet file carries (a CSV reader may treat it as the end of a record).
TEXT_PARQUET_ONLY: list[str | None] = ["18\x00", "\x00", "Female\x00"]

FLOATS: list[float | None] = [
    0.0, -0.0, 18.0, -18.0, 17.5, 0.2, float(np.nextafter(0.2, 0)), float(np.nextafter(0.2, 1)), 5e-324, -5e-324,
    2.2250738585072014e-308, 1e-300, math.nan, -math.nan, math.inf, -math.inf, 1.7976931348623157e308,
    -1.7976931348623157e308, 2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 1e19, 10.0, float(np.nextafter(10, 0)),
    float(np.nextafter(10, 11)), 40.0, float(np.nextafter(40, 41)), 0.5, 1.0, 1e300, 90.0, 91.0, None,
]
INTS: list[int | None] = [0, 1, 18, -18, 17, 90, 91, 16, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 10, 40, 41, -1,
                          20, 21, None]
DECIMALS: list[decimal.Decimal | None] = [
    D("18.0000"), D("-0.0000"), D("0.0000"), D("17.5000"), D("0.2000"), D("0.1999"), D("0.2001"),
    D("99999999999999.9999"), D("-99999999999999.9999"), D("10.0000"), D("10.0001"), D("9.9999"),
    D("40.0000"), D("1.0000"), D("0.19999999999999999999"), D("0.20000000000000001110"),
    D("0.19999999999999998335"), D("0.20000000000000002498"), D("-0.00000000000000000001"), None,
]
BOOLS: list[bool | None] = [True, False, None]

TYPED = {
    "text": pa.array(TEXT + TEXT_PARQUET_ONLY, pa.string()),
    "float": pa.array(FLOATS, pa.float64()),
    "integer": pa.array(INTS, pa.int64()),
    "decimal": pa.array(DECIMALS, pa.decimal128(38, 20)),
    "boolean": pa.array(BOOLS, pa.bool_()),
}


def test_the_lists_are_hostile_enough():
    assert len(TEXT) + len(TEXT_PARQUET_ONLY) + len(FLOATS) + len(INTS) + len(DECIMALS) >= 150
    assert len(set(TEXT)) == len(TEXT)
    # every kind and rule is exercised, and every reason of a refusal occurs
    kinds = {(a.kind, a.value_type, a.outside) for a in SCHEMA.attributes}
    assert {k for k, _, _ in kinds} == {"categorical", "integer", "numeric"}
    assert {o for _, _, o in kinds} == {"refuse", "clamp", "catch_all"}
    seen = {SCHEMA[n].encode(v, "text") for n in ("cat", "flag", "age_refuse") for v in TEXT}
    assert {MISSING, UNPARSED, OUTSIDE} <= seen


def _attrs(tc: str) -> list[AttributeSchema]:
    """The attributes a column of type class ``tc`` can hold (``check_type``)."""
    out = []
    for a in SCHEMA.attributes:
        try:
            a.check_type(tc)
        except ValueError:
            continue
        out.append(a)
    return out


# -- the reference itself: the rules of docs/schema.md, spelled out --------------------------


@pytest.mark.parametrize("value,code", [
    ("Female", 0), (" Female ", 0), ("Female\u00a0", OUTSIDE), ("\u00a0Female", OUTSIDE),
    ("Female\u2009", OUTSIDE), ("Female\u3000", OUTSIDE), ("Female\t", OUTSIDE), ("F\u0435male", OUTSIDE),
    ("female", OUTSIDE), ("Café", 2), ("Cafe\u0301", OUTSIDE), ("New\u00a0York", 3), ("New York", OUTSIDE),
    (" ", MISSING), ("\u00a0", OUTSIDE), (None, MISSING),
])
def test_reference_text_rule(value, code):
    assert SCHEMA["cat"].encode(value, "text") == code


@pytest.mark.parametrize("name,value,code", [
    ("flag", "TRUE", 1), ("flag", " fAlSe ", 0), ("flag", "FAL\u017fE", UNPARSED),
    ("flag", "\uff34\uff32\uff35\uff25", UNPARSED), ("flag", "true\u00a0", UNPARSED), ("flag", "1", UNPARSED),
    ("age", "18\u00a0", UNPARSED), ("age", "\u0661\u0668", UNPARSED), ("age", "\uff11\uff18", UNPARSED),
    ("age", "+18", 1), ("age", "018.00", 1), ("age", "1.8e1", UNPARSED), ("age", "-0", 0),
    ("age", "9" * 5000, 73), ("age", "-" + "9" * 5000, 0), ("age", "0" * 30 + "18", 1),
    ("age_refuse", "9223372036854775808", OUTSIDE), ("age_refuse", "-0.000", 20),
    ("cat_int", "9007199254740992", 3), ("cat_int", "9007199254740993", OUTSIDE),
    ("score", "0.2", 1), ("score", "0.2\u00a0", 3), ("score", "0.19999999999999999999", 1),
    ("score", "-0.0", 0), ("score", "1e-400", 0), ("score", "inf", 3), ("score", "1e400", 3),
    ("score_refuse", "-0.0", 0), ("score_refuse", "4.9e-324", 1), ("score_refuse", "-1e400", OUTSIDE),
    ("step_clamp", "1e400", 3), ("step_clamp", "-1e400", 0),
])
def test_reference_number_rules(name, value, code):
    assert SCHEMA[name].encode(value, "text") == code


# -- the schema's SQL, row by row (DuckDB) ------------------------------------------------------


@pytest.mark.parametrize("tc", sorted(TYPED))
def test_duckdb_sql_row_by_row(tc):
    """Every hostile value: ``code_sql`` gives the reference's code or status (the reason of a
    refusal included), ``refused_as_null`` NULL exactly where it refuses, and the quick key
    (with and without trimming) its code or NULL -- never another code."""
    values = TYPED[tc]
    for attr in _attrs(tc):
        want = [attr.encode(v, tc) for v in values.to_pylist()]
        got = _duckdb_codes(attr, tc, values, lambda n, a=attr: code_sql(a, n, tc, "duckdb"))
        bad = [(v, g, w) for v, g, w in zip(values.to_pylist(), got, want, strict=True) if g != w]
        assert not bad, (attr.name, tc, bad[:10])
        nulled = [w if w >= 0 else None for w in want]
        got = _duckdb_codes(attr, tc, values, lambda n, a=attr: code_sql(a, n, tc, "duckdb", refused_as_null=True))
        assert got == nulled, attr.name
        quick = _duckdb_codes(attr, tc, values,
                              lambda n, a=attr: quick_key_code(a, tc, quick_code_sql(a, n, tc)))
        assert quick == nulled, attr.name
        exact = _duckdb_codes(attr, tc, values,
                              lambda n, a=attr: quick_key_code(a, tc, quick_code_sql(a, n, tc, trim=False)))
        bad = [(v, g, w) for v, g, w in zip(values.to_pylist(), exact, nulled, strict=True) if g is not None and g != w]
        assert not bad, (attr.name, tc, bad[:10])


# -- the engines, end to end ---------------------------------------------------------------------


def _accepted_value(attr: AttributeSchema, tc: str, values: list) -> object:
    """A value of type class ``tc`` that the reference accepts for ``attr`` (from the hostile
    list itself, first such)."""
    for v in values:
        if v is not None and attr.encode(v, tc) >= 0:
            return v
    raise AssertionError(f"no accepted {tc} value for {attr.name}")


def _write(path: Path, columns: dict[str, list], tc: str) -> Path:
    """The columns as a CSV file (every text field quoted, None an empty unquoted field) or a
    Parquet file (``tc``'s Arrow type; ``row`` int64)."""
    if path.suffix == ".csv":
        def field(v):
            return "" if v is None else '"' + v.replace('"', '""') + '"'

        names = list(columns)
        lines = [",".join(names)] + [",".join(field(columns[n][i]) if n != "row" else str(columns[n][i])
                                              for n in names) for i in range(len(columns["row"]))]
        path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    else:
        arrow = {n: pa.array(c, pa.int64() if n == "row" else TYPED[tc].type) for n, c in columns.items()}
        pq.write_table(pa.table(arrow), path)
    return path


def _files(tmp: Path) -> list[tuple[str, str, list]]:
    """(file name, type class, values): the hostile text as CSV and Parquet, typed Parquet."""
    out = [("text.csv", "text", TEXT), ("text.parquet", "text", TEXT + TEXT_PARQUET_ONLY)]
    return out + [(f"{tc}.parquet", tc, TYPED[tc].to_pylist()) for tc in ("float", "integer", "decimal", "boolean")]


def _refusal_text(exc: DataError) -> str:
    """The refusal with its counts (``holder_message`` where the engines keep them apart)."""
    return getattr(exc, "holder_message", None) or str(exc)


def _expected_refusal(schema: DomainSchema, counts: list[tuple[int, int, int]], n: int) -> str:
    problems = format_schema_problems(schema, counts, n)
    assert problems is not None
    return getattr(problems, "counted", problems)  # type: ignore[return-value]


def check_engine(measure, tmp: Path) -> int:
    """Measure every hostile file with ``measure(path, domain, subsets)`` (an engine's
    marginals) and compare with the reference (module docstring); the number of records
    whose code was compared."""
    compared = 0
    for fname, tc, values in _files(tmp):
        attrs = _attrs(tc)
        n = len(values)
        row = AttributeSchema.from_dict({"name": "row", "kind": "integer", "min": 0, "max": n - 1}, "row")
        schema = DomainSchema([row, *attrs])
        domain = schema.domain()
        subsets = [(0, j) for j in range(1, len(attrs) + 1)]
        want = {a.name: [a.encode(v, tc) for v in values] for a in attrs}

        # 1. as written: refused, with the reference's counts per column and reason
        counts = [(0, 0, 0)] + [tuple(sum(1 for c in want[a.name] if c == s) for s in (MISSING, UNPARSED, OUTSIDE))
                                for a in attrs]
        assert any(sum(c) for c in counts), fname
        path = _write(tmp / fname, {"row": list(range(n)), **{a.name: values for a in attrs}}, tc)
        with pytest.raises(DataError) as info:
            measure(path, domain, subsets)
        assert _expected_refusal(schema, counts, n) in _refusal_text(info.value), (fname, str(info.value))

        # 2. refused values replaced by accepted ones: every record's code is the reference's
        fixed = {a.name: [v if c >= 0 else _accepted_value(a, tc, values) for v, c in zip(values, want[a.name], strict=True)]
                 for a in attrs}
        path = _write(tmp / f"fixed_{fname}", {"row": list(range(n)), **fixed}, tc)
        tables = measure(path, domain, subsets)
        for j, a in enumerate(attrs, start=1):
            codes = [a.encode(v, tc) for v in fixed[a.name]]
            assert min(codes) >= 0
            expected = np.zeros((n, a.size), dtype=np.int64)
            expected[np.arange(n), codes] = 1
            got = np.asarray(tables[(0, j)]).reshape(n, a.size)
            bad = [(values[i], fixed[a.name][i], codes[i], got[i].tolist()) for i in range(n)
                   if not np.array_equal(got[i], expected[i])]
            assert not bad, (fname, a.name, bad[:10])
            compared += n
    return compared


def test_duckdb_engine_agrees_with_the_reference(tmp_path):
    compared = check_engine(lambda p, dom, subs: marginals_duckdb(p, dom, subs), tmp_path)
    assert compared > 1500


@pytest.mark.spark
def test_spark_engine_agrees_with_the_reference(spark, tmp_path):  # noqa: F811
    from factorize.engines.spark_engine import marginals_spark

    compared = check_engine(lambda p, dom, subs: marginals_spark(str(p), dom, subs, spark=spark), tmp_path)
    assert compared > 1500


# -- the same trimming rule outside the schema's mapping ------------------------------------------


CODED_TEXT = [" 3 ", "3", "3\u00a0", "\u30003", "3\t", "3\u2009", "+3", "\uff13"]


def _coded_csv(tmp: Path) -> tuple[Path, object]:
    """A CSV of integer codes (a domain of sizes only) with other spaces than U+0020 around
    some: those are not integers, as in a schema's text."""
    from workloads import Domain

    path = tmp / "codes.csv"
    path.write_text("a\n" + "\n".join(f'"{v}"' for v in CODED_TEXT) + "\n", encoding="utf-8")
    return path, Domain(["a"], [5])


def test_duckdb_codes_in_text_are_trimmed_of_spaces_only(tmp_path):
    from factorize.engines import histogram_duckdb

    path, dom = _coded_csv(tmp_path)
    with pytest.raises(DataError) as info:
        histogram_duckdb(path, dom)
    assert "column 'a': 5 rows not an integer" in _refusal_text(info.value)
    ok = tmp_path / "ok.csv"
    ok.write_text("a\n" + "\n".join(f'"{v}"' for v in CODED_TEXT[:2] + CODED_TEXT[6:7]) + "\n", encoding="utf-8")
    np.testing.assert_array_equal(histogram_duckdb(ok, dom), [0, 0, 0, 3, 0])


@pytest.mark.spark
def test_spark_codes_in_text_are_trimmed_of_spaces_only(spark, tmp_path):  # noqa: F811
    from factorize.engines.spark_engine import histogram_spark

    path, dom = _coded_csv(tmp_path)
    with pytest.raises(DataError) as info:
        histogram_spark(str(path), dom, spark=spark)
    assert "column 'a': 5 rows not an integer" in _refusal_text(info.value)


def test_a_draft_keeps_other_spaces_as_part_of_the_value(tmp_path):
    """``factorize schema draft`` lists the values the mapping will see: trimmed of U+0020
    only, so a value with a no-break space is a value of its own, which then matches."""
    from factorize.engines.schema_draft import draft_schema_dict

    path = tmp_path / "people.csv"
    path.write_text('sex\n"Female"\n" Female "\n"Female\u00a0"\n"Male"\n', encoding="utf-8")
    doc = draft_schema_dict(path)
    (attr,) = doc["attributes"]
    assert attr["values"] == ["Female", "Female\u00a0", "Male"]
    del doc["drafted_from_data"]
    schema = DomainSchema.from_dict(doc)
    assert [schema["sex"].encode(v, "text") for v in ("Female", " Female ", "Female\u00a0", "Male")] == [0, 0, 1, 2]
