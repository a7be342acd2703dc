"""Workloads stored as explicit matrices: :class:`DenseWorkload` and :class:`SparseWorkload`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import _hashing
from .base import DEFAULT_MAX_DENSE_ENTRIES, GramWorkload, Workload, issparse
from .errors import WorkloadError

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["DenseWorkload", "SparseWorkload"]


class DenseWorkload(Workload):
    """Workload given by an explicit dense matrix ``W`` of shape ``(k, N)``.

    The matrix is copied to a read-only float64 C-contiguous array; it must be
    2-D, non-empty, real and finite (otherwise :class:`WorkloadError`).
    """

    def __init__(self, matrix: Any, spec: str | None = None) -> None:
        super().__init__(spec)
        if isinstance(matrix, Workload):
            raise WorkloadError("DenseWorkload expects an array, got a Workload; use .dense() first")
        if issparse(matrix):
            raise WorkloadError("DenseWorkload expects a dense array; use SparseWorkload for scipy.sparse input")
        arr = np.asarray(matrix)
        if np.iscomplexobj(arr):
            raise WorkloadError("workload matrix must be real, got a complex array")
        if arr.dtype.kind in "USVMm":
            raise WorkloadError(f"workload matrix must be numeric, got dtype {arr.dtype}")
        try:
            arr = np.array(arr, dtype=np.float64, order="C", copy=True)
        except (TypeError, ValueError) as exc:
            raise WorkloadError(f"workload matrix must be numeric ({exc})") from None
        if arr.ndim != 2:
            raise WorkloadError(
                f"workload matrix must be 2-D (k queries x N cells), got a {arr.ndim}-D array of shape {arr.shape}"
            )
        if arr.size == 0:
            raise WorkloadError(f"workload matrix must be non-empty, got shape {arr.shape}")
        finite = np.isfinite(arr)
        if not finite.all():
            bad = int(arr.size - np.count_nonzero(finite))
            raise WorkloadError(
                f"workload matrix of shape {arr.shape} has {bad} non-finite entries (NaN or inf)"
            )
        arr.flags.writeable = False
        self._matrix = arr
        self._shape = (int(arr.shape[0]), int(arr.shape[1]))

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def matrix(self) -> np.ndarray:
        """The stored matrix (read-only view)."""
        return self._matrix

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return self._matrix @ x

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        return self._matrix.T @ y

    def gram(self) -> Workload:
        """``WᵀW`` as a :class:`DenseWorkload` (lazy :class:`GramWorkload` if ``N*N`` is too large)."""
        n = self._shape[1]
        if n * n > DEFAULT_MAX_DENSE_ENTRIES:
            return GramWorkload(self)
        return DenseWorkload(self._matrix.T @ self._matrix)

    def _dense(self, max_entries: int) -> np.ndarray:
        return self._matrix.copy()

    def _compute_fingerprint(self) -> str:
        k, n = self._shape
        return _hashing.hash_dense_chunks(
            self._shape, (self._matrix[r0:r1, c0:c1] for r0, r1, c0, c1 in _hashing.blocks(k, n))
        )


class SparseWorkload(Workload):
    """Workload given by an explicit ``scipy.sparse`` matrix ``W`` of shape ``(k, N)``.

    Stored as a float64 CSR array with summed duplicates and sorted indices; the
    input must be 2-D, non-empty, real and finite (otherwise :class:`WorkloadError`).
    """

    def __init__(self, matrix: Any, spec: str | None = None) -> None:
        super().__init__(spec)
        if not issparse(matrix):
            raise WorkloadError(
                f"SparseWorkload expects a scipy.sparse matrix, got {type(matrix).__name__}; "
                f"use DenseWorkload for dense arrays"
            )
        if getattr(matrix, "ndim", 2) != 2:
            raise WorkloadError(f"workload matrix must be 2-D, got {matrix.ndim}-D")
        if matrix.dtype.kind not in "biuf":
            raise WorkloadError(f"workload matrix must be real numeric, got dtype {matrix.dtype}")
        import scipy.sparse as sp

        csr = sp.csr_array(matrix).astype(np.float64, copy=True)
        csr.sum_duplicates()
        csr.sort_indices()
        k, n = (int(s) for s in csr.shape)
        if k == 0 or n == 0:
            raise WorkloadError(f"workload matrix must be non-empty, got shape ({k}, {n})")
        finite = np.isfinite(csr.data)
        if not finite.all():
            bad = int(csr.data.size - np.count_nonzero(finite))
            raise WorkloadError(
                f"sparse workload matrix of shape ({k}, {n}) has {bad} non-finite stored entries (NaN or inf)"
            )
        self._matrix = csr
        self._shape = (k, n)

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    @property
    def matrix(self) -> sp.csr_array:
        """The stored CSR matrix (do not modify it)."""
        return self._matrix

    @property
    def nnz(self) -> int:
        """Number of stored entries."""
        return int(self._matrix.nnz)

    def _repr_extra(self) -> str:
        return f"nnz={self.nnz}"

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._matrix @ x)

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(self._matrix.T @ y)

    def gram(self) -> Workload:
        """``WᵀW`` as a :class:`SparseWorkload` (lazy :class:`GramWorkload` if it could be too dense)."""
        row_nnz = np.diff(self._matrix.indptr).astype(np.float64)
        if float(np.dot(row_nnz, row_nnz)) > DEFAULT_MAX_DENSE_ENTRIES:
            return GramWorkload(self)
        return SparseWorkload(self._matrix.T @ self._matrix)

    def _dense(self, max_entries: int) -> np.ndarray:
        return self._matrix.toarray()

    def _compute_fingerprint(self) -> str:
        k, n = self._shape
        if k * n <= DEFAULT_MAX_DENSE_ENTRIES:
            # Same digest as the equal DenseWorkload, without densifying all at once.
            return _hashing.hash_dense_chunks(
                self._shape, (_hashing.csr_block(self._matrix, *blk) for blk in _hashing.blocks(k, n))
            )
        return _hashing.hash_csr(self._shape, self._matrix)
