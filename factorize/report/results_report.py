"""Released answers → :class:`~factorize.report.model.Report` (``factorize report --results``).

Reads an answers file written by ``factorize run`` (``executor.output.read_answers``): the
metadata says which workload, guarantee and noise produced it. The figure follows the
workload: bars with 95% error bars grouped per table (named by their attributes) for
marginals, a line with its 95% band for CDFs — one per group for a CDF crossed with other
attributes (``kron(prefix:85, identity:2)``: the age CDF per sex) —, points with error bars
otherwise; the post-processed column is drawn over the estimates; a second figure shows the
interval half-widths on their own scale (in counts and relative), since ±2 is invisible next
to counts of 30,000. Queries are named by their labels (the answers file's ``label``
column: ``sex=Female, race=White``, ``age in 17..37``) in the table and, when few, on the
axis. The table lists the first answers and says where all of them are. The numbers are
the file's.
"""

from __future__ import annotations

import contextlib
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
    attributes = list((meta.get("domain") or {}).get("attributes", []))
    kind, groups, series = _plot_kind(spec, attributes, (meta.get("domain") or {}).get("sizes"))
    labels = [str(x) for x in cols["label"]] if "label" in cols else None
    warnings = []
    if meta.get("test_mode"):
        warnings.append("TEST MODE: these answers were produced with --seed (reproducible noise) "
                        "and are NOT PRIVATE.")
    title = f"Released answers: {spec}"
    g = meta.get("guarantee")
    gtxt = json.dumps(g, ensure_ascii=False)  # as stated, when it is not a guarantee we read
    if isinstance(g, dict):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            gtxt = guarantee_text(guarantee_from_dict(g))
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
    series_named = None
    if series is not None:
        series_named = [(name, rows) for name, rows in series]
    axis = None
    if series_named and series_named[0][0].startswith("axis:"):
        axis = series_named[0][0][5:]
        series_named = series_named[1:]
        if labels is not None:  # the full CDF's label names its group in value labels
            series_named = [(labels[int(r[-1])] if r.size and labels[int(r[-1])] != "total" else n, r)
                            for n, r in series_named]
    fig = plots.results_plot(est, lo, hi, kind=kind, groups=groups, post=post,
                             series=series_named, tick_labels=labels,
                             xlabel=f"{axis} (code, increasing): the CDF's cut-off" if axis else None,
                             title=f"Estimates with 95% intervals: {spec}")
    figures = [Figure(fig, "estimates with intervals", "estimates")]
    if np.all(np.isfinite(lo)) and est.size:
        figures.append(Figure(plots.interval_width_plot(
            hi - est, est, groups=groups,
            title="95% interval half-width of every answer (counts, and relative to the estimate)"),
            "interval half-widths", "intervals"))
    header = (["query"] + (["label"] if labels is not None else [])
              + ["estimate", "95% low", "95% high"] + (["post-processed"] if post is not None else []))
    rows = [header]
    for i in range(min(TABLE_ROWS, est.size)):
        row = ([str(int(cols["query"][i]))] + ([labels[i]] if labels is not None else [])
               + [f"{est[i]:.6g}", _num(lo[i]), _num(hi[i])])
        if post is not None:
            row.append(f"{post[i]:.6g}")
        rows.append(row)
    more = ([f"All {est.size} answers."] if est.size <= TABLE_ROWS else
            [f"The first {TABLE_ROWS} of {est.size} answers; all of them, with their labels, "
             f"standard errors and intervals, are in {Path(path).name}."])
    sections = [Section("How these answers were produced", paras, figures=figures),
                Section("Estimates", more, table=rows)]
    return Report(title, subtitle, sections, numbers, warnings)


def _num(x: float) -> str:
    return f"{x:.6g}" if np.isfinite(x) else "–"


def _plot_kind(spec: str, attributes: list[str], sizes: Any = None
               ) -> tuple[str, list[tuple[str, int, int]] | None, list[tuple[str, np.ndarray]] | None]:
    """(``"marginals"`` with table groups | ``"cdf"`` (with one series per group of the other
    attributes for a CDF crossed with identities) | ``"generic"``, groups, series)."""
    from workloads import parse_workload

    try:
        W = parse_workload(spec)
    except Exception:  # noqa: BLE001 - an unknown spec still gets a generic plot
        return "generic", None, None
    series = _cdf_series(W, attributes, sizes)
    if series is not None:
        return "cdf", None, series
    from .plan_report import _marginal_groups

    groups = _marginal_groups(W, attributes)
    return ("marginals", groups, None) if groups else ("generic", None, None)


def _cdf_series(W: Any, attributes: list[str], sizes: Any) -> list[tuple[str, np.ndarray]] | None:
    """A CDF (``prefix:n``), or one Kronecker factor a prefix and every other an identity or a
    total: the query indices of each CDF, named by the other attributes' codes."""
    from workloads.builders import prefix

    def is_prefix(f: Any) -> bool:
        n = int(f.shape[1])
        return int(f.shape[0]) == n and n * n <= 1 << 22 and np.array_equal(f.dense(), prefix(n).dense())

    factors = getattr(W, "factors", None)
    if factors is None:
        axis = attributes[0] if len(attributes) == 1 else "value"
        return [(f"axis:{axis}", np.zeros(0, dtype=np.int64)), ("", np.arange(W.shape[0]))] \
            if is_prefix(W) else None
    kinds = []
    for f in factors:
        k, n = (int(x) for x in f.shape)
        if k == 1 and np.array_equal(f.dense(max_entries=1 << 22), np.ones((1, n))):
            kinds.append("total")
        elif k == n and n <= 1 << 11 and np.array_equal(f.dense(), np.eye(n)):
            kinds.append("identity")
        elif is_prefix(f):
            kinds.append("prefix")
        else:
            return None
    if kinds.count("prefix") != 1:
        return None
    named = sizes is not None and len(attributes) == len(factors)
    shape = [int(f.shape[0]) for f in factors]
    p = kinds.index("prefix")
    idx = np.arange(W.shape[0]).reshape(shape)
    names = attributes if named else [f"factor {j}" for j in range(len(factors))]
    out: list[tuple[str, np.ndarray]] = [(f"axis:{names[p]}", np.zeros(0, dtype=np.int64))]
    others = [j for j in range(len(factors)) if j != p]
    for combo in np.ndindex(*[shape[j] for j in others]):
        sl: list[int | slice] = [0] * len(factors)
        for j, c in zip(others, combo, strict=True):
            sl[j] = c
        sl[p] = slice(None)
        label = ", ".join(f"{names[j]}={c}" for j, c in zip(others, combo, strict=True) if kinds[j] == "identity")
        out.append((label, idx[tuple(sl)]))
    if len(out) > 13:
        return None  # too many lines to read: the generic plot
    return out
