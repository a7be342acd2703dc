"""The JL mechanism for pure ε-DP query release (Nikolov 2023, Alg. 1 "JL-Release", Thm 21).

Mechanism, in counts (the project releases ``W h``, not the fractions ``W h / n`` of Nikolov 2023):

1. draw ``T ∈ R^{ℓ×k}`` with i.i.d. entries ``±1/√ℓ`` from OS random bits
   (:func:`sample_projection`; a JL-matrix with parameter C ≲ 1, Nikolov 2023, Def. 8);
2. release ``z̃ = T W h + Z`` where Z is the ℓ2-ball K-norm noise in R^ℓ, density
   ``∝ exp(−ε‖z‖₂/Δ)`` (docs/math.md §6.4; Nikolov 2023, Lemmas 14–15 with ``K = Δ·B₂^ℓ``), and
   ``Δ = max_j ‖T w_j‖₂`` (add/remove) or ``max_{i≠j} ‖T(w_i − w_j)‖₂`` (replace, ≤ 2× the
   add/remove value) -- :func:`jl_sensitivity`;
3. output ``ŷ = W x*`` with ``x* ≈ argmin { ‖T W x − z̃‖₂ : x ∈ n·Δ_N }`` (or ``x ∈ n·B₁``),
   computed by Frank–Wolfe (:func:`jl_decode`, via ``project_least_squares``).

Privacy. T is drawn independently of the data, so conditional on T step 2 is the K-norm
mechanism for the query ``h ↦ T W h`` whose sensitivity ball is ``Δ·B₂^ℓ`` (ε-DP, Nikolov 2023,
Lemma 14); step 3 is post-processing (Nikolov 2023, Lemma 13 / Lemma 5). T may be published.

Noise specification the plan needs (no new sampler here): ``family="l2_knorm"``, ``dim=ℓ``,
``scale = Δ/ε``, ``sensitivity = Δ`` (``sensitivity_norm="l2"``), the relation used for Δ,
``sampler="float"`` -- i.e. ``calibrate(PureDP(ε), sensitivity_l2=jl_sensitivity(TW, rel),
dim=ℓ, relation=rel, family="l2_knorm")`` from ``factorize.privacy``, then
``add_noise(TW @ h, spec, rng)`` (radius ~ Gamma(ℓ, Δ/ε) times a uniform direction,
``E‖Z‖₂ = ℓΔ/ε``, ``E‖Z‖₂² = ℓ(ℓ+1)Δ²/ε²``). The project has no exact (lattice) sampler for
this family; the float sampler is the one that exists.

Explicit error bound (:func:`jl_error_bound`)
---------------------------------------------
Nikolov 2023 proves ``err ≲ w(K)/√(kℓ) + E‖Z‖/(√k n)`` (Lemma 13, fractions, RMS over queries)
with an unspecified absolute constant from the additive JL lemma of Liaw–Mehrabian–Plan–
Vershynin (Thm 9), and Theorem 21 uses the Lemma 16 noise, not the ℓ2-ball noise of Lemma 15.
Converting to counts (multiply by n√k: ``‖ŷ − Wh‖₂ = n‖Ŷ − Q(X)‖₂``), the paper's statement for
the mechanism implemented here reads ``E‖ŷ − Wh‖₂ ≲ C'·n·w(K)/√ℓ + ℓΔ/ε``, where C' is not
known. We do not use Thm 9; instead every step below is explicit. Notation: ``u = ŷ − y``,
``y = W h ∈ n·K``, ``K = conv{w_j}``; ``g`` = the Frank–Wolfe gap at the returned point.

(a) Approximate projection (Lemma 13, eq. (6), with the FW gap): ``Ty ∈ T(n·K)`` and the gap is
    ``g = max_{v ∈ T(nK)} ⟨Tŷ − z̃, Tŷ − v⟩ ≥ ⟨Tŷ − z̃, Tŷ − Ty⟩``, so
    ``‖z̃ − Ty‖² = ‖z̃ − Tŷ‖² + 2⟨z̃ − Tŷ, Tŷ − Ty⟩ + ‖Tu‖² ≥ ‖Tu‖² − 2g``, i.e.
    ``‖Tu‖₂² ≤ ‖Z‖₂² + 2g``  (deterministic).
(b) JL lower side as a quadratic form. ``u = n·W c`` with ``c = p − q``, p, q ∈ Δ_N (x* = n p,
    h = n q), so ``Σ c_i = 0`` and ``‖c⁺‖₁ = ‖c⁻‖₁ = t ≤ 1``. With ``D_ij = ‖v_ij‖² −
    ‖T v_ij‖²``, ``v_ij = w_i − w_j``, polarisation and ``Σ c_i = 0`` give
    ``‖u‖² − ‖Tu‖² = −(n²/2) Σ_ij c_i c_j D_ij``; splitting c into c⁺, c⁻ (D_ii = 0):
    ``‖u‖² ≤ ‖Tu‖² + n² t² (δ⁺ + δ⁻) ≤ ‖Tu‖² + n² (δ⁺ + δ⁻)``, where
    ``δ⁺ = max_{i<j} (‖Tv_ij‖² − ‖v_ij‖²)₊`` and ``δ⁻ = max_{i<j} (‖v_ij‖² − ‖Tv_ij‖²)₊``
    (deterministic given T; :func:`jl_distortion` computes them). For x ∈ n·B₁ the same holds
    over the 2N points ±w_j: pairs ``w_i ± w_j`` and ``2w_j`` (N² vectors up to sign).
(c) Hence, pointwise, ``‖ŷ − Wh‖₂² ≤ ‖Z‖₂² + 2g + n²(δ⁺ + δ⁻)``, and
    ``E‖ŷ − Wh‖₂ ≤ (E‖ŷ − Wh‖₂²)^{1/2} ≤ B := ( ℓ(ℓ+1) E[Δ²]/ε² + 2g + n²(Eδ⁺ + Eδ⁻) )^{1/2}``
    (Jensen; g here is any deterministic upper bound on the gap, e.g. the decode's gap_tol;
    E‖Z‖² = ℓ(ℓ+1)Δ²/ε² given T).
(d) Expectations over T (T = S/√ℓ, S Rademacher). For fixed v ≠ 0,
    ``ℓ‖Tv‖²/‖v‖² = Σ_r Q_r²`` with ``Q_r = ⟨s_r, v⟩/‖v‖`` i.i.d., ``E Q² = 1``, ``E Q⁴ ≤ 3``, and
    (Achlioptas 2003: Rademacher even moments are dominated by Gaussian ones)
    ``E e^{τQ²} ≤ (1 − 2τ)^{−1/2}`` (0 ≤ τ < ½), ``E e^{−τQ²} ≤ 1 − τ + 3τ²/2`` (τ ≥ 0, from
    ``e^{−x} ≤ 1 − x + x²/2``). For P vectors of norm ≤ L, with ``R_p = ‖Tv_p‖²/‖v_p‖²`` and
    ``e^{θ max(·)₊} ≤ 1 + Σ_p e^{θ(·)}`` plus Jensen, for every τ (θ = ℓτ):
    ``Eδ⁺ ≤ L² ρ⁺``, ``ρ⁺ = (ℓτ)^{-1} log(1 + P e^{−ℓτ}(1 − 2τ)^{−ℓ/2})``, 0 < τ < ½;
    ``Eδ⁻ ≤ L² ρ⁻``, ``ρ⁻ = min(1, (ℓτ)^{-1} log(1 + P e^{ℓτ}(1 − τ + 3τ²/2)^ℓ))``, τ > 0;
    ``E Δ² = E max_j ‖w_j‖² R_j ≤ M = (a/(ℓτ)) log Σ_j (1 − 2τ‖w_j‖²/a)^{−ℓ/2}``, a = max‖w_j‖²
    (add/remove); replace: ``min(4M, L² (ℓτ)^{-1} log(P (1 − 2τ)^{−ℓ/2}))``.
    τ is optimised numerically per ℓ; *every* τ gives a valid bound, so the optimiser's
    accuracy affects only tightness. P = N(N−1)/2 and L = max_{i,j} ‖w_i − w_j‖ (given, or the
    sum of the two largest column norms); for n·B₁: P = N², L = 2 max_j ‖w_j‖.

So the bound is ``B(ℓ)² = ℓ(ℓ+1)M/ε² + n²L²(ρ⁺ + ρ⁻) + 2g``: a bound on the *root-mean-square*
of ``‖ŷ − Wh‖₂`` over T and Z (hence on its mean); ``B/√k`` bounds the RMS per-query error.
It holds in expectation, with no failure probability. Where it is loose: step (b) costs a
fourth-root rate (``n L (log P/ℓ)^{1/4}`` instead of the paper's ``n w(K)/√ℓ``) -- the uniform
square-root rate needs chaining with unknown constants. Consequently the minimising ℓ grows
like ``(nε L/√M)^{4/5}(log P)^{1/5}``, not like the paper's ``ℓ ≈ nε`` (which is for the Lemma 16
noise; with ℓ2-ball noise ``ℓ = nε`` already makes the noise term ``≈ n·Δ`` as large as the
trivial bound). The deterministic bound ``‖ŷ − Wh‖₂ ≤ n·L`` (both points lie in n·K) always
holds and is reported as ``trivial``; the JL bound is only useful when ``total < trivial``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.geometry.errors import GeometryError, GeometryTypeError
from factorize.geometry.least_squares import project_least_squares
from factorize.numerics import integer, positive_number

__all__ = [
    "JLDecode",
    "JLErrorBound",
    "choose_projection_dim",
    "jl_decode",
    "jl_distortion",
    "jl_error_bound",
    "jl_sensitivity",
    "project_workload",
    "sample_projection",
    "workload_diameter",
]


# ============================================================================================
# the explicit error bound


@dataclass(frozen=True)
class JLErrorBound:
    """The explicit bound of this module's docstring, steps (a)–(d), for one ℓ.

    ``total`` = B ≥ (E‖ŷ − Wh‖₂²)^{1/2} ≥ E‖ŷ − Wh‖₂ (counts, expectation over T and Z);
    ``rms`` = B/√k bounds the RMS per-query error. ``total² = noise_sq + distortion_sq +
    gap_sq`` with ``noise_sq = ℓ(ℓ+1)·sensitivity_sq/ε²`` (E‖Z‖², sensitivity_sq ≥ EΔ²),
    ``distortion_sq = n²·diameter²·(rho_plus + rho_minus)`` and ``gap_sq = 2·fw_gap``.
    ``diameter`` is the L of step (d): max_{i,j}‖w_i − w_j‖ (as given or bounded), or
    2·max_j‖w_j‖ for the n·B₁ decode. ``trivial = n·diameter`` is the deterministic bound
    ``‖ŷ − Wh‖₂ ≤ diam(n·K)`` (both points lie in n·K).
    """

    ell: int
    total: float
    rms: float
    noise_sq: float
    distortion_sq: float
    gap_sq: float
    sensitivity_sq: float
    rho_plus: float
    rho_minus: float
    diameter: float
    trivial: float

    @property
    def useful(self) -> bool:
        """True when the JL bound beats the trivial diameter bound n·L."""
        return self.total < self.trivial


_COARSE = 72  # coarse grid points for the free parameter τ (any τ gives a valid bound)
_FINE = 48  # refinement points around the best coarse τ
_CHUNK_ELEMENTS = 1 << 22  # temporaries of the vectorised bound (floats)


def _grid_min(f, ells: np.ndarray, s_lo: float, s_hi: float, width: int = 1) -> np.ndarray:
    """min over a log-spaced grid of s ∈ [s_lo, s_hi] of f(ells[:, None], s[None, :]) (then
    refined between the neighbours of the best point, per row). ``f`` returns an (L, G) array;
    non-finite values are ignored. Every grid value is itself a valid bound."""
    s = np.geomspace(s_lo, s_hi, _COARSE)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        v = f(ells[:, None], s[None, :])
        v = np.where(np.isfinite(v), v, np.inf)
        b = np.argmin(v, axis=1)
        best = v[np.arange(v.shape[0]), b]
        lo = s[np.maximum(b - width, 0)]
        hi = s[np.minimum(b + width, _COARSE - 1)]
        t = np.linspace(0.0, 1.0, _FINE)[None, :]
        sf = lo[:, None] * (hi / lo)[:, None] ** t
        vf = f(ells[:, None], sf)
        vf = np.where(np.isfinite(vf), vf, np.inf)
    return np.minimum(best, vf.min(axis=1))


def _half_open(s: np.ndarray) -> np.ndarray:
    """Map s > 0 onto τ ∈ (0, ½): τ = (1 − e^{−s})/2 (dense near both ends)."""
    return -0.5 * np.expm1(-s)


def _rho_plus(ells: np.ndarray, log_p: float) -> np.ndarray:
    """E max_p (R_p − 1)₊ ≤ min_τ (ℓτ)^{-1} log(1 + P e^{−ℓτ}(1 − 2τ)^{−ℓ/2}), τ ∈ (0, ½)."""
    if log_p == -math.inf:
        return np.zeros(ells.shape)

    def f(L, s):
        tau = _half_open(s)
        expo = -L * tau - 0.5 * L * np.log1p(-2.0 * tau)
        return np.logaddexp(0.0, log_p + expo) / (L * tau)

    return _grid_min(f, ells, 1e-9, 40.0)


def _rho_minus(ells: np.ndarray, log_p: float) -> np.ndarray:
    """E max_p (1 − R_p)₊ ≤ min(1, min_τ (ℓτ)^{-1} log(1 + P e^{ℓτ}(1 − τ + 1.5τ²)^ℓ)), τ > 0."""
    if log_p == -math.inf:
        return np.zeros(ells.shape)

    def f(L, tau):
        expo = L * tau + L * np.log1p(-tau + 1.5 * tau * tau)
        return np.logaddexp(0.0, log_p + expo) / (L * tau)

    return np.minimum(1.0, _grid_min(f, ells, 1e-9, 10.0))


def _max_ratio(ells: np.ndarray, log_p: float) -> np.ndarray:
    """E max_p R_p ≤ min_τ (ℓτ)^{-1} log(P (1 − 2τ)^{−ℓ/2}), τ ∈ (0, ½)."""

    def f(L, s):
        tau = _half_open(s)
        return (log_p - 0.5 * L * np.log1p(-2.0 * tau)) / (L * tau)

    return _grid_min(f, ells, 1e-9, 40.0)


def _norm_levels(sq_norms: np.ndarray, max_levels: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of the squared column norms relative to the largest, with counts.

    With more than ``max_levels`` distinct values they are rounded *up* onto a geometric grid
    ``r^{−e}`` (r ≥ 1.001 chosen to span the smallest positive value); the weighted-ratio bound
    is increasing in each norm, so rounding up keeps it valid.
    """
    a = sq_norms / sq_norms.max()
    vals, counts = np.unique(a, return_counts=True)
    if vals.size <= max_levels:
        return vals, counts.astype(np.float64)
    pos = a > 0
    amin = float(a[pos].min())
    r = max(1.001, amin ** (-1.0 / (max_levels - 2)))
    e = np.minimum(np.floor(np.log(1.0 / a[pos]) / math.log(r)), max_levels - 2)
    q = np.zeros_like(a)
    q[pos] = np.maximum(r ** (-e), a[pos])  # ≥ a (guards the rounding of the logarithms)
    vals, counts = np.unique(q, return_counts=True)
    return vals, counts.astype(np.float64)


