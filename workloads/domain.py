"""Product domains: named attributes with finite sizes, and the cell indexing of histograms.

A :class:`Domain` with attributes ``a_0, ..., a_{d-1}`` of sizes ``n_0, ..., n_{d-1}``
has ``N = Π n_j`` cells. A record ``(v_0, ..., v_{d-1})`` with ``0 <= v_j < n_j``
falls in cell ``ravel_C(v) = ((v_0 · n_1 + v_1) · n_2 + v_2) ...`` -- row-major order,
attribute 0 varying slowest. This is the column order of
``KronWorkload([W_0, ..., W_{d-1}])`` (i.e. of ``np.kron(W_0, W_1, ...)``), so a
Kronecker workload applies ``W_j`` along attribute ``j``.

A Domain may carry a public :class:`~workloads.schema.DomainSchema` (``docs/schema.md``):
the raw values of each attribute, the code each gets and their labels. The planner only ever
uses the names and sizes; the engines use the schema to map raw records to codes, and the
plan carries it. :meth:`Domain.from_json` reads a ``{name: size}`` object;
``workloads.schema.read_domain`` reads that or a schema file.

Records are private data: validation messages name attributes and count bad rows,
never print values.
"""

from __future__ import annotations

import json
import math
import os
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from factorize.numerics import integer

from .errors import DomainError
from .operators import DEFAULT_MAX_DENSE_ENTRIES

__all__ = ["Domain", "check_attribute_name", "check_workload_axes", "workload_axes"]

_INT64_MAX = int(np.iinfo(np.int64).max)
#: Unicode categories refused in attribute names: control characters (Cc: tab, CR, LF, NUL,
#: …) and the line and paragraph separators (Zl, Zp).
_LINE_CONTROL = frozenset({"Cc", "Zl", "Zp"})


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def check_attribute_name(name: Any, error: type[DomainError] = DomainError) -> str:
    """``name`` if it is a valid attribute name: a non-empty string without control characters
    (Unicode Cc: tab, CR, LF, NUL, …) or line / paragraph separators (Zl, Zp), which a CSV
    header, an answer's label or a table's file name could not carry faithfully; ``error``
    (a :class:`DomainError` subclass, e.g. the schema's) otherwise."""
    if not isinstance(name, str) or not name:
        raise error(f"attribute names must be non-empty strings, got {name!r}")
    if any(unicodedata.category(c) in _LINE_CONTROL for c in name):
        raise error(f"attribute name {name!r} contains a control character or line break: a CSV "
                    "header, a label or a table file name could not carry it faithfully")
    return name


