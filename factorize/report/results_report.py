"""Released answers → :class:`~factorize.report.model.Report` (``factorize report --results``).

Reads an answers file written by ``factorize run`` (``executor.output.read_answers``): the
metadata says which workload, guarantee and noise produced it; every answer carries its table
(``table``) and its cell as one column per attribute, in value labels (the plan's public schema;
codes without one) — ``executor.labels``. The report is built from those columns alone, per
table, in the file's order:

* **One panel per table** (:func:`_panel`), titled with the table's name, axes in its value
  labels, every cell drawn: a line with its 95% band along a CDF's cut-offs or a range table's
  intervals — one line per group of the other attributes (the age CDF per sex), a heat map
  beyond :data:`MAX_SERIES` groups —; bars with 95% whiskers for a table of at most
  :data:`MAX_BAR_CELLS` cells; a heat map for a larger table crossing two or more attributes
  (rows: all but the last attribute, columns: the last); a line with its band along the cells
  of any other table (one attribute's many values). Panels are drawn for the first
  ``max_panels`` tables (:data:`MAX_PANELS`) and the report says how many are shown.
* **Every answer reachable**: up to :data:`INLINE_ANSWERS` answers in all, each table's answers
  in pages of ``model.PAGE_ROWS`` in the report; beyond, one tidy CSV per table beside the report
  (``<report>_files/tables/``, named and laid out as ``run --tables`` writes them:
  ``executor.tables``), linked from it.
* **What the guarantee means**: in words, and for ρ-zCDP as (ε, δ) at several δ
  (``plan_report.zcdp_rows``: ``privacy.zcdp``'s conversions).
* **The dataset's ledger history** when the release was charged to a ledger and the report is
  given it (``ledger``): the budget, spent, remaining and every charge
  (``ledger.Ledger.summary``), this release's marked and its file checked against the SHA-256
  the ledger recorded.

The numbers are the file's.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .model import DataFile, Panel, Report, Section, paged, pages

#: Panels are drawn for at most this many tables (the first ones, in the file's order).
MAX_PANELS = 100
#: A table of at most this many cells is drawn as bars.
MAX_BAR_CELLS = 40
#: A CDF or range table is drawn as at most this many lines (one per group), beyond as a heat map.
MAX_SERIES = 10
#: No panel for a table of more cells than this (its answers are still all in the report).
MAX_PANEL_CELLS = 1_000_000
#: Answers in all up to which every table's answers are paged in the report itself.
INLINE_ANSWERS = 20_000

_FORMS = {"cdf": "≤ ", "range": "in "}


@dataclass(frozen=True)
class _Column:
    """One attribute column of a table: its name in the answers file, its attribute, its form
    (``value``: value labels; ``cdf``: ``age ≤ 37``; ``range``: ``age in [25, 34]``), its
    distinct texts in order of appearance and each row's index into them."""

    name: str
    attribute: str
    form: str
    texts: list[str]
    codes: np.ndarray

    def tick(self, text: str) -> str:
        """A text as an axis label: a CDF's cut-off value (``37``), a range's interval
        (``[25, 34]``), a value label as it is."""
        if self.form == "value":
            return text
        rest = text[len(self.attribute) + 1 + len(_FORMS[self.form]):]
        if self.form == "range":  # [lo, hi], each a value label or its JSON string
            ends = _unquoted_list(rest[1:-1])
            return f"{ends[0]}–{ends[1]}" if len(ends) == 2 else rest
        return _unquoted_list(rest)[0] if rest.startswith('"') else rest


def _unquoted_list(text: str) -> list[str]:
    """The value labels of ``a, "b, c"`` (``executor.labels.quoted``: a label that could be
    misread is a JSON string): ``["a", "b, c"]``."""
    out, i, decoder = [], 0, json.JSONDecoder()
    while i < len(text):
        if text[i] == '"':
            try:
                value, i = decoder.raw_decode(text, i)
            except ValueError:
                return [text]
            out.append(str(value))
        else:
            j = text.find(", ", i)
            j = len(text) if j < 0 else j
            out.append(text[i:j])
            i = j
        if text.startswith(", ", i):
            i += 2
    return out or [text]


