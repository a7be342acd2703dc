"""Private input: a histogram over the plan's Domain, or marginal tables of it, from a
histogram file or records.

``.npy``: a histogram (validated by ``engines.histogram_from_npy``: length N, finite,
non-negative integers, no pickle). ``.csv`` / ``.parquet`` / ``.pq``: records whose columns
are the Domain's attributes, aggregated inside DuckDB (``engines.histogram_duckdb``,
``engines.marginals_duckdb``) or Spark without loading the records into Python objects.
``FILE.duckdb::TABLE``: a table or view of a DuckDB database file (attached read-only;
DuckDB engine). When the plan's Domain carries a public schema (``docs/schema.md``), the
records hold raw values and the engine maps them to codes with the schema's rules.
:func:`load_histogram` gives the dense histogram (domains up to 2**40 cells);
:func:`load_marginals` gives marginal tables on attribute subsets (records: domains of any
size, memory proportional to the measured cells). Every problem raises
``engines.DataError``, whose messages never contain record values nor numbers derived from
the records (rows per column, the record count, a line number: the plan's author chooses the
domain they are checked against, so such a number would be a free query). The same errors
carry those numbers in ``holder_message``; :func:`count_records` runs the same checks for the
data holder's ``factorize data check``, which prints them (NOT differentially private).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from factorize.engines import (
    MAX_HISTOGRAM_CELLS,
    DataError,
    MarginalTables,
    histogram_duckdb,
    histogram_from_npy,
    marginals_duckdb,
    marginals_from_histogram,
    normalize_subsets,
)
from factorize.engines._common import check_counts
from workloads import Domain

SUFFIXES = {".npy": "histogram", ".csv": "records", ".parquet": "records", ".pq": "records"}


ENGINES = ("duckdb", "spark")


def _table(path: str | os.PathLike[str], engine: str) -> Any:
    """The DuckDB table named by ``FILE.duckdb::TABLE`` (None for a file path); refused with
    ``--engine spark``."""
    from factorize.engines.duckdb_engine import parse_table_ref

    ref = parse_table_ref(os.fspath(path))
    if ref is not None and engine != "duckdb":
        raise DataError(f"--data {str(ref)!r} names a DuckDB table, which --engine {engine} cannot "
                        "read; use --engine duckdb (the default), or give Spark a CSV or Parquet path")
    return ref


def _data_file(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """The data file and its kind (``SUFFIXES``): a DataError for an unknown type or a
    missing file."""
    p = Path(os.fspath(path))
    kind = SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise DataError(f"data file {str(p)!r}: unknown type {p.suffix!r}; expected a histogram "
                        ".npy, records .csv / .parquet, or a DuckDB table as --data FILE.duckdb::TABLE")
    if not p.is_file():
        raise DataError(f"data file {str(p)!r} does not exist")
    return p, kind


def load_histogram(path: str | os.PathLike[str], domain: Domain, *,
                   allow_extra_columns: bool = False, engine: str = "duckdb") -> np.ndarray:
    """The histogram (int64, length ``domain.size``); extra record columns are an error unless
    ``allow_extra_columns`` (e.g. a plan over a few attributes of a wide table).

    ``engine``: ``duckdb`` (embedded, default) or ``spark`` (``engines.spark_engine``: the
    aggregation runs where the records are — a path Spark can read, local or in a data lake —
    and only the histogram comes back)."""
    if engine not in ENGINES:
        raise DataError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    table = _table(path, engine)
    if table is not None:
        h = np.asarray(histogram_duckdb(table, domain, allow_extra_columns=allow_extra_columns), dtype=np.int64)
        if check_counts(h, f"--data {str(table)!r}") <= 0:
            raise DataError(f"--data {str(table)!r}: the dataset is empty")
        return h
    if engine == "spark" and SUFFIXES.get(Path(os.fspath(path)).suffix.lower()) != "histogram":
        from factorize.engines.spark_engine import histogram_spark

        h = np.asarray(histogram_spark(os.fspath(path), domain,
                                       allow_extra_columns=allow_extra_columns), dtype=np.int64)
        if check_counts(h, f"data {os.fspath(path)!r}") <= 0:
            raise DataError(f"data {os.fspath(path)!r}: the dataset is empty")
        return h
    p, kind = _data_file(path)
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


def load_marginals(path: str | os.PathLike[str], domain: Domain, subsets: Sequence[Sequence[int]], *,
                   allow_extra_columns: bool = False, engine: str = "duckdb") -> MarginalTables:
    """Marginal tables of the data on the attribute ``subsets`` (strictly increasing tuples of
    attribute indices; ``()`` is the total; repeats measured once): ``n_records`` and, per
    subset, an int64 vector in C order over its attributes (smallest index slowest), equal
    to the dense histogram's ``reshape(sizes).sum(other axes).ravel()``.

    Records (``.csv`` / ``.parquet`` / ``.pq``, or ``FILE.duckdb::TABLE``) are aggregated by ``engine``: ``duckdb``
    (``engines.marginals_duckdb``, default) or ``spark`` (``spark_engine.marginals_spark``:
    the aggregation runs where the records are and only the tables come back); the domain
    may have any number of cells. A histogram ``.npy`` is validated exactly as by
    :func:`load_histogram` and summed out (exact int64), so it needs a domain of at most
    2**40 cells. Extra record columns are an error unless ``allow_extra_columns``; an empty
    dataset is refused as by :func:`load_histogram`. Raises ``engines.DataError`` (messages
    never contain record values); a malformed subset is a :class:`ValueError`.
    """
    if engine not in ENGINES:
        raise DataError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    subs = normalize_subsets(domain, subsets)  # before any data is read
    table = _table(path, engine)
    if table is not None:
        m = marginals_duckdb(table, domain, subs, allow_extra_columns=allow_extra_columns)
        if m.n_records <= 0:  # defensive: the engine refuses empty data itself
            raise DataError(f"--data {str(table)!r}: the dataset is empty")
        return m
    if engine == "spark" and SUFFIXES.get(Path(os.fspath(path)).suffix.lower()) != "histogram":
        from factorize.engines.spark_engine import marginals_spark

        m = marginals_spark(os.fspath(path), domain, subs, allow_extra_columns=allow_extra_columns)
        if m.n_records <= 0:  # defensive: the engine refuses empty data itself
            raise DataError(f"data {os.fspath(path)!r}: the dataset is empty")
        return m
    p, kind = _data_file(path)
    if kind == "histogram":
        if domain.size > MAX_HISTOGRAM_CELLS:
            raise DataError(
                f"data file {str(p)!r}: a dense histogram (.npy) cannot be used for a domain of "
                f"N={domain.size} cells (> 2**40); give the records (.csv / .parquet) instead"
            )
        h = np.asarray(histogram_from_npy(p, domain), dtype=np.int64)
        if h.shape != (domain.size,):  # defensive: histogram_from_npy guarantees it
            raise DataError(f"data file {str(p)!r}: histogram of length {h.shape}, expected {domain.size}")
        if check_counts(h, f"data file {str(p)!r}") <= 0:
            raise DataError(f"data file {str(p)!r}: the dataset is empty")
        m = marginals_from_histogram(h, domain, subs)
    else:
        m = marginals_duckdb(p, domain, subs, allow_extra_columns=allow_extra_columns)
    if m.n_records <= 0:  # defensive: the engines refuse empty data themselves
        raise DataError(f"data file {str(p)!r}: the dataset is empty")
    return m


def count_records(path: str | os.PathLike[str], domain: Domain, *, allow_extra_columns: bool = False,
                  engine: str = "duckdb") -> int:
    """The exact number of records of ``path`` over ``domain``, after every check that
    :func:`load_histogram` / :func:`load_marginals` (so ``factorize run``) makes -- the same
    code path (marginal tables of the empty subset only). NOT differentially private: for
    the data holder (``factorize data check``), never for a plan's author. A refusal is the
    :class:`DataError` ``run`` would raise; its ``holder_message`` has the counts."""
    return int(load_marginals(path, domain, [()], allow_extra_columns=allow_extra_columns,
                              engine=engine).n_records)
