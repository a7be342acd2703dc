"""The γ_F dual of a union of Kronecker products, reduced by the workload's symmetries.

Setting. ``W = [w_b ⊗_i W_{b,i}]_b`` over attributes of sizes ``n_i``,
``G = WᵀW = Σ_b w_b² ⊗_i G_{b,i}`` with ``G_{b,i} = W_{b,i}ᵀW_{b,i}``. The γ_F dual
(docs/math.md §4.1) is ``√k·γ_F(W) = max_{q ∈ Δ_N} tr((D_q^{1/2} G D_q^{1/2})^{1/2})``; any
``q ≥ 0`` gives the lower bound ``γ_F(W) ≥ f(q) / √(k Σq)`` (f is homogeneous of degree ½),
and ``γ₂(W) ≥ γ_F(W)``.

Symmetry. On attribute i, call values a and b *twins* when every factor Gram has
``G[a,a] = G[b,b]`` and ``G[a,c] = G[b,c]`` for all ``c ∉ {a,b}``. Twins form an equivalence
relation (if a~b and b~c then ``G[a,c] = G[b,c] = G[a,b] = G[b,a] = G[c,a] = G[c,b]``),
whose classes ``o_1 … o_m`` (sizes ``s_j``) make every ``G_{b,i}`` block-constant,
``G = Σ_{jl} α_{jl} 1_{o_j}1_{o_l}ᵀ + Σ_j β_j I_{o_j}``: it commutes with every permutation
of values inside the classes (identity and total factors: one class; a grouping: its groups
refined by the other factors). The commutant of that group is ``M_m ⊕ ℂ^{m'}`` (Schur:
the trivial isotypic part, spanned by ``u_j = 1_{o_j}/√s_j``, where G acts as the m×m matrix
``T[j,l] = (Σ G over o_j×o_l)/√(s_j s_l)``, and one standard part per class of size ≥ 2, of
dimension ``s_j − 1``, where G acts as the scalar ``β_j = G[a,a] − G[a,b]``, a ≠ b in o_j).
A weight q constant on the orbits ``o = (o_{j_1}, …, o_{j_d})`` of the product group has
``D_q`` in the same commutant, so ``M_q = D^{1/2}GD^{1/2}`` splits over *sectors* — per
attribute either the trivial part ("free") or one class's standard part ("fixed"):

    ``f(q) = Σ_s μ_s · tr((D_s^{1/2} G_s D_s^{1/2})^{1/2})``,
    ``G_s = Σ_b w_b² Π_{i fixed} β_{b,i,j_i} ⊗_{i free} T_{b,i}``,   ``μ_s = Π_{i fixed}(s_{j_i} − 1)``,

``D_s`` the weights of the orbits whose fixed attributes sit in the fixed classes, over the free
attributes' class tuples. The largest sector has ``Π_i m_i`` rows — the orbits — instead of N
(SF1 persons: 400 instead of 500,480). This is the symmetry reduction of the SDP (de Klerk,
Pasechnik & Schrijver, "Reduction of symmetric semidefinite programs using the regular
*-representation", Math. Program. 2007; Gatermann & Parrilo, "Symmetry groups, semidefinite
programs, and sums of squares", J. Pure Appl. Algebra 2004): the dual's optimum is attained at
an orbit-constant q (average an optimal q over the group; f is concave and invariant), so the
reduced maximum *is* √k·γ_F(W). The per-orbit sums of ``diag M_q^{1/2}`` (the fixed point
of ``solvers.dual_gamma_f``) are ``Σ_s μ_s [M_s^{1/2}]_{o_free, o_free}`` over the sectors whose
fixed classes contain o.

Soundness (:func:`certified_lower`): the classes are checked on exact Grams (integer
arithmetic on the factors' binary64 entries); each sector matrix is formed with an absolute
counterpart, its entrywise error is at most ``γ_c`` times it, ``c`` counting every rounding
on the way, so ``‖M̂_s − M_s‖₂ ≤ γ_c‖M^{abs}_s‖_F``; each computed eigenvalue is lowered by that
and by the eigensolver's allowance (Weyl) before its square root.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .blocks import StructureError
from .workload_blocks import AxisFactor, WorkloadBlock

#: Largest sector (orbit count Π m_i) reduced: its eigendecomposition is one dual evaluation.
MAX_SECTOR = 1536
#: Most non-zero sectors.
MAX_SECTORS = 20000
#: A plan uses the reduction only where it shrinks the dual at least this much (N / largest
#: sector): without symmetry (prefix or range factors) the reduced dual is the dense one, an
#: N×N eigendecomposition per iteration that the dense family already solves and certifies.
MIN_REDUCTION = 8.0
#: Largest Σ_s size_s³ of one dual evaluation a plan spends iterations on.
MAX_EVALUATION_WORK = 2e9
#: Σ_s size_s³ summed over all of a plan's dual iterations (deterministic; about 20 s on one
#: core of the 2-core machine of reports/, ≈ 8·10⁻¹⁰ s per unit): the iteration cap is this over
#: one evaluation's work, at most the solver's own. A solve cut short still gives a valid
#: bound and a valid strategy, only a wider gap (printed).
MAX_SOLVE_WORK = 2.5e10
#: Largest ``n²·rows`` of an explicit factor whose Gram is formed exactly.
MAX_EXACT_GRAM_WORK = 1 << 24
#: Largest attribute size for which twin classes are searched among explicit factors.
MAX_TWIN_SEARCH = 1024

#: Names of the plan's arrays for this bound: ``cert.sym.d`` and ``cert.sym.labels.<j>``.
ARRAY_PREFIX = "cert.sym."

METHOD = ("symmetry-reduced γ_F dual: orbit weights over the twin classes of every attribute, "
          "‖W D^{1/2}‖_tr = Σ_sectors μ_s tr((D_s^{1/2} G_s D_s^{1/2})^{1/2})")
#: The γ₂ bound: row weights ``p = (v_a/w_o)²`` on the rows of each row orbit a of block o
#: (``structured.symmetry_gamma_2``; stated weights ``v``, arrays ``cert.sym.v``, one per row
#: orbit, or one per block in plans that weighted whole blocks) and the orbit weights on the
#: cells (Edmonds, Nikolov & Ullman 2020, §3: ``γ₂(W) ≥ ‖D_p^{1/2} W D_q^{1/2}‖_tr / √(Σp Σq)``):
#: the γ_F reduction of the re-weighted workload ``[v_a ⊗_j W_{o,j}[a_j]]_a``.
METHOD_GAMMA_2 = ("symmetry-reduced γ₂ dual: row weights (v_a/w_o)² on each row orbit a of block o, "
                  "orbit weights on the cells, ‖D_p^{1/2} W D_q^{1/2}‖_tr / √(Σp Σq) by sectors")
#: The same bound as stated by plans whose row weights are constant on each block (``v`` one
#: weight per block); still verified.
METHOD_GAMMA_2_PER_BLOCK = ("symmetry-reduced γ₂ dual: row weights (v_o/w_o)² on each block's rows, "
                            "orbit weights on the cells, ‖D_p^{1/2} W D_q^{1/2}‖_tr / √(Σp Σq) by sectors")


def exact_gram(f: AxisFactor) -> np.ndarray | None:
    """``WᵀW`` of an explicit factor, exactly: a float array when every entry is an integer
    and the sums stay below 2⁵³ (so any summation order is exact), else Python integers
    scaled by a common power of two (object array); None when too large to form."""
    M = np.asarray(f.matrix, dtype=np.float64)
    rows, n = M.shape
    if n * n * rows > MAX_EXACT_GRAM_WORK:
        return None
    top = float(np.max(np.abs(M))) if M.size else 0.0
    if np.all(np.round(M) == M) and top * top * rows < 2.0 ** 52:
        return M.T @ M
    mant, expo = np.frexp(M)
    ints = np.array([int(x) for x in np.ldexp(mant, 53).ravel()], dtype=object).reshape(M.shape)
    shift = (expo - 53).astype(np.int64)
    base = int(np.min(shift[M != 0])) if np.any(M != 0) else 0
    scaled = np.array([v << int(s - base) if v else 0 for v, s in zip(ints.ravel(), shift.ravel(), strict=True)],
                      dtype=object).reshape(M.shape)
    return scaled.T.dot(scaled)


def _twins(G: np.ndarray, a: int, b: int) -> bool:
    if G[a, a] != G[b, b]:
        return False
    keep = np.ones(G.shape[0], dtype=bool)
    keep[[a, b]] = False
    return bool(np.all(G[a, keep] == G[b, keep]))


def twin_classes(grams: Sequence[np.ndarray], n: int) -> np.ndarray:
    """Class labels ``0 … m−1`` (numbered by first value) of the twin relation of all
    ``grams`` (exact); every value its own class when ``n`` exceeds :data:`MAX_TWIN_SEARCH`
    and there is a Gram to respect."""
    if not grams:
        return np.zeros(n, dtype=np.int64)
    if n > MAX_TWIN_SEARCH:
        return np.arange(n, dtype=np.int64)
    buckets: dict[tuple, list[int]] = {}
    for a in range(n):
        key = tuple((G[a, a], tuple(sorted(np.delete(G[a], a).tolist()))) for G in grams)
        buckets.setdefault(key, []).append(a)
    # only values with the same key can be twins; a value joins the first class of its
    # bucket whose representative is its twin
    labels = np.arange(n, dtype=np.int64)
    for members in buckets.values():
        classes: list[int] = []
        for b in members:
            for a in classes:
                if all(_twins(G, a, b) for G in grams):
                    labels[b] = labels[a]
                    break
            else:
                classes.append(b)
    _, first = np.unique(labels, return_index=True)
    order = {int(labels[i]): r for r, i in enumerate(sorted(first))}
    return np.array([order[int(x)] for x in labels], dtype=np.int64)


def classes_valid(grams: Sequence[np.ndarray], labels: np.ndarray) -> bool:
    """Every class is a set of pairwise twins under every Gram (checked against its first
    member; the relation is transitive, module docstring)."""
    labels = np.asarray(labels)
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        a = int(members[0])
        if not all(_twins(G, a, int(b)) for b in members[1:] for G in grams):
            return False
    return True


@dataclass(frozen=True)
class Sector:
    """One sector: its free attributes (trivial part), the fixed (attribute, class) pairs,
    multiplicity μ, the matrix ``G_s``, its absolute counterpart and the index of its orbits in
    the orbit tensor."""

    free: tuple[int, ...]
    fixed: tuple[tuple[int, int], ...]
    multiplicity: int
    gram: np.ndarray
    gram_abs: np.ndarray
    index: tuple


@dataclass(frozen=True)
class Reduction:
    """The sectors of W under the classes ``labels`` (one label array per attribute)."""

    sizes: tuple[int, ...]
    labels: tuple[np.ndarray, ...]
    class_sizes: tuple[np.ndarray, ...]
    sectors: tuple[Sector, ...]
    rows: int
    rounding: int  # c of γ_c, the roundings of any sector entry (module docstring)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s.size) for s in self.class_sizes)

    @property
    def orbit_sizes(self) -> np.ndarray:
        """Cells per orbit, as the orbit tensor (attribute 0 slowest)."""
        out: np.ndarray = np.ones(1)
        for s in self.class_sizes:
            out = np.kron(out, s.astype(np.float64))
        return out.reshape(self.shape)

    def evaluate(self, d: np.ndarray, rel_tol: float = 1e-13) -> tuple[float, np.ndarray, int]:
        return evaluate(self, d, rel_tol)

    @property
    def evaluation_work(self) -> float:
        """Σ_s size_s³: the eigendecompositions of one dual evaluation."""
        return float(sum(float(s.gram.shape[0]) ** 3 for s in self.sectors))

    def iteration_cap(self, cap: int) -> int:
        """The most dual iterations within :data:`MAX_SOLVE_WORK` (at least 10), at most ``cap``."""
        return max(10, min(cap, int(MAX_SOLVE_WORK // max(self.evaluation_work, 1.0))))


def attribute_grams(wblocks: Sequence[WorkloadBlock], j: int) -> list[np.ndarray] | None:
    """The exact Grams of attribute j's explicit factors (identity and total impose nothing);
    None when one is too large to form exactly."""
    out: dict[str, np.ndarray] = {}
    for wb in wblocks:
        f = wb.factor(j)
        if f.kind in ("identity", "total") or f.key in out:
            continue
        G = exact_gram(f)
        if G is None:
            return None
        out[f.key] = G
    return list(out.values())


def reduced_factor(f: AxisFactor, labels: np.ndarray, sizes: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(T, β, T_abs, β_abs)`` of one factor on one attribute (module docstring), in floating
    point; the absolute counterparts bound the rounding (``Reduction.rounding``)."""
    m = sizes.size
    root = np.sqrt(sizes.astype(np.float64))
    nontrivial = sizes >= 2
    if f.kind == "identity":
        return np.eye(m), nontrivial.astype(np.float64), np.eye(m), nontrivial.astype(np.float64)
    if f.kind == "total":
        T = np.outer(root, root)
        return T, np.zeros(m), T, np.zeros(m)
    M = np.asarray(f.matrix, dtype=np.float64)
    Gf, Gabs = M.T @ M, np.abs(M).T @ np.abs(M)  # within γ_rows·Gabs of the exact Gram
    onehot = np.zeros((labels.size, m))
    onehot[np.arange(labels.size), labels] = 1.0
    T = onehot.T @ Gf @ onehot / np.outer(root, root)
    Ta = onehot.T @ Gabs @ onehot / np.outer(root, root)
    beta, beta_a = np.zeros(m), np.zeros(m)
    for j in np.flatnonzero(nontrivial):
        a, b = np.flatnonzero(labels == j)[:2]
        beta[j] = Gf[a, a] - Gf[a, b]
        beta_a[j] = Gabs[a, a] + Gabs[a, b]
    return T, beta, Ta, beta_a


