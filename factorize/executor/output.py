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
                  metadata: dict[str, Any]) -> None:
    p = Path(os.fspath(path))
    fmt = output_format(p)
    with atomic_target(p) as tmp:
        if fmt == "csv":
            _csv(tmp, columns, metadata)
        elif fmt == "json":
            _json(tmp, columns, metadata)
        else:
            _parquet(tmp, columns, metadata)


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
