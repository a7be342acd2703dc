"""``factorize run --tables FOLDER``: one tidy CSV per table of the release.

Every part of the workload's ``vstack`` is a table with a name (``executor.labels``: the
spec's ``table(NAME,SPEC)``, else the attributes it crosses and its form, ``age,sex`` or
``cdf(age) by sex``), for every plan kind. Its file holds the release's metadata in ``#``
lines (with ``table``: the table's name), then one row per cell of the table: the table's
attribute columns in label form (value labels from the public schema, codes without one; an
interval for a CDF or range form, ``age ≤ 37``, ``age in [25, 34]``), then whichever of
``estimate``, ``std_error``, ``ci_low``, ``ci_high`` and ``estimate_postprocessed`` the plan
kind releases — the very numbers of the answers file's rows of that table.

File names (:func:`table_file_names`): the table's name, its comma-separated parts joined by
``__`` and every character but letters, digits, ``-``, ``_`` and ``.`` replaced by ``_``
(``age,sex`` → ``age__sex.csv``, ``cdf(age) by sex`` → ``cdf_age__by_sex.csv``, the empty
marginal ``total.csv``), at most :data:`MAX_STEM` characters, a leading ``.`` replaced; two
tables whose names would give the same file — exactly or but for case, which a
case-insensitive file system does not tell apart — get ``-2``, ``-3``, … in table order.

Every file is opened (:func:`open_tables`) with the answers file, before the verification and
the charge, and refused there as ``--out`` is (``output.open_output``: an existing file without
``--overwrite``, a folder, the data, the plan, a ledger file, ``--out``); all are written after
the answers, each all or nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from factorize.io.atomic import AtomicOutput

from .labels import Table
from .output import OutputError, open_output, write_prepared

#: The answer columns a table file carries after its attribute columns, when released.
TIDY_COLUMNS = ("estimate", "std_error", "ci_low", "ci_high", "estimate_postprocessed")
#: Longest file name stem (before the ``-n`` that keeps it unique and ``.csv``).
MAX_STEM = 120


def check_tables_folder(folder: str | os.PathLike[str]) -> Path:
    """``--tables``: an existing folder (checked before anything irreversible happens)."""
    p = Path(os.fspath(folder))
    if not p.is_dir():
        raise OutputError(f"--tables {os.fspath(folder)!r}: the folder does not exist; create it "
                          "first (factorize does not create folders)")
    return p


def table_file_stem(name: str) -> str:
    """The file name stem of the table ``name`` (module docstring), before it is made unique."""
    stem = "__".join("".join(c if c.isalnum() or c in "-_." else "_" for c in part.strip())
                     for part in name.split(","))
    stem = stem[:MAX_STEM] or "table"
    return "_" + stem[1:] if stem.startswith(".") else stem


def table_file_names(tables: Sequence[Table]) -> list[str]:
    """One distinct file name per table, in table order (module docstring)."""
    used: set[str] = set()
    out = []
    for t in tables:
        stem = table_file_stem(t.name)
        name, n = f"{stem}.csv", 1
        while name.casefold() in used:
            n += 1
            name = f"{stem}-{n}.csv"
        used.add(name.casefold())
        out.append(name)
    return out


def open_tables(folder: str | os.PathLike[str], tables: Sequence[Table], *,
                protected: dict[str, Any] | None = None,
                overwrite: bool = False) -> list[tuple[Table, AtomicOutput]]:
    """Open one output per table in ``folder`` (:func:`table_file_names`), each refused as
    :func:`~factorize.executor.output.open_output` refuses ``--out``; on a refusal the ones
    already opened are abandoned (nothing is written)."""
    base = check_tables_folder(folder)
    opened: list[tuple[Table, AtomicOutput]] = []
    try:
        for t, name in zip(tables, table_file_names(tables), strict=True):
            opened.append((t, open_output(base / name, protected=protected, overwrite=overwrite,
                                          option="--tables file")))
    except BaseException:
        for _, out in opened:
            out.abort()
        raise
    return opened


def write_tables(opened: list[tuple[Table, AtomicOutput]], columns: dict[str, Any],
                 metadata: dict[str, Any]) -> list[Path]:
    """Write the tables opened by :func:`open_tables` from the answers' ``columns``: the table's
    attribute columns, then its rows of :data:`TIDY_COLUMNS`; the release's metadata and the
    table's name in ``#`` lines."""
    import pyarrow as pa

    written = []
    for t, out in opened:
        cols: dict[str, Any] = t.cells()
        for c in TIDY_COLUMNS:
            if c in columns:
                cols[c] = pa.array(np.asarray(columns[c][t.start:t.stop], dtype=np.float64))
        write_prepared(out, cols, {**metadata, "table": t.name})
        written.append(out.target)
    return written