@dataclass(frozen=True)
class _Table:
    """The answers ``start .. stop-1`` of one table and its attribute columns; ``product``: its
    rows run over every combination of its columns' texts in row-major order (the last column
    fastest), so it can be reshaped to a grid."""

    name: str
    start: int
    stop: int
    columns: list[_Column]
    product: bool

    @property
    def rows(self) -> int:
        return self.stop - self.start

    def cell_labels(self, fallback: np.ndarray | None) -> list[str]:
        """Each row's cell in value labels (``Female, >50K``); the file's ``label`` column when
        the table has no attribute column (``total``)."""
        if not self.columns:
            if fallback is not None:
                return [str(x) for x in fallback[self.start:self.stop]]
            return ["total"] * self.rows
        parts = [[c.texts[i] for i in c.codes] for c in self.columns]
        return [", ".join(p) for p in zip(*parts, strict=True)]


def results_report(path: str | Path, *, ledger: str | Path | None = None,
                   max_panels: int = MAX_PANELS, inline_answers: int = INLINE_ANSWERS) -> Report:
    """The report of the answers file ``path`` (module docstring); ``ledger``: the ledger the
    release was charged to, for the dataset's history; ``max_panels``: panels for at most so
    many tables; ``inline_answers``: answers in all up to which they are paged in the report
    (beyond, one tidy file per table beside it)."""
    from factorize.executor.output import read_answers

    cols, meta = read_answers(path)
    spec = str(meta.get("workload", "?"))
    est = cols["estimate"]
    k = int(est.size)
    warnings = []
    if meta.get("test_mode"):
        warnings.append("TEST MODE: these answers were produced with --seed (reproducible noise) "
                        "and are NOT PRIVATE.")
    guarantee = _guarantee(meta.get("guarantee"))
    gtxt = json.dumps(meta.get("guarantee"), ensure_ascii=False)
    if guarantee is not None:
        from factorize.plan.manifest import guarantee_text

        gtxt = guarantee_text(guarantee)
    subtitle = (f"{k:,} answers · {gtxt} · {meta.get('neighbouring', '?')} neighbours · plan "
                f"sha256 {str(meta.get('plan_sha256', '?'))[:16]}…")
    numbers: dict[str, Any] = {"n_answers": k, "estimate_sum": float(np.sum(est))}
    tables = _tables(cols)
    sections = [_production_section(cols, meta, numbers)]
    if guarantee is not None:
        from .plan_report import privacy_section

        sections.append(privacy_section("Privacy guarantee", guarantee,
                                         str(meta.get("neighbouring", "add_remove")), []))
    book = _ledger_section(meta, Path(path), ledger, numbers)
    if book is not None:
        sections.append(book)
    sections.append(_tables_section(tables, cols, numbers, max_panels))
    sections.append(_answers_section(tables, cols, meta, Path(path), inline_answers))
    return Report(f"Released answers: {spec}", subtitle, sections, numbers, warnings)


def _guarantee(g: Any) -> Any:
    """The release's guarantee read back (None when it is not one this version reads)."""
    from factorize.privacy import guarantee_from_dict

    if isinstance(g, dict):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return guarantee_from_dict(g)
    return None


