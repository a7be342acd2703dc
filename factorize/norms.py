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

import math

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


# ------------------------------------------------------------------------------------------
# the trace norm of a stack of Kronecker products, from QRs of the small factors


def _factor_reduction(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``(R̂, τ, e, δ)`` for one Kronecker factor X (m×n): ``X = P·T + F`` with P having
    orthonormal columns (exactly), ``T = S·R̂``, ``‖S − I‖₂``-type bounds ``σ_min(S) ≥ 1 − δ``,
    ``‖S‖₂ ≤ 1 + δ``, the column norms ``‖t_c‖₂ ≤ τ_c`` and ``‖f_c‖₂ ≤ e_c``.

    m ≤ n: no reduction (P = I, T = R̂ = X, F = 0, δ = 0). m > n: Householder QR ``X ≈ Q̂R̂``
    (reduced), certified a posteriori, so no constant of the QR backward-error theorem is
    needed: Q̂ = P·S is its polar decomposition (S = (Q̂ᵀQ̂)^½), and ``‖Q̂ᵀQ̂ − I‖₂ ≤ δ`` from the
    computed Gram — Q̂ is well conditioned, so the Gram's rounding, ``γ_m·‖Q̂‖_F²`` (Higham
    eq. 3.5), is at the unit-roundoff level — gives ``σ(S) ⊂ [√(1−δ), √(1+δ)]``; F = X − Q̂R̂
    is bounded entrywise by ``|fl(X − fl(Q̂R̂))|/(1 − u) + γ_n/(1 − γ_n)·fl(|Q̂||R̂|)``.
    Raises :class:`~factorize.numerics.NumericRangeError` outside the range where those
    rounding bounds hold.
    """
    from factorize.numerics import (
        NumericRangeError,
        check_magnitudes,
        column_norms_upper,
        frobenius_upper,
        gamma,
        round_up,
        round_up_array,
    )

    X = check_magnitudes(X, "a workload factor")
    m, n = X.shape
    if m <= n:
        return X, column_norms_upper(X, "l2"), np.zeros(n), 0.0
    Q, R = np.linalg.qr(X)
    check_magnitudes(Q, "a QR factor Q")
    check_magnitudes(R, "a QR factor R")
    G = Q.T @ Q
    diag = np.diagonal(G)
    if not (np.all(diag >= 0.5) and np.all(diag <= 2.0)):
        raise NumericRangeError("the computed QR factor is far from orthonormal")
    E = G - np.eye(n)  # exact: Sterbenz for the diagonal, nothing to subtract off it
    fq = frobenius_upper(Q)
    delta = round_up(frobenius_upper(E) + gamma(m) * round_up(fq * fq, 1), 3)
    if not delta < 0.5:
        raise NumericRangeError("the computed QR factor is far from orthonormal")
    residual = np.abs(X - Q @ R)
    products = np.abs(Q) @ np.abs(R)
    g = gamma(n)
    bound = round_up_array(residual * round_up(1.0 / (1.0 - UNIT_ROUNDOFF), 1)
                           + products * round_up(g / (1.0 - g), 2), 3)
    e = column_norms_upper(bound, "l2", "the QR residual bound")
    tau = round_up_array(column_norms_upper(R, "l2") * (1.0 + delta), 2)
    return R, tau, e, delta


def kron_stack_trace_norm_lower_bound(blocks: list[list[np.ndarray]], col_scale: np.ndarray,
                                      continuity: bool = True) -> float | None:
    """A certified lower bound on ``‖M‖_tr`` for ``M = [⊗_j X_{1j}; ⊗_j X_{2j}; …]·diag(s)``
    (blocks of Kronecker factors stacked, ``s = col_scale ≥ 0``), without forming M.

    Each tall factor is reduced by a QR (:func:`_factor_reduction`: ``X = P·S·R̂ + F``); with
    𝒫 = blockdiag(⊗P) (orthonormal columns), 𝒮 = blockdiag(⊗S) and ℛ = [⊗R̂_{1j}; …]:
    ``M = 𝒫·𝒮·ℛ·D + F_M·D``, so ``‖M‖_tr ≥ σ_min(𝒮)·‖ℛD‖_tr − √r·‖F_M D‖_F`` (r = min(k, N);
    ``σ_i(𝒮B) ≥ σ_min(𝒮)σ_i(B)``; ``‖X‖_tr ≤ √rank·‖X‖_F``), with
    ``σ_min(𝒮) ≥ min_b Π_j (1 − δ_bj)`` and each column of ``F_b = ⊗(P T + F) − ⊗PT`` at most
    ``Π(τ + e) − Πτ`` (columns of Kronecker products are Kronecker products of columns).
    ``‖ℛD‖_tr`` is one SVD of the reduced matrix ℛD (Σ_b Π_j min(m_bj, n_bj) rows), with
    the spectral allowance at its own size and the rounding of its entries (products of
    d + 1 numbers: ``γ_{d+1}`` relative) allowed for.

    Continuity with the dense bound: the value returned is also capped by
    ``Σσ̂ − r·spectral_allowance((k, N), σ̂₁)``, the dense :func:`trace_norm_lower_bound`'s
    formula on the reduced matrix's singular values (the same singular values up to
    rounding), so plans certified with the dense SVD re-verify with this one
    (``continuity=False``: the structured bound alone).

    None when the reduction does not pay (reduced rows > k/2) or a magnitude is outside the
    range where the rounding bounds hold; the caller then uses the dense SVD.
    """
    from factorize.numerics import (
        NumericRangeError,
        frobenius_upper,
        gamma,
        round_down,
        round_up,
        round_up_array,
    )

    s = np.asarray(col_scale, dtype=np.float64)
    if s.ndim != 1 or not np.all(np.isfinite(s)) or np.any(s < 0):
        return None
    k = sum(math.prod(F.shape[0] for F in b) for b in blocks)
    N = s.size
    reduced_rows = sum(math.prod(min(F.shape) for F in b) for b in blocks)
    if any(math.prod(F.shape[1] for F in b) != N for b in blocks) or 2 * reduced_rows > k:
        return None
    try:
        cache: dict[int, tuple] = {}
        reds = []
        for b in blocks:
            row = []
            for F in b:
                if id(F) not in cache:
                    cache[id(F)] = (F, _factor_reduction(np.asarray(F, dtype=np.float64)))
                row.append(cache[id(F)][1])
            reds.append(row)
        # entries of ℛD are products of d + 1 normal numbers: keep them normal
        nz_s = s[s > 0]
        if nz_s.size == 0:
            return 0.0
        lo_exp = math.log2(float(nz_s.min()))
        hi_exp = math.log2(float(nz_s.max()))
        for row in reds:
            lo = lo_exp + sum(math.log2(float(np.min(np.abs(R[R != 0])))) if np.any(R) else 0.0
                              for R, *_ in row)
            hi = hi_exp + sum(math.log2(float(np.max(np.abs(R)))) if np.any(R) else 0.0
                              for R, *_ in row)
            if lo < -960 or hi > 960:
                return None
        K = np.vstack([_kron_all([R for R, *_ in row]) * s[None, :] for row in reds])
        d = max(len(row) for row in reds)
        sv = np.linalg.svd(K, compute_uv=False)
        if sv.size == 0 or sv[0] == 0.0:
            return 0.0
        rK = sv.size
        est = float(np.sum(sv))
        kfro = frobenius_upper(K, "the reduced matrix")
        g = gamma(d + 1)
        entry_err = round_up(math.sqrt(rK) * round_up(g / (1.0 - g), 2) * kfro, 3)
        slack = round_up(round_up(rK * rounding_allowance(K.shape, float(sv[0])), 1) + entry_err, 1)
        k_lower = round_down(max(round_down(est, rK) - slack, 0.0), 1)
        s_min = min(round_down(math.prod(1.0 - delta for *_, delta in row), 2 * len(row) + 2)
                    for row in reds)
        # ‖F_M D‖_F² = Σ_c s_c² Σ_b φ_bc², φ_b = Π(τ + e) − Πτ by telescoping (all terms ≥ 0)
        phi2 = np.zeros(N)
        for row in reds:
            taus = [tau for _, tau, _, _ in row]
            ups = [round_up_array(tau + e, 1) for _, tau, e, _ in row]
            phi = np.zeros(N)
            for j, (_, _, e, _) in enumerate(row):
                if np.any(e):
                    phi = phi + _kron_vectors(ups[:j] + [e] + taus[j + 1:])
            phi2 = phi2 + phi * phi
        f_fro = round_up(math.sqrt(round_up(float(np.sum(s * s * round_up_array(phi2, 2 * d + len(reds) + 4))),
                                            N + 4)), 2)
        r = min(k, N)
        f_tr = round_up(math.sqrt(r) * f_fro, 2)
        lower = round_down(s_min * k_lower, 1) - f_tr
        lower = round_down(max(lower, 0.0), 1)
    except NumericRangeError:
        return None
    if not continuity:
        return lower
    dense_style = est - r * rounding_allowance((k, N), float(sv[0]))
    return max(0.0, min(lower, dense_style))


def _kron_all(factors: list[np.ndarray]) -> np.ndarray:
    out = factors[0]
    for F in factors[1:]:
        out = np.kron(out, F)
    return out


def _kron_vectors(vectors: list[np.ndarray]) -> np.ndarray:
    out = vectors[0]
    for v in vectors[1:]:
        out = np.kron(out, v)
    return out
