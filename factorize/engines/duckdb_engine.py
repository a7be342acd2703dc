"""Histograms of private records computed inside an embedded DuckDB, from CSV or Parquet.

:func:`histogram_duckdb` never loads records as Python objects. With one scan of the file
DuckDB groups the rows by their raw values (``GROUP BY`` all domain columns, into an
in-memory temporary table of distinct value tuples with their counts); every check then runs
in SQL on that small table, weighted by the counts, and -- only when all checks pass -- the
histogram is a second ``GROUP BY`` on the cell index expression
``Σ_j code_j · stride_j`` (row-major strides of :class:`workloads.Domain`, attribute 0
slowest), fetched as two NumPy columns (cell, count).

Grouping by raw values first makes the checks cheap (they run once per distinct value, not
once per row), lets one scan serve both the checks and the histogram (so the file cannot
change between them), and lets DuckDB use its perfect-hash aggregate on Parquet integer
columns whose min/max statistics are small.

CSV files are read with every column as ``VARCHAR`` and an explicit dialect (comma, double
quote, header row required): DuckDB's numeric casts accept ``"1.5"`` (rounded to 2),
``"0x10"`` and ``"1_000"``, so integers are instead recognised with the pattern
``[+-]?[0-9]+(\\.0*)?`` (surrounding spaces allowed; ``"3.0"`` is 3, ``"1e3"`` is refused).

:func:`marginals_duckdb` shares the scan and the checks, then measures marginal tables (the
histograms of projections onto attribute subsets) by grouped scans of the distinct tuples'
codes, for domains of any number of cells; :func:`distinct_records_duckdb` returns the
distinct tuples themselves.

**Raw values** (``docs/schema.md``): when the domain carries a public
:class:`~workloads.schema.DomainSchema`, the scan maps every raw column to its code in SQL
with the schema's rules and groups the rows by their codes. The scan uses the schema's quick
mapping (:func:`factorize.engines.schema_sql.quick_code_sql`: an ENUM cast per text value, the integer
offset, integer arithmetic or a binary search for numeric bins), whose keys have a range
DuckDB knows, so that it groups them with its perfect-hash aggregate as it groups integer
codes (a refused value, or text that only matches after trimming, is NULL there); the integer
keys (booleans, bins, …) are packed into one mixed-radix key where that shrinks the
aggregate's table. An integer column is grouped by its raw value instead, and mapped on the
grouped table, when DuckDB's plan still uses the perfect-hash aggregate (its statistics give a
small range). Only when
some value is NULL is the data mapped again, by the full mapping (``prepare_sql`` /
``code_sql``), in one scan that alone gives the checks and the histogram: a value outside
the schema gets a negative status, counted per column (never shown), or the catch-all code /
a clamped code where the schema says so. Clean data costs one scan; data that is refused
costs two (the refusal's counts come from the second).
Inputs are CSV, Parquet, or a table or view of a DuckDB database file, named
``"FILE.duckdb::TABLE"`` (or :class:`DuckDBTable`), attached read-only and sealed (below).

A CSV file may not contain blank lines (DuckDB would skip them silently; a blank line is no
record, and in a one-column file it could be a record with a missing value): the first one is
refused with its line number.

DuckDB's perfect-hash aggregate trusts the file's statistics (Parquet min/max, DuckDB storage):
a corrupt file whose statistics contradict its values can be grouped into wrong cells without
an error (tested by hand: a value above a column's stated maximum lands in a neighbouring
cell; duckdb/duckdb#14430 treats such statistics as a corrupt file). Every record is still
counted exactly once, so the privacy guarantee (sensitivity) is unaffected; the counts of
such a file are not. A verifying scan (min/max with DuckDB's statistics optimizer off) costs
about 0.10 s per 10⁷ records of six integer columns, some 40 % of the coded path (measured
against its 0.17 s grouping query); it is not done.

Records are private: error messages name columns and kinds of problem, never show values
nor a number derived from the records (rows per column, the record count, a line number:
those are in the error's ``holder_message``, printed by ``factorize data check`` only;
``engines/errors.py``). DuckDB's own error messages can quote a CSV line, so they are replaced
by a summary (the kind of problem). Spilling to disk is disabled (``temp_directory=''``): no
intermediate result derived from the records is written outside memory.

A DuckDB database file is attached read-only and the connection then sealed
(:func:`attach_sealed`: external access off, configuration locked), so that a view of the
file cannot read or list other files on this machine (``read_csv``, ``glob``): such a view is
refused.
"""

from __future__ import annotations

import csv
import functools
import math
import mmap
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from factorize.errors import InternalError
from workloads.domain import Domain

from ._common import (
    check_counts,
    check_domain,
    format_problems,
    format_schema_problems,
    row_major_strides,
    text_columns_error,
)
from .errors import DataError
from .marginal_tables import (
    MAX_MARGINAL_CELLS,
    MarginalTables,
    Subset,
    TableBuilder,
    normalize_subsets,
    plan_scans,
    subset_cells,
)
from .numpy_engine import histogram_from_npy, histogram_numpy

__all__ = [
    "DuckDBTable",
    "INTEGER_PATTERN",
    "distinct_records_duckdb",
    "histogram_duckdb",
    "histogram_from_npy",
    "histogram_numpy",
    "marginals_duckdb",
    "parse_table_ref",
]

#: How an integer must be written in a text (CSV or string) column, after trimming spaces.
INTEGER_PATTERN = r"[+-]?[0-9]+(\.0*)?"

_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_INT_TYPES = frozenset(
    ["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"]
)
_FLOAT_TYPES = frozenset(["FLOAT", "DOUBLE", "REAL"])
_COUNT = "__factorize_count"
# Perfect-hash aggregation tables have 2**bits entries per thread; allow it up to this size.
_MAX_PERFECT_HT_BITS = 22
# Marginals: a grouped scan may measure a superset table of up to _SCAN_CELLS cells, from
# which the requested tables contained in it are summed out (see marginals.plan_scans and the
# benchmark in marginals_duckdb's docstring); with at most _FEW_DISTINCT distinct tuples a
# scan has few groups whatever its number of cells, so any table whose indices fit is allowed.
_SCAN_CELLS = 2**15
_FEW_DISTINCT = 2**14


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# -- file and columns -------------------------------------------------------------------------