def _pieces(wblocks: Sequence[WorkloadBlock], labels: Sequence[np.ndarray],
            class_sizes: Sequence[np.ndarray]) -> tuple[list[list[str]], list[list[tuple]]]:
    """``(keys, red)``: ``keys[j][o]`` names block o's factor on attribute j, ``red[j][o]`` its
    ``(T, β, T_abs, β_abs)`` (:func:`reduced_factor`, once per distinct factor: equal factors
    give equal sector terms)."""
    d = len(labels)
    keys = [[wb.factor(j).key for wb in wblocks] for j in range(d)]
    pieces: dict[tuple[int, str], tuple] = {}
    for j in range(d):
        for wb, key in zip(wblocks, keys[j], strict=True):
            if (j, key) not in pieces:
                pieces[(j, key)] = reduced_factor(wb.factor(j), labels[j], class_sizes[j])
    return keys, [[pieces[(j, key)] for key in keys[j]] for j in range(d)]


def reduce(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int],
           labels: Sequence[np.ndarray] | None = None, *,
           min_reduction: float = MIN_REDUCTION) -> Reduction | None:
    """The sector decomposition of W (module docstring) under ``labels`` (found by
    :func:`twin_classes` when None; checked with :func:`classes_valid` when given — a
    ``ValueError`` if they are not twin classes); None when a factor is too large to check or
    the sectors exceed :data:`MAX_SECTOR` / :data:`MAX_SECTORS`."""
    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    found: list[np.ndarray] = []
    for j, n in enumerate(sizes):
        grams = attribute_grams(wblocks, j)
        if grams is None:
            return None
        if labels is None:
            found.append(twin_classes(grams, n))
        else:
            lab = np.asarray(labels[j], dtype=np.int64).reshape(-1)
            if lab.size != n or lab.min(initial=0) < 0 or not np.array_equal(
                    np.unique(lab), np.arange(int(lab.max(initial=-1)) + 1)):
                raise StructureError(f"attribute {j}: the class labels must number 0…m−1 over its {n} values")
            if not classes_valid(grams, lab):
                raise StructureError(f"attribute {j}: the stated classes are not twin classes of "
                                 "the workload's factors")
            found.append(lab)
    class_sizes = tuple(np.bincount(lab).astype(np.int64) for lab in found)
    largest = math.prod(int(s.size) for s in class_sizes)
    if largest > MAX_SECTOR or largest * min_reduction > math.prod(sizes):
        return None
    keys, red = _pieces(wblocks, found, class_sizes)
    w2 = np.array([wb.weight ** 2 for wb in wblocks])
    sectors: list[Sector] = []

    def walk(j: int, free: tuple[int, ...], fixed: tuple[tuple[int, int], ...], coef: np.ndarray,
             coef_abs: np.ndarray) -> None:
        if len(sectors) > MAX_SECTORS:
            return
        if j == d:
            sectors.append(_sector(free, fixed, coef, coef_abs, red, keys, class_sizes, d))
            return
        walk(j + 1, free + (j,), fixed, coef, coef_abs)
        for c in np.flatnonzero(class_sizes[j] >= 2):
            b = np.array([red[j][o][1][c] for o in range(len(wblocks))])
            if np.any(coef * b != 0):
                ba = np.array([red[j][o][3][c] for o in range(len(wblocks))])
                walk(j + 1, free, fixed + ((j, int(c)),), coef * b, coef_abs * ba)

    walk(0, (), (), w2, np.abs(w2))
    if len(sectors) > MAX_SECTORS or (
            min_reduction > 1.0 and sum(float(x.gram.shape[0]) ** 3 for x in sectors) > MAX_EVALUATION_WORK):
        return None
    rows = [max((wb.factor(j).rows for wb in wblocks), default=1) for j in range(d)]
    rounding = sum(r + n * n + 4 for r, n in zip(rows, sizes, strict=True)) + 2 * d + len(wblocks) + 8
    return Reduction(sizes, tuple(found), class_sizes,
                     tuple(s for s in sectors if np.any(s.gram != 0)), sum(wb.rows for wb in wblocks),
                     rounding)


