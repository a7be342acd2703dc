"""The algebra of attribute subsets: marginal workloads without the N columns (docs/math.md §5.2).

A *marginal family* over a product domain with attribute sizes ``n_0, …, n_{d−1}``
(``N = Π n_j`` cells) is a stack of (weighted) blocks, one per attribute subset ``S``:

    B_S = w_S · ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}      (rows_S = Π_{j∈S} n_j rows, w_S > 0),

the contingency table of the attributes in ``S`` (``S = ∅`` is the total query) scaled by
its block weight ``w_S`` (1 unless stated). Any family of subsets is allowed, repeated
subsets (with equal or different weights) included.

The algebra. For attribute j let ``K_j = J/n_j`` (J all ones) and ``C_j = I − K_j``; both
are orthogonal projectors, of rank 1 and ``n_j − 1``. For a subset T,

    P_T = ⊗_{j∈T} C_j ⊗_{j∉T} K_j

is an orthogonal projector of rank ``dim_T = Π_{j∈T}(n_j − 1)`` (0 as soon as T holds an
attribute of size 1); the ``P_T`` are mutually orthogonal, sum to ``I_N``, and span the
commutant of the group that permutes the values of every attribute. Its diagonal is
constant, ``diag P_T = dim_T / N``. Since ``I = C + K`` and ``J = n K``,

    B_SᵀB_S = w_S² (N / rows_S) · Σ_{T⊆S} P_T,   so   WᵀW = Σ_T λ_T P_T,
    λ_T = Σ_{blocks S ⊇ T} w_S² Π_{j∉S} n_j = Σ_{blocks S⊇T} w_S² N / rows_S

(the sum runs over blocks, repeats included: only ``Σ_copies w²`` of a subset matters),
and ``||W||_tr = Σ_T dim_T √λ_T``. For a row ``r`` of block S (``w_S e_a`` on S, ones off S),

    r P_T rᵀ = w_S² [T ⊆ S] · Π_{j∈T}(1 − 1/n_j) · Π_{j∈S∖T}(1/n_j) · Π_{j∉S} n_j
             = w_S² [T ⊆ S] · dim_T · N / rows_S²  =: w_S² c_{S,T},

the same for every row of the block (attribute by attribute: ``e_aᵀC e_a = 1 − 1/n``,
``e_aᵀK e_a = 1/n``, ``1ᵀC 1 = 0``, ``1ᵀK 1 = n``). These are the numbers the marginal
planner (``factorize.planner.marginal_optimum``) optimises over; nothing here ever forms an
N-column matrix except the small-domain helpers ``projector_dense`` (for tests).

Subsets are handled as bit masks (bit j ⇔ attribute j) in the public functions and exposed
as sorted tuples. Unit-weight counts (``N``, ``rows_S``, ``dim_T``, ``λ_T``) are exact
Python ints. The containment structure ``{(T, S): T ⊆ S}`` that every computation walks is
built once per family, vectorised (``SubsetIncidence``, ``MarginalFamily.incidence``), so
families of tens of thousands of blocks cost well under a second here.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from factorize.planner.errors import PlannerError
from workloads import (
    DenseWorkload,
    KronWorkload,
    SparseWorkload,
    VStackWorkload,
    Workload,
)

__all__ = [
    "MAX_ALGEBRA_TERMS",
    "AlgebraCoefficients",
    "DistinctBlock",
    "MarginalFamily",
    "SubsetIncidence",
    "apply_algebra",
    "attribute_product",
    "closure",
    "gram_eigenvalues",
    "marginal_family",
    "mask_of",
    "projector_dense",
    "row_norm_coefficients",
    "strategy_matvec",
    "strategy_pinv_matvec",
    "submasks",
    "subset_dim",
    "subset_of",
    "trace_norm",
]

#: Most (distinct block, sub-subset) pairs the algebra enumerates (Σ_S 2^{|S|}); beyond,
#: ValueError. Memory is ~0.3 KB per pair at the peak of a γ₂ solve and its verification
#: (index arrays, the sparse dual matrix and the verifier's per-pair products), so the
#: limit keeps a solve within a few GB.
MAX_ALGEBRA_TERMS: int = 8_000_000

#: Largest factor that the detector densifies to look at its values, when it is neither
#: a DenseWorkload nor a SparseWorkload (entries).
_MAX_FACTOR_CHECK_ENTRIES: int = 1_000_000


# ---------------------------------------------------------------------------------
# subsets as bit masks
# ---------------------------------------------------------------------------------
def mask_of(subset: Iterable[int]) -> int:
    """Bit mask of a set of attribute indices."""
    m = 0
    for j in subset:
        m |= 1 << int(j)
    return m


def subset_of(mask: int) -> tuple[int, ...]:
    """Sorted attribute indices of a bit mask."""
    out = []
    j = 0
    while mask:
        if mask & 1:
            out.append(j)
        mask >>= 1
        j += 1
    return tuple(out)


def submasks(mask: int) -> Iterable[int]:
    """All submasks of ``mask`` (including ``mask`` and 0), in decreasing order."""
    sub = mask
    while True:
        yield sub
        if sub == 0:
            return
        sub = (sub - 1) & mask


def subset_dim(sizes: Sequence[int], mask: int) -> int:
    """``dim_T = rank P_T = Π_{j∈T} (n_j − 1)`` (exact int)."""
    return math.prod(sizes[j] - 1 for j in subset_of(mask))


def _check_weight(w: object) -> float:
    if isinstance(w, bool) or not isinstance(w, numbers.Real):
        raise PlannerError(f"block weights must be real numbers, got {w!r}")
    v = float(w)
    if not (math.isfinite(v) and v > 0.0):
        raise PlannerError(f"block weights must be finite and > 0, got {v!r}")
    return v


# ---------------------------------------------------------------------------------
# the family
# ---------------------------------------------------------------------------------
class DistinctBlock(NamedTuple):
    """One distinct subset of a family and what its copies contribute.

    ``gram_weight = Σ_copies w²`` (what ``λ_T`` and γ_F see); ``max_weight = max_copies w``
    (what γ₂ sees: the copy with the largest rows dominates every other copy's row norms).
    """

    mask: int
    subset: tuple[int, ...]
    multiplicity: int
    gram_weight: float
    max_weight: float


@dataclass(frozen=True, init=False)
class MarginalFamily:
    """A stack of (weighted) marginal blocks over one product domain.

    ``sizes`` are the attribute sizes ``n_j``; ``subsets[b]`` the sorted attributes of
    block b (in row order of the workload); ``rows[b] = Π_{j∈S_b} n_j``; ``weights[b] =
    w_b > 0`` the block's row scaling (optional, default all ``1.0``; after construction
    always a tuple of floats). The detector puts attributes of size 1 in no subset
    (``I_1 = 1ᵀ_1``), so equal matrices give equal families.

    ``unique()`` is unchanged by weights: distinct subsets with their multiplicities.
    ``distinct_blocks()`` adds, per distinct subset, ``Σ_copies w²`` and ``max_copies w``.
    """

    sizes: tuple[int, ...]
    subsets: tuple[tuple[int, ...], ...]
    rows: tuple[int, ...]
    weights: tuple[float, ...]

    def __init__(self, sizes: Sequence[int], subsets: Sequence[Sequence[int]], rows: Sequence[int],
                 weights: Sequence[float] | None = None) -> None:
        # the fields as given, then checked and made tuples in place (frozen: object.__setattr__)
        for name, value in (("sizes", sizes), ("subsets", subsets), ("rows", rows)):
            object.__setattr__(self, name, value)
        if not self.sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1
                                 for n in self.sizes):
            raise PlannerError(f"sizes must be a non-empty tuple of positive ints, got {self.sizes}")
        if not self.subsets or len(self.subsets) != len(self.rows):
            raise PlannerError("a marginal family needs at least one block, and one row count per block")
        if type(self.subsets) is not tuple or not all(type(S) is tuple for S in self.subsets):
            object.__setattr__(self, "subsets", tuple(tuple(S) for S in self.subsets))
        for name in ("sizes", "rows"):
            if type(getattr(self, name)) is not tuple:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        d = len(self.sizes)
        checked: dict[tuple[int, ...], int] = {}
        for S, r in zip(self.subsets, self.rows, strict=True):
            expect = checked.get(S)
            if expect is None:
                if tuple(sorted(set(S))) != tuple(S) or any(not 0 <= j < d for j in S):
                    raise PlannerError(f"subset {S} is not a sorted set of attribute indices < {d}")
                expect = checked[S] = math.prod(self.sizes[j] for j in S)
            if r != expect:
                raise PlannerError(f"block {S} has {r} rows, expected Π_(j∈S) n_j")
        if weights is None:
            object.__setattr__(self, "weights", (1.0,) * len(self.subsets))
        else:
            ws = tuple(_check_weight(w) for w in weights)
            if len(ws) != len(self.subsets):
                raise PlannerError(f"{len(ws)} block weights for {len(self.subsets)} blocks")
            object.__setattr__(self, "weights", ws)

    @property
    def d(self) -> int:
        """Number of attributes."""
        return len(self.sizes)

    @property
    def N(self) -> int:
        """Number of cells ``Π n_j`` (Python int; may exceed 2⁵³)."""
        return math.prod(self.sizes)

    @property
    def k(self) -> int:
        """Number of queries ``Σ_S rows_S``."""
        return sum(self.rows)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.k, self.N)

    @property
    def unit_weights(self) -> bool:
        """Whether every block weight is exactly 1 (the unweighted family)."""
        return all(w == 1.0 for w in self.weights)

    @functools.cached_property
    def masks(self) -> tuple[int, ...]:
        """Bit mask of each block's subset, in block order."""
        cache: dict[tuple[int, ...], int] = {}
        return tuple(cache[S] if S in cache else cache.setdefault(S, mask_of(S))
                     for S in self.subsets)

    def unique(self) -> list[tuple[int, int]]:
        """Distinct subsets as ``(mask, multiplicity)``, in order of first occurrence."""
        return [(b.mask, b.multiplicity) for b in self.distinct_blocks()]

    def distinct_blocks(self) -> tuple[DistinctBlock, ...]:
        """Distinct subsets (first-occurrence order) with ``Σ_copies w²`` and ``max w``."""
        return self._distinct

    @functools.cached_property
    def _distinct(self) -> tuple[DistinctBlock, ...]:
        index: dict[tuple[int, ...], int] = {}
        mult: list[int] = []
        squares: list[list[float]] = []
        wmax: list[float] = []
        for S, w in zip(self.subsets, self.weights, strict=True):
            i = index.get(S)
            if i is None:
                index[S] = len(mult)
                mult.append(1)
                squares.append([w * w])
                wmax.append(w)
            else:
                mult[i] += 1
                squares[i].append(w * w)
                wmax[i] = max(wmax[i], w)
        return tuple(DistinctBlock(mask_of(S), S, mult[i], math.fsum(squares[i]), wmax[i])
                     for S, i in index.items())

    @functools.cached_property
    def _nontrivial(self) -> int:
        return mask_of(j for j, n in enumerate(self.sizes) if n > 1)

    @functools.cached_property
    def incidence(self) -> SubsetIncidence:
        """The vectorised containment structure (built on first use, then cached)."""
        return _build_incidence(self)