def _production_section(cols: dict[str, np.ndarray], meta: dict[str, Any],
                        numbers: dict[str, Any]) -> Section:
    """The noise, the intervals (or a projection's bound) and the post-processing."""
    est = cols["estimate"]
    noise, ci = meta.get("noise", {}), meta.get("ci", {})
    paras = [f"Noise: {noise.get('family', '?')} ({noise.get('sampler', '?')}), scale "
             f"{noise.get('scale', float('nan')):.6g}."]
    lo, hi = cols.get("ci_low"), cols.get("ci_high")
    if lo is not None and hi is not None and "std_error" in cols and np.all(np.isfinite(lo)) and est.size:
        half = hi - est
        paras.append(f"95% intervals ({ci.get('method', '?')}, multiplier "
                     f"{ci.get('multiplier', float('nan')):.4g}): half-widths from "
                     f"{np.min(half):.4g} to {np.max(half):.4g}.")
        numbers["ci_halfwidth_max"] = float(np.max(half))
    elif meta.get("rmse_bound") is not None:
        paras.append(f"A projection mechanism ({meta.get('mechanism')}): no per-query intervals; "
                     f"RMSE per query ≤ {meta['rmse_bound']:.6g} ({meta.get('rmse_bound_note', '')}).")
        numbers["rmse_bound"] = float(meta["rmse_bound"])
    if isinstance(meta.get("estimates"), str):
        paras.append(f"Estimates: {meta['estimates']}.")
    pp = meta.get("postprocess")
    if "estimate_postprocessed" in cols and isinstance(pp, dict):
        paras.append(f"Post-processed column ({pp.get('method', '?')}): n̂ = {pp.get('n_hat', 0):.6g}."
                     + (f" RMSE ≤ {pp['rmse_bound']:.6g}." if "rmse_bound" in pp else ""))
    return Section("How these answers were produced", paras)


# ------------------------------------------------------------------------------ the tables

def _tables(cols: dict[str, np.ndarray]) -> list[_Table]:
    """The release's tables: runs of one ``table`` value, each with the attribute columns it
    fills (one table, ``all answers``, in a file without a ``table`` column)."""
    from factorize.executor.labels import ANSWER_COLUMNS

    k = int(cols["estimate"].size)
    names = cols.get("table")
    if names is None:
        return [_Table("all answers", 0, k, [], False)] if k else []
    starts = [0, *(np.flatnonzero(names[1:] != names[:-1]) + 1).tolist()] if k else []
    attributes = [n for n in cols if n not in ANSWER_COLUMNS]
    out = []
    for s, e in zip(starts, [*starts[1:], k], strict=True):
        columns = [_column(n, cols[n][s:e]) for n in attributes if cols[n][s] != ""]
        out.append(_Table(str(names[s]), s, e, columns, _is_product(columns, e - s)))
    return out


def _column(name: str, values: np.ndarray) -> _Column:
    """A table's column: its distinct texts in order, each row's index, its form (the texts'
    shape as ``executor.labels`` writes them)."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64,
                        count=values.size)
    texts = list(index)
    attribute = name.removesuffix(" (attribute)")
    form = "value"
    if all(t.startswith(f"{attribute} ≤ ") for t in texts):
        form = "cdf"
    elif all(t.startswith(f"{attribute} in [") and t.endswith("]") for t in texts):
        form = "range"
    return _Column(name, attribute, form, texts, codes)


def _is_product(columns: list[_Column], rows: int) -> bool:
    """Whether the rows run over every combination of the columns' texts, row-major."""
    sizes = [len(c.texts) for c in columns]
    if not columns or math.prod(sizes) != rows:
        return False
    grid = np.unravel_index(np.arange(rows), sizes)
    return all(np.array_equal(c.codes, g) for c, g in zip(columns, grid, strict=True))