#: Suffixes of DuckDB database files accepted in ``"FILE::TABLE"``.
DATABASE_SUFFIXES = (".duckdb", ".db", ".ddb")
TABLE_SEPARATOR = "::"


@dataclass(frozen=True)
class DuckDBTable:
    """A table or view of a DuckDB database file (attached read-only): ``table`` is ``NAME``
    or ``SCHEMA.NAME``. On the command line: ``--data FILE.duckdb::TABLE``."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}{TABLE_SEPARATOR}{self.table}"


def parse_table_ref(data: Any) -> DuckDBTable | None:
    """A :class:`DuckDBTable` for ``"FILE.duckdb::TABLE"`` (or a DuckDBTable), None for
    anything else (a file path)."""
    if isinstance(data, DuckDBTable):
        return data
    if not isinstance(data, str) or TABLE_SEPARATOR not in data:
        return None
    db, table = data.rsplit(TABLE_SEPARATOR, 1)
    if not db.lower().endswith(DATABASE_SUFFIXES):
        return None
    return DuckDBTable(db, table)


def _table_parts(ref: DuckDBTable) -> list[str]:
    parts = ref.table.split(".")
    if not ref.table or len(parts) > 2 or not all(parts):
        raise DataError(f"--data {str(ref)!r}: name a table or view as TABLE or SCHEMA.TABLE after "
                        f"'{TABLE_SEPARATOR}' (e.g. warehouse.duckdb::adult_raw)")
    return parts


def _check_database(ref: DuckDBTable) -> Path:
    p = Path(ref.database)
    if not p.is_file():
        raise DataError(f"DuckDB database file {str(p)!r} (in --data {str(ref)!r}) does not exist or "
                        "is not a regular file")
    _table_parts(ref)
    return p


def _blank_line(p: Path) -> int | None:
    """The 1-based number of the first blank line of a CSV file (outside quoted fields), or
    None. A fast byte search first; the csv module confirms a candidate (a quoted field may
    hold an empty line)."""
    try:
        if p.stat().st_size == 0:
            return None
        with open(p, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if mm.find(b"\n\n") < 0 and mm.find(b"\n\r\n") < 0:
                return None
    except (OSError, ValueError):
        return None  # unreadable: DuckDB reports it
    try:
        with open(p, newline="", encoding="utf-8-sig", errors="replace") as text:
            reader = csv.reader(text, delimiter=",", quotechar='"', doublequote=True)
            for row in reader:
                if not row:
                    return reader.line_num
    except csv.Error:
        return None  # malformed: DuckDB reports it with its line
    return None


def check_blank_lines(p: Path, label: str | None = None) -> None:
    """Refuse a CSV file with a blank line (:class:`DataError`; its line number, which
    depends on the records, only in the error's ``holder_message``)."""
    line = _blank_line(p)
    if line is not None:
        why = ("a blank line is not a record (DuckDB and Spark would skip it silently, and in a "
               "one-column file it may be a record whose value is missing): remove blank lines, or "
               "write missing values as empty fields of a row")
        name = label or str(p)
        raise DataError(f"CSV file {name!r} has a blank line (its line number is not shown: it "
                        f"depends on the records); {why}",
                        holder_message=f"CSV file {name!r}: line {line} is blank; {why}")


def _check_path(path: Any) -> tuple[Path, str]:
    try:
        p = Path(os.fspath(path))
    except TypeError:
        raise DataError(f"path must be a str or os.PathLike, got {type(path).__name__}") from None
    fmt = _FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise DataError(
            f"unsupported data file suffix {p.suffix!r} for {str(p)!r}: expected .csv, .parquet or .pq"
        )
    if any(ch in str(p) for ch in "*?[]{}"):
        raise DataError(f"data file path {str(p)!r} contains glob characters; give a single plain file path")
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist or is not a regular file")
    return p, fmt


def source_columns(domain: Domain, columns: Sequence[str] | None) -> list[str]:
    if columns is None:
        return list(domain.attributes)
    if isinstance(columns, str):
        raise DataError("columns must be a sequence of column names, got a single string")
    cols = list(columns)
    if len(cols) != len(domain):
        raise DataError(
            f"columns gives {len(cols)} names but the domain has {len(domain)} attributes "
            f"{list(domain.attributes)}; give one file column per attribute, in domain order"
        )
    if not all(isinstance(c, str) and c for c in cols):
        raise DataError("columns must be non-empty strings")
    if len(set(cols)) != len(cols):
        raise DataError(f"columns repeats a name: {cols}")
    return cols


def csv_header(p: Path) -> list[str]:
    """Column names from the first row (names are schema, not record values)."""
    try:
        with open(p, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh, delimiter=",", quotechar='"', doublequote=True, strict=True), None)
    except (csv.Error, UnicodeDecodeError):
        raise DataError(f"cannot parse the header row of CSV file {str(p)!r} (comma-separated UTF-8 expected)") from None
    except OSError as exc:
        raise DataError(f"cannot read CSV file {str(p)!r}: {exc.strerror or type(exc).__name__}") from None
    if header is None:
        raise DataError(f"CSV file {str(p)!r} is empty: a header row naming the columns is required")
    if not header or header == [""]:
        raise DataError(f"CSV file {str(p)!r} starts with an empty line: a header row naming the columns is required")
    return header


