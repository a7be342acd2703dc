"""Writing released answers: CSV, JSON or Parquet (by suffix), atomically.

Columns: ``query`` (row index of W), ``table`` (the name of the answer's table: the part of
the workload's stack it belongs to, ``executor.labels``), ``label`` (the query in the
workload's terms: ``sex=Female, race=White``, ``age in 17..37``), one column per attribute
the tables cross (the answer's cell in label form — ``Female``, ``age ≤ 37`` — empty where its
table does not cross the attribute), then ``estimate``, ``std_error``, ``ci_low``,
``ci_high`` and, with post-processing, ``estimate_postprocessed`` (:data:`NUMERIC_COLUMNS`;
every other column is text, CSV-quoted). The table and attribute columns are built and
written batch by batch (``labels.TableLabels``). Metadata (plan digests, guarantee, noise,
CI method, ``test_mode``) goes in ``# key: value`` comment lines at the top of a CSV, under
``"metadata"`` in JSON, and in the Parquet schema metadata (key ``factorize``). A Parquet file
has one row group per batch, each column encoded as its values call for
(:func:`parquet_options`: the encodings change no value). The file is
written through ``io.atomic.AtomicOutput``: an unnamed file in the destination folder,
linked under a hidden name there and renamed into place whole (a failure or a kill leaves no
partial or complete copy elsewhere).
``open_output`` opens it before anything irreversible happens (a release checks that it can
write its answers before it charges a privacy budget) and refuses, there, every destination
the final move could fail on or that would lose something: one that is the private data, the
plan or a ledger file, a folder, a name too long for the file system, and an existing file
unless ``overwrite`` (a previous release is never replaced silently).

**Safe to open in a spreadsheet** (OWASP, "CSV Injection"): in every CSV written here — the
answers and the ``--tables`` files — a text cell (labels, value labels, attribute names in the
header) that begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is written with
a single quote ``'`` in front, and quoted, so a spreadsheet shows it as text instead of
evaluating it as a formula; a text cell that begins with ``'`` gets one too, so that reading
back (:func:`read_answers`) removes exactly one leading quote and returns every label as it
was. Numeric columns keep their numbers (``-3.2`` in a float column is a number, not a
formula). In the ``#`` metadata lines, where a spreadsheet also splits cells at commas, an
= + - @ that begins a JSON string or follows a comma inside one is written as its
``\\uXXXX`` escape (the same JSON). JSON and Parquet are not spreadsheet formats and are left as they are.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from factorize.errors import InputError
from factorize.io.atomic import AtomicOutput, MissingFolderError


class OutputError(InputError):
    """An output destination refused before anything irreversible (``open_output``,
    ``tables.open_tables``), or a file read back as answers (``read_answers``) that is not
    one: a ``ValueError`` too, exit code 2."""


FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}
#: The numeric columns of an answers file; every other column is text (labels).
NUMERIC_COLUMNS = ("query", "estimate", "std_error", "ci_low", "ci_high", "estimate_postprocessed")


def output_format(path: str | os.PathLike[str]) -> str:
    fmt = FORMATS.get(Path(os.fspath(path)).suffix.lower())
    if fmt is None:
        raise OutputError(f"output {os.fspath(path)!r}: unknown suffix; use .csv, .json or .parquet")
    return fmt


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when two paths name the same file (resolved links, or the same inode)."""
    pa, pb = Path(os.fspath(a)), Path(os.fspath(b))
    try:
        if pa.resolve() == pb.resolve():
            return True
        return pa.exists() and pb.exists() and os.path.samefile(pa, pb)
    except OSError:
        return False