def _tables_section(tables: list[_Table], cols: dict[str, np.ndarray], numbers: dict[str, Any],
                    max_panels: int) -> Section:
    """One panel per table (the first ``max_panels``) and the list of every table."""
    shown = tables[:max(0, max_panels)]
    panels, kinds = [], []
    for i, t in enumerate(shown):
        kind, panel = _panel(t, cols, i)
        kinds.append(kind)
        if panel is not None:
            panels.append(panel)
    paras = [f"The release has {len(tables):,} tables; each has its panel, titled with its name, "
             "its axes in value labels and every cell drawn: bars with their 95% intervals for a "
             f"table of up to {MAX_BAR_CELLS} cells, a line and its 95% band along a CDF or range, "
             "a heat map for a larger table of two or more attributes (its half-widths under it)."
             if len(shown) == len(tables) else
             f"The release has {len(tables):,} tables: panels are drawn for the first "
             f"{len(shown):,} of them, in the release's order (the first {max_panels:,}); every "
             "table is listed below and its answers are all in this report's answers section."]
    none = [t.name for t, kind in zip(shown, kinds, strict=True) if kind == "none"]
    if none:
        paras.append(f"No panel for {len(none):,} table(s) of more than {MAX_PANEL_CELLS:,} cells "
                     f"({', '.join(none[:5])}{', …' if len(none) > 5 else ''}): their answers are "
                     "in the answers section.")
    numbers["n_tables"] = len(tables)
    numbers["panels"] = [p.table for p in panels]
    est, lo, hi = cols["estimate"], cols.get("ci_low"), cols.get("ci_high")
    rows = [["table", "cells", "panel", "sum of estimates", "95% half-width"]]
    for j, t in enumerate(tables):
        sl = slice(t.start, t.stop)
        half = _half_widths(est[sl], None if lo is None else lo[sl], None if hi is None else hi[sl])
        crosstab = not t.columns or (t.product and all(c.form == "value" for c in t.columns))
        total = f"{float(np.sum(est[t.start:t.stop])):.6g}" if crosstab else "–"
        rows.append([t.name, f"{t.rows:,}", kinds[j] if j < len(kinds) else "not drawn", total, half])
    paras.append("Sum of estimates: every cell of a cross-tabulation (a marginal) added up — the "
                 "table's estimate of the number of records.")
    return Section("Tables", paras, panels=panels, **paged(rows, "tables"))


def _panel(t: _Table, cols: dict[str, np.ndarray], i: int) -> tuple[str, Panel | None]:
    """(the kind of panel, the panel) of table ``t`` (module docstring); ``("none", None)`` for
    a table of more than :data:`MAX_PANEL_CELLS` cells."""
    from . import plots

    if t.rows > MAX_PANEL_CELLS or t.rows == 0:
        return "none", None
    sl = slice(t.start, t.stop)
    est = cols["estimate"][sl]
    lo = cols["ci_low"][sl] if "ci_low" in cols else None
    hi = cols["ci_high"][sl] if "ci_high" in cols else None
    post = cols["estimate_postprocessed"][sl] if "estimate_postprocessed" in cols else None
    ordered = [c for c in t.columns if c.form != "value"]
    if t.product and len(ordered) == 1:
        axis = ordered[0]
        others = [c for c in t.columns if c is not axis]
        j = t.columns.index(axis)
        grid = np.arange(t.rows).reshape([len(c.texts) for c in t.columns])
        lines = np.moveaxis(grid, j, -1).reshape(-1, len(axis.texts))
        names = [", ".join(f"{c.attribute}={c.texts[x]}" for c, x in zip(others, combo, strict=True))
                 for combo in np.ndindex(*[len(c.texts) for c in others])]
        ticks = [axis.tick(x) for x in axis.texts]
        xlabel = f"{axis.attribute} ≤ (cut-off)" if axis.form == "cdf" else f"{axis.attribute} (range)"
        if len(names) <= MAX_SERIES:
            png = plots.line_panel(est, lo, hi, series=list(zip(names, lines, strict=True)),
                                   x_labels=ticks, title=t.name, xlabel=xlabel, post=post)
            kind = f"{axis.form} lines ({len(names)})" if len(names) > 1 else f"{axis.form} line"
        else:
            png = plots.heatmap_panel(est[lines], row_labels=names, col_labels=ticks,
                                      row_name=", ".join(c.attribute for c in others),
                                      col_name=xlabel, title=t.name)
            kind = f"{axis.form} heat map"
    elif t.rows <= MAX_BAR_CELLS:
        png = plots.bar_panel(est, lo, hi, labels=t.cell_labels(cols.get("label")), title=t.name,
                              xlabel=", ".join(c.attribute for c in t.columns) or "cell", post=post)
        kind = "bars"
    elif t.product and len(t.columns) >= 2:
        head, last = t.columns[:-1], t.columns[-1]
        r = t.rows // len(last.texts)
        row_labels = [", ".join(c.texts[x] for c, x in zip(head, combo, strict=True))
                      for combo in np.ndindex(*[len(c.texts) for c in head])]
        png = plots.heatmap_panel(est.reshape(r, len(last.texts)), row_labels=row_labels,
                                  col_labels=[last.tick(x) for x in last.texts],
                                  row_name=", ".join(c.attribute for c in head),
                                  col_name=last.attribute, title=t.name)
        kind = "heat map"
    else:
        labels = (t.cell_labels(cols.get("label")) if len(t.columns) != 1
                  else [t.columns[0].tick(t.columns[0].texts[x]) for x in t.columns[0].codes])
        png = plots.line_panel(est, lo, hi, series=[("", np.arange(t.rows))], x_labels=labels,
                               title=t.name, xlabel=", ".join(c.attribute for c in t.columns) or "cell",
                               post=post)
        kind = "line"
    half = _half_widths(est, lo, hi)
    caption = f"{t.name} · {kind} · {t.rows:,} cells · " + (
        f"95% half-width {half}" if half != "–" else "no per-query intervals")
    return kind, Panel(png, f"{kind} of table {t.name}", f"panel_{i:04d}", t.name, caption)