def match_columns(
    file_names: list[str], wanted: list[str], strict: bool, what: str
) -> list[int]:
    """Positions in ``file_names`` of the ``wanted`` columns; DataError on missing/extra/repeated.

    If some wanted column is missing, the other header fields are neither named nor counted
    (counted in the error's ``holder_message`` only): the "header" may in fact be a first
    record (a file without header row).
    """
    missing = [c for c in wanted if c not in file_names]
    others = [c for c in file_names if c not in wanted]
    if missing:
        hint = ""
        if len(missing) == len(wanted):
            hint = " -- none of the domain's columns were found; does the file start with a header row?"
        lacks = f"{what} lacks column(s) {missing} needed by the domain"
        raise DataError(
            f"{lacks} (the names and number of its other columns are not shown){hint}",
            holder_message=(f"{lacks} (it has {len(file_names)} columns, {len(others)} of them not in "
                            f"the domain; their names are not shown){hint}"))
    repeated = sorted({c for c in wanted if file_names.count(c) > 1})
    if repeated:
        raise DataError(f"{what} has more than one column named {repeated}")
    if others and strict:
        raise DataError(
            f"{what} has column(s) {others} that are not domain attributes; remove them, or ignore "
            f"them with `factorize run --ignore-extra-columns`"
        )
    return [file_names.index(c) for c in wanted]


# -- per-column SQL ---------------------------------------------------------------------------


def _column_sql(col: str, sql_type: str, size: int, name: str) -> tuple[str, str]:
    """``(status, code)`` SQL expressions for one column reference ``col``.

    ``status`` is 0 (valid), 1 (missing: NULL / empty / NaN), 2 (not an integer) or
    3 (outside ``0..size-1``); ``code`` is the BIGINT value, used only when status is 0.
    """
    t = sql_type.upper()
    hi = size - 1
    if t in _INT_TYPES or t == "BOOLEAN":
        v = f"CAST({col} AS BIGINT)" if t == "BOOLEAN" else col
        status = f"CASE WHEN {col} IS NULL THEN 1 WHEN {v} < 0 OR {v} > {hi} THEN 3 ELSE 0 END"
        return status, f"CAST({col} AS BIGINT)"
    if t in _FLOAT_TYPES or t.startswith(("DECIMAL", "NUMERIC")):
        nan = f" OR isnan({col})" if t in _FLOAT_TYPES else ""
        inf = f"isinf({col}) OR " if t in _FLOAT_TYPES else ""
        status = (
            f"CASE WHEN {col} IS NULL{nan} THEN 1 WHEN {inf}{col} <> trunc({col}) THEN 2 "
            f"WHEN {col} < 0 OR {col} > {hi} THEN 3 ELSE 0 END"
        )
        return status, f"CAST({col} AS BIGINT)"
    if t == "VARCHAR" or t.startswith("VARCHAR("):
        from .schema_sql import trim_sql

        s = trim_sql(col)  # U+0020 only, as a schema's text (docs/schema.md)
        status = (
            f"CASE WHEN {col} IS NULL OR {s} = '' THEN 1 "
            f"WHEN NOT regexp_full_match({s}, {_literal(INTEGER_PATTERN)}) THEN 2 "
            f"WHEN coalesce(TRY_CAST({s} AS BIGINT) NOT BETWEEN 0 AND {hi}, true) THEN 3 ELSE 0 END"
        )
        return status, f"CAST({s} AS BIGINT)"
    raise DataError(f"column {name!r} has type {sql_type}, which cannot hold integer codes")


def type_class(sql_type: str) -> str | None:
    """The :data:`workloads.schema.TYPE_CLASSES` class of a DuckDB column type, or None."""
    t = sql_type.upper()
    if t == "VARCHAR" or t.startswith(("VARCHAR(", "ENUM(")):
        return "text"
    if t in _INT_TYPES:
        return "integer"
    if t in _FLOAT_TYPES:
        return "float"
    if t.startswith(("DECIMAL", "NUMERIC")):
        return "decimal"
    if t == "BOOLEAN":
        return "boolean"
    if t == '"NULL"' or t == "NULL":
        return "null"
    return None


def _schema_type_class(attr: Any, sql_type: str) -> str:
    """:func:`type_class` of the column read for schema attribute ``attr``; a
    :class:`DataError` for a type the schema cannot map."""
    tc = type_class(sql_type)
    if tc is None:
        raise DataError(f"column {attr.name!r} has type {sql_type}, which the domain schema cannot "
                        "map (a text, integer, float, decimal or boolean column is needed)")
    return tc


def _signed_type(size: int) -> str:
    """The smallest DuckDB integer type holding the codes ``0 .. size-1`` and the statuses
    ``-1 .. -3`` (narrow group keys aggregate faster)."""
    for bound, name in ((2**7, "TINYINT"), (2**15, "SMALLINT"), (2**31, "INTEGER")):
        if size <= bound:
            return name
    return "BIGINT"


def _schema_sql(domain: Domain, refs: list[str], types: list[str], quick: bool = False,
                trim: bool = True) -> tuple[list[list[str]], list[str]]:
    """Stage-1 expressions (aliased ``p{j}_{i}``, a list per attribute) and the code
    expression of every attribute of a domain with a schema, over the source columns
    ``refs`` of SQL types ``types``: the schema's ``schema_sql.code_sql`` (codes and
    negative statuses), or with ``quick`` its ``quick_code_sql`` (keys of a range DuckDB
    knows, NULL where refused or unsettled; ``quick_key_code`` gives their codes)."""
    from workloads.schema import SchemaTypeError

    from .schema_sql import code_sql, prepare_sql, quick_code_sql

    preps: list[list[str]] = []
    codes: list[str] = []
    for j, attr in enumerate(domain.schema.attributes):
        tc = _schema_type_class(attr, types[j])
        ref = refs[j] if not types[j].upper().startswith("ENUM(") else f"CAST({refs[j]} AS VARCHAR)"
        try:
            exprs = prepare_sql(attr, ref, tc, "duckdb")
            names = [_ident(f"p{j}_{i}") for i in range(len(exprs))]
            if quick:
                codes.append(quick_code_sql(attr, names, tc, trim=trim))
            else:
                codes.append(f"CAST({code_sql(attr, names, tc, 'duckdb')} AS {_signed_type(attr.size)})")
        except SchemaTypeError as exc:
            raise DataError(f"column {attr.name!r} has type {types[j]}: it {exc}") from None
        preps.append([f"{e} AS {n}" for e, n in zip(exprs, names, strict=True)])
    return preps, codes