def _sector(free, fixed, coef, coef_abs, red, keys, class_sizes, d) -> Sector:
    """Sector (free, fixed): ``Σ_o coef_o ⊗_{j free} T_{o,j}`` and its absolute counterpart,
    summed attribute by attribute: ``Σ_T T ⊗ (Σ_{o: T_{o,j} = T} …)`` over the distinct factors
    T of the first free attribute, recursively (one Kronecker product per distinct prefix of
    factors instead of one per block; the same terms summed in another order, within the
    rounding count of :func:`reduce`)."""
    live = [o for o, c in enumerate(coef) if c != 0]

    def nest(members: list[int], level: int) -> tuple[np.ndarray, np.ndarray]:
        if level == len(free):
            return (np.array([[math.fsum(float(coef[o]) for o in members)]]),
                    np.array([[math.fsum(float(coef_abs[o]) for o in members)]]))
        j = free[level]
        groups: dict[str, list[int]] = {}
        for o in members:
            groups.setdefault(keys[j][o], []).append(o)
        out: list[np.ndarray] = []
        for sub in groups.values():
            inner, inner_abs = nest(sub, level + 1)
            T, _, T_abs, _ = red[j][sub[0]]
            K, Ka = np.kron(T, inner), np.kron(T_abs, inner_abs)
            if out:
                out[0] += K
                out[1] += Ka
            else:
                out = [K, Ka]
        return out[0], out[1]

    size = math.prod(int(class_sizes[j].size) for j in free)
    G, Ga = nest(live, 0) if live else (np.zeros((size, size)), np.zeros((size, size)))
    mult = math.prod(int(class_sizes[j][c]) - 1 for j, c in fixed)
    where = dict(fixed)
    index = tuple(slice(None) if j not in where else where[j] for j in range(d))
    return Sector(free, fixed, mult, 0.5 * (G + G.T), Ga, index)