# ----------------------------------------------------------------------------- the answers

def _answers_section(tables: list[_Table], cols: dict[str, np.ndarray], meta: dict[str, Any],
                     path: Path, inline: int) -> Section:
    """Every answer, table by table: pages in the report up to ``inline`` answers in all, else
    one tidy file per table beside it."""
    from factorize.executor.tables import TIDY_COLUMNS

    numeric = [c for c in TIDY_COLUMNS if c in cols]
    k = int(cols["estimate"].size)
    if k > inline:
        return _answer_files(tables, cols, meta, path, numeric, inline)
    heads = {"estimate": "estimate", "std_error": "std error", "ci_low": "95% low",
             "ci_high": "95% high", "estimate_postprocessed": "post-processed"}
    out = []
    for t in tables:
        header = ["query", *[c.name for c in t.columns], *[heads[c] for c in numeric]]
        body = []
        attrs = [[c.texts[x] for x in c.codes] for c in t.columns]
        for r in range(t.rows):
            q = t.start + r
            body.append([str(int(cols["query"][q])), *[a[r] for a in attrs],
                         *[_num(float(cols[c][q])) for c in numeric]])
        if not t.columns and "label" in cols:  # a table without attribute columns: its labels
            header.insert(1, "label")
            for r, row in enumerate(body):
                row.insert(1, str(cols["label"][t.start + r]))
        out += pages([header, *body], f"{t.name}: answers")
    return Section("Answers", [f"All {k:,} answers, table by table (open a table to see its "
                               f"answers; long tables in pages). They are also in {path.name}."],
                   pages=out)


def _answer_files(tables: list[_Table], cols: dict[str, np.ndarray], meta: dict[str, Any],
                  path: Path, numeric: list[str], inline: int) -> Section:
    """One tidy CSV per table (``executor.tables``' names and columns), linked."""
    from factorize.executor.labels import Table
    from factorize.executor.tables import table_file_names

    names = table_file_names([Table(t.name, t.start, t.stop, ()) for t in tables])
    files = []
    for t, name in zip(tables, names, strict=True):
        columns: dict[str, Any] = {c.name: np.array(c.texts, dtype=object)[c.codes] for c in t.columns}
        columns.update({c: cols[c][t.start:t.stop] for c in numeric})
        files.append(DataFile(f"tables/{name}", f"{t.name} ({t.rows:,} answers)", columns,
                              {**meta, "table": t.name}))
    k = int(cols["estimate"].size)
    return Section("Answers", [
        f"{k:,} answers, more than the {inline:,} this report shows inline: each table's "
        "answers are in its own tidy CSV file beside this report (the table's attribute columns in "
        "value labels, then the estimates and intervals, as `factorize run --tables` writes them); "
        f"all of them are also in {path.name}."], files=files)


