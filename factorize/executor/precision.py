"""Per-table precision of a plan: each named table's standard errors (``executor.labels``'s
tables over the plan's per-query standard deviations), and a hint when the smallest tables
come out the least precise.

Per-query standard deviation, as the plan states it (``expected_error``):

* dense / Kronecker plans: ``√v · ‖r_i‖₂``, v the noise's variance bound, r_i the rows of R;
* structured plans: ``√v · ‖r_i‖₂`` from the reconstruction's exact row norms, v the variance
  of the noise the sampler draws (``expected_error.noise_variance``).

Other plan kinds (projection, local) state no per-query deviation: :func:`per_query_std`
raises ``NotImplementedError`` naming the kind, and the callers print nothing per table.

A plan with per-table targets (``plan.table_targets``) measures D·W; its stated deviations are
D·W's, and :func:`per_query_std` returns W's, ``std_i / d_{t(i)}`` — the answers it releases.
:func:`target_lines` then says, per table, the achieved standard error of its least precise
cell against the target (or the table's weight), whether the budget meets every target, and
the budget that meets them exactly: the worst ratio r = max_t SE_t/s_t scales as the noise's
σ, so ρ·r² under ρ-zCDP (σ ∝ 1/√ρ), ε·r under pure DP (scale ∝ 1/ε) — up to the lattice
grid's small inflation of the sensitivity, re-derived at the new budget —, and under (ε, δ) the ε
at which the analytic Gaussian (Balle & Wang 2018, Thm. 8) has σ/r at the same δ and
sensitivity (about: a discrete or zCDP-converted plan calibrates a little differently).

The hint. A γ_F-optimal plan minimises the *total* variance, so a small table (few cells, e.g.
sex × income) whose rows are also covered by the large ones can come out with a larger standard
error than a table of thousands of cells; a statistics office publishing the small table as a
headline would rather give it more weight. :func:`precision_hint` says so when the table with
the fewest cells has a root-mean-square standard error more than 1.25 times that of the table
with the most cells, and points
to ``--norm gamma_2``, whose objective is the worst query instead of the total. Per-table weights and
targets that leave the answers unscaled: ``factorize plan --table-weights | --table-targets``
(``plan.table_targets``; ``scale(w, …)`` in a spec instead multiplies the released answers too).
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
    from factorize.plan.table_targets import stated_scales

    if hasattr(plan, "reconstruction") and "noise_variance" in getattr(plan, "expected_error", {}):
        v = float(plan.expected_error["noise_variance"])
        out: np.ndarray = np.sqrt(v * plan.reconstruction.row_sq_norms())
    elif hasattr(plan, "factorization") and hasattr(plan, "noise"):
        out = math.sqrt(plan.noise.variance_bound) * plan.factorization.row_norms_R()
    else:
        raise NotImplementedError(f"a {type(plan).__name__} states no per-query standard deviation")
    scales = stated_scales(plan)
    return out if scales is None else out / scales.rows(0, out.size)


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
    from factorize.plan.errors import PlanError
    from workloads.spec import parse_workload

    try:
        W = parse_workload(plan.workload["spec"], embedded=getattr(plan, "embedded", None) or {},
                           read_files=False)
        tables = table_precision(plan, W)
    except NotImplementedError:
        return []
    except PlanError as exc:  # a malformed per-table targets record: no table's error is known
        return [f"tables      not shown: {exc}"]
    width = min(max(len(t.name) for t in tables), 32)
    lines = [f"tables      {len(tables)}; standard error per table (smallest … largest, RMS over its cells):"]
    for t in tables[:MAX_LINES]:
        name = t.name if len(t.name) <= width else t.name[:width - 1] + "…"
        lines.append(f"  {name:<{width}}  {t.cells:>9} cells  std {t.std_min:.4g} … {t.std_max:.4g}"
                     f"  (RMS {t.std_rms:.4g})")
    if len(tables) > MAX_LINES:
        lines.append(f"  … and {len(tables) - MAX_LINES} more tables (the plan report lists every one)")
    targets = target_lines(plan, tables)
    lines.extend(targets)
    hint = precision_hint(tables)
    if hint is not None and not targets:
        lines.append(f"hint        {hint}")
    return lines


@dataclass(frozen=True)
class TargetStatus:
    """Per-table targets against the plan: the worst ratio ``r = max_t SE_t/s_t`` (largest
    standard error of table t over its target), whether every target is met (r ≤ 1) and the
    budget that meets every target exactly (module docstring; None where it cannot be said)."""

    ratio: float
    met: bool
    budget: str | None


def target_status(plan: Any, tables: list[TablePrecision]) -> TargetStatus | None:
    """The status of a plan with targets (None: no targets, or weights)."""
    from factorize.plan.table_targets import stated_scales

    scales = stated_scales(plan)
    if scales is None or scales.request != "targets":
        return None
    by_name = {t.name: t for t in tables}
    r = max(by_name[t.name].std_max * t.scale for t in scales.tables)  # SE_t / s_t, s_t = 1/d_t
    return TargetStatus(r, r <= 1.0, _budget(plan, r))


def _budget(plan: Any, r: float) -> str | None:
    """The guarantee whose noise is σ/r (module docstring)."""
    g = plan.guarantee
    if g.kind == "zcdp":
        return f"rho={g.rho * r * r:.6g}"
    if g.kind == "pure_dp":
        return f"epsilon={g.epsilon * r:.6g}"
    noise = plan.noise
    if g.kind != "approx_dp" or noise.family != "gaussian":
        return None
    from factorize.privacy.gaussian import bisect_boundary, gaussian_delta

    sigma, sens = noise.scale / r, noise.sensitivity
    hi = max(1.0, 2.0 * g.epsilon)
    while gaussian_delta(hi, sigma, sens) > g.delta:
        hi *= 2.0
        if hi > 1e6:
            return None
    eps = bisect_boundary(lambda e: gaussian_delta(e, sigma, sens) <= g.delta, 0.0, hi)
    return f"about epsilon={eps:.6g},delta={g.delta:g}"


def target_lines(plan: Any, tables: list[TablePrecision]) -> list[str]:
    """``inspect`` / ``plan``'s lines on the plan's per-table weights or targets (none
    without): each table's request and achieved standard error, then the status."""
    from factorize.plan.table_targets import stated_scales

    scales = stated_scales(plan)
    if scales is None:
        return []
    by_name = {t.name: t for t in tables}
    width = min(max(len(t.name) for t in scales.tables), 32)
    if scales.request == "weights":
        total = sum(t.value * by_name[t.name].cells * by_name[t.name].std_rms ** 2 for t in scales.tables)
        shown = [t for t in scales.tables if t.value != 1.0] or list(scales.tables)
        return ([f"weights     {len(shown)} of {len(scales.tables)} tables weighted ≠ 1 (gamma_f "
                 f"minimises Σ_t w_t·(total variance of t) = {total:.6g}; gamma_2 max_t √w_t·SE_t):"]
                + [f"  {t.name[:width]:<{width}}  w {t.value:.4g}  RMS {by_name[t.name].std_rms:.4g}"
                   for t in shown[:MAX_LINES]]
                + ([f"  … and {len(shown) - MAX_LINES} more"] if len(shown) > MAX_LINES else []))
    lines = ["targets     per table, least met first: standard error of its least precise cell "
             "against the target"]
    ranked = sorted(scales.tables, key=lambda t: -by_name[t.name].std_max * t.scale)
    for t in ranked[:MAX_LINES]:
        se, s = by_name[t.name].std_max, 1.0 / t.scale
        what = f"se {t.value:.4g}" if t.kind == "se" else f"halfwidth {t.value:.4g} (se {s:.4g})"
        lines.append(f"  {t.name[:width]:<{width}}  target {what}  achieved {se:.4g}  "
                     f"({se / s:.3g}×: {'met' if se <= s else 'NOT met'})")
    if len(ranked) > MAX_LINES:
        lines.append(f"  … and {len(ranked) - MAX_LINES} more tables, each met if the status says so")
    st = target_status(plan, tables)
    assert st is not None  # targets stated
    lines.append(f"status      {'every target met' if st.met else 'NOT every target met'} at "
                 f"{plan.guarantee} (worst SE/target {st.ratio:.4g})"
                 + ("" if st.budget is None else f"; the budget that meets every target exactly: "
                    f"{st.budget}"))
    return lines