# ---------------------------------------------------------------------------------
# the containment structure, vectorised
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class SubsetIncidence:
    """Which closure subsets T lie in which distinct blocks S, as flat index arrays.

    ``blocks`` are the family's distinct subsets (``MarginalFamily.distinct_blocks``);
    ``block_attrs[s]`` the attributes of size > 1 of block s, in decreasing order, padded
    with ``d``. ``masks`` is the closure (every T ⊆ some block with ``dim_T > 0``) ordered
    by ``|T|`` then mask value, ``attrs[i]`` the attributes of ``masks[i]`` (decreasing,
    padded with ``d``). The pairs ``(pair_t[p], pair_s[p])`` list every ``T ⊆ S`` once per
    distinct block. Per-subset products over attributes are ``attribute_product``.
    """

    d: int
    blocks: tuple[DistinctBlock, ...]
    block_attrs: np.ndarray
    masks: tuple[int, ...]
    attrs: np.ndarray
    pair_t: np.ndarray
    pair_s: np.ndarray

    @functools.cached_property
    def subsets(self) -> tuple[tuple[int, ...], ...]:
        """The closure's subsets as sorted tuples (``subsets[i]`` ⇔ ``masks[i]``)."""
        d = self.d
        return tuple(tuple(a for a in reversed(row) if a < d) for row in self.attrs.tolist())

    @functools.cached_property
    def subset_index(self) -> dict[tuple[int, ...], int]:
        """Position of each closure subset (sorted tuple) in ``masks``."""
        return {T: i for i, T in enumerate(self.subsets)}

    @functools.cached_property
    def block_index(self) -> dict[tuple[int, ...], int]:
        """Position of each distinct block's subset (sorted tuple) in ``blocks``."""
        return {b.subset: i for i, b in enumerate(self.blocks)}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_subsets(self) -> int:
        return len(self.masks)

    @property
    def nnz(self) -> int:
        return int(self.pair_t.size)


