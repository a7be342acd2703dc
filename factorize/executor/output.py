"""Writing released answers: CSV, JSON or Parquet (by suffix), atomically.

Columns: ``query`` (row index of W), ``estimate``, ``std_error``, ``ci_low``, ``ci_high`` and,
with post-processing, ``estimate_postprocessed``. Metadata (plan digests, guarantee, noise,
CI method, ``test_mode``) goes in ``# key: value`` comment lines at the top of a CSV, under
``"metadata"`` in JSON, and in the Parquet schema metadata (key ``factorize``). The file is
written to a temporary file in the destination folder and moved into place with
``os.replace``: a failure leaves no partial file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from factorize.io.atomic import atomic_target

FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".pq": "parquet"}


def output_format(path: str | os.PathLike[str]) -> str:
    fmt = FORMATS.get(Path(os.fspath(path)).suffix.lower())
    if fmt is None:
        raise ValueError(f"output {os.fspath(path)!r}: unknown suffix; use .csv, .json or .parquet")
    return fmt


def write_answers(path: str | os.PathLike[str], columns: dict[str, np.ndarray],
                  metadata: dict[str, Any], *, on_partial: Any = None) -> None:
    """Write atomically; ``on_partial`` (fault injection) is called with the temporary file
    half written — a crash there leaves no file at ``path``."""
    p = Path(os.fspath(path))
    fmt = output_format(p)
    with atomic_target(p) as tmp:
        if fmt == "csv":
            _csv(tmp, columns, metadata)
        elif fmt == "json":
            _json(tmp, columns, metadata)
        else:
            _parquet(tmp, columns, metadata)
        if on_partial is not None:
            on_partial()


def _csv(tmp: str, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    names = list(columns)
    k = len(columns["query"])
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        for key, value in metadata.items():
            fh.write(f"# {key}: {json.dumps(value, allow_nan=False, ensure_ascii=False)}\n")
        fh.write(",".join(names) + "\n")
        cols = [columns[n] for n in names]
        lines = []
        for i in range(k):
            lines.append(",".join(str(int(c[i])) if j == 0 else repr(float(c[i]))
                                  for j, c in enumerate(cols)))
        fh.write("\n".join(lines) + ("\n" if lines else ""))


def _json(tmp: str, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    names = list(columns)
    rows = [{n: (int(columns[n][i]) if n == "query" else float(columns[n][i])) for n in names}
            for i in range(len(columns["query"]))]
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"metadata": metadata, "answers": rows}, fh, allow_nan=False, ensure_ascii=False)
        fh.write("\n")


def _parquet(tmp: str, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({n: pa.array(v) for n, v in columns.items()})
    table = table.replace_schema_metadata({"factorize": json.dumps(metadata, allow_nan=False)})
    pq.write_table(table, tmp)


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
                rows = [r.split(",") for r in fh.read().splitlines() if r]
            cols = {n: np.array([float(r[j]) for r in rows]) for j, n in enumerate(names)}
        elif fmt == "json":
            with open(p, encoding="utf-8") as fh:
                doc = json.load(fh)
            meta = doc["metadata"]
            rows = doc["answers"]
            names = list(rows[0]) if rows else ["query", "estimate"]
            cols = {n: np.array([float(r[n]) for r in rows]) for n in names}
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(p)
            meta = json.loads(table.schema.metadata[b"factorize"])
            cols = {n: np.asarray(table.column(n).to_numpy(), dtype=np.float64) for n in table.column_names}
    except (OSError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"{p}: not a factorize answers file ({type(exc).__name__}: {exc})") from None
    if "query" not in cols or "estimate" not in cols:
        raise ValueError(f"{p}: not a factorize answers file (no query/estimate columns)")
    cols["query"] = cols["query"].astype(np.int64)
    return cols, meta
