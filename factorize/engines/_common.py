"""Checks shared by the histogram engines (internal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from factorize.errors import InternalError
from workloads.domain import Domain

from .errors import DataError

__all__ = ["MAX_COUNT", "MAX_HISTOGRAM_CELLS", "RAW_VALUES_HINT", "Problems", "check_counts",
           "check_domain", "format_problems", "format_schema_problems", "rows", "row_major_strides"]

#: Added to a message about values that are not integer codes (a domain of sizes only).
RAW_VALUES_HINT = ("if a column holds raw values (labels, numbers to bin) rather than integer codes, "
                   "describe them in a public domain schema and pass it as --domain (docs/schema.md)")
#: Added to a message about values outside a domain schema.
SCHEMA_HINT = ("give such values a code in the schema (\"outside\": \"catch_all\", or \"clamp\" for an "
               "integer or numeric attribute; docs/schema.md) or correct the data")

#: Largest domain (number of cells ``N``) the engines build a histogram for. Cell indices
#: then fit comfortably in a signed 64-bit integer; larger domains must be handled through
#: marginals (project the domain onto a few attributes).
MAX_HISTOGRAM_CELLS = 2**40

#: Counts (every cell and the total) must stay below 2**53: then they are exact in float64
#: (the executor computes A·h in floating point) and no int64 sum of them can overflow.
MAX_COUNT = 2**53
_SUM_CHUNK = 1 << 10  # 2**10 counts each < 2**53 sum below 2**63: no int64 overflow


def row_major_strides(sizes: Any) -> list[int]:
    """Strides of C (row-major) order: cell ``Σ_j code_j · stride_j``, the first attribute
    slowest (Python ints: no overflow however large the product)."""
    sizes = [int(n) for n in sizes]
    strides = [1] * len(sizes)
    for j in range(len(sizes) - 2, -1, -1):
        strides[j] = strides[j + 1] * sizes[j + 1]
    return strides


def rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def check_domain(domain: Any) -> Domain:
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    n_cells = domain.size
    if n_cells > MAX_HISTOGRAM_CELLS:
        raise DataError(
            f"the domain has N={n_cells} cells (> 2**40 = {MAX_HISTOGRAM_CELLS}); a dense histogram "
            f"of it cannot be built. Use marginals instead: histogram a projection onto a few "
            f"attributes, e.g. domain.project([...])"
        )
    return domain


def check_counts(h: np.ndarray, where: str) -> int:
    """The exact total of the non-negative int64 counts ``h``; :class:`DataError` if a count
    or the total reaches :data:`MAX_COUNT` (2**53). Computed without int64 overflow (never
    a wrapped-around sum); the message quotes the limit only, never a count (the number of
    such entries is in the error's ``holder_message``)."""
    h = np.asarray(h)
    if h.dtype != np.int64 or h.ndim != 1:
        raise InternalError(f"check_counts needs a 1-D int64 array, got {h.dtype} {h.shape}")
    if h.size == 0:
        return 0
    big = int(np.count_nonzero(h >= MAX_COUNT))
    if big:
        limit = f"at least 2**53 = {MAX_COUNT}, the largest count supported (counts must be exact in float64)"
        what = "1 entry is" if big == 1 else f"{big} entries are"
        raise DataError(f"{where}: one or more entries are {limit}", holder_message=f"{where}: {what} {limit}")
    if int(h.max()) * h.size < MAX_COUNT:  # fast path: the int64 sum cannot overflow
        return int(h.sum())
    s = h
    while s.size > 1:  # sums of 2**10 values < 2**53 stay below 2**63; stop once one reaches 2**53
        s = np.add.reduceat(s, np.arange(0, s.size, _SUM_CHUNK))
        if int(s.max()) >= MAX_COUNT:
            raise DataError(f"{where}: the total count is at least 2**53 = {MAX_COUNT}, the largest "
                            f"supported (counts must be exact in float64)")
    return int(s[0])


class Problems(NamedTuple):
    """One refusal of invalid values, rendered twice from the same counts: ``public`` names
    the columns and the kinds of problem only (what ``run`` prints: the plan's author chose
    the domain, so a count would be a free query on the records), ``counted`` adds the rows
    per column and kind and the number of records (for the data holder's ``factorize data
    check`` only; NOT differentially private)."""

    public: str
    counted: str

    def error(self, subject: str) -> DataError:
        """The :class:`DataError` of this refusal about ``subject`` (a file, a table)."""
        return DataError(f"{subject}: {self.public}", holder_message=f"{subject}: {self.counted}")


#: Said in every public refusal of invalid values: why no count is shown, and where it is.
COUNTS_WITHHELD = ("values and counts are not shown: the records are private; the data holder "
                   "gets the counts with `factorize data check`")


def _column_parts(columns: Sequence[tuple[str, tuple[tuple[int, str], ...]]], counted: bool) -> list[str]:
    """``column 'name': 3 rows missing …, 1 row not an integer`` (``counted``) or ``column
    'name': rows missing …, rows not an integer`` for every column with a nonzero count: each
    column given as its name and its ``(count, what)`` pairs, in order."""
    parts = []
    for name, kinds in columns:
        said = [f"{rows(n) if counted else 'rows'} {what}" for n, what in kinds if n]
        if said:
            parts.append(f"column {name!r}: " + ", ".join(said))
    return parts


def _problems(columns: Sequence[tuple[str, tuple[tuple[int, str], ...]]], n_rows: int, what: str,
              hint: str) -> Problems | None:
    """The two renderings (:class:`Problems`) of per-column counts, or None if all are zero."""
    public = _column_parts(columns, counted=False)
    if not public:
        return None
    counted = _column_parts(columns, counted=True)
    return Problems(
        public=f"{what} ({COUNTS_WITHHELD}): " + "; ".join(public) + hint,
        counted=(f"{what} in {len(counted)} column(s) of {rows(n_rows)} (NOT differentially "
                 f"private: for the data holder only): " + "; ".join(counted) + hint),
    )


def format_problems(
    names: list[str],
    sizes: list[int],
    counts: list[tuple[int, int, int]],
    n_rows: int,
) -> Problems | None:
    """The refusal (:class:`Problems`) for per-column counts ``(missing, non_integer,
    out_of_range)``, or None if all are zero. The public rendering depends on the data only
    through which counts are nonzero."""
    columns = [(name, ((missing, "missing (NULL/empty/NaN)"), (nonint, "not an integer"),
                       (oor, f"outside 0..{size - 1}")))
               for name, size, (missing, nonint, oor) in zip(names, sizes, counts, strict=True)]
    hint = f" ({RAW_VALUES_HINT})" if any(c[1] for c in counts) else ""
    return _problems(columns, n_rows, "invalid values", hint)


def text_columns_error(columns: list[str], what: str) -> DataError:
    """The refusal of text columns in a typed source (Parquet, a DuckDB table, a Spark
    DataFrame) under a domain of sizes only — the same words from every engine."""
    return DataError(
        f"column(s) {columns} of {what} hold text, and the domain gives sizes only: integer "
        "codes must be stored as integers (rewrite the column with an integer type), or "
        "give --domain a domain schema (docs/schema.md) that lists the column's values")


def format_schema_problems(schema: Any, counts: list[tuple[int, int, int]], n_rows: int) -> Problems | None:
    """The refusal (:class:`Problems`) for per-column counts ``(missing, unparsed, outside)``
    of raw values mapped by a :class:`workloads.schema.DomainSchema`, or None if all are zero
    (names the rule each broke, from the public schema; never a value)."""
    columns = [(attr.name, ((missing, "missing (NULL/empty/NaN)"), (unparsed, attr.unparsed_text()),
                            (outside, attr.rule_text())))
               for attr, (missing, unparsed, outside) in zip(schema.attributes, counts, strict=True)]
    return _problems(columns, n_rows, "values outside the domain schema", f" ({SCHEMA_HINT})")
