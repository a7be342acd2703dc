"""The algebra of attribute subsets: marginal workloads without the N columns (MATH.md §2.3).

A *marginal family* over a product domain with attribute sizes ``n_0, …, n_{d−1}``
(``N = Π n_j`` cells) is a stack of blocks, one per attribute subset ``S``:

    B_S = ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}      (rows_S = Π_{j∈S} n_j rows),

the contingency table of the attributes in ``S`` (``S = ∅`` is the total query). Any
family of subsets is allowed, repeated subsets included.

The algebra. For attribute j let ``K_j = J/n_j`` (J all ones) and ``C_j = I − K_j``; both
are orthogonal projectors, of rank 1 and ``n_j − 1``. For a subset T,

    P_T = ⊗_{j∈T} C_j ⊗_{j∉T} K_j

is an orthogonal projector of rank ``dim_T = Π_{j∈T}(n_j − 1)`` (0 as soon as T holds an
attribute of size 1); the ``P_T`` are mutually orthogonal, sum to ``I_N``, and span the
commutant of the group that permutes the values of every attribute. Its diagonal is
constant, ``diag P_T = dim_T / N``. Since ``I = C + K`` and ``J = n K``,

    B_SᵀB_S = (N / rows_S) · Σ_{T⊆S} P_T,   so   WᵀW = Σ_T λ_T P_T,
    λ_T = Σ_{blocks S ⊇ T} Π_{j∉S} n_j = Σ_{S⊇T} N / rows_S,

and ``||W||_tr = Σ_T dim_T √λ_T``. For a row ``w`` of block S (``e_a`` on S, ones off S),

    w P_T wᵀ = [T ⊆ S] · Π_{j∈T}(1 − 1/n_j) · Π_{j∈S∖T}(1/n_j) · Π_{j∉S} n_j
             = [T ⊆ S] · dim_T · N / rows_S²  =: c_{S,T},

the same for every row of the block (attribute by attribute: ``e_aᵀC e_a = 1 − 1/n``,
``e_aᵀK e_a = 1/n``, ``1ᵀC 1 = 0``, ``1ᵀK 1 = n``). These are the numbers the marginal
planner (``factorize.marginal_planner``) optimises over; nothing here ever forms an
N-column matrix except the small-domain helpers ``projector_dense`` (for tests).

Subsets are handled internally as bit masks (bit j ⇔ attribute j) and exposed as sorted
tuples. Counts (``N``, ``rows_S``, ``dim_T``, ``λ_T``) are exact Python ints.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

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
    "MarginalFamily",
    "apply_algebra",
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

#: Most (block, sub-subset) pairs the algebra enumerates (Σ_S 2^{|S|}); beyond, ValueError.
MAX_ALGEBRA_TERMS: int = 4_000_000

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


# ---------------------------------------------------------------------------------
# the family
# ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class MarginalFamily:
    """A stack of marginal blocks over one product domain.

    ``sizes`` are the attribute sizes ``n_j``; ``subsets[b]`` the sorted attributes of
    block b (in row order of the workload); ``rows[b] = Π_{j∈S_b} n_j``. The detector
    puts attributes of size 1 in no subset (``I_1 = 1ᵀ_1``), so equal matrices give
    equal families.
    """

    sizes: tuple[int, ...]
    subsets: tuple[tuple[int, ...], ...]
    rows: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1
                                 for n in self.sizes):
            raise ValueError(f"sizes must be a non-empty tuple of positive ints, got {self.sizes}")
        if not self.subsets or len(self.subsets) != len(self.rows):
            raise ValueError("a marginal family needs at least one block, and one row count per block")
        d = len(self.sizes)
        for S, r in zip(self.subsets, self.rows):
            if tuple(sorted(set(S))) != tuple(S) or any(not 0 <= j < d for j in S):
                raise ValueError(f"subset {S} is not a sorted set of attribute indices < {d}")
            if r != math.prod(self.sizes[j] for j in S):
                raise ValueError(f"block {S} has {r} rows, expected Π_(j∈S) n_j")

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
    def masks(self) -> tuple[int, ...]:
        """Bit mask of each block's subset, in block order."""
        return tuple(mask_of(S) for S in self.subsets)

    def unique(self) -> list[tuple[int, int]]:
        """Distinct subsets as ``(mask, multiplicity)``, in order of first occurrence."""
        counts: dict[int, int] = {}
        for m in self.masks:
            counts[m] = counts.get(m, 0) + 1
        return list(counts.items())

    @functools.cached_property
    def _nontrivial(self) -> int:
        return mask_of(j for j, n in enumerate(self.sizes) if n > 1)

    def effective_mask(self, mask: int) -> int:
        """``mask`` without attributes of size 1 (they carry no P_T of positive rank)."""
        return mask & self._nontrivial


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