class Domain:
    """A product domain: ordered attribute names with positive integer sizes.

    Parameters
    ----------
    attributes:
        Distinct non-empty attribute names, in order (attribute 0 varies slowest).
    sizes:
        ``sizes[j]`` is the number of values of attribute ``j`` (values ``0..sizes[j]-1``).
    schema:
        Optional public :class:`~workloads.schema.DomainSchema` with the same names and sizes
        (its raw values, codes and labels); usually built by ``DomainSchema.domain()`` or
        :meth:`from_json`.
    """

    __slots__ = ("_attributes", "_sizes", "_schema")

    def __init__(self, attributes: Sequence[str], sizes: Sequence[int], schema: Any = None) -> None:
        if isinstance(attributes, str):
            raise DomainError("attributes must be a sequence of names, got a single string")
        attrs = list(attributes)
        try:
            raw_sizes = list(sizes)
        except TypeError:
            raise DomainError(f"sizes must be a sequence of integers, got {type(sizes).__name__}") from None
        if len(attrs) != len(raw_sizes):
            raise DomainError(f"got {len(attrs)} attribute names but {len(raw_sizes)} sizes")
        if not attrs:
            raise DomainError("a domain needs at least one attribute")
        for a in attrs:
            check_attribute_name(a)
        dups = [a for a, count in Counter(attrs).items() if count > 1]
        if dups:
            raise DomainError(f"duplicate attribute names: {sorted(set(dups))}")
        self._attributes = tuple(attrs)
        self._sizes = tuple(
            integer(f"size of attribute {a!r}", s, 1, DomainError) for a, s in zip(attrs, raw_sizes, strict=True)
        )
        if schema is not None:
            # a workloads.schema.DomainSchema (this module sits below it and never imports it):
            # whatever is given must at least state the same names and sizes
            if not all(hasattr(schema, a) for a in ("names", "sizes", "to_dict")):
                raise DomainError(f"schema must be a DomainSchema, got {type(schema).__name__}")
            if schema.names != self._attributes or schema.sizes != self._sizes:
                raise DomainError("the schema's attributes and sizes "
                                  f"({', '.join(f'{a}={n}' for a, n in zip(schema.names, schema.sizes, strict=True))}) "
                                  "differ from the domain's "
                                  f"({', '.join(f'{a}={n}' for a, n in zip(self._attributes, self._sizes, strict=True))})")
        self._schema = schema

    # -- constructors -------------------------------------------------------
    @classmethod
    def from_dict(cls, mapping: Mapping[str, int]) -> Domain:
        """Build from a mapping ``name -> size``, keeping the mapping's order."""
        if not isinstance(mapping, Mapping):
            raise DomainError(f"expected a mapping name -> size, got {type(mapping).__name__}")
        return cls(list(mapping.keys()), list(mapping.values()))

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Domain:
        """Read a JSON object ``{"name": size, ...}`` (order preserved), e.g. ``adult-domain.json``.
        A domain schema file (``{"format": "factorize-domain-schema", ...}``, ``docs/schema.md``)
        is refused with a pointer to ``workloads.schema.read_domain``, which reads either kind."""

        def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
            keys = [k for k, _ in pairs]
            if len(set(keys)) != len(keys):
                raise DomainError(f"domain file {os.fspath(path)!r} repeats an attribute name")
            return dict(pairs)

        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh, object_pairs_hook=no_duplicates)
        except OSError as exc:
            raise DomainError(f"cannot read domain file {os.fspath(path)!r}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise DomainError(f"domain file {os.fspath(path)!r} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise DomainError(f"domain file {os.fspath(path)!r} must contain a JSON object name -> size")
        if is_schema_document(data):
            raise DomainError(f"{os.fspath(path)!r} is a domain schema, not a {{name: size}} object: "
                              "read it with workloads.schema.read_domain (either kind of file) or "
                              "DomainSchema.from_json(path).domain()")
        bad = [k for k, v in data.items() if isinstance(v, (dict, list))]
        if bad:
            raise DomainError(f"domain file {os.fspath(path)!r}: attribute {bad[0]!r} is not a size; a "
                              "file of raw values must be a domain schema with \"format\": "
                              "\"factorize-domain-schema\" and \"version\": 1 (docs/schema.md)")
        return cls.from_dict(data)

    # -- properties ---------------------------------------------------------
    @property
    def attributes(self) -> tuple[str, ...]:
        """Attribute names, in order."""
        return self._attributes

    @property
    def sizes(self) -> tuple[int, ...]:
        """Attribute sizes, in order (Python ints)."""
        return self._sizes

    @property
    def shape(self) -> tuple[int, ...]:
        """Same as :attr:`sizes`: the shape of the histogram as a d-dimensional array."""
        return self._sizes

    @property
    def size(self) -> int:
        """``N``: number of cells, the product of the sizes (Python int, no overflow)."""
        return math.prod(self._sizes)

    def __len__(self) -> int:
        return len(self._attributes)

    def __getitem__(self, name: str) -> int:
        """Size of attribute ``name``."""
        return self._sizes[self.axes([name])[0]]

    def __contains__(self, name: object) -> bool:
        return name in self._attributes

    @property
    def schema(self) -> Any:
        """The public :class:`~workloads.schema.DomainSchema` (raw values, codes, labels), or
        None for a domain of sizes only (its records are the codes themselves)."""
        return self._schema

    def labels(self, attribute: str) -> list[str]:
        """The label of every code of ``attribute``, in code order: the schema's, or the codes
        themselves (``"0"``, ``"1"``, …) for a domain of sizes only."""
        j = self.axes([attribute])[0]
        if self._schema is not None:
            return self._schema.labels(attribute)
        return [str(c) for c in range(self._sizes[j])]

    def axes(self, attrs: str | Iterable[str]) -> tuple[int, ...]:
        """Positions of the named attributes (in the order given)."""
        names = [attrs] if isinstance(attrs, str) else list(attrs)
        unknown = [a for a in names if a not in self._attributes]
        if unknown:
            raise DomainError(f"unknown attributes {unknown}; the domain has {list(self._attributes)}")
        return tuple(self._attributes.index(a) for a in names)

    def project(self, attrs: str | Iterable[str]) -> Domain:
        """Sub-domain on the named attributes, in the order given."""
        names = [attrs] if isinstance(attrs, str) else list(attrs)
        if not names:
            raise DomainError("project() needs at least one attribute")
        if len(set(names)) != len(names):
            raise DomainError(f"project() got duplicate attribute names: {names}")
        axes = self.axes(names)
        schema = self._schema.project(names) if self._schema is not None else None
        return Domain([self._attributes[i] for i in axes], [self._sizes[i] for i in axes], schema)

    def to_dict(self) -> dict[str, int]:
        """``{name: size}`` in attribute order."""
        return dict(zip(self._attributes, self._sizes, strict=True))

    # -- records <-> cells --------------------------------------------------
    def _check_records(self, records: Any) -> np.ndarray:
        arr = np.asarray(records)
        d = len(self._attributes)
        if arr.ndim != 2:
            raise DomainError(
                f"records must be a 2-D array (n records x {d} attributes), got a {arr.ndim}-D array"
            )
        if arr.shape[1] != d:
            raise DomainError(
                f"records have {arr.shape[1]} columns but the domain has {d} attributes "
                f"{list(self._attributes)}"
            )
        kind = arr.dtype.kind
        if kind == "b":
            arr = arr.astype(np.int64)
        elif kind == "f":
            problems = []
            for j, a in enumerate(self._attributes):
                col = arr[:, j]
                bad = int(np.count_nonzero(~np.isfinite(col) | (col != np.round(col))))
                if bad:
                    problems.append(f"{a!r}: {_rows(bad)}")
            if problems:
                raise DomainError("records must hold integer values; non-integer values in " + "; ".join(problems))
        elif kind not in "iu":
            raise DomainError(f"records must be an integer array, got dtype {arr.dtype}")
        problems = []
        for j, (a, s) in enumerate(zip(self._attributes, self._sizes, strict=True)):
            col = arr[:, j]
            bad = int(np.count_nonzero((col < 0) | (col >= s)))
            if bad:
                problems.append(f"{a!r} (size {s}, valid values 0..{s - 1}): {_rows(bad)}")
        if problems:
            raise DomainError(
                f"records out of range for {len(problems)} attribute(s) of {arr.shape[0]} rows: "
                + "; ".join(problems)
            )
        return arr.astype(np.int64)

    def index(self, records: Any) -> np.ndarray:
        """Histogram cells of ``records`` (``(n, d)`` integers) as an ``(n,)`` array.

        Row-major (C) order, attribute 0 slowest -- the column order of
        ``KronWorkload``; equal to ``np.ravel_multi_index(records.T, sizes)``.
        Returns int64 when ``N < 2**63``, else an object array of Python ints.
        """
        arr = self._check_records(records)
        if self.size <= _INT64_MAX:
            out = np.zeros(arr.shape[0], dtype=np.int64)
            for j, s in enumerate(self._sizes):
                out *= s
                out += arr[:, j]
            return out
        out_obj = np.zeros(arr.shape[0], dtype=object)
        for j, s in enumerate(self._sizes):
            out_obj = out_obj * s + arr[:, j].astype(object)
        return out_obj

    def unindex(self, cells: Any) -> np.ndarray:
        """Records ``(n, d)`` (int64) of histogram cells ``(n,)``; the inverse of :meth:`index`."""
        arr = np.asarray(cells)
        if arr.ndim != 1:
            raise DomainError(f"cells must be a 1-D array, got a {arr.ndim}-D array")
        n_total = self.size
        if arr.dtype.kind == "O":
            if not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in arr):
                raise DomainError("cells must be integers")
        elif arr.dtype.kind == "f":
            bad = int(np.count_nonzero(~np.isfinite(arr) | (arr != np.round(arr))))
            if bad:
                raise DomainError(f"cells must be integers; {bad} of {arr.size} cells are not")
        elif arr.dtype.kind not in "iu":
            raise DomainError(f"cells must be an integer array, got dtype {arr.dtype}")
        bad = int(np.count_nonzero((arr < 0) | (arr >= n_total)))
        if bad:
            raise DomainError(f"{bad} of {arr.size} cells are outside 0..N-1 (N={n_total})")
        if n_total <= _INT64_MAX:
            rest: np.ndarray = arr.astype(np.int64)
        else:
            rest = np.array([int(c) for c in arr], dtype=object)
        out = np.empty((arr.shape[0], len(self._sizes)), dtype=np.int64)
        for j in range(len(self._sizes) - 1, -1, -1):
            s = self._sizes[j]
            out[:, j] = (rest % s).astype(np.int64)
            rest = rest // s
        return out

    def histogram(self, records: Any) -> np.ndarray:
        """Histogram ``h`` (length ``N``, float64 counts) of ``records`` in :meth:`index` order."""
        n_total = self.size
        if n_total > DEFAULT_MAX_DENSE_ENTRIES:
            raise DomainError(
                f"refusing to build a dense histogram with N={n_total} cells "
                f"(limit {DEFAULT_MAX_DENSE_ENTRIES})"
            )
        cells = self.index(records)
        return np.bincount(cells, minlength=n_total).astype(np.float64)

    # -- dunder -------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Domain):
            return NotImplemented
        return (self._attributes == other._attributes and self._sizes == other._sizes
                and self._schema == other._schema)

    def __hash__(self) -> int:
        return hash((self._attributes, self._sizes, self._schema))

    def __repr__(self) -> str:
        inner = ", ".join(f"{a!r}: {s}" for a, s in zip(self._attributes, self._sizes, strict=True))
        return f"Domain({{{inner}}}{', with schema' if self._schema is not None else ''})"


