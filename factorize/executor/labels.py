"""Every answer named in the workload's terms: its table (``age,sex``, ``cdf(age) by sex``), its
cell in the table's attributes (``sex=Female``, ``age ≤ 37``) and one joined ``label``.

The labels are built from the workload's structure, never from the data, with each
attribute's value labels taken from the domain's public schema (``workloads.schema``; the
codes themselves when the domain has none).

**Tables** (:func:`workload_tables`). Every part of the workload's ``vstack`` (nested stacks
flattened; every marginal of a ``marginals`` family) is one table with a name: the one the spec
gives (``table(NAME,SPEC)``, ``workloads.spec``), else its default, the attributes it crosses
and its form. A part is a Kronecker product of per-attribute factors (a bare factor is a
product of one); each factor is recognised by its rows' 0/1 pattern, so a custom (``file:``)
factor is named like the built-in one it equals:

* identity (or any rows of one value each) on ``sex``: the table crosses ``sex``, a column of
  value labels; a marginal on ``age`` and ``sex`` is ``age,sex`` (the empty one ``total``);
* prefixes (every row an interval from the first value): ``cdf(age)``, a column
  ``age ≤ 37``;
* other intervals (``allrange``, ``width``): ``range(age)``, a column ``age in [25, 34]``;
* the total: the attribute is summed out (no column);
* a row of ±1 and 0 entries (a parity character): ``contrast(a)``, a column of signed terms
  ``a=0 minus a=1``; any other factor: ``KIND(a)`` (``hadamard``, ``random``, ``matrix`` for a
  custom one, ``rows`` without a spec) with ``a: row r of <spec>``;
* a factor that is itself a ``vstack`` (``kron(vstack(identity:5,total:5),…)``): its parts'
  columns one after the other, ``total`` where a part sums the attribute out.

The default name lists the forms in attribute order, then the crossed attributes:
``kron(prefix[age],identity[sex],identity[race])`` is ``cdf(age) by sex,race``. Names are made
unique in the workload (a repeated name gets `` (2)``, `` (3)``, …). An attribute column is
named by its attribute (`` (attribute)`` appended where that is an answers column such as
``estimate``). The answers file carries each answer's table and cells (``executor.output``);
``--tables`` writes one file per table (``executor.tables``).

**Query labels** (:func:`query_labels`): one string per query, the cell's terms joined —
``a=v, b=w`` for a marginal cell (``total`` for the empty marginal); a one-attribute factor's row
``a=v`` (one value), ``a in lo..hi`` (a run of values), nothing (every value), ``a=0 minus
a=1`` (signed terms, up to 8), or ``a: row r of <spec>``; a Kronecker product joins its
factors' labels in attribute order (row-major: the last factor varies fastest, as W's rows
do); a stack concatenates its blocks'; a scaled workload is labelled as its base.

A value label that could be misread inside a joined label or an interval — holding ``,``,
``=``, ``"``, ``..``, the word ``in``, ``plus`` or ``minus``, or outer spaces, like a bin
``[0, 20)`` — is written as a JSON string: ``age="[0, 20)", sex=Female``; a column of value
labels holds them as they are.

Built as Arrow arrays (vectorised: a Kronecker label is one element-wise join of two repeated
arrays; a table's column is a dictionary of its factor's texts and, per row, an index), so
millions of answers take seconds; the answers file is written batch by batch
(:class:`TableLabels`), never with every attribute column of every answer in memory, and a
marginal family's query labels are built batch by batch too (:class:`MarginalLabels`), never
one string per answer at once. The
kernels are called by name (:func:`arrow_call`), without importing ``pyarrow.compute``: that
import builds a Python wrapper for each of its ~300 functions, about 40 ms of every run's
start-up.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: A one-attribute factor is read densely up to this many entries to recognise its rows.
MAX_FACTOR_ENTRIES = 1 << 24
#: The answers file's own columns: an attribute column of the same name gets " (attribute)".
ANSWER_COLUMNS = ("query", "table", "label", "estimate", "std_error", "ci_low", "ci_high",
                  "estimate_postprocessed")
#: The text of a stacked factor's row that sums its attribute out.
TOTAL = "total"


def answer_labels(W: Any, domain: Any, tables: TableLabels | None = None) -> dict[str, Any]:
    """The label columns of the answers of ``W`` over ``domain``: ``table`` (the table name and,
    when written, the table's attribute columns: a :class:`TableLabels`) and ``label``;
    ``tables`` if already built (``--tables`` builds them before the verification)."""
    import pyarrow as pa

    label = MarginalLabels.of(W, domain)
    if label is None:
        label = query_labels(W, domain)
        # the joins' intermediate strings are freed but kept by Arrow's allocator: hand them
        # back to the OS before the release allocates its own arrays
        pa.default_memory_pool().release_unused()
    return {"table": tables if tables is not None else TableLabels(workload_tables(W, domain), W.shape[0]),
            "label": label}


class MarginalLabels:
    """The ``label`` column of a marginal family over the whole domain, built per slice of rows
    (:meth:`slice`, as ``pyarrow.Array.slice``) when the answers are written: the strings of
    :func:`query_labels` (``a=v, b=w`` per cell, ``total`` for the empty marginal), never all
    in memory at once (Adult all ≤3-way marginals: 21·10⁶ labels, about 1 GiB as one array).

    Vectorised over the marginals: row r of a slice lies in marginal i (its start ≤ r), at
    ``r − start_i``; its p-th attribute j (size-1 attributes dropped, row-major) has the code
    ``((r − start_i) // stride_{p,i}) mod n_j``, and ``a=v`` is taken from one array of every
    attribute's ``a=v`` texts; the parts are joined with ``, `` skipping absent ones (a
    marginal of fewer attributes), so a slice costs a few Arrow kernels whatever the number
    of marginals (all 3-way marginals over 100 attributes: 161,700)."""

    def __init__(self, sizes: Sequence[int], subsets: Sequence[Sequence[int]], attrs: Sequence[str],
                 vals: Sequence[Sequence[str]]) -> None:
        import pyarrow as pa

        sizes = [int(n) for n in sizes]
        texts = [f"{a}={v}" for a, vs in zip(attrs, vals, strict=True) for v in vs]
        self._named = pa.array([*texts, TOTAL], type=pa.string())  # TOTAL last
        base = np.cumsum([0, *sizes[:-1]], dtype=np.int64)
        kept = [[j for j in S if sizes[j] > 1] for S in subsets]
        width = max(1, max((len(S) for S in kept), default=0))
        # per position p and marginal i: the index of its attribute's first text (position 0
        # of the empty marginal: TOTAL), the stride and size of its code, whether it is absent
        self._first = np.full((width, len(kept)), len(texts), dtype=np.int64)
        self._stride = np.ones((width, len(kept)), dtype=np.int64)
        self._size = np.ones((width, len(kept)), dtype=np.int64)
        self._absent = np.ones((width, len(kept)), dtype=bool)
        rows = np.ones(len(kept), dtype=np.int64)
        for i, S in enumerate(kept):
            stride = 1
            for p in reversed(range(len(S))):
                j = S[p]
                self._first[p, i], self._stride[p, i], self._size[p, i] = base[j], stride, sizes[j]
                self._absent[p, i] = False
                stride *= sizes[j]
            rows[i] = stride
        self._starts = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        self.rows = int(self._starts[-1])

    @classmethod
    def of(cls, W: Any, domain: Any) -> MarginalLabels | None:
        """The lazy labels of ``W`` when it is a marginal family over ``domain``'s attributes
        (``marginal_structure``, the sizes of the domain); None for any other workload."""
        structure = getattr(W, "marginal_structure", None)
        if not callable(structure):
            return None
        sizes, subsets, _ = structure()
        if tuple(int(n) for n in sizes) != tuple(int(n) for n in domain.sizes):
            return None
        return cls(sizes, subsets, list(domain.attributes), quoted_labels(domain))

    def __len__(self) -> int:
        return self.rows

    #: A marginal with at least this many rows in a slice gets its parts' indices from scalar
    #: strides (:meth:`_indices`); runs of smaller ones are done together, per row.
    SCALAR_ROWS = 2048

    def slice(self, offset: int, length: int) -> Any:
        """The labels of the rows ``offset .. offset+length-1`` (clipped to the column), an
        Arrow string array."""
        import pyarrow as pa
        from pyarrow._compute import JoinOptions

        lo, hi = max(0, int(offset)), min(self.rows, int(offset) + int(length))
        if hi <= lo:
            return pa.array([], pa.string())
        index, absent = self._indices(lo, hi)
        parts = []
        for p in range(index.shape[0]):
            # position 0 is never null (TOTAL for the empty marginal): Arrow's join with
            # null_handling="skip" drops a row whose parts are all null
            parts.append(arrow_take(self._named, masked_array(index[p], absent[p] if p else None)))
        if len(parts) == 1:
            return parts[0]
        return arrow_call("binary_join_element_wise", [*parts, pa.scalar(", ", pa.string())],
                          JoinOptions(null_handling="skip"))

    def _indices(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """For the rows ``lo .. hi-1`` (within the column) and every position p: the index in
        the texts of the row's p-th part, ``first_{p,i} + ((r − start_i) // stride_{p,i}) mod
        n_{p,i}`` (class docstring), and whether the part is absent (then the index is any valid
        one). A marginal with :data:`SCALAR_ROWS` rows or more in the slice is computed with
        its strides as scalars; each run of smaller marginals between them with per-row
        strides (``np.repeat`` of every marginal's), so that the cost stays a few array
        operations per slice whatever the number of marginals."""
        starts = self._starts
        i0 = int(np.searchsorted(starts, lo, side="right")) - 1
        i1 = int(np.searchsorted(starts, hi, side="left"))
        edges = np.clip(starts[i0:i1 + 1], lo, hi) - lo  # the marginals' rows in the slice
        counts = np.diff(edges)
        width = self._first.shape[0]
        index = np.empty((width, hi - lo), dtype=np.int64)
        absent = np.empty((width, hi - lo), dtype=bool)
        big = [int(j) for j in np.flatnonzero(counts >= self.SCALAR_ROWS)]
        j = 0
        for b in [*big, len(counts)]:
            if j < b:  # marginals i0+j .. i0+b-1, each small: per-row strides
                self._per_row(i0 + j, i0 + b, lo + int(edges[j]), counts[j:b], index, absent,
                              int(edges[j]))
            if b < len(counts):  # marginal i0+b, many rows: scalar strides
                i, a, e = i0 + b, int(edges[b]), int(edges[b + 1])
                local = np.arange(lo + a - int(starts[i]), lo + e - int(starts[i]), dtype=np.int64)
                for p in range(width):
                    absent[p, a:e] = self._absent[p, i]
                    seg = index[p, a:e]
                    if self._absent[p, i]:
                        seg.fill(self._first[p, i])
                        continue
                    np.floor_divide(local, self._stride[p, i], out=seg)
                    np.remainder(seg, self._size[p, i], out=seg)
                    seg += self._first[p, i]
            j = b + 1
        return index, absent

    def _per_row(self, i0: int, i1: int, lo: int, counts: np.ndarray, index: np.ndarray,
                 absent: np.ndarray, at: int) -> None:
        """:meth:`_indices` for the marginals ``i0 .. i1-1`` (``counts`` rows each, from row
        ``lo``), written from column ``at`` of ``index`` / ``absent``."""
        hi = lo + int(counts.sum())
        local = np.arange(lo, hi, dtype=np.int64) - np.repeat(self._starts[i0:i1], counts)

        def per_row(a: np.ndarray, p: int) -> np.ndarray:
            return np.repeat(a[p, i0:i1], counts)

        rows = slice(at, at + hi - lo)
        for p in range(self._first.shape[0]):
            code = (local // per_row(self._stride, p)) % per_row(self._size, p)
            index[p, rows] = per_row(self._first, p) + code
            absent[p, rows] = per_row(self._absent, p)

    def to_pylist(self) -> list[str]:
        """Every label (tests and small releases)."""
        return self.slice(0, self.rows).to_pylist()


@dataclass(frozen=True, eq=False)  # compared by identity: ``codes`` is an array
class Column:
    """One attribute column of a table: row ``r`` of the table shows
    ``texts[codes[(r // stride) % len(codes)]]`` (a factor's texts, repeated as W's rows are);
    ``position``: the domain index of its (first) attribute, which orders the columns."""

    name: str
    texts: Sequence[str]
    codes: np.ndarray
    stride: int
    position: int

    def indices(self, lo: int, hi: int) -> np.ndarray:
        """The indices into :attr:`texts` of the table's rows ``lo .. hi-1``
        (:func:`cyclic_runs` of :attr:`codes`)."""
        return cyclic_runs(self.codes, self.stride, lo, hi)


def cyclic_runs(codes: np.ndarray, stride: int, lo: int, hi: int) -> np.ndarray:
    """``codes[(r // stride) mod n]`` for the rows ``r = lo .. hi-1`` (n = ``codes.size``),
    made run by run without a division per row: row r lies in run ``k = r // stride`` of
    ``stride`` equal rows (the first and last runs clipped to the range), whose value is
    ``codes[k mod n]``."""
    lo, hi, s = int(lo), int(hi), int(stride)
    if hi <= lo:
        return np.empty(0, dtype=codes.dtype)
    k0, k1 = lo // s, (hi - 1) // s
    values = codes[np.arange(k0, k1 + 1, dtype=np.int64) % codes.size]
    if s == 1:
        return values
    lengths = np.full(k1 - k0 + 1, s, dtype=np.int64)
    lengths[0] -= lo - k0 * s
    lengths[-1] -= (k1 + 1) * s - hi
    return np.repeat(values, lengths)


def masked_array(values: np.ndarray, null: np.ndarray | None) -> Any:
    """The integer array ``values`` as an Arrow array, null where ``null`` is True: the validity
    bitmap packed by numpy (``np.packbits``, least significant bit first, as Arrow lays it
    out) and the data buffer shared — what ``pa.array(values, mask=null)`` gives, at a
    seventh of its cost on 65,536 rows."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if null is None:
        return pa.array(values)
    valid = np.packbits(~np.asarray(null, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size,
                                 [pa.py_buffer(valid), pa.py_buffer(values)])


@dataclass(frozen=True)
class Table:
    """One table of a release: ``name``, the rows ``start .. stop-1`` of W, and its attribute
    columns in attribute order (module docstring)."""

    name: str
    start: int
    stop: int
    columns: tuple[Column, ...]

    @property
    def rows(self) -> int:
        return self.stop - self.start

    def cells(self) -> dict[str, Any]:
        """The table's attribute columns in label form: Arrow string arrays, one per column."""
        import pyarrow as pa

        return {c.name: arrow_take(pa.array(list(c.texts), type=pa.string()), c.indices(0, self.rows))
                for c in self.columns}


class TableLabels:
    """The ``table`` column of the answers and every table's attribute columns, built per batch
    of rows (:meth:`batch`) so a writer streams them (``executor.output``): attribute columns
    are dictionary arrays over each column's texts, null where a table does not cross the
    attribute."""

    def __init__(self, tables: Sequence[Table], rows: int) -> None:
        self.tables = list(tables)
        self.rows = int(rows)
        self._starts = [t.start for t in self.tables]
        order: dict[str, int] = {}
        for t in self.tables:
            for c in t.columns:
                order.setdefault(c.name, c.position)
        #: the attribute columns of the answers file, in the domain's attribute order
        self.attribute_columns = sorted(order, key=lambda n: (order[n], n))
        self._dictionaries: dict[str, dict[str, int]] = {n: {} for n in self.attribute_columns}
        self._mapped: dict[tuple[str, int], tuple[Sequence[str], np.ndarray]] = {}
        self._arrays: dict[str, Any] = {}  # the Arrow dictionaries, rebuilt when they grow
        self._coded: dict[int, tuple[Column, np.ndarray]] = {}  # id → (column, its global codes)

    @property
    def column_names(self) -> list[str]:
        return ["table", *self.attribute_columns]

    def batches(self, size: int = 1 << 16) -> Iterator[tuple[int, int]]:
        """Row ranges ``(lo, hi)`` of at most ``size`` rows covering every answer in order (one
        empty range when there is none: a writer still writes the columns)."""
        if self.rows == 0:
            yield 0, 0
        for lo in range(0, self.rows, size):
            yield lo, min(self.rows, lo + size)

    def batch(self, lo: int, hi: int) -> dict[str, Any]:
        """The ``table`` and attribute columns of the answers ``lo .. hi-1`` (Arrow dictionary
        arrays)."""
        import pyarrow as pa

        which = np.full(hi - lo, -1, dtype=np.int32)
        idx = {n: np.full(hi - lo, -1, dtype=np.int32) for n in self.attribute_columns}
        first = max(0, bisect.bisect_right(self._starts, lo) - 1)
        for i in range(first, len(self.tables)):
            t = self.tables[i]
            if t.start >= hi:
                break
            a, b = max(lo, t.start), min(hi, t.stop)
            if a >= b:
                continue
            which[a - lo:b - lo] = i
            for c in t.columns:
                idx[c.name][a - lo:b - lo] = cyclic_runs(self._global_codes(c), c.stride,
                                                         a - t.start, b - t.start)
        out = {"table": pa.DictionaryArray.from_arrays(pa.array(which), self._texts("table"))}
        for n, ix in idx.items():
            out[n] = pa.DictionaryArray.from_arrays(masked_array(ix, ix < 0), self._texts(n))
        return out

    def _texts(self, column: str) -> Any:
        """The Arrow dictionary of ``column`` (the table names for ``table``)."""
        import pyarrow as pa

        arr = self._arrays.get(column)
        if column == "table":
            if arr is None:
                arr = self._arrays[column] = pa.array([t.name for t in self.tables], type=pa.string())
            return arr
        texts = self._dictionaries[column]
        if arr is None or len(arr) != len(texts):
            arr = self._arrays[column] = pa.array(list(texts), type=pa.string())
        return arr

    def _global_codes(self, c: Column) -> np.ndarray:
        """``c.codes`` as indices in the answers column's dictionary (``_global(c)[c.codes]``,
        kept per column)."""
        hit = self._coded.get(id(c))
        if hit is None or hit[0] is not c:
            hit = self._coded[id(c)] = (c, self._global(c)[c.codes])
        return hit[1]

    def _global(self, c: Column) -> np.ndarray:
        """Indices of ``c.texts`` in the answers column's dictionary (built as texts appear)."""
        key = (c.name, id(c.texts))
        hit = self._mapped.get(key)
        if hit is None:
            d = self._dictionaries[c.name]
            hit = self._mapped[key] = (c.texts, np.array([d.setdefault(x, len(d)) for x in c.texts],
                                                         dtype=np.int32))
        return hit[1]


def workload_tables(W: Any, domain: Any) -> list[Table]:
    """The tables of ``W`` over ``domain``, in W's row order, with unique names (module
    docstring)."""
    ctx = _Context(domain)
    raw: list[tuple[str, int, int, list[Column]]] = []
    _walk(W, 0, None, ctx, raw)
    used: set[str] = set()
    out = []
    for name, start, stop, cols in raw:
        unique, n = name, 1
        while unique in used:
            n += 1
            unique = f"{name} ({n})"
        used.add(unique)
        out.append(Table(unique, start, stop, tuple(cols)))
    return out


def value_labels(domain: Any) -> list[list[str]]:
    """Per attribute, the label of every code: the schema's when the domain has one, else the
    code itself."""
    schema = getattr(domain, "schema", None)
    out = []
    for a, n in zip(domain.attributes, domain.sizes, strict=True):
        labels = schema.labels(a) if schema is not None else None
        out.append([str(x) for x in labels] if labels is not None else [str(i) for i in range(int(n))])
    return out


def quoted(value: str) -> str:
    """A value label as it appears inside a query label (module docstring)."""
    import json

    risky = (any(c in value for c in ',="') or ".." in value
             or any(w in ("in", "plus", "minus") for w in value.split(" ")) or value != value.strip() or not value)
    return json.dumps(value, ensure_ascii=False) if risky else value


def quoted_labels(domain: Any) -> list[list[str]]:
    return [[quoted(v) for v in vs] for vs in value_labels(domain)]


def query_labels(W: Any, domain: Any) -> Any:
    """The label of every query of ``W`` over ``domain`` (module docstring), an Arrow string
    array of length k."""
    import pyarrow as pa

    attrs = list(domain.attributes)
    sizes = [int(n) for n in domain.sizes]
    vals = quoted_labels(domain)
    arr = _node(W, list(range(len(sizes))), attrs, sizes, vals, {})
    return _fill_total(arr if arr is not None else pa.nulls(W.shape[0], pa.string()))


# ---------------------------------------------------------------------------------------


def arrow_call(name: str, args: list, options: Any = None) -> Any:
    """The Arrow compute kernel ``name`` on ``args`` — what ``pyarrow.compute.<name>(*args)``
    runs (its wrappers call this very function), without importing ``pyarrow.compute`` (module
    docstring). Python values must be given as ``pa.scalar``; ``options`` None: the kernel's
    defaults, as the wrappers'."""
    try:
        from pyarrow._compute import call_function
    except ImportError:  # pragma: no cover - a pyarrow that moved it: the public name
        from pyarrow.compute import call_function
    return call_function(name, args, options)


def arrow_take(values: Any, indices: Any) -> Any:
    """``values.take(indices)`` (``Array.take`` imports ``pyarrow.compute``)."""
    import pyarrow as pa

    return arrow_call("take", [values, indices if isinstance(indices, pa.Array) else pa.array(indices)])


def _fill_total(arr: Any) -> Any:
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    empty = arrow_call("or_kleene", [arrow_call("is_null", [arr]),
                                     arrow_call("equal", [arr, pa.scalar("", pa.string())])])
    return arrow_call("if_else", [empty, pa.scalar("total", pa.string()), arr])


def _flat(a: Any) -> Any:
    import pyarrow as pa

    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _join(a: Any, b: Any) -> Any:
    """Element-wise ``a, b`` (a null side left out; both null stays null)."""
    import pyarrow as pa

    a, b = _flat(a), _flat(b)
    # null where either side is null
    joined = arrow_call("binary_join_element_wise", [a, b, pa.scalar(", ", pa.string())])
    return arrow_call("if_else", [arrow_call("is_null", [a]), b,
                                  arrow_call("if_else", [arrow_call("is_null", [b]), a, joined])])


def _kron(a: Any, b: Any) -> Any:
    """Labels of ``A ⊗ B``'s rows from A's and B's: row (i, j) → ``a_i, b_j``."""
    import pyarrow as pa

    a, b = _flat(a), _flat(b)
    ka, kb = len(a), len(b)
    left = arrow_take(a, pa.array(np.repeat(np.arange(ka, dtype=np.int64), kb)))
    right = arrow_take(b, pa.array(np.tile(np.arange(kb, dtype=np.int64), ka)))
    return _join(left, right)


def _node(W: Any, axes: list[int], attrs: list[str], sizes: list[int], vals: list[list[str]],
          cache: dict) -> Any:
    """Labels of W's rows, W acting on the attributes ``axes`` (row-major); None: all total.

    ``cache`` holds the leaves' labels by (leaf object, axes) for one call of
    :func:`query_labels`: a stack of Kronecker products shares its factor objects (all
    2-way parities over 100 attributes: 4,950 products of 100 factors, two distinct factor
    objects), so each is read once per attribute, not once per product. A product of
    one-row factors -- one query -- is joined as a string, without Arrow kernels."""
    import pyarrow as pa

    base = getattr(W, "base", None)
    if base is not None and getattr(W, "factors", None) is None and getattr(W, "blocks", None) is None:
        return _node(base, axes, attrs, sizes, vals, cache)
    structure = getattr(W, "marginal_structure", None)
    if callable(structure):
        msizes, subsets, _ = structure()
        if len(msizes) == len(axes):
            sub_attrs = [attrs[j] for j in axes]
            return _marginal_cells([sizes[j] for j in axes], sub_attrs, [vals[j] for j in axes], subsets)
    factors = getattr(W, "factors", None)
    if factors is not None:
        parts = _split(factors, axes, sizes)
        if parts is not None:
            if all(int(f.shape[0]) == 1 for f in factors):  # one query: join its parts here
                words = [w for w in (_one_label(f, ax, attrs, sizes, vals, cache)
                                     for f, ax in zip(factors, parts, strict=True)) if w]
                return pa.array([", ".join(words) if words else None], type=pa.string())
            labs = [_node(f, ax, attrs, sizes, vals, cache) for f, ax in zip(factors, parts, strict=True)]
            out = None
            for f, lab in zip(factors, labs, strict=True):
                if lab is None:
                    lab = pa.nulls(f.shape[0], pa.string())
                out = lab if out is None else _kron(out, lab)
            return out
    blocks = getattr(W, "blocks", None)
    if blocks is not None:
        labs = [_node(b, axes, attrs, sizes, vals, cache) for b in blocks]
        labs = [pa.nulls(b.shape[0], pa.string()) if lab is None else lab for b, lab in zip(blocks, labs, strict=True)]
        return pa.concat_arrays([x.combine_chunks() if isinstance(x, pa.ChunkedArray) else x for x in labs])
    key = (id(W), tuple(axes))
    if key not in cache:  # W is kept with its labels: its id stays its own during the call
        cache[key] = (W, _leaf(W, axes, attrs, sizes, vals))
    return cache[key][1]


def _one_label(W: Any, axes: list[int], attrs: list[str], sizes: list[int], vals: list[list[str]],
               cache: dict) -> str | None:
    """The label of a one-row W (None: total), as a string, cached as :func:`_node`'s."""
    key = ("one", id(W), tuple(axes))
    if key not in cache:
        lab = _node(W, axes, attrs, sizes, vals, cache)
        cache[key] = (W, None if lab is None else lab[0].as_py())
    return cache[key][1]


def _split(factors: Sequence[Any], axes: list[int], sizes: list[int]) -> list[list[int]] | None:
    """Consecutive attributes per factor (a factor's columns are the product of their sizes;
    a 1-column factor takes a size-1 attribute when one is next, else none — a scalar weight);
    None when they do not line up."""
    out: list[list[int]] = []
    i = 0
    for f in factors:
        n = int(f.shape[1])
        take: list[int] = []
        if n == 1:
            if i < len(axes) and sizes[axes[i]] == 1:
                take.append(axes[i])
                i += 1
            out.append(take)
            continue
        prod = 1
        while i < len(axes) and prod < n:
            take.append(axes[i])
            prod *= sizes[axes[i]]
            i += 1
        if prod != n:
            return None
        out.append(take)
    while i < len(axes) and sizes[axes[i]] == 1:
        i += 1
    return out if i == len(axes) else None


def _marginal_cells(sizes: list[int], attrs: list[str], vals: list[list[str]],
                    subsets: Sequence[Sequence[int]]) -> Any:
    """Query labels of a stack of marginals: ``a=v, b=w`` per cell (null: the empty marginal)."""
    import pyarrow as pa

    named = [[f"{a}={v}" for v in vs] for a, vs in zip(attrs, vals, strict=True)]
    out = [_joined(parts, ", ") if parts else pa.nulls(rows, pa.string())
           for _, rows, parts in _subset_parts(sizes, subsets, named)]
    return pa.concat_arrays(out) if out else pa.array([], pa.string())


def _subset_parts(sizes: Sequence[int], subsets: Sequence[Sequence[int]], labels: Sequence[Sequence[str]]):
    """Per marginal (size-1 attributes dropped): ``(S, rows, [labels[j] of every cell's value on
    attribute j, for j in S])``, cells in row-major order (Arrow arrays)."""
    import pyarrow as pa

    for S in subsets:
        S = [j for j in S if sizes[j] > 1]
        rows = math.prod(sizes[j] for j in S)
        codes = np.unravel_index(np.arange(rows, dtype=np.int64), [sizes[j] for j in S]) if S else ()
        yield S, rows, [arrow_take(pa.array(labels[j], type=pa.string()), pa.array(c))
                        for j, c in zip(S, codes, strict=True)]


def _joined(parts: list, sep: str) -> Any:
    import pyarrow as pa

    return parts[0] if len(parts) == 1 else arrow_call("binary_join_element_wise",
                                                       [*parts, pa.scalar(sep, pa.string())])


def _leaf(W: Any, axes: list[int], attrs: list[str], sizes: list[int], vals: list[list[str]]) -> Any:
    """A leaf on the attributes ``axes``: rows recognised from their 0/1 pattern."""
    import pyarrow as pa

    k, n = (int(x) for x in W.shape)
    spec = getattr(W, "spec", None) or "the factor"
    if not axes:
        return None
    from workloads.base import issparse

    sparse = issparse(getattr(W, "matrix", None))
    D = None if sparse else _dense_rows(W)  # read once, for the runs and the signed rows
    rows = _row_runs(W, D)
    if len(axes) > 1:
        if rows is not None and all(lo == 0 and hi == n - 1 for lo, hi in rows):
            return None  # totals over every attribute
        if rows is not None and all(lo == hi for lo, hi in rows if lo >= 0):
            codes = np.array([lo for lo, _ in rows])
            if (codes >= 0).all():
                return _cells(codes, axes, attrs, sizes, vals)
        return pa.array([f"{spec} row {r}" for r in range(k)], type=pa.string())
    j = axes[0]
    a, v = attrs[j], vals[j]
    if rows is None:
        return pa.array([f"{a}: row {r} of {spec}" for r in range(k)], type=pa.string())
    signed = None
    if any(lo < 0 for lo, _ in rows):
        D = _dense_rows(W) if sparse else D
        signed = _signed_rows(D) if D is not None else None
    out: list[str | None] = []
    for r, (lo, hi) in enumerate(rows):
        terms = signed[r] if lo < 0 and signed is not None else None
        if terms is not None:
            out.append(" ".join(("" if i == 0 and c > 0 else "plus " if c > 0 else "minus ") + f"{a}={v[x]}"
                                for i, (c, x) in enumerate(terms)))
        elif lo < 0:
            out.append(f"{a}: row {r} of {spec}")
        elif lo == 0 and hi == n - 1 and n > 1:
            out.append(None)  # every value: the attribute is summed out
        elif lo == hi:
            out.append(f"{a}={v[lo]}")
        else:
            out.append(f"{a} in {v[lo]}..{v[hi]}")
    return pa.array(out, type=pa.string())


def _cells(codes: np.ndarray, axes: list[int], attrs: list[str], sizes: list[int],
           vals: list[list[str]]) -> Any:
    import pyarrow as pa

    parts = np.unravel_index(codes, [sizes[j] for j in axes])
    lab = None
    for j, c in zip(axes, parts, strict=True):
        p = pa.array([f"{attrs[j]}={vals[j][int(x)]}" for x in c], type=pa.string())
        lab = p if lab is None else _join(lab, p)
    return lab


#: A row of ±1 and 0 entries is labelled term by term up to this many terms.
MAX_SIGNED_TERMS = 8


def _signed_rows(D: np.ndarray) -> list[list[tuple[int, int]] | None]:
    """Per row of ``D`` whose entries are all -1, 0 or 1 (at most :data:`MAX_SIGNED_TERMS`
    non-zero): its terms ``(sign, code)`` in code order -- ``a=v minus a=w`` counts v minus
    w, as the ±1 character of a parity query does; None for any other row."""
    out: list[list[tuple[int, int]] | None] = []
    for row in D:
        nz = np.flatnonzero(row)
        ok = 0 < nz.size <= MAX_SIGNED_TERMS and bool(np.all(np.abs(row[nz]) == 1.0))
        out.append([(int(row[x]), int(x)) for x in nz] if ok else None)
    return out


def _dense_rows(W: Any) -> np.ndarray | None:
    """W as a float64 array, or None when it has more than :data:`MAX_FACTOR_ENTRIES`."""
    k, n = (int(x) for x in W.shape)
    if k * n > MAX_FACTOR_ENTRIES:
        return None
    return np.asarray(W.dense(max_entries=MAX_FACTOR_ENTRIES), dtype=np.float64)


def _row_runs(W: Any, D: np.ndarray | None) -> list[tuple[int, int]] | None:
    """Per row, ``(lo, hi)`` when the row is the 0/1 indicator of the contiguous cells lo..hi,
    ``(-1, -1)`` otherwise; read from W's sparse matrix when it has one, else from its dense
    form ``D`` (:func:`_dense_rows`; None: the factor is too large to read)."""
    k, n = (int(x) for x in W.shape)
    M = getattr(W, "matrix", None)
    from workloads.base import issparse

    if issparse(M):
        import scipy.sparse as sp

        M = sp.csr_array(M)
        out = []
        for r in range(k):
            cols = M.indices[M.indptr[r]:M.indptr[r + 1]]
            data = M.data[M.indptr[r]:M.indptr[r + 1]]
            if cols.size and np.all(data == 1.0) and cols.max() - cols.min() + 1 == cols.size:
                out.append((int(cols.min()), int(cols.max())))
            else:
                out.append((-1, -1))
        return out
    if D is None:
        return None
    ones = D == 1.0
    binary = ones | (D == 0.0)
    cnt = ones.sum(axis=1)
    first = np.where(cnt > 0, ones.argmax(axis=1), -1)
    last = np.where(cnt > 0, n - 1 - ones[:, ::-1].argmax(axis=1), -1)
    ok = binary.all(axis=1) & (cnt > 0) & (last - first + 1 == cnt)
    return [(int(f), int(l)) if o else (-1, -1) for f, l, o in zip(first, last, ok, strict=True)]


# ---------------------------------------------------------------------------------------
# tables: parts, forms and default names (module docstring)


@dataclass
class _Desc:
    """What a (part of a) table shows: its ``rows``, the ``pieces`` of its default name —
    ``(first attribute, crossed?, text)``: a crossed attribute (a column of value labels) or a
    form (``cdf(age)``) — and its ``columns``."""

    rows: int
    pieces: list[tuple[int, bool, str]]
    columns: list[Column]

    def name(self) -> str:
        """The default name: the forms in attribute order, then the crossed attributes."""
        ordered = sorted(self.pieces, key=lambda p: p[0])
        crossed = ",".join(t for _, c, t in ordered if c)
        words = [t for _, c, t in ordered if not c] + ([crossed] if crossed else [])
        return " by ".join(words) or TOTAL


class _Context:
    """The domain as the table builders read it: names, sizes, value labels (plain and quoted),
    and shared code ranges."""

    def __init__(self, domain: Any) -> None:
        self.attrs = list(domain.attributes)
        self.sizes = [int(n) for n in domain.sizes]
        self.vals = value_labels(domain)
        self.qvals = [[quoted(v) for v in vs] for vs in self.vals]
        self._ranges: dict[int, np.ndarray] = {}

    def codes(self, n: int) -> np.ndarray:
        """``0 .. n-1`` (one shared array per n)."""
        if n not in self._ranges:
            self._ranges[n] = np.arange(n, dtype=np.int64)
        return self._ranges[n]

    def column(self, axes: Sequence[int]) -> str:
        """The column of the attributes ``axes`` (module docstring)."""
        name = ",".join(self.attrs[j] for j in axes)
        return f"{name} (attribute)" if name in ANSWER_COLUMNS else name


def _walk(W: Any, offset: int, given: str | None, ctx: _Context,
          out: list[tuple[str, int, int, list[Column]]]) -> None:
    """Append the tables of ``W`` (rows from ``offset``): one per part of its stacks, one per
    marginal of a marginal family over the domain's attributes."""
    structure = getattr(W, "marginal_structure", None)
    if callable(structure):
        sizes, subsets, _ = structure()
        if tuple(int(n) for n in sizes) == tuple(ctx.sizes):
            _marginal_tables(subsets, offset, ctx, out)
            return
    blocks = getattr(W, "blocks", None)
    if blocks is not None and getattr(W, "factors", None) is None:
        names = getattr(W, "names", None) or (None,) * len(blocks)
        for b, name, lo in zip(blocks, names, W.row_offsets[:-1], strict=True):
            _walk(b, offset + int(lo), name, ctx, out)
        return
    d = _describe(W, list(range(len(ctx.sizes))), ctx)
    cols = sorted(d.columns, key=lambda c: c.position)
    out.append((given or d.name(), offset, offset + int(W.shape[0]), cols))


def _marginal_tables(subsets: Sequence[Sequence[int]], offset: int, ctx: _Context,
                     out: list[tuple[str, int, int, list[Column]]]) -> None:
    """One table per marginal, straight from the family's subsets (size-1 attributes dropped,
    as in the marginal's cells); no block is built."""
    start = offset
    for S in subsets:
        T = [j for j in S if ctx.sizes[j] > 1]
        rows = math.prod(ctx.sizes[j] for j in T)
        cols = [Column(ctx.column([j]), ctx.vals[j], ctx.codes(ctx.sizes[j]),
                       math.prod(ctx.sizes[i] for i in T[p + 1:]), j) for p, j in enumerate(T)]
        out.append((",".join(ctx.attrs[j] for j in T) or TOTAL, start, start + rows, cols))
        start += rows


def _describe(W: Any, axes: list[int], ctx: _Context) -> _Desc:
    """The :class:`_Desc` of ``W`` acting on the attributes ``axes``: a Kronecker product by
    its factors, a stack by its parts, anything else as one factor."""
    if getattr(W, "factors", None) is not None:
        from workloads.structured import kron_leaves

        leaves = kron_leaves(W)
        parts = _split(leaves, axes, ctx.sizes)
        if parts is None:
            return _other(W, axes, ctx)
        return _product([_describe(f, ax, ctx) for f, ax in zip(leaves, parts, strict=True)])
    blocks = getattr(W, "blocks", None)
    if blocks is not None:
        return _stacked([_describe(b, axes, ctx) for b in blocks])
    return _factor(W, axes, ctx)


def _product(descs: list[_Desc]) -> _Desc:
    """``F_0 ⊗ F_1 ⊗ …``: row ``r`` is factor i's row ``(r // Π_{l>i} k_l) % k_i`` (row-major)."""
    rows = math.prod(d.rows for d in descs)
    pieces: list[tuple[int, bool, str]] = []
    columns: list[Column] = []
    later = rows
    for d in descs:
        later //= max(d.rows, 1)
        pieces.extend(d.pieces)
        columns.extend(Column(c.name, c.texts, c.codes, c.stride * later, c.position) for c in d.columns)
    return _Desc(rows, pieces, columns)


def _stacked(descs: list[_Desc]) -> _Desc:
    """A stack used as a factor: each column its parts' texts one after the other, ``total``
    where a part has no such column; named by its crossed attributes when every part only
    crosses attributes or sums them out, else ``(A + B + …)``."""
    rows = sum(d.rows for d in descs)
    keys: dict[str, int] = {}
    for d in descs:
        for c in d.columns:
            keys[c.name] = min(c.position, keys.get(c.name, c.position))
    columns = []
    for name, key in keys.items():
        texts: list[str] = [TOTAL]
        codes = []
        for d in descs:
            col = next((c for c in d.columns if c.name == name), None)
            if col is None:
                codes.append(np.zeros(d.rows, dtype=np.int64))
                continue
            codes.append(col.indices(0, d.rows) + len(texts))
            texts.extend(col.texts)
        columns.append(Column(name, texts, np.concatenate(codes), 1, key))
    if all(c for d in descs for _, c, _ in d.pieces):
        pieces = list({(k, c, t): None for d in descs for k, c, t in d.pieces})
    else:
        first = min((k for d in descs for k, _, _ in d.pieces), default=0)
        pieces = [(first, False, "(" + " + ".join(d.name() for d in descs) + ")")]
    return _Desc(rows, pieces, columns)


def _factor(W: Any, axes: list[int], ctx: _Context) -> _Desc:
    """One factor on ``axes``, recognised by its rows (module docstring)."""
    k, n = (int(x) for x in W.shape)
    if not axes and k == 1:
        return _Desc(1, [], [])  # a scalar weight
    from workloads.base import issparse

    D = None if issparse(getattr(W, "matrix", None)) else _dense_rows(W)
    rows = _row_runs(W, D) if axes else None
    if rows is None:
        return _other(W, axes, ctx)
    if k == 1 and rows[0] == (0, n - 1):
        return _Desc(1, [], [])  # the total: the attributes are summed out
    if all(lo >= 0 and lo == hi for lo, hi in rows):
        return _values(np.array([lo for lo, _ in rows], dtype=np.int64), axes, ctx)
    if len(axes) == 1 and all(lo >= 0 for lo, _ in rows):
        j = axes[0]
        a, v = ctx.attrs[j], ctx.qvals[j]
        cdf = all(lo == 0 for lo, _ in rows)
        texts = [f"{a} ≤ {v[hi]}" if cdf else f"{a} in [{v[lo]}, {v[hi]}]" for lo, hi in rows]
        return _Desc(k, [(j, False, f"{'cdf' if cdf else 'range'}({a})")],
                     [Column(ctx.column([j]), texts, ctx.codes(k), 1, j)])
    return _other(W, axes, ctx)


def _values(codes: np.ndarray, axes: list[int], ctx: _Context) -> _Desc:
    """Rows of one cell each: a column of value labels per attribute of more than one value."""
    parts = np.unravel_index(codes, [ctx.sizes[j] for j in axes])
    keep = [(j, c) for j, c in zip(axes, parts, strict=True) if ctx.sizes[j] > 1]
    return _Desc(int(codes.size), [(j, True, ctx.attrs[j]) for j, _ in keep],
                 [Column(ctx.column([j]), ctx.vals[j], np.asarray(c, dtype=np.int64), 1, j) for j, c in keep])


def _other(W: Any, axes: list[int], ctx: _Context) -> _Desc:
    """Any other factor (or part whose factors do not line up with the attributes): one column
    of its query labels, named ``KIND(attributes)``."""
    k = int(W.shape[0])
    lab = _leaf(W, axes, ctx.attrs, ctx.sizes, ctx.qvals) if axes else None
    texts = [TOTAL if x is None else str(x) for x in lab.to_pylist()] if lab is not None else [
        f"row {r} of {W.spec or 'the factor'}" for r in range(k)]
    names = ",".join(ctx.attrs[j] for j in axes)
    first = axes[0] if axes else 0
    return _Desc(k, [(first, False, f"{_kind(W, texts)}({names})")],
                 [Column(ctx.column(axes) if axes else "row", texts, ctx.codes(k), 1, first)])


def _kind(W: Any, texts: Sequence[str]) -> str:
    """The form of a factor that is none of the named ones: ``contrast`` for signed rows, else
    the first word of its spec (``matrix`` for a ``file:`` one, ``rows`` without a spec)."""
    signed = [t for t in texts if t != TOTAL]
    if signed and all("=" in t and "row " not in t for t in signed):
        return "contrast"
    spec = getattr(W, "spec", None) or ""
    word = "".join(c if c.isalnum() or c == "_" else " " for c in spec).split()
    if not word:
        return "rows"
    return "matrix" if word[0] == "file" else word[0]
