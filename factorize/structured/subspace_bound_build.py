"""Choosing the witness of ``structured.subspace_bound`` for a plan (the verifier imports that
module, never this one).

* **Atoms** (:func:`split_for`): on each attribute, the projectors onto the row spaces of the
  attribute's distinct factors (column-weighted) that are not the identity — an attribute summed
  out (``1ᵀ``), a grouping — are diagonalised together when they commute (checked), giving
  *levels*: their joint eigenspaces. Every factor's projector is then 0 or the identity on a
  level, so any orthonormal basis of a level keeps the witness exact (``O = 0``); within a level
  the basis diagonalises ``Σ_f |X_f| / tr|X_f|`` (one atom per basis vector), which spreads
  the factors' ``t`` apart (a Schur-convexity argument: for one factor it maximises
  ``Σ_a √(α² + t(a)²)``). Where the projectors do not commute the attribute is one atom.
* **Column weights**: per attribute uniform, and each distinct explicit factor's own optimal
  dual weights (its γ_F or γ₂ witness from ``planner.solve``), with pairwise mixtures; the best
  by coordinate ascent over the attributes (two sweeps).
* **γ₂ row weights**: each factor's own γ₂ witness p (identity: ``r = s``; ``1ᵀ``: 1), and the
  block scales σ_o² = π_o by the fixed point ``π_o ← π_o · 2∂_o g / (g ρ_o)`` of the concave
  ``g(π) = Σ_S (Σ_o π_o τ_{o,S}²)^{1/2}`` on ``Σ_o π_o ρ_o = 1`` (ρ_o the block's row mass).
* Past ``subspace_bound.MAX_COMPONENTS`` entries, adjacent atoms of a level are merged (the
  ``t`` of merged atoms add; the bound stays valid and loosens).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import subspace_bound as sb
from .workload_blocks import AxisFactor, WorkloadBlock

#: Coordinate-ascent sweeps over the attributes' column-weight candidates.
SWEEPS = 2
#: Fixed-point iterations of the γ₂ block masses.
MASS_ITERS = 80
#: A projector pair commutes when ‖PQ − QP‖_F is below this times n.
COMMUTE_TOL = 1e-9
#: Most bound evaluations of the search.
MAX_EVALUATIONS = 40


#: Entries below this times the largest are set to 0 in the weights and bases the plan stores
#: (any values give a valid bound; this keeps every product far from underflow).
FLUSH = 2.0 ** -100


def _flushed(x: np.ndarray) -> np.ndarray:
    big = float(np.max(np.abs(x))) if x.size else 0.0
    out: np.ndarray = np.where(np.abs(x) < FLUSH * big, 0.0, x)
    return out


def split_for(factors: Sequence[AxisFactor], s: np.ndarray) -> tuple[sb.AxisSplit, np.ndarray]:
    """``(split, level of each atom)`` of one attribute (module docstring)."""
    s = _flushed(np.asarray(s, dtype=np.float64))
    n = s.size
    eye = np.eye(n)
    projs, absx = [], []
    for f in factors:
        X = f.dense() * s[None, :]
        Z = sb.polar_factor(X)
        A = Z.T @ X
        A = 0.5 * (A + A.T)
        tr = float(np.trace(A))
        if tr > 0:
            absx.append(A / tr)
        P = Z.T @ Z
        if float(np.linalg.norm(P - eye)) > 1e-9 * n:
            projs.append(0.5 * (P + P.T))
    for a in range(len(projs)):
        for b in range(a):
            if float(np.linalg.norm(projs[a] @ projs[b] - projs[b] @ projs[a])) > COMMUTE_TOL * n:
                return sb.AxisSplit(s.copy(), eye, np.zeros(n, dtype=np.int64)), np.zeros(1, dtype=np.int64)
    if projs:
        H = sum(2.0 ** -(i + 1) * P for i, P in enumerate(projs))
        lam, V = np.linalg.eigh(H)
        keys = np.round(lam * 2.0 ** len(projs)).astype(np.int64)
    else:
        V, keys = eye, np.zeros(n, dtype=np.int64)
    K = sum(absx) if absx else eye
    cols, level = [], []
    for lv, key in enumerate(np.unique(keys)):
        VL = V[:, keys == key]
        w, U = np.linalg.eigh(VL.T @ K @ VL)
        cols.append(VL @ U[:, ::-1])
        level.extend([lv] * VL.shape[1])
    basis = _flushed(np.hstack(cols))
    return sb.AxisSplit(s.copy(), basis, np.arange(n, dtype=np.int64)), np.asarray(level, dtype=np.int64)


def merged(split: sb.AxisSplit, level: np.ndarray) -> tuple[sb.AxisSplit, np.ndarray]:
    """The split with adjacent atoms of each level merged in pairs (and the merged atoms' levels)."""
    atom_level = level
    new_id = np.zeros(atom_level.size, dtype=np.int64)
    new_level = []
    at = 0
    for lv in np.unique(atom_level):
        members = np.flatnonzero(atom_level == lv)
        for i in range(0, members.size, 2):
            new_id[members[i:i + 2]] = at
            new_level.append(lv)
            at += 1
    return (sb.AxisSplit(split.s, split.basis, new_id[split.atoms]), np.asarray(new_level, dtype=np.int64))


def _candidates(wblocks: Sequence[WorkloadBlock], j: int, n: int, witnesses: dict[str, dict[str, np.ndarray]]
                ) -> list[np.ndarray]:
    """Column weights (square roots, unit sum of squares) to try on attribute j."""
    out = [np.full(n, 1.0 / math.sqrt(n))]
    qs = [witnesses[f.key]["q"] for f in sb.distinct_factors(wblocks, j)
          if f.kind == "matrix" and f.key in witnesses and "q" in witnesses[f.key]]
    qs = [q / float(np.sum(q)) for q in qs if q.size == n and float(np.sum(q)) > 0]
    for q in qs:
        out.append(np.sqrt(q))
    for a in range(len(qs)):
        for b in range(a):
            out.append(np.sqrt(0.5 * (qs[a] + qs[b])))
        half = np.sqrt(qs[a])
        out.append(np.sqrt(half / float(np.sum(half))))
        out.append(np.sqrt(0.5 * (qs[a] + 1.0 / n)))
    return out


def _row_weights(wblocks: Sequence[WorkloadBlock], j: int, s: np.ndarray,
                 witnesses: dict[str, dict[str, np.ndarray]]) -> np.ndarray:
    """γ₂ row weights of attribute j's distinct factors (``cert.sub.r.<j>``)."""
    parts = []
    for f in sb.distinct_factors(wblocks, j):
        if f.kind == "identity":
            parts.append(s.copy())
        elif f.kind == "total":
            parts.append(np.ones(1))
        else:
            p = witnesses.get(f.key, {}).get("p")
            if p is None or p.size != f.rows or not float(np.sum(p)) > 0:
                parts.append(np.full(f.rows, 1.0 / math.sqrt(f.rows)))
            else:
                parts.append(np.sqrt(np.clip(p, 0.0, None) / float(np.sum(p))))
    return np.concatenate(parts)


def _block_masses(wblocks: Sequence[WorkloadBlock], splits: Sequence[sb.AxisSplit],
                  row_weights: Sequence[np.ndarray]) -> list[float]:
    """σ_o of the γ₂ bound (module docstring)."""
    basis_sq = [sb.spectral_square_upper(sp.basis) for sp in splits]
    terms = []
    for wb in wblocks:
        row = []
        for j, sp in enumerate(splits):
            f = wb.factor(j)
            r = np.asarray(row_weights[j])[sb.row_weight_slices(wblocks, j)[f.key]]
            row.append(sb.factor_terms(f.dense(), r, sp, basis_sq[j]))
        terms.append(row)
    coef = [abs(float(wb.weight)) for wb in wblocks]
    comp = sb.block_components(wblocks, splits, terms, coef)
    rho = np.array([math.prod(t.row_mass for t in row) for row in terms])
    B = len(wblocks)
    pi = 1.0 / (B * rho)
    idx = np.concatenate(comp.index)
    _, inverse = np.unique(idx, return_inverse=True)
    bounds = np.cumsum([0] + [t.size for t in comp.tau])
    sq = [t * t for t in comp.tau]
    for _ in range(MASS_ITERS):
        vals = np.concatenate([pi[o] * sq[o] for o in range(B)])
        sums = np.bincount(inverse, weights=vals)
        root = np.sqrt(np.maximum(sums, 1e-300))
        g = float(np.sum(np.sqrt(sums)))
        if not g > 0:
            break
        grad = np.array([0.5 * float(np.sum(sq[o] / root[inverse[bounds[o]:bounds[o + 1]]])) for o in range(B)])
        pi = pi * 2.0 * grad / (g * rho)
        pi = pi / float(np.sum(pi * rho))
    return [float(math.sqrt(max(x, 0.0))) for x in pi]


def _gamma_2(wblocks: Sequence[WorkloadBlock], sizes: tuple[int, ...], splits: list[sb.AxisSplit],
             witnesses: dict[str, dict[str, np.ndarray]]
             ) -> tuple[float, list[np.ndarray], list[float]]:
    """``(lower, row weights, block scales)`` of the γ₂ bound on given splits: the better of the
    factors' own row weights and uniform ones, each with its fixed-point block masses (and
    uniform rows also with σ = 1, where the bound is γ_F's)."""
    best: tuple[float, list[np.ndarray], list[float]] = (-1.0, [], [])
    for own in (True, False):
        rw = [_row_weights(wblocks, j, sp.s, witnesses if own else {}) for j, sp in enumerate(splits)]
        if not own:  # every row weighted 1: the γ_F witness
            rw = [np.ones_like(r) for r in rw]
        tries = [_block_masses(wblocks, splits, rw)] + ([] if own else [[1.0] * len(wblocks)])
        for sig in tries:
            low = sb.certified_lower(wblocks, sizes, splits, rw, sig)
            if low > best[0]:
                best = (low, rw, sig)
    return best


Evaluated = tuple[float, list[sb.AxisSplit]]


def _run(wblocks: Sequence[WorkloadBlock], sizes: tuple[int, ...],
         pairs: list[tuple[sb.AxisSplit, np.ndarray]]) -> Evaluated | None:
    """One choice's γ_F bound, merging atoms while the components exceed the limit; None when
    even one atom per level is too many."""
    splits = [p[0] for p in pairs]
    levels = [p[1] for p in pairs]
    while True:
        try:
            return sb.certified_lower(wblocks, sizes, splits), splits
        except sb.TooManyComponents:
            j = int(np.argmax([sp.count for sp in splits]))
            if splits[j].count == len(np.unique(levels[j])):
                return None
            splits[j], levels[j] = merged(splits[j], levels[j])


def search(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int], norm: str,
           witnesses: dict[str, dict[str, np.ndarray]]) -> tuple[float, dict[str, np.ndarray]] | None:
    """``(certified lower bound, plan arrays)`` of the best witness found (module docstring), or
    None where the bound does not apply (one block, an attribute above ``MAX_ATTRIBUTE``). The
    column weights are searched on the γ_F bound; a γ₂ bound then adds its row weights."""
    dims = tuple(int(n) for n in sizes)
    if len(wblocks) < 2 or any(n > sb.MAX_ATTRIBUTE for n in dims):
        return None
    cands = [_candidates(wblocks, j, n, witnesses) for j, n in enumerate(dims)]
    facs = [sb.distinct_factors(wblocks, j) for j in range(len(dims))]
    cache: dict[tuple[int, int], tuple[sb.AxisSplit, np.ndarray]] = {}

    def evaluate(ch: list[int]) -> Evaluated | None:
        for j, c in enumerate(ch):
            if (j, c) not in cache:
                cache[(j, c)] = split_for(facs[j], cands[j][c])
        return _run(wblocks, dims, [cache[(j, c)] for j, c in enumerate(ch)])

    choice = [0] * len(dims)
    best = evaluate(choice)
    trials = [(j, c) for j in range(len(dims)) for c in range(1, len(cands[j]))]
    evaluations = 1
    for _ in range(SWEEPS):
        improved = False
        for j, c in trials:
            if c == choice[j] or evaluations >= MAX_EVALUATIONS:
                continue
            trial = choice[:j] + [c] + choice[j + 1:]
            evaluations += 1
            got = evaluate(trial)
            if got is not None and (best is None or got[0] > best[0]):
                best, choice, improved = got, trial, True
        if not improved:
            break
    if best is None or not best[0] > 0:
        return None
    low, splits = best
    arrays = sb.label_arrays(splits)
    if norm == "gamma_2":
        low, rw, sig = _gamma_2(wblocks, dims, splits, witnesses)
        for j, r in enumerate(rw):
            arrays[f"cert.sub.r.{j}"] = np.asarray(r, dtype=np.float64).reshape(1, -1)
        arrays["cert.sub.sigma"] = np.asarray(sig, dtype=np.float64).reshape(1, -1)
    return low, arrays
