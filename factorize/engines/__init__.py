"""Execution engines: turn private records into a histogram ``h`` over a :class:`workloads.Domain`.

- :func:`histogram_duckdb`: from a CSV or Parquet file or a DuckDB table / view
  (``"FILE.duckdb::TABLE"``, :class:`DuckDBTable`), computed inside an embedded DuckDB
  (records are never loaded as Python objects). With a domain that carries a public schema
  (``docs/schema.md``) the records hold raw values, mapped to codes in SQL.
- :func:`histogram_numpy`: from an in-memory ``(n, d)`` records array (reference engine).
- :func:`histogram_from_npy`: load and validate a histogram saved with ``np.save``.
- :func:`distinct_records_duckdb`: the records' distinct value tuples with counts (no dense
  histogram; for sums over records such as second moments).
- :func:`marginals_duckdb`: marginal tables (histograms of projections onto attribute subsets)
  of the records, for domains of any size (memory proportional to the measured cells, never
  to ``N``), as a :class:`MarginalTables`; :func:`marginals_from_histogram` sums them out of
  a dense histogram.
- ``spark_engine.histogram_spark`` / ``spark_engine.marginals_spark``: the same histogram /
  marginals computed inside Spark (local mode or a cluster; a path Spark can read or a
  DataFrame) — imported from its module, not here, so that importing the engines never starts
  a JVM or needs pyspark.

The histogram engines return int64 arrays of length ``domain.size`` in the cell order of
:meth:`workloads.Domain.index`; marginal tables use the same (row-major) order restricted to
their attributes. All raise :class:`DataError`, whose messages never contain record values.
"""

from ._common import MAX_HISTOGRAM_CELLS
from .duckdb_engine import (
                            INTEGER_PATTERN,
                            DuckDBTable,
                            distinct_records_duckdb,
                            histogram_duckdb,
                            marginals_duckdb,
)
from .errors import DataError
from .marginal_tables import (
                            MAX_MARGINAL_CELLS,
                            MarginalTables,
                            SparseTable,
                            marginals_from_histogram,
                            normalize_subsets,
)
from .numpy_engine import histogram_from_npy, histogram_numpy

__all__ = [
    "DuckDBTable",
    "INTEGER_PATTERN",
    "MAX_HISTOGRAM_CELLS",
    "MAX_MARGINAL_CELLS",
    "DataError",
    "MarginalTables",
    "SparseTable",
    "histogram_duckdb",
    "distinct_records_duckdb",
    "histogram_from_npy",
    "histogram_numpy",
    "marginals_duckdb",
    "marginals_from_histogram",
    "normalize_subsets",
]
