"""The orthogonal projection onto consistent marginal tables, in the algebra of marginals.

Tables ``μ_T`` (T in a family 𝒯 of attribute sets) are *consistent* when every two agree on
the attributes they share: ``marg_{T∩T'} μ_T = marg_{T∩T'} μ_T'``. Every table splits into
its pure interaction parts (the ANOVA decomposition: the part on U ⊆ T depends only on the
attributes of U and sums to zero along each of them); the U-part of the U-marginal of μ_T is
``e_{T,U} = pure_U(marg_U μ_T)``, and the tables are consistent exactly when ``e_{T,U}`` is
the same ``e_U`` for every T ⊇ U (then ``x = Σ_U e_U / Π_{j∉U} n_j`` is a signed histogram
whose marginals they are: the consistent tables are the range of the marginal operator).

The projection in the weighted norm ``Σ_T c_T ‖μ_T − b_T‖²`` decouples over the subsets U of
the downward closure, because the U-parts of different U are orthogonal in every table and
the U-part of ``marg_U μ_T`` is the U-part of μ_T times ``P_{T∖U} = Π_{j∈T∖U} n_j``:

    e_U = pure_U( Σ_{T⊇U} α_{T,U} marg_U b_T / Σ_{T⊇U} α_{T,U} ),   α_{T,U} = c_T / P_{T∖U},
    μ_T = Σ_{U⊆T} e_U / P_{T∖U}     (e_U broadcast over the attributes of T∖U),

— the least-squares consistent tables, at a cost of ``2^|T|`` sums and broadcasts per table;
never an N-cell object.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from .tables import Attrs, marginal


def downward_closure(tables: Sequence[Attrs]) -> list[Attrs]:
    """Every subset of every table, by size then attributes."""
    closure = {U for T in tables for r in range(len(T) + 1) for U in combinations(T, r)}
    return sorted(closure, key=lambda U: (len(U), U))


def pure(table: np.ndarray) -> np.ndarray:
    """The pure interaction part of a table on its own attributes: centred along every axis."""
    out = np.array(table, dtype=np.float64, copy=True)
    for axis in range(out.ndim):
        out -= out.mean(axis=axis, keepdims=True)
    return out


class Consistency:
    """The c-weighted orthogonal projection onto consistent tables (module docstring), for the
    tables ``tables`` over attribute sizes ``sizes`` with weights ``weights`` (c_T > 0).

    Computed as a correction of each table by its lower-order parts,
    ``μ_T = b_T + Σ_{U⊆T} (e_U − e_{T,U}) / P_{T∖U}`` (the ANOVA form of the module
    docstring's sum), skipping the terms where T is the only table containing U (there
    ``e_U = e_{T,U}``) — but the total's, which ``project(total=…)`` may fix: one marginal sum
    per subset kept and one broadcast sum per table."""

    def __init__(self, sizes: Sequence[int], tables: Sequence[Attrs], weights: np.ndarray) -> None:
        self.sizes = tuple(int(n) for n in sizes)
        self.tables = tuple(tables)
        self.closure = downward_closure(self.tables)
        #: per subset U: the tables containing it and their α_{T,U}, normalised to sum 1
        self.members: dict[Attrs, list[tuple[int, float]]] = {}
        for t, T in enumerate(self.tables):
            for r in range(len(T) + 1):
                for U in combinations(T, r):
                    rest = float(np.prod([self.sizes[j] for j in T if j not in U]))
                    self.members.setdefault(U, []).append((t, float(weights[t]) / rest))
        for U, m in self.members.items():
            total = sum(a for _, a in m)
            self.members[U] = [(t, a / total) for t, a in m]
        #: per table: (U, the shape e_U broadcasts to over T, P_{T∖U}) of each term kept,
        #: largest U first (each subset's marginal is summed from the one before it)
        self.terms: list[list[tuple[Attrs, tuple[int, ...], float]]] = []
        for T in self.tables:
            rows = []
            for r in range(len(T), -1, -1):
                for U in combinations(T, r):
                    if len(self.members[U]) > 1 or U == ():
                        rest = float(np.prod([self.sizes[j] for j in T if j not in U]))
                        rows.append((U, tuple(self.sizes[j] if j in U else 1 for j in T), rest))
            self.terms.append(rows)

    def least_squares_total(self, tables: Sequence[np.ndarray]) -> float:
        """``e_∅``: the common total of the projection of ``tables`` (their totals averaged
        with the weights α_{T,∅} = c_T / cells_T)."""
        return float(sum(a * float(np.sum(tables[t])) for t, a in self.members[()]))

    def _own_parts(self, table: np.ndarray, t: int) -> dict[Attrs, np.ndarray]:
        """``e_{T,U}`` of table t for every U of its terms."""
        T = self.tables[t]
        marg: dict[Attrs, np.ndarray] = {T: table}
        out = {}
        for U, _, _ in self.terms[t]:
            if U not in marg:
                parent = min((V for V in marg if set(U) < set(V)), key=len)
                marg[U] = marginal(marg[parent], parent, U)
            out[U] = pure(marg[U])
        return out

    def project(self, tables: Sequence[np.ndarray], total: float | None = None) -> list[np.ndarray]:
        """The consistent tables nearest to ``tables`` in the weighted norm; with ``total``,
        the nearest whose common total is ``total`` (``e_∅`` fixed: an affine projection)."""
        own = [self._own_parts(np.asarray(x, dtype=np.float64), t) for t, x in enumerate(tables)]
        e: dict[Attrs, np.ndarray] = {}
        for U in self.closure:
            m = self.members[U]
            if len(m) > 1 or U == ():
                e[U] = sum((a * own[t][U] for t, a in m), start=np.zeros(()))
        if total is not None:
            e[()] = np.asarray(float(total))
        out = []
        for t, x in enumerate(tables):
            corr = np.zeros(())
            for U, shape, rest in self.terms[t]:
                corr = corr + (e[U] - own[t][U]).reshape(shape) / rest
            out.append(np.asarray(x, dtype=np.float64) + corr)
        return out
