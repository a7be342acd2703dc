"""Released answers → :class:`~factorize.report.model.Report` (``factorize report --results``).

Reads an answers file written by ``factorize run`` (``executor.output.read_answers``): the
metadata says which workload, guarantee and noise produced it. The figure follows the
workload: bars with 95% error bars grouped per table for marginals, a line with a 95% band
for CDFs (prefix sums), points with error bars otherwise. The numbers are the file's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .model import Figure, Report, Section

#: Rows of the estimates table shown in the report (all are in the answers file).
TABLE_ROWS = 60


def results_report(path: str | Path) -> Report:
    from factorize.executor.output import read_answers
    from factorize.plan.model import guarantee_text
    from factorize.privacy import guarantee_from_dict

    from . import plots

    cols, meta = read_answers(path)
    spec = str(meta.get("workload", "?"))
    est = cols["estimate"]
    lo = cols.get("ci_low", np.full(est.size, np.nan))
    hi = cols.get("ci_high", np.full(est.size, np.nan))
    post = cols.get("estimate_postprocessed")
    kind, groups = _plot_kind(spec, list((meta.get("domain") or {}).get("attributes", [])))
    warnings = []
    if meta.get("test_mode"):
        warnings.append("TEST MODE: these answers were produced with --seed (reproducible noise) "
                        "and are NOT PRIVATE.")
    title = f"Released answers: {spec}"
    g = meta.get("guarantee")
    try:
        gtxt = guarantee_text(guarantee_from_dict(g))
    except (KeyError, TypeError, ValueError):
        gtxt = json.dumps(g, ensure_ascii=False)
    subtitle = (f"{est.size} answers · {gtxt} · "
                f"{meta.get('neighbouring', '?')} neighbours · plan sha256 "
                f"{str(meta.get('plan_sha256', '?'))[:16]}…")
    noise = meta.get("noise", {})
    ci = meta.get("ci", {})
    paras = [f"Noise: {noise.get('family', '?')} ({noise.get('sampler', '?')}), scale "
             f"{noise.get('scale', float('nan')):.6g}."]
    numbers: dict[str, Any] = {"n_answers": int(est.size), "estimate_sum": float(np.sum(est))}
    if np.all(np.isfinite(lo)) and "std_error" in cols:
        half = hi - est
        paras.append(f"95% intervals ({ci.get('method', '?')}, multiplier "
                     f"{ci.get('multiplier', float('nan')):.4g}): half-widths from "
                     f"{np.min(half):.4g} to {np.max(half):.4g}.")
        numbers["ci_halfwidth_max"] = float(np.max(half))
    elif meta.get("rmse_bound") is not None:
        paras.append(f"A projection mechanism ({meta.get('mechanism')}): no per-query intervals; "
                     f"RMSE per query ≤ {meta['rmse_bound']:.6g} ({meta.get('rmse_bound_note', '')}).")
        numbers["rmse_bound"] = float(meta["rmse_bound"])
    if post is not None and "postprocess" in meta:
        pp = meta["postprocess"]
        paras.append(f"Post-processed column ({pp.get('method', '?')}): n̂ = {pp.get('n_hat', 0):.6g}."
                     + (f" RMSE ≤ {pp['rmse_bound']:.6g}." if "rmse_bound" in pp else ""))
    fig = plots.results_plot(est, lo, hi, kind=kind, groups=groups,
                             title=f"Estimates with 95% intervals: {spec}")
    figures = [Figure(fig, "estimates with intervals", "estimates")]
    header = ["query", "estimate", "95% low", "95% high"] + (["post-processed"] if post is not None else [])
    rows = [header]
    for i in range(min(TABLE_ROWS, est.size)):
        row = [str(int(cols["query"][i])), f"{est[i]:.6g}", _num(lo[i]), _num(hi[i])]
        if post is not None:
            row.append(f"{post[i]:.6g}")
        rows.append(row)
    more = [] if est.size <= TABLE_ROWS else [f"The first {TABLE_ROWS} of {est.size} answers; all "
                                              f"are in {Path(path).name}."]
    sections = [Section("How these answers were produced", paras, figures=figures),
                Section("Estimates", more, table=rows)]
    return Report(title, subtitle, sections, numbers, warnings)


def _num(x: float) -> str:
    return f"{x:.6g}" if np.isfinite(x) else "–"


def _plot_kind(spec: str, attributes: list[str]) -> tuple[str, list[tuple[str, int, int]] | None]:
    """(``"marginals"`` with table groups | ``"cdf"`` | ``"generic"``, groups)."""
    from workloads import parse_workload

    if spec.startswith("prefix:") and "x" not in spec:
        return "cdf", None
    try:
        W = parse_workload(spec)
    except Exception:  # noqa: BLE001 - an unknown spec still gets a generic plot
        return "generic", None
    from .plan_report import _marginal_groups

    groups = _marginal_groups(W, attributes)
    return ("marginals", groups) if groups else ("generic", None)
