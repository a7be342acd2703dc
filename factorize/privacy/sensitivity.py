"""Sensitivity of a strategy matrix ``A`` (m×N) under each neighbouring relation (docs/math.md §1.4),
computed as a *certified upper bound*: floating-point error can only make it larger.

A mechanism releases ``A h + Z``; its privacy depends on ``A`` only through

    Δ_p = max over neighbours h ~ h' of ||A (h − h')||_p ,   p ∈ {1, 2}.

* add/remove one record, ``h − h' = ±e_x``: ``Δ_p = max_x ||a_x||_p`` (largest column p-norm);
* replace one record, ``h − h' = e_x − e_y`` (x ≠ y): ``Δ_p = max_{x≠y} ||a_x − a_y||_p``, at most
  twice the add/remove value (triangle inequality), and often smaller (0 for ``A = J``).

Soundness (``factorize.numerics``). Every matrix is first scaled by a power of two so its
largest entry lies in [½, 1) — exact — and its nonzero entries must then be ≥ 2⁻⁴⁸⁰ (a
relative dynamic range of at most 2⁴⁸⁰; the strategies the executor measures have at most 2⁵³,
see ``privacy.lattice``), so that no square or product of two entries underflows and no sum
overflows. Then:

* column norms: ``s ≤ s̃/(1 − γ_m)`` for the computed sum of squares s̃ (Higham's inner-product
  bound), so ``√s̃·(1 + γ_m)`` rounded up is ≥ the exact norm (``numerics.column_norms_upper``).
  This is what the float64 ``√(Σa²)`` of a forged plan with entries near 2⁻⁵³⁷ got wrong: its
  squares underflow to 0; scaling first makes them normal numbers.
* replace, L2: the Gram identity ``||a_x − a_y||² = s_x + s_y − 2⟨a_x, a_y⟩``, blockwise, each
  value computed within ``γ_{2m+8}·(s_x + s_y)`` of the exact one; the upper bound adds that
  allowance. When the identity cancels (near-duplicate columns) the maximiser is recomputed from
  explicit differences with their own bound, and the smaller valid bound is kept.
* replace, L1: explicit differences ``Σ|a_x − a_y|`` within ``γ_{m+1}`` relative.
* Kronecker ``A = A_1 ⊗ … ⊗ A_d``: add/remove is the product of the factors' maxima (the
  p-norm of a Kronecker product of vectors is the product of the norms), rounded up. Replace
  has no product rule: L2 uses the Kronecker product of the factors' Gram matrices (N×N, for
  N ≤ ``max_dense_columns``) with an allowance for every product formed; L1 forms the dense
  product when small; otherwise the bound ``2 × add/remove`` is returned, ``exact=False``.

Finally the value is scaled back by the powers of two (exact) and rounded up once more. Every
function returns a :class:`Sensitivity` recording the value, the norm, the relation and whether
the value is the exact maximum up to the stated allowance (``exact=True``) or the factor-2
bound (``exact=False``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.numerics import (
    NumericRangeError,
    U,
    column_norms_upper,
    gamma,
    product_upper,
    round_up,
    round_up_array,
    unit_scale,
)

from .guarantees import Neighbouring, PrivacyError

__all__ = [
    "Sensitivity",
    "column_norms",
    "add_remove_sensitivity",
    "replace_sensitivity",
    "replace_sensitivity_bound",
    "sensitivity",
    "kron_sensitivity",
    "kron_spread",
    "rounding_free",
]

_NORMS = ("l1", "l2")
_DEFAULT_BLOCK_ELEMENTS = 1 << 22  # 4M float64 = 32 MiB per temporary block
#: Underflow allowance of a product of scaled Gram entries (each ≤ 1; at most 2^20 products
#: and sums feed one value, each off by ≤ 2^-1074 when it underflows).
_ABS_UNDERFLOW = 2.0 ** -1000


@dataclass(frozen=True)
class Sensitivity:
    """A sensitivity value with its provenance.

    ``value``: a certified upper bound on the sensitivity (≥ 0, finite). ``norm``: ``"l1"`` or
    ``"l2"``. ``relation``: the :class:`Neighbouring` relation. ``exact``: True when ``value`` is
    the maximum itself up to the rounding allowance of the module docstring, False when it is
    the cheaper ``2 × add/remove`` bound.
    """

    value: float
    norm: str
    relation: Neighbouring
    exact: bool

    def __post_init__(self) -> None:
        if self.norm not in _NORMS:
            raise PrivacyError(f"sensitivity norm must be 'l1' or 'l2', got {self.norm!r}")
        v = float(self.value)
        if not math.isfinite(v) or v < 0:
            raise PrivacyError(f"sensitivity must be finite and >= 0, got {self.value!r}")
        object.__setattr__(self, "value", v)
        object.__setattr__(self, "relation", Neighbouring.parse(self.relation))
        object.__setattr__(self, "exact", bool(self.exact))

    def __float__(self) -> float:
        return self.value

    def to_dict(self) -> dict:
        return {
            "value": self.value,
            "norm": self.norm,
            "relation": self.relation.key,
            "exact": self.exact,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sensitivity:
        try:
            return cls(data["value"], data["norm"], Neighbouring.parse(data["relation"]), data["exact"])
        except KeyError as exc:
            raise PrivacyError(f"sensitivity dict is missing {exc.args[0]!r}") from None


def _check_norm(norm: str) -> str:
    n = str(norm).lower().replace("_", "")
    if n in ("l1", "1"):
        return "l1"
    if n in ("l2", "2"):
        return "l2"
    raise PrivacyError(f"norm must be 'l1' or 'l2', got {norm!r}")


def _dense(A: Any) -> np.ndarray:
    """Dense float64 2-D array (a scipy.sparse matrix is densified), finite."""
    from workloads.base import issparse

    if issparse(A):
        A = A.toarray()
    arr = np.asarray(A, dtype=np.float64)
    if arr.ndim != 2:
        raise PrivacyError(f"strategy matrix must be 2-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise PrivacyError("strategy matrix has non-finite entries")
    return arr


def unit_scaled(A: Any, what: str = "the strategy") -> tuple[np.ndarray, int]:
    """``numerics.unit_scale`` of the dense matrix (refusals as PrivacyError)."""
    try:
        return unit_scale(_dense(A), what)
    except NumericRangeError as exc:
        raise PrivacyError(str(exc)) from None


def scale_back(value: float, e: int, ops: int = 1) -> float:
    """``value·2^e`` (exact when normal), then rounded up; a positive value that falls below
    the normal range becomes 2⁻¹⁰²² (an upper bound); refuses overflow. Undoes the power-of-two
    scaling of ``numerics.unit_scale`` on a certified upper bound."""
    try:
        out = math.ldexp(value, e)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise PrivacyError("the sensitivity overflows binary64")
    if value > 0 and out < 2.0 ** -1022:
        out = 2.0 ** -1022  # an upper bound for any value that fell into the subnormal range
    return round_up(out, ops)


def column_norms(A: Any, norm: str = "l2") -> np.ndarray:
    """Certified upper bounds on the p-norms (p = 1, 2) of the columns of ``A``."""
    norm = _check_norm(norm)
    S, e = unit_scaled(A)
    if S.size == 0:
        return np.zeros(S.shape[1])
    up = column_norms_upper(S, norm, "the strategy")
    return round_up_array(np.ldexp(up, e), 1)


def _max_column_norm_scaled(S: np.ndarray, norm: str) -> float:
    """Certified upper bound on the largest column p-norm of a unit-scaled matrix."""
    if S.size == 0:
        return 0.0
    return float(np.max(column_norms_upper(S, norm, "the strategy")))


def add_remove_sensitivity(A: Any, norm: str = "l2") -> Sensitivity:
    """Add/remove sensitivity ``max_x ||A e_x||_p`` = largest column p-norm (docs/math.md §1.4),
    certified upper bound (module docstring)."""
    norm = _check_norm(norm)
    S, e = unit_scaled(A)
    value = scale_back(_max_column_norm_scaled(S, norm), e)
    return Sensitivity(value, norm, Neighbouring.ADD_REMOVE, True)


def replace_sensitivity_bound(A: Any, norm: str = "l2") -> Sensitivity:
    """Cheap upper bound on the replace sensitivity: ``2 × add/remove`` (triangle inequality).

    ``||a_x − a_y|| ≤ ||a_x|| + ||a_y|| ≤ 2 max_z ||a_z||``. Flagged ``exact=False``.
    """
    ar = add_remove_sensitivity(A, norm)
    return Sensitivity(2.0 * ar.value, ar.norm, Neighbouring.REPLACE, False)


def _block_size(N: int, per_pair: int, max_block_elements: int) -> int:
    return max(1, min(N, max_block_elements // max(1, N * per_pair)))


def _replace_l2_gram(S: np.ndarray, max_block_elements: int) -> tuple[float, tuple[int, int]]:
    """Certified upper bound on ``max_{x≠y} ||s_x − s_y||²`` of a unit-scaled S, via blockwise
    Gram matrices, and the pair maximising the computed value.

    The computed ``D̃ = s̃_x + s̃_y − 2G̃_xy`` is within ``γ_{2m+8}·(s_x + s_y)`` of the exact
    value (``|s̃ − s| ≤ γ_m s``, ``|G̃ − G| ≤ γ_m·|s_x|ᵀ|s_y| ≤ γ_m (s_x + s_y)/2``, three more
    roundings), and ``s ≤ s̃(1 + 2γ_m)``: ``D ≤ D̃ + κ·(s̃_x + s̃_y)`` with κ = γ_{2m+8}(1 + 2γ_m).
    """
    m, N = S.shape
    sq = np.einsum("ij,ij->j", S, S)
    kappa = round_up(gamma(2 * m + 8) * (1.0 + 2.0 * gamma(m)), 2)
    b = _block_size(N, 1, max_block_elements)
    best_upper = 0.0
    best = -np.inf
    best_pair = (0, 1)
    for start in range(0, N, b):
        stop = min(N, start + b)
        G = S[:, start:stop].T @ S
        Ssum = sq[start:stop, None] + sq[None, :]
        D = Ssum - 2.0 * G
        rows = np.arange(stop - start)
        D[rows, rows + start] = -np.inf  # x == y is not a pair
        k = int(np.argmax(D))
        i, j = divmod(k, N)
        if D[i, j] > best:
            best = float(D[i, j])
            best_pair = (start + i, j)
        D += kappa * Ssum
        best_upper = max(best_upper, float(D.max()))
    return round_up(best_upper, 2), best_pair


def _replace_direct(S: np.ndarray, norm: str, max_block_elements: int) -> float:
    """Certified upper bound on ``max_{x≠y} ||s_x − s_y||_p`` (p-th power for p = 2) of a
    unit-scaled S from explicit differences: each difference is within u relative, a sum of
    m terms within γ_m. No square underflows: nonzero entries are ≥ 2⁻⁴⁸⁰ (``unit_scaled``),
    hence multiples of 2⁻⁵³², so a nonzero difference is ≥ 2⁻⁵³² and its square ≥ 2⁻¹⁰⁶⁴."""
    m, N = S.shape
    ST = np.ascontiguousarray(S.T)
    by = max(1, min(N, max_block_elements // max(1, m)))
    bx = max(1, min(N, max_block_elements // max(1, by * m)))
    best = 0.0
    for xs in range(0, N, bx):
        X = ST[xs: xs + bx]
        for ys in range(xs, N, by):
            Y = ST[ys: ys + by]
            diff = X[:, None, :] - Y[None, :, :]
            D = np.abs(diff).sum(axis=2) if norm == "l1" else np.einsum("ijk,ijk->ij", diff, diff)
            best = max(best, float(D.max()))
    return _direct_bound(best, m)


def _direct_bound(best: float, m: int) -> float:
    """``_replace_direct``'s certified bound from the largest computed distance ``best``."""
    g = gamma(m + 2)
    return round_up(best * (1.0 + g) / (1.0 - g), 3)


