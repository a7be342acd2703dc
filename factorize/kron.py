"""Kronecker matrix–vector products without forming the product matrix (shared by the
planner, the verifier and the executor)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from factorize.errors import InputError


def kron_matvec(factors: Sequence[np.ndarray], x: np.ndarray) -> np.ndarray:
    """``(F_1 ⊗ … ⊗ F_d) x`` (numpy ``np.kron`` order, row-major cells) for a vector x
    (no factor: x itself)."""
    if len(factors) == 0:
        return np.asarray(x, dtype=np.float64).reshape(-1).copy()
    if len(factors) == 1:
        return factors[0] @ x
    X = np.asarray(x, dtype=np.float64).reshape([F.shape[1] for F in factors])
    for axis, F in enumerate(factors):
        X = np.moveaxis(np.tensordot(F, X, axes=([1], [axis])), 0, axis)
    return X.reshape(-1)


def kron_rmatvec(factors: Sequence[np.ndarray], y: np.ndarray) -> np.ndarray:
    """``(F_1 ⊗ … ⊗ F_d)ᵀ y``."""
    return kron_matvec([F.T for F in factors], y)


def kron_vector(vectors: Sequence[np.ndarray]) -> np.ndarray:
    """``v_1 ⊗ … ⊗ v_d`` (the empty product is ``[1.0]``)."""
    out = np.ones(1)
    for v in vectors:
        out = np.multiply.outer(out, np.asarray(v, dtype=np.float64)).reshape(-1)
    return out


#: Entries of the intermediate arrays of :func:`kron_matvec_sparse` (records per chunk × rows).
SPARSE_CHUNK_ENTRIES = 2**24


def sparse_chunk_records(rows: int, max_entries: int = SPARSE_CHUNK_ENTRIES) -> int:
    """Records per chunk of :func:`kron_matvec_sparse` for a product with ``rows`` rows."""
    return max(1, max_entries // max(int(rows), 1))


def kron_matvec_sparse(factors: Sequence[np.ndarray], codes: np.ndarray, weights: np.ndarray, *,
                       reduce: Callable[[np.ndarray], np.ndarray] | None = None,
                       max_entries: int = SPARSE_CHUNK_ENTRIES) -> np.ndarray:
    """``(F_1 ⊗ … ⊗ F_d) h`` for the histogram h with ``weights[r]`` at the cell whose
    attribute codes are ``codes[r]`` (distinct rows; h is never formed).

    Factor by factor from the last: rows sharing their first j codes are merged into one
    row of width ``Π_{k≥j} rows(F_k)`` by ``Σ_x F_j[:, x] ⊗ P_(prefix, x)``, a sum over the
    distinct codes x of attribute j, so each output entry of step j is a dot product of at
    most ``cols(F_j)`` terms, as in the dense :func:`kron_matvec` (the same rounding
    analysis applies). Records are taken ``sparse_chunk_records(Π rows)`` at a time (memory
    ≤ ``max_entries`` floats) and the chunk results summed: one more sum of ``#chunks``
    terms per entry. ``reduce`` (e.g. a residue mod p) is applied after every step and every
    chunk sum. Cost O(records · Π rows) at worst, typically far less after merging.
    """
    from scipy import sparse

    codes = np.asarray(codes, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    d = len(factors)
    if codes.ndim != 2 or codes.shape[1] != d or weights.shape != (codes.shape[0],):
        raise InputError(f"codes must be (records × {d}) with one weight per record")
    rows = [int(F.shape[0]) for F in factors]
    m = 1
    for r in rows:
        m *= r
    total = np.zeros(m, dtype=np.float64)
    step = sparse_chunk_records(m, max_entries)
    for start in range(0, codes.shape[0], step):
        keys = codes[start:start + step]
        P = weights[start:start + step, None]
        for j in range(d - 1, -1, -1):
            F, x = factors[j], keys[:, j]
            prefix = keys[:, :j]
            if j == 0:
                inv = np.zeros(keys.shape[0], dtype=np.int64)
                uniq = prefix[:1]
            else:
                uniq, inv = np.unique(prefix, axis=0, return_inverse=True)
                inv = inv.reshape(-1)
            G = sparse.csr_matrix((np.ones(inv.size), (inv, np.arange(inv.size))),
                                  shape=(uniq.shape[0], inv.size))
            Q = (F[:, x].T[:, :, None] * P[:, None, :]).reshape(inv.size, -1)
            if reduce is not None:
                Q = reduce(Q)
            P = np.asarray(G @ Q)
            if reduce is not None:
                P = reduce(P)
            keys = uniq
        total += P.sum(axis=0)  # one row (d ≥ 1), or the chunk's weights (d = 0)
        if reduce is not None:
            total = reduce(total)
    return total