def open_output(path: str | os.PathLike[str], *, protected: dict[str, Any] | None = None,
                overwrite: bool = False, option: str = "--out") -> AtomicOutput:
    """The answers file, opened for an all-or-nothing write (module docstring). Refused here,
    before anything irreversible: a suffix other than .csv/.json/.parquet; a path that is one
    of ``protected`` (a role such as ``"--data"``, ``"the plan"``, ``"a ledger file"`` → its
    paths); a folder; an existing file unless ``overwrite``; a name the file system cannot hold
    (with the hidden name it is written under first); a missing or unwritable folder.
    ``option`` names the destination in messages."""
    from factorize.io.atomic import hidden_name

    shown = f"{option} {os.fspath(path)!r}"
    output_format(path)
    for role, other in (protected or {}).items():
        for p in (other if isinstance(other, (list, tuple)) else [other]):
            if p is not None and same_file(path, p):
                raise OutputError(f"{shown} is {role}: refusing to overwrite it")
    target = Path(os.fspath(path))
    if target.is_dir():
        raise OutputError(f"{shown} is a folder: name the file to write")
    if os.path.lexists(target) and not overwrite:
        raise OutputError(f"{shown} exists (a previous release?): refusing to replace it; pass "
                         "--overwrite to replace it, or choose another name")
    try:
        name_max = os.pathconf(target.parent if str(target.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    if len(os.fsencode(hidden_name(target).name)) > name_max:
        raise OutputError(f"{shown}: the file name is too long for the file system (at most "
                         f"{name_max} bytes, with the hidden name it is written under first)")
    try:
        return AtomicOutput(path)
    except MissingFolderError as exc:
        raise OutputError(f"{shown}: {exc}") from None
    except OSError as exc:
        raise OutputError(f"{shown}: cannot write there ({exc.strerror or type(exc).__name__})") from None


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None and numpy scalars by Python ones
    (metadata must always serialise: a release is never lost to an inf in a note)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if np.isfinite(v) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_prepared(out: AtomicOutput, columns: dict[str, Any], metadata: dict[str, Any], *,
                   on_partial: Any = None) -> None:
    """Write and commit an output opened with :func:`open_output`; ``on_partial`` (fault
    injection) is called with the content half written — a crash there leaves no file."""
    fmt = output_format(out.target)
    metadata = json_safe(metadata)

    def writer(fh: Any) -> None:
        {"csv": _csv, "json": _json, "parquet": _parquet}[fmt](fh, columns, metadata)
        if on_partial is not None:
            fh.flush()
            on_partial()

    out.write(writer)
    out.commit()


def write_answers(path: str | os.PathLike[str], columns: dict[str, Any],
                  metadata: dict[str, Any], *, on_partial: Any = None) -> None:
    """Write atomically (open, write, commit), replacing an existing file (not a release:
    releases open their outputs with ``open_output`` before the charge)."""
    with open_output(path, overwrite=True) as out:
        write_prepared(out, columns, metadata, on_partial=on_partial)


#: The first characters that make a spreadsheet read a cell as a formula (OWASP), and ``'``,
#: which the neutralisation itself puts in front (so that it can be undone exactly).
_FORMULA_START = "=+-@\t\r'"
_BARE_NAME = re.compile(r"[A-Za-z0-9_.]+")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_TRIGGER = re.compile(r'(^"|,\s*)([=+\-@])')


def neutralise_text(value: str) -> str:
    """One text cell made safe to open in a spreadsheet (module docstring): ``'`` in front of
    a value that begins with = + - @ TAB CR (or ')."""
    return "'" + value if value[:1] and value[0] in _FORMULA_START else value


def neutralise_column(arr: Any) -> Any:
    """:func:`neutralise_text` on every value of an Arrow string column (plain, large,
    dictionary-encoded or chunked); any other column is returned as it is (numbers stay
    numbers)."""
    import pyarrow as pa
    from pyarrow._compute import ReplaceSubstringOptions

    from .labels import arrow_call  # Arrow's kernels without importing pyarrow.compute

    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([neutralise_column(c) for c in arr.chunks], type=arr.type)
    if pa.types.is_dictionary(arr.type):
        return pa.DictionaryArray.from_arrays(arr.indices, neutralise_column(arr.dictionary))
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arrow_call("replace_substring_regex", [arr],
                          ReplaceSubstringOptions(r"^([=+\-@\t\r'])", r"'\1"))
    return arr


def _csv_name(name: str) -> str:
    """A header cell: bare when it is letters, digits, ``_`` and ``.`` only (every answers
    column), else neutralised and quoted (attribute names of a ``--tables`` file)."""
    if _BARE_NAME.fullmatch(name):
        return name
    return '"' + neutralise_text(name).replace('"', '""') + '"'


def _metadata_line(key: str, value: Any) -> str:
    """``# key: json`` with every = + - @ that begins a JSON string, or follows a comma (and
    spaces) inside one, written as its ``\\uXXXX`` escape: the same JSON, and no cell a
    spreadsheet splits off at a comma starts a formula (tabs and CRs are escaped by JSON
    already; outside strings a comma is followed by a space and JSON, never a formula)."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)

    def escape(m: re.Match[str]) -> str:
        return _JSON_TRIGGER.sub(lambda c: f"{c.group(1)}\\u{ord(c.group(2)):04x}", m.group(0))

    return f"# {key}: {_JSON_STRING.sub(escape, text)}\n"


def _csv(fh: Any, columns: dict[str, Any], metadata: dict[str, Any]) -> None:
    """``# key: json`` metadata lines, the header, then the rows batch by batch (Arrow's CSV
    writer: text quoted, floats in their shortest round-trip form, vectorised); every text
    cell neutralised for spreadsheets (module docstring)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names, batches = _batches(columns)
    head = "".join(_metadata_line(key, value) for key, value in metadata.items())
    fh.write((head + ",".join(_csv_name(n) for n in names) + "\n").encode("utf-8"))
    options = pacsv.WriteOptions(include_header=False)
    for batch in batches:
        safe = pa.table({n: neutralise_column(batch.column(n)) for n in names})
        pacsv.write_csv(safe, fh, write_options=options)


def _batches(columns: dict[str, Any]) -> tuple[list[str], Iterator[Any]]:
    """The column names and the rows as Arrow tables, batch by batch: a
    :class:`~factorize.executor.labels.TableLabels` column expands there into ``table`` and
    the tables' attribute columns, built one batch at a time (never all in memory); without
    one, one batch."""
    from .labels import TableLabels

    lazy = next(((k, v) for k, v in columns.items() if isinstance(v, TableLabels)), None)
    if lazy is None:
        rows = max((len(v) for v in columns.values()), default=0)
        return list(columns), iter([_arrow_table({n: _rows(v, 0, rows) for n, v in columns.items()})])
    key, tables = lazy
    names = [m for n in columns for m in (tables.column_names if n == key else [n])]

    def run() -> Iterator[Any]:
        for lo, hi in tables.batches():
            part = tables.batch(lo, hi)
            yield _arrow_table({n: part[n] if n in part else _rows(columns[n], lo, hi) for n in names})

    return names, run()


def _rows(column: Any, lo: int, hi: int) -> Any:
    """Rows ``lo .. hi-1`` of a column: an Arrow array (a zero-copy slice), one made per slice
    (``labels.MarginalLabels``, ``linear_release.QueryIndex``: their ``slice``), or numpy."""
    return column.slice(lo, hi - lo) if hasattr(column, "slice") else column[lo:hi]


def _arrow_table(columns: dict[str, Any]) -> Any:
    """The columns as an Arrow table: ``query`` int64, the other numeric columns float64, every
    other column text (Arrow arrays pass through, e.g. dictionary-encoded table names)."""
    import pyarrow as pa

    out = {}
    for n, v in columns.items():
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            out[n] = v
        elif n not in NUMERIC_COLUMNS:
            out[n] = pa.array([str(x) for x in v], type=pa.string())
        elif n == "query":
            out[n] = pa.array(np.asarray(v, dtype=np.int64))
        else:
            out[n] = pa.array(np.asarray(v, dtype=np.float64))
    return pa.table(out)


def _value(name: str, v: Any) -> Any:
    if name == "query":
        return int(v)
    if name in NUMERIC_COLUMNS:
        return float(v)
    return None if v is None else str(v)


def _json(fh: Any, columns: dict[str, Any], metadata: dict[str, Any]) -> None:
    import pyarrow as pa

    names, batches = _batches(columns)
    table = pa.concat_tables(list(batches))
    values = {n: table.column(n).to_pylist() for n in names}
    rows = [{n: _value(n, values[n][i]) for n in names} for i in range(table.num_rows)]
    text = json.dumps({"metadata": metadata, "answers": rows}, allow_nan=False, ensure_ascii=False)
    fh.write((text + "\n").encode("utf-8"))


#: Columns whose values are, in practice, all distinct (noisy floats): written plain, without
#: the dictionary Parquet tries first (hashing 21·10⁶ distinct floats, then storing them in a
#: dictionary page anyway, cost more than the rest of their write) and uncompressed (the low
#: bits of a noisy float do not compress: snappy made them larger).
PLAIN_COLUMNS = ("estimate", "ci_low", "ci_high", "label")
UNCOMPRESSED_COLUMNS = ("estimate", "ci_low", "ci_high")


def parquet_options(first: Any) -> dict[str, Any]:
    """``pyarrow.parquet.ParquetWriter``'s encoding options for an answers file whose first
    row group is the Arrow table ``first`` (the values written do not depend on them):

    * ``query`` (0, 1, 2, …): ``DELTA_BINARY_PACKED``, a few bits per row;
    * the text columns (``table``, the attribute columns: few distinct values) dictionary
      encoded, except ``label`` (one per query, all distinct);
    * ``std_error`` dictionary encoded when its first row group repeats values (at most half
      as many distinct values as rows: a table's cells share their standard error in marginal
      releases), plain otherwise; :data:`PLAIN_COLUMNS` plain;
    * snappy compression, none for :data:`UNCOMPRESSED_COLUMNS`;
    * min/max statistics for the numeric columns only (a label's are of no use, and on the
      tables' attribute columns they cost more than the rest of the write)."""
    names = list(first.column_names)
    dictionary = [n for n in names if n not in NUMERIC_COLUMNS and n not in PLAIN_COLUMNS]
    if "std_error" in names and first.num_rows:
        se = first.column("std_error").to_numpy()
        if 2 * np.unique(se).size <= se.size:
            dictionary.append("std_error")
    options: dict[str, Any] = {
        "use_dictionary": dictionary,
        "compression": {n: "none" if n in UNCOMPRESSED_COLUMNS else "snappy" for n in names},
        "write_statistics": [n for n in names if n in NUMERIC_COLUMNS],
    }
    if "query" in names:
        options["column_encoding"] = {"query": "DELTA_BINARY_PACKED"}
    return options


def _parquet(fh: Any, columns: dict[str, Any], metadata: dict[str, Any]) -> None:
    """One row group per batch, encoded as :func:`parquet_options` says."""
    import pyarrow.parquet as pq

    _, batches = _batches(columns)
    writer = None
    try:
        for batch in batches:
            if writer is None:
                schema = batch.schema.with_metadata({"factorize": json.dumps(metadata, allow_nan=False)})
                writer = pq.ParquetWriter(fh, schema, **parquet_options(batch))
            writer.write_table(batch.replace_schema_metadata(schema.metadata))
    finally:
        if writer is not None:
            writer.close()


def read_answers(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The columns and metadata of an answers file written by :func:`write_answers` (any of the
    three formats); :class:`OutputError` for a file that is not one. Numeric columns come back
    as float arrays (``query`` int64), every other column as strings (``""`` for a cell a
    table leaves empty)."""
    p = Path(os.fspath(path))
    fmt = output_format(p)
    try:
        if fmt == "csv":
            meta: dict[str, Any] = {}
            with open(p, encoding="utf-8", newline="") as fh:  # a CR inside a quoted label stays
                line = fh.readline()
                while line.startswith("# "):
                    key, _, value = line[2:].rstrip("\n").partition(": ")
                    meta[key] = json.loads(value)
                    line = fh.readline()
                names = [_unneutralised(n) for n in next(csv.reader([line]))]
                rows = [r for r in csv.reader(fh) if r]
            cols = {n: _column(n, [r[j] if n in NUMERIC_COLUMNS else _unneutralised(r[j]) for r in rows])
                    for j, n in enumerate(names)}
        elif fmt == "json":
            with open(p, encoding="utf-8") as fh:
                doc = json.load(fh)
            meta = doc["metadata"]
            rows = doc["answers"]
            names = list(rows[0]) if rows else ["query", "estimate"]
            cols = {n: _column(n, [r[n] for r in rows]) for n in names}
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(p)
            meta = json.loads(table.schema.metadata[b"factorize"])
            cols = {n: _column(n, table.column(n).to_pylist()) for n in table.column_names}
    except (OSError, KeyError, TypeError, ValueError, IndexError, StopIteration) as exc:
        raise OutputError(f"{p}: not a factorize answers file ({type(exc).__name__}: {exc})") from None
    if "query" not in cols or "estimate" not in cols:
        raise OutputError(f"{p}: not a factorize answers file (no query/estimate columns)")
    cols["query"] = cols["query"].astype(np.int64)
    return cols, meta


def _unneutralised(cell: str) -> str:
    """A CSV text cell as it was before :func:`neutralise_text` (one leading ``'`` removed
    where the writer put one)."""
    return cell[1:] if cell[:2] and cell[0] == "'" and cell[1] in _FORMULA_START else cell


def _column(name: str, values: list[Any]) -> np.ndarray:
    if name in NUMERIC_COLUMNS:
        return np.array([float(v) for v in values], dtype=np.float64)
    return np.array(["" if v is None else str(v) for v in values], dtype=object)
