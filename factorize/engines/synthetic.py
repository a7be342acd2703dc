"""Synthetic PUBLIC test records for benchmarks and tests of the engines.

The records written here are made-up data drawn from an explicitly seeded NumPy
:class:`numpy.random.Generator`: they are public, reproducible test inputs, NOT privacy
noise. Nothing in this module may be used to draw the noise of a differentially private
release (that noise comes from the executor's own secure sampler).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workloads.domain import Domain

from .errors import DataError

__all__ = ["synthetic_domain", "synthetic_records"]

_CHUNK = 1 << 18  # records per Parquet row group (bounded memory while writing)


def synthetic_domain(sizes: Sequence[int], prefix: str = "x") -> Domain:
    """The domain of :func:`synthetic_records`: attributes ``x0, x1, ...`` with ``sizes``."""
    return Domain([f"{prefix}{j}" for j in range(len(sizes))], list(sizes))


def synthetic_records(
    n: int,
    sizes: Sequence[int],
    seed: int,
    path: str | os.PathLike[str],
    *,
    correlation: float = 0.0,
    prefix: str = "x",
) -> Path:
    """Write ``n`` synthetic PUBLIC records over ``sizes`` to the Parquet file ``path``.

    Column ``{prefix}{j}`` (attribute ``j`` of :func:`synthetic_domain`) holds codes in
    ``0 .. sizes[j]-1`` as the smallest unsigned integer type that fits. With
    ``correlation = 0`` every code is independent and uniform; with ``0 < correlation <= 1``
    attribute ``j > 0`` copies attribute ``j-1`` (reduced modulo ``sizes[j]``) with that
    probability and is uniform otherwise (a mildly correlated chain).

    The draws come from ``numpy.random.default_rng(seed)`` (explicitly seeded, reproducible):
    this is public test data for benchmarks and tests, never differential-privacy noise.
    Written in row groups of 2**18 records, so memory stays bounded for large ``n``.
    Returns the path.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise DataError(f"n must be a non-negative int, got {n!r}")
    sizes = [int(s) for s in sizes]
    if not sizes or any(s < 1 for s in sizes):
        raise DataError("sizes must be a non-empty sequence of positive ints")
    if not 0.0 <= float(correlation) <= 1.0:
        raise DataError(f"correlation must be in [0, 1], got {correlation!r}")
    domain = synthetic_domain(sizes, prefix)
    dtypes = [np.min_scalar_type(s - 1) for s in sizes]
    schema = pa.schema([pa.field(a, pa.from_numpy_dtype(t)) for a, t in zip(domain.attributes, dtypes, strict=True)])
    rng = np.random.default_rng(seed)
    p = Path(os.fspath(path))
    with pq.ParquetWriter(p, schema) as writer:
        done = 0
        while done < n or (n == 0 and done == 0):
            m = min(_CHUNK, n - done)
            cols: list[np.ndarray] = []
            prev: np.ndarray | None = None
            for s, t in zip(sizes, dtypes, strict=True):
                col = rng.integers(0, s, m, dtype=np.int64)
                if prev is not None and correlation > 0.0:
                    copy = rng.random(m) < correlation
                    col = np.where(copy, prev % s, col)
                cols.append(col.astype(t))
                prev = col
            writer.write_table(pa.Table.from_arrays([pa.array(c) for c in cols], schema=schema))
            done += m
            if n == 0:
                break
    return p
