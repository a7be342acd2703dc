"""Every answer named in the workload's terms: ``sex=Female, race=White``, ``age in 17..37``.

The label of query i is built from the workload's structure, never from the data, with each
attribute's value labels taken from the domain's public schema (``workloads.schema``; the
codes themselves when the domain has none):

* a **marginal** block on attributes S labels its cell ``a=v, b=w`` (the empty marginal is
  ``total``); :func:`marginal_columns` gives the block's attributes and the cell's values as
  separate columns as well (the tidy form, one table per marginal);
* a **one-attribute factor** labels each row by what it counts: one value ``a=v``, a
  contiguous run of values ``a in lo..hi`` (prefixes, ranges: the interval in value labels),
  every value (a total) by nothing — recognised from the rows' 0/1 pattern, so a custom
  (``file:``) factor gets the same labels when it is an interval workload; a row of ±1 and 0
  entries (up to 8 terms) by its signed terms, ``a=0 minus a=1`` (the ±1 character of a
  parity query counts the first value minus the second); any other row is
  ``a: row r of <spec>``;
* a **Kronecker product** joins its factors' labels in attribute order (row-major: the last
  factor varies fastest, as W's rows do); a **stack** concatenates its blocks' labels, with
  ``block b`` prefixed when its blocks are not distinguishable otherwise;
* a scaled workload is labelled as its base.

A value label that could be misread — holding ``,``, ``=``, ``"``, ``..``, the word ``in``,
``plus`` or ``minus``, or outer spaces, like a bin ``[0, 20)`` — is written as a JSON string:
``age="[0, 20)", sex=Female``.

Built as Arrow string arrays (vectorised: a Kronecker label is one element-wise join of two
repeated arrays), so millions of answers take seconds. The kernels are called by name
(:func:`arrow_call`), without importing ``pyarrow.compute``: that import builds a Python
wrapper for each of its ~300 functions, about 40 ms of every run's start-up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: A one-attribute factor is read densely up to this many entries to recognise its rows.
MAX_FACTOR_ENTRIES = 1 << 24


def answer_labels(plan: Any, check: Any) -> dict[str, Any]:
    """The label columns of a plan's answers (``label`` for every query; ``marginal`` and
    ``cell`` too for a stack of marginals), from the verified workload and the plan's domain;
    empty when the plan has neither."""
    W = getattr(check, "workload", None)
    domain = getattr(plan, "domain", None)
    if W is None or domain is None or not hasattr(domain, "attributes"):
        return {}
    cols = {"label": query_labels(W, domain)}
    structure = getattr(W, "marginal_structure", None)
    if callable(structure):
        sizes, subsets, _ = structure()
        if tuple(int(n) for n in sizes) == tuple(int(n) for n in domain.sizes):
            cols["marginal"], cols["cell"] = marginal_columns(
                [int(n) for n in sizes], list(domain.attributes), quoted_labels(domain), subsets)
    return cols


def marginal_tables(W: Any, domain: Any) -> list[tuple[str, dict[str, Any], int, int]]:
    """The tidy form of a stack of marginals: per marginal table ``(name, {attribute: value
    labels}, first row, end row)`` in W's row order (the attribute columns computed from the
    structure, never by splitting a joined cell); [] when W is not a stack of marginals over
    ``domain``'s attributes."""

    structure = getattr(W, "marginal_structure", None)
    if not callable(structure):
        return []
    sizes, subsets, _ = structure()
    if tuple(int(n) for n in sizes) != tuple(int(n) for n in domain.sizes):
        return []
    attrs = list(domain.attributes)
    out, start = [], 0
    for S, rows, parts in _subset_parts([int(n) for n in sizes], subsets, value_labels(domain)):
        out.append((",".join(attrs[j] for j in S) if S else "total",
                    {attrs[j]: p for j, p in zip(S, parts, strict=True)}, start, start + rows))
        start += rows
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


def marginal_columns(sizes: Sequence[int], attributes: Sequence[str], vals: Sequence[Sequence[str]],
                     subsets: Sequence[Sequence[int]]) -> tuple[Any, Any]:
    """``(marginal, cell)`` columns of a stack of marginals: the block's attribute names and the
    cell's value labels (:func:`quoted`), comma separated (Arrow; the names
    dictionary-encoded)."""
    import pyarrow as pa

    names, counts, cells = [], [], []
    for S, rows, parts in _subset_parts(sizes, subsets, vals):
        names.append(",".join(attributes[j] for j in S) if S else "*")
        counts.append(rows)
        cells.append(_joined(parts, ",") if parts else pa.array([""] * rows, type=pa.string()))
    index = np.repeat(np.arange(len(names), dtype=np.int32), counts)
    marginal = pa.DictionaryArray.from_arrays(pa.array(index), pa.array(names, type=pa.string()))
    return marginal, pa.chunked_array(cells, type=pa.string())


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