def _max_weighted_ratio(ells: np.ndarray, sq_norms: np.ndarray) -> np.ndarray:
    """E max_j ‖w_j‖² R_j ≤ min_τ (a/(ℓτ)) log Σ_j (1 − 2τ‖w_j‖²/a)^{−ℓ/2}, a = max_j ‖w_j‖²."""
    a = float(sq_norms.max())
    vals, counts = _norm_levels(sq_norms)
    logc = np.log(counts)[None, None, :]
    rel = vals[None, None, :]

    def f(L, s):
        tau = _half_open(s)[..., None]
        x = logc - 0.5 * L[..., None] * np.log1p(-2.0 * tau * rel)
        m = x.max(axis=-1)
        lse = m + np.log(np.sum(np.exp(x - m[..., None]), axis=-1))
        return a * lse / (L * _half_open(s))

    out = np.empty(ells.shape)
    step = max(1, _CHUNK_ELEMENTS // (_COARSE * vals.size))
    for i in range(0, ells.size, step):
        out[i : i + step] = _grid_min(f, ells[i : i + step], 1e-9, 40.0)
    return out


def _relation_key(relation: Any) -> str:
    key = getattr(relation, "key", relation)
    if isinstance(key, str):
        t = "".join(ch for ch in key.lower() if ch.isalpha())
        if t in ("addremove", "addremoveonerecord"):
            return "add_remove"
        if t in ("replace", "replaceonerecord"):
            return "replace"
    raise GeometryError(f"relation must be 'add_remove' or 'replace', got {relation!r}")


def _geometry(column_norms: Any, diameter: float | None, symmetric: bool):
    cn = np.asarray(column_norms, dtype=np.float64)
    if cn.ndim != 1 or cn.size == 0:
        raise GeometryError("column_norms must be a non-empty 1-D array (one norm per column of W)")
    if not np.all(np.isfinite(cn)) or np.any(cn < 0):
        raise GeometryError("column_norms must be finite and >= 0")
    if not cn.max() > 0:
        raise GeometryError("the workload is zero (every column norm is 0): nothing to release")
    N = cn.size
    top = np.sort(cn)[::-1]
    tri = float(top[0] + top[1]) if N > 1 else 0.0  # ‖w_i − w_j‖ ≤ ‖w_i‖ + ‖w_j‖
    if diameter is None:
        L_pairs = tri
    else:
        L_pairs = float(diameter)
        if not (math.isfinite(L_pairs) and L_pairs >= 0):
            raise GeometryError(f"diameter must be finite and >= 0, got {diameter!r}")
        if L_pairs > tri * (1 + 1e-9) + 1e-300:
            raise GeometryError(
                f"diameter {L_pairs} exceeds the sum of the two largest column norms {tri}: "
                "it cannot be max_(i,j) ||w_i - w_j||"
            )
        spread = float(top[0] - top[-1])  # ‖w_i − w_j‖ ≥ |‖w_i‖ − ‖w_j‖|
        if L_pairs < spread * (1 - 1e-9):
            raise GeometryError(
                f"diameter {L_pairs} is below max_j ||w_j|| - min_j ||w_j|| = {spread}: "
                "it cannot be max_(i,j) ||w_i - w_j||"
            )
        L_pairs = min(L_pairs, tri)
    P_pairs = N * (N - 1) // 2
    if symmetric:
        L_dec, P_dec = 2.0 * float(top[0]), N * N
    else:
        L_dec, P_dec = L_pairs, P_pairs
    return cn, N, L_pairs, P_pairs, L_dec, P_dec


def _log(p: int) -> float:
    return math.log(p) if p > 0 else -math.inf


def _bound_arrays(ells: np.ndarray, n: float, eps: float, cn: np.ndarray, L_pairs: float,
                  P_pairs: int, L_dec: float, P_dec: int, relation: str, gap: float):
    ellf = ells.astype(np.float64)
    sq = cn * cn
    M = _max_weighted_ratio(ellf, sq)
    if relation == "replace":
        if P_pairs == 0 or L_pairs == 0.0:
            M = np.zeros_like(M)
        else:
            M = np.minimum(4.0 * M, L_pairs**2 * _max_ratio(ellf, _log(P_pairs)))
    rp = _rho_plus(ellf, _log(P_dec))
    rm = _rho_minus(ellf, _log(P_dec))
    noise_sq = ellf * (ellf + 1.0) * M / (eps * eps)
    dist_sq = (n * L_dec) ** 2 * (rp + rm)
    gap_sq = 2.0 * gap
    total = np.sqrt(noise_sq + dist_sq + gap_sq)
    return total, noise_sq, dist_sq, gap_sq, M, rp, rm


def jl_error_bound(ell: int, n: float, epsilon: float, k: int, column_norms: Any, *,
                   diameter: float | None = None, relation: Any = "add_remove",
                   symmetric: bool = False, fw_gap: float = 0.0) -> JLErrorBound:
    """Explicit bound on the error of the JL mechanism with projection dimension ℓ (counts).

    ``B(ℓ) = ( ℓ(ℓ+1)·M(ℓ)/ε² + n²L²(ρ⁺(ℓ) + ρ⁻(ℓ)) + 2·fw_gap )^{1/2}
    ≥ (E‖ŷ − Wh‖₂²)^{1/2}`` — derivation in the module docstring (Nikolov 2023, Alg. 1, Lemma 13,
    Lemma 15 with dimension ℓ, Theorem 21, made explicit). Arguments: ``n`` the number of
    records (‖h‖₁ = n), ``epsilon`` ε, ``k`` the number of queries (for the RMS),
    ``column_norms`` the N values ‖w_j‖₂, ``diameter`` max_{i,j} ‖w_i − w_j‖₂ if known (else
    the two largest column norms' sum, valid by the triangle inequality), ``relation``
    "add_remove" / "replace" (the Δ the noise is calibrated to), ``symmetric`` the decode over
    n·B₁ instead of n·Δ_N, ``fw_gap`` the Frank–Wolfe gap the decode is run to (0 = exact).
    """
    ell = integer("ell", ell, 1)
    n = positive_number("n", n)
    eps = positive_number("epsilon", epsilon)
    k = integer("k", k, 1)
    gap = float(fw_gap)
    if not (math.isfinite(gap) and gap >= 0):
        raise GeometryError(f"fw_gap must be finite and >= 0, got {fw_gap!r}")
    rel = _relation_key(relation)
    cn, _, Lp, Pp, Ld, Pd = _geometry(column_norms, diameter, bool(symmetric))
    arrs = _bound_arrays(np.array([ell]), n, eps, cn, Lp, Pp, Ld, Pd, rel, gap)
    total, noise_sq, dist_sq, _, M, rp, rm = (np.atleast_1d(a) for a in arrs)
    return JLErrorBound(ell, float(total[0]), float(total[0]) / math.sqrt(k), float(noise_sq[0]),
                        float(dist_sq[0]), 2.0 * gap, float(M[0]), float(rp[0]),
                        float(rm[0]), Ld, n * Ld)


def choose_projection_dim(n: float, epsilon: float, k: int, column_norms: Any, *,
                          diameter: float | None = None, relation: Any = "add_remove",
                          symmetric: bool = False, fw_gap: float = 0.0,
                          max_dim: int | None = None) -> JLErrorBound:
    """The ℓ ∈ {1, …, max_dim} (default max_dim = k) minimising :func:`jl_error_bound`.

    Every ℓ is evaluated (vectorised), so the result is the exact integer minimiser of the
    explicit bound (ties: the smallest ℓ). Returns that ℓ's :class:`JLErrorBound`. Nikolov 2023
    (Thm 21) takes ℓ ≈ nε for its Lemma 16 noise; with the ℓ2-ball noise and the explicit
    bound the minimiser scales like ``(nε)^{4/5}`` instead (module docstring).
    """
    n = positive_number("n", n)
    eps = positive_number("epsilon", epsilon)
    k = integer("k", k, 1)
    top = k if max_dim is None else integer("max_dim", max_dim, 1)
    gap = float(fw_gap)
    if not (math.isfinite(gap) and gap >= 0):
        raise GeometryError(f"fw_gap must be finite and >= 0, got {fw_gap!r}")
    rel = _relation_key(relation)
    cn, _, Lp, Pp, Ld, Pd = _geometry(column_norms, diameter, bool(symmetric))
    ells = np.arange(1, top + 1)
    total, noise_sq, dist_sq, _, M, rp, rm = _bound_arrays(ells, n, eps, cn, Lp, Pp, Ld,
                                                                Pd, rel, gap)
    i = int(np.argmin(total))
    return JLErrorBound(int(ells[i]), float(total[i]), float(total[i]) / math.sqrt(k),
                        float(noise_sq[i]), float(dist_sq[i]), 2.0 * gap, float(M[i]),
                        float(rp[i]), float(rm[i]), Ld, n * Ld)


# ============================================================================================
# projection, sensitivity, decode


def sample_projection(ell: int, k: int, rng: Any) -> np.ndarray:
    """``T ∈ R^{ℓ×k}`` with i.i.d. entries ``±1/√ℓ`` (Nikolov 2023, Def. 8: E T_iT_iᵀ = I/ℓ, a
    JL-matrix with parameter C ≲ 1), one random bit per entry from ``rng.words(⌈ℓk/64⌉)``.

    ``rng``: an object with ``words(m)`` returning m uniform uint64 words -- ``SecureRandom``
    (OS randomness, production) or ``TestRandom`` (reproducible, not private) from
    ``factorize.privacy.sampling``. Bit b of word i (little-endian, b = 0 the least
    significant) decides entry ``64·i + b`` in row-major order: bit 1 → −1/√ℓ, bit 0 → +1/√ℓ.
    """
    ell = integer("ell", ell, 1)
    k = integer("k", k, 1)
    words = getattr(rng, "words", None)
    if not callable(words):
        raise GeometryTypeError(
            f"rng must provide words(n) (SecureRandom / TestRandom), got {type(rng).__name__}"
        )
    nbits = ell * k
    nwords = -(-nbits // 64)
    w = np.asarray(words(nwords))
    if w.shape != (nwords,) or w.dtype != np.uint64:
        raise GeometryError(
            f"rng.words({nwords}) must return {nwords} uint64 words, got {w.dtype} {w.shape}"
        )
    bits = np.unpackbits(w.astype("<u8").view(np.uint8), bitorder="little")[:nbits]
    T = np.full(nbits, 1.0 / math.sqrt(ell))
    T[bits.astype(bool)] *= -1.0
    return T.reshape(ell, k)


def _workload_operator(W: Any) -> tuple[Any, Any, tuple[int, int]]:
    if isinstance(W, np.ndarray):
        A = np.asarray(W, dtype=np.float64)
        if A.ndim != 2:
            raise GeometryError(f"W must be a 2-D array, got shape {A.shape}")
        return (lambda v: A @ v), (lambda u: A.T @ u), A.shape
    if all(hasattr(W, a) for a in ("matvec", "rmatvec", "shape")):
        k, N = W.shape
        return W.matvec, W.rmatvec, (int(k), int(N))
    raise GeometryError("W must be a 2-D array or have matvec, rmatvec and shape")


def project_workload(T: np.ndarray, W: Any) -> np.ndarray:
    """``T W`` (ℓ×N) for a dense W (one matrix product) or an operator with ``rmatvec``
    (row r of TW is ``Wᵀ t_r``: ℓ calls, W never formed)."""
    T = np.asarray(T, dtype=np.float64)
    if T.ndim != 2 or not np.all(np.isfinite(T)):
        raise GeometryError("T must be a finite 2-D array")
    _, rmatvec, (k, _) = _workload_operator(W)
    if T.shape[1] != k:
        raise GeometryError(f"T has {T.shape[1]} columns but W has {k} rows")
    if isinstance(W, np.ndarray):
        return T @ np.asarray(W, dtype=np.float64)
    return np.stack([np.asarray(rmatvec(t), dtype=np.float64) for t in T])


def jl_sensitivity(TW: np.ndarray, relation: Any = "add_remove") -> float:
    """L2 sensitivity Δ of ``h ↦ T W h`` -- the K-norm ball radius (Nikolov 2023, Lemma 15, dim ℓ).

    add/remove: ``Δ = max_j ‖T w_j‖₂`` (largest column norm of TW, exact). replace:
    ``Δ = max_{i≠j} ‖T(w_i − w_j)‖₂`` computed exactly over all pairs (≤ 2× add/remove; 0 for
    N = 1), by ``factorize.privacy.sensitivity`` (blockwise Gram identity with a rigorous
    rounding bound -- the value returned is ≥ the exact maximum, within 5e-10 relative).
    The noise spec is then ``family="l2_knorm"``, ``dim=ℓ``, scale Δ/ε (module docstring).
    """
    from factorize.privacy.sensitivity import sensitivity

    A = np.asarray(TW, dtype=np.float64)
    if A.ndim != 2 or A.size == 0 or not np.all(np.isfinite(A)):
        raise GeometryError("TW must be a non-empty finite 2-D array (ℓ × N)")
    rel = _relation_key(relation)
    return float(sensitivity(A, "l2", rel).value)


def workload_diameter(W: Any) -> float:
    """``max_{i,j} ‖w_i − w_j‖₂`` = diam(K), K = conv{w_j} (the L of :func:`jl_error_bound`).

    The same quantity as W's replace sensitivity; computed exactly (an upper bound within
    5e-10 relative) by ``factorize.privacy.sensitivity.replace_sensitivity``. W: a dense array
    or a workload with ``dense()``.
    """
    from factorize.privacy.sensitivity import replace_sensitivity

    A = W if isinstance(W, np.ndarray) else W.dense()
    return float(replace_sensitivity(np.asarray(A, dtype=np.float64), "l2").value)


class _SparseAwareDense:
    """TW as an operator for ``project_least_squares``: the Frank–Wolfe matvecs are with
    one-hot or sparse vectors (``A @ v`` reads only the columns in v's support) and the
    rmatvec uses a row-major copy of Aᵀ -- the same products, ~3× fewer memory passes."""

    def __init__(self, A: np.ndarray) -> None:
        self._A = A
        self._AT = np.ascontiguousarray(A.T)
        self.shape = A.shape

    def matvec(self, v: np.ndarray) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        nz = np.flatnonzero(v)
        if 4 * nz.size >= v.size:
            return self._A @ v
        return self._A[:, nz] @ v[nz]

    def rmatvec(self, u: np.ndarray) -> np.ndarray:
        return self._AT @ np.asarray(u, dtype=np.float64)

    def dense(self) -> np.ndarray:
        return self._A


@dataclass(frozen=True)
class JLDecode:
    """Output of :func:`jl_decode`.

    ``answers = W x`` (the released counts, length k); ``x`` ∈ n·Δ_N (or n·B₁) the weights;
    ``projected = T W x``; ``gap`` the Frank–Wolfe gap *at the returned x*,
    ``max_{v ∈ T(nK)} ⟨TWx − z̃, TWx − v⟩ ≥ ½‖TWx − z̃‖² − min`` (recomputed here, it is the g
    of the error bound); ``iterations`` FW iterations; ``converged``: gap ≤ gap_tol.
    """

    answers: np.ndarray
    x: np.ndarray
    projected: np.ndarray
    gap: float
    iterations: int
    converged: bool


def jl_decode(TW: np.ndarray, z_noisy: np.ndarray, n: float, W: Any, *, symmetric: bool = False,
              noise_scale: float | None = None, gap_tol: float | None = None,
              max_iters: int = 20000, deadline: float | None = None) -> JLDecode:
    """Output step of Nikolov 2023, Alg. 1: ``x* ≈ argmin { ‖TW x − z̃‖₂ : x ∈ n·Δ_N }`` (histograms;
    ``symmetric=True``: x ∈ n·B₁), returning the answers ``W x*``.

    Frank–Wolfe by ``project_least_squares(TW, z̃, n, ...)`` until the FW gap is ≤ ``gap_tol``
    or ``max_iters`` iterations. Default ``gap_tol``: with ``noise_scale`` = Δ/ε (the K-norm
    spec's scale) ``0.005·ℓ(ℓ+1)·(Δ/ε)²``, so the bound's gap term 2g is ≤ 1% of E‖Z‖²;
    without it ``1e-4·n²·max_j‖T w_j‖²`` (√(2g) ≤ 0.015·n·Δ). FW converges like 1/t here, so
    a gap far below the noise level costs many iterations and buys nothing.
    The gap at the returned point is recomputed exactly (one product with TW and one with
    TWᵀ) and reported: the error bound needs ``‖TW(x* − h)‖² ≤ ‖z̃ − TWh‖² + 2·gap``.
    ``W``: dense k×N array or an operator with matvec / rmatvec / shape (only ``W x`` is used).
    """
    A = np.asarray(TW, dtype=np.float64)
    if A.ndim != 2 or A.size == 0 or not np.all(np.isfinite(A)):
        raise GeometryError("TW must be a non-empty finite 2-D array (ℓ × N)")
    ell, N = A.shape
    z = np.asarray(z_noisy, dtype=np.float64).ravel()
    if z.shape != (ell,) or not np.all(np.isfinite(z)):
        raise GeometryError(f"z_noisy must be {ell} finite numbers (TW has {ell} rows)")
    n = positive_number("n", n)
    matvec, _, (_, NW) = _workload_operator(W)
    if NW != N:
        raise GeometryError(f"W has {NW} columns but TW has {N}")
    max_iters = integer("max_iters", max_iters, 1)
    col_sq = float(np.max(np.einsum("ij,ij->j", A, A)))
    if gap_tol is None:
        if noise_scale is not None:
            gap_tol = 0.005 * ell * (ell + 1.0) * positive_number("noise_scale", noise_scale) ** 2
        else:
            gap_tol = 1e-4 * n * n * col_sq
    gap_tol = float(gap_tol)
    if not (math.isfinite(gap_tol) and gap_tol >= 0):
        raise GeometryError(f"gap_tol must be finite and >= 0, got {gap_tol!r}")
    proj = project_least_squares(_SparseAwareDense(A), z, n, symmetric=bool(symmetric),
                                 max_iters=max_iters, gap_tol=gap_tol, deadline=deadline)
    x = proj.x
    y = A @ x
    g = y - z
    s = A.T @ g
    lin = n * float(np.max(np.abs(s))) if symmetric else -n * float(np.min(s))
    gap = max(float(g @ y) + lin, 0.0)
    answers = np.asarray(matvec(x), dtype=np.float64)
    return JLDecode(answers, x, y, gap, proj.iterations, gap <= gap_tol)


def jl_distortion(TW: np.ndarray, W: Any, *, symmetric: bool = False) -> tuple[float, float]:
    """The realised ``(δ⁺, δ⁻)`` of step (b): over the pair vectors v (``w_i − w_j``, i < j;
    with ``symmetric`` also ``w_i + w_j`` and ``2w_j``), ``δ⁺ = max (‖Tv‖² − ‖v‖²)₊`` and
    ``δ⁻ = max (‖v‖² − ‖Tv‖²)₊``. Then, for every z̃ and every decode x ∈ n·Δ_N (n·B₁) with FW
    gap g, ``‖Wx − Wh‖² ≤ ‖z̃ − TWh‖² + 2g + n²(δ⁺ + δ⁻)`` deterministically (an a-posteriori
    certificate for the drawn T). Cost O(N²(k + ℓ)) via the Gram matrices WᵀW and (TW)ᵀTW
    (float rounding ~1e-15 relative to the squared norms; a diagnostic, not rigorous).
    """
    A = np.asarray(TW, dtype=np.float64)
    B = W if isinstance(W, np.ndarray) else W.dense()
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise GeometryError("TW (ℓ×N) and W (k×N) must be 2-D with the same number of columns")
    N = A.shape[1]
    dp, dm = 0.0, 0.0
    step = max(1, _CHUNK_ELEMENTS // max(1, N))
    diag = np.einsum("ij,ij->j", B, B) - np.einsum("ij,ij->j", A, A)  # ‖w‖² − ‖Tw‖²
    for i0 in range(0, N, step):
        i1 = min(N, i0 + step)
        M = B[:, i0:i1].T @ B - A[:, i0:i1].T @ A  # rows i0..i1 of WᵀW − (TW)ᵀTW
        S = diag[i0:i1, None] + diag[None, :]
        for sign in ((-1.0, 1.0) if symmetric else (-1.0,)):
            D = S + 2.0 * sign * M  # ‖w_i ∓ w_j‖² − ‖T(w_i ∓ w_j)‖²
            if sign < 0:
                rows = np.arange(i1 - i0)
                D[rows, rows + i0] = 0.0  # i = j is not a pair (exactly 0)
            dm = max(dm, float(D.max()))
            dp = max(dp, float((-D).max()))
    return max(dp, 0.0), max(dm, 0.0)