class QuickScan(NamedTuple):
    """The first scan of raw data (:func:`_quick_scan`): the ``SELECT`` grouping the rows,
    the attributes it groups by their raw integers (``raw``), and those whose keys it packs
    into the one column ``vk`` (``packed``: each one's mixed-radix stride)."""

    sql: str
    raw: frozenset[int]
    packed: dict[int, int]


_PACKED = "vk"


def _quick_scan(con: Any, domain: Domain, refs: list[str], types: list[str], source: str,
                trim: bool) -> QuickScan:
    """The first scan of raw data: rows grouped by keys ``v0 … v{d-1}`` (and ``vk``), with
    counts.

    Every attribute is mapped by the schema's quick SQL (:func:`_schema_sql` with ``quick``),
    except those read from an integer column: these are grouped by the raw integer itself
    and mapped afterwards on the grouped table (:func:`_raw_status_code`), which saves the
    mapping's per-row work. DuckDB groups a raw integer column with its perfect-hash
    aggregate only when the column's statistics (Parquet or DuckDB storage) give it a small
    range; so the raw variant is kept only when DuckDB's plan for it uses that aggregate
    (``EXPLAIN``), else every attribute is mapped per row.

    The keys that are an unsigned integer ``% size`` (booleans, bins, integers and values
    mapped by arithmetic; not the ENUM keys of text, whose codes would cost an
    ``enum_code`` and a ``%`` more per row) are packed into one key, ``Σ_j key_j · stride_j``
    (mixed radix over those attributes, NULL if one is NULL), when that needs fewer bits:
    the perfect-hash aggregate gives each key ``bit_length(size)`` bits (its values and a
    NULL slot) and sizes its table by their sum, so packing the booleans and bins of a
    wide table halves the table or more; once the table outgrows the caches (2**22 slots,
    36 MB per thread, for ``reports/bench_raw.md``'s six attributes) that saves about a
    tenth of the scan, and costs nothing measurable when it is small. The keys are in
    ``0 .. size-1`` by construction (``quick_code_sql``), so the packing is exact and
    :func:`_grouped` unpacks it on the grouped table. (Integer codes read from a coded
    file cannot be packed so: they are checked after grouping, and a value out of range
    would alias another cell.) Either way the result is the same
    (the mapping is the schema's); only the time differs."""
    preps, codes = _schema_sql(domain, refs, types, quick=True, trim=trim)
    from .schema_sql import quick_is_enum

    counted = f"count(*) AS {_COUNT}"
    sizes = domain.sizes
    packable = [j for j, (attr, t) in enumerate(zip(domain.schema.attributes, types, strict=True))
                if not quick_is_enum(attr, _schema_type_class(attr, t))]

    def scan(raw: frozenset[int]) -> QuickScan:
        pack = [j for j in packable if j not in raw]
        cells = math.prod(int(sizes[j]) for j in pack)
        if len(pack) < 2 or cells > 2**62 or cells.bit_length() >= sum(int(sizes[j]).bit_length() for j in pack):
            pack = []
        packed = dict(zip(pack, row_major_strides([sizes[j] for j in pack]), strict=True))
        keys = [f"{_ident(f'r{j}')} AS {_ident(f'v{j}')}" if j in raw else f"{codes[j]} AS {_ident(f'v{j}')}"
                for j in range(len(refs)) if j not in packed]
        if packed:
            ty = _code_type(cells)
            keys.append(" + ".join(f"CAST({codes[j]} AS {ty})" + (f" * {st}" if st != 1 else "")
                                   for j, st in packed.items()) + f" AS {_ident(_PACKED)}")
        inner = ", ".join(f"{refs[j]} AS {_ident(f'r{j}')}" if j in raw else ", ".join(p)
                          for j, p in enumerate(preps))
        sql = f"SELECT {', '.join(keys)}, {counted} FROM (SELECT {inner} FROM {source}) GROUP BY ALL"
        return QuickScan(sql, raw, packed)

    quick = scan(frozenset())
    raw = frozenset(j for j, t in enumerate(types) if type_class(t) == "integer")
    if not raw:
        return quick
    candidate = scan(raw)
    import duckdb

    try:
        plan = con.execute(f"EXPLAIN (FORMAT json) {candidate.sql}").fetchall()
    except duckdb.Error:  # a plan DuckDB cannot show this way: map every column per row
        return quick
    if any("PERFECT_HASH_GROUP_BY" in str(row[-1]) for row in plan):
        return candidate
    return quick


def _raw_status_code(attr: Any, v: str, sql_type: str) -> tuple[str, str]:
    """``(status, code)`` SQL over the grouped table's raw integer column ``v``: the schema's
    full mapping (``code_sql``: the code, or a negative status after the ``outside`` rule),
    as the second scan computes it per row."""
    from .schema_sql import code_sql, prepare_sql

    tc = _schema_type_class(attr, sql_type)
    return _status_code(code_sql(attr, prepare_sql(attr, v, tc, 'duckdb'), tc, 'duckdb'))


def _status_code(c: str) -> tuple[str, str]:
    """``(status, code)`` SQL of a code-or-negative-status expression ``c`` (``code_sql``):
    status 0 for a code, else the reason (1 missing, 2 malformed, 3 outside)."""
    return f"CASE WHEN {c} >= 0 THEN 0 ELSE -{c} END", f"CAST({c} AS BIGINT)"


def _perfect_ht_bits(domain: Domain) -> int:
    # DuckDB needs about bit_length(range) (+1 for NULL) bits per grouped column.
    need = sum(int(s).bit_length() + 1 for s in domain.sizes)
    return max(12, min(need, _MAX_PERFECT_HT_BITS))


_CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")
_CSV_COLUMNS = re.compile(r"Expected Number of Columns: (\d+) Found: (\d+)")