def _classify_factor(f: Workload) -> str | None:
    """'I' for the identity I_n (n ≥ 2), '1' for the all-ones row 1ᵀ_n (or [[1]]), else None.

    Decided from the stored values: a DenseWorkload's array, a SparseWorkload's CSR
    structure, or (other small operators) their dense matrix.
    """
    k, n = f.shape
    if k != 1 and k != n:
        return None
    if isinstance(f, DenseWorkload):
        M = f.matrix
        if k == 1:
            return "1" if bool(np.all(M == 1.0)) else None
        return "I" if (np.count_nonzero(M) == n and bool(np.all(np.diagonal(M) == 1.0))) else None
    if isinstance(f, SparseWorkload):
        M = f.matrix  # canonical CSR: summed duplicates, sorted indices
        if M.nnz != n:
            return None
        data = np.asarray(M.data)
        if not bool(np.all(data == 1.0)):
            return None
        if k == 1:
            return "1"
        ok = (np.array_equal(np.asarray(M.indptr), np.arange(n + 1))
              and np.array_equal(np.asarray(M.indices), np.arange(n)))
        return "I" if ok else None
    if k * n > _MAX_FACTOR_CHECK_ENTRIES:
        return None
    try:
        M = f.dense()
    except Exception:  # noqa: BLE001 - any failure to look at the values means "not recognised"
        return None
    if sp.issparse(M):  # pragma: no cover - dense() returns ndarrays
        M = M.toarray()
    if k == 1:
        return "1" if bool(np.all(M == 1.0)) else None
    return "I" if bool(np.array_equal(M, np.eye(n))) else None


def _prefix_products(ns: Sequence[int]) -> list[int]:
    out, p = [], 1
    for n in ns:
        p *= n
        out.append(p)
    return out


def marginal_family(W: Workload) -> MarginalFamily | None:
    """Recognise a stack of marginal blocks; ``None`` for anything else.

    Accepted: a :class:`VStackWorkload` (nested stacks flattened) — or a single block —
    whose blocks are Kronecker products (nested products flattened; a non-Kronecker block
    is a product of one factor) of identities ``I_n`` and all-ones rows ``1ᵀ_n``,
    recognised by their *values* (``_classify_factor``; a 1×1 ``[[1]]`` counts as
    ``1ᵀ_1``). When all blocks have the same factor sizes, those are the attribute sizes;
    otherwise the factor sizes are refined to a common product decomposition
    (``I_{ab} = I_a ⊗ I_b``, ``1ᵀ_{ab} = 1ᵀ_a ⊗ 1ᵀ_b``), and the workload is rejected when
    none exists. Never densifies the workload: only factors, each cached by identity.
    """
    if not isinstance(W, Workload):
        return None
    blocks = _flat_blocks(W)
    cache: dict[int, tuple[str, int] | None] = {}  # id(factor) -> (kind, n); W keeps them alive
    described: list[list[tuple[str, int]]] = []
    for B in blocks:
        factors = B.factors if isinstance(B, KronWorkload) else (B,)
        if any(isinstance(f, KronWorkload) for f in factors):
            factors = _flat_factors(B)
        desc = []
        for f in factors:
            key = id(f)
            got = cache.get(key, False)
            if got is False:
                kind = _classify_factor(f)
                got = cache[key] = None if kind is None else (kind, int(f.shape[1]))
            if got is None:
                return None
            desc.append(got)
        described.append(desc)

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
    family = MarginalFamily(sizes=tuple(int(n) for n in sizes), subsets=tuple(subsets), rows=rows)
    if family.shape != tuple(W.shape):  # pragma: no cover - defensive
        return None
    return family


# ---------------------------------------------------------------------------------
# spectra
# ---------------------------------------------------------------------------------
def _check_terms(family: MarginalFamily) -> None:
    total = sum(1 << family.effective_mask(m).bit_count() for m, _ in family.unique())
    if total > MAX_ALGEBRA_TERMS:
        raise ValueError(
            f"the subset algebra of this family has {total} (block, subset) pairs, above "
            f"MAX_ALGEBRA_TERMS={MAX_ALGEBRA_TERMS}")


def closure(family: MarginalFamily) -> list[int]:
    """Masks T with ``dim_T > 0`` contained in some block: the support of WᵀW's spectrum.

    Ordered by size, then by mask value.
    """
    _check_terms(family)
    seen: set[int] = set()
    for m, _ in family.unique():
        seen.update(submasks(family.effective_mask(m)))
    return sorted(seen, key=lambda t: (t.bit_count(), t))


