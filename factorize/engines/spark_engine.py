"""Histograms of private records computed inside Apache Spark (local mode or a cluster).

:func:`histogram_spark` reads a CSV or Parquet path (a file or a directory of part files,
local or any URI Spark can read, e.g. ``s3a://...``) or takes a Spark ``DataFrame``, and
brings back only aggregates: the pairs *(key, count)* of one ``groupBy``. Records are never
collected into the driver or into Python.

One scan, one aggregation. Each row gets a LongType key computed inside Spark:

- if every domain column holds a valid code, the key is the histogram cell
  ``Σ_j code_j · stride_j`` (row-major strides of :class:`workloads.Domain`, attribute 0
  slowest), ``>= 0``;
- otherwise the key is ``-1 - Σ_j status_j · 4**j`` with ``status_j`` in ``{0: valid,
  1: missing (NULL / empty / NaN), 2: not an integer, 3: outside 0..size-1}`` -- the kinds
  of problem of that row, never its values (domains of more than 31 attributes group by the
  cell and one such mask per 31 attributes instead).

``groupBy(key).count()`` then gives, at the driver, the histogram (keys ``>= 0``) and the
per-column counts of bad rows (keys ``< 0``), which are reported with
:func:`engines._common.format_problems` in one :class:`DataError` with exactly the text of
:func:`engines.histogram_duckdb` (columns and kinds of problem; the counts only in its
``holder_message``, for ``factorize data check``). Since the keys are computed before the shuffle, Spark's
shuffle files (the only data it writes to local disk) hold partial counts per key, no record
values.

:func:`marginals_spark` measures marginal tables (histograms of projections onto attribute
subsets) the same way, for domains of any number of cells: a valid row's keys are then one
*(table, cell)* pair per planned table (see :mod:`engines.marginal_tables`) besides its problem
masks, still computed before the shuffle, and only the tables' counts come back.

The validation semantics are those of the DuckDB engine: integer and boolean columns,
integral float/decimal values, and text matching :data:`INTEGER_PATTERN` (``[+-]?[0-9]+(\\.0*)?``
after trimming spaces; CSV is read with every column as a string). Every expression is total
(no cast or arithmetic can fail on any value), so the result does not depend on
``spark.sql.ansi.enabled``; :func:`spark_session` enables ANSI mode so that anything
unexpected fails instead of giving a wrong count.

**Raw values**: when the domain carries a public :class:`~workloads.schema.DomainSchema`
(``docs/schema.md``), each raw column is mapped to its code in Spark SQL by the schema's own
expressions (``schema_sql.prepare_sql`` / ``code_sql`` in the ``spark`` dialect: the same
rules as the DuckDB engine, the same messages), before the shuffle; values outside the schema
are counted per column (never shown), or take the catch-all / clamped code where the schema
says so. CSV files may not contain blank lines (Spark's parser skips them silently): local
files and directories are checked byte-wise, other URIs by one extra text scan.

Records are private: Spark's own error messages can quote a CSV line or a value, so they are
replaced by the error class names (``FAILED_READ_FILE``, ``MALFORMED_RECORD_IN_PARSING``...);
the session made by :func:`spark_session` logs at level ``FATAL`` only.

CSV dialect: comma, double quote (doubled to escape), header row required (its names are
read by this module; Spark's positional schema makes every column a string), quoted fields
may contain line breaks (``multiLine``, as in DuckDB; pass ``csv_multiline=False`` to let
Spark split large single CSV files, in which case a quoted line break makes the file
unparsable instead of counting as a non-integer value), rows with too many or too few
fields are refused (``FAILFAST``, with CSV column pruning disabled for the query).
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.errors import EnvironmentProblem, InternalError
from workloads.domain import Domain
from workloads.schema import TRIMMED

from ._common import (
    check_counts,
    check_domain,
    format_problems,
    format_schema_problems,
    row_major_strides,
    text_columns_error,
)
from .duckdb_engine import INTEGER_PATTERN, check_blank_lines, csv_header, match_columns, source_columns
from .errors import DataError
from .marginal_tables import MarginalTables, Subset, TableBuilder, normalize_subsets, plan_scans

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "SparkUnavailableError",
    "histogram_spark",
    "marginals_spark",
    "spark_session",
    "stop_spark_session",
]

_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
# Java regex: \z is the very end of input ($ would also match before a final line break,
# unlike DuckDB's regexp_full_match).
# INTEGER_PATTERN with its digits captured: group 1 is non-empty exactly when the text
# matches (one regular-expression evaluation per value).
_JAVA_INTEGER = "^" + INTEGER_PATTERN.replace("[0-9]+", "([0-9]+)", 1).replace(r"(\.0*)?", r"(?:\.0*)?") + r"\z"
_MAX_DIGITS = 18  # 10**18 - 1 < 2**63: a cast of at most 18 digits cannot overflow
_MASK_COLUMNS = 31  # 2 bits per column in a negative int64 key
_PRUNING = "spark.sql.csv.parser.columnPruning.enabled"
# Marginals: largest superset table (cells) one entry of the aggregation may group on (see
# marginals.plan_scans); each row emits one (table, cell) key per planned table.
_SCAN_CELLS = 2**15

_LOCK = threading.Lock()
_UNSET = object()
_SESSION: Any = None


class SparkUnavailableError(EnvironmentProblem):
    """Spark cannot be used here: pyspark is not installed or its JVM (Java) cannot start.

    An :class:`OSError` (an environment problem, not bad data): the ``factorize`` CLI reports
    it as ``factorize: error: ...`` without a traceback.
    """


# -- the session ------------------------------------------------------------------------------


def _session_alive(s: Any) -> bool:
    try:
        return s is not None and s.sparkContext._jsc is not None  # stopped => None
    except Exception:  # noqa: BLE001
        return False


def spark_session(*, master: str = "local[*]", driver_memory: str = "2g",
                  shuffle_partitions: int | None = None) -> Any:
    """The module's SparkSession, created on first use and reused (thread-safe).

    Local mode by default (``master="local[*]"``: all cores of this machine, no cluster),
    web UI and console progress bars off, ``spark.sql.shuffle.partitions`` = number of cores
    (at least 2; the shuffled data are a few thousand (key, count) pairs, not records),
    ``spark.sql.ansi.enabled=true`` (fail rather than overflow silently; the engine's
    expressions never fail), case-sensitive column names (as the DuckDB engine matches them),
    CSV column pruning off (so that ragged rows are detected), log level ``FATAL`` (Spark's
    logs could quote records). The arguments only matter when the session is created; if a
    SparkSession is already running in this process, Spark reuses it and applies these SQL
    settings to it.

    Raises :class:`SparkUnavailableError` naming the cause (pyspark missing, Java missing or
    unusable) if Spark cannot start.
    """
    global _SESSION
    with _LOCK:
        if _session_alive(_SESSION):
            return _SESSION
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:
            raise SparkUnavailableError(
                f"the Spark engine needs pyspark (pip install 'pyspark>=4'): {exc}"
            ) from None
        cores = os.cpu_count() or 2
        parts = shuffle_partitions if shuffle_partitions is not None else max(2, cores)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no network lookups in local mode
        builder = (
            SparkSession.builder.master(master)
            .appName("factorize-histogram")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", driver_memory)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(parts))
            .config("spark.sql.ansi.enabled", "true")
            .config("spark.sql.caseSensitive", "true")
            .config(_PRUNING, "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        )
        try:
            session = builder.getOrCreate()
            session.sparkContext.setLogLevel("FATAL")
        except Exception as exc:  # noqa: BLE001 - pyspark raises several kinds here
            java_home = os.environ.get("JAVA_HOME")
            raise SparkUnavailableError(
                f"cannot start a Spark session ({type(exc).__name__}: {_first_line(exc)}); "
                f"Spark needs Java 17 or 21: JAVA_HOME={java_home!r}, java on PATH: "
                f"{shutil.which('java')!r}"
            ) from None
        _SESSION = session
        return session


def stop_spark_session() -> None:
    """Stop the session made by :func:`spark_session`, if any (the next call makes a new one)."""
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            try:
                _SESSION.stop()
            finally:
                _SESSION = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


# -- errors -----------------------------------------------------------------------------------


def _conditions(exc: BaseException) -> list[str]:
    """Error class names / exception class names along Spark's cause chain (never messages)."""
    out: list[str] = []
    for getter in ("getCondition", "getErrorClass"):
        fn = getattr(exc, getter, None)
        if callable(fn):
            try:
                cond = fn()
            except Exception:  # noqa: BLE001
                cond = None
            if cond:
                out.append(str(cond))
                break
    jexc = getattr(exc, "java_exception", None)
    depth = 0
    while jexc is not None and depth < 12:
        depth += 1
        name = None
        for getter in ("getCondition", "getErrorClass"):
            try:
                name = getattr(jexc, getter)()
                break
            except Exception:  # noqa: BLE001 - not a SparkThrowable / older Spark
                name = None
        try:
            cls = str(jexc.getClass().getSimpleName())
        except Exception:  # noqa: BLE001
            cls = "?"
        out.append(str(name) if name else cls)
        try:
            nxt = jexc.getCause()
        except Exception:  # noqa: BLE001
            nxt = None
        if nxt is None or nxt.equals(jexc):
            break
        jexc = nxt
    if not out:
        out.append(type(exc).__name__)
    seen: list[str] = []
    for c in out:
        if c not in seen:
            seen.append(c)
    return seen


