"""Certified sensitivity of a union of Kronecker blocks (``factorize.structured``).

For ``A = [s_b ⊗_j F_{b,j}]_b`` (1ᵀ on attributes off a block's support) and a cell
``c = (c_0, …, c_{d−1})``, column c of block b is ``s_b ⊗_{j∈supp b} f_{b,j}(c_j)``, so
``‖a_c‖² = Σ_b s_b² Π_j ‖f_{b,j}(c_j)‖²``. With per-factor statistics

    F = max_x ‖f(x)‖₂²,   O = max_{x≠y} |⟨f(x), f(y)⟩|,   L = max_x ‖f(x)‖₁,

the bounds are (each block maximised separately, so a sum of maxima ≥ the maximum of sums):

* add/remove, L2: ``Δ² ≤ Σ_b s_b² Π_j F_{b,j}``; L1: ``Δ ≤ Σ_b |s_b| Π_j L_{b,j}``;
* replace (c → c', differing on a set D of attributes): a block whose support misses D is
  unchanged; otherwise ``‖x − x'‖² = ‖x‖² + ‖x'‖² − 2⟨x, x'⟩`` with
  ``|⟨x, x'⟩| = s² Π_{j∈D} |⟨f(c_j), f(c'_j)⟩| Π_{j∉D} ‖f(c_j)‖² ≤ s² max_{j∈supp} O_j Π_{i≠j} F_i``
  (O_j ≤ F_j by Cauchy–Schwarz), so L2: ``Δ² ≤ Σ_{b: supp≠∅} 2 s_b² (Π_j F_{b,j} + max_j O_{b,j} Π_{i≠j} F_{b,i})``
  and L1 (triangle inequality): ``Δ ≤ Σ_{b: supp≠∅} 2 |s_b| Π_j L_{b,j}``.

For the residual strategy (orthonormal bases of 1^⊥: F = 1 − 1/n, O = 1/n, every column of
equal norm) the add/remove bound is the exact sensitivity up to rounding.

Exact values from the structure (the maximum over cells of the sum over blocks):

* add/remove: a column p-norm of a Kronecker block is the product of its factors' column
  p-norms, so ``max_c Σ_b ‖a_{b,c}‖_p^p`` is a maximum of a sum of products over the product
  domain, found exactly by ``product_max`` (distinct per-attribute tuples, dominance, branch
  and bound; any N). Past its work budget (``PRODUCT_MAX_BUDGET``) the Kronecker-vector route
  over all cells is used for N ≤ ``EXACT_ADD_REMOVE_CELLS`` and (blocks)·N ≤
  ``EXACT_ADD_REMOVE_WORK`` (cost O(blocks·N)), else the search's open-bound fallback (never
  above the sum of per-block maxima), ``exact = False``;
* replace, L2, N ≤ ``EXACT_REPLACE_CELLS``: per block ``‖x_c − x_{c'}‖² = P_c + P_{c'} − 2Q_{cc'}``
  with P and Q the Kronecker products of the factors' Gram diagonals and Gram matrices (1ᵀ's
  Gram is J), summed over blocks (allowance of ``privacy.sensitivity._kron_replace_l2_gram``:
  ``κ(P_c + P_{c'})(1 + c)`` per block);
* replace otherwise (:func:`_replace`): ``Δ₁ ≤ 2·max_c Σ_{b: supp≠∅} ‖a_{b,c}‖₁`` and
  ``Δ₂² ≤ 2·max_c Σ_{b: supp≠∅} ‖a_{b,c}‖₂² + 2Σ_b cross_b`` (cross_b = 0 for a block of
  entrywise non-negative factors), by ``product_max``, and never above the per-block bounds
  above; exact when a partner cell attains it (disjoint supports from the maximiser in every
  block, equal column norms), which identity, grouping and prefix-like factors usually give.

Soundness (``factorize.numerics``): every factor is unit-scaled by a power of two
(exact) before its statistics are formed, so no square underflows; the statistics are
certified upper bounds (``numerics.column_norms_upper``; Gram entries within
``γ_m·(|S|ᵀ|S|)``); products and sums are rounded up; powers of two are restored at the end of
each block's term, and a term that would fall below the normal range is replaced by 2⁻¹⁰²².
The strategy must be the *measured* one (``StructuredStrategy.measured``).

Mixed blocks (``structured.mixing``): column norms are products over the plain attributes
times one function of the mixed group, so the attributes some block mixes are merged into one
virtual attribute of ``product_max`` (:func:`_columns`); the per-block bounds include M's
largest column; under replace neighbours a strategy with a mixed block is bounded by twice its
add/remove sensitivity (``‖a_c − a_c'‖ ≤ ‖a_c‖ + ‖a_c'‖``), not exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from factorize.kron import kron_vector
from factorize.numerics import (
    U,
    column_norms_upper,
    gamma,
    product_upper,
    round_up,
    round_up_array,
    unit_scale,
)
from factorize.privacy.guarantees import Neighbouring, PrivacyError
from factorize.privacy.sensitivity import Sensitivity, scale_back

from .blocks import KronBlock
from .product_max import WORK_BUDGET, ProductMax, product_max
from .strategy import StructuredStrategy

#: Exact add/remove sensitivity (a length-N vector per block) up to this many cells ...
EXACT_ADD_REMOVE_CELLS = 1 << 22
#: ... and this many (blocks × cells) operations (all 3-way marginals over 20 binary
#: attributes, 1,351 blocks × 2^20 cells, took 150 s on the exact route).
EXACT_ADD_REMOVE_WORK = 1 << 25
#: Exact replace L2 sensitivity (an N×N matrix) up to this many cells.
EXACT_REPLACE_CELLS = 1 << 10
#: Most joint values of the attributes mixed blocks couple (one virtual attribute of
#: ``product_max``).
MAX_VIRTUAL_VALUES = 1 << 22
#: Work budget of the exact product maximisation (``product_max.WORK_BUDGET``).
PRODUCT_MAX_BUDGET = WORK_BUDGET
#: Nodes of the search for a replace witness (``_separating_partner``).
PARTNER_BUDGET = 1 << 16
_TINY = 2.0 ** -1022
#: Absolute allowance for products of unit-scaled numbers that underflow (each ≤ 1).
_ABS_UNDERFLOW = 2.0 ** -1000


@dataclass(frozen=True)
class _FactorStats:
    S: np.ndarray   # the factor is S·2^e with max|S| ∈ [½, 1) (exact)
    e: int
    col2: np.ndarray  # column ‖·‖₂² of S (upper)
    col1: np.ndarray  # column ‖·‖₁ of S (upper)
    O: float          # max off-diagonal |Gram| of S (upper; replace L2 only)


def _stats(A: np.ndarray, need_gram: bool) -> _FactorStats:
    S, e = unit_scale(A, "a strategy factor")
    n2 = column_norms_upper(S, "l2", "a strategy factor")
    n1 = column_norms_upper(S, "l1", "a strategy factor")
    O = 0.0
    if need_gram and S.shape[1] > 1:
        G = S.T @ S
        absS = np.abs(S)
        slack = gamma(max(S.shape[0], 1)) * (absS.T @ absS)
        np.fill_diagonal(G, 0.0)
        np.fill_diagonal(slack, 0.0)
        O = round_up(float(np.max(np.abs(G) + slack)), 3)
    return _FactorStats(S, e, round_up_array(n2 * n2, 1), n1, O)


def _ldexp_up_array(values: np.ndarray, e: int) -> np.ndarray:
    with np.errstate(over="ignore"):
        out = np.ldexp(values, e)
    if not np.all(np.isfinite(out)):
        raise PrivacyError("a sensitivity term overflows binary64")
    return np.where(values > 0, np.maximum(out, _TINY), 0.0)


def strategy_sensitivity(strategy: StructuredStrategy, norm: str,
                         relation: Neighbouring | str) -> Sensitivity:
    """Certified ``norm`` sensitivity of the (measured) strategy under ``relation``
    (module docstring); ``exact`` when the value is the maximum itself (up to rounding)."""
    relation = Neighbouring.parse(relation)
    if norm not in ("l1", "l2"):
        raise PrivacyError(f"norm must be 'l1' or 'l2', got {norm!r}")
    replace = relation is Neighbouring.REPLACE
    scales = [abs(b.scale) for b in strategy.blocks]
    if any(not (math.isfinite(s) and s > 0) for s in scales):
        raise PrivacyError("a strategy block's scale is not a finite nonzero number")
    stats = {name: _stats(a, replace and norm == "l2") for name, a in strategy.arrays.items()}
    N = strategy.N
    if replace and any(b.mix is not None for b in strategy.blocks):
        # ‖a_c − a_c'‖ ≤ ‖a_c‖ + ‖a_c'‖ ≤ 2 Δ_add/remove (mixed blocks: no replace search)
        half = strategy_sensitivity(strategy, norm, Neighbouring.ADD_REMOVE)
        return Sensitivity(round_up(2.0 * half.value, 1), norm, relation, False)
    if not replace:
        every = list(range(len(strategy.blocks)))
        pm = _product_max(strategy, stats, every, norm)
        value = pm.value if norm == "l1" else round_up(math.sqrt(pm.value), 1)
        if pm.exact:
            return Sensitivity(value, norm, relation, True)
        if N <= EXACT_ADD_REMOVE_CELLS and N * len(strategy.blocks) <= EXACT_ADD_REMOVE_WORK:
            exact = (_exact_virtual(strategy, stats, norm) if any(b.mix is not None for b in strategy.blocks)
                     else _exact_add_remove(strategy, stats, norm))
            return Sensitivity(exact, norm, relation, True)
        return Sensitivity(min(value, _bound(strategy, stats, norm, False)), norm, relation, False)
    if norm == "l2" and N <= EXACT_REPLACE_CELLS:
        return Sensitivity(_exact_replace_l2(strategy, stats), norm, relation, True)
    return _replace(strategy, stats, norm, relation)


def _product_max(strategy: StructuredStrategy, stats: dict[str, _FactorStats],
                 which: list[int], norm: str) -> ProductMax:
    """``max_c Σ_{b ∈ which} ‖a_{b,c}‖_p^p`` (p = 1: norms, p = 2: squared norms) by
    ``product_max``: block weight ``|s_b|^p·2^{p·e_b}`` (the unit scalings restored, exact
    unless below the normal range, where 2⁻¹⁰²² bounds it), table column of block b on
    attribute j the certified column p-norms^p of its unit-scaled factor, 1 off its support."""
    weights, tables = _columns(strategy, stats, which, norm)
    try:
        return product_max(weights, tables, budget=PRODUCT_MAX_BUDGET)
    except ValueError as exc:
        raise PrivacyError(f"the sensitivity search failed: {exc}") from None


def _names(blk: KronBlock) -> tuple[str, ...]:
    """The factor names whose column norms multiply: a plain block's factors; a mixed
    block's plain factors and its mixing matrix (a partition's columns are unit vectors)."""
    if blk.mix is None:
        return blk.names
    return tuple(blk.factor_name(j) for j in blk.plain) + (blk.mix,)


def _columns(strategy: StructuredStrategy, stats: dict[str, _FactorStats], which: list[int],
             norm: str) -> tuple[list[float], list[np.ndarray]]:
    """Block weights ``|s_b|^p·2^{p·e_b}`` and per-attribute tables of certified column
    p-norms^p (``_product_max``). The attributes some block mixes (``structured.mixing``)
    form one *virtual* attribute over their joint values (C order), where block b's column
    is ``Π_{j∈P_b} col_j(x_j) · col_M(κ_b(x_X))`` with a partition's class κ, each product
    rounded up; the rest are tables of their own."""
    from .mixing import MAX_MIX_COLUMNS, check_partition, mixed_attrs_of

    weights = []
    for b in which:
        blk = strategy.blocks[b]
        f, e = _block_scale(blk.scale)
        e += sum(stats[n].e for n in _names(blk))
        core = f if norm == "l1" else round_up(f * f, 1)
        weights.append(scale_back(core, e if norm == "l1" else 2 * e, 0))
    group = mixed_attrs_of([strategy.blocks[b] for b in which])

    def col(name: str) -> np.ndarray:
        return stats[name].col1 if norm == "l1" else stats[name].col2

    tables = []
    for j, n in enumerate(strategy.sizes):
        if j in group:
            continue
        T = np.ones((n, len(which)))
        for i, b in enumerate(which):
            blk = strategy.blocks[b]
            if j in blk.support:
                T[:, i] = col(blk.factor_name(j))
        tables.append(T)
    if group:
        shape = tuple(strategy.sizes[j] for j in group)
        if math.prod(shape) > MAX_VIRTUAL_VALUES:
            raise PrivacyError(f"the mixed attributes {list(group)} have {math.prod(shape)} joint "
                               f"values, more than the sensitivity search's {MAX_VIRTUAL_VALUES}")
        T = np.ones((math.prod(shape), len(which)))
        for i, b in enumerate(which):
            blk = strategy.blocks[b]
            v = np.ones(shape)
            count = 0
            for axis, j in enumerate(group):
                if j in blk.support and j not in blk.mix_attrs:
                    v = v * col(blk.factor_name(j)).reshape(_axis_shape(len(group), axis))
                    count += 1
            if blk.mix is not None:
                classes = []
                for j in blk.mix_attrs:
                    axis = group.index(j)
                    c = check_partition(strategy.arrays[blk.factor_name(j)], blk.factor_name(j))
                    classes.append(c.reshape(_axis_shape(len(group), axis)))
                dims = tuple(strategy.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs)
                if math.prod(dims) > MAX_MIX_COLUMNS:
                    raise PrivacyError("a mixing matrix has too many columns")
                flat = np.ravel_multi_index(np.broadcast_arrays(*classes), dims)
                v = v * col(str(blk.mix))[flat]
                count += 1
            T[:, i] = round_up_array(v.reshape(-1), count + 1) if count else 1.0
        tables.append(T)
    return weights, tables


def _axis_shape(d: int, axis: int) -> tuple[int, ...]:
    """``(1, …, −1, …, 1)``: a vector along ``axis`` of a d-axis array."""
    return tuple(-1 if i == axis else 1 for i in range(d))


def _exact_virtual(strategy: StructuredStrategy, stats: dict[str, _FactorStats], norm: str) -> float:
    """``max_c Σ_b ‖a_{b,c}‖_p^p`` over every cell of the attribute tables of
    :func:`_columns` (the mixed groups merged), for a strategy with a mixed block."""
    every = list(range(len(strategy.blocks)))
    weights, tables = _columns(strategy, stats, every, norm)
    total = np.zeros(math.prod(T.shape[0] for T in tables))
    for i, w in enumerate(weights):
        v = round_up_array(kron_vector([T[:, i] for T in tables]), len(tables) + 1)
        total += round_up_array(w * v, 1) + _ABS_UNDERFLOW
    top = round_up(float(total.max()), len(weights) + 1)
    return top if norm == "l1" else round_up(math.sqrt(top), 1)


def _replace(strategy: StructuredStrategy, stats: dict[str, _FactorStats], norm: str,
             relation: Neighbouring) -> Sensitivity:
    """Replace neighbours from the product maximum over the blocks with a support (a block
    summing every attribute out gives c and c' the same column). Per block, L1:
    ``‖u − v‖₁ ≤ ‖u‖₁ + ‖v‖₁``; L2: ``‖u − v‖² ≤ ‖u‖² + ‖v‖² + 2|⟨u, v⟩|``, where
    ``⟨u, v⟩ ≥ 0`` drops for a block whose factors are all entrywise non-negative, and is at
    most ``s² max_j O_j Π_{i≠j} F_i`` otherwise (module docstring). Summed over the blocks:
    ``Δ₁ ≤ 2M₁``, ``Δ₂² ≤ 2M₂ + 2Σ_b cross_b`` with ``M_p = max_c Σ_b ‖a_{b,c}‖_p^p``. Exact when
    the search completed, no cross term is left, and a cell c' ≠ c* exists whose columns have
    the same norms as the maximiser c* and disjoint supports from it in every block
    (:func:`_separating_partner`): then ``‖a_{c*} − a_{c'}‖`` equals the bound."""
    which = [b for b, blk in enumerate(strategy.blocks) if blk.support]
    old = _bound(strategy, stats, norm, True)
    if not which or strategy.N < 2:
        return Sensitivity(old, norm, relation, False)
    pm = _product_max(strategy, stats, which, norm)
    if norm == "l1":
        value, cross = round_up(2.0 * pm.value, 1), 0.0
    else:
        cross = math.fsum(_cross(strategy, stats, b) for b in which)
        value = round_up(math.sqrt(round_up(2.0 * pm.value + 2.0 * round_up(cross, len(which)), 2)), 1)
    exact = pm.exact and cross == 0.0 and _separating_partner(strategy, stats, which, pm.argmax, norm)
    if exact:
        return Sensitivity(value, norm, relation, True)
    return Sensitivity(min(value, old), norm, relation, False)


def _cross(strategy: StructuredStrategy, stats: dict[str, _FactorStats], b: int) -> float:
    """An upper bound on ``max_{c≠c'} |⟨x_{b,c}, x_{b,c'}⟩|`` for block b: 0 when every factor
    is entrywise non-negative (the inner product is then ≥ 0 and only helps), else
    ``s² max_j O_j Π_{i≠j} F_i`` (scaled back)."""
    blk = strategy.blocks[b]
    st = [stats[n] for n in blk.names]
    if all(bool(np.all(x.S >= 0)) for x in st):
        return 0.0
    f, es = _block_scale(blk.scale)
    e = es + sum(x.e for x in st)
    F = [float(x.col2.max()) for x in st]
    cross = 0.0
    for j in range(len(st)):
        cross = max(cross, product_upper([f, f, st[j].O] + F[:j] + F[j + 1:]))
    return scale_back(round_up(cross + _ABS_UNDERFLOW, 1), 2 * e, 0)


def _separating_partner(strategy: StructuredStrategy, stats: dict[str, _FactorStats],
                        which: list[int], cell: tuple[int, ...], norm: str) -> bool:
    """Whether a cell c' ≠ ``cell`` exists with, on every attribute j, a column-norm tuple equal
    to ``cell``'s (so ‖a_{b,c'}‖ = ‖a_{b,c}‖ for every block) and, for every block b in
    ``which``, an attribute j of its support where the factor's columns c_j and c'_j have
    disjoint supports (then the block's columns do too: ‖u − v‖₁ = ‖u‖₁ + ‖v‖₁ and
    ‖u − v‖² = ‖u‖² + ‖v‖²). A depth-first search over the attributes' distinct options
    (blocks separated, value changed), at most ``PARTNER_BUDGET`` nodes."""
    full = (1 << len(which)) - 1
    options: list[list[tuple[int, bool]]] = []
    for j, n in enumerate(strategy.sizes):
        x = cell[j]
        same = np.ones(n, dtype=bool)
        masks = np.zeros(n, dtype=object)
        for i, b in enumerate(which):
            blk = strategy.blocks[b]
            if j not in blk.support:
                continue
            st = stats[blk.names[blk.support.index(j)]]
            col = st.col1 if norm == "l1" else st.col2
            same &= col == col[x]
            nz = st.S != 0
            disjoint = ~np.any(nz & nz[:, [x]], axis=0)
            masks[disjoint] += 1 << i
        opts: dict[tuple[int, bool], None] = {}
        for v in np.flatnonzero(same):
            opts[(int(masks[v]), bool(v != x))] = None
        # drop an option another one beats (covers a superset, changes the value if it does)
        kept = [o for o in opts if not any(p != o and (p[0] | o[0]) == p[0] and p[1] >= o[1]
                                           for p in opts)]
        options.append(sorted(kept, key=lambda o: (-bin(o[0]).count("1"), not o[1])))
    order = sorted(range(len(options)), key=lambda j: len(options[j]))
    nodes = 0

    def search(k: int, covered: int, changed: bool) -> bool:
        nonlocal nodes
        nodes += 1
        if nodes > PARTNER_BUDGET:
            return False
        if k == len(order):
            return covered == full and changed
        return any(search(k + 1, covered | m, changed or c) for m, c in options[order[k]])

    return search(0, 0, False)


def _block_scale(s: float) -> tuple[float, int]:
    """``|s| = f·2^e`` with f ∈ [½, 1) (exact)."""
    f, e = math.frexp(abs(s))
    return f, e


def _exact_add_remove(strategy: StructuredStrategy, stats: dict[str, _FactorStats],
                      norm: str) -> float:
    """``max_c Σ_b ‖a_{b,c}‖_p^p`` (p = 2: squared norms, p = 1: norms) over all cells."""
    total = np.zeros(strategy.N)
    for blk in strategy.blocks:
        f, es = _block_scale(blk.scale)
        names = dict(zip(blk.support, blk.names, strict=True))
        vecs, e = [], es
        for j, n in enumerate(strategy.sizes):
            if j in names:
                st = stats[names[j]]
                vecs.append(st.col2 if norm == "l2" else st.col1)
                e += st.e
            else:
                vecs.append(np.ones(n))  # 1ᵀ: every column has norm 1
        core = f * f if norm == "l2" else f
        v = round_up_array(core * kron_vector(vecs), strategy.d + 1) + _ABS_UNDERFLOW
        total += _ldexp_up_array(v, 2 * e if norm == "l2" else e)
    top = round_up(float(total.max()), len(strategy.blocks) + 1)
    return top if norm == "l1" else round_up(math.sqrt(top), 1)


def _exact_replace_l2(strategy: StructuredStrategy, stats: dict[str, _FactorStats]) -> float:
    """``max_{c≠c'} Σ_b ‖x_{b,c} − x_{b,c'}‖²`` from Kronecker products of Gram matrices."""
    N = strategy.N
    total = np.zeros((N, N))
    for blk in strategy.blocks:
        if not blk.support:
            continue
        f, es = _block_scale(blk.scale)
        names = dict(zip(blk.support, blk.names, strict=True))
        grams, e, c = [], es, 1.0
        for j, n in enumerate(strategy.sizes):
            if j in names:
                st = stats[names[j]]
                grams.append(st.S.T @ st.S)
                e += st.e
                c *= 1.0 + gamma(max(st.S.shape[0], 1))
            else:
                grams.append(np.ones((n, n)))
        c = c * (1.0 + U) ** (len(grams) + 3) - 1.0
        kappa = round_up(3.0 * c + 6.0 * U, 3)
        P = f * f * kron_vector([np.diag(G).copy() for G in grams])
        Q = np.full((1, 1), f * f)
        for G in grams:
            Q = np.kron(Q, G)
        D = P[:, None] + P[None, :] - 2.0 * Q
        upper = np.maximum(D + kappa * (P[:, None] + P[None, :]) * (1.0 + c), 0.0) + _ABS_UNDERFLOW
        total += _ldexp_up_array(round_up_array(upper, 3), 2 * e)
    np.fill_diagonal(total, 0.0)
    top = round_up(float(total.max()), len(strategy.blocks) + 1)
    return round_up(math.sqrt(top), 1)


def _bound(strategy: StructuredStrategy, stats: dict[str, _FactorStats], norm: str,
           replace: bool) -> float:
    """The sum over blocks of per-block maxima (module docstring)."""
    terms: list[float] = []
    for blk in strategy.blocks:
        if replace and not blk.support:
            continue  # the total count does not change under replace
        st = [stats[n] for n in _names(blk)]
        f, es = _block_scale(blk.scale)
        e = es + sum(x.e for x in st)
        if norm == "l1":
            core = product_upper([f] + [float(x.col1.max()) for x in st])
            terms.append(scale_back(round_up(2.0 * core, 1) if replace else core, e, 0))
            continue
        F = [float(x.col2.max()) for x in st]
        core = product_upper([f, f] + F)
        if replace:
            cross = 0.0
            for j in range(len(st)):
                cross = max(cross, product_upper([f, f, st[j].O] + F[:j] + F[j + 1:]))
            core = round_up(2.0 * (core + cross), 2)
        terms.append(scale_back(round_up(core + _ABS_UNDERFLOW, 1), 2 * e, 0))
    total = round_up(math.fsum(terms), 1) if terms else 0.0
    return total if norm == "l1" else round_up(math.sqrt(total), 1)


def strategy_spread(strategy: StructuredStrategy, relation: Neighbouring | str,
                    grid: float | None = None) -> int:
    """The most measurements two neighbouring histograms can move (the lattice rounding's
    inflation counts only those; ``privacy.kron_spread`` for one Kronecker product): column x
    of block b is ``s_b ⊗_{j∈S_b} F_{b,j}[:, x_j]``, with at most ``Π_j max_x nnz(F_{b,j}[:, x])``
    non-zeros, and the blocks' rows are disjoint, so add/remove moves at most the sum over
    blocks; replace (two columns) at most twice that; never more than m. Counted exactly on
    the given (measured) factors; 0 when the release's ``grid`` rounds nothing (integer
    factors and scales, ``privacy.sensitivity.rounding_free``)."""
    from factorize.privacy.sensitivity import rounding_free

    relation = Neighbouring.parse(relation)
    names = sorted({n for b in strategy.blocks for n in _names(b)})
    if rounding_free([strategy.arrays[n] for n in names], grid, [b.scale for b in strategy.blocks]):
        return 0
    per: dict[str, int] = {}
    spread = 0
    for b in strategy.blocks:  # a mixed block: M's column non-zeros after one class per partition
        spread += math.prod(per.setdefault(n, int(np.max(np.count_nonzero(strategy.arrays[n], axis=0))))
                            for n in _names(b))
    if relation is Neighbouring.REPLACE:
        spread *= 2
    return max(1, min(strategy.m, spread))
