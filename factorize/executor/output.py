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
write its answers before it charges a privacy budget) and refuses a destination that is the
private data, the plan or a ledger file.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from factorize.io.atomic import AtomicOutput, MissingFolderError

FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}
#: Text columns that label answers (kept as strings when read back).
LABEL_COLUMNS = ("label", "marginal", "cell")


def output_format(path: str | os.PathLike[str]) -> str:
    fmt = FORMATS.get(Path(os.fspath(path)).suffix.lower())
    if fmt is None:
        raise ValueError(f"output {os.fspath(path)!r}: unknown suffix; use .csv, .json or .parquet")
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


def open_output(path: str | os.PathLike[str], *, protected: dict[str, Any] | None = None) -> AtomicOutput:
    """The answers file, opened for an all-or-nothing write (module docstring). ``protected``
    maps a role (``"--data"``, ``"the plan"``, ``"the ledger"``) to paths the output must not
    overwrite; a suffix other than .csv/.json/.parquet is refused too."""
    output_format(path)
    for role, other in (protected or {}).items():
        for p in (other if isinstance(other, (list, tuple)) else [other]):
            if p is not None and same_file(path, p):
                raise ValueError(f"--out {os.fspath(path)!r} is {role}: refusing to overwrite it")
    try:
        return AtomicOutput(path)
    except MissingFolderError as exc:
        raise ValueError(f"--out {os.fspath(path)!r}: {exc}") from None
    except OSError as exc:
        raise ValueError(f"cannot write the answers to {os.fspath(path)!r} ({exc.strerror or type(exc).__name__})") from None


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
    """Write atomically (open, write, commit)."""
    with open_output(path) as out:
        write_prepared(out, columns, metadata, on_partial=on_partial)


#: The answer columns a tidy marginal table carries after its attribute columns.
TIDY_COLUMNS = ("estimate", "std_error", "ci_low", "ci_high", "estimate_postprocessed")


def check_tables_folder(folder: str | os.PathLike[str]) -> Path:
    """``--tables``: an existing folder (checked before anything irreversible happens)."""
    p = Path(os.fspath(folder))
    if not p.is_dir():
        raise ValueError(f"--tables {os.fspath(folder)!r}: the folder does not exist; create it "
                         "first (factorize does not create folders)")
    return p


def open_marginal_tables(folder: str | os.PathLike[str], tables: list, *,
                         protected: dict[str, Any] | None = None) -> list[tuple[Any, AtomicOutput]]:
    """Open one output per marginal table (``executor.labels.marginal_tables``) in ``folder``
    before anything irreversible happens: ``<attributes joined by __>.csv`` (``total.csv``
    for the empty marginal)."""
    folder = check_tables_folder(folder)
    opened: list[tuple[Any, AtomicOutput]] = []
    try:
        for t in tables:
            stem = "__".join("".join(c if c.isalnum() or c in "-_." else "_" for c in a)
                             for a in t[0].split(",")) or "total"
            opened.append((t, open_output(folder / f"{stem}.csv", protected=protected)))
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


def _csv(fh: Any, columns: dict[str, Any], metadata: dict[str, Any]) -> None:
    """``# key: json`` metadata lines, the header, then the rows (Arrow's CSV writer: labels
    quoted, floats in their shortest round-trip form, vectorised)."""
    import pyarrow.csv as pacsv

    names = list(columns)
    head = "".join(f"# {key}: {json.dumps(value, allow_nan=False, ensure_ascii=False)}\n"
                   for key, value in metadata.items())
    fh.write((head + ",".join(names) + "\n").encode("utf-8"))
    pacsv.write_csv(_arrow_table(columns), fh, write_options=pacsv.WriteOptions(include_header=False))


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
    three formats); ValueError for a file that is not one."""
    p = Path(os.fspath(path))
    fmt = output_format(p)
    try:
        if fmt == "csv":
            meta: dict[str, Any] = {}
            with open(p, encoding="utf-8") as fh:
                line = fh.readline()
                while line.startswith("# "):
                    key, _, value = line[2:].rstrip("\n").partition(": ")
                    meta[key] = json.loads(value)
                    line = fh.readline()
                names = line.strip().split(",")
                rows = [r for r in csv.reader(fh) if r]
            cols = {n: _column(n, [r[j] for r in rows]) for j, n in enumerate(names)}
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
        raise ValueError(f"{p}: not a factorize answers file ({type(exc).__name__}: {exc})") from None
    if "query" not in cols or "estimate" not in cols:
        raise ValueError(f"{p}: not a factorize answers file (no query/estimate columns)")
    cols["query"] = cols["query"].astype(np.int64)
    return cols, meta


def _column(name: str, values: list[Any]) -> np.ndarray:
    if name in LABEL_COLUMNS:
        return np.array([str(v) for v in values], dtype=object)
    return np.array([float(v) for v in values], dtype=np.float64)
