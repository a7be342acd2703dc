"""Base decomposition (Nikolov, Talwar & Zhang 2013, Alg. 1) and the correlated Gaussian noise it defines (Alg. 2),
written as a factorization W = R·S so the existing planner certificate and executor apply.

Alg. 1 on W (k×N, the columns w_j are the points; K = W·B₁ = conv{±w_j}): take an
(approximate, C-optimal: Nikolov, Talwar & Zhang 2013, Lemma 11) minimum enclosing ellipsoid E = F·B₂ of K,
with axes u_1, …, u_r ordered by decreasing length; the shorter half becomes the first
piece U_1 = (u_i)_{i > ⌊r/2⌋}; recurse on the longer half V = (u_i)_{i ≤ ⌊r/2⌋} with
points Vᵀw_j; pieces are mapped back through V. The paper writes U_1 = (u_i)_{i > d/2} and
V = (u_i)_{i < d/2}, which drops u_{d/2} for even d; here every axis goes to exactly one
side (⌈r/2⌉ shortest axes to U_1). Depth k ≤ ⌊1 + log₂ r⌋ pieces.

Alg. 2 adds ``√k·r_i·U_i w_i`` with r_i = max_j ||U_iᵀ w_j|| and w_i i.i.d. Gaussian of the
(ε, δ) scale σ. That is the factorization mechanism with

    S = [ U_iᵀ W / (√k r_i) ]_{i=1..k}   (stacked),      R = [ √k r_1 U_1, …, √k r_k U_k ],

since R·S = Σ_i U_i U_iᵀ W = W (the pieces are an orthonormal basis of range(W)) and every
column of S has squared norm Σ_i ||U_iᵀ w_j||² / (k r_i²) ≤ 1, i.e. ||S||_{1→2} ≤ 1: adding
σ-Gaussian noise to S·h is (ε, δ)-DP by the Gaussian mechanism with L2 sensitivity 1
(add/remove), exactly the paper's privacy argument (Corollary 9) with our calibration.
"""

from __future__ import annotations

import math

import numpy as np

from factorize.errors import InternalError
from factorize.factorization import Factorization
from factorize.geometry.mee import minimum_enclosing_ellipsoid


def base_decomposition(W: np.ndarray, *, tol: float = 1e-3) -> list[np.ndarray]:
    """Orthonormal pieces U_1, …, U_k (each r_i-column, mutually orthogonal, spanning
    range(W)) of Nikolov, Talwar & Zhang 2013, Alg. 1, with C-optimal ellipsoids (C = 1 + ``tol``, Lemma 11)."""
    W = np.asarray(W, dtype=np.float64)
    e = minimum_enclosing_ellipsoid(W, tol=tol)
    B = e.basis  # range(W), r columns
    lam, Q = np.linalg.eigh(e.moment)  # axes of E(p) in the basis, ascending length
    axes = B @ Q[:, ::-1]  # decreasing length: u_1 longest
    r = axes.shape[1]
    if r == 1:
        return [axes]
    half = r // 2
    first = axes[:, half:]  # the ⌈r/2⌉ shortest axes
    V = axes[:, :half]
    return [first] + [V @ piece for piece in base_decomposition(V.T @ W, tol=tol)]


def ellipsoid_factorization(W: np.ndarray, *, tol: float = 1e-3) -> Factorization:
    """The Alg. 2 mechanism as ``W = R·S`` with ``||S||_{1→2} ≤ 1`` (see the module doc)."""
    W = np.asarray(W, dtype=np.float64)
    pieces = base_decomposition(W, tol=tol)
    k = len(pieces)
    S_blocks, R_blocks = [], []
    for U in pieces:
        P = U.T @ W
        r_i = float(np.sqrt(np.max(np.einsum("ij,ij->j", P, P))))
        if not r_i > 0:
            raise InternalError("a base-decomposition piece is orthogonal to every column "
                                "(the pieces span range(W), so each must meet one)")
        S_blocks.append(P / (math.sqrt(k) * r_i))
        R_blocks.append(U * (math.sqrt(k) * r_i))
    return Factorization.dense(np.hstack(R_blocks), np.vstack(S_blocks))
