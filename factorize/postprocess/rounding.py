"""``integer``: controlled rounding of consistent non-negative tables to integer tables.

Input: non-negative tables that agree on every shared attribute set (``postprocess.nonneg``).
Output: non-negative integer tables, every one of total ``n = round(common total)``, rounded
from the top down as the Census Bureau's TopDown algorithm rounds from the nation down to
blocks, each level constrained to sum to the integer level above it (Abowd et al., "The 2020
Census Disclosure Avoidance System TopDown Algorithm", Harvard Data Science Review 2022):

1. the levels are the tables and all their intersections (the family 𝓘 closed under ∩, with
   the empty set: the total), rounded in order of size; a level's *parents* are the largest
   levels strictly inside it;
2. the total: ``n = round(total)``;
3. a level with one parent P: within each cell of P's (already integer) table, the level's
   real values are scaled to that cell's integer count and rounded by largest remainders
   (each to its floor or ceiling; the largest fractional parts round up) — Hamilton's
   method, the integer vector of that sum nearest to the scaled values in ℓ1 and ℓ2;
4. a level with two parents P1, P2 (Q = P1 ∩ P2 is a level below both, so their integer
   tables agree on it): the level's values summed to P1 ∪ P2 form, for each cell of Q, an
   (P1∖Q) × (P2∖Q) matrix; it is fitted by iterative proportional fitting to the integer
   margins of P1 and P2, then rounded cell by cell to floor or ceiling keeping both margins
   exactly — controlled rounding, which always exists for a two-way table (Cox & Ernst,
   "Controlled rounding", INFOR 1982): nearest rounding first, then cells moved to their
   other neighbour along the paths of one maximum flow until both margins hold; the
   attributes of the level outside P1 ∪ P2 are then rounded within each cell as in 3;
5. a level with three or more parents is rounded to the two with the most cells as in 4; a
   level with three whose third parent's margin is then off — a *triangle*, e.g. a 3-way table
   below its three 2-way tables — is repaired by unit cycles that keep the first two margins
   (:func:`_repair_third`, greedy); otherwise, or where no cycle can move (an integer table
   with three prescribed 2-way margins need not exist: three-dimensional tables need not have
   a controlled rounding, Causey, Cox & Ernst, "Applications of transportation theory to
   statistical problems", JASA 1985), the margins on the other parents are not forced and the
   largest disagreement found is reported.

What holds, exactly: every cell is a non-negative integer; every table sums to n; where every
level has at most two parents (e.g. any set of 1- and 2-way marginals, or tables that pairwise
share at most one attribute set) every two tables agree exactly on the attributes they share
(each level agrees with all levels below it, by induction), and so they do where the levels of
three parents are triangles the repair of rule 5 completed (on Adult's all ≤3-way marginals:
``benchmarks.suites.tables``). :class:`IntegerTables` reports the largest disagreement between a
level and a level below it (0 where the above holds).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .tables import Attrs, MarginalLayout, marginal

#: Fractional parts within this of 0 or 1 are rounding noise of an integer (snapped).
SNAP = 1e-7
#: Iterative proportional fitting: at most this many sweeps, to this relative margin error.
IPF_SWEEPS = 1000
IPF_TOL = 1e-10


@dataclass(frozen=True)
class IntegerTables:
    """The integer tables (aligned with the layout's tables), their common total, the
    (level, parent) pairs whose agreement was not forced (rule 5 of the module docstring), and
    the largest absolute disagreement between a level and any level below it (0: every two
    tables agree exactly where they share attributes)."""

    tables: list[np.ndarray]
    total: int
    unforced: list[tuple[Attrs, Attrs]]
    disagreement: int


def intersection_levels(tables: Sequence[Attrs]) -> list[Attrs]:
    """The tables, all their intersections and the empty set, by size then attributes."""
    levels = {tuple(T) for T in tables} | {()}
    new = set(levels)
    while new:
        found = {tuple(sorted(set(a) & set(b))) for a in new for b in levels} - levels
        levels |= found
        new = found
    return sorted(levels, key=lambda U: (len(U), U))


def parents(level: Attrs, below: Sequence[Attrs]) -> list[Attrs]:
    """The largest levels of ``below`` strictly inside ``level`` (most cells first, then order
    of ``below``)."""
    inside = [V for V in below if set(V) < set(level)]
    return [V for V in inside if not any(set(V) < set(X) for X in inside)]


def round_rows(values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Each row of ``values`` (≥ 0) scaled to sum to its integer target (spread evenly where
    the row is zero) and rounded by largest remainders (rule 3 of the module docstring)."""
    values = np.asarray(values, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    m, k = values.shape
    sums = values.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where((sums > 0)[:, None], values * (targets / np.where(sums > 0, sums, 1.0))[:, None],
                          (targets / k)[:, None])
    low = np.floor(scaled)
    frac = scaled - low
    left = targets - low.sum(axis=1).astype(np.int64)
    order = np.argsort(-frac, axis=1, kind="stable")
    rank = np.empty_like(order)
    rank[np.arange(m)[:, None], order] = np.arange(k)[None, :]
    return low.astype(np.int64) + (rank < left[:, None])


def _axes(level: Attrs, groups: Sequence[Attrs]) -> list[int]:
    """Positions in ``level`` of the attributes of ``groups``, in that order."""
    return [level.index(j) for g in groups for j in g]


def _round_within(values: np.ndarray, level: Attrs, parent: Attrs, counts: np.ndarray) -> np.ndarray:
    """Rule 3: the level's table rounded within each cell of its parent's integer table."""
    rest = tuple(j for j in level if j not in parent)
    order = _axes(level, (parent, rest))
    moved = np.transpose(values, order)
    cells = math.prod(moved.shape[:len(parent)])
    x = round_rows(moved.reshape(cells, -1), counts.reshape(-1)).reshape(moved.shape)
    return np.transpose(x, np.argsort(order))


def _ipf(w: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Iterative proportional fitting of the positive array ``w`` (q × a × b) to the margins
    ``rows`` (q × a) and ``cols`` (q × b), which agree per q."""
    y = w.copy()
    limit = IPF_TOL * max(1.0, float(rows.max(initial=0.0)))
    for _ in range(IPF_SWEEPS):
        y *= (rows / np.maximum(y.sum(axis=2), 1e-300))[:, :, None]
        y *= (cols / np.maximum(y.sum(axis=1), 1e-300))[:, None, :]
        if float(np.abs(y.sum(axis=2) - rows).max(initial=0.0)) <= limit:
            break
    return y


def controlled_round(y: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """Each q-slice of ``y`` (q × a × b, line sums ``rows`` and ``cols``, integers) rounded
    cell by cell to floor or ceiling with both line sums kept: nearest rounding, then the
    flips of one maximum flow (rule 4 of the module docstring). None when the flow cannot
    restore the margins (``y``'s line sums were not those integers)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import maximum_flow

    low = np.floor(y)
    frac = y - low
    low[frac > 1.0 - SNAP] += 1.0
    frac[(frac < SNAP) | (frac > 1.0 - SNAP)] = 0.0
    up0 = frac >= 0.5
    x = low.astype(np.int64) + up0
    d_row = rows.astype(np.int64) - x.sum(axis=2)
    d_col = cols.astype(np.int64) - x.sum(axis=1)
    if not d_row.any() and not d_col.any():
        return x
    nq, na, nb = y.shape
    row_node = 2 + np.arange(nq * na).reshape(nq, na)
    col_node = 2 + nq * na + np.arange(nq * nb).reshape(nq, nb)
    q, a, b = np.nonzero(frac > 0)
    r, c = row_node[q, a], col_node[q, b]
    down = up0[q, a, b]
    src = np.concatenate([np.where(down, c, r), np.zeros(nq * (na + nb), dtype=np.int64),
                          row_node.reshape(-1), col_node.reshape(-1)])
    dst = np.concatenate([np.where(down, r, c), row_node.reshape(-1), col_node.reshape(-1),
                          np.ones(nq * (na + nb), dtype=np.int64)])
    cap = np.concatenate([np.ones(q.size, dtype=np.int64),
                          np.maximum(d_row, 0).reshape(-1), np.maximum(-d_col, 0).reshape(-1),
                          np.maximum(-d_row, 0).reshape(-1), np.maximum(d_col, 0).reshape(-1)])
    keep = cap > 0
    n = 2 + nq * (na + nb)
    graph = sp.csr_matrix((cap[keep].astype(np.int32), (src[keep], dst[keep])), shape=(n, n))
    supply = int(np.maximum(d_row, 0).sum() + np.maximum(-d_col, 0).sum())
    flow = maximum_flow(graph, 0, 1)
    if flow.flow_value != supply:
        return None
    moved = np.asarray(flow.flow[np.where(down, c, r), np.where(down, r, c)]).reshape(-1) > 0
    x[q, a, b] += np.where(down, -1, 1) * moved
    return x


def _round_two(values: np.ndarray, level: Attrs, p1: Attrs, p2: Attrs, c1: np.ndarray,
               c2: np.ndarray) -> np.ndarray | None:
    """Rule 4: the level rounded to the integer tables ``c1`` of ``p1`` and ``c2`` of ``p2``
    (None when the controlled rounding fails)."""
    Q = tuple(j for j in p1 if j in p2)
    A = tuple(j for j in p1 if j not in Q)
    B = tuple(j for j in p2 if j not in Q)
    R = tuple(j for j in level if j not in p1 and j not in p2)
    order = _axes(level, (Q, A, B, R))
    moved = np.transpose(values, order)
    nq = math.prod(moved.shape[:len(Q)])
    na = math.prod(moved.shape[len(Q):len(Q) + len(A)])
    nb = math.prod(moved.shape[len(Q) + len(A):len(Q) + len(A) + len(B)])
    v = moved.reshape(nq, na, nb, -1)
    rows = np.transpose(c1, _axes(p1, (Q, A))).reshape(nq, na).astype(np.float64)
    cols = np.transpose(c2, _axes(p2, (Q, B))).reshape(nq, nb).astype(np.float64)
    w = v.sum(axis=3)
    w = w + 1e-9 * (1.0 + float(w.mean()))  # positive, so the fit reaches any margins
    x = controlled_round(_ipf(w, rows, cols), rows, cols)
    if x is None:
        return None
    full = round_rows(v.reshape(nq * na * nb, -1), x.reshape(-1)).reshape(moved.shape)
    return np.transpose(full, np.argsort(order))


def _repair_third(x: np.ndarray, level: Attrs, p1: Attrs, p2: Attrs, p3: Attrs,
                  c3: np.ndarray) -> bool:
    """Rule 5's repair, in place: ``x`` (the level rounded to ``p1`` and ``p2``) moved by unit
    cycles that keep both those margins until its ``p3`` margin is the integer table ``c3``.
    Only for a *triangle* level — ``level = G ∪ X ∪ Y ∪ Z`` with ``p1 = G∪X∪Y``,
    ``p2 = G∪X∪Z``, ``p3 = G∪Y∪Z`` (e.g. a 3-way table below its three 2-way tables) — where
    the deficit ``D = c3 − marg_{p3} x`` sums to zero along Y and along Z in every cell of G
    (``c3`` and x agree below, on ``G∪Y`` ⊆ p1 and ``G∪Z`` ⊆ p2). One move, at a cell (g, x)
    and values y ≠ y', z ≠ z' with ``D[g,y,z] > 0``, ``D[g,y,z'] < 0``, ``D[g,y',z] < 0``:
    ``x[g,x,y,z] += 1``, ``x[g,x,y',z'] += 1``, ``x[g,x,y,z'] −= 1``, ``x[g,x,y',z] −= 1`` —
    both (g,x,·) margins unchanged, ``Σ|D|`` down by at least 2, and possible where the two cells
    lowered hold a unit (the x with the most is taken); where no such pair of surplus cells
    has one, the best-scoring move at any (x, y', z') that still lowers ``Σ|D|``
    (:func:`_scored_move`); passes over the deficit cells until one makes no move. Greedy, so
    it terminates; False when a deficit is left (the table is then left with the moves made,
    every cell still ≥ 0)."""
    G = tuple(j for j in level if j in p1 and j in p2 and j in p3)
    X = tuple(j for j in level if j in p1 and j in p2 and j not in p3)
    Y = tuple(j for j in level if j in p1 and j in p3 and j not in p2)
    Z = tuple(j for j in level if j in p2 and j in p3 and j not in p1)
    if set(G + X + Y + Z) != set(level) or not Y or not Z:
        return False
    order = _axes(level, (G, X, Y, Z))
    view = np.transpose(x, order)
    shape = view.shape
    ng = math.prod(shape[:len(G)])
    nx = math.prod(shape[len(G):len(G) + len(X)])
    ny = math.prod(shape[len(G) + len(X):len(G) + len(X) + len(Y)])
    v = np.ascontiguousarray(view).reshape(ng, nx, ny, -1)
    D = np.transpose(c3, _axes(p3, (G, Y, Z))).reshape(ng, ny, -1).astype(np.int64) - v.sum(axis=1)
    ok = True
    for g in np.flatnonzero(np.abs(D).reshape(ng, -1).any(axis=1)):
        d, t = D[g], v[g]
        progress = True
        while progress:  # passes over the deficit cells; each pass's moves lower Σ|d|
            progress = False
            for y, z in np.argwhere(d > 0):
                while d[y, z] > 0 and _move_at(t, d, int(y), int(z)):
                    progress = True
        ok = ok and not bool(np.any(d))
    x[...] = np.transpose(v.reshape(shape), np.argsort(order))
    return ok


def _move_at(t: np.ndarray, d: np.ndarray, y: int, z: int) -> bool:
    """One move of the repair for the deficit at (y, z) (``d[y, z] > 0``), in place: between two
    surplus cells ``d[y, z'] < 0``, ``d[y', z] < 0`` at the x with the most room, else
    :func:`_scored_move`; False when there is none."""
    for z2 in np.flatnonzero(d[y] < 0):
        for y2 in np.flatnonzero(d[:, z] < 0):
            room = np.minimum(t[:, y, z2], t[:, y2, z])
            xv = int(np.argmax(room))
            if room[xv] >= 1:
                _cycle(t, d, xv, y, z, int(y2), int(z2))
                return True
    return _scored_move(t, d, y, z)


def _cycle(t: np.ndarray, d: np.ndarray, xv: int, y: int, z: int, y2: int, z2: int) -> None:
    """The unit cycle at x = xv: +1 at (y, z) and (y', z'), −1 at (y, z') and (y', z), with the
    deficit d updated."""
    t[xv, y, z] += 1
    t[xv, y2, z2] += 1
    t[xv, y, z2] -= 1
    t[xv, y2, z] -= 1
    d[y, z] -= 1
    d[y2, z2] -= 1
    d[y, z2] += 1
    d[y2, z] += 1


def _scored_move(t: np.ndarray, d: np.ndarray, y: int, z: int) -> bool:
    """The repair's fallback for the deficit at (y, z) (``d[y, z] > 0``) when no move between
    two surplus cells exists: the move at any (x, y', z') (y' ≠ y, z' ≠ z) whose two lowered
    cells hold a unit that lowers ``Σ|d|`` the most (by 2 or 4), made in place; False when
    none lowers it."""
    ny, nz = d.shape
    ys = np.arange(ny) != y
    zs = np.arange(nz) != z
    gain = (np.abs(d[y, :] + 1) - np.abs(d[y, :]))[None, :] \
        + (np.abs(d[:, z] + 1) - np.abs(d[:, z]))[:, None] \
        + (np.abs(d - 1) - np.abs(d)) - 1
    gain = np.where(ys[:, None] & zs[None, :], gain, 1)  # ny × nz, per (y', z')
    room = np.minimum(t[:, y, :][:, None, :], t[:, :, z][:, :, None])  # x × y' × z'
    score = np.where(room >= 1, gain[None, :, :], 1)
    best = np.unravel_index(int(np.argmin(score)), score.shape)
    if score[best] >= 0:
        return False
    xv, y2, z2 = (int(i) for i in best)
    _cycle(t, d, xv, y, z, y2, z2)
    return True


def round_tables(layout: MarginalLayout, tables: Sequence[np.ndarray]) -> IntegerTables:
    """The integer tables of the module docstring from consistent non-negative ``tables``
    (one per table of ``layout``)."""
    levels = intersection_levels(layout.tables)
    source = {T: t for T, t in zip(layout.tables, tables, strict=True)}

    def real(U: Attrs) -> np.ndarray:
        T = next(T for T in layout.tables if set(U) <= set(T))
        return marginal(np.asarray(source[T], dtype=np.float64), T, U)

    total = float(np.mean([float(np.sum(t)) for t in tables])) if tables else 0.0
    ints: dict[Attrs, np.ndarray] = {(): np.array(int(math.floor(max(total, 0.0) + 0.5)))}
    unforced: list[tuple[Attrs, Attrs]] = []
    for U in levels[1:]:
        ps = sorted(parents(U, list(ints)), key=lambda P: -layout.cells(P))
        x = None
        if len(ps) >= 2:
            x = _round_two(real(U), U, ps[0], ps[1], ints[ps[0]], ints[ps[1]])
            rest = ps[2:]
            if x is not None and len(rest) == 1 and _repair_third(x, U, ps[0], ps[1], rest[0],
                                                                   ints[rest[0]]):
                rest = []
            unforced += [(U, P) for P in rest] if x is not None else [(U, P) for P in ps[1:]]
        ints[U] = x if x is not None else _round_within(real(U), U, ps[0], ints[ps[0]])
    worst = 0
    for U in levels:
        for V in levels:
            if set(V) < set(U):
                worst = max(worst, int(np.abs(marginal(ints[U], U, V) - ints[V]).max(initial=0)))
    return IntegerTables([ints[T] for T in layout.tables], int(ints[()]), unforced, worst)
