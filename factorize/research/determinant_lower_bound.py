"""Determinant lower bound on the error of ANY (ε, δ)-DP mechanism (Nikolov, Talwar & Zhang 2013, §2.3.3: eq. (7),
Theorem 11, eqs. (8)–(9), eq. (11)):
``|S|·|det(Π W|_S)|^{2/|S|}``, with explicit constants.

Research code (``factorize.research``): no plan states this bound — a plan's any-mechanism
bound (``factorize.plan.lower_bound``) is the spectral bound, or the packing bound for pure DP,
of ``factorize.geometry.lower_bounds`` — and no CLI command or report calls it. Its explicit
constants are weak (it rarely exceeds the spectral bound); it is kept as a second,
independent bound for experiments and for the paper's detLB quantity, and is tested against
the paper's claims (``tests/test_geometry_lower_bounds.py``). Not part of the supported API.

It shares the spectral bound's normalisation, relations, constants policy and certified
evaluation (``factorize.geometry.lower_bounds``, whose module docstring states them) and its
subset search (``factorize.geometry.column_subset_search``); maximum-volume swaps are its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.linalg

from factorize.geometry.column_subset_search import (
    EXHAUSTIVE_N,
    local_search,
    numerical_rank_tol,
    search_subsets,
    size_grid,
)
from factorize.geometry.lower_bounds import (
    MEASURE_RMS,
    LowerBound,
    binds_approx_dp,
    certified_singular_values,
    checked_inputs,
    datasets_text,
    forming_error,
    hypothesis_error_floor,
    multiplicities,
)

__all__ = ["determinant_lower_bound"]


def _det_root_certified(A: np.ndarray, A0: np.ndarray, cols: np.ndarray, idx: np.ndarray,
                        anchor: int | None) -> float:
    """``det(W_Sᵀ W_S)^{1/s} = (Π σ_i)^{2/s}`` for the exact matrix, from below."""
    sv = certified_singular_values(A[:, idx], forming_error(A0, cols[idx], anchor))
    if sv.size < idx.size or not np.all(sv > 0):
        return 0.0
    return float(np.exp(2.0 * np.mean(np.log(sv))))


def _log_unit_ball_volume(s: int) -> float:
    return 0.5 * s * math.log(math.pi) - math.lgamma(0.5 * s + 1.0)


def _det_factor(epsilon: float, delta: float, s: int, m_limit: float | None,
                tau_max: int = 256) -> tuple[float, int, int]:
    """``max_{m, τ} m² c_τ(p_m, s) / (16 vol(B_2^s)^{2/s})`` with m ≤ m_limit, where
    ``c_τ = (p − 1 + s^{−1/τ})_+ / τ²`` (τ < s) and ``c_s = p/s²``. Returns (factor, m, τ)."""
    m = multiplicities(epsilon, None if m_limit is None else math.floor(m_limit), 2000)
    if m.size == 0:
        return 0.0, 0, 0
    p = hypothesis_error_floor(epsilon, delta, m)
    taus = np.arange(1, min(s, tau_max) + 1, dtype=np.float64)
    alpha_edge = np.where(taus < s, 1.0 - np.exp(-math.log(s) / taus), 0.0)  # α must exceed this
    gap = np.clip(p[:, None] - alpha_edge[None, :], 0.0, None)
    F = m.astype(np.float64)[:, None] ** 2 * gap / taus[None, :] ** 2
    i, t = np.unravel_index(int(np.argmax(F)), F.shape)
    scale = math.exp(-2.0 * _log_unit_ball_volume(s) / s) / 16.0
    return float(F[i, t]) * scale, int(m[i]), int(taus[t])


def _maxvol_swaps(A: np.ndarray, idx: np.ndarray, passes: int = 30) -> np.ndarray:
    """Local search for a larger ``det(W_Sᵀ W_S)`` at fixed |S|: swapping i ∈ S for j ∉ S
    multiplies the volume by ``sqrt(coef_ij² + res_j² (G⁻¹)_ii)`` (coef = W_S⁺ w_j, res_j =
    distance of w_j to span W_S); take the best swap while it gains > 1e-9."""
    S = list(idx)
    for _ in range(passes):
        WS = A[:, S]
        G = WS.T @ WS
        try:
            Ginv = scipy.linalg.inv(G)
        except (np.linalg.LinAlgError, ValueError):
            break
        C = Ginv @ (WS.T @ A)
        res2 = np.clip(np.einsum("ij,ij->j", A, A) - np.einsum("ij,ij->j", WS.T @ A, C), 0.0, None)
        ratio2 = C ** 2 + res2[None, :] * np.diag(Ginv)[:, None]
        ratio2[:, S] = 0.0
        i, j = np.unravel_index(int(np.argmax(ratio2)), ratio2.shape)
        if ratio2[i, j] <= 1.0 + 1e-9:
            break
        S[i] = int(j)
    return np.array(S)


def determinant_lower_bound(W: Any, epsilon: float, delta: float, n: float | None = None, *,
                            relation: str = "add_remove", method: str = "auto",
                            max_size: int | None = None, anchor: int | None = None,
                            subset: Sequence[int] | None = None) -> LowerBound:
    """Determinant lower bound (Nikolov, Talwar & Zhang 2013, §2.3.3, Theorem 11 and eq. (11)) with explicit constants.

    Paper's form. ``detLB(A, n) = max_{s ≤ n} max_{|S| = s, Π ∈ P_s} s·|det(Π A|_S)|^{2/s}``;
    ``herdisc_1(A, n)² ≥ Ω(1)·detLB(A, n)`` (Theorem 11 [LSV86]) and
    ``opt_{c1,c2}(A, n) = Ω(detLB(A, n)/log² n)`` (eq. (11)), constants unspecified. The best
    Π is the projection onto the range of A_S, so ``|det Π A_S|² = det(A_Sᵀ A_S)``.

    Explicit form used for ``value``: for |S| = s with ``D = det(W_Sᵀ W_S)^{1/s} > 0``, integers
    m ≥ 1 with ``m s ≤ n``, every α ∈ (0, p_m) and every (ε, δ)-DP mechanism (add/remove),

        sup_{||h||_1 ≤ n} E||M(h) − W h||²  ≥  m² (p_m − α) D / (16 T(α, s)² vol(B_2^s)^{2/s}),
        T(α, s) = min(s, ⌊ln s / ln(1/(1 − α))⌋ + 1),   p_m as in the spectral bound.

    Maximising over α for each value τ of T gives ``c_τ = (p_m − 1 + s^{−1/τ})_+/τ²`` (the
    sup over α > 1 − s^{−1/τ} — every such α gives a valid bound, so their sup does too).
    ``vol(B_2^s)^{2/s} ≈ 2πe/s``, so this is ``≈ m² c s D/(16·2πe)``: the paper's
    ``s·|det|^{2/s}`` up to the paper's log² loss (T ~ ln s/α) and explicit constants.

    Proof — the paper's chain with constants kept (S' ⊆ columns, |S'| ≤ s, maximises
    ``herdisc_α(W, s)``, the paper's §2.3.3 definition):
    (a) reconstruction [MN12; their Thm 10]: datasets ``m x``, x ∈ {0,1}^{S'} uniform (x and
        x ⊕ e_j are m add/remove steps apart: (mε, δ_m)-indistinguishable); decode
        ``x̂ = argmin_{x'} ||m W_{S'} x' − y||``. If ``||y − W(mx)|| < m·herdisc_α/2`` then
        ``||W_{S'}(x̂ − x)|| < herdisc_α`` forces ``||x̂ − x||_1 < α|S'|``. By the pairing of
        :func:`~factorize.geometry.lower_bounds.hypothesis_error_floor`, ``E #errors ≥ p_m |S'|``, so
        ``P(#errors ≥ α|S'|) ≥ p_m − α``
        and ``sup E||e||² ≥ (m herdisc_α/2)² (p_m − α)``;
    (b) partial colourings [MN12; their eq. (7)]: ``herdisc_1(W, s) ≤ T(α, s)·herdisc_α(W, s)``
        (each round colours ≥ max(1, α·|uncoloured|) points; T rounds suffice);
    (c) ``lindisc(W_S) ≤ 2·herdisc(W_S) ≤ 2·herdisc_1(W, s)`` [LSV86; their eq. (8)];
    (d) covering ``[−1,1]^s`` by the 2^s translates ``x + lindisc·E``, E = {u : ||W_S u|| ≤ 1}
        (seed's proof of (9)): ``lindisc^s ≥ det(W_Sᵀ W_S)^{1/2} / vol(B_2^s)``.
    The constants are weak (the paper's own bound loses log² n, and T(α, s)² and 16·2πe add
    more): in practice the explicit value rarely exceeds the spectral bound, and the best s is
    often 1. Its use is as a second, independent certificate and for the paper's detLB report.

    ``relation="replace"``: the same with ``W_z`` (see
    :func:`~factorize.geometry.lower_bounds.spectral_lower_bound`).
    Search (``method``): ``"auto"`` — exhaustive for N ≤ 12, else ``"heuristic"``: pivoted-QR
    prefixes (greedy volume), greedy-λ_min prefixes and backward elimination, every size, then
    maximum-volume swaps at the best size (plus a local search for ``seed_detLB``);
    ``"greedy"``/``"qr"`` — pivoted-QR prefixes and swaps only; ``"exhaustive"``. ``subset``:
    evaluate that witness instead of searching.
    Returns ``value`` = RMS per query ``sqrt(bound / k)``; ``details``: ``size``, ``det_root``
    (certified D), ``multiplicity``, ``tau``, ``alpha_edge``, ``total_squared_error``,
    ``seed_detLB`` / ``seed_detLB_subset`` (the paper's quantity ``max s·det(W_Sᵀ W_S)^{1/s}`` over
    the subsets searched with s ≤ n: a lower estimate of detLB(W, n), an Ω-statement only),
    ``constant_note``.
    """
    A0, A, cols, z, k, eps, dlt, n_, rel, size_cap = checked_inputs(W, epsilon, delta, n, relation,
                                                                    anchor, max_size)
    factor_cache: dict[int, tuple[float, int, int]] = {}

    def factor(s: int) -> tuple[float, int, int]:
        if s not in factor_cache:
            factor_cache[s] = _det_factor(eps, dlt, s, None if n_ is None else n_ / s)
        return factor_cache[s]

    search = "qr" if method == "greedy" else method
    cands = search_subsets(A, cols, search, size_cap, subset)
    by_size: dict[int, tuple[float, np.ndarray]] = {}  # the largest volume found at each size
    for idx, _, logdet in cands:
        if idx.size not in by_size or logdet > by_size[idx.size][0]:
            by_size[idx.size] = (logdet, idx)
    sizes = sorted(by_size)
    if len(sizes) > 160:  # evaluate the (m, τ) factor on a grid of sizes only
        keep = set(size_grid(sizes[-1]).tolist())
        sizes = [s for s in sizes if s in keep]
    best = max(sizes, key=lambda s: factor(s)[0] * math.exp(by_size[s][0] / s), default=None)
    seed = max(by_size, key=lambda s: s * math.exp(by_size[s][0] / s), default=None)
    exhaustive = search == "exhaustive" or (search == "auto" and A.shape[1] <= EXHAUSTIVE_N)
    swaps = subset is None and not exhaustive
    details: dict[str, Any] = {
        "method": method if subset is None else "given subset", "relation": rel, "anchor": z, "n": n_,
        "constant_note": (
            "seed 002 Theorem 11 and eq. (11) give opt = Omega(detLB/log² n) for unspecified constants; "
            "value uses the explicit chain reconstruction -> partial colouring -> lindisc -> volume "
            "(docstring): m²(p_m − α) det^{1/s} / (16 T² vol(B_2^s)^{2/s}), valid for all eps > 0, "
            "0 < delta < 1. seed_detLB is the seed's quantity max s·det(W_SᵀW_S)^{1/s}, s ≤ n, "
            "over the "
            "subsets searched (a lower estimate of detLB(W, n)); it is not a bound by itself."),
    }
    measure = MEASURE_RMS + f" ({datasets_text(rel, n_)})"
    binds = binds_approx_dp(eps, dlt, rel)
    if seed is not None:
        s_idx = _maxvol_swaps(A, by_size[seed][1]) if swaps else by_size[seed][1]
        if swaps and search in ("auto", "heuristic"):
            tol = numerical_rank_tol(A)
            s_idx = local_search(A, s_idx, lambda s, lam: (s * float(np.exp(np.mean(np.log(lam))))
                                                           if s <= size_cap and lam[0] > tol else 0.0))
        s_root = _det_root_certified(A, A0, cols, s_idx, z)
        details.update(seed_detLB=s_idx.size * s_root, seed_detLB_subset=tuple(int(c) for c in cols[s_idx]))
    else:
        details.update(seed_detLB=0.0, seed_detLB_subset=None)
    total = 0.0
    if best is not None:
        idx = _maxvol_swaps(A, by_size[best][1]) if swaps else by_size[best][1]
        det_root = _det_root_certified(A, A0, cols, idx, z)
        f, m, tau = factor(idx.size)
        total = f * det_root
    if total <= 0.0:
        details.update(size=0, det_root=0.0, multiplicity=0, total_squared_error=0.0)
        return LowerBound(0.0, measure, binds, None, details)
    s = idx.size
    details.update(size=int(s), det_root=det_root, multiplicity=m, tau=tau,
                   alpha_edge=(1.0 - s ** (-1.0 / tau)) if tau < s else 0.0,
                   p_m=float(hypothesis_error_floor(eps, dlt, m)), total_squared_error=total)
    return LowerBound(math.sqrt(total / k), measure, binds, tuple(int(c) for c in cols[idx]), details)