def evaluate(red: Reduction, d: np.ndarray, rel_tol: float = 1e-13) -> tuple[float, np.ndarray, int]:
    """``(f(q), Σ_{c∈o} [M_q^{1/2}]_cc per orbit, eigenvalues counted as zero)`` for per-cell
    weights ``d`` on the orbit tensor (floating point; the solver's evaluation). Eigenvalues below ``rel_tol`` times the
    largest of all sectors count as zero: a rank-deficient W has many, computed at rounding
    level, and their square roots (√(10⁻¹⁵λ) ≈ 3·10⁻⁸√λ each) would otherwise swamp the
    dual's last digits and stall its ascent."""
    d = np.asarray(d, dtype=np.float64).reshape(red.shape)
    total = 0.0
    diag = np.zeros(red.shape)
    pairs = []
    for s in red.sectors:
        root = np.sqrt(np.maximum(d[s.index], 0.0)).reshape(-1)
        pairs.append(np.linalg.eigh(root[:, None] * s.gram * root[None, :]))
    top = max((float(lam[-1]) for lam, _ in pairs if lam.size), default=0.0)
    zeros = 0
    for s, (lam, V) in zip(red.sectors, pairs, strict=True):
        r = np.where(lam > rel_tol * top, np.sqrt(np.maximum(lam, 0.0)), 0.0)
        zeros += s.multiplicity * int(np.sum(r == 0.0))
        total += s.multiplicity * float(np.sum(r))
        part = diag[s.index]
        diag[s.index] = part + (s.multiplicity * ((V * V) @ r)).reshape(part.shape)
    return total, diag, zeros


