"""Euclidean projections onto the simplex and onto {M ⪰ 0, tr M = t} (Nikolov 2023, §6).

The sensitivity body of the second-moment map x ↦ x xᵀ on r·B₂^d is the spectraplex
``{M ⪰ 0, tr M = r²}`` (docs/math.md §8.7); the least-squares post-processing of a noisy second
moment matrix is its Frobenius projection onto n times that body. The spectraplex is
unitarily invariant, so (von Neumann / Lewis) the projection keeps the eigenvectors of the
symmetrised input and projects its eigenvalues onto the scaled simplex
``{λ ≥ 0, Σλ = t}``; the simplex projection is the sort-and-threshold algorithm
(Held, Wolfe, Crowder 1974; Duchi et al. 2008): λ_i ← max(μ_i − θ, 0) with θ chosen so the
sum is t. Cost: one symmetric eigendecomposition, O(d³).
"""

from __future__ import annotations

import numpy as np

from factorize.geometry.errors import GeometryError


def project_to_simplex(v: np.ndarray, total: float = 1.0) -> np.ndarray:
    """``argmin_{x ≥ 0, Σx = total} ||x − v||₂`` (``total`` > 0)."""
    v = np.asarray(v, dtype=np.float64).ravel()
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise GeometryError("the vector must be non-empty and finite")
    if not total > 0:
        raise GeometryError(f"the simplex total must be positive, got {total}")
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    idx = np.arange(1, v.size + 1)
    rho = int(np.nonzero(u - css / idx > 0)[0][-1])
    theta = css[rho] / (rho + 1)
    return np.maximum(v - theta, 0.0)


def project_to_spectraplex(M: np.ndarray, trace: float) -> np.ndarray:
    """``argmin_{X ⪰ 0, tr X = trace} ||X − M||_F`` for a square M (symmetrised first:
    the projection of M equals that of (M + Mᵀ)/2, since the body is symmetric)."""
    M = np.asarray(M, dtype=np.float64)
    if M.ndim != 2 or M.shape[0] != M.shape[1] or M.shape[0] == 0:
        raise GeometryError(f"expected a non-empty square matrix, got shape {M.shape}")
    if not np.all(np.isfinite(M)):
        raise GeometryError("the matrix has a non-finite entry")
    lam, V = np.linalg.eigh(0.5 * (M + M.T))
    mu = project_to_simplex(lam, trace)
    return (V * mu[None, :]) @ V.T