# ---------------------------------------------------------------------------------------
# workload axes against a domain

#: Most distinct axis layouts examined (a Kronecker product of unions multiplies them).
_MAX_LAYOUTS = 4096


def workload_axes(workload: Any) -> set[tuple[int, ...]]:
    """The axis layouts of a workload's Kronecker blocks: a Kronecker product's layout is the
    concatenation of its factors' (one per combination of the factors' own layouts), a union's
    is the set of its blocks', and any other matrix has the single axis (N,). Axes of size 1
    are dropped (they do not index a domain attribute). A marginal family (anything with
    ``marginal_structure()``) has the single layout of its attribute sizes above 1 -- every
    block is ``⊗_j (I or 1ᵀ)_{n_j}``, possibly after a 1×1 weight -- read without building
    its blocks."""
    structure = getattr(workload, "marginal_structure", None)
    if callable(structure):
        sizes = structure()[0]
        return {tuple(int(n) for n in sizes if int(n) > 1)}
    factors = getattr(workload, "factors", None)
    if factors is not None:
        layouts: set[tuple[int, ...]] = {()}
        for f in factors:
            layouts = {a + b for a in layouts for b in workload_axes(f)}
            if len(layouts) > _MAX_LAYOUTS:
                raise DomainError("the workload has too many distinct axis layouts to check")
        return layouts
    blocks = getattr(workload, "blocks", None)
    if blocks is not None:
        out: set[tuple[int, ...]] = set()
        for b in blocks:
            out |= workload_axes(b)
            if len(out) > _MAX_LAYOUTS:
                raise DomainError("the workload has too many distinct axis layouts to check")
        return out
    n = int(workload.shape[1])
    return {(n,)} if n > 1 else {()}


