"""The row orbits of a union of Kronecker products under its twin-class permutations (the
verifier's side of the γ₂ bound, ``structured.symmetry.gamma_2_lower``; the reduction and the
solver's form are ``structured.symmetry_gamma_2``, docs/math.md §5.4c).

On attribute i the permutations inside the twin classes (``structured.symmetry``) act on a
factor's rows by permutation whenever the factor's row set is closed under them
(``W P_π = Π_π W``): an identity's rows are permuted inside each class, a total row and a
grouping's rows are fixed, single values stacked with groups (an age factor) are permuted
inside their class. A *row orbit* of block o is a tuple of per-factor orbits; its rows are the
Kronecker block ``w_o ⊗_i W_{o,i}[r_i]`` — a *sub-block* — whose Grams are again invariant
under the class permutations, so the sector reduction applies to the union of sub-blocks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .workload_blocks import AxisFactor, WorkloadBlock

#: Most sub-blocks (row orbits over all blocks) a workload is expanded into.
MAX_SUBBLOCKS = 20000


def factor_orbits(f: AxisFactor, labels: np.ndarray) -> list[np.ndarray]:
    """The row orbits of factor f under the permutations inside the twin classes ``labels``
    (each an array of row indices, in order of first row). An identity's orbits are its
    classes; a total row is one orbit. For an explicit factor, rows are grouped by their
    multiplicity and, per class, the sorted multiset of their entries there (what a
    permutation inside the classes preserves); a group is an orbit when it holds every row
    those permutations make — its size equals the multiplicity times the multinomial
    ``Π_c s_c! / Π_x n_{c,x}!`` of each class's value counts. If any group falls short the
    row set is not closed, and the factor is one orbit."""
    labels = np.asarray(labels, dtype=np.int64)
    if f.kind == "identity":
        return [np.flatnonzero(labels == c) for c in range(int(labels.max(initial=-1)) + 1)]
    if f.kind == "total":
        return [np.arange(1)]
    M = f.explicit
    m = int(labels.max(initial=-1)) + 1
    members = [np.flatnonzero(labels == c) for c in range(m)]
    _, inverse, mult = np.unique(M, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    groups: dict[tuple[int, tuple[tuple[float, ...], ...]], list[int]] = {}
    for r in range(M.shape[0]):
        key = (int(mult[inverse[r]]), tuple(tuple(np.sort(M[r, idx]).tolist()) for idx in members))
        groups.setdefault(key, []).append(r)
    out = []
    for (size, per_class), rows in groups.items():
        for vals in per_class:
            _, counts = np.unique(np.asarray(vals), return_counts=True)
            size *= math.factorial(len(vals)) // math.prod(math.factorial(int(x)) for x in counts)
        if size != len(rows):
            return [np.arange(M.shape[0])]
        out.append(np.asarray(rows, dtype=np.int64))
    return out


def _restricted(f: AxisFactor, rows: np.ndarray) -> AxisFactor:
    """Factor f on the rows ``rows`` (the factor itself when they are all of its rows)."""
    if rows.size == f.rows:
        return f
    return AxisFactor("matrix", f.n, np.ascontiguousarray(f.dense()[rows]))


@dataclass(frozen=True)
class RowOrbits:
    """The workload's blocks split into row-orbit sub-blocks (module docstring): ``blocks[a]``
    is one workload block (its weight) on one row orbit per attribute, with ``rows[a]`` rows;
    sub-blocks in block order, each block's orbit tuples in C order."""

    blocks: tuple[WorkloadBlock, ...]
    rows: np.ndarray

    def __len__(self) -> int:
        return len(self.blocks)

    def weights(self, row_weights: np.ndarray) -> list[float]:
        """The stated sub-block weights ``v_a = |w_o| √p_a`` of per-row weights p."""
        return [abs(b.weight) * math.sqrt(max(float(p), 0.0))
                for b, p in zip(self.blocks, np.asarray(row_weights, dtype=np.float64), strict=True)]


def expand(wblocks: Sequence[WorkloadBlock], labels: Sequence[np.ndarray]) -> RowOrbits | None:
    """The row-orbit sub-blocks of W under the twin classes ``labels`` (deterministic: the
    verifier re-derives them); None beyond :data:`MAX_SUBBLOCKS`."""
    import itertools

    per_factor: dict[tuple[int, str], list[np.ndarray]] = {}
    counts = 0
    plans = []
    for wb in wblocks:
        orbits = []
        for j, lab in enumerate(labels):
            f = wb.factor(j)
            key = (j, f.key)
            if key not in per_factor:
                per_factor[key] = factor_orbits(f, lab)
            orbits.append(per_factor[key])
        counts += math.prod(len(o) for o in orbits)
        if counts > MAX_SUBBLOCKS:
            return None
        plans.append(orbits)
    blocks: list[WorkloadBlock] = []
    restricted: dict[tuple[int, str, int], AxisFactor] = {}
    for wb, orbits in zip(wblocks, plans, strict=True):
        for combo in itertools.product(*(range(len(x)) for x in orbits)):
            factors = []
            for j, r in enumerate(combo):
                f = wb.factor(j)
                rkey = (j, f.key, r)
                if rkey not in restricted:
                    restricted[rkey] = _restricted(f, orbits[j][r])
                factors.append(restricted[rkey])
            blocks.append(WorkloadBlock(wb.weight, factors))
    return RowOrbits(tuple(blocks), np.array([b.rows for b in blocks], dtype=np.float64))
