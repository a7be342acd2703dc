"""Kronecker matrix–vector products without forming the product matrix (shared by the
planner, the verifier and the executor)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


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
