"""A lower-triangular (causal) strategy with the same Gram matrix as a given one.

A training loop must draw step t's noise before it sees step t + 1, so the strategy ``C``
that correlates the noise must be lower-triangular. For any strategy A (m × n, full column
rank) the QR factorization of its column-reversed copy, ``A J = Q U`` (J the n × n reversal,
U upper-triangular), gives

    C = J U J  (lower-triangular),   CᵀC = J Uᵀ U J = J (A J)ᵀ(A J) J = AᵀA.

This is the reversed Cholesky factor of X = AᵀA (``X[::-1, ::-1] = UᵀU``) computed without
forming X, so its accuracy follows A's conditioning, not X's. The L2 sensitivity under any
participation relation and the objective ``tr(W X⁻¹ Wᵀ)`` depend on A only through X
(``privacy.participation``), so C costs nothing: the optimum over causal strategies equals the
dense optimum, single or multi-participation (Denisov et al., NeurIPS 2022, §4; jax_privacy's
``dense.strategy_from_X`` forms the same factor from X). The sensitivity is still recomputed
from C itself by the caller, never inherited.
"""

from __future__ import annotations

import numpy as np

from factorize.planner.errors import PlannerError


def lower_triangular_factor(A: np.ndarray) -> np.ndarray:
    """``C`` (n × n, lower-triangular, non-negative diagonal) with ``CᵀC = AᵀA`` (module docstring)."""
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] < A.shape[1] or not np.all(np.isfinite(A)):
        raise PlannerError(f"a streaming factor needs a finite strategy with at least as many rows as "
                           f"columns, got shape {A.shape}")
    U = np.linalg.qr(A[:, ::-1], mode="r")
    signs = np.where(np.diagonal(U) < 0, -1.0, 1.0)
    C = np.ascontiguousarray((signs[:, None] * U)[::-1, ::-1])
    return np.tril(C)


def causal_reconstruction(W: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``R = W C⁻¹`` for a lower-triangular C (one triangular solve)."""
    from scipy.linalg import solve_triangular

    return np.asarray(solve_triangular(C, np.asarray(W, dtype=np.float64).T, lower=True, trans="T").T)