def certified_trace(red: Reduction, d: np.ndarray) -> float:
    """A float ≤ ``‖W D_q^{1/2}‖_tr`` for the per-cell weights ``d ≥ 0`` (module docstring)."""
    from factorize.numerics import gamma, round_down, round_up, spectral_allowance

    d = np.asarray(d, dtype=np.float64).reshape(red.shape)
    if not (np.all(np.isfinite(d)) and np.all(d >= 0)):
        raise StructureError("orbit weights must be finite and non-negative")
    g = gamma(red.rounding)
    parts = []
    for s in red.sectors:
        root = np.sqrt(d[s.index]).reshape(-1)
        M = root[:, None] * s.gram * root[None, :]
        Ma = root[:, None] * s.gram_abs * root[None, :]
        err = round_up(g * float(np.linalg.norm(Ma)), 3)
        ev = np.linalg.eigvalsh(0.5 * (M + M.T))
        spectral = float(max(abs(ev[0]), abs(ev[-1])))
        slack = round_up(err + spectral_allowance(M.shape, spectral + err), 1)
        tr = float(np.sum(np.sqrt(np.clip(ev - slack, 0.0, None))))
        parts.append(round_down(s.multiplicity * round_down(tr, M.shape[0] + 2), 1))
    return round_down(math.fsum(parts), len(parts) + 1)