def gram_eigenvalues(family: MarginalFamily) -> dict[int, int]:
    """``λ_T = Σ_{blocks S ⊇ T} N / rows_S`` (exact ints) for every T in the closure.

    ``WᵀW = Σ_T λ_T P_T``: the eigenvalue of WᵀW on ``range(P_T)``; 0 off the closure.
    """
    _check_terms(family)
    N = family.N
    lam: dict[int, int] = {}
    for m, mult in family.unique():
        weight = mult * (N // math.prod(family.sizes[j] for j in subset_of(m)))
        for t in submasks(family.effective_mask(m)):
            lam[t] = lam.get(t, 0) + weight
    return lam


def trace_norm(family: MarginalFamily) -> float:
    """``||W||_tr = Σ_T dim_T √λ_T`` (floating point, no allowance; MATH.md §2.3)."""
    lam = gram_eigenvalues(family)
    return math.fsum(float(subset_dim(family.sizes, t)) * math.sqrt(float(v)) for t, v in lam.items())


def row_norm_coefficients(family: MarginalFamily) -> dict[tuple[int, int], float]:
    """``c_{S,T} = dim_T · N / rows_S²`` for every distinct block S and T ⊆ S in the closure.

    Every row w of block S has ``w X⁺ wᵀ = Σ_{T⊆S} c_{S,T} / x_T`` for ``X = Σ_T x_T P_T``.
    Keys are ``(S mask, T mask)``; values are the correctly rounded exact ratios.
    """
    _check_terms(family)
    N = family.N
    out: dict[tuple[int, int], float] = {}
    for m, _ in family.unique():
        rows = math.prod(family.sizes[j] for j in subset_of(m))
        for t in submasks(family.effective_mask(m)):
            out[(m, t)] = (subset_dim(family.sizes, t) * N) / (rows * rows)
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
            raise ValueError("one coefficient per subset")
        if len({tuple(T) for T in self.subsets}) != len(self.subsets):
            raise ValueError("subsets must be distinct")

    def by_mask(self) -> dict[int, float]:
        return {mask_of(T): float(v) for T, v in zip(self.subsets, self.values)}

    def diagonal(self) -> float:
        """The (constant) diagonal ``Σ_T x_T dim_T / N`` of X (floating point)."""
        N = math.prod(self.sizes)
        return math.fsum(float(v) * (subset_dim(self.sizes, mask_of(T)) / N)
                         for T, v in zip(self.subsets, self.values))

    def to_dict(self) -> dict:
        return {"subsets": [list(T) for T in self.subsets], "x": [float(v) for v in self.values]}


def projector_dense(sizes: Sequence[int], T: Iterable[int] | int) -> np.ndarray:
    """Dense ``P_T`` (N×N) — for tests on small domains only (refuses N > 4096)."""
    mask = T if isinstance(T, int) else mask_of(T)
    N = math.prod(sizes)
    if N > 4096:
        raise ValueError(f"projector_dense is for small domains (N = {N} > 4096)")
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
        raise ValueError(f"expected a vector of length N={N} (or an (N, m) block), got shape {h.shape}")
    vector = h.ndim == 1
    m = 1 if vector else h.shape[1]
    items = [(int(t), float(c)) for t, c in coeffs.items()
             if c != 0.0 and subset_dim(sizes, int(t)) > 0]
    if any(t >> len(sizes) for t, _ in items):
        raise ValueError("a subset names an attribute beyond the domain")
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
        out = None
        if c_items:
            out = rec(u - np.expand_dims(mean, pos), j + 1, pos + 1, c_items)
        if k_items:
            rk = np.expand_dims(rec(mean, j + 1, pos, k_items), pos)
            out = np.broadcast_to(rk, u.shape) if out is None else out + rk
        return out

    res = rec(h.reshape(*sizes, m), 0, 0, items)
    res = np.ascontiguousarray(res, dtype=np.float64).reshape(N, m)
    return res[:, 0].copy() if vector else res


def strategy_matvec(x: AlgebraCoefficients, h: np.ndarray) -> np.ndarray:
    """``A h`` for the strategy ``A = X^{1/2} = Σ_T √x_T P_T`` (symmetric, ``AᵀA = X``).

    ``||A||_{1→2}² = diag X = Σ_T x_T dim_T / N``.
    """
    if any(v < 0 or not math.isfinite(v) for v in x.values):
        raise ValueError("strategy coefficients must be finite and non-negative")
    return apply_algebra(x.sizes, {mask_of(T): math.sqrt(v) for T, v in zip(x.subsets, x.values)}, h)


def strategy_pinv_matvec(x: AlgebraCoefficients, y: np.ndarray) -> np.ndarray:
    """``A⁺ y = Σ_{x_T > 0} x_T^{-1/2} P_T y``; with it, ``R = W A⁺`` reconstructs ``R ỹ``."""
    if any(v < 0 or not math.isfinite(v) for v in x.values):
        raise ValueError("strategy coefficients must be finite and non-negative")
    return apply_algebra(x.sizes, {mask_of(T): 1.0 / math.sqrt(v)
                                   for T, v in zip(x.subsets, x.values) if v > 0}, y)