def _pair_l1_direct(ST: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """``Σ_i |s_x − s_y|`` of the given column pairs of ``S = STᵀ``, computed exactly as
    ``_replace_direct`` computes them (a sum over the contiguous last axis), in chunks."""
    out = np.empty(xs.size)
    step = max(1, _DEFAULT_BLOCK_ELEMENTS // max(1, ST.shape[1]))
    for a in range(0, xs.size, step):
        out[a:a + step] = np.abs(ST[xs[a:a + step]] - ST[ys[a:a + step]]).sum(axis=1)
    return out


#: ``_replace_l1_rows`` re-derives at most max(this many times N, ``_L1_RECHECK_MIN``)
#: column pairs from explicit differences to state ``_replace_direct``'s own value; beyond,
#: its own bound stands.
_L1_RECHECK_PAIRS = 4
_L1_RECHECK_MIN = 1 << 12


def _replace_l1_rows(S: np.ndarray, max_block_elements: int) -> float:  # noqa: C901 (counted allow-list)
    """Certified upper bound on ``max_{x≠y} ||s_x − s_y||₁`` of a unit-scaled S, row by row
    over each row's support: O(N² + Σ_i nnz_i²) instead of ``_replace_direct``'s O(N²·m).

    The rule: ``|a − b| = |a| + |b| − 2·min(|a|, |b|)`` when a and b are nonzero with the same
    sign, ``|a| + |b|`` otherwise, so ``D_xy = c_x + c_y − Σ_i κ_i,xy`` with ``c`` the column
    ℓ1 norms and ``κ_i,xy = 2·min(|s_ix|, |s_iy|)`` over the rows whose support holds x and y
    with equal signs (exact: a minimum, doubled). A row with at most one nonzero (a histogram
    row) adds nothing; a row of one magnitude and sign subtracts one constant on its support.

    Rounding: ``c̃`` sums at most d nonzero terms (d the most nonzeros of a column: adding a
    zero is exact), so it is within ``γ_d·c``; the sequence ``c̃_x + c̃_y − κ_1 − …`` takes at
    most r + 1 operations (r the most shared rows — rows with ≥ 2 nonzeros — through one
    column), its terms summing to ≤ s̃ + s with s = c_x + c_y ≤ s̃/(1 − γ_d), s̃ = c̃_x + c̃_y,
    so it is within ``γ_{r+1}·(s̃ + s)``. Hence ``D ≤ D̃ + λ·s̃`` with
    ``λ = (γ_d + 2γ_{r+1})/(1 − γ_d)``, inflated for the two roundings of ``λ·fl(s̃)``.

    The value returned: when the pairs whose bound ``D̃ + λ·s̃`` exceeds ``_replace_direct``'s
    value at the computed maximiser are few, ``_replace_direct``'s own value re-derived on
    them (the same number the O(N²·m) search states, since every other pair is certified
    below it); otherwise the bound itself (at most ~3m ulps above it)."""
    m, N = S.shape
    if bool(np.all(S[:, :1] == S)):
        return 0.0  # every column the same: no pair differs (exactly 0 by explicit differences)
    limit = max(_L1_RECHECK_PAIRS * N, _L1_RECHECK_MIN)
    c = np.abs(S).sum(axis=0)
    shared = np.count_nonzero(S, axis=1) >= 2
    depth = int(np.count_nonzero(S, axis=0).max())  # c̃: sums of ≤ depth nonzero terms
    reach = int(np.count_nonzero(S[shared], axis=0).max()) if shared.any() else 0
    g = gamma(max(depth, 1))
    # λ(1 − 2u)⁻¹: ssum = fl(c̃_x + c̃_y) ≥ s̃(1 − u), and λ·ssum is rounded once more
    lam = round_up((g + 2.0 * gamma(reach + 1)) / ((1.0 - g) * (1.0 - 2.0 * U)), 3)
    rows = []
    for i in np.flatnonzero(shared):
        idx = np.flatnonzero(S[i])
        v = S[i, idx]
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        contiguous = hi - lo == idx.size
        a = np.abs(v)
        same_sign = bool(np.all(v > 0) or np.all(v < 0))
        constant = same_sign and bool(np.all(a == a[0]))
        rows.append((idx, lo, hi, contiguous, a, v > 0, same_sign, constant))
    bx = max(1, min(N, max_block_elements // max(1, N)))
    best_upper, best, best_pair = 0.0, -np.inf, (0, 1)
    cand: list[np.ndarray] = []  # pairs that may beat the maximiser's value (see below)
    n_cand = 0
    for xs in range(0, N, bx):
        xe = min(N, xs + bx)
        ssum = c[xs:xe, None] + c[None, :]
        D = ssum.copy()
        for idx, lo, hi, contiguous, a, pos, same_sign, constant in rows:
            if hi <= xs or lo >= xe:
                continue
            if contiguous:
                rlo, rhi = max(lo, xs), min(hi, xe)
                if constant:
                    D[rlo - xs:rhi - xs, lo:hi] -= 2.0 * a[0]
                    continue
                ax = a[rlo - lo:rhi - lo]
                corr = 2.0 * np.minimum.outer(ax, a)
                if not same_sign:
                    corr *= pos[rlo - lo:rhi - lo, None] == pos[None, :]
                D[rlo - xs:rhi - xs, lo:hi] -= corr
                continue
            sel = (idx >= xs) & (idx < xe)
            if not sel.any():
                continue
            ix = np.ix_(idx[sel] - xs, idx)
            if constant:
                D[ix] -= 2.0 * a[0]
                continue
            corr = 2.0 * np.minimum.outer(a[sel], a)
            if not same_sign:
                corr *= pos[sel, None] == pos[None, :]
            D[ix] -= corr
        r = np.arange(xe - xs)
        D[r, r + xs] = -np.inf  # x == y is not a pair
        k = int(np.argmax(D))
        i, j = divmod(k, N)
        block_best = float(D[i, j])
        if block_best > best:
            best, best_pair = block_best, (xs + i, j)
        D += lam * ssum
        best_upper = max(best_upper, float(D.max()))
        if n_cand <= limit:
            # a pair can beat the value at the maximiser only when its bound exceeds the
            # computed maximum (≤ that value), hence this block's computed maximum
            found = np.argwhere(block_best < D)
            n_cand += found.shape[0]
            cand.append(found + (xs, 0))
    upper = round_up(best_upper, 2)
    ST = np.ascontiguousarray(S.T)
    x, y = best_pair
    at_max = _direct_bound(float(_pair_l1_direct(ST, np.array([x]), np.array([y]))[0]), m)
    if at_max >= upper:
        return at_max  # _replace_direct's value: every pair is certified below it
    if n_cand > limit:
        return upper
    pairs = np.concatenate(cand)
    d = _pair_l1_direct(ST, pairs[:, 0], pairs[:, 1])
    return max(at_max, _direct_bound(float(d.max()), m)) if d.size else at_max


def replace_sensitivity(
    A: Any,
    norm: str = "l2",
    *,
    exact: bool = True,
    max_block_elements: int = _DEFAULT_BLOCK_ELEMENTS,
) -> Sensitivity:
    """Replace-one-record sensitivity ``max_{x≠y} ||A(e_x − e_y)||_p`` (docs/math.md §1.4), a certified
    upper bound (module docstring): O(N² m) time in column blocks of ``max_block_elements``.
    With ``exact=False`` the bound ``2 × add/remove`` is returned instead (``exact`` False).

    A universe with a single record type (N = 1) has no pair x ≠ y: the sensitivity is 0.
    """
    norm = _check_norm(norm)
    if not exact:
        return replace_sensitivity_bound(A, norm)
    S, e = unit_scaled(A)
    m, N = S.shape
    if N < 2 or m == 0 or not np.any(S):
        return Sensitivity(0.0, norm, Neighbouring.REPLACE, True)
    if max_block_elements < 1:
        raise PrivacyError("max_block_elements must be >= 1")
    if norm == "l2":
        upper_sq, (x, y) = _replace_l2_gram(S, max_block_elements)
        diff = S[:, x] - S[:, y]
        direct = float(diff @ diff)
        if upper_sq > direct * (1.0 + 1e-9):
            # the Gram identity cancelled (near-duplicate columns): explicit differences
            upper_sq = min(upper_sq, _replace_direct(S, "l2", max_block_elements))
        value = round_up(math.sqrt(upper_sq), 1)
    else:
        value = _replace_l1_rows(S, max_block_elements)
    return Sensitivity(scale_back(value, e), norm, Neighbouring.REPLACE, True)


def sensitivity(
    A: Any,
    norm: str = "l2",
    relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
    *,
    exact: bool = True,
    max_block_elements: int = _DEFAULT_BLOCK_ELEMENTS,
) -> Sensitivity:
    """Sensitivity of ``A`` in the given norm under the given relation (dispatcher)."""
    relation = Neighbouring.parse(relation)
    if relation is Neighbouring.ADD_REMOVE:
        return add_remove_sensitivity(A, norm)
    return replace_sensitivity(A, norm, exact=exact, max_block_elements=max_block_elements)


def _kron_replace_l2_gram(scaled: Sequence[np.ndarray]) -> float:
    """Certified upper bound on ``max_{x≠y} ||(⊗S)(e_x − e_y)||²`` from the factors' Gram
    matrices: with ``P_x = Π G_j[x_j, x_j]`` and ``Q_xy = Π G_j[x_j, y_j]``, the squared
    distance is ``P_x + P_y − 2Q_xy``. Each computed Gram entry is within γ_{m_j}·H_j of the
    exact one (``H_j[x,y] ≤ √(G_j[x,x] G_j[y,y])``), so a product of d of them is within
    ``c = Π(1 + γ_{m_j})(1 + u)^d − 1`` of ``Π H ≤ √(P_x P_y) ≤ (P_x + P_y)/2``; the final
    additions add 3u. Underflow of products adds at most ``_ABS_UNDERFLOW``; it cannot
    happen (and the term is dropped) when the product of the factors' smallest nonzero Gram
    magnitudes exceeds 2⁻¹⁰⁰⁰."""
    grams = [S.T @ S for S in scaled]
    smallest = 1.0
    for G in grams:
        nz = np.abs(G[G != 0])
        smallest *= float(nz.min()) if nz.size else 1.0
    absolute = 0.0 if smallest > 2.0 ** -1000 else _ABS_UNDERFLOW
    c = 1.0
    for S in scaled:
        c *= 1.0 + gamma(max(S.shape[0], 1))
    c = c * (1.0 + U) ** (len(scaled) + 2) - 1.0
    kappa = round_up(3.0 * c + 6.0 * U, 3)
    P: np.ndarray = np.ones(1)
    Q: np.ndarray = np.ones((1, 1))
    for G in grams:
        P = np.kron(P, np.diag(G).copy())
        Q = np.kron(Q, G)
    D = P[:, None] + P[None, :] - 2.0 * Q
    np.fill_diagonal(D, -np.inf)
    upper = D + kappa * (P[:, None] + P[None, :]) * (1.0 + c)
    return round_up(float(upper.max()) + absolute, 3)


def kron_sensitivity(
    factors: Sequence[Any],
    norm: str = "l2",
    relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
    *,
    max_dense_columns: int = 4096,
    max_dense_elements: int = 1 << 24,
) -> Sensitivity:
    """Certified sensitivity of the Kronecker strategy ``A = A_1 ⊗ A_2 ⊗ … ⊗ A_d`` from its
    factors (module docstring).

    Add/remove: column ``(j_1, …, j_d)`` of ``A`` is ``a^(1)_{j_1} ⊗ … ⊗ a^(d)_{j_d}`` and
    ``||u ⊗ v||_p = ||u||_p ||v||_p``, so the largest column p-norm of ``A`` is the product of
    the factors' largest column p-norms.

    Replace: for ``N = Π N_i ≤ max_dense_columns`` the exact maximum (L2 from the Kronecker
    product of the Gram matrices, L1 from the dense product when ``m·N ≤ max_dense_elements``);
    otherwise the upper bound ``2 × (add/remove value)`` with ``exact=False``.
    """
    norm = _check_norm(norm)
    relation = Neighbouring.parse(relation)
    if len(factors) == 0:
        raise PrivacyError("kron_sensitivity needs at least one factor")
    if len(factors) == 1:
        return sensitivity(factors[0], norm, relation)
    pairs = [unit_scaled(F, f"strategy factor {i}") for i, F in enumerate(factors)]
    scaled = [S for S, _ in pairs]
    e_total = sum(e for _, e in pairs)
    maxima = [_max_column_norm_scaled(S, norm) for S in scaled]
    ar_scaled = product_upper(maxima)
    ar = scale_back(ar_scaled, e_total)
    if relation is Neighbouring.ADD_REMOVE:
        return Sensitivity(ar, norm, relation, True)
    N = math.prod(S.shape[1] for S in scaled)
    m = math.prod(S.shape[0] for S in scaled)
    if N < 2 or ar == 0.0:
        return Sensitivity(0.0, norm, relation, True)
    if max_dense_columns >= N:
        if norm == "l2":
            sq = _kron_replace_l2_gram(scaled)
            return Sensitivity(scale_back(round_up(math.sqrt(sq), 1), e_total), norm, relation, True)
        if m * N <= max_dense_elements:
            dense = np.ones((1, 1))
            for S in scaled:
                dense = np.kron(dense, S)
            # each entry is a product of d factors: within (1 + u)^(d−1) − 1 ≤ γ_d relative,
            # plus d·2^-1074 absolute if it underflows; a column pair's L1 distance moves by at
            # most γ_d·(‖x‖₁ + ‖y‖₁) + 2m·d·2^-1074 ≤ 2γ_d·(max column ℓ1) + that
            direct = _replace_l1_rows(dense, _DEFAULT_BLOCK_ELEMENTS)
            allowance = 2.0 * gamma(len(scaled)) * ar_scaled + 2.0 * m * len(scaled) * 2.0 ** -1074
            return Sensitivity(scale_back(round_up(direct + allowance, 2), e_total), norm,
                               relation, True)
    return Sensitivity(round_up(2.0 * ar, 1), norm, relation, False)



def rounding_free(matrices: Sequence[Any], grid: float | None, scales: Sequence[float] = ()) -> bool:
    """True when ``round(Ã h / γ)`` rounds nothing for every integer histogram h: every entry
    of the factors (and every block scale) is an integer and γ = 2⁻ᵏ ≤ 1, so ``Ã h / γ`` is
    already an integer (products and sums of integers, times 2ᵏ); the lattice release then
    needs no rounding inflation (``calibration.discretized_sensitivity`` with s = 0). Checked
    exactly on the given (measured) floats."""
    if grid is None or not grid <= 1.0:
        return False
    if any(float(c) != math.floor(float(c)) or not math.isfinite(float(c)) for c in scales):
        return False
    for F in matrices:
        a = np.asarray(F, dtype=np.float64)
        if not bool(np.all(np.isfinite(a))) or not bool(np.all(a == np.floor(a))):
            return False
    return True


def kron_spread(factors: Sequence[Any], relation: Neighbouring | str = Neighbouring.ADD_REMOVE,
                grid: float | None = None) -> int:
    """The most coordinates of ``A h`` (``A = ⊗_j A_j``) in which two neighbouring histograms
    can differ: the rounding inflation of a lattice release counts only those
    (``calibration.discretized_sensitivity``).

    Add/remove (``h' = h ± e_x``): ``(A h)_i`` changes only where ``A_{ix} ≠ 0``; column x of
    ``⊗A_j`` has ``Π_j nnz(A_j[:, x_j])`` non-zeros, so the spread is ``Π_j max_x nnz``.
    Replace (``h' = h + e_x − e_y``): at most the union of two columns' supports,
    ``min(m, 2·that)``. Counted exactly on the given (measured) factors: an integer, no
    rounding. With the release's ``grid``: 0 when the rounding moves nothing
    (:func:`rounding_free`)."""
    relation = Neighbouring.parse(relation)
    if len(factors) == 0:
        raise PrivacyError("kron_spread needs at least one factor")
    if rounding_free(factors, grid):
        return 0
    per = [int(np.max(np.count_nonzero(np.asarray(F), axis=0))) if np.asarray(F).size else 0
           for F in factors]
    spread = math.prod(per)
    m = math.prod(int(np.asarray(F).shape[0]) for F in factors)
    if relation is Neighbouring.REPLACE:
        spread = 2 * spread
    return max(1, min(m, spread))
