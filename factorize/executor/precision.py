"""Per-table precision of a plan: each named table's standard errors (``executor.labels``'s
tables over the plan's per-query standard deviations), and a hint when the smallest tables
come out the least precise.

Per-query standard deviation, as the plan states it (``expected_error``):

* dense / Kronecker plans: ``√v · ‖r_i‖₂``, v the noise's variance bound, r_i the rows of R;
* structured plans: ``√v · ‖r_i‖₂`` from the reconstruction's exact row norms, v the variance
  of the noise the sampler draws (``expected_error.noise_variance``).

Other plan kinds (projection, local) state no per-query deviation: :func:`per_query_std`
raises ``NotImplementedError`` naming the kind, and the callers print nothing per table.

The hint. A γ_F-optimal plan minimises the *total* variance, so a small table (few cells, e.g.
sex × income) whose rows are also covered by the large ones can come out with a larger standard
error than a table of thousands of cells; a statistics office publishing the small table as a
headline would rather give it more weight. :func:`precision_hint` says so when the table with
the fewest cells has a root-mean-square standard error more than 1.25 times that of the table
with the most cells, and points
to ``--norm gamma_2``, whose objective is the worst query instead of the total. (Per-table
weights and targets that leave the answers unscaled are not implemented: ``scale(w, …)`` in a
spec multiplies the released answers too.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Tables printed by :func:`precision_lines` (the report lists all).
MAX_LINES = 40
#: :func:`precision_hint` speaks when the smallest table's RMS standard error exceeds the
#: largest table's by this factor.
HINT_RATIO = 1.25


@dataclass(frozen=True)
class TablePrecision:
    """One table: its name, number of answers (cells) and standard errors (smallest, largest,
    root mean square over its cells)."""

    name: str
    cells: int
    std_min: float
    std_max: float
    std_rms: float


def per_query_std(plan: Any) -> np.ndarray:
    """The per-query standard deviations the plan states (module docstring)."""
    if hasattr(plan, "reconstruction") and "noise_variance" in getattr(plan, "expected_error", {}):
        v = float(plan.expected_error["noise_variance"])
        out: np.ndarray = np.sqrt(v * plan.reconstruction.row_sq_norms())
        return out
    if hasattr(plan, "factorization") and hasattr(plan, "noise"):
        out = math.sqrt(plan.noise.variance_bound) * plan.factorization.row_norms_R()
        return out
    raise NotImplementedError(f"a {type(plan).__name__} states no per-query standard deviation")


def table_precision(plan: Any, workload: Any, std: np.ndarray | None = None) -> list[TablePrecision]:
    """Each table of ``workload`` (the plan's, rebuilt from its spec) with its standard errors
    (``std``: :func:`per_query_std` when the caller has it already)."""
    from .labels import workload_tables

    std = per_query_std(plan) if std is None else std
    out = []
    for t in workload_tables(workload, plan.domain):
        s = std[t.start:t.stop]
        out.append(TablePrecision(t.name, t.rows, float(s.min()), float(s.max()),
                                  float(math.sqrt(float(np.mean(s * s))))))
    return out


def precision_hint(tables: list[TablePrecision]) -> str | None:
    """A hint when the table with the fewest cells is more than :data:`HINT_RATIO` times less
    precise (RMS) than the one with the most (module docstring), else None."""
    if len(tables) < 2:
        return None
    smallest = min(tables, key=lambda t: (t.cells, -t.std_rms))
    largest = max(tables, key=lambda t: (t.cells, t.std_rms))
    if smallest.cells == largest.cells or not smallest.std_rms > HINT_RATIO * largest.std_rms:
        return None
    return (f"the smallest table ({smallest.name!r}, {smallest.cells} cells) has a standard error "
            f"{smallest.std_rms / largest.std_rms:.2g}× the largest's ({largest.name!r}, "
            f"{largest.cells} cells: {smallest.std_rms:.4g} against {largest.std_rms:.4g}): the "
            "default objective (total variance) spends the budget on the large tables; plan with "
            "--norm gamma_2 to minimise the worst query instead")


def precision_lines(plan: Any) -> list[str]:
    """The per-table lines of ``inspect`` and ``plan`` (empty for a kind that states no
    per-query deviation, or a workload that cannot be rebuilt without its files)."""
    from workloads.spec import parse_workload

    try:
        W = parse_workload(plan.workload["spec"], embedded=getattr(plan, "embedded", None) or {},
                           read_files=False)
        tables = table_precision(plan, W)
    except NotImplementedError:
        return []
    width = min(max(len(t.name) for t in tables), 32)
    lines = [f"tables      {len(tables)}; standard error per table (smallest … largest, RMS over its cells):"]
    for t in tables[:MAX_LINES]:
        name = t.name if len(t.name) <= width else t.name[:width - 1] + "…"
        lines.append(f"  {name:<{width}}  {t.cells:>9} cells  std {t.std_min:.4g} … {t.std_max:.4g}"
                     f"  (RMS {t.std_rms:.4g})")
    if len(tables) > MAX_LINES:
        lines.append(f"  … and {len(tables) - MAX_LINES} more tables (the plan report lists every one)")
    hint = precision_hint(tables)
    if hint is not None:
        lines.append(f"hint        {hint}")
    return lines
