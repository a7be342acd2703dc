"""Writing released answers: CSV, JSON or Parquet (by suffix), atomically.

Columns: ``query`` (row index of W), ``estimate``, ``std_error``, ``ci_low``, ``ci_high`` and,
with post-processing, ``estimate_postprocessed``; every answer is labelled with text columns
(:data:`LABEL_COLUMNS`, ``executor.labels``): ``label``, the query in the workload's terms
(``sex=Female, race=White``, ``age in 17..37``), and for a stack of marginals ``marginal``
(the attribute names of its table) and ``cell`` (the values of those attributes), CSV-quoted. Metadata (plan digests, guarantee, noise,
CI method, ``test_mode``) goes in ``# key: value`` comment lines at the top of a CSV, under
``"metadata"`` in JSON, and in the Parquet schema metadata (key ``factorize``). The file is
written through ``io.atomic.AtomicOutput``: an unnamed file in the destination folder,
moved into place whole (a failure or a kill leaves no partial or complete copy elsewhere).
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
from pathlib import Path
from typing import Any

import numpy as np

from factorize.errors import InputError
from factorize.io.atomic import AtomicOutput, MissingFolderError


class OutputError(InputError):
    """An output destination refused before anything irreversible (``open_output``,
    ``open_marginal_tables``), or a file read back as answers (``read_answers``) that is not
    one: a ``ValueError`` too, exit code 2."""


FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}
#: Text columns that label answers (kept as strings when read back).
LABEL_COLUMNS = ("label", "marginal", "cell")


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


def write_prepared(out: AtomicOutput, columns: dict[str, np.ndarray], metadata: dict[str, Any], *,
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


def write_answers(path: str | os.PathLike[str], columns: dict[str, np.ndarray],
                  metadata: dict[str, Any], *, on_partial: Any = None) -> None:
    """Write atomically (open, write, commit), replacing an existing file (not a release:
    releases open their outputs with ``open_output`` before the charge)."""
    with open_output(path, overwrite=True) as out:
        write_prepared(out, columns, metadata, on_partial=on_partial)


#: The answer columns a tidy marginal table carries after its attribute columns.
TIDY_COLUMNS = ("estimate", "std_error", "ci_low", "ci_high", "estimate_postprocessed")


def check_tables_folder(folder: str | os.PathLike[str]) -> Path:
    """``--tables``: an existing folder (checked before anything irreversible happens)."""
    p = Path(os.fspath(folder))
    if not p.is_dir():
        raise OutputError(f"--tables {os.fspath(folder)!r}: the folder does not exist; create it "
                         "first (factorize does not create folders)")
    return p


def table_file_name(attributes: list[str]) -> str:
    """The file of one marginal table: its attribute names, each with every character but
    letters, digits, ``-``, ``_`` and ``.`` replaced by ``_``, joined by ``__``, then ``.csv``
    (``total.csv`` for the empty marginal)."""
    stem = "__".join("".join(c if c.isalnum() or c in "-_." else "_" for c in a) for a in attributes)
    return f"{stem or 'total'}.csv"


def open_marginal_tables(folder: str | os.PathLike[str], tables: list, *,
                         protected: dict[str, Any] | None = None,
                         overwrite: bool = False) -> list[tuple[Any, AtomicOutput]]:
    """Open one output per marginal table (``executor.labels.marginal_tables``) in ``folder``
    before anything irreversible happens (:func:`table_file_name`; each refused as
    :func:`open_output` refuses ``--out``). Two tables whose file names coincide — exactly or
    but for case, which a case-insensitive file system does not tell apart (``a>b``, ``a_b``
    and ``a b`` are all ``a_b.csv``) — are refused: one would replace the other."""
    folder = check_tables_folder(folder)
    names = [table_file_name(list(t[1])) for t in tables]
    seen: dict[str, str] = {}
    for t, name in zip(tables, names, strict=True):
        first = seen.setdefault(name.casefold(), t[0])
        if first != t[0]:
            raise OutputError(f"--tables: the marginals {first!r} and {t[0]!r} would both be written "
                             f"to {name!r} (file names keep letters, digits, - _ . only); rename "
                             "the attributes in the domain, or leave out --tables")
    opened: list[tuple[Any, AtomicOutput]] = []
    try:
        for t, name in zip(tables, names, strict=True):
            opened.append((t, open_output(folder / name, protected=protected, overwrite=overwrite,
                                          option="--tables file")))
    except BaseException:
        for _, out in opened:
            out.abort()
        raise
    return opened


def write_marginal_tables(opened: list[tuple[Any, AtomicOutput]], columns: dict[str, Any],
                          metadata: dict[str, Any]) -> list[Path]:
    """Write the tidy tables opened by :func:`open_marginal_tables`: the table's attribute
    columns (value labels), then estimate, std_error, ci_low, ci_high (and the post-processed
    estimate), the release's metadata in ``#`` lines."""
    import pyarrow as pa

    written = []
    for (name, attr_cols, lo, hi), out in opened:
        cols: dict[str, Any] = dict(attr_cols)
        for c in TIDY_COLUMNS:
            if c in columns:
                cols[c] = pa.array(np.asarray(columns[c][lo:hi], dtype=np.float64))
        write_prepared(out, cols, {**metadata, "marginal": name})
        written.append(out.target)
    return written


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
    """``# key: json`` metadata lines, the header, then the rows (Arrow's CSV writer: text
    quoted, floats in their shortest round-trip form, vectorised); every text cell neutralised
    for spreadsheets (module docstring)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    head = "".join(_metadata_line(key, value) for key, value in metadata.items())
    fh.write((head + ",".join(_csv_name(n) for n in columns) + "\n").encode("utf-8"))
    table = _arrow_table(columns)
    safe = pa.table({n: neutralise_column(table.column(n)) for n in table.column_names})
    pacsv.write_csv(safe, fh, write_options=pacsv.WriteOptions(include_header=False))


def _arrow_table(columns: dict[str, Any]) -> Any:
    """The columns as an Arrow table: ``query`` int64, labels as strings (Arrow arrays pass
    through, e.g. dictionary-encoded marginal names), everything else float64."""
    import pyarrow as pa

    out = {}
    for n, v in columns.items():
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            out[n] = v
        elif n in LABEL_COLUMNS:
            out[n] = pa.array([str(x) for x in v], type=pa.string())
        elif n == "query":
            out[n] = pa.array(np.asarray(v, dtype=np.int64))
        else:
            out[n] = pa.array(np.asarray(v, dtype=np.float64))
    return pa.table(out)


def _value(name: str, v: Any) -> Any:
    if name == "query":
        return int(v)
    return str(v) if name in LABEL_COLUMNS else float(v)


def _json(fh: Any, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    names = list(columns)
    columns = {n: v.to_pylist() if hasattr(v, "to_pylist") else v for n, v in columns.items()}
    rows = [{n: _value(n, columns[n][i]) for n in names} for i in range(len(columns["query"]))]
    text = json.dumps({"metadata": metadata, "answers": rows}, allow_nan=False, ensure_ascii=False)
    fh.write((text + "\n").encode("utf-8"))


def _parquet(fh: Any, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    import pyarrow.parquet as pq

    table = _arrow_table(columns).replace_schema_metadata({"factorize": json.dumps(metadata, allow_nan=False)})
    pq.write_table(table, fh)


def read_answers(path: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The columns and metadata of an answers file written by :func:`write_answers` (any of the
    three formats); :class:`OutputError` for a file that is not one."""
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
                names = line.strip().split(",")
                rows = [r for r in csv.reader(fh) if r]
            cols = {n: _column(n, [_unneutralised(r[j]) if n in LABEL_COLUMNS else r[j] for r in rows])
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
    except (OSError, KeyError, TypeError, ValueError, IndexError) as exc:
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
    if name in LABEL_COLUMNS:
        return np.array([str(v) for v in values], dtype=object)
    return np.array([float(v) for v in values], dtype=np.float64)
