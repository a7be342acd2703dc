"""The γ₂ dual of a union of Kronecker products, reduced by the workload's symmetries on rows
and columns.

The γ₂ dual (Edmonds, Nikolov & Ullman, "The power of factorization mechanisms in local and
central differential privacy", STOC 2020, §3; docs/math.md §4.2) is

    ``γ₂(W) = max_{p ∈ Δ_rows, q ∈ Δ_cells} ‖D_p^{1/2} W D_q^{1/2}‖_tr``,

a lower bound at every ``p, q ≥ 0`` once divided by ``√(Σp Σq)``. The twin-class permutations
of ``structured.symmetry`` act on the cells; on the rows of a factor ``W_{o,i}`` they act by
permutation whenever the factor's row set is closed under them (``W P_π = Π_π W``): an
identity's rows are permuted inside each class, a total row and a grouping's rows are fixed,
an age factor's single-year rows are permuted inside their five-year class. The γ₂ SDP dual is
invariant under the group acting on rows and columns together, so averaging an optimal (p, q)
over the group keeps it optimal: p constant on the *row orbits*, q on the cell orbits
(de Klerk, Pasechnik & Schrijver, Math. Program. 109 (2007); Gatermann & Parrilo, JPAA 192
(2004)).

A row orbit of block o is a tuple of per-factor row orbits ``a = (r_1 … r_d)``; its rows are the
Kronecker block ``w_o ⊗_i W_{o,i}[r_i]`` (the factors' rows restricted to the orbit), whose
Grams are again invariant under the class permutations. So ``D_p^{1/2} W`` with p constant on
row orbits is the union of these *sub-blocks* re-weighted to ``v_a = w_o √p_a``, and the
sector reduction of ``structured.symmetry`` evaluates it:

    ``γ₂(W) ≥ Σ_s μ_s tr((D_s^{1/2} G_s(p) D_s^{1/2})^{1/2}) / √(Σ_a |a| p_a · Σ_c q_c)``,
    ``G_s(p) = Σ_a v_a² Π_{i fixed} β_{a,i,j_i} ⊗_{i free} T_{a,i}``,

|a| the rows of sub-block a. A factor whose row set is not closed under the class permutations
keeps all its rows in one orbit (p constant on them: still a valid bound, only possibly a
weaker one). The orbits are ``structured.symmetry_gamma_2_orbits``; the certified bound and
its verification ``structured.symmetry.gamma_2_lower`` (which still reads ``v`` with one weight
per *block*, the earlier form of the same bound).

Every per-attribute piece ``T_{a,i}`` has small rank (one for an identity class, a total row,
a grouping row), so the solver (``solvers.dual_gamma_2_symmetric``) keeps each sector as
``G_s(p) = C_s diag(p) C_sᵀ`` over columns ``√(w_o² Π β) ⊗_{free} B_{a,i}``, ``T = B Bᵀ``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .symmetry import Reduction, reduce, reduced_factor, reweighted
from .symmetry_gamma_2_orbits import RowOrbits

#: Largest Σ_s size_s² · columns_s of one solver evaluation (forming the sector matrices).
MAX_COLUMN_WORK = 5e9


def reweighted_reduction(orbits: RowOrbits, sizes: Sequence[int], labels: Sequence[np.ndarray],
                         weights: Sequence[float]) -> Reduction | None:
    """The sector reduction of ``D_p^{1/2} W``: the sub-blocks at weights ``v``."""
    return reduce(reweighted(list(orbits.blocks), weights), sizes, labels, min_reduction=1.0)


@dataclass(frozen=True)
class SectorColumns:
    """One sector for the solver: the orbit index and multiplicity of ``structured.symmetry``'s
    sector, columns C (size × c) with ``G_s(p) = C diag(p[owner]) Cᵀ`` and each column's
    sub-block ``owner``."""

    index: tuple
    multiplicity: int
    columns: np.ndarray
    owner: np.ndarray


@dataclass(frozen=True)
class Gamma2Problem:
    """What the γ₂ solver needs: the sectors as columns, the cells per orbit (orbit tensor),
    the rows per sub-block, and the orbit tensor's shape."""

    sectors: tuple[SectorColumns, ...]
    orbit_sizes: np.ndarray
    rows: np.ndarray
    shape: tuple[int, ...]

    @property
    def evaluation_work(self) -> float:
        """Σ_s size_s²·columns_s + size_s³: one evaluation."""
        return float(sum(s.columns.shape[0] ** 2 * (s.columns.shape[1] + s.columns.shape[0])
                         for s in self.sectors))


def _low_rank(T: np.ndarray) -> np.ndarray:
    """B with ``B Bᵀ = T`` over T's eigenvalues above 10⁻¹³ of its largest (T symmetric PSD)."""
    lam, U = np.linalg.eigh(0.5 * (T + T.T))
    if not lam.size or lam[-1] <= 0:
        return np.zeros((T.shape[0], 0))
    keep = lam > 1e-13 * lam[-1]
    return U[:, keep] * np.sqrt(lam[keep])[None, :]


def problem(orbits: RowOrbits, red: Reduction) -> Gamma2Problem | None:
    """The solver's form (:class:`Gamma2Problem`) of the sub-blocks over the sectors of
    ``red`` (the reduction of W or of any positive re-weighting of its sub-blocks: the same
    sectors); None beyond :data:`MAX_COLUMN_WORK`. A sector's columns are formed for all its
    sub-blocks at once, attribute by attribute (``C[:, a] = √coef_a ⊗_j B_{a,j}``), where
    every piece has rank one (identity classes, totals, groupings); one sub-block at a time
    otherwise."""
    d = len(red.sizes)
    n = len(orbits)
    pieces: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    for a in range(n):
        for j in range(d):
            f = orbits.blocks[a].factor(j)
            if (j, f.key) not in pieces:
                T, beta, _, _ = reduced_factor(f, red.labels[j], red.class_sizes[j])
                pieces[(j, f.key)] = (_low_rank(T), beta)
    per = [[pieces[(j, orbits.blocks[a].factor(j).key)] for a in range(n)] for j in range(d)]
    w2 = np.array([b.weight ** 2 for b in orbits.blocks])
    sectors = []
    work = 0.0
    for s in red.sectors:
        coef = w2.copy()
        for j, c in s.fixed:
            coef *= np.array([per[j][a][1][c] for a in range(n)])
        ranks = np.array([math.prod(per[j][a][0].shape[1] for j in s.free) for a in range(n)])
        live = np.flatnonzero((coef != 0) & (ranks > 0))
        if not live.size:
            continue
        if np.all(ranks[live] == 1):
            C = np.sqrt(coef[live])[None, :]
            for j in s.free:
                B = np.stack([per[j][a][0][:, 0] for a in live], axis=1)  # m_j × live
                C = (C[:, None, :] * B[None, :, :]).reshape(-1, live.size)
            owner = live
        else:
            cols = []
            for x in live.tolist():
                K: np.ndarray = np.full((1, 1), math.sqrt(coef[x]))
                for j in s.free:
                    K = np.kron(K, per[j][x][0])
                cols.append(K)
            C = np.hstack(cols)
            owner = np.repeat(live, ranks[live])
        work += C.shape[0] ** 2 * (C.shape[1] + C.shape[0])
        if work > MAX_COLUMN_WORK:
            return None
        sectors.append(SectorColumns(s.index, s.multiplicity, C, np.asarray(owner, dtype=np.int64)))
    return Gamma2Problem(tuple(sectors), red.orbit_sizes, orbits.rows, red.shape)