def attribute_product(per_attribute: Sequence[float] | np.ndarray, attrs: np.ndarray) -> np.ndarray:
    """``Π_{j∈T} v_j`` for every row of a padded attribute array (one float product each).

    ``per_attribute`` holds ``v_j`` for the d attributes; the padding index d reads 1.
    """
    ext = np.append(np.asarray(per_attribute, dtype=np.float64), 1.0)
    if attrs.shape[1] == 0:
        return np.ones(attrs.shape[0])
    return np.prod(ext[attrs], axis=1)


def _effective_terms(family: MarginalFamily) -> int:
    nontrivial = family._nontrivial
    return sum(1 << (b.mask & nontrivial).bit_count() for b in family.distinct_blocks())


def _check_terms(family: MarginalFamily) -> None:
    total = _effective_terms(family)
    if total > MAX_ALGEBRA_TERMS:
        raise PlannerError(
            f"the subset algebra of this family has {total} (block, subset) pairs, above "
            f"MAX_ALGEBRA_TERMS={MAX_ALGEBRA_TERMS} (about 0.3 KB of memory each)")


def _unique_rows(R: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an int array (rows sorted lexicographically) and the inverse map.

    Rows hold decreasing attribute indices, so lexicographic order is mask order.
    """
    t = R.shape[1]
    if t * bits <= 62:
        key = np.zeros(R.shape[0], dtype=np.int64)
        for i in range(t):
            key = (key << bits) | R[:, i]
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return R[first], inv.reshape(-1)
    uniq, inv = np.unique(R, axis=0, return_inverse=True)
    return uniq, inv.reshape(-1)


def _build_incidence(family: MarginalFamily) -> SubsetIncidence:
    """Enumerate ``T ⊆ S`` for every distinct block, grouped by ``(|S|, |T|)`` in numpy."""
    _check_terms(family)
    sizes = family.sizes
    d = len(sizes)
    blocks = family.distinct_blocks()
    eff = [tuple(j for j in reversed(b.subset) if sizes[j] > 1) for b in blocks]
    smax = max(len(e) for e in eff)
    block_attrs = np.full((len(blocks), smax), d, dtype=np.int64)
    by_size: dict[int, list[int]] = {}
    for i, e in enumerate(eff):
        by_size.setdefault(len(e), []).append(i)
    found_rows: dict[int, list[np.ndarray]] = {}
    found_ids: dict[int, list[np.ndarray]] = {}
    for s, ids in by_size.items():
        ids_a = np.array(ids, dtype=np.int64)
        if s:
            E = np.array([eff[i] for i in ids], dtype=np.int64).reshape(len(ids), s)
            block_attrs[ids_a, :s] = E
        else:
            E = np.zeros((len(ids), 0), dtype=np.int64)
        for t in range(s + 1):
            if t == 0:
                rows_t = np.zeros((len(ids), 0), dtype=np.int64)
                ids_t = ids_a
            else:
                combos = np.array(list(itertools.combinations(range(s), t)), dtype=np.int64)
                rows_t = E[:, combos].reshape(-1, t)
                ids_t = np.repeat(ids_a, len(combos))
            found_rows.setdefault(t, []).append(rows_t)
            found_ids.setdefault(t, []).append(ids_t)
    bits = max(1, (d - 1).bit_length())
    masks: list[int] = []
    attr_blocks: list[np.ndarray] = []
    pair_t: list[np.ndarray] = []
    pair_s: list[np.ndarray] = []
    for t in sorted(found_rows):
        R = np.concatenate(found_rows[t])
        block_ids = np.concatenate(found_ids[t])
        if t == 0:
            uniq, inv = np.zeros((1, 0), dtype=np.int64), np.zeros(len(block_ids), dtype=np.int64)
        else:
            uniq, inv = _unique_rows(R, bits)
        pair_t.append(inv + len(masks))
        pair_s.append(block_ids)
        masks.extend(sum(1 << a for a in row) for row in uniq.tolist())
        attr_blocks.append(uniq)
    attrs = np.full((len(masks), smax), d, dtype=np.int64)
    start = 0
    for U in attr_blocks:
        attrs[start:start + len(U), :U.shape[1]] = U
        start += len(U)
    return SubsetIncidence(d=d, blocks=blocks, block_attrs=block_attrs, masks=tuple(masks), attrs=attrs,
                           pair_t=np.concatenate(pair_t), pair_s=np.concatenate(pair_s))


# ---------------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------------
def _flat_blocks(W: Workload) -> list[Workload]:
    if isinstance(W, VStackWorkload):
        out: list[Workload] = []
        for b in W.blocks:
            out.extend(_flat_blocks(b))
        return out
    return [W]


def _flat_factors(B: Workload) -> list[Workload]:
    if isinstance(B, KronWorkload):
        out: list[Workload] = []
        for f in B.factors:
            out.extend(_flat_factors(f))
        return out
    return [B]


def _scalar_of(f: Workload) -> float | None:
    """The value of a 1×1 factor, or None when it cannot be read."""
    try:
        if isinstance(f, DenseWorkload):
            return float(np.asarray(f.matrix).reshape(-1)[0])
        if isinstance(f, SparseWorkload):
            return float(f.matrix.sum())
        return float(f.dense().reshape(-1)[0])
    except Exception:  # noqa: BLE001 - any failure to look at the value means "not recognised"
        return None


def _classify_factor(f: Workload) -> tuple[str, float] | None:
    """``("I", 1)`` for the identity I_n (n ≥ 2), ``("1", 1)`` for the all-ones row 1ᵀ_n (or
    [[1]]), ``("w", w)`` for a 1×1 factor [[w]] with w ≠ 1 finite and > 0 (a block weight),
    else None.

    Decided from the stored values: a DenseWorkload's array, a SparseWorkload's CSR
    structure, or (other small operators) their dense matrix.
    """
    k, n = f.shape
    if k != 1 and k != n:
        return None
    if k == 1 and n == 1:
        v = _scalar_of(f)
        if v is None or not (math.isfinite(v) and v > 0.0):
            return None
        return ("1", 1.0) if v == 1.0 else ("w", v)
    if isinstance(f, DenseWorkload):
        M = f.matrix
        if k == 1:
            return ("1", 1.0) if bool(np.all(M == 1.0)) else None
        ok = np.count_nonzero(M) == n and bool(np.all(np.diagonal(M) == 1.0))
        return ("I", 1.0) if ok else None
    if isinstance(f, SparseWorkload):
        M = f.matrix  # canonical CSR: summed duplicates, sorted indices
        if M.nnz != n:
            return None
        data = np.asarray(M.data)
        if not bool(np.all(data == 1.0)):
            return None
        if k == 1:
            return ("1", 1.0)
        ok = (np.array_equal(np.asarray(M.indptr), np.arange(n + 1))
              and np.array_equal(np.asarray(M.indices), np.arange(n)))
        return ("I", 1.0) if ok else None
    if k * n > _MAX_FACTOR_CHECK_ENTRIES:
        return None
    try:
        M = f.dense()
    except Exception:  # noqa: BLE001 - any failure to look at the values means "not recognised"
        return None
    if k == 1:
        return ("1", 1.0) if bool(np.all(M == 1.0)) else None
    return ("I", 1.0) if bool(np.array_equal(M, np.eye(n))) else None


def _prefix_products(ns: Sequence[int]) -> list[int]:
    out, p = [], 1
    for n in ns:
        p *= n
        out.append(p)
    return out


def _family_from_structure(W: Workload) -> MarginalFamily | None:
    """The fast path: a workload that describes itself by ``marginal_structure()``.

    ``(sizes, subsets, weights)`` as the duck-typed method returns them; attributes of
    size 1 are dropped from the subsets. ``None`` when the method is absent, fails, or
    describes something that does not match the workload's shape.
    """
    structure = getattr(W, "marginal_structure", None)
    if not callable(structure):
        return None
    try:
        sizes, subsets, weights = structure()
        sizes = tuple(int(n) for n in sizes)
        cache: dict[tuple[int, ...], tuple[int, ...]] = {}
        subs = []
        for S in subsets:
            key = tuple(S)
            got = cache.get(key)
            if got is None:
                got = cache[key] = tuple(int(j) for j in sorted(set(key)) if sizes[int(j)] > 1)
            subs.append(got)
        rows_of = {S: math.prod(sizes[j] for j in S) for S in cache.values()}
        family = MarginalFamily(sizes=sizes, subsets=tuple(subs),
                                rows=tuple(rows_of[S] for S in subs), weights=tuple(weights))
    except Exception:  # noqa: BLE001 - a malformed self-description is not trusted
        return None
    return family if family.shape == tuple(W.shape) else None


def marginal_family(W: Workload) -> MarginalFamily | None:  # noqa: C901 (counted allow-list)
    """Recognise a stack of (weighted) marginal blocks; ``None`` for anything else.

    Fast path: a workload with a ``marginal_structure()`` method (duck-typed, e.g.
    ``workloads.MarginalWorkload``) returning ``(sizes, subsets, weights)`` is read from
    it, without walking blocks (size-1 attributes are dropped from the subsets).

    Otherwise accepted: a :class:`VStackWorkload` (nested stacks flattened) — or a single
    block — whose blocks are Kronecker products (nested products flattened; a
    non-Kronecker block is a product of one factor) of identities ``I_n``, all-ones rows
    ``1ᵀ_n`` and 1×1 factors, recognised by their *values* (``_classify_factor``). A 1×1
    factor ``[[w]]`` (w finite, > 0) scales the block: the block weight is the product of
    the block's 1×1 factors (``[[1]]`` is weight 1 and counts as ``1ᵀ_1``, an attribute of
    size 1, as before; ``[[w]]`` with ``w ≠ 1`` is no attribute). When all blocks have the
    same factor sizes, those are the attribute sizes; otherwise the factor sizes are
    refined to a common product decomposition (``I_{ab} = I_a ⊗ I_b``,
    ``1ᵀ_{ab} = 1ᵀ_a ⊗ 1ᵀ_b``), and the workload is rejected when none exists. Never
    densifies the workload: only factors, each cached by identity.
    """
    if not isinstance(W, Workload):
        return None
    fast = _family_from_structure(W)
    if fast is not None:
        return fast
    blocks = _flat_blocks(W)
    cache: dict[int, tuple[str, int, float] | None] = {}  # id(factor) -> (kind, n, value)
    described: list[list[tuple[str, int]]] = []
    weights: list[float] = []
    for B in blocks:
        factors: Sequence[Workload] = B.factors if isinstance(B, KronWorkload) else (B,)
        if any(isinstance(f, KronWorkload) for f in factors):
            factors = _flat_factors(B)
        desc = []
        weight = 1.0
        for f in factors:
            key = id(f)
            if key in cache:
                got = cache[key]
            else:
                classified = _classify_factor(f)
                got = cache[key] = (None if classified is None
                                    else (classified[0], int(f.shape[1]), classified[1]))
            if got is None:
                return None
            if got[0] == "w":
                weight *= got[2]
            else:
                desc.append(got[:2])
        if not (math.isfinite(weight) and weight > 0.0):
            return None
        if not desc:
            desc = [("1", 1)]  # a bare scalar block: the total query over N = 1
        described.append(desc)
        weights.append(weight)

    seqs = [tuple(n for _, n in desc) for desc in described]
    if all(s == seqs[0] for s in seqs):
        sizes = seqs[0]
        subsets = [tuple(j for j, (kind, n) in enumerate(desc) if kind == "I" and n > 1)
                   for desc in described]
    else:
        N = math.prod(seqs[0])
        cuts = set()
        for s in seqs:
            if math.prod(s) != N:
                return None
            cuts.update(_prefix_products(s))
        if N > 1:
            cuts.discard(1)  # a leading factor of size 1 is no attribute
        chain = sorted(cuts)
        refined, prev = [], 1
        for c in chain:
            if c % prev:
                return None
            refined.append(c // prev)
            prev = c
        sizes = tuple(refined)
        position = {c: i for i, c in enumerate(chain)}  # refined attr i ends at prefix chain[i]
        subsets = []
        for desc in described:
            chosen: list[int] = []
            start, p = 0, 1
            for kind, n in desc:
                p *= n
                end = position[p] + 1 if n > 1 else start
                if kind == "I":
                    chosen.extend(j for j in range(start, end) if sizes[j] > 1)
                start = end
            subsets.append(tuple(chosen))
    rows = tuple(math.prod(sizes[j] for j in S) for S in subsets)
    family = MarginalFamily(sizes=tuple(int(n) for n in sizes), subsets=tuple(subsets), rows=rows,
                            weights=tuple(weights))
    if family.shape != tuple(W.shape):  # pragma: no cover - defensive
        return None
    return family


# ---------------------------------------------------------------------------------
# spectra
# ---------------------------------------------------------------------------------
def closure(family: MarginalFamily) -> list[int]:
    """Masks T with ``dim_T > 0`` contained in some block: the support of WᵀW's spectrum.

    Ordered by size, then by mask value.
    """
    return list(family.incidence.masks)


def _block_gram_terms(family: MarginalFamily) -> list[int] | list[float]:
    """Per distinct block S: ``Σ_copies w² · N / rows_S`` — exact ints for unit weights,
    else the correctly rounded value of the exact rational (float weights are exact
    binary fractions)."""
    N = family.N
    ratios = [N // math.prod(family.sizes[j] for j in b.subset) for b in family.distinct_blocks()]
    if family.unit_weights:
        return [b.multiplicity * r for b, r in zip(family.distinct_blocks(), ratios, strict=True)]
    exact: dict[tuple[int, ...], Fraction] = {}
    for S, w in zip(family.subsets, family.weights, strict=True):
        exact[S] = exact.get(S, 0) + Fraction(w) ** 2
    return [float(exact[b.subset] * r) for b, r in zip(family.distinct_blocks(), ratios, strict=True)]


def gram_eigenvalues(family: MarginalFamily) -> dict[int, int] | dict[int, float]:
    """``λ_T = Σ_{blocks S ⊇ T} w_S² N / rows_S`` for every T in the closure.

    ``WᵀW = Σ_T λ_T P_T``: the eigenvalue of WᵀW on ``range(P_T)``; 0 off the closure.
    Exact ints for a unit-weight family; for a weighted one, floats: each distinct block's
    ``Σ_copies w² · N/rows_S`` correctly rounded, summed with ``math.fsum``.
    """
    inc = family.incidence
    terms = _block_gram_terms(family)
    m = inc.num_subsets
    if family.unit_weights:
        lam = [0] * m
        for t, s in zip(inc.pair_t.tolist(), inc.pair_s.tolist(), strict=True):
            lam[t] += terms[s]
        return dict(zip(inc.masks, lam, strict=True))
    parts: list[list[float]] = [[] for _ in range(m)]
    for t, s in zip(inc.pair_t.tolist(), inc.pair_s.tolist(), strict=True):
        parts[t].append(terms[s])
    return {mk: math.fsum(p) for mk, p in zip(inc.masks, parts, strict=True)}


def trace_norm(family: MarginalFamily) -> float:
    """``||W||_tr = Σ_T dim_T √λ_T`` (floating point, no allowance; docs/math.md §5.2)."""
    lam = gram_eigenvalues(family)
    sizes = family.sizes
    return math.fsum(float(math.prod(sizes[j] - 1 for j in T)) * math.sqrt(float(lam[t]))
                     for t, T in zip(family.incidence.masks, family.incidence.subsets, strict=True))


def row_norm_coefficients(family: MarginalFamily) -> dict[tuple[int, int], float]:
    """``w_S² c_{S,T} = w_S² dim_T N / rows_S²`` for every distinct S and T ⊆ S in the closure.

    A row r of a block of subset S and weight w_S has ``r X⁺ rᵀ = w_S² Σ_{T⊆S} c_{S,T}/x_T``
    for ``X = Σ_T x_T P_T``. Keys are ``(S mask, T mask)``; ``w_S`` is the *largest* weight
    among the copies of S (the rows γ₂ sees; a copy of weight w has ``(w / w_S)²`` times
    these). Unit weights: the correctly rounded exact ratios ``dim_T N / rows_S²``.
    """
    inc = family.incidence
    N = family.N
    dims = [math.prod(family.sizes[j] - 1 for j in T) for T in inc.subsets]
    blocks = inc.blocks
    rows = [math.prod(family.sizes[j] for j in b.subset) for b in blocks]
    out: dict[tuple[int, int], float] = {}
    for t, s in zip(inc.pair_t.tolist(), inc.pair_s.tolist(), strict=True):
        c = (dims[t] * N) / (rows[s] * rows[s])
        w = blocks[s].max_weight
        out[(blocks[s].mask, inc.masks[t])] = c if w == 1.0 else (w * w) * c
    return out


# ---------------------------------------------------------------------------------
# elements of the algebra
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlgebraCoefficients:
    """``X = Σ_T x_T P_T`` over a domain with attribute sizes ``sizes``.

    ``subsets[i]`` is a sorted tuple of attributes and ``values[i]`` its coefficient.
    """

    sizes: tuple[int, ...]
    subsets: tuple[tuple[int, ...], ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.subsets) != len(self.values):
            raise PlannerError("one coefficient per subset")
        if len({tuple(T) for T in self.subsets}) != len(self.subsets):
            raise PlannerError("subsets must be distinct")

    def diagonal(self) -> float:
        """The (constant) diagonal ``Σ_T x_T dim_T / N`` of X (floating point)."""
        N = math.prod(self.sizes)
        return math.fsum(float(v) * (subset_dim(self.sizes, mask_of(T)) / N)
                         for T, v in zip(self.subsets, self.values, strict=True))

    def to_dict(self) -> dict:
        return {"subsets": [list(T) for T in self.subsets], "x": [float(v) for v in self.values]}


def projector_dense(sizes: Sequence[int], T: Iterable[int] | int) -> np.ndarray:
    """Dense ``P_T`` (N×N) — for tests on small domains only (refuses N > 4096)."""
    mask = T if isinstance(T, int) else mask_of(T)
    N = math.prod(sizes)
    if N > 4096:
        raise PlannerError(f"projector_dense is for small domains (N = {N} > 4096)")
    out = np.ones((1, 1))
    for j, n in enumerate(sizes):
        K = np.full((n, n), 1.0 / n)
        out = np.kron(out, np.eye(n) - K if mask >> j & 1 else K)
    return out


def apply_algebra(sizes: Sequence[int], coeffs: Mapping[int, float], h: np.ndarray) -> np.ndarray:
    """``(Σ_T c_T P_T) h`` for ``h`` of shape ``(N,)`` or ``(N, m)``, keys T as bit masks.

    Never forms an N×N matrix: ``h`` is reshaped to the domain tensor (C order, attribute
    0 slowest, like ``KronWorkload``) and split attribute by attribute into its mean
    (``K_j``: the axis is averaged out and later broadcast back) and its centred part
    (``C_j``), following only the branches that some T with ``c_T ≠ 0`` needs. The cost
    is the sum of the sizes of the tensors on the branch tree (≈ N·(1 + small) for
    low-order families).
    """
    sizes = tuple(int(n) for n in sizes)
    N = math.prod(sizes)
    h = np.asarray(h, dtype=np.float64)
    if h.ndim not in (1, 2) or h.shape[0] != N:
        raise PlannerError(f"expected a vector of length N={N} (or an (N, m) block), got shape {h.shape}")
    vector = h.ndim == 1
    m = 1 if vector else h.shape[1]
    items = [(int(t), float(c)) for t, c in coeffs.items()
             if c != 0.0 and subset_dim(sizes, int(t)) > 0]
    if any(t >> len(sizes) for t, _ in items):
        raise PlannerError("a subset names an attribute beyond the domain")
    if not items:
        return np.zeros(h.shape)
    d = len(sizes)

    def rec(u: np.ndarray, j: int, pos: int, its: list[tuple[int, float]]) -> np.ndarray:
        # u's axes: the C-decided attributes < j, then attributes j..d-1, then the m axis;
        # attribute j sits at axis `pos`.
        if j == d:
            return its[0][1] * u
        k_items = [it for it in its if not it[0] >> j & 1]
        c_items = [it for it in its if it[0] >> j & 1]
        mean = u.mean(axis=pos)
        # ``its`` is never empty (``items`` is not, and each branch below is followed only
        # with the items it holds), so at least one of the two parts exists
        if not k_items:
            return rec(u - np.expand_dims(mean, pos), j + 1, pos + 1, c_items)
        rk = np.expand_dims(rec(mean, j + 1, pos, k_items), pos)
        if not c_items:
            return np.broadcast_to(rk, u.shape)
        return rec(u - np.expand_dims(mean, pos), j + 1, pos + 1, c_items) + rk

    res = rec(h.reshape(*sizes, m), 0, 0, items)
    res = np.ascontiguousarray(res, dtype=np.float64).reshape(N, m)
    return res[:, 0].copy() if vector else res


def strategy_matvec(x: AlgebraCoefficients, h: np.ndarray) -> np.ndarray:
    """``A h`` for the strategy ``A = X^{1/2} = Σ_T √x_T P_T`` (symmetric, ``AᵀA = X``).

    ``||A||_{1→2}² = diag X = Σ_T x_T dim_T / N``.
    """
    if any(v < 0 or not math.isfinite(v) for v in x.values):
        raise PlannerError("strategy coefficients must be finite and non-negative")
    return apply_algebra(x.sizes, {mask_of(T): math.sqrt(v) for T, v in zip(x.subsets, x.values, strict=True)}, h)


def strategy_pinv_matvec(x: AlgebraCoefficients, y: np.ndarray) -> np.ndarray:
    """``A⁺ y = Σ_{x_T > 0} x_T^{-1/2} P_T y``; with it, ``R = W A⁺`` reconstructs ``R ỹ``."""
    if any(v < 0 or not math.isfinite(v) for v in x.values):
        raise PlannerError("strategy coefficients must be finite and non-negative")
    return apply_algebra(x.sizes, {mask_of(T): 1.0 / math.sqrt(v)
                                   for T, v in zip(x.subsets, x.values, strict=True) if v > 0}, y)