def _read_error(exc: Exception, p: Path, fmt: str, table: DuckDBTable | None = None) -> DataError:
    """A DataError for a DuckDB failure, without DuckDB's text (it may quote record contents)."""
    kind = type(exc).__name__
    text = str(exc)
    if "OutOfMemory" in kind:
        return DataError(f"DuckDB ran out of memory while reading {str(p)!r} ({kind})")
    if fmt == "table":
        name = table.table if table is not None else "?"
        last = name.rsplit(".", 1)[-1]
        if "Permission" in kind or "Permission Error" in text:
            return DataError(f"the view {name!r} of DuckDB database {str(p)!r} reads files or lists "
                             "directories (read_csv, read_parquet, read_text, glob, …): refused. A "
                             "--data FILE.duckdb::TABLE source is a table stored in the database, or a "
                             "view over its tables only; file access is disabled once the database "
                             "is attached (materialize the view as a table: CREATE TABLE … AS SELECT …)")
        if "does not exist" in text and f"name {last} does not exist" in text:
            return DataError(f"DuckDB database {str(p)!r} has no table or view {name!r} (--data "
                             f"FILE.duckdb::TABLE names one; the names are case-sensitive as written)")
        if "does not exist" in text:
            return DataError(f"the view {name!r} of DuckDB database {str(p)!r} refers to a table or "
                             "view that does not resolve when the database is attached read-only "
                             "(qualify the names inside the view, e.g. main.TABLE)")
        return DataError(f"DuckDB cannot read table or view {name!r} of database {str(p)!r} ({kind}; "
                         "its message is withheld: it may quote record contents; the database is "
                         "attached read-only, so it may not be open for writing by another process)")
    line = _CSV_LINE.search(text)
    if fmt == "csv" and line:
        cols = _CSV_COLUMNS.search(text)
        if cols:
            why = f"expected {cols.group(1)} fields, found {cols.group(2)}"
        elif "unterminated quote" in text:
            why = "unterminated quote"
        elif "unicode" in text.lower() or "utf" in text.lower():
            why = "invalid UTF-8"
        else:
            why = "malformed row"
        public = ("a row has the wrong number of fields" if cols
                  else "a malformed row" + ("" if why == "malformed row" else f" ({why})"))
        withheld = "(DuckDB's message is withheld: it may quote record contents)"
        return DataError(
            f"cannot parse CSV file {str(p)!r}: {public} (the line is not shown: its number depends "
            f"on the records) {withheld}",
            holder_message=f"cannot parse CSV file {str(p)!r}: line {line.group(1)}: {why} {withheld}")
    what = "CSV" if fmt == "csv" else "Parquet"
    return DataError(
        f"DuckDB cannot read {what} file {str(p)!r} ({kind}; its message is withheld: it may quote record contents)"
    )


# -- the engine -------------------------------------------------------------------------------


def histogram_duckdb(
    path: str | os.PathLike[str],
    domain: Domain,
    *,
    columns: Sequence[str] | None = None,
    allow_extra_columns: bool = False,
    threads: int | None = None,
) -> np.ndarray:
    """Histogram (int64, length ``domain.size``) of the records in a CSV or Parquet file.

    Parameters
    ----------
    path:
        ``.csv`` (comma-separated, UTF-8, header row required, no blank lines), ``.parquet`` or
        ``.pq``; or a table or view of a DuckDB database file, ``"FILE.duckdb::TABLE"`` (or
        ``SCHEMA.TABLE``; a :class:`DuckDBTable`), attached read-only.
    domain:
        The domain; ``domain.size`` must be at most ``2**40`` (else use marginals: a
        projection of the domain onto a few attributes). When it carries a public
        :class:`~workloads.schema.DomainSchema`, the records hold raw values, mapped to codes
        by the schema's rules (module docstring); values outside the schema are counted per
        column in one :class:`DataError` (never shown) unless the schema clamps them or has a
        catch-all.
    columns:
        File column holding each domain attribute, in domain order (default: the attribute
        names). When given, other columns of the file are ignored.
    allow_extra_columns:
        Ignore file columns that are not domain attributes (default: they are an error).
    threads:
        DuckDB worker threads (default: DuckDB's, the number of cores).

    Without a schema, every value must be an integer in ``0 .. sizes[j]-1``: integer or boolean columns,
    integral float/decimal values, or text matching :data:`INTEGER_PATTERN`. NULL, empty
    and NaN values, non-integers (``1.5``, ``abc``) and out-of-range values are counted per
    column and reported in one :class:`DataError` (no values; the counts only in its
    ``holder_message``); so are an empty file,
    missing or unexpected columns, unparsable rows and unsupported column types.
    """
    domain = check_domain(domain)
    return _run(path, domain, columns, allow_extra_columns, threads, _histogram)


