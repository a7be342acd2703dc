"""Exactly consistent non-negative tables from nearly consistent ones, from the total down.

An iterative projection onto the non-negative consistent tables (``postprocess.nonneg``) ends
at non-negative tables ``z`` that agree where they share attributes only up to its residual.
They are made consistent level by level as the Census Bureau's TopDown algorithm fits each
geographic level to the one above it (Abowd et al., "The 2020 Census Disclosure Avoidance
System TopDown Algorithm", Harvard Data Science Review 2022), with real numbers and by
iterative proportional fitting (raking: Deming & Stephan, "On a least squares adjustment of a
sampled frequency table when the expected marginal totals are known", Ann. Math. Statist.
1940) in place of rounding:

1. the levels are the tables and all their intersections with the empty set (the total),
   in order of size (``rounding.intersection_levels``); a level's parents are the largest
   levels strictly inside it (``rounding.parents``);
2. the total is the given common total;
3. a level's values are the weighted mean of the marginals on it of every table containing
   it, ``r_U = Σ_{T⊇U} α_{T,U} marg_U z_T / Σ_{T⊇U} α_{T,U}`` with ``α_{T,U} = c_T / P_{T∖U}``
   (the weights of the consistent projection, ``postprocess.consistency``), a floor of
   :data:`FLOOR` times their mean added so that every positive parent cell can be reached;
4. the level is raked to its parents' (already fixed) tables: scaled to each parent's
   marginal in turn until every marginal holds to :data:`RAKE_TOL` relative to the total, or
   :data:`RAKE_SWEEPS` sweeps (:data:`RAKE_SWEEPS_MANY` for three or more parents).

What holds: every cell is non-negative (raking multiplies non-negative values by
non-negative factors); every table's total is the given total exactly (each scaling fits one
parent's marginal, whose total is fitted by induction); a level with one parent is fitted
exactly in one sweep, and one with two parents (which agree on their intersection, a level
below both) converges to both margins (Csiszár, "I-divergence geometry of probability
distributions and minimization problems", Ann. Probab. 1975), so where every level has at
most two parents (any set of 1- and 2-way tables, with CDFs and ranges of them) the tables
agree on every shared attribute set to :data:`RAKE_TOL` times the total — or what
:data:`RAKE_SWEEPS` sweeps leave where near-zero cells make the convergence slow (on Adult's
2-way tables at most 2·10⁻⁴ of a count); a level with three or more parents has a
non-negative table with all those margins only if they are jointly feasible — the tables are
only pairwise consistent — so raking may stop at its sweep limit with the tables disagreeing
(on Adult's all ≤3-way marginals, by up to 139 counts). Then no level is kept fixed: the raked
tables are fitted to each other (``postprocess.mutual_fit``: cyclic KL projections onto the
consistency constraints from the raked tables plus a small floor) until they agree to
:data:`MUTUAL_TOL` times the total. The largest disagreement between two tables is reported.
When ``z`` is already consistent, raking returns it (up to the floor).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .mutual_fit import fit_mutually
from .rounding import intersection_levels, parents
from .tables import Attrs, broadcast, marginal

#: Floor added to a level's values, relative to their mean (step 3 of the module docstring).
FLOOR = 1e-12
#: Raking: to this largest marginal error relative to the total, at most this many sweeps over
#: the parents — fewer for a level of three or more parents, whose margins may admit no table.
RAKE_TOL = 1e-10
RAKE_SWEEPS = 2000
RAKE_SWEEPS_MANY = 30


#: The mutual fit (``postprocess.mutual_fit``) where a level of three or more parents is left
#: disagreeing: to this largest disagreement relative to the total, in at most this many sweeps.
MUTUAL_TOL = 1e-7
MUTUAL_SWEEPS = 1000


@dataclass(frozen=True)
class RakedTables:
    """The raked tables (aligned with ``tables``), the largest absolute disagreement between
    two tables on a shared attribute set, the largest raking sweeps any level took, and the
    sweeps of the mutual fit (0 where raking alone made the tables consistent)."""

    tables: list[np.ndarray]
    disagreement: float
    sweeps: int
    mutual_sweeps: int = 0


def rake(level: Attrs, values: np.ndarray, fixed: dict[Attrs, np.ndarray], total: float
         ) -> tuple[np.ndarray, int]:
    """Step 4: ``values`` on ``level`` raked to the tables of its parents among ``fixed``;
    ``(table, sweeps)``."""
    ps = parents(level, list(fixed))
    limit = RAKE_TOL * max(1.0, total)
    x = values
    sweeps = 0
    for sweeps in range(1, (RAKE_SWEEPS if len(ps) <= 2 else RAKE_SWEEPS_MANY) + 1):  # noqa: B007
        worst = 0.0
        for P in ps:
            have = marginal(x, level, P)
            worst = max(worst, float(np.abs(have - fixed[P]).max(initial=0.0)))
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(have > 0, fixed[P] / np.where(have > 0, have, 1.0), 0.0)
            x = x * broadcast(factor, P, level)
        if worst <= limit or len(ps) <= 1:
            break
    return x, sweeps


def rake_tables(tables_attrs: Sequence[Attrs], tables: Sequence[np.ndarray], weights: np.ndarray,
                sizes: Sequence[int], total: float, deadline: float | None = None) -> RakedTables:
    """The consistent non-negative tables of the module docstring from non-negative
    ``tables`` (on ``tables_attrs``, table weights ``weights`` c_T) of common total ``total``;
    where a level has three or more parents and raking leaves the tables disagreeing by more
    than :data:`RAKE_TOL` of the total, they are fitted to each other
    (``postprocess.mutual_fit``) until they agree to :data:`MUTUAL_TOL` of it, for at most
    :data:`MUTUAL_SWEEPS` sweeps or until ``deadline``."""
    levels = intersection_levels(tables_attrs)
    fixed: dict[Attrs, np.ndarray] = {(): np.asarray(max(0.0, float(total)))}
    sweeps, many = 0, False
    for U in levels[1:]:
        acc = np.zeros(tuple(int(sizes[j]) for j in U))
        mass = 0.0
        for T, t, c in zip(tables_attrs, tables, weights, strict=True):
            if set(U) <= set(T):
                a = float(c) / math.prod(int(sizes[j]) for j in T if j not in U)
                acc += a * marginal(np.maximum(np.asarray(t, dtype=np.float64), 0.0), T, U)
                mass += a
        r = acc / mass
        r = r + FLOOR * (1.0 + float(r.mean()))
        many = many or len(parents(U, list(fixed))) > 2
        fixed[U], s = rake(U, r, fixed, total)
        sweeps = max(sweeps, s)
    worst = 0.0
    for U in levels:
        for V in levels:
            if set(V) < set(U):
                worst = max(worst, float(np.abs(marginal(fixed[U], U, V) - fixed[V]).max(initial=0.0)))
    raked = [fixed[tuple(T)] for T in tables_attrs]
    if not many or worst <= RAKE_TOL * max(1.0, float(total)):
        return RakedTables(raked, worst, sweeps)
    fit = fit_mutually(tables_attrs, raked, weights, total, tol=MUTUAL_TOL,
                       max_sweeps=MUTUAL_SWEEPS, deadline=deadline)
    return RakedTables(fit.tables, fit.disagreement, sweeps, fit.sweeps)
