"""Private input: a histogram over the plan's Domain, from a histogram file or records.

``.npy``: a histogram (validated by ``engines.histogram_from_npy``: length N, finite,
non-negative integers, no pickle). ``.csv`` / ``.parquet`` / ``.pq``: records whose columns
are the Domain's attributes, aggregated inside DuckDB (``engines.histogram_duckdb``) without
loading the records into Python objects. Every problem raises ``engines.DataError``, whose
messages never contain record values.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from factorize.engines import DataError, histogram_duckdb, histogram_from_npy
from factorize.engines._common import check_counts
from workloads import Domain

SUFFIXES = {".npy": "histogram", ".csv": "records", ".parquet": "records", ".pq": "records"}


ENGINES = ("duckdb", "spark")


def load_histogram(path: str | os.PathLike[str], domain: Domain, *,
                   allow_extra_columns: bool = False, engine: str = "duckdb") -> np.ndarray:
    """The histogram (int64, length ``domain.size``); extra record columns are an error unless
    ``allow_extra_columns`` (e.g. a plan over a few attributes of a wide table).

    ``engine``: ``duckdb`` (embedded, default) or ``spark`` (``engines.spark_engine``: the
    aggregation runs where the records are — a path Spark can read, local or in a data lake —
    and only the histogram comes back)."""
    if engine not in ENGINES:
        raise DataError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    if engine == "spark" and SUFFIXES.get(Path(os.fspath(path)).suffix.lower()) != "histogram":
        from factorize.engines.spark_engine import histogram_spark

        h = np.asarray(histogram_spark(os.fspath(path), domain,
                                       allow_extra_columns=allow_extra_columns), dtype=np.int64)
        if check_counts(h, f"data {os.fspath(path)!r}") <= 0:
            raise DataError(f"data {os.fspath(path)!r}: the dataset is empty")
        return h
    p = Path(os.fspath(path))
    kind = SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise DataError(f"data file {str(p)!r}: unknown type {p.suffix!r}; expected a histogram "
                        ".npy or records .csv / .parquet")
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist")
    if kind == "histogram":
        h = histogram_from_npy(p, domain)
    else:
        h = histogram_duckdb(p, domain, allow_extra_columns=allow_extra_columns)
    h = np.asarray(h, dtype=np.int64)
    if h.shape != (domain.size,):  # defensive: the engines guarantee it
        raise DataError(f"data file {str(p)!r}: histogram of length {h.shape}, expected {domain.size}")
    if check_counts(h, f"data file {str(p)!r}") <= 0:
        raise DataError(f"data file {str(p)!r}: the dataset is empty")
    return h