def _spark_error(exc: BaseException, label: str, fmt: str | None) -> DataError:
    """A DataError for a Spark failure, without Spark's text (it may quote record contents)."""
    conds = _conditions(exc)
    chain = " <- ".join(conds)
    joined = " ".join(conds).upper()
    if "OUTOFMEMORY" in joined:
        return DataError(f"Spark ran out of memory while reading {label} ({chain})")
    if fmt == "csv" and ("MALFORMED" in joined or "BADRECORD" in joined or "TEXTPARSING" in joined):
        return DataError(
            f"cannot parse CSV file {label}: a malformed row (wrong number of fields or a quoting "
            f"error) (Spark's message is withheld: it may quote record contents; {chain})"
        )
    what = {"csv": "CSV file ", "parquet": "Parquet file "}.get(fmt or "", "")
    return DataError(
        f"Spark cannot read {what}{label} ({chain}; its message is withheld: it may quote record contents)"
    )


# -- inputs -----------------------------------------------------------------------------------


def _resolve(path: Any, fmt_override: str | None) -> tuple[str, str, str, Path | None]:
    """``(label, spark_path, fmt, local)``: ``local`` is the local path (file or directory)
    or None for a URI that Spark resolves itself."""
    try:
        s = os.fspath(path)
    except TypeError:
        raise DataError(
            f"data must be a path (str or os.PathLike) or a Spark DataFrame, got {type(path).__name__}"
        ) from None
    if not isinstance(s, str):
        raise DataError("data path must be text, not bytes")
    m = _URI.match(s)
    local: Path | None = None
    if m is None or m.group(1).lower() == "file":
        local = Path(s[len("file://"):] if m else s)
        label = str(local)
        name = local.name
    else:
        label = s
        name = s.rstrip("/").rsplit("/", 1)[-1]
    suffix = Path(name).suffix.lower()
    fmt: str | None
    if fmt_override is not None:
        if fmt_override not in ("csv", "parquet"):
            raise DataError(f"format must be 'csv', 'parquet' or None, got {fmt_override!r}")
        fmt = fmt_override
    else:
        fmt = _FORMATS.get(suffix)
        if fmt is None:
            raise DataError(
                f"unsupported data file suffix {suffix!r} for {label!r}: give --data a .csv, .parquet "
                f"or .pq file"
            )
    if any(ch in s for ch in "*?[]{}"):
        raise DataError(
            f"data file path {label!r} contains glob characters; give a single plain file or directory path"
        )
    if local is not None:
        if not (local.is_file() or local.is_dir()):
            raise DataError(f"data file {label!r} does not exist or is not a regular file")
        spark_path = str(local.resolve())
    else:
        spark_path = s
    return label, spark_path, fmt, local