def _half_widths(est: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None) -> str:
    """The 95% half-widths of a table's answers: ``2.92 … 3.77``, one number when both ends
    read the same to 4 digits, ``–`` without intervals."""
    if lo is None or hi is None or not np.all(np.isfinite(lo)) or not est.size:
        return "–"
    h = hi - est
    a, b = f"{h.min():.4g}", f"{h.max():.4g}"
    return a if a == b else f"{a} … {b}"


def _num(x: float) -> str:
    return f"{x:.6g}" if np.isfinite(x) else "–"


# ------------------------------------------------------------------------------ the ledger

def _ledger_section(meta: dict[str, Any], path: Path, ledger: str | Path | None,
                    numbers: dict[str, Any]) -> Section | None:
    """The dataset's budget and history when the release was charged to ``ledger``."""
    record = meta.get("ledger")
    if not isinstance(record, dict):
        if ledger is None:
            return None
        return Section("Privacy-budget ledger", [
            "This release records no ledger charge (it was released without --ledger, or in test "
            "mode): the ledger given is not shown."])
    dataset, charge = str(record.get("dataset")), record.get("charge_id")
    if ledger is None:
        return Section("Privacy-budget ledger", [
            f"This release was charged to dataset {dataset!r} as charge #{charge} of a privacy-"
            "budget ledger; the report was made without that ledger, so the dataset's history is "
            "not shown."])
    from fractions import Fraction

    from factorize.ledger import Ledger
    from factorize.ledger.composition import describe
    from factorize.plan.files import file_sha256
    from factorize.plan.manifest import guarantee_text

    book = Ledger.open(ledger)  # verified: a tampered ledger is refused, not shown
    summary = book.summary(dataset)
    ds = summary["datasets"][0]

    def words(d: dict[str, str]) -> str:
        return describe({k: Fraction(v) for k, v in d.items()})

    sha = file_sha256(path)
    rows = [["charge", "charged at (UTC)", "guarantee", "cost", "plan sha256", "status",
             "released at (UTC)", "output"]]
    mine = None
    for c in ds["history"]:
        g = _guarantee(c["guarantee"])
        this = c["id"] == charge
        if this:
            mine = c
        out = c.get("output_sha256")
        rows.append([f"#{c['id']}" + (" (this release)" if this else ""), _when(c["charged_at"]),
                     guarantee_text(g) if g is not None else json.dumps(c["guarantee"]),
                     words(c["cost"]), f"{c['plan_sha256'][:16]}…", str(c["status"]),
                     _when(c.get("released_at")),
                     "this file" if out == sha else (f"{out[:16]}…" if out else "–")])
    budget = _guarantee(ds["budget"])
    paras = [f"Dataset {dataset!r} in ledger {Path(ledger).name} (verified: hash chain, tables and "
             f"anchor): budget {guarantee_text(budget) if budget is not None else ds['budget']}, spent "
             f"{words(ds['spent'])}, remaining {words(ds['remaining'])}, "
             f"{len(ds['history'])} charge(s) under {ds['relation']} neighbours."]
    if mine is None:
        paras.append(f"The ledger has no charge #{charge} for this dataset: this answers file does "
                     "not belong to this ledger.")
    elif mine.get("output_sha256") == sha:
        paras.append(f"This file is the output charge #{charge} recorded (its SHA-256 matches).")
    else:
        paras.append(f"This file's SHA-256 is not the one charge #{charge} recorded: it is not the "
                     "file that release wrote, or it was changed since.")
    numbers["ledger"] = {"dataset": dataset, "charge_id": charge, "charges": len(ds["history"]),
                         "spent": ds["spent"], "remaining": ds["remaining"],
                         "output_matches": mine is not None and mine.get("output_sha256") == sha}
    return Section("Privacy-budget ledger", paras, table=rows)


def _when(stamp: Any) -> str:
    """A ledger time stamp (ISO 8601, UTC) to the second: ``2026-11-28 04:17:52``."""
    return str(stamp)[:19].replace("T", " ") if stamp else "–"