def coarsens(axes: tuple[int, ...], sizes: Sequence[int]) -> bool:
    """True when each axis is the product of a run of consecutive attributes (size-1
    attributes fit anywhere)."""
    attrs = [int(s) for s in sizes if int(s) > 1]
    i = 0
    for a in axes:
        prod = 1
        while prod < a and i < len(attrs):
            prod *= attrs[i]
            i += 1
        if prod != a:
            return False
    return i == len(attrs)


def check_workload_axes(workload: Any, domain: Domain) -> None:
    """Refuse (DomainError) a domain whose attributes do not line up with the workload's axes:
    every axis of every Kronecker block must be one attribute or a run of consecutive
    attributes (e.g. ``kron(prefix:4,identity:4)`` fits sizes (4, 4) or (2, 2, 4), not (2, 8))."""
    for axes in sorted(workload_axes(workload)):
        if not coarsens(axes, domain.sizes):
            shown = "×".join(map(str, axes)) or "1"
            raise DomainError(
                f"the workload's axes ({shown}) do not line up with the domain's attributes "
                f"({', '.join(f'{a}={s}' for a, s in zip(domain.attributes, domain.sizes, strict=True))}): each "
                "axis must be one attribute or a run of consecutive attributes")


def is_schema_document(obj: Any) -> bool:
    """Whether a parsed JSON document claims to be a domain schema (a text ``format`` or an
    ``attributes`` list) rather than a ``{name: size}`` object (whose values are integers, so
    attributes named "format" or "version" stay sizes)."""
    return isinstance(obj, dict) and (isinstance(obj.get("format"), str)
                                      or isinstance(obj.get("attributes"), list))