def certified_lower(red: Reduction, d: np.ndarray) -> float:
    """A float ≤ γ_F(W) (and so ≤ γ₂(W)): ``f(q) / √(k Σ_c q_c)`` at the per-cell weights d."""
    from factorize.numerics import round_down, round_up

    d = np.asarray(d, dtype=np.float64).reshape(red.shape)
    mass = round_up(math.fsum((d * red.orbit_sizes).ravel().tolist()), 2)
    if not mass > 0:
        return 0.0
    tr = certified_trace(red, d)
    return round_down(tr / math.sqrt(round_up(mass * red.rows, 1)), 3)


def label_arrays(labels: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """``cert.sym.labels.<j>``: each attribute's twin classes as a plan array (what
    :func:`verify_bound` reads back)."""
    return {f"{ARRAY_PREFIX}labels.{j}": np.asarray(lab, dtype=np.float64).reshape(1, -1)
            for j, lab in enumerate(labels)}


def reweighted(wblocks: Sequence[WorkloadBlock], weights: Sequence[float]) -> list[WorkloadBlock]:
    """The blocks with their weights replaced by ``weights`` (the same factors)."""
    import copy

    out = []
    for wb, v in zip(wblocks, weights, strict=True):
        c = copy.copy(wb)
        c.weight = float(v)
        out.append(c)
    return out


def row_mass_upper(wblocks: Sequence[WorkloadBlock], weights: Sequence[float]) -> float:
    """A float ≥ ``Σ_o k_o (v_o / w_o)²``: the total row weight p of the γ₂ bound."""
    from factorize.numerics import round_up

    terms = [round_up(wb.rows * round_up(round_up(abs(v) / abs(wb.weight), 1) ** 2, 1), 1)
             for wb, v in zip(wblocks, weights, strict=True)]
    return round_up(math.fsum(terms), len(terms) + 1)


def certified_gamma_2_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int],
                            labels: Sequence[np.ndarray], weights: Sequence[float],
                            d: np.ndarray) -> float:
    """A float ≤ γ₂(W): ``‖D_p^{1/2} W D_q^{1/2}‖_tr / √(Σp Σq)`` (:data:`METHOD_GAMMA_2`) for
    row weights ``p = (v_o/w_o)²`` on block o's rows and cell weights d on the orbits."""
    if not all(math.isfinite(v) and v >= 0 for v in weights) or not any(v > 0 for v in weights):
        raise StructureError("γ₂ block weights must be finite, non-negative and not all zero")
    red = reduce(reweighted(wblocks, weights), sizes, labels, min_reduction=1.0)
    if red is None:
        raise StructureError("the stated classes leave sectors too large to re-derive the bound")
    return gamma_2_lower_at(red, wblocks, weights, d)


def gamma_2_lower_at(red: Reduction, wblocks: Sequence[WorkloadBlock], weights: Sequence[float],
                     d: np.ndarray) -> float:
    """:func:`certified_gamma_2_lower` from ``red``, the reduction of the blocks re-weighted to
    ``weights`` (made by the caller, classes checked)."""
    from factorize.numerics import round_down, round_up

    d = np.asarray(d, dtype=np.float64).reshape(red.shape)
    mass = round_up(math.fsum((d * red.orbit_sizes).ravel().tolist()), 2)
    if not mass > 0:
        return 0.0
    tr = certified_trace(red, d)
    rows = row_mass_upper(wblocks, weights)
    return round_down(tr / math.sqrt(round_up(mass * rows, 1)), 3)


