"""Minimum-volume enclosing ellipsoid (MEE) of K = sym{a_1, …, a_N} ⊂ R^d (Nikolov, Talwar & Zhang 2013, §3.4.1).

K is symmetric, so its MEE is centred at 0 and is the D-optimal design problem
(docs/math.md §8.3; Khachiyan 1996, Todd & Yıldırım 2007):

    maximise  log det M(p),   M(p) = A diag(p) Aᵀ = Σ_j p_j a_j a_jᵀ,   p ∈ Δ_N,

with g_j(p) = a_jᵀ M(p)⁻¹ a_j and Σ_j p_j g_j = d. Kiefer–Wolfowitz: p is optimal iff
max_j g_j = d, and then E = {x : xᵀ M⁻¹ x ≤ d} is the MEE. Nikolov, Talwar & Zhang 2013 call p *C-optimal*
when max_j g_j ≤ C·d; then E(p) = {x : xᵀ M(p)⁻¹ x ≤ C d} encloses K, and (by the dual
of the design problem) its volume is within a factor C^{d/2} of the MEE's:
log vol E(p) − log vol E* ≤ (d/2) log C. Both the measure C and that bound are reported.

Algorithm: Frank–Wolfe with away steps on log det (Todd–Yıldırım's "WA-TY"): each
iteration moves weight toward the point with the largest g_j or away from the support
point with the smallest, with the exact line search of log det along that direction

    λ⁺ = (κ/d − 1)/(κ − 1)  (toward, κ = max g),     λ⁻ = (1 − κ/d)/(κ − 1)  (away, capped
    so p stays ≥ 0),

and Sherman–Morrison updates of M⁻¹ and of all g_j (O(N·d) per iteration; M⁻¹ and g are
recomputed from scratch every ``refresh`` iterations to stop drift). Points spanning only
an r < d dimensional subspace are handled in that subspace (the ellipsoid is flat).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from factorize.geometry.errors import GeometryError
from solvers.errors import SolverInaccurateError


@dataclass(frozen=True)
class EnclosingEllipsoid:
    """``E = {x = B y : yᵀ M⁻¹ y ≤ C·r}`` with B (d×r) an orthonormal basis of span(A).

    ``weights`` p is C-optimal (Nikolov, Talwar & Zhang 2013, §3.4.1) with ``C = optimality`` ≥ 1; ``shape`` is
    the d×d matrix ``C·r·B M Bᵀ`` so that E = {x ∈ span : xᵀ shape⁺ x ≤ 1}.
    """

    weights: np.ndarray  # p on the simplex (length N)
    basis: np.ndarray  # B, d×r, orthonormal columns spanning the points
    moment: np.ndarray  # M = Σ p_j b_j b_jᵀ in the basis (r×r), b_j = Bᵀ a_j
    optimality: float  # C = max_j b_jᵀ M⁻¹ b_j / r  (1 at the exact MEE)
    log_volume_gap: float  # (r/2)·log C ≥ log vol E(p) − log vol E*
    iterations: int
    seconds: float

    @property
    def rank(self) -> int:
        return int(self.basis.shape[1])

    @property
    def shape(self) -> np.ndarray:
        """``F Fᵀ`` with E(p) = F·B_2 (in R^d, rank r): ``C·r·B M Bᵀ``."""
        return self.optimality * self.rank * (self.basis @ self.moment @ self.basis.T)


def minimum_enclosing_ellipsoid(A: np.ndarray, *, tol: float = 1e-6, max_iters: int = 1_000_000,
                                time_limit: float | None = None, refresh: int = 256,
                                rank_tol: float = 1e-12) -> EnclosingEllipsoid:
    """A (1 + ``tol``)-optimal design for the points = columns of ``A`` (d×N).

    Stops when C = max_j g_j / r ≤ 1 + tol (C-optimality with C = 1 + tol), or raises
    ``TimeoutError`` / ``RuntimeError`` when ``time_limit`` / ``max_iters`` end first.
    """
    start = time.perf_counter()
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or 0 in A.shape:
        raise GeometryError(f"the points must be the columns of a non-empty d×N matrix, got {A.shape}")
    if not np.all(np.isfinite(A)):
        raise GeometryError("a point has a non-finite coordinate")
    if not tol > 0:
        raise GeometryError("tol must be positive")
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    keep = s > rank_tol * (float(s[0]) if s.size else 0.0)
    if not np.any(keep):
        raise GeometryError("all points are 0: the enclosing ellipsoid is the origin")
    Bas = U[:, keep]
    X = Bas.T @ A  # r×N coordinates in the span
    r, N = X.shape

    if r == 1:  # on a line the MEE is the segment [−max|x|, max|x|]: all weight on the longest
        p = np.zeros(N)
        p[int(np.argmax(np.abs(X[0])))] = 1.0
        M = (X * p[None, :]) @ X.T
        return EnclosingEllipsoid(weights=p, basis=Bas, moment=M, optimality=1.0, log_volume_gap=0.0,
                                  iterations=0, seconds=time.perf_counter() - start)
    p = np.full(N, 1.0 / N)
    Minv, g = _refresh(X, p)
    it = 0
    for it in range(1, max_iters + 1):
        j_up = int(np.argmax(g))
        kappa_up = float(g[j_up])
        if kappa_up <= r * (1.0 + tol):
            break
        if time_limit is not None and time.perf_counter() - start > time_limit:
            raise TimeoutError(f"MEE: {time_limit:g} s limit reached at C = {kappa_up / r:.6g} "
                               f"after {it} iterations")
        support = np.flatnonzero(p > 0)
        j_down = int(support[np.argmin(g[support])])
        kappa_down = float(g[j_down])
        # toward step if its optimality violation is the larger one, else away step
        if kappa_up / r - 1.0 >= 1.0 - kappa_down / r or kappa_down >= r:
            j, kappa = j_up, kappa_up
            lam = (kappa / r - 1.0) / (kappa - 1.0)
        else:
            j, kappa = j_down, kappa_down
            lam = -(1.0 - kappa / r) / (kappa - 1.0) if kappa > 1.0 else -math.inf
            lam = max(lam, -p[j] / (1.0 - p[j]))  # keep p_j ≥ 0 (drops j at the cap)
        if not (math.isfinite(lam) and lam != 0.0):
            Minv, g = _refresh(X, p)
            continue
        # p ← (1 − λ) p + λ e_j ;  M ← (1 − λ) M + λ x_j x_jᵀ
        v = Minv @ X[:, j]
        h = X.T @ v  # h_i = x_iᵀ M⁻¹ x_j
        mu = lam / (1.0 - lam)
        denom = 1.0 + mu * kappa
        Minv = (Minv - (mu / denom) * np.outer(v, v)) / (1.0 - lam)
        g = (g - (mu / denom) * h * h) / (1.0 - lam)
        p *= 1.0 - lam
        p[j] += lam
        if p[j] < 1e-14 * lam * lam:
            p[j] = 0.0
        if it % refresh == 0:
            p = np.maximum(p, 0.0)
            p /= p.sum()
            Minv, g = _refresh(X, p)
    else:
        raise SolverInaccurateError(f"MEE: no (1 + {tol:g})-optimal design after {max_iters} iterations")

    p = np.maximum(p, 0.0)
    p /= p.sum()
    M = (X * p[None, :]) @ X.T
    Minv, g = _refresh(X, p)  # the reported measure is recomputed, not the updated one
    C = max(float(np.max(g)) / r, 1.0)
    return EnclosingEllipsoid(weights=p, basis=Bas, moment=0.5 * (M + M.T), optimality=C,
                              log_volume_gap=0.5 * r * math.log(C), iterations=it,
                              seconds=time.perf_counter() - start)


def _refresh(X: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """M(p)⁻¹ and g_j = x_jᵀ M⁻¹ x_j from scratch (Cholesky of M)."""
    M = (X * p[None, :]) @ X.T
    L = np.linalg.cholesky(0.5 * (M + M.T))
    Y = np.linalg.solve(L, X)
    Linv = np.linalg.solve(L, np.eye(L.shape[0]))
    return Linv.T @ Linv, np.einsum("ij,ij->j", Y, Y)