def distinct_records_duckdb(
    path: str | os.PathLike[str],
    domain: Domain,
    *,
    columns: Sequence[str] | None = None,
    allow_extra_columns: bool = False,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The records as their distinct value tuples with counts: ``(codes, counts)``, codes an
    int64 array (distinct tuples × attributes, in domain order), counts int64 > 0.

    The same single scan and checks as :func:`histogram_duckdb` (same parameters, same
    :class:`DataError` on any bad value), but no dense histogram: the domain may have any
    number of cells (e.g. 100 binary attributes, 2¹⁰⁰ cells) — the result has at most one
    row per record. Statistics that are sums over records (second moments) are computed from
    it exactly.
    """
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    return _run(path, domain, columns, allow_extra_columns, threads, _distinct)


def marginals_duckdb(
    path: str | os.PathLike[str],
    domain: Domain,
    subsets: Sequence[Sequence[int]],
    *,
    columns: Sequence[str] | None = None,
    allow_extra_columns: bool = False,
    threads: int | None = None,
) -> MarginalTables:
    """Marginal tables of the records in a CSV or Parquet file, computed inside DuckDB.

    ``subsets`` is a sequence of strictly increasing tuples of attribute indices (``()`` is
    the total; repeats are allowed and measured once). The result holds ``n_records`` and,
    for each distinct subset ``S``, an int64 vector of length ``Π_{j∈S} sizes[j]`` in C order
    over the attributes of ``S`` (smallest index slowest): exactly the dense histogram's
    ``reshape(sizes).sum(other axes).ravel()``, without building the histogram, so the
    domain may have any number of cells (10**18, 2**100...). A subset of more than 2**40
    cells, an index outside the domain or an unsorted tuple is a ``WorkloadError`` (the request,
    not the data, is wrong).

    The records are read and checked exactly as by :func:`histogram_duckdb` (same parameters,
    one scan into an in-memory table of distinct raw tuples with counts, the same
    :class:`DataError` messages, which name columns and kinds of problem, never values or counts;
    an empty file is refused). Every record is checked, also in columns that no requested
    subset uses. Then, in the same in-memory DuckDB (spilling to disk is disabled,
    ``temp_directory=''``: nothing derived from the records is written outside memory), the
    distinct tuples become their codes (smallest unsigned integer columns, only the
    attributes some subset uses), and the tables are measured by grouped scans of those
    codes: ``GROUP BY`` the combined cell index ``Σ_{j∈T} code_j · stride_j`` of a table
    ``T``, one query per ``T`` (a perfect-hash aggregate up to 2**15 cells). Only the
    maximal requested subsets need measuring -- the others are sums of a measured table,
    computed exactly in int64 -- and one scan may group on a superset ``T`` of several of
    them, whose table then gives every requested subset it contains. ``T`` has at most
    2**15 cells (unless it is a requested subset), or, with at most 2**14 distinct tuples
    (so few groups whatever ``T``), up to 2**40 cells; ``T`` is planned by
    :func:`engines.marginal_tables.plan_scans` from the sizes and subsets alone, never from the
    records. Every measured cell index is checked to lie in ``0 .. cells-1``, counts (each
    one and each total) to be below 2**53, and every table to sum to ``n_records``.

    Memory: the distinct tuples (as for :func:`histogram_duckdb`), one measured table at a
    time -- dense if at least a quarter of its cells are non-zero, else only its non-zero
    cells -- and the requested tables; never proportional to the domain size.

    Method (benchmark on 2 shared cores, 10**6 uniform records over 30 attributes of sizes
    2..10, all 4,060 3-way subsets and their closure; the alternatives extrapolated from 120
    subsets; another process held one core): one ``GROUP BY`` per 3-way subset on its code
    columns, ~54 s;
    on the combined cell index, ~70 s; ``UNION ALL`` batches of 8-32 such queries, ~67 s;
    ``GROUPING SETS`` batches of 4-32 subsets, 66-120 s; the superset plan used here (347
    scans of mostly 6-way tables, each serving ~12 subsets), 7-10 s of scans, 12-18 s in
    all including the checking scan (3-6 s), peak RSS ~230 MB. Adult (48,842 records, 14
    attributes, 91 pairs + closure): 0.75 s.
    """
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    subs = normalize_subsets(domain, subsets)
    return _run(path, domain, columns, allow_extra_columns, threads, functools.partial(_marginals, subsets=subs))


def _run(path: Any, domain: Domain, columns: Sequence[str] | None, allow_extra_columns: bool,
         threads: int | None, finish: Any) -> Any:
    """Open an in-memory DuckDB, group and check the records, then ``finish`` (histogram or
    distinct tuples); DuckDB errors become :class:`DataError`."""
    table = parse_table_ref(path)
    if table is not None:
        p, fmt = _check_database(table), "table"
    else:
        p, fmt = _check_path(path)
    wanted = source_columns(domain, columns)
    strict = columns is None and not allow_extra_columns
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise DataError(f"threads must be a positive int or None, got {threads!r}")
    if fmt == "csv":
        check_blank_lines(p)

    import duckdb  # deferred: importing factorize.engines should not require loading DuckDB

    config: dict[str, Any] = {
        "temp_directory": "",  # never spill data derived from records to disk
        "preserve_insertion_order": False,
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "perfect_ht_threshold": _perfect_ht_bits(domain),
    }
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(":memory:", config=config)
    try:
        status_code, n_rows = _grouped(con, p, fmt, domain, wanted, strict, table)
        return finish(con, domain, status_code, n_rows)
    except duckdb.Error as exc:
        raise _read_error(exc, p, fmt, table) from None
    finally:
        con.close()


_SOURCE_DB = "__factorize_source"


def attach_sealed(con: Any, database: Path | str, alias: str) -> None:
    """Attach a DuckDB database file read-only as ``alias``, then seal the connection: external
    access off (``enable_external_access = false``: no table function may read or list a file
    -- ``read_csv``, ``read_parquet``, ``read_text``, ``glob`` -- nor reach the network) and
    the configuration locked (``lock_configuration = true``: no later ``SET`` or ``RESET``,
    so nothing can turn access back on).

    READ_ONLY alone does not stop a view of the file from running ``read_csv('/etc/…')`` or
    ``glob('/home/*')`` on this machine when it is queried; sealed, querying such a view is a
    DuckDB ``PermissionException``, which :func:`_read_error` turns into a refusal of the view.
    The attached file itself stays readable (its handle is open). Call it once the inputs
    are attached and before anything of the database is queried; the connection must not
    need file access or a configuration change afterwards."""
    con.execute(f"ATTACH {_literal(str(database))} AS {_ident(alias)} (READ_ONLY)")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _configuration_locked(con: Any) -> bool:
    """Whether :func:`attach_sealed` locked this connection's configuration."""
    return bool(con.execute("SELECT current_setting('lock_configuration')").fetchone()[0])


def _grouped(con: Any, p: Path, fmt: str, domain: Domain, wanted: list[str],
             strict: bool, table: DuckDBTable | None = None) -> tuple[list[tuple[str, str]], int]:
    """Steps 1–2: the temporary table g of distinct raw tuples with counts (or, with a domain
    schema, of distinct code tuples, statuses included), checked; returns the per-column
    (status, code) SQL and the number of rows. DuckDB errors propagate."""
    d = len(domain)
    subject = f"data file {str(p)!r}"
    if fmt == "csv":
        header = csv_header(p)
        pos = match_columns(header, wanted, strict, f"CSV file {str(p)!r}")
        # Positional internal names avoid DuckDB's case-insensitive identifiers and renaming.
        spec = ", ".join(f"{_literal(f'c{i}')}: 'VARCHAR'" for i in range(len(header)))
        source = (
            f"read_csv({_literal(str(p))}, header = true, auto_detect = false, columns = {{{spec}}}, "
            f"delim = ',', quote = '\"', escape = '\"', strict_mode = true, null_padding = false)"
        )
        refs = [_ident(f"c{i}") for i in pos]
        types = ["VARCHAR"] * d
    else:
        if fmt == "table":
            assert table is not None
            attach_sealed(con, p, _SOURCE_DB)
            source = ".".join(_ident(x) for x in [_SOURCE_DB, *_table_parts(table)])
            what = f"table {table.table!r} of DuckDB database {str(p)!r}"
            subject = what
        else:
            source = f"read_parquet({_literal(str(p))})"
            what = f"Parquet file {str(p)!r}"
        described = con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        names = [str(r[0]) for r in described]
        pos = match_columns(names, wanted, strict, what)
        refs = [_ident(names[i]) for i in pos]
        types = [str(described[i][1]) for i in pos]

    if domain.schema is not None:
        # 1. One scan: every raw value mapped to its code by the schema's quick SQL (NULL where
        # refused, or text that needs trimming, see schema_sql.quick_code_sql), rows
        # grouped by their code tuples (in memory only) -- with DuckDB's perfect-hash
        # aggregate, as for integer codes. Integer columns are grouped by their raw values
        # instead, and mapped on the grouped table, when DuckDB still groups by a perfect
        # hash (their statistics give a small range: _quick_scan).
        from .schema_sql import quick_key_code

        vs = [_ident(f"v{j}") for j in range(d)]
        qs = _quick_scan(con, domain, refs, types, source, trim=fmt == "csv")
        con.execute(f"CREATE TEMP TABLE g AS {qs.sql}")
        quick = [v for j, v in enumerate(vs) if j not in qs.raw and j not in qs.packed]
        quick += [_ident(_PACKED)] if qs.packed else []
        unsettled = (con.execute(f"SELECT count(*) FROM g WHERE {' OR '.join(f'{v} IS NULL' for v in quick)}")
                     .fetchone() if quick else (0,))
        if not unsettled[0]:
            status_code = []
            for j, (attr, v) in enumerate(zip(domain.schema.attributes, vs, strict=True)):
                if j in qs.raw:
                    status_code.append(_raw_status_code(attr, v, types[j]))
                elif j in qs.packed:
                    unpacked = f"({_ident(_PACKED)} // {qs.packed[j]}) % {domain.sizes[j]}"
                    status_code.append(("0", f"CAST({unpacked} AS BIGINT)"))
                else:
                    status_code.append(("0", quick_key_code(attr, _schema_type_class(attr, types[j]), v)))
        else:
            # 1'. Some value is refused or needs trimming: map the data again, by the full
            # SQL (codes, or a negative status per reason), in one scan that decides alone
            # (the quick scan's table is dropped: the checks and the histogram come from one
            # scan of the file).
            con.execute("DROP TABLE g")
            preps, codes = _schema_sql(domain, refs, types)
            select = ", ".join(f"{c} AS {v}" for c, v in zip(codes, vs, strict=True))
            con.execute(f"CREATE TEMP TABLE g AS SELECT {select}, count(*) AS {_COUNT} FROM "
                        f"(SELECT {', '.join(e for p in preps for e in p)} FROM {source}) GROUP BY ALL")
            status_code = [_status_code(v) for v in vs]
    else:
        if fmt != "csv":  # a typed store: text there is labels, or codes saved as strings
            text = [domain.attributes[j] for j, t in enumerate(types)
                    if type_class(t) == "text"]
            if text:
                raise text_columns_error(text, what)
        # Per-column status/code on the grouped table g(v0..v{d-1}, count).
        status_code = [_column_sql(_ident(f"v{j}"), types[j], s, domain.attributes[j])
                       for j, s in enumerate(domain.sizes)]
        # 1. One scan: distinct raw value tuples with their counts (in memory only).
        select = ", ".join(f"{r} AS {_ident(f'v{j}')}" for j, r in enumerate(refs))
        con.execute(f"CREATE TEMP TABLE g AS SELECT {select}, count(*) AS {_COUNT} FROM {source} GROUP BY ALL")

    # 2. Checks: the number of rows and the largest status of any column (a column whose
    # status is the constant 0, settled by the quick scan, needs none); only when some status
    # is not 0, the per-column counts of each status, weighted by the group counts. (One
    # FILTER aggregate per column and status is what the refusal's message needs, but over
    # 100 columns those 300 aggregates cost DuckDB ~23 s and ~4.7 GB of address space on 10⁶
    # distinct tuples; the first query costs ~0.15 s.)
    checked = [j for j, (st, _) in enumerate(status_code) if st != "0"]
    statuses = "".join(f", {status_code[j][0]} AS {_ident(f's{j}')}" for j in checked)
    worst = (f", max(greatest({', '.join(_ident(f's{j}') for j in checked)}))" if checked else "")
    row = con.execute(f"SELECT sum({_COUNT}){worst} FROM (SELECT {_COUNT}{statuses} FROM g)").fetchone()
    n_rows = int(row[0] or 0)
    if n_rows == 0:
        raise DataError(f"{subject} has no records: refusing to build an empty histogram")
    counts = [(0, 0, 0)] * d
    if checked and row[1]:
        aggs = "".join(f", sum({_COUNT}) FILTER (WHERE {_ident(f's{j}')} = {k})" for j in checked for k in (1, 2, 3))
        row = con.execute(f"SELECT sum({_COUNT}){aggs} FROM (SELECT {_COUNT}{statuses} FROM g)").fetchone()
        for i, j in enumerate(checked):
            base = 1 + 3 * i
            counts[j] = (int(row[base] or 0), int(row[base + 1] or 0), int(row[base + 2] or 0))
    if domain.schema is not None:
        problems = format_schema_problems(domain.schema, counts, n_rows)
    else:
        problems = format_problems(list(domain.attributes), list(domain.sizes), counts, n_rows)
    if problems:
        raise problems.error(subject)
    return status_code, n_rows


def _histogram(con: Any, domain: Domain, status_code: list[tuple[str, str]], n_rows: int) -> np.ndarray:
    """Step 3 for a dense histogram."""
    # 3. The histogram: GROUP BY the cell index Σ_j code_j · stride_j (row-major strides).
    strides = row_major_strides(domain.sizes)
    index = " + ".join(f"{code} * {stride}" for (_, code), stride in zip(status_code, strides, strict=True))
    res = con.execute(
        f"SELECT cell, CAST(sum({_COUNT}) AS BIGINT) AS n FROM "
        f"(SELECT {index} AS cell, {_COUNT} FROM g) GROUP BY cell"
    ).fetchnumpy()
    cells = np.asarray(res["cell"], dtype=np.int64)
    cnt = np.asarray(res["n"], dtype=np.int64)
    check_counts(cnt, "the records' histogram")  # total < 2**53: no int64 wrap-around below
    n_cells = domain.size
    if cells.size and (cells.min() < 0 or cells.max() >= n_cells) or int(cnt.sum()) != n_rows:
        raise InternalError("DuckDB histogram inconsistent with its checks")  # pragma: no cover
    h = np.zeros(n_cells, dtype=np.int64)
    h[cells] = cnt
    return h


def _distinct(con: Any, domain: Domain, status_code: list[tuple[str, str]],
              n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 3 for distinct tuples: the codes of every column, grouped, with counts."""
    codes = ", ".join(f"{code} AS {_ident(f'k{j}')}" for j, (_, code) in enumerate(status_code))
    res = con.execute(f"SELECT {codes}, CAST(sum({_COUNT}) AS BIGINT) AS n FROM g GROUP BY ALL").fetchnumpy()
    out = np.column_stack([np.asarray(res[f"k{j}"], dtype=np.int64) for j in range(len(domain))])
    cnt = np.asarray(res["n"], dtype=np.int64)
    check_counts(cnt, "the records' distinct tuples")  # total < 2**53: no int64 wrap-around below
    if int(cnt.sum()) != n_rows:
        raise InternalError("DuckDB tuples inconsistent with the checks")  # pragma: no cover
    return out, cnt



def _code_type(size: int) -> str:
    """The smallest DuckDB integer type holding the codes ``0 .. size-1``."""
    for bound, name in ((2**8, "UTINYINT"), (2**16, "USMALLINT"), (2**32, "UINTEGER")):
        if size <= bound:
            return name
    return "BIGINT"


def _scan_budget(n_distinct: int) -> int:
    """Largest superset table (cells) one grouped scan may measure (see marginals_duckdb)."""
    return MAX_MARGINAL_CELLS if n_distinct <= _FEW_DISTINCT else _SCAN_CELLS


def _marginals(con: Any, domain: Domain, status_code: list[tuple[str, str]], n_rows: int, *,
               subsets: list[Subset]) -> MarginalTables:
    """Step 3 for marginal tables: codes table c, then one grouped scan per planned table."""
    builder = TableBuilder(domain, subsets, n_rows)
    n_distinct = int(con.execute("SELECT count(*) FROM g").fetchone()[0])
    plans = plan_scans(domain.sizes, subsets, _scan_budget(n_distinct))
    if not plans:  # only () requested: the checks' count is the answer
        return builder.result()
    used = sorted({j for t in plans for j in t})
    codes = ", ".join(
        f"CAST({status_code[j][1]} AS {_code_type(domain.sizes[j])}) AS {_ident(f'k{j}')}" for j in used
    )
    # 3. Codes of the distinct tuples (only the attributes some table uses); all are valid.
    con.execute(f"CREATE TEMP TABLE c AS SELECT {codes}, {_COUNT} FROM g")
    con.execute("DROP TABLE g")
    # Perfect-hash aggregation (an array indexed by the cell) up to tables of _SCAN_CELLS
    # cells; larger ones (few distinct tuples) use DuckDB's hash aggregate, sized by groups.
    # (A sealed connection -- a DuckDB table source, attach_sealed -- keeps its initial
    # threshold: its configuration is locked. Only the speed differs.)
    largest = min(max(subset_cells(domain.sizes, t) for t in plans), _SCAN_CELLS)
    if not _configuration_locked(con):
        con.execute(f"SET perfect_ht_threshold = {max(12, min(_MAX_PERFECT_HT_BITS, largest.bit_length() + 1))}")
    # 4. One grouped scan per planned table; the requested tables are summed out of it.
    for t in plans:
        builder.add_sparse(t, *_scan_table(con, domain, t), "the records' marginal")
    return builder.result()


def _scan_table(con: Any, domain: Domain, t: Subset) -> tuple[np.ndarray, np.ndarray]:
    """The non-zero cells (C-order indices over the attributes ``t``) and their counts:
    ``GROUP BY`` the cell index ``Σ code_j · stride_j`` on the codes table c."""
    ty = "INTEGER" if subset_cells(domain.sizes, t) < 2**31 else "BIGINT"
    strides = row_major_strides([domain.sizes[j] for j in t])
    index = " + ".join(
        f"CAST({_ident(f'k{j}')} AS {ty})" + (f" * {stride}" if stride != 1 else "") for j, stride in zip(t, strides, strict=True)
    )
    res = con.execute(
        f"SELECT {index} AS cell, CAST(sum({_COUNT}) AS BIGINT) AS n FROM c GROUP BY cell"
    ).fetchnumpy()
    return np.asarray(res["cell"], dtype=np.int64), np.asarray(res["n"], dtype=np.int64)