def gamma_2_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int],
                  labels: Sequence[np.ndarray], weights: Sequence[float], d: np.ndarray) -> float:
    """A float ≤ γ₂(W) (:data:`METHOD_GAMMA_2`, docs/math.md §5.4c) at stated weights ``v`` —
    one per block (p constant on each block's rows, the earlier form) or one per row-orbit
    sub-block of ``symmetry_gamma_2_orbits.expand`` — and cell weights d on the orbits;
    :class:`StructureError` for any other length."""
    v = [float(x) for x in weights]
    if len(v) == len(wblocks):
        return certified_gamma_2_lower(wblocks, sizes, labels, v, d)
    from .symmetry_gamma_2_orbits import expand

    orbits = expand(wblocks, labels)
    if orbits is None or len(v) != len(orbits):
        raise StructureError(f"the γ₂ bound states {len(v)} row weights: one per workload block "
                             f"({len(wblocks)}) or one per row orbit "
                             f"({'too many' if orbits is None else len(orbits)}) expected")
    return certified_gamma_2_lower(list(orbits.blocks), sizes, labels, v, d)


def verify_bound(plan: Any, W: Any) -> float:
    """The bound ``plan.certificate['symmetry']`` states, re-derived from the plan's arrays
    ``cert.sym.labels.<j>`` and ``cert.sym.d`` (the classes re-checked exactly); ``ValueError``
    when they are malformed or the stated bound exceeds the re-derived one."""
    from .workload_blocks import workload_blocks

    stated = plan.certificate.get("symmetry")
    gamma_2_methods = (METHOD_GAMMA_2, METHOD_GAMMA_2_PER_BLOCK)
    if not (isinstance(stated, dict) and stated.get("method") in (METHOD, *gamma_2_methods)):
        raise StructureError("certificate.symmetry names another method")
    if (stated.get("method") in gamma_2_methods) != (stated.get("norm") == "gamma_2") or (
            stated.get("norm") == "gamma_2" and plan.norm != "gamma_2"):
        raise StructureError("certificate.symmetry: the γ₂ bound is stated for γ₂ plans only, "
                             "with its own method")
    sizes = tuple(plan.domain.sizes)
    arrays = plan.certificate_arrays
    labels = []
    for j, n in enumerate(sizes):
        lab = arrays.get(f"cert.sym.labels.{j}")
        if lab is None or lab.size != n or not np.all(lab == np.round(lab)):
            raise StructureError(f"cert.sym.labels.{j} must hold one integer class per value of attribute {j}")
        labels.append(lab.reshape(-1).astype(np.int64))
    wblocks = workload_blocks(W, sizes)
    if stated.get("norm") == "gamma_2":
        v = arrays.get("cert.sym.v")
        d = arrays.get("cert.sym.d")
        if v is None or d is None or (stated["method"] == METHOD_GAMMA_2_PER_BLOCK
                                      and v.size != len(wblocks)):
            raise StructureError("cert.sym.v must hold the row weights (one per workload block, or "
                                 "per row orbit for METHOD_GAMMA_2), cert.sym.d the orbit weights")
        lower = gamma_2_lower(wblocks, sizes, labels, v.reshape(-1).tolist(), d)
        value = stated.get("lower")
        if not (isinstance(value, float) and value <= lower * (1.0 + 1e-12)):
            raise StructureError(f"certificate.symmetry.lower {value!r} exceeds the re-derived {lower:.10g}")
        return lower
    red = reduce(wblocks, sizes, labels, min_reduction=1.0)
    if red is None:
        raise StructureError("the stated classes leave sectors too large to re-derive the bound")
    d = arrays.get("cert.sym.d")
    if d is None or d.size != math.prod(red.shape):
        raise StructureError(f"cert.sym.d must hold one weight per orbit ({math.prod(red.shape)})")
    lower = certified_lower(red, d.reshape(red.shape))
    value = stated.get("lower")
    if not (isinstance(value, float) and value <= lower * (1.0 + 1e-12)):
        raise StructureError(f"certificate.symmetry.lower {value!r} exceeds the re-derived {lower:.10g}")
    return lower
