"""The abstract :class:`Workload` interface and the lazy :class:`GramWorkload`.

A workload is a matrix ``W`` of shape ``(k, N)``: ``k`` linear queries over a
histogram ``h`` of length ``N``; query ``i`` answers ``(W h)_i``. Every workload
offers ``matvec``/``rmatvec`` (``W x`` and ``Wᵀ y`` for a vector or a block of
column vectors), ``gram()`` (``WᵀW`` as a workload, structured where cheap),
``dense()`` (guarded by an entry limit) and ``fingerprint()`` (a SHA-256 digest
stable across runs and machines). Shapes are Python ``int`` tuples.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from factorize.numerics import integer

from . import _hashing
from .errors import DenseTooLargeError, WorkloadError

__all__ = ["DEFAULT_MAX_DENSE_ENTRIES", "Workload", "GramWorkload", "check_dense_size"]

#: Largest number of entries ``k*N`` that :meth:`Workload.dense` materialises by default
#: (400 MB of float64).
DEFAULT_MAX_DENSE_ENTRIES: int = 50_000_000

_COLUMNS_CHUNK_ENTRIES = 1 << 20  # entries per block of columns when densifying a lazy Gram


def check_dense_size(shape: tuple[int, int], max_entries: int) -> None:
    """Raise :class:`DenseTooLargeError` when ``shape`` has more than ``max_entries`` entries."""
    max_entries = integer("max_entries", max_entries, 0, WorkloadError)
    k, n = shape
    entries = k * n
    if entries > max_entries:
        raise DenseTooLargeError(
            f"refusing to densify a workload of shape ({k}, {n}): it has {entries} entries, "
            f"above the limit of {max_entries}. Plan it without densifying: a marginal workload "
            f"or a union of Kronecker products goes to the structured route (`factorize plan "
            f"--strategy residual` / `union` / `marginal_weights`, or `auto`), a Kronecker product "
            f"keeps its factors (`kron(...)`)."
        )


def issparse(x: Any) -> bool:
    """``scipy.sparse.issparse(x)``, without importing scipy: a sparse matrix exists only
    once its module is loaded (so the run path, which has no sparse input, never loads
    scipy for this test: about 0.1 s of its start-up)."""
    mod = sys.modules.get("scipy.sparse")
    return mod is not None and bool(mod.issparse(x))


def _as_operand(x: Any, rows: int, op: str, what: str) -> np.ndarray:
    """Validate the right-hand side of ``matvec``/``rmatvec`` and return it as float64."""
    if issparse(x):
        raise WorkloadError(f"{op}: expected a dense numpy array, got a scipy.sparse matrix")
    arr = np.asarray(x)
    if np.iscomplexobj(arr):
        raise WorkloadError(f"{op}: complex operands are not supported")
    if arr.dtype.kind not in "biuf":
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise WorkloadError(f"{op}: operand is not a real numeric array ({exc})") from None
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[0] != rows:
        raise WorkloadError(
            f"{op}: expected an operand of shape ({what},) or ({what}, m) with {what}={rows}, "
            f"got shape {arr.shape}"
        )
    return arr


class Workload(ABC):
    """Abstract workload ``W`` of shape ``(k, N)``: ``k`` linear queries over ``N`` cells.

    Query ``i`` answers ``(W h)_i`` for a histogram ``h`` of length ``N``.

    Attributes
    ----------
    spec:
        The spec string this workload was built from (see
        :func:`workloads.parse_workload`), or ``None`` when unknown.
    """

    spec: str | None

    def __init__(self, spec: str | None = None) -> None:
        self.spec = spec
        self._fingerprint: str | None = None

    # -- shape ---------------------------------------------------------------
    @property
    @abstractmethod
    def shape(self) -> tuple[int, int]:
        """``(k, N)`` as Python ints: number of queries, domain size."""

    # -- products ------------------------------------------------------------
    def matvec(self, x: Any) -> np.ndarray:
        """Return ``W @ x`` for ``x`` of shape ``(N,)`` -> ``(k,)`` or ``(N, m)`` -> ``(k, m)``."""
        arr = _as_operand(x, self.shape[1], f"{type(self).__name__}.matvec", "N")
        return np.ascontiguousarray(self._matvec(arr), dtype=np.float64)

    def rmatvec(self, y: Any) -> np.ndarray:
        """Return ``Wᵀ @ y`` for ``y`` of shape ``(k,)`` -> ``(N,)`` or ``(k, m)`` -> ``(N, m)``."""
        arr = _as_operand(y, self.shape[0], f"{type(self).__name__}.rmatvec", "k")
        return np.ascontiguousarray(self._rmatvec(arr), dtype=np.float64)

    @abstractmethod
    def _matvec(self, x: np.ndarray) -> np.ndarray:
        """``W @ x`` for a validated float64 ``x`` of shape ``(N,)`` or ``(N, m)``."""

    @abstractmethod
    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        """``Wᵀ @ y`` for a validated float64 ``y`` of shape ``(k,)`` or ``(k, m)``."""

    # -- derived matrices ----------------------------------------------------
    def gram(self) -> Workload:
        """Return ``WᵀW`` (shape ``(N, N)``) as a workload.

        The default is a lazy :class:`GramWorkload`; subclasses return structured or
        explicit Gram matrices where that is cheap.
        """
        return GramWorkload(self)

    def dense(self, max_entries: int = DEFAULT_MAX_DENSE_ENTRIES) -> np.ndarray:
        """Return ``W`` as a new float64 C-contiguous ``(k, N)`` array.

        Raises :class:`DenseTooLargeError` (before allocating anything) when
        ``k*N > max_entries``.
        """
        check_dense_size(self.shape, max_entries)
        out = self._dense(max_entries)
        return np.ascontiguousarray(out, dtype=np.float64)

    @abstractmethod
    def _dense(self, max_entries: int) -> np.ndarray:
        """Materialise ``W``; the size check has already passed."""

    # -- identity ------------------------------------------------------------
    def fingerprint(self) -> str:
        """SHA-256 hex digest of a canonical description of the matrix and its structure.

        Deterministic across runs and machines; independent of :attr:`spec`.
        Explicit matrices hash their shape and float64 little-endian entries (a
        :class:`SparseWorkload` small enough to densify hashes exactly like the
        equal :class:`DenseWorkload`); structured workloads combine the digests of
        their parts with a tag (``kron``, ``vstack``, ...), so a Kronecker product
        and its densified matrix have different digests.
        """
        if self._fingerprint is None:
            self._fingerprint = self._compute_fingerprint()
        return self._fingerprint

    @abstractmethod
    def _compute_fingerprint(self) -> str:
        """Compute the digest returned (and cached) by :meth:`fingerprint`."""

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self) -> str:
        parts = [f"shape={self.shape}"]
        extra = self._repr_extra()
        if extra:
            parts.append(extra)
        if self.spec is not None:
            parts.append(f"spec={self.spec!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class GramWorkload(Workload):
    """Lazy Gram matrix ``G = BᵀB`` of a workload ``B`` (shape ``(N, N)``, symmetric).

    ``matvec`` computes ``Bᵀ(B x)``; nothing is materialised until :meth:`dense`.
    """

    def __init__(self, base: Workload, spec: str | None = None) -> None:
        super().__init__(spec)
        if not isinstance(base, Workload):
            raise WorkloadError(f"GramWorkload expects a Workload, got {type(base).__name__}")
        self._base = base
        n = self._base.shape[1]
        self._shape = (n, n)

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def base(self) -> Workload:
        """The workload ``B`` with ``G = BᵀB``."""
        return self._base

    def _repr_extra(self) -> str:
        return f"base={self._base!r}"

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._base._rmatvec(self._base._matvec(x))

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self._matvec(y)

    def _dense(self, max_entries: int) -> np.ndarray:
        k, n = self._base.shape
        if k * n <= max_entries:
            b = self._base.dense(max_entries)
            return b.T @ b
        out = np.empty((n, n), dtype=np.float64)
        step = max(1, min(n, _COLUMNS_CHUNK_ENTRIES // max(1, n)))
        for c0 in range(0, n, step):
            c1 = min(n, c0 + step)
            e = np.zeros((n, c1 - c0), dtype=np.float64)
            e[np.arange(c0, c1), np.arange(c1 - c0)] = 1.0
            out[:, c0:c1] = self._matvec(e)
        return out

    def _compute_fingerprint(self) -> str:
        return _hashing.hash_combine("gram", self._shape, [self._base.fingerprint()])
