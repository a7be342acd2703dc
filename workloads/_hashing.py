"""Canonical SHA-256 fingerprints of matrices (stable across runs and machines).

Explicit matrices are hashed as a header (version, tag ``dense``, ``k x N``) followed
by their float64 little-endian entries in C order, streamed in chunks so that no
second copy of a large matrix is made. Structured workloads combine the hex
digests of their parts under a tag (``kron``, ``vstack``, ``sum``, ``gram``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = ["hash_header", "hash_dense_chunks", "hash_combine", "combine_hasher", "hash_csr", "blocks",
           "csr_block"]

_FP_PREFIX = b"factorize.workloads.fingerprint.v1\x00"
_HASH_CHUNK_ENTRIES = 1 << 20  # entries hashed per chunk when streaming a matrix


def hash_header(tag: str, shape: tuple[int, int]) -> Any:
    """A SHA-256 object fed with the format version, ``tag`` and the shape ``k x N``."""
    h = hashlib.sha256()
    h.update(_FP_PREFIX)
    h.update(f"{tag}\x00{shape[0]}x{shape[1]}\x00".encode("ascii"))
    return h


def hash_dense_chunks(shape: tuple[int, int], chunks: Iterable[np.ndarray]) -> str:
    """Digest of a matrix given as consecutive C-order row chunks.

    ``x + 0.0`` maps ``-0.0`` to ``+0.0`` so that equal matrices hash equally.
    """
    h = hash_header("dense", shape)
    for chunk in chunks:
        h.update(np.ascontiguousarray(np.asarray(chunk, dtype=np.float64) + 0.0, dtype="<f8").tobytes())
    return h.hexdigest()


def combine_hasher(tag: str, shape: tuple[int, int], count: int) -> Any:
    """The SHA-256 object of :func:`hash_combine` before its parts: header and part count.

    Feeding it each part's hex digest followed by ``b"\\x00"`` (in any grouping of
    ``update`` calls: the digest depends only on the byte stream) gives
    ``hash_combine(tag, shape, parts)``.
    """
    h = hash_header(tag, shape)
    h.update(f"{count}\x00".encode("ascii"))
    return h


def hash_combine(tag: str, shape: tuple[int, int], parts: Sequence[str]) -> str:
    """Digest of a structured matrix: ``tag``, shape, then the digests of its parts in order."""
    h = combine_hasher(tag, shape, len(parts))
    for part in parts:
        h.update(part.encode("ascii") + b"\x00")
    return h.hexdigest()


def blocks(n_rows: int, n_cols: int) -> Iterator[tuple[int, int, int, int]]:
    """Blocks ``(r0, r1, c0, c1)`` covering a matrix in C order with about
    ``_HASH_CHUNK_ENTRIES`` entries each: several whole rows, or pieces of one long row."""
    if n_cols <= _HASH_CHUNK_ENTRIES:
        step = max(1, _HASH_CHUNK_ENTRIES // n_cols)
        for r0 in range(0, n_rows, step):
            yield r0, min(n_rows, r0 + step), 0, n_cols
        return
    for r in range(n_rows):
        for c0 in range(0, n_cols, _HASH_CHUNK_ENTRIES):
            yield r, r + 1, c0, min(n_cols, c0 + _HASH_CHUNK_ENTRIES)


def csr_block(csr: sp.csr_array, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """Dense copy of ``csr[r0:r1, c0:c1]`` (indices sorted, no duplicates)."""
    if c0 == 0 and c1 == csr.shape[1]:
        return csr[r0:r1].toarray()
    out = np.zeros((r1 - r0, c1 - c0))
    for r in range(r0, r1):
        lo, hi = csr.indptr[r], csr.indptr[r + 1]
        idx = csr.indices[lo:hi]
        a, b = np.searchsorted(idx, [c0, c1])
        out[r - r0, idx[a:b] - c0] = csr.data[lo + a:lo + b]
    return out


def identity_fingerprint(n: int, max_dense_entries: int) -> str:
    """The fingerprint of the sparse identity ``I_n`` (:func:`workloads.identity`), computed
    without building it (nor importing scipy): its dense blocks, as
    :meth:`SparseWorkload._compute_fingerprint` streams them when ``n² <= max_dense_entries``,
    else its canonical CSR arrays (:func:`hash_csr`). Equal to ``identity(n).fingerprint()``
    (tested, on both sides of the limit)."""
    if n * n <= max_dense_entries:
        def chunks() -> Iterator[np.ndarray]:
            for r0, r1, c0, c1 in blocks(n, n):
                out = np.zeros((r1 - r0, c1 - c0))
                diag = np.arange(max(r0, c0), min(r1, c1))
                out[diag - r0, diag - c0] = 1.0
                yield out

        return hash_dense_chunks((n, n), chunks())
    h = hash_header("csr", (n, n))
    h.update(np.arange(n + 1, dtype="<i8").tobytes())
    h.update(np.arange(n, dtype="<i8").tobytes())
    h.update(np.ones(n, dtype="<f8").tobytes())
    return h.hexdigest()


def hash_csr(shape: tuple[int, int], csr: sp.csr_array) -> str:
    """Digest of a sparse matrix too large to stream densely: canonical CSR arrays.

    Explicit zeros are dropped and indices sorted, so equal matrices hash equally.
    """
    canon = csr.copy()
    canon.eliminate_zeros()
    canon.sort_indices()
    h = hash_header("csr", shape)
    h.update(np.ascontiguousarray(canon.indptr, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(canon.indices, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(canon.data + 0.0, dtype="<f8").tobytes())
    return h.hexdigest()
