"""Non-negative tables made consistent with each other where raking from the total down cannot.

Raking (``postprocess.raking``) fixes each level of the tables to the levels below it. A level
with three or more parents — a 3-way table below its three 2-way tables — may admit no
non-negative table with those fixed margins (the margins are only pairwise consistent), and
raking stops with the tables disagreeing (on Adult's all ≤3-way marginals, by up to 139
counts). Here no level is fixed: every table is fitted to every other, by cyclic Kullback–Leibler
(Bregman) projections onto the consistency constraints — iterative proportional fitting of the
tables to their shared margins (Bregman, "The relaxation method of finding the common point of
convex sets", USSR Comput. Math. 1967; Csiszár, "I-divergence geometry of probability
distributions and minimization problems", Ann. Probab. 1975, Thm 3.2):

1. start: every cell of every table plus the floor ``φ = ε · n / max_T cells_T`` (ε =
   :data:`FLOOR`): one absolute amount, so every cell is positive, the largest tables (where
   raking leaves the near-zero cells that must grow) get ε of their mass and a small table a
   negligible share of it;
2. one sweep: for every attribute set U shared by two or more tables (largest first), the
   tables' U-marginals ``m_T`` are replaced by their geometric mean weighted by the tables'
   weights, ``log r_U = Σ_T c_T log m_T / Σ_T c_T``, the KL projection onto "every U-marginal
   equal" in the objective below: each table is multiplied, along U, by ``(r_U / m_T)^ω`` — ω =
   1 projects, ω = :data:`RELAX` over-relaxes in the log domain (dropped to 1 when
   :data:`STALL_SWEEPS` sweeps do not shrink the disagreement); then every table is scaled to
   the total n;
3. stop when the largest disagreement between two tables on a shared set is ≤ ``tol · n``
   (checked once the sweep's own measure, taken before each update, is), or after
   ``max_sweeps`` sweeps or at the deadline.

What holds: every cell is positive (products of positive numbers) and every table's total is n
exactly (the last scaling). Every update multiplies a table by a function of one of its
marginals whose c-weighted log sums to zero over the tables sharing it, so at every sweep
``c_T log(μ_T / start_T)`` lies in the range of the consistency constraints' adjoint; a
consistent limit is therefore the unique minimiser of

    Σ_T c_T · KL(μ_T ‖ start_T)   over consistent tables of total n

(the I-projection: Csiszár 1975, Thm 3.1 — whatever ω), which ``tests`` check against cvxpy's
exponential-cone solution. Locally KL is the χ² distance ``Σ (μ − z)² / 2z``, so the corrections
fall on the large cells. The floor is what makes this fast: without it a cell raking left near
zero must grow by orders of magnitude through bounded factors. Measured on a saved Adult ≤3-way
release (470 tables, 21 million cells; ``benchmarks.suites.tables``), from the raked tables
disagreeing by up to 139 counts: with no floor to speak of (10⁻¹² of the mean) 300 sweeps leave
1.0 count; with φ = 10⁻² n / 10⁶ cells (4.9·10⁻⁴ a cell) 200 sweeps leave 0.017 counts and the
total squared error against the true tables goes 4.94·10⁷ → 5.00·10⁷ (2.4·10⁹ for the raw
release). A floor of ε times each table's own mean converges faster (1.2·10⁻⁶ in 150 sweeps) but
moves the small tables by hundreds of counts (error 7.0·10⁷ on that release, ×3.6 on a 2-way
one), which is why the floor is one absolute amount.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .rounding import intersection_levels
from .tables import Attrs, broadcast, marginal

#: ε of step 1: the uniform floor, as a fraction of the total, added to every table.
FLOOR = 1e-2
#: ω of step 2, and how many sweeps without progress drop it to 1.
RELAX = 1.5
STALL_SWEEPS = 5


@dataclass(frozen=True)
class MutualFit:
    """The fitted tables (aligned with the input), the sweeps run, and the largest absolute
    disagreement between two tables on a shared attribute set at the end."""

    tables: list[np.ndarray]
    sweeps: int
    disagreement: float


def disagreement(tables_attrs: Sequence[Attrs], tables: Sequence[np.ndarray]) -> float:
    """The largest absolute difference between the marginals of two tables on the attributes
    they share (0 for consistent tables)."""
    worst = 0.0
    for U, members in _shared(tables_attrs, with_total=True).items():
        ms = [np.asarray(marginal(tables[t], tables_attrs[t], U), dtype=np.float64) for t in members]
        worst = max(worst, float(np.max(np.maximum.reduce(ms) - np.minimum.reduce(ms), initial=0.0)))
    return worst


def _shared(tables_attrs: Sequence[Attrs], *, with_total: bool) -> dict[Attrs, list[int]]:
    """Every attribute set that two or more tables contain (the intersections of the tables),
    largest first, with the tables containing it."""
    out: dict[Attrs, list[int]] = {}
    for U in sorted(intersection_levels(tables_attrs), key=lambda U: (-len(U), U)):
        if U == () and not with_total:
            continue
        members = [t for t, T in enumerate(tables_attrs) if set(U) <= set(T)]
        if len(members) > 1:
            out[U] = members
    return out


def fit_mutually(tables_attrs: Sequence[Attrs], tables: Sequence[np.ndarray], weights: np.ndarray,
                 total: float, *, tol: float, max_sweeps: int,
                 deadline: float | None = None) -> MutualFit:
    """The tables of the module docstring from non-negative ``tables`` (on ``tables_attrs``,
    table weights ``weights`` c_T > 0) and their common total ``total``."""
    n = max(0.0, float(total))
    attrs = [tuple(T) for T in tables_attrs]
    if n == 0.0:
        zeros = [np.zeros(np.shape(t)) for t in tables]
        return MutualFit(zeros, 0, 0.0)
    mu = [np.maximum(np.asarray(t, dtype=np.float64), 0.0) for t in tables]
    floor = FLOOR * n / max(max(m.size for m in mu), 1)
    mu = [m + floor for m in mu]
    shared = _shared(attrs, with_total=False)
    c = np.asarray(weights, dtype=np.float64)
    alpha = {U: c[members] / float(np.sum(c[members])) for U, members in shared.items()}
    limit = tol * max(1.0, n)
    omega, best, stall, worst, sweep = RELAX, math.inf, 0, math.inf, 0
    for sweep in range(1, max_sweeps + 1):  # noqa: B007 — the count is reported
        worst = 0.0
        for U, members in shared.items():
            ms = [marginal(mu[t], attrs[t], U) for t in members]
            log_r = sum((a * np.log(m) for a, m in zip(alpha[U], ms, strict=True)),
                        start=np.zeros(()))
            r = np.exp(log_r)
            for t, m in zip(members, ms, strict=True):
                worst = max(worst, float(np.max(np.abs(m - r), initial=0.0)))
                mu[t] = mu[t] * broadcast((r / m) ** omega, U, attrs[t])
        for t, m in enumerate(mu):
            mu[t] = m * (n / float(m.sum()))
        if deadline is not None and time.monotonic() > deadline:
            break
        # the sweep's own measure is taken before each update; the stop is the tables' own
        if worst <= limit and disagreement(attrs, mu) <= limit:
            break
        if worst < best:
            best, stall = worst, 0
        else:
            stall += 1
            if stall >= STALL_SWEEPS and omega != 1.0:
                omega, stall = 1.0, 0
    return MutualFit(mu, sweep, disagreement(attrs, mu))

