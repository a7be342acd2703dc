"""Marginal tables of private records: the result type, subset checks and the scan planner.

A *marginal* on a subset ``S`` of attribute indices (sorted, strictly increasing) is the
histogram of the records projected onto the attributes of ``S``: an int64 vector of length
``Π_{j∈S} sizes[j]`` in C (row-major) order over the attributes of ``S`` in increasing index
order (the attribute with the smallest index varies slowest). It equals
``h.reshape(sizes).sum(axis=<other attributes>).ravel()`` for the dense histogram ``h``,
without ever building ``h``: the engines (:func:`engines.marginals_duckdb`,
``spark_engine.marginals_spark``) need memory proportional to the cells they measure, not
to the domain size ``N`` (which may be 10**30 or more). ``()`` is the total (one cell,
the number of records).

How the engines measure a set of subsets (:func:`plan_scans`): only the *maximal* requested
subsets (those contained in no other requested subset) need a grouped scan of the records;
every other requested subset is summed out of a measured table containing it, exactly, in
int64 (counts and totals are below 2**53, see :func:`._common.check_counts`). Moreover a scan
may group on a *superset* ``T`` of several maximal subsets as long as ``T`` has at most
``budget`` cells: one scan grouped on ``T`` then serves every requested subset contained in
``T``. The planner covers the maximal subsets greedily with such supersets; this is a pure
function of the domain sizes, the requested subsets and the budget -- it never looks at the
records. E.g. all 4,060 3-way subsets of 30 attributes of sizes 2..10 are covered by 347
scans of 3- to 8-way tables (mostly 5- to 7-way) of at most 2**15 cells.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from factorize.errors import InternalError
from workloads.domain import Domain
from workloads.errors import DenseTooLargeError, WorkloadError

from ._common import MAX_HISTOGRAM_CELLS, check_counts
from .errors import DataError

__all__ = [
    "MAX_MARGINAL_CELLS",
    "DENSE_TABLE_CELLS",
    "MarginalTables",
    "SparseTable",
    "Subset",
    "TableBuilder",
    "marginals_from_histogram",
    "maximal_subsets",
    "normalize_subsets",
    "plan_scans",
    "subset_cells",
]

Subset = tuple[int, ...]

#: Largest marginal table (number of cells) that may be requested: its cell indices fit in
#: a signed 64-bit integer with room to spare, as for the dense histogram.
MAX_MARGINAL_CELLS = MAX_HISTOGRAM_CELLS

#: Largest requested table held densely (int64, 128 MiB); a larger one is kept as the
#: records' distinct cells and their counts (:class:`SparseTable`), so memory follows the
#: data (at most n cells), never the table's size.
DENSE_TABLE_CELLS = 2**24


class SparseTable:
    """A marginal table held by its non-zero cells: ``cells`` (sorted, distinct C-order
    indices over the subset's attributes, int64) and ``counts`` (int64, > 0), over a table of
    ``shape`` (the subset's attribute sizes). Equal to the dense table
    ``t = zeros(prod(shape)); t[cells] = counts``, which is never formed."""

    __slots__ = ("cells", "counts", "shape")

    def __init__(self, cells: np.ndarray, counts: np.ndarray, shape: Sequence[int]) -> None:
        self.cells = np.asarray(cells, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.shape = tuple(int(n) for n in shape)
        n_cells = math.prod(self.shape)
        if self.cells.ndim != 1 or self.cells.shape != self.counts.shape:
            raise InternalError("a sparse table needs 1-D cells and counts of one length")
        if self.cells.size and (int(self.cells[0]) < 0 or int(self.cells[-1]) >= n_cells
                                or bool((np.diff(self.cells) <= 0).any()) or int(self.counts.min()) <= 0):
            raise InternalError("a sparse table's cells must be sorted distinct indices "
                                "in range with positive counts")
        self.cells.setflags(write=False)
        self.counts.setflags(write=False)

    @property
    def n_cells(self) -> int:
        """Cells of the (never formed) dense table."""
        return math.prod(self.shape)

    def codes(self) -> np.ndarray:
        """The non-zero cells as attribute codes: an int64 array (non-zero cells × attributes)."""
        if not self.shape:
            return np.zeros((self.cells.size, 0), dtype=np.int64)
        return np.stack(np.unravel_index(self.cells, self.shape), axis=1).astype(np.int64)

    def sum(self) -> int:
        return int(self.counts.sum())

    def __repr__(self) -> str:
        return f"SparseTable(shape={self.shape}, nonzero={self.cells.size})"


def subset_cells(sizes: Sequence[int], subset: Subset) -> int:
    """Number of cells of the marginal on ``subset`` (a Python int, 1 for ``()``)."""
    return math.prod(int(sizes[j]) for j in subset)


def _as_subset(raw: Any, d: int, k: int) -> Subset:
    where = f"subsets[{k}]"
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) and not isinstance(raw, np.ndarray):
        raise WorkloadError(f"{where} must be a tuple of attribute indices, got {type(raw).__name__}")
    out = []
    for x in raw:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise WorkloadError(f"{where} must hold int attribute indices, got {type(x).__name__}")
        out.append(int(x))
    if any(not 0 <= j < d for j in out):
        raise WorkloadError(f"{where} = {tuple(out)} has an index outside 0..{d - 1} (the domain has {d} attributes)")
    if any(a >= b for a, b in zip(out, out[1:], strict=False)):
        raise WorkloadError(f"{where} = {tuple(out)} must be strictly increasing (sorted, no repeats)")
    return tuple(out)


def normalize_subsets(domain: Domain, subsets: Any) -> list[Subset]:
    """The distinct requested subsets, in order of first appearance; ``WorkloadError`` if one
    is not a strictly increasing tuple of attribute indices of ``domain`` or has more than
    :data:`MAX_MARGINAL_CELLS` cells (these are properties of the request, not of the data)."""
    if not isinstance(domain, Domain):
        raise DataError(f"domain must be a workloads.Domain, got {type(domain).__name__}")
    if isinstance(subsets, (str, bytes)) or not isinstance(subsets, (Sequence, np.ndarray)):
        raise WorkloadError(f"subsets must be a sequence of tuples of attribute indices, got {type(subsets).__name__}")
    d = len(domain)
    seen: dict[Subset, None] = {}
    for k, raw in enumerate(subsets):
        s = _as_subset(raw, d, k)
        cells = subset_cells(domain.sizes, s)
        if cells > MAX_MARGINAL_CELLS:
            raise WorkloadError(
                f"subsets[{k}] = {s} has {cells} cells (> 2**40 = {MAX_MARGINAL_CELLS}): too large a "
                f"marginal table; measure smaller subsets"
            )
        seen.setdefault(s, None)
    return list(seen)


def _membership(subsets: Sequence[Subset], d: int) -> np.ndarray:
    """Boolean matrix: row ``i`` marks the attributes of ``subsets[i]``."""
    member = np.zeros((len(subsets), d), dtype=bool)
    lengths = [len(s) for s in subsets]
    if sum(lengths):
        rows = np.repeat(np.arange(len(subsets)), lengths)
        member[rows, np.fromiter(itertools.chain.from_iterable(subsets), dtype=np.int64)] = True
    return member


def _padded(subsets: Sequence[Subset]) -> np.ndarray:
    """The subsets as the rows of an int64 matrix, padded with −1 on the right. Gathering a
    mask of length ``d + 1`` whose last entry is True (:func:`_inside_mask`) then tests
    "every attribute of the row is in the mask" in ``len(subsets) × max length`` work."""
    lengths = np.fromiter((len(s) for s in subsets), dtype=np.int64, count=len(subsets))
    out = np.full((len(subsets), int(lengths.max(initial=0))), -1, dtype=np.int64)
    if lengths.sum():
        rows = np.repeat(np.arange(len(subsets)), lengths)
        cols = np.arange(rows.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[rows, cols] = np.fromiter(itertools.chain.from_iterable(subsets), dtype=np.int64, count=rows.size)
    return out


def _inside_mask(d: int, attributes: Sequence[int]) -> np.ndarray:
    """Boolean mask of length ``d + 1``: the ``attributes``, and the padding index −1 of
    :func:`_padded` (the last entry)."""
    mask = np.zeros(d + 1, dtype=bool)
    mask[list(attributes)] = True
    mask[d] = True
    return mask


def maximal_subsets(subsets: Sequence[Subset]) -> list[Subset]:
    """The distinct subsets contained in no other one, in the given order (``()`` only if
    alone). Containment is tested as a count of common attributes (a float32 matrix product,
    exact for fewer than 2**24 attributes), in row blocks of at most 2**22 products (16 MiB),
    so memory stays bounded whatever the number of subsets."""
    distinct = list(dict.fromkeys(tuple(s) for s in subsets))
    if len(distinct) <= 1:
        return distinct
    d = 1 + max((max(s) for s in distinct if s), default=0)
    member = _membership(distinct, d).astype(np.float32)
    lengths = np.array([len(s) for s in distinct])
    maximal = np.ones(len(distinct), dtype=bool)
    for k in np.unique(lengths):
        larger = member[lengths > k]
        if not larger.shape[0]:
            continue
        rows = np.flatnonzero(lengths == k)
        step = max(1, (1 << 22) // larger.shape[0])
        for start in range(0, rows.size, step):
            block = rows[start:start + step]
            common = member[block] @ larger.T
            maximal[block] = ~(common >= k - 0.5).any(axis=1)
    return [s for s, keep in zip(distinct, maximal, strict=True) if keep]


def plan_scans(sizes: Sequence[int], subsets: Sequence[Subset], budget: int) -> list[Subset]:
    """The grouped scans that measure ``subsets``: a list of sorted attribute tuples ``T``
    such that every non-empty requested subset is contained in some ``T``.

    Each maximal requested subset with more than ``budget`` cells is a scan of its own; the
    others are covered greedily: starting from the largest uncovered maximal subset, add the
    attribute that completes the most uncovered subsets per bit of table size (log2 of the
    attribute's size), while the table stays within ``budget`` cells and some subset is
    completed. A deterministic function of its arguments (never of the records).

    Bookkeeping (it decides nothing): per maximal subset, the number of its attributes in the
    growing ``T``, updated through each attribute's list of subsets, and per attribute the
    number of uncovered subsets it would complete (``gain``), updated as subsets become one
    attribute short or complete — so a step costs the subsets of the attribute added, not all
    subsets (all 3-way subsets of 100 attributes: 161,700 subsets, 12,660 scans in seconds).
    """
    targets = [s for s in maximal_subsets(list(subsets)) if s]
    if not targets:
        return []
    d = len(sizes)
    m = len(targets)
    cells = [subset_cells(sizes, s) for s in targets]
    capped = np.array([min(int(s), 2**62) for s in sizes], dtype=np.int64)
    cost = np.log2(np.maximum(capped, 2).astype(np.float64))
    attrs = _padded(targets)
    lengths = (attrs >= 0).sum(axis=1)
    flat_rows = np.repeat(np.arange(m), lengths)
    flat_attr = attrs[attrs >= 0]
    by_attr = np.argsort(flat_attr, kind="stable")
    rows_of = flat_rows[by_attr]  # rows_of[starts[a]:starts[a + 1]]: the subsets holding a
    starts = np.searchsorted(flat_attr[by_attr], np.arange(d + 1))
    singles = np.bincount(attrs[lengths == 1, 0], minlength=d)  # uncovered 1-attribute subsets
    uncovered = np.ones(m, dtype=bool)
    inside = np.zeros(m, dtype=np.int64)  # attributes of each subset in the current T
    order = sorted(range(m), key=lambda i: (-cells[i], targets[i]))
    plans: list[Subset] = []
    for i in order:
        if not uncovered[i]:
            continue
        tmask = _inside_mask(d, ())
        gain = singles.copy()  # per attribute: uncovered subsets it alone would complete
        touched: list[np.ndarray] = []
        for a in targets[i]:
            touched.append(_grow(a, rows_of[starts[a]:starts[a + 1]], attrs, lengths, uncovered, inside,
                                 tmask, gain))
        tcells = cells[i]
        while tcells <= budget:
            feasible = ~tmask[:d] & (capped <= budget // tcells) & (gain > 0)
            if not feasible.any():
                break
            a = int(np.argmax(np.where(feasible, gain / cost, -1.0)))
            touched.append(_grow(a, rows_of[starts[a]:starts[a + 1]], attrs, lengths, uncovered, inside,
                                 tmask, gain))
            tcells *= int(sizes[a])
        rows = np.concatenate(touched)
        done = rows[inside[rows] == lengths[rows]]
        singles -= np.bincount(attrs[done[uncovered[done] & (lengths[done] == 1)], 0], minlength=d)
        uncovered[done] = False
        inside[rows] = 0
        plans.append(tuple(int(j) for j in np.flatnonzero(tmask[:d])))
    return plans


def _grow(a: int, rows: np.ndarray, attrs: np.ndarray, lengths: np.ndarray, uncovered: np.ndarray,
          inside: np.ndarray, tmask: np.ndarray, gain: np.ndarray) -> np.ndarray:
    """:func:`plan_scans`' bookkeeping when attribute ``a`` joins T (``tmask``): ``rows``, the
    subsets holding ``a``, count one more attribute inside T; the uncovered ones it completes
    leave ``gain[a]`` (they were one attribute, ``a``, short), and those now one attribute
    short add one to the gain of their missing attribute. Updates ``tmask``, ``inside`` and
    ``gain`` in place; returns ``rows``."""
    tmask[a] = True
    inside[rows] += 1
    live = rows[uncovered[rows]]
    short = lengths[live] - inside[live]
    gain[a] -= int((short == 0).sum())
    one = live[short == 1]
    if one.size:
        row_attrs = attrs[one]
        gain += np.bincount(row_attrs[~tmask[row_attrs]], minlength=gain.size)
    return rows


def _sum_to(table: np.ndarray, sizes: Sequence[int], source: Subset, target: Subset) -> np.ndarray:
    """The marginal on ``target`` ⊆ ``source`` of the dense int64 ``table`` over ``source``."""
    if target == source:
        return table.copy()
    shape = tuple(int(sizes[j]) for j in source)
    axes = tuple(k for k, j in enumerate(source) if j not in target)
    out = table.reshape(shape).sum(axis=axes, dtype=np.int64)
    return np.ascontiguousarray(out, dtype=np.int64).reshape(-1)


class MarginalTables:
    """Marginal tables of the records over ``domain``: ``n_records`` and, for each requested
    distinct subset ``S`` (a sorted tuple of attribute indices), ``self[S]``, a read-only int64
    vector of length ``Π_{j∈S} sizes[j]`` in C order over the attributes of ``S`` (smallest
    index slowest) -- the dense histogram's ``reshape(sizes).sum(other axes).ravel()``.
    ``self[()]`` is ``[n_records]``. Every table sums to ``n_records`` (checked when built).

    Iterating gives the subsets in the order first requested; :meth:`table` gives a table
    reshaped to its attribute sizes, :meth:`names` the attribute names of a subset.
    """

    __slots__ = ("_domain", "_n_records", "_tables")

    def __init__(self, domain: Domain, n_records: int,
                 tables: Mapping[Subset, np.ndarray | SparseTable]) -> None:
        self._domain = domain
        self._n_records = int(n_records)
        for s, t in tables.items():
            if isinstance(t, SparseTable):
                if t.shape != tuple(int(domain.sizes[j]) for j in s):
                    raise InternalError(f"sparse table {s} has shape {t.shape}")
                continue
            if t.dtype != np.int64 or t.shape != (subset_cells(domain.sizes, s),):
                raise InternalError(f"table {s} has dtype {t.dtype} and shape {t.shape}")
            t.setflags(write=False)
        self._tables = dict(tables)

    @property
    def domain(self) -> Domain:
        return self._domain

    @property
    def n_records(self) -> int:
        """Number of records (the sum of every table)."""
        return self._n_records

    @property
    def subsets(self) -> list[Subset]:
        return list(self._tables)

    @staticmethod
    def _key(subset: Any) -> Subset:
        return tuple(int(j) for j in subset)

    def __getitem__(self, subset: Sequence[int]) -> np.ndarray | SparseTable:
        """The table of ``subset``: a dense int64 vector, or a :class:`SparseTable` when it has
        more than :data:`DENSE_TABLE_CELLS` cells and fewer than a quarter of them are
        non-zero."""
        return self._tables[self._key(subset)]

    def __contains__(self, subset: object) -> bool:
        try:
            return self._key(subset) in self._tables
        except TypeError:
            return False

    def __iter__(self) -> Iterator[Subset]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def keys(self) -> list[Subset]:
        return list(self._tables)

    def items(self) -> list[tuple[Subset, np.ndarray | SparseTable]]:
        return list(self._tables.items())

    def shape(self, subset: Sequence[int]) -> tuple[int, ...]:
        """The sizes of the attributes of ``subset`` (the table's shape as an array)."""
        return tuple(self._domain.sizes[j] for j in self._key(subset))

    def table(self, subset: Sequence[int]) -> np.ndarray:
        """``self[subset]`` reshaped to :meth:`shape` (a read-only view; dense tables only)."""
        t = self[subset]
        if isinstance(t, SparseTable):
            raise DenseTooLargeError(f"the table of {self._key(subset)} has {t.n_cells} cells and is "
                                     "held sparse (self[subset].cells / .counts)")
        return t.reshape(self.shape(subset))

    def names(self, subset: Sequence[int]) -> tuple[str, ...]:
        return tuple(self._domain.attributes[j] for j in self._key(subset))

    def __repr__(self) -> str:
        return f"MarginalTables(n_records={self._n_records}, subsets={list(self._tables)})"


class TableBuilder:
    """Collects the requested tables from measured tables over supersets (internal to the
    engines). :meth:`add_sparse` (cells and counts of a ``GROUP BY``) or :meth:`add_dense`
    records a measured table over ``T``, checks it (cell indices in ``0 .. cells-1``, counts
    below 2**53 summing to ``n_records``) and computes every pending requested subset
    contained in ``T`` (exact int64 sums); :meth:`result` checks that all are present.

    A measured table with few non-zero cells (a quarter of its cells or fewer) is never made
    dense: the requested tables are then bincounts of its cells' projections, so memory is
    proportional to ``min(non-zero cells, cells)`` plus the requested tables.
    """

    def __init__(self, domain: Domain, subsets: Sequence[Subset], n_records: int) -> None:
        self.domain = domain
        self.sizes = domain.sizes
        self.n_records = int(n_records)
        self.subsets = list(subsets)
        self.tables: dict[Subset, np.ndarray | SparseTable] = {}
        self._pending = [s for s in self.subsets if s]
        self._attrs = _padded(self._pending)
        self._open = np.ones(len(self._pending), dtype=bool)
        if () in self.subsets:
            self.tables[()] = np.array([self.n_records], dtype=np.int64)

    def add_sparse(self, source: Subset, cells: np.ndarray, counts: np.ndarray, where: str) -> None:
        """Record the table over ``source`` given by its non-zero ``cells`` (C-order indices,
        each once) and their ``counts``."""
        cells = np.asarray(cells)
        counts = np.asarray(counts)
        n_cells = subset_cells(self.sizes, source)
        if cells.dtype != np.int64 or counts.dtype != np.int64 or cells.ndim != 1 or cells.shape != counts.shape:
            raise InternalError(f"measured table over {source} is malformed")  # pragma: no cover
        if cells.size and (int(cells.min()) < 0 or int(cells.max()) >= n_cells or int(counts.min()) < 0):
            raise InternalError("a measured cell index is out of range")  # pragma: no cover
        if check_counts(counts, where) != self.n_records:
            raise InternalError("a measured marginal does not sum to the number of records")  # pragma: no cover
        if 4 * cells.size >= n_cells:
            table = np.zeros(n_cells, dtype=np.int64)
            table[cells] = counts
            self.add_dense(source, table, where)
        else:
            self._derive(source, None, (cells, counts))

    def add_dense(self, source: Subset, table: np.ndarray, where: str) -> None:
        """Record the dense table (int64, C order) over ``source``."""
        table = np.asarray(table)
        if table.dtype != np.int64 or table.shape != (subset_cells(self.sizes, source),):
            raise InternalError(f"measured table over {source} has the wrong shape")  # pragma: no cover
        if table.size and int(table.min()) < 0 or check_counts(table, where) != self.n_records:
            raise InternalError("a measured marginal does not sum to the number of records")  # pragma: no cover
        self._derive(source, table, None)

    def _derive(self, source: Subset, dense: np.ndarray | None,
                sparse: tuple[np.ndarray, np.ndarray] | None) -> None:
        if not self._pending:
            return
        inside = self._open & _inside_mask(len(self.domain), source)[self._attrs].all(axis=1)
        # Largest subsets first; each from the smallest table at hand that contains it with
        # one more attribute (e.g. a pair from a measured triple), else from the source.
        here: dict[Subset, np.ndarray] = {} if dense is None else {source: dense}
        lengths_here: set[int] = set()
        by_size = sorted(source, key=lambda j: (self.sizes[j], j))  # first hit: smallest table
        codes: tuple[np.ndarray, ...] | None = None
        for i in sorted(np.flatnonzero(inside), key=lambda i: -len(self._pending[i])):
            s = self._pending[i]
            best = source
            if len(s) + 1 in lengths_here:
                for a in by_size:
                    if a not in s:
                        up = tuple(sorted((*s, a)))
                        if up in here:
                            best = up
                            break
            if best in here:
                out = _sum_to(here[best], self.sizes, best, s)
            else:
                assert sparse is not None
                cells, counts = sparse
                if codes is None:
                    codes = np.unravel_index(cells, tuple(int(self.sizes[j]) for j in source))
                pos = [source.index(j) for j in s]
                idx = np.ravel_multi_index(tuple(codes[p] for p in pos), tuple(int(self.sizes[j]) for j in s))
                # float64 accumulation is exact: every partial sum is an integer < 2**53
                if subset_cells(self.sizes, s) > DENSE_TABLE_CELLS:
                    u, inv = np.unique(idx, return_inverse=True)
                    agg = np.bincount(inv.reshape(-1), weights=counts.astype(np.float64)).astype(np.int64)
                    sparse_out = SparseTable(u, agg, [self.sizes[j] for j in s])
                    if sparse_out.sum() != self.n_records:
                        raise InternalError("a marginal does not sum to the number of records")  # pragma: no cover
                    self.tables[s] = sparse_out
                    continue
                out = np.bincount(idx, weights=counts.astype(np.float64),
                                  minlength=subset_cells(self.sizes, s)).astype(np.int64)
            here[s] = out
            lengths_here.add(len(s))
            if int(out.sum()) != self.n_records:  # exact: every entry and the total < 2**53
                raise InternalError("a marginal does not sum to the number of records")  # pragma: no cover
            self.tables[s] = out
        self._open &= ~inside

    def result(self) -> MarginalTables:
        missing = [s for s in self.subsets if s not in self.tables]
        if missing:
            raise InternalError(f"marginals {missing[:5]} were not measured")  # pragma: no cover
        return MarginalTables(self.domain, self.n_records, {s: self.tables[s] for s in self.subsets})


def marginals_from_histogram(h: np.ndarray, domain: Domain, subsets: Sequence[Subset]) -> MarginalTables:
    """The marginal tables of a dense, already validated int64 histogram ``h`` (length
    ``domain.size``), summed out exactly in int64. ``subsets`` as in :func:`normalize_subsets`."""
    subs = normalize_subsets(domain, subsets)
    h = np.asarray(h)
    if h.dtype != np.int64 or h.shape != (domain.size,):
        raise DataError(f"h must be an int64 vector of length {domain.size}, got {h.dtype} {h.shape}")
    n = check_counts(h, "the histogram")
    builder = TableBuilder(domain, subs, n)
    full = tuple(range(len(domain)))
    # Sum the histogram down to a few intermediate tables first (each a pass over N), then
    # each requested subset from the smallest of them containing it.
    budget = max(2**12, math.isqrt(domain.size))
    for t in plan_scans(domain.sizes, subs, budget):
        builder.add_dense(t, _sum_to(h, domain.sizes, full, t), "the histogram's marginal")
    return builder.result()
