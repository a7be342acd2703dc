"""From raw solver output to factorizations and dual witnesses (pure numpy).

Primal constructions, so a certificate never depends on one route only:

* from a Gram matrix X ≈ AᵀA (the SDP primal): ``A = diag(√w) Vᵀ`` from ``X = V diag(w) Vᵀ``,
  ``R = W A⁺`` (docs/math.md §3.2: ``R = W X⁻¹ Aᵀ``);
* from the dual weights alone (the inner minimiser of the Lagrangian, docs/math.md §4.1–4.2):
  with ``Y = diag(√p) W diag(√q) = U Σ Vᵀ``, ``A = Σ^{-1/2} Uᵀ diag(√p) W`` and ``R = W A⁺``.
  For γ_F take p = 1: then ``AᵀA = D^{-1/2} (D^{1/2} WᵀW D^{1/2})^{1/2} D^{-1/2}`` with
  ``D = diag(q)``, and ``tr(W X⁻¹ Wᵀ) = ||W D^{1/2}||_tr`` — the primal matching q exactly.

* from a strategy A alone (the dual solvers' output, ``solvers.dual_gamma_f`` /
  ``dual_gamma_2``): ``R = W A⁺ = W Aᵀ (AAᵀ)⁻¹``.

All give ``R·A = W`` up to rounding whenever the rows of W lie in the row space of A;
``certificate.verify`` checks the residual, so a bad construction is caught, not trusted.
"""

from __future__ import annotations

import numpy as np

from factorize import norms
from factorize.factorization import Factorization
from factorize.planner.certificate import ApproxGamma2Witness
from factorize.planner.errors import PlannerError
from solvers.dual_common import cholesky_solve

_REL_EIG_TOL = 1e-13


def factorization_from_gram(W: np.ndarray, X: np.ndarray) -> Factorization:
    """``A = X^{1/2}`` (its non-null part) and ``R = W A⁺``, normalised to ``||A||_{1→2} = 1``."""
    X = 0.5 * (X + X.T)
    w, V = np.linalg.eigh(X)
    keep = w > _REL_EIG_TOL * max(float(w[-1]), 0.0)
    if not np.any(keep):
        raise PlannerError("the solver returned a Gram matrix with no positive eigenvalue")
    root = np.sqrt(w[keep])
    A = root[:, None] * V[:, keep].T
    R = (W @ V[:, keep]) / root[None, :]
    return Factorization.dense(R, A).normalized()


def factorization_from_weights(W: np.ndarray, p: np.ndarray | None, q: np.ndarray) -> Factorization:
    """The primal determined by dual weights (p = None means all-ones: the γ_F case)."""
    sp = np.ones(W.shape[0]) if p is None else np.sqrt(np.maximum(p, 0.0))
    sq = np.sqrt(np.maximum(q, 0.0))
    U, s, _ = np.linalg.svd(sp[:, None] * W * sq[None, :], full_matrices=False)
    keep = s > _REL_EIG_TOL * (float(s[0]) if s.size else 0.0)
    if not np.any(keep):
        raise PlannerError("the dual weights annihilate the workload")
    A = (U[:, keep].T @ (sp[:, None] * W)) / np.sqrt(s[keep])[:, None]
    R = np.linalg.lstsq(A.T, W.T, rcond=None)[0].T
    return Factorization.dense(R, A).normalized()


def factorization_from_strategy(W: np.ndarray, A: np.ndarray) -> Factorization:
    """``R = W A⁺ = W Aᵀ (AAᵀ)⁻¹`` for a strategy A of full row rank (the dual solvers').

    ``R·A = W`` holds exactly when W's rows lie in A's row space; ``verify`` checks it.
    """
    try:
        R = cholesky_solve(A @ A.T, A @ W.T).T
    except np.linalg.LinAlgError as exc:
        raise PlannerError(f"the strategy does not have full row rank: {exc}") from exc
    return Factorization.dense(R, A).normalized()


def factorization_from_psd_blocks(W: np.ndarray, P: np.ndarray, radius: float) -> Factorization:
    """Approximate γ₂ primal from ``P = GᵀG``: ``R = G[:, :k]ᵀ``, ``A = G[:, k:]``.

    ``R·A = P₁₂`` is within η of W only up to the solver's feasibility tolerance. When it
    is not, blend with the exact factorization ``W = W·I``: the stacked pair
    ``[√(1−λ) R, √λ W]·[√(1−λ) A; √λ I]`` equals ``(1−λ) R A + λ W``, whose distance to W
    is ``(1−λ) ||RA − W||_max``; λ = 1 − radius/dist brings it within ``radius`` (η plus the
    residual tolerance of ``verify``); norms change by the same convex combination of squares.
    """
    k = W.shape[0]
    P = 0.5 * (P + P.T)
    w, V = np.linalg.eigh(P)
    keep = w > _REL_EIG_TOL * max(float(w[-1]), 0.0)
    G = np.sqrt(w[keep])[:, None] * V[:, keep].T
    R, A = G[:, :k].T, G[:, k:]
    dist = float(np.max(np.abs(R @ A - W)))
    if dist > radius:
        lam = 1.0 - radius / dist * (1.0 - 4 * norms.UNIT_ROUNDOFF * W.size)
        a, b = np.sqrt(1.0 - lam), np.sqrt(lam)
        R = np.hstack([a * R, b * W])
        A = np.vstack([a * A, b * np.eye(W.shape[1])])
    return Factorization.dense(R, A).normalized()


def approx_witness_from_dual(W: np.ndarray, Y: np.ndarray, max_repairs: int = 4) -> ApproxGamma2Witness:
    """``U = −2 Y₁₂`` and ``d = diag(Y)``, shifted until ``diag(d) − ½M_U`` is certified PSD.

    The shift ``d ← d + (|margin| + slack)·1`` costs ``(k+N)(|margin| + slack)`` in Σd, i.e.
    of the order of the solver's dual infeasibility; the result is valid by construction.
    """
    from factorize.planner.certificate import grothendieck_psd_margin

    k = W.shape[0]
    Y = 0.5 * (Y + Y.T)
    U = -2.0 * Y[:k, k:]
    d = np.maximum(np.diag(Y).copy(), 0.0)
    scale = max(float(np.max(np.abs(Y))), 1e-300)
    for _ in range(max_repairs):
        margin = grothendieck_psd_margin(U, d)
        if margin >= 0:
            return ApproxGamma2Witness(U=U, d=d)
        d = d + (-margin + 64 * norms.UNIT_ROUNDOFF * Y.shape[0] * scale)
    raise PlannerError("could not certify the approximate-γ₂ dual witness (PSD repair failed)")


def normalized_weights(w: np.ndarray) -> np.ndarray:
    """Clip to ≥ 0 and scale to the simplex (witness weights are homogeneous)."""
    w = np.maximum(np.asarray(w, dtype=np.float64).ravel(), 0.0)
    total = float(np.sum(w))
    if not total > 0:
        raise PlannerError("the solver returned all-zero dual multipliers")
    return w / total
