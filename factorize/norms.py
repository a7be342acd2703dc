"""Matrix norms of docs/math.md §1.3, and certified (rounding-aware) versions of the spectral ones.

Every certificate in factorize is re-checked with the functions here: plain numpy,
one SVD or one symmetric eigenvalue problem, no solver.

Rounding. LAPACK's SVD and symmetric eigensolvers are backward stable: each computed
singular value / eigenvalue is within ``c · max(m, n) · u · ||M||_2`` of the exact one
(u = unit roundoff; Demmel, *Applied Numerical Linear Algebra*, Thm 5.5 / §5.4), with a
modest constant c (``numerics.spectral_allowance``, re-exported here as ``rounding_allowance``
with ``certified_psd_margin``). The ``*_lower_bound`` helpers subtract that allowance with c = 4
so that a printed lower bound is a lower bound for the exact matrix, not only for the
floating-point result; the ``*_upper_bound`` helpers inflate norms accordingly.
"""

from __future__ import annotations

import numpy as np

from factorize.numerics import SPECTRAL_SAFETY as _SAFETY
from factorize.numerics import U as UNIT_ROUNDOFF
from factorize.numerics import certified_psd_margin
from factorize.numerics import spectral_allowance as rounding_allowance

__all__ = ["UNIT_ROUNDOFF", "col_norm_max", "row_norm_max", "frobenius", "rounding_allowance",
           "norm_upper_factor", "trace_norm", "trace_norm_lower_bound", "min_eigenvalue",
           "certified_psd_margin"]


def col_norm_max(A: np.ndarray) -> float:
    """``||A||_{1→2}``: the largest column 2-norm (L2 sensitivity under add/remove)."""
    return float(np.sqrt(np.max(np.einsum("ij,ij->j", A, A))))


def row_norm_max(R: np.ndarray) -> float:
    """``||R||_{2→∞}``: the largest row 2-norm (worst per-query noise multiplier)."""
    return float(np.sqrt(np.max(np.einsum("ij,ij->i", R, R))))


def frobenius(R: np.ndarray) -> float:
    """``||R||_F``."""
    return float(np.linalg.norm(R))


def norm_upper_factor(dim: int) -> float:
    """Multiplicative inflation covering the rounding of a sum of ``dim`` squares."""
    return 1.0 + _SAFETY * (dim + 2) * UNIT_ROUNDOFF


def trace_norm(M: np.ndarray) -> float:
    """``||M||_tr``: the sum of singular values (floating point, no allowance)."""
    return float(np.sum(np.linalg.svd(M, compute_uv=False)))


def trace_norm_lower_bound(M: np.ndarray) -> float:
    """A certified lower bound on ``||M||_tr`` of the exact matrix ``M``.

    ``Σ σ̂_i − r · allowance`` with r = min(m, n) singular values, each within
    ``rounding_allowance`` of the exact one; clipped at 0.
    """
    s = np.linalg.svd(M, compute_uv=False)
    if s.size == 0:
        return 0.0
    slack = s.size * rounding_allowance(M.shape, float(s[0]))
    return max(0.0, float(np.sum(s)) - slack)


def min_eigenvalue(S: np.ndarray) -> float:
    """Smallest eigenvalue of the symmetric matrix ``S`` (symmetrised first)."""
    return float(np.linalg.eigvalsh(0.5 * (S + S.T))[0])