def _parse_header(line: str, label: str) -> list[str]:
    line = line.removeprefix("\ufeff")
    try:
        header = next(csv.reader(io.StringIO(line), delimiter=",", quotechar='"', doublequote=True, strict=True), None)
    except csv.Error:
        raise DataError(f"cannot parse the header row of CSV file {label!r} (comma-separated UTF-8 expected)") from None
    if not header or header == [""]:
        raise DataError(f"CSV file {label!r} starts with an empty line: a header row naming the columns is required")
    return header


def _spark_csv_header(spark: Any, spark_path: str, label: str) -> list[str]:
    """The header row of a CSV directory or URI: the first line Spark reads (schema, not values)."""
    try:
        rows = spark.read.text(spark_path).limit(1).collect()
    except Exception as exc:  # noqa: BLE001
        raise _spark_error(exc, repr(label), "csv") from None
    if not rows:
        raise DataError(f"CSV file {label!r} is empty: a header row naming the columns is required")
    return _parse_header(str(rows[0][0]), label)


def _is_dataframe(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    if not mod.startswith("pyspark"):
        return False
    from pyspark.sql import DataFrame

    return isinstance(obj, DataFrame)


# -- per-column expressions -------------------------------------------------------------------


def _prepare(c: Any, dtype: Any, j: int) -> list[Any]:
    """Stage-1 columns for value column ``c`` (attribute ``j``).

    Text: ``n{j}`` (NULL flag) and ``t{j}`` (trimmed of U+0020 spaces only, the schema's
    :data:`~workloads.schema.TRIMMED`, spelled out rather than Spark's default). Later
    stages add ``l{j}`` (``try_cast`` to long), ``f{j}`` (the fast path:
    the text is the canonical decimal spelling of a non-negative long, e.g. ``"17"``) and
    ``d{j}`` (for other texts only: the digits matched by the integer pattern, ``''`` if it
    does not match). Spark does not inline an expression that a later stage uses several
    times, so the regular expression runs at most once per value, and only off the fast path.
    """
    from pyspark.sql import functions as F

    if _is_text(dtype):
        return [c.isNull().alias(f"n{j}"), F.trim(c.cast("string"), F.lit(TRIMMED)).alias(f"t{j}")]
    return [c.alias(f"v{j}")]


def _text_stages(j: int) -> tuple[list[Any], list[Any], list[Any]]:
    """Stages 2a, 2b, 2c for text attribute ``j`` (see :func:`_prepare`)."""
    from pyspark.sql import functions as F

    n, t = F.col(f"n{j}"), F.col(f"t{j}")
    l, f = F.col(f"l{j}"), F.col(f"f{j}")
    a = [n, t, t.try_cast("long").alias(f"l{j}")]
    b = [n, t, l, ((l >= F.lit(0).cast("long")) & (l.cast("string") == t)).alias(f"f{j}")]
    c = [n, t, l, f,
         F.when(f, F.lit("")).otherwise(F.regexp_extract(t, _JAVA_INTEGER, 1)).alias(f"d{j}")]
    return a, b, c


def _is_text(dtype: Any) -> bool:
    from pyspark.sql import types as T

    return isinstance(dtype, (T.StringType, T.VarcharType, T.CharType))


def _column_exprs(j: int, dtype: Any, size: int, name: str) -> tuple[Any, Any]:
    """``(status, code)`` Spark Columns for attribute ``j``, on the columns of :func:`_prepare`
    and :func:`_text_stages`; both are total (never fail on any value, ANSI mode or not).

    ``status`` is 0 (valid), 1 (missing: NULL / empty / NaN), 2 (not an integer) or
    3 (outside ``0..size-1``) -- the rules of ``duckdb_engine._column_sql``; ``code`` is a
    LongType value in ``0..size-1`` (clamped; it is the value itself whenever status is 0).
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    hi = size - 1
    lo_lit, hi_lit = F.lit(0).cast("long"), F.lit(hi).cast("long")
    if _is_text(dtype):
        t, m, l, fast = F.col(f"t{j}"), F.col(f"d{j}"), F.col(f"l{j}"), F.col(f"f{j}")
        digits = F.ltrim(m, F.lit("0"))  # significant digits ('' for zero)
        raw = F.concat(F.lit("0"), F.substring(digits, 1, _MAX_DIGITS)).cast("long")
        status = (
            F.when(F.col(f"n{j}") | (t == F.lit("")), 1)
            .when(fast, F.when(l > hi_lit, 3).otherwise(0))
            .when(m == F.lit(""), 2)
            .when((t.startswith("-") & (digits != F.lit("")))
                  | (F.length(digits) > F.lit(_MAX_DIGITS)) | (raw > hi_lit), 3)
            .otherwise(0)
        )
        code = F.when(fast, F.least(l, hi_lit)).otherwise(F.least(F.coalesce(raw, lo_lit), hi_lit))
        return status, code
    c = F.col(f"v{j}")
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)):
        v = c.cast("long")
        status = F.when(c.isNull(), 1).when((v < lo_lit) | (v > hi_lit), 3).otherwise(0)
        return status, F.least(F.greatest(v, lo_lit), hi_lit)
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        v = c.cast("double")
        inf = float("inf")
        status = (
            F.when(c.isNull() | F.isnan(v), 1)
            .when((v == F.lit(inf)) | (v == F.lit(-inf)) | ((v % F.lit(1.0)) != F.lit(0.0)), 2)
            .when((v < F.lit(0.0)) | (v > F.lit(float(hi))), 3)
            .otherwise(0)
        )
        # NaN is the largest double in Spark: greatest(NaN, 0) = NaN, least(NaN, hi) = hi.
        code = F.least(F.greatest(v, F.lit(0.0)), F.lit(float(hi))).cast("long")
        return status, code
    if isinstance(dtype, T.DecimalType):
        status = (
            F.when(c.isNull(), 1)
            .when((c % F.lit(1)) != F.lit(0), 2)
            .when((c < lo_lit) | (c > hi_lit), 3)
            .otherwise(0)
        )
        return status, F.least(F.greatest(c, lo_lit), hi_lit).cast("long")
    if isinstance(dtype, T.NullType):
        return F.lit(1), lo_lit
    raise DataError(f"column {name!r} has type {dtype.simpleString().upper()}, which cannot hold integer codes")


def _type_class(dtype: Any) -> str | None:
    """The :data:`workloads.schema.TYPE_CLASSES` class of a Spark data type, or None."""
    from pyspark.sql import types as T

    if _is_text(dtype):
        return "text"
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "integer"
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return "float"
    if isinstance(dtype, T.DecimalType):
        return "decimal"
    if isinstance(dtype, T.BooleanType):
        return "boolean"
    if isinstance(dtype, T.NullType):
        return "null"
    return None


def _schema_exprs(domain: Domain, pos: list[int], types: list[Any]) -> tuple[list[Any], list[Any]]:
    """Stage-1 columns (``p{j}_{i}``) and the result column ``r{j}`` (the code, or a negative
    status) of every attribute of a domain with a schema, from the schema's Spark SQL."""
    from pyspark.sql import functions as F

    from workloads.schema import SchemaTypeError

    from .schema_sql import code_sql, prepare_sql

    preps: list[Any] = []
    codes: list[Any] = []
    for j, attr in enumerate(domain.schema.attributes):
        tc = _type_class(types[j])
        if tc is None:
            raise DataError(f"column {attr.name!r} has type {types[j].simpleString().upper()}, which the "
                            "domain schema cannot map (a text, integer, float, decimal or boolean column "
                            "is needed)")
        try:
            exprs = prepare_sql(attr, f"`c{pos[j]}`", tc, "spark")
            names = [f"p{j}_{i}" for i in range(len(exprs))]
            codes.append(F.expr(code_sql(attr, [f"`{n}`" for n in names], tc, "spark")).alias(f"r{j}"))
        except SchemaTypeError as exc:
            raise DataError(f"column {attr.name!r} has type {types[j].simpleString().upper()}: it {exc}") from None
        preps += [F.expr(e).alias(n) for e, n in zip(exprs, names, strict=True)]
    return preps, codes


def _check_csv_blank_lines(session: Any, spark_path: str, local: Path | None, label: str) -> None:
    """Refuse blank lines in CSV input: byte-wise for a local file or directory (its visible
    files, as Spark reads them), by one text scan for any other URI."""
    if local is not None:
        if local.is_file():
            check_blank_lines(local, label)
            return
        for f in sorted(local.iterdir()):
            if f.is_file() and not f.name.startswith(("_", ".")):
                check_blank_lines(f, f"{label}/{f.name}")
        return
    from pyspark.sql import functions as F

    try:
        blank = session.read.text(spark_path).where(F.col("value") == F.lit("")).limit(1).count()
    except Exception as exc:  # noqa: BLE001
        raise _spark_error(exc, repr(label), "csv") from None
    if blank:
        raise DataError(f"CSV file {label!r} has a blank line; a blank line is not a record (Spark would "
                        "skip it silently, and in a one-column file it may be a record whose value is "
                        "missing): remove blank lines, or write missing values as empty fields of a row")


# -- the engine -------------------------------------------------------------------------------


def histogram_spark(
    data: Any,
    domain: Domain,
    *,
    columns: Sequence[str] | None = None,
    allow_extra_columns: bool = False,
    spark: Any = None,
    format: str | None = None,
    csv_multiline: bool = True,
) -> np.ndarray:
    """Histogram (int64, length ``domain.size``) of records, computed inside Spark.

    Parameters
    ----------
    data:
        A path Spark can read -- ``.csv`` (comma-separated UTF-8, header row required;
        every column read as text) or ``.parquet`` / ``.pq``, a file or a directory of part
        files, local or a URI such as ``s3a://bucket/table.parquet`` -- or a Spark
        ``DataFrame``.
    domain:
        The domain; ``domain.size`` must be at most ``2**40``.
    columns:
        Column holding each domain attribute, in domain order (default: the attribute
        names). When given, other columns are ignored.
    allow_extra_columns:
        Ignore columns that are not domain attributes (default: they are an error).
    spark:
        SparkSession used to read a path (default: :func:`spark_session`, local mode).
        A DataFrame is computed in its own session.
    format:
        ``"csv"`` or ``"parquet"`` for a path without one of the suffixes.
    csv_multiline:
        Quoted CSV fields may contain line breaks (default; each CSV file is then read by
        one task). ``False`` lets Spark split big CSV files across tasks.

    Every value must be an integer in ``0 .. sizes[j]-1``, with the rules and the
    :class:`DataError` messages of :func:`engines.histogram_duckdb` (counts per column of
    missing, non-integer and out-of-range values; empty data; missing, repeated or
    unexpected columns; unsupported column types). Only ``(key, count)`` aggregates reach
    the driver. Raises :class:`SparkUnavailableError` if Spark cannot start.
    """
    domain = check_domain(domain)
    return _with_input(data, domain, columns, allow_extra_columns, spark, format, csv_multiline, _histogram)


def marginals_spark(
    data: Any,
    domain: Domain,
    subsets: Sequence[Sequence[int]],
    *,
    columns: Sequence[str] | None = None,
    allow_extra_columns: bool = False,
    spark: Any = None,
    format: str | None = None,
    csv_multiline: bool = True,
) -> MarginalTables:
    """Marginal tables of records, computed inside Spark: the contract of
    :func:`engines.marginals_duckdb` (``subsets``: strictly increasing tuples of attribute
    indices, ``()`` the total, repeats measured once; the result holds ``n_records`` and one
    int64 vector per distinct subset, in C order over its attributes, smallest index
    slowest) with the inputs and parameters of :func:`histogram_spark`. The domain may have
    any number of cells.

    One scan, one aggregation: every row gets the per-column statuses and codes of
    :func:`histogram_spark`; a valid row then emits one key ``(t, cell_t)`` per planned table
    ``t`` (the cell index ``Σ_{j∈T} code_j · stride_j`` of a superset ``T`` of requested
    subsets, at most 2**15 cells unless a requested subset is larger; planned by
    :func:`engines.marginal_tables.plan_scans` from the sizes and subsets alone), and every row one
    key per 31 attributes with its problem mask; ``groupBy(t, cell).count()`` brings back
    only these counts. Since the keys are computed before the shuffle, shuffle files hold
    partial counts per marginal cell, no record values. Bad values raise the
    :class:`DataError` of :func:`engines.histogram_duckdb` (counts per column, values never
    shown), as does empty data. At the driver every cell index is checked to lie in
    ``0 .. cells-1`` (and to occur once), counts to be below 2**53 and every table to sum to
    ``n_records``; the requested tables are summed out of the measured ones exactly (int64).
    Raises :class:`SparkUnavailableError` if Spark cannot start.
    """
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    subs = normalize_subsets(domain, subsets)
    finish = functools.partial(_marginals, subsets=subs)
    return _with_input(data, domain, columns, allow_extra_columns, spark, format, csv_multiline, finish)


def _with_input(data: Any, domain: Domain, columns: Sequence[str] | None, allow_extra_columns: bool,
                spark: Any, format: str | None, csv_multiline: bool, finish: Any) -> Any:
    """Open ``data`` as a DataFrame (path or DataFrame), then ``finish(df_in, names, domain,
    wanted, strict, what, label, fmt)``; CSV column pruning is restored afterwards."""
    wanted = source_columns(domain, columns)
    strict = columns is None and not allow_extra_columns

    fmt: str | None
    prune_prev: Any = _UNSET
    if _is_dataframe(data):
        label, what, fmt = "Spark DataFrame", "Spark DataFrame", None
        df_in = data
        names = [str(n) for n in data.columns]
        session = data.sparkSession
    else:
        label, spark_path, fmt, local = _resolve(data, format)
        session = spark if spark is not None else spark_session()
        if fmt == "csv":
            if local is not None and local.is_file():
                names = csv_header(local)
            else:
                names = _spark_csv_header(session, spark_path, label)
            what = f"CSV file {label!r}"
            match_columns(names, wanted, strict, what)  # refuse before starting a Spark job
            _check_csv_blank_lines(session, spark_path, local, label)
            from pyspark.sql import types as T

            schema = T.StructType([T.StructField(f"c{i}", T.StringType(), True) for i in range(len(names))])
            df_in = (
                session.read.schema(schema)
                .options(header="true", enforceSchema="true", sep=",", quote='"', escape='"',
                         encoding="UTF-8", mode="FAILFAST", multiLine="true" if csv_multiline else "false",
                         unescapedQuoteHandling="RAISE_ERROR", ignoreLeadingWhiteSpace="false",
                         ignoreTrailingWhiteSpace="false")
                .csv(spark_path)
            )
            # Column pruning would let rows with too many / too few fields pass unnoticed;
            # turned off for this query (and restored) in a session not made here.
            prev = session.conf.get(_PRUNING, None)
            if prev != "false":
                session.conf.set(_PRUNING, "false")
                prune_prev = prev
        else:
            what = f"Parquet file {label!r}"
            try:
                df_in = session.read.parquet(spark_path)
                names = [str(n) for n in df_in.columns]
            except Exception as exc:  # noqa: BLE001
                raise _spark_error(exc, repr(label), fmt) from None
    try:
        return finish(df_in, names, domain, wanted, strict, what, label, fmt)
    finally:
        if prune_prev is not _UNSET:
            if prune_prev is None:
                session.conf.unset(_PRUNING)
            else:
                session.conf.set(_PRUNING, prune_prev)


def _staged(df_in: Any, names: list[str], domain: Domain, wanted: list[str], strict: bool,
            what: str, label: str, fmt: str | None) -> tuple[Any, list[list[int]], list[Any]]:
    """The DataFrame with the status ``s{j}`` and code ``k{j}`` of every attribute (stage 3),
    the attribute chunks of the problem masks and the mask expressions (one per chunk)."""
    from pyspark.sql import functions as F

    pos = match_columns(names, wanted, strict, what)
    d = len(domain)
    try:
        df = df_in.toDF(*[f"c{i}" for i in range(len(names))])  # positional: no name resolution
        fields = df.schema.fields
    except Exception as exc:  # noqa: BLE001
        raise _spark_error(exc, repr(label) if fmt else label, fmt) from None
    types = [fields[i].dataType for i in pos]
    if domain.schema is not None:
        # Stage 1: the schema's prepared columns; stage 2: each attribute's code or negative
        # status r{j}; stage 3: status (0 valid, 1 missing, 2 unparsed, 3 outside) and code.
        preps, results = _schema_exprs(domain, pos, types)
        zero = F.lit(0).cast("long")
        stage3 = [e for j in range(d) for e in (
            F.when(F.col(f"r{j}") < zero, -F.col(f"r{j}")).otherwise(zero).alias(f"s{j}"),
            F.when(F.col(f"r{j}") < zero, zero).otherwise(F.col(f"r{j}")).alias(f"k{j}"))]
        staged = df.select(*preps).select(*results).select(*stage3)
        return (staged, *_masks(d))
    if fmt != "csv":  # a typed source (Parquet, a DataFrame): text there is labels or codes saved as strings
        text = [domain.attributes[j] for j, t in enumerate(types) if _is_text(t)]
        if text:
            raise text_columns_error(text, what)
    exprs = [_column_exprs(j, types[j], size, attr)
             for j, (size, attr) in enumerate(zip(domain.sizes, domain.attributes, strict=True))]  # type checks first
    # Stage 1: trimmed text (and NULL flags) / raw values; stages 2a-2c: text fast path and
    # the regular expression off it (see _prepare).
    stage1 = [e for j, i in enumerate(pos) for e in _prepare(F.col(f"c{i}"), types[j], j)]
    stage2: list[list[Any]] = [[], [], []]
    for j in range(d):
        for k, cols in enumerate(_text_stages(j) if _is_text(types[j]) else ([F.col(f"v{j}")],) * 3):
            stage2[k] += cols
    # Stage 3: status and code of every column.
    stage3 = [e for j, (st, code) in enumerate(exprs) for e in (st.alias(f"s{j}"), code.alias(f"k{j}"))]
    staged = df.select(*stage1).select(*stage2[0]).select(*stage2[1]).select(*stage2[2]).select(*stage3)
    return (staged, *_masks(d))


def _masks(d: int) -> tuple[list[list[int]], list[Any]]:
    """The attribute chunks of the problem masks and the mask expressions (one per chunk)."""
    from pyspark.sql import functions as F

    chunks = [list(range(k, min(k + _MASK_COLUMNS, d))) for k in range(0, d, _MASK_COLUMNS)]
    masks = []
    for chunk in chunks:
        m = None
        for t, j in enumerate(chunk):
            term = F.col(f"s{j}").cast("long") * F.lit(4**t).cast("long")
            m = term if m is None else m + term
        masks.append(m)
    return chunks, masks


def _raise_problems(domain: Domain, chunks: list[list[int]], bad_masks: list[np.ndarray],
                    bad_cnt: np.ndarray, n_rows: int, subject: str) -> None:
    """The DataError of the DuckDB engine for rows with problem masks ``bad_masks`` (one array
    per chunk) counted ``bad_cnt`` times; nothing if there are none."""
    counts = [[0, 0, 0] for _ in range(len(domain))]
    for t, chunk in enumerate(chunks):
        for i, j in enumerate(chunk):
            st = (bad_masks[t] >> (2 * i)) & 3
            for kind in (1, 2, 3):
                counts[j][kind - 1] += int(bad_cnt[st == kind].sum())
    if domain.schema is not None:
        problems = format_schema_problems(domain.schema, [(a, b, c) for a, b, c in counts], n_rows)
    else:
        problems = format_problems(list(domain.attributes), list(domain.sizes),
                                   [(a, b, c) for a, b, c in counts], n_rows)
    if problems:
        raise problems.error(subject)


def _column_sum(terms: Sequence[Column]) -> Column:
    """``terms[0] + terms[1] + …`` for a non-empty list of Spark columns (the cell index
    has a term per attribute, and a domain has at least one)."""
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _histogram(df_in: Any, names: list[str], domain: Domain, wanted: list[str], strict: bool,
               what: str, label: str, fmt: str | None) -> np.ndarray:
    from pyspark.sql import functions as F

    staged3, chunks, masks = _staged(df_in, names, domain, wanted, strict, what, label, fmt)
    strides = row_major_strides(domain.sizes)
    cell = _column_sum([F.col(f"k{j}") * F.lit(stride).cast("long") for j, stride in enumerate(strides)])
    # Stage 4: the cell and the problem masks; stage 5: the group key(s).
    stage4 = [cell.alias("cell")] + [m.alias(f"m{t}") for t, m in enumerate(masks)]
    zero = F.lit(0).cast("long")
    if len(chunks) == 1:
        keys = [F.when(F.col("m0") == zero, F.col("cell")).otherwise(F.lit(-1).cast("long") - F.col("m0")).alias("k")]
        key_names = ["k"]
    else:
        valid = functools.reduce(lambda x, y: x & y, [F.col(f"m{t}") == zero for t in range(len(chunks))])
        keys = [F.when(valid, F.col("cell")).otherwise(F.lit(-1).cast("long")).alias("k")]
        keys += [F.col(f"m{t}") for t in range(len(chunks))]
        key_names = ["k"] + [f"m{t}" for t in range(len(chunks))]
    staged = staged3.select(*stage4).select(*keys)
    agg = staged.groupBy(*key_names).count()
    try:
        table = _collect(agg)
    except Exception as exc:  # noqa: BLE001
        raise _spark_error(exc, repr(label) if fmt else label, fmt) from None
    k = np.asarray(table["k"], dtype=np.int64)
    cnt = np.asarray(table["count"], dtype=np.int64)
    n_rows = int(cnt.sum())
    subject = f"data file {label!r}" if fmt else label
    if n_rows == 0:
        raise DataError(f"{subject} has no records: refusing to build an empty histogram")

    bad = k < 0
    if len(chunks) == 1:
        bad_masks = [(-1 - k[bad]).astype(np.int64)]
    else:
        bad_masks = [np.asarray(table[f"m{t}"], dtype=np.int64)[bad] for t in range(len(chunks))]
    _raise_problems(domain, chunks, bad_masks, cnt[bad], n_rows, subject)
    if bad.any():  # pragma: no cover - a bad row always has some non-zero status
        raise InternalError("Spark keys inconsistent with the checks")

    n_cells = domain.size
    if k.size and (k.min() < 0 or k.max() >= n_cells or np.unique(k).size != k.size):
        raise InternalError("Spark histogram inconsistent with its checks")  # pragma: no cover
    h = np.zeros(n_cells, dtype=np.int64)
    h[k] = cnt
    return h


def _marginals(df_in: Any, names: list[str], domain: Domain, wanted: list[str], strict: bool,
               what: str, label: str, fmt: str | None, *, subsets: list[Subset]) -> MarginalTables:
    """One aggregation: per row, a key ``(-1 - t, mask_t)`` per mask chunk ``t`` and, for
    valid rows, a key ``(i, cell_i)`` per planned table ``i``; ``groupBy(key).count()``."""
    from pyspark.sql import functions as F

    staged3, chunks, masks = _staged(df_in, names, domain, wanted, strict, what, label, fmt)
    plans = plan_scans(domain.sizes, subsets, _SCAN_CELLS)
    # Stage 4: the problem masks and the planned tables' cell indices, as columns (each
    # expression evaluated once per row); stage 5: the keys, exploded.
    # (SQL text: one call into the JVM per expression; k{j} are LongType codes in 0..size-1,
    # every cell index is below 2**40, so no arithmetic can overflow.)
    cells = []
    for t in plans:
        strides = row_major_strides([domain.sizes[j] for j in t])
        cells.append(" + ".join(f"k{j} * CAST({stride} AS BIGINT)" for j, stride in zip(t, strides, strict=True)))
    stage4 = [m.alias(f"m{t}") for t, m in enumerate(masks)] + [F.expr(c).alias(f"p{i}") for i, c in enumerate(cells)]
    mask_keys = [f"named_struct('s', {-1 - t}, 'k', m{t})" for t in range(len(masks))]
    table_keys = [f"named_struct('s', {i}, 'k', p{i})" for i in range(len(plans))]
    keys = f"array({', '.join(mask_keys)})"
    if table_keys:
        valid = " AND ".join(f"m{t} = CAST(0 AS BIGINT)" for t in range(len(masks)))
        keys = f"CASE WHEN {valid} THEN array({', '.join(mask_keys + table_keys)}) ELSE {keys} END"
    exploded = (staged3.select(*stage4).select(F.explode(F.expr(keys)).alias("e"))
                .select(F.col("e.s").alias("s"), F.col("e.k").alias("k")))
    agg = exploded.groupBy("s", "k").count()
    try:
        table = _collect(agg)
    except Exception as exc:  # noqa: BLE001
        raise _spark_error(exc, repr(label) if fmt else label, fmt) from None
    sid = np.asarray(table["s"], dtype=np.int64)
    k = np.asarray(table["k"], dtype=np.int64)
    cnt = np.asarray(table["count"], dtype=np.int64)
    subject = f"data file {label!r}" if fmt else label
    # every row has exactly one key per mask chunk: chunk 0's counts sum to the rows (< 2**53;
    # then no count of any table can reach it either)
    n_rows = check_counts(cnt[sid == -1], subject)
    if n_rows == 0:
        raise DataError(f"{subject} has no records: refusing to build an empty histogram")
    # Problems: the keys of chunk t with a non-zero mask (masks of the other chunks: 0 there).
    sels = [(sid == -1 - t) & (k != 0) for t in range(len(chunks))]
    bad_cnt = np.concatenate([cnt[sel] for sel in sels])
    bad_masks = [np.concatenate([k[sel] if u == t else np.zeros(int(sel.sum()), dtype=np.int64)
                                 for u, sel in enumerate(sels)]) for t in range(len(chunks))]
    _raise_problems(domain, chunks, bad_masks, bad_cnt, n_rows, subject)
    if bad_cnt.size or not np.isin(sid, np.arange(-len(chunks), len(plans))).all():
        raise InternalError("Spark keys inconsistent with the checks")  # pragma: no cover
    builder = TableBuilder(domain, subsets, n_rows)
    for i, t in enumerate(plans):
        sel = sid == i
        cells = k[sel]
        if np.unique(cells).size != cells.size:
            raise InternalError("Spark marginal inconsistent with its checks")  # pragma: no cover
        builder.add_sparse(t, cells, cnt[sel], "the records' marginal")  # indices and sums checked
    return builder.result()


def _collect(agg: Any) -> dict[str, np.ndarray]:
    """The aggregate's columns as NumPy arrays (Arrow when pyspark has ``toArrow``)."""
    to_arrow = getattr(agg, "toArrow", None)
    if to_arrow is not None:
        table = to_arrow()
        return {name: table.column(name).to_numpy() for name in table.column_names}
    rows = agg.collect()  # pragma: no cover - pyspark < 4
    names = agg.columns  # pragma: no cover
    return {n: np.array([r[i] for r in rows], dtype=np.int64) for i, n in enumerate(names)}  # pragma: no cover
