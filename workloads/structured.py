"""Structured workloads built from other workloads, never densified.

* :class:`KronWorkload` -- ``W = F_0 ⊗ F_1 ⊗ ... ⊗ F_{d-1}`` (``np.kron`` ordering:
  factor 0 indexes the slowest-varying part of rows and columns).
* :class:`VStackWorkload` -- the union of workloads over the same domain
  (rows of block 0 first).
* :class:`SumWorkload` -- ``W = T_0 + T_1 + ...`` (the Gram matrix of a stack).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _hashing
from .base import Workload, issparse
from .errors import WorkloadError
from .explicit import DenseWorkload, SparseWorkload

__all__ = ["KronWorkload", "VStackWorkload", "SumWorkload", "as_operator", "has_names", "kron_leaves"]


def as_operator(obj: Any, name: str = "workload") -> Workload:
    """Return ``obj`` as a :class:`Workload`, wrapping numpy arrays / scipy.sparse matrices."""
    if isinstance(obj, Workload):
        return obj
    if issparse(obj):
        return SparseWorkload(obj)
    if isinstance(obj, (np.ndarray, list, tuple)):
        return DenseWorkload(obj)
    raise WorkloadError(
        f"{name} must be a Workload, a numpy array or a scipy.sparse matrix, "
        f"got {type(obj).__name__}"
    )


def kron_leaves(workload: Any) -> list[Any]:
    """The Kronecker factors of ``workload``, nested products flattened, in order.

    ``W = F_0 ⊗ (F_1 ⊗ F_2)`` gives ``[F_0, F_1, F_2]`` (the Kronecker product is
    associative); anything without ``factors`` (a dense, sparse or stacked workload) is its
    own single leaf. The one flattening helper of the project: planner, plan checks,
    structured blocks and reports all read a workload's Kronecker structure through it.
    """
    factors = getattr(workload, "factors", None)
    if factors is None:
        return [workload]
    leaves: list[Any] = []
    for f in factors:
        leaves.extend(kron_leaves(f))
    return leaves


def _coerce_sequence(items: Any, name: str) -> tuple[Workload, ...]:
    if isinstance(items, (Workload, np.ndarray, str)) or issparse(items):
        raise WorkloadError(f"{name} must be a sequence of workloads, got a single {type(items).__name__}")
    try:
        seq = list(items)
    except TypeError:
        raise WorkloadError(f"{name} must be a sequence of workloads, got {type(items).__name__}") from None
    if not seq:
        raise WorkloadError(f"{name} must contain at least one workload")
    return tuple(as_operator(item, f"{name}[{i}]") for i, item in enumerate(seq))


def _kron_apply(factors: Sequence[Workload], x: np.ndarray, transpose: bool) -> np.ndarray:
    """Apply ``F_0 ⊗ ... ⊗ F_{d-1}`` (or its transpose) to ``x`` by reshaping.

    ``x`` has shape ``(P,)`` or ``(P, m)`` with ``P`` the product of the factors'
    input dimensions; row index ``p`` of ``x`` is the C-order ravel of the
    per-factor indices ``(p_0, ..., p_{d-1})`` -- the ``np.kron`` convention.
    """
    in_dims = [f.shape[0] if transpose else f.shape[1] for f in factors]
    out_dims = [f.shape[1] if transpose else f.shape[0] for f in factors]
    vector = x.ndim == 1
    m = 1 if vector else x.shape[1]
    t = x.reshape(*in_dims, m)
    # Shrinking factors first keeps the intermediate tensors small.
    order = sorted(range(len(factors)), key=lambda i: out_dims[i] / in_dims[i])
    for i in order:
        moved = np.moveaxis(t, i, 0)
        rest = moved.shape[1:]
        flat = moved.reshape(in_dims[i], math.prod(rest))
        f = factors[i]
        res = f._rmatvec(flat) if transpose else f._matvec(flat)
        res = np.asarray(res).reshape(out_dims[i], *rest)
        t = np.moveaxis(res, 0, i)
    total = math.prod(out_dims)
    out = t.reshape(total) if vector else t.reshape(total, m)
    return out


class KronWorkload(Workload):
    """Kronecker product ``W = F_0 ⊗ F_1 ⊗ ... ⊗ F_{d-1}`` (``np.kron`` ordering).

    Shape ``(Π k_i, Π N_i)``. Row ``r`` corresponds to the factor rows
    ``(r_0, ..., r_{d-1})`` with ``r`` their C-order (row-major) ravel, and likewise
    for columns: factor 0 varies slowest. On a product domain with attribute
    ``j`` of size ``N_j`` (see :class:`workloads.Domain`), ``W h`` applies ``F_j``
    along attribute ``j``. ``matvec``/``rmatvec`` never form the product.
    """

    def __init__(self, factors: Sequence[Workload], spec: str | None = None) -> None:
        super().__init__(spec)
        self._factors = _coerce_sequence(factors, "factors")
        self._shape = (
            math.prod(f.shape[0] for f in self._factors),
            math.prod(f.shape[1] for f in self._factors),
        )

    @classmethod
    def _trusted(cls, factors: tuple[Workload, ...], shape: tuple[int, int]) -> KronWorkload:
        """A product of already validated ``factors`` whose ``shape`` the caller computed
        (no coercion: :class:`MarginalWorkload` builds many blocks this way)."""
        obj = cls.__new__(cls)
        Workload.__init__(obj, None)
        obj._factors = factors
        obj._shape = shape
        return obj

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def factors(self) -> tuple[Workload, ...]:
        """The Kronecker factors ``F_0, ..., F_{d-1}``."""
        return self._factors

    def _repr_extra(self) -> str:
        return f"factors=[{', '.join(repr(f) for f in self._factors)}]"

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return _kron_apply(self._factors, x, transpose=False)

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        return _kron_apply(self._factors, y, transpose=True)

    def gram(self) -> Workload:
        """``WᵀW = (F_0ᵀF_0) ⊗ ... ⊗ (F_{d-1}ᵀF_{d-1})`` as a :class:`KronWorkload`."""
        return KronWorkload([f.gram() for f in self._factors])

    def _dense(self, max_entries: int) -> np.ndarray:
        out = self._factors[0].dense(max_entries)
        for f in self._factors[1:]:
            out = np.kron(out, f.dense(max_entries))
        return out

    def _flat_factors(self) -> list[Workload]:
        flat: list[Workload] = []
        for f in self._factors:
            if isinstance(f, KronWorkload):
                flat.extend(f._flat_factors())
            else:
                flat.append(f)
        return flat

    def _compute_fingerprint(self) -> str:
        # Kronecker products are associative: nested products hash like flat ones,
        # and a product of one factor hashes like the factor itself.
        flat = self._flat_factors()
        if len(flat) == 1:
            return flat[0].fingerprint()
        return _hashing.hash_combine("kron", self._shape, [f.fingerprint() for f in flat])


class VStackWorkload(Workload):
    """Union of workloads over the same domain: ``W = [B_0; B_1; ...]``.

    Shape ``(Σ k_b, N)``; the rows of block 0 come first. All blocks must have
    the same number of columns ``N``.

    ``names``: a table name per block (None: the block's default name, from the attributes
    it crosses and its form, ``executor.labels``) — what the spec's ``table(NAME,SPEC)``
    gives. Names label the answers; they are not part of the matrix, so not of
    :meth:`fingerprint` (a named workload matches the plans of the same matrix; the spec a
    plan stores, which its digest covers, carries them).
    """

    #: Block names; a subclass that builds its blocks itself (:class:`MarginalWorkload`) has none.
    _names: tuple[str | None, ...] | None = None

    def __init__(self, blocks: Sequence[Workload], spec: str | None = None, *,
                 names: Sequence[str | None] | None = None) -> None:
        super().__init__(spec)
        self._stacked = _coerce_sequence(blocks, "blocks")
        n = self._stacked[0].shape[1]
        for i, b in enumerate(self._stacked):
            if b.shape[1] != n:
                raise WorkloadError(
                    f"all blocks of a VStackWorkload must share the domain size N: block 0 has "
                    f"N={n} columns but block {i} has N={b.shape[1]}"
                )
        self._offsets: tuple[int, ...] = (0, *itertools.accumulate(b.shape[0] for b in self._stacked))
        self._shape = (self._offsets[-1], n)
        if names is not None:
            named = tuple(names)
            if len(named) != len(self._stacked):
                raise WorkloadError(f"names must give one name (or None) per block: {len(named)} "
                                    f"names for {len(self._stacked)} blocks")
            if any(x is not None and (not isinstance(x, str) or not x.strip()) for x in named):
                raise WorkloadError("a block name must be a non-empty string (or None)")
            if any(x is not None and isinstance(b, VStackWorkload) for x, b in zip(named, self._stacked, strict=True)):
                raise WorkloadError("a named block is one table: a stack is several (name its blocks)")
            self._names = named if any(x is not None for x in named) else None

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def blocks(self) -> tuple[Workload, ...]:
        """The stacked blocks, in row order."""
        return self._stacked

    @property
    def names(self) -> tuple[str | None, ...]:
        """The table name of each block (None: its default name; class docstring)."""
        return self._names if self._names is not None else (None,) * (len(self._offsets) - 1)

    @property
    def row_offsets(self) -> tuple[int, ...]:
        """Row offsets: block ``b`` occupies rows ``row_offsets[b]:row_offsets[b+1]``."""
        return self._offsets

    def _repr_extra(self) -> str:
        shown = [repr(b) for b in self.blocks[:3]]
        if len(self.blocks) > 3:
            shown.append(f"... ({len(self.blocks)} blocks)")
        return f"blocks=[{', '.join(shown)}]"

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([b._matvec(x) for b in self.blocks], axis=0)

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        offs = self._offsets
        out = self.blocks[0]._rmatvec(y[offs[0]:offs[1]])  # a VStackWorkload has a block
        for b, lo, hi in zip(self.blocks[1:], offs[1:-1], offs[2:], strict=False):
            out = out + b._rmatvec(y[lo:hi])
        return out

    def gram(self) -> Workload:
        """``WᵀW = Σ_b B_bᵀB_b``: a :class:`SumWorkload` of block Grams (summed when all explicit)."""
        return _sum_of([b.gram() for b in self.blocks])

    def _dense(self, max_entries: int) -> np.ndarray:
        return np.vstack([b.dense(max_entries) for b in self.blocks])

    def _flat_blocks(self) -> list[Workload]:
        flat: list[Workload] = []
        for b in self.blocks:
            if isinstance(b, VStackWorkload):
                flat.extend(b._flat_blocks())
            else:
                flat.append(b)
        return flat

    def _flat_block_fingerprints(self) -> list[str]:
        """Digests of the flattened blocks (nested stacks contribute their own blocks'),
        without building what a subclass keeps implicit (:class:`MarginalWorkload`)."""
        out: list[str] = []
        for b in self.blocks:
            if isinstance(b, VStackWorkload):
                out.extend(b._flat_block_fingerprints())
            else:
                out.append(b.fingerprint())
        return out

    def _compute_fingerprint(self) -> str:
        flat = self._flat_block_fingerprints()
        if len(flat) == 1:
            return flat[0]
        return _hashing.hash_combine("vstack", self._shape, flat)


def has_names(workload: Any) -> bool:
    """Whether ``workload`` is a stack that names a table (:attr:`VStackWorkload.names`), itself
    or in a nested stack (a stack that builds its blocks itself, a marginal family, names none
    and is not walked)."""
    if not isinstance(workload, VStackWorkload):
        return False
    return workload._names is not None or any(has_names(b) for b in getattr(workload, "_stacked", ()))


class SumWorkload(Workload):
    """Sum of workloads of one shape: ``W = T_0 + T_1 + ...`` (shape of the terms)."""

    def __init__(self, terms: Sequence[Workload], spec: str | None = None) -> None:
        super().__init__(spec)
        self._terms = _coerce_sequence(terms, "terms")
        shape = self._terms[0].shape
        for i, t in enumerate(self._terms):
            if t.shape != shape:
                raise WorkloadError(
                    f"all terms of a SumWorkload must have the same shape: term 0 has shape "
                    f"{shape} but term {i} has shape {t.shape}"
                )
        self._shape = shape

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def terms(self) -> tuple[Workload, ...]:
        """The summands."""
        return self._terms

    def _repr_extra(self) -> str:
        shown = [repr(t) for t in self._terms[:3]]
        if len(self._terms) > 3:
            shown.append(f"... ({len(self._terms)} terms)")
        return f"terms=[{', '.join(shown)}]"

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        out = self._terms[0]._matvec(x)
        for t in self._terms[1:]:
            out = out + t._matvec(x)
        return out

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        out = self._terms[0]._rmatvec(y)
        for t in self._terms[1:]:
            out = out + t._rmatvec(y)
        return out

    def _dense(self, max_entries: int) -> np.ndarray:
        out = self._terms[0].dense(max_entries)
        for t in self._terms[1:]:
            out += t.dense(max_entries)
        return out

    def _compute_fingerprint(self) -> str:
        if len(self._terms) == 1:
            return self._terms[0].fingerprint()
        return _hashing.hash_combine("sum", self._shape, [t.fingerprint() for t in self._terms])


def _sum_of(terms: list[Workload]) -> Workload:
    """Sum ``terms``: one explicit matrix when all are explicit, else a :class:`SumWorkload`."""
    if len(terms) == 1:
        return terms[0]
    dense = [t for t in terms if isinstance(t, DenseWorkload)]
    if len(dense) == len(terms):
        return DenseWorkload(sum((t.matrix for t in dense[1:]), start=dense[0].matrix.copy()))
    sparse = [t for t in terms if isinstance(t, SparseWorkload)]
    if len(sparse) == len(terms):
        total = sparse[0].matrix
        for t in sparse[1:]:
            total = total + t.matrix
        return SparseWorkload(total)
    return SumWorkload(terms)
