"""The report figures: matplotlib (Agg) drawings returned as PNG bytes.

Every function draws on its own :class:`matplotlib.figure.Figure` with a
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg` — pyplot is never used, so no
figure, current axes or backend state leaks between calls or into the caller's session.
Each figure is drawn under matplotlib's default style plus a few fixed settings (so a user's
``matplotlibrc`` or style cannot change the output) and saved without a ``Software`` /
date stamp: identical inputs give byte-identical PNGs.

Sizes: 8 × 4 inches at 100 dpi (800 × 400 pixels; 11 × 4 for the two-panel
:func:`error_vs_n_plot`, taller for :func:`comparison_plot` with many rows).

Layout. The two figures of every plan report (:func:`per_query_std_plot`,
:func:`error_vs_n_plot`) are laid out once, before drawing, by :func:`_fixed_layout`: margins
in inches computed from what the figure holds (title lines, the widest tick label as the
axis formatter writes it, group names on the top axis, a colour bar) — not by matplotlib's
constrained layout, which measures every text artist again at draw time and was about 40%
of their cost. Log axes spanning more than two decades get no minor ticks (a minor grid
there adds nothing but ink and tick objects). The other figures (with legends outside the
axes, long row names) keep the constrained layout.

- :func:`per_query_std_plot` — standard deviation of each answer of a plan (step plot, or a
  heat map for a 2-D grid of queries), optional group bands (one per marginal table);
- :func:`error_vs_n_plot` — RMSE against dataset size n, log–log, optionally also RMSE / n;
- :func:`comparison_plot` — the plan against baselines (RMSE bars, max per-query std markers);
- :func:`results_plot` — released answers with their 95% intervals (marginal tables, a CDF,
  or anything else);
- :func:`png_data_uri` — ``data:image/png;base64,…`` for embedding in HTML.

Bad input (length mismatch, empty arrays, non-finite values where numbers are required,
malformed groups) raises :class:`~factorize.report.errors.ReportError` (a ``ValueError``)
naming the argument.
"""

from __future__ import annotations

import base64
import io
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

if "matplotlib.pyplot" not in sys.modules:
    # Never switch the backend of a session that already uses pyplot (that would close its
    # figures); the drawing below does not depend on it anyway (explicit FigureCanvasAgg).
    matplotlib.use("Agg")

import matplotlib.style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .errors import ReportError

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.typing import RcKeyType

__all__ = ["DPI", "FIGSIZE", "MAX_GENERIC_POINTS", "comparison_plot", "error_vs_n_plot",
           "per_query_std_plot", "png_data_uri", "results_plot", "interval_width_plot"]

#: Default figure size (inches) and resolution: 800 × 400 pixels.
FIGSIZE = (8.0, 4.0)
DPI = 100
#: ``results_plot(kind="generic")`` draws at most this many queries (evenly subsampled).
MAX_GENERIC_POINTS = 2000
#: ``kind="marginals"`` draws at most this many bars, ``kind="cdf"`` this many line points.
MAX_BARS = 2000
MAX_LINE_POINTS = 20_000
#: Group names are written on the top axis only up to this many groups (bands always drawn).
MAX_GROUP_NAMES = 40

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_HIGHLIGHT = "#d95f02"   # the plan in comparison_plot
_BASELINE = "#7f8fa6"    # the baselines
_RC = {
    "font.size": 9.0, "axes.titlesize": 11.0, "axes.labelsize": 9.5, "legend.fontsize": 8.0,
    "xtick.labelsize": 8.0, "ytick.labelsize": 8.0, "axes.grid": False,
    "figure.facecolor": "white", "savefig.facecolor": "white", "savefig.transparent": False,
    "path.simplify": True, "agg.path.chunksize": 10_000,
}


# ------------------------------------------------------------------------------------ helpers

def _new_figure(figsize: tuple[float, float] = FIGSIZE, ncols: int = 1, *,
                constrained: bool = True) -> tuple[Figure, list[Any]]:
    """A figure with ``ncols`` axes in a row; ``constrained=False``: no layout engine (the
    caller places the axes with :func:`_fixed_layout`)."""
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained" if constrained else None)
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    return fig, axes


#: Width of one character of a tick label, in ems (DejaVu Sans digits are 0.636 em wide).
_CHAR_EM = 0.64
#: Height of one line of text, in ems (matplotlib's default line spacing 1.2).
_LINE_EM = 1.2
#: Mathtext markup that takes no width in a tick label.
_MATHTEXT_MARKUP = re.compile(r"\$|\\mathdefault|[{}^_]")
#: The colour bar of a heat map: its gap from the axes and its width (inches).
_CBAR_GAP, _CBAR_WIDTH = 0.12, 0.16


def _pt(points: float) -> float:
    """Points → inches."""
    return points / 72.0


def _rc_points(key: RcKeyType) -> float:
    """A font size setting in points (``"medium"`` etc. resolved against ``font.size``)."""
    from matplotlib.font_manager import FontProperties

    return float(FontProperties(size=matplotlib.rcParams[key]).get_size_in_points())


#: The rc setting of the tick label size of an x or y axis (by ``Axis.axis_name``).
_TICK_LABEL_SIZE: dict[str, RcKeyType] = {"x": "xtick.labelsize", "y": "ytick.labelsize"}


def _tick_label_width(axis: Any) -> float:
    """Width (inches) of the widest tick label ``axis`` will draw, estimated from the strings
    its formatters write for the major and minor ticks inside the view (no drawing):
    characters × ``_CHAR_EM`` ems, mathtext markup (``$\\mathdefault{10^{4}}$``) not
    counted."""
    lo, hi = sorted(axis.get_view_interval())
    size = _rc_points(_TICK_LABEL_SIZE[axis.axis_name])
    chars = 0
    for locs, fmt in ((axis.get_majorticklocs(), axis.get_major_formatter()),
                      (axis.get_minorticklocs(), axis.get_minor_formatter())):
        locs = [v for v in locs if lo <= v <= hi]
        if locs:
            chars = max(chars, *(len(_MATHTEXT_MARKUP.sub("", t).replace("\\times", "x"))
                                 for t in fmt.format_ticks(locs)))
    return chars * _CHAR_EM * _pt(size)


def _fixed_layout(fig: Figure, *, left: float, right: float, top: float, bottom: float = 0.55,
                  wspace: float = 0.0) -> None:
    """Place the axes with margins given in inches (``wspace``: the gap between columns, in
    inches too): one ``subplots_adjust`` instead of a layout engine."""
    w, h = fig.get_size_inches()
    ncols = len(fig.axes) if wspace else 1
    width = (w - left - right - wspace * (ncols - 1)) / max(ncols, 1)
    fig.subplots_adjust(left=left / w, right=1.0 - right / w, top=1.0 - top / h,
                        bottom=bottom / h, wspace=wspace / width if wspace else 0.2)


def _ylabel_margin(ax: Any) -> float:
    """Left margin (inches) for ``ax``'s y tick labels and y label: pads, the widest tick
    label, one line of the label's font, a small outer gap."""
    label = _rc_points("axes.labelsize")
    return 0.05 + _tick_label_width(ax.yaxis) + _pt(3.5 + 4.0 + _LINE_EM * label) + 0.05


def _no_minor_ticks_beyond(axis: Any, decades: float = 2.0) -> bool:
    """Drop a log axis's minor ticks when its view spans more than ``decades`` decades
    (there the major ticks already mark every decade); True when they were dropped."""
    from matplotlib.ticker import NullLocator

    lo, hi = sorted(axis.get_view_interval())
    if axis.get_scale() == "log" and lo > 0 and np.log10(hi / lo) > decades:
        axis.set_minor_locator(NullLocator())
        return True
    return False


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    fig.clear()
    return buf.getvalue()


def _render(draw: Any) -> bytes:
    """Run ``draw()`` (which returns a Figure) under the fixed style; return its PNG bytes."""
    with matplotlib.style.context(["default", _RC]):
        return _png(draw())


def _title(title: Any) -> str:
    if not isinstance(title, str):
        raise ReportError(f"title must be a string, got {type(title).__name__}")
    return title


def _unit(unit: Any) -> str:
    if not isinstance(unit, str) or not unit:
        raise ReportError(f"unit must be a non-empty string, got {unit!r}")
    return unit


def _vector(x: Any, name: str, *, allow_nan: bool = False, min_value: float | None = None,
            positive: bool = False) -> np.ndarray:
    """A non-empty 1-D float array; finite unless ``allow_nan`` (then NaN, never ±inf)."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ReportError(f"{name} must be an array of numbers ({exc})") from None
    if a.ndim != 1:
        raise ReportError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size == 0:
        raise ReportError(f"{name} is empty: nothing to plot")
    bad = np.isinf(a) if allow_nan else ~np.isfinite(a)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ReportError(f"{name} has {int(bad.sum())} non-finite value(s) (first at index {i}: "
                          f"{a[i]})")
    ok = a[np.isfinite(a)]
    if positive and (ok <= 0).any():
        i = int(np.flatnonzero(np.isfinite(a) & (a <= 0))[0])
        raise ReportError(f"{name} must be positive (log scale), got {a[i]} at index {i}")
    if min_value is not None and (ok < min_value).any():
        i = int(np.flatnonzero(np.isfinite(a) & (a < min_value))[0])
        raise ReportError(f"{name} must be ≥ {min_value:g}, got {a[i]} at index {i}")
    return a


def _same_length(a: np.ndarray, name: str, k: int, ref: str) -> None:
    if a.size != k:
        raise ReportError(f"{name} has {a.size} entries but {ref} has {k}")


def _groups(groups: Any, k: int, name: str) -> list[tuple[str, int, int]] | None:
    """Validate ``[(name, start, stop), …]``: 0 ≤ start < stop ≤ k, in order, not overlapping."""
    if groups is None:
        return None
    if isinstance(groups, (str, bytes)) or not isinstance(groups, Sequence):
        raise ReportError(f"{name} must be a list of (name, start, stop) tuples")
    out: list[tuple[str, int, int]] = []
    prev = 0
    for j, g in enumerate(groups):
        try:
            label, start, stop = g
        except (TypeError, ValueError):
            raise ReportError(f"{name}[{j}] must be a (name, start, stop) tuple, got {g!r}") from None
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (start, stop)):
            raise ReportError(f"{name}[{j}] = {g!r}: start and stop must be integers")
        start, stop = int(start), int(stop)
        if not 0 <= start < stop <= k:
            raise ReportError(f"{name}[{j}] = {g!r}: need 0 ≤ start < stop ≤ {k} (the number of queries)")
        if start < prev:
            raise ReportError(f"{name}[{j}] = {g!r} overlaps or precedes the previous group "
                              f"(which ends at {prev}); groups must be in increasing order")
        out.append((str(label), start, stop))
        prev = stop
    return out or None


def _draw_groups(ax: Any, groups: list[tuple[str, int, int]], *, shade: bool = True,
                 separators: bool = True) -> float:
    """Alternating shaded bands (x in query-index units, cell j spans [j-½, j+½]), dotted
    separators and the group names as ticks on a top axis (these two only up to
    ``MAX_GROUP_NAMES`` groups; beyond, the bands alone). Returns the height (inches) the
    names take above the axes (0 without names): a line of 7.5 pt text, or the longest
    name's width × sin(rotation) when they are rotated."""
    height = 0.0
    for j, (_, start, stop) in enumerate(groups):
        if shade and j % 2 == 0:
            ax.axvspan(start - 0.5, stop - 0.5, color="0.5", alpha=0.12, lw=0, zorder=0)
        if separators and j > 0 and len(groups) <= MAX_GROUP_NAMES:
            ax.axvline(start - 0.5, color="0.4", lw=0.6, ls=":", zorder=1)
    if len(groups) <= MAX_GROUP_NAMES:
        top = ax.secondary_xaxis("top")
        centres = [(s + e - 1) / 2 for _, s, e in groups]
        names = [g[0] for g in groups]
        longest = max(len(n) for n in names)
        rot = 0 if len(groups) * max(longest, 3) <= 90 else (45 if len(groups) <= 20 else 90)
        top.set_xticks(centres, labels=names, rotation=rot,
                       ha="left" if rot == 45 else "center", fontsize=7.5)
        top.tick_params(axis="x", length=0, pad=2)
        text = longest * _CHAR_EM * _pt(7.5) * np.sin(np.radians(rot))
        height = _pt(2.0) + max(_pt(_LINE_EM * 7.5), text + _pt(7.5) * np.cos(np.radians(rot)))
    return height


def _group_names_overhang(groups: list[tuple[str, int, int]]) -> float:
    """How far (inches) the last group name may reach right of its centre: names written at
    45° start at the centre (``_draw_groups``), so the last one's full width × cos 45°;
    upright ones half their width (a bound: the axes' right edge is at least that far)."""
    if len(groups) > MAX_GROUP_NAMES:
        return 0.0
    longest = max(len(g[0]) for g in groups)
    rot = 0 if len(groups) * max(longest, 3) <= 90 else (45 if len(groups) <= 20 else 90)
    last = len(groups[-1][0]) * _CHAR_EM * _pt(7.5)
    return last * np.cos(np.radians(45)) if rot == 45 else (last / 2 if rot == 0 else _pt(7.5))


def _subsample(k: int, limit: int) -> np.ndarray:
    """Evenly spaced indices 0 … k-1 (first and last included), at most ``limit`` of them."""
    if k <= limit:
        return np.arange(k)
    return np.unique(np.linspace(0, k - 1, limit).round().astype(np.int64))


def _with_notes(title: str, notes: list[str]) -> str:
    return title + ("\n(" + "; ".join(notes) + ")" if notes else "")


# ------------------------------------------------------------------------------ 1. per query

def per_query_std_plot(std: Any, *, grid_shape: tuple[int, int] | None = None,
                       labels: Sequence[tuple[str, int, int]] | None = None, title: str,
                       unit: str = "counts") -> bytes:
    """The standard deviation of each of a plan's answers, as PNG bytes.

    1-D workloads: a step plot over the query index with the RMSE as a dashed reference line;
    ``labels`` = ``[(name, start, stop), …]`` (e.g. one per marginal table, rows start…stop-1)
    shades alternate bands and names them on the top axis. 2-D workloads: ``grid_shape=(r, c)``
    draws an r × c heat map with a colour bar, query ``i·c + j`` at row i, column j (the row
    order of ``kron(A, B)`` with A of r rows and B of c rows); ``labels`` is then refused.
    The title gets a second line with the largest value and the RMSE.
    """
    title, unit = _title(title), _unit(unit)
    arr = np.asarray(std, dtype=np.float64) if not isinstance(std, np.ndarray) else std
    if arr.ndim == 2 and grid_shape is None:
        grid_shape = arr.shape
    if arr.ndim == 2:
        arr = arr.reshape(-1)
    s = _vector(arr, "std", min_value=0.0)
    k = s.size
    grid = None
    if grid_shape is not None:
        try:
            r, c = (int(v) for v in grid_shape)
        except (TypeError, ValueError):
            raise ReportError(f"grid_shape must be a pair (rows, cols), got {grid_shape!r}") from None
        if r < 1 or c < 1 or r * c != k:
            raise ReportError(f"grid_shape {tuple(grid_shape)} does not match std: {r}·{c} ≠ {k} queries")
        if labels is not None:
            raise ReportError("labels (group bands) are only drawn on 1-D plots, not with grid_shape")
        grid = (r, c)
    groups = _groups(labels, k, "labels")
    rmse = float(np.sqrt(np.mean(s * s)))
    full_title = f"{title}\nmax {s.max():.4g} {unit}, RMSE {rmse:.4g} {unit} over {k:,} queries"

    def draw() -> Figure:
        fig, (ax,) = _new_figure(constrained=False)
        names_height = 0.0
        right = 0.15
        if grid is not None:
            r, c = grid
            im = ax.imshow(s.reshape(r, c), origin="lower", aspect="auto", cmap="viridis",
                           interpolation="nearest", extent=(-0.5, c - 0.5, -0.5, r - 0.5))
            cax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # placed once the margins are known
            cb = fig.colorbar(im, cax=cax)
            cb.set_label(f"standard deviation ({unit})")
            ax.set_xlabel(f"query index along the second factor (column, 0…{c - 1})")
            ax.set_ylabel(f"first factor (row, 0…{r - 1})")
            # gap, bar, then the bar's tick labels and label (the y-label margin, mirrored)
            right = _CBAR_GAP + _CBAR_WIDTH + _ylabel_margin(cax)
        else:
            x = np.arange(k)
            if groups:
                names_height = _draw_groups(ax, groups)
                right = max(right, _group_names_overhang(groups) + 0.05)
            ax.step(x, s, where="mid", color="C0", lw=1.2, label="std of each answer",
                    marker="o" if k <= 60 else None, ms=3)
            ax.axhline(rmse, color="C3", ls="--", lw=1.2, zorder=3, label=f"RMSE = {rmse:.4g}")
            ax.set_xlim(-0.5, k - 0.5)
            ax.set_ylim(0, max(float(s.max()), rmse) * 1.22 or 1.0)  # headroom for the legend
            ax.set_xlabel("query index")
            ax.set_ylabel(f"standard deviation ({unit})")
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(loc="upper right", ncols=2, framealpha=0.9)
        ax.set_title(full_title)
        title = _rc_points("axes.titlesize")
        _fixed_layout(fig, left=_ylabel_margin(ax), right=right,
                      top=names_height + _pt(6.0 + 2 * _LINE_EM * title) + 0.08)
        if grid is not None:
            box = ax.get_position()
            w = fig.get_size_inches()[0]
            cax.set_position((box.x1 + _CBAR_GAP / w, box.y0, _CBAR_WIDTH / w, box.height))
        return fig

    return _render(draw)


# ---------------------------------------------------------------------------- 2. error vs n

def _is_bound(name: str) -> bool:
    return name.rstrip().endswith("(bound)")


def error_vs_n_plot(ns: Any, series: Mapping[str, Any], *, title: str, relative: bool = False) -> bytes:
    """RMSE per query (counts) against the dataset size n (records), log–log, as PNG bytes.

    ``series`` maps a name to RMSE values, one per entry of ``ns`` (positive; NaN = not
    measured, skipped). Names ending in "(bound)" are drawn dashed without markers, in the
    colour of the series they bound ("X (bound)" pairs with "X"). ``relative=True`` adds a
    second panel with RMSE / n (the error of answers expressed as fractions of the records).
    """
    title = _title(title)
    n = _vector(ns, "ns", positive=True)
    if not isinstance(series, Mapping) or not series:
        raise ReportError("series must be a non-empty mapping name → RMSE values")
    data: list[tuple[str, np.ndarray]] = []
    for name, vals in series.items():
        if not isinstance(name, str):
            raise ReportError(f"series names must be strings, got {name!r}")
        v = _vector(vals, f"series[{name!r}]", allow_nan=True, positive=True)
        _same_length(v, f"series[{name!r}]", n.size, "ns")
        if not np.isfinite(v).any():
            raise ReportError(f"series[{name!r}] has no finite value")
        data.append((name, v))
    order = np.argsort(n, kind="stable")
    n = n[order]
    data = [(name, v[order]) for name, v in data]
    colours: dict[str, str] = {}
    for name, _ in data:
        base = name.rstrip()[: -len("(bound)")].strip() if _is_bound(name) else name.strip()
        colours.setdefault(base, f"C{len(colours) % 10}")

    def colour(name: str) -> str:
        return colours[name.rstrip()[: -len("(bound)")].strip() if _is_bound(name) else name.strip()]

    def draw() -> Figure:
        fig, axes = _new_figure((11.0, 4.0) if relative else FIGSIZE, ncols=2 if relative else 1,
                                constrained=False)
        panels: list[tuple[Axes, float | None, str, str]] = [
            (axes[0], 1.0, "RMSE per query (counts)", "absolute error")]
        if relative:
            panels.append((axes[1], None, "RMSE / n (fraction of the records)", "relative to n"))
        for ax, _, ylabel, sub in panels:
            for name, v in data:
                y = v if ax is axes[0] else v / n
                ok = np.isfinite(y)
                if _is_bound(name):
                    ax.plot(n[ok], y[ok], ls="--", color=colour(name), lw=1.4, alpha=0.85, label=name)
                else:
                    ax.plot(n[ok], y[ok], ls="-", marker="o", ms=4, color=colour(name), lw=1.4, label=name)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("dataset size n (records)")
            ax.set_ylabel(ylabel)
            _no_minor_ticks_beyond(ax.xaxis)
            # a narrow y range keeps its minor grid: there it is what the value is read from
            minor_y = not _no_minor_ticks_beyond(ax.yaxis)
            ax.grid(True, which="major", alpha=0.3)
            if minor_y:
                ax.grid(True, axis="y", which="minor", alpha=0.3)
            ax.legend(loc="best", framealpha=0.9)
            if relative:
                ax.set_title(sub, fontsize=9.5)
        line = _LINE_EM * _rc_points("axes.titlesize")
        if relative:
            fig.suptitle(title, fontsize=11, y=1.0 - 0.06 / fig.get_size_inches()[1], va="top")
            top = 0.06 + _pt(line + 4.0 + _LINE_EM * 9.5 + 6.0) + 0.04
        else:
            axes[0].set_title(title)
            top = _pt(6.0 + line) + 0.08
        margins = [_ylabel_margin(ax) for ax in axes]
        _fixed_layout(fig, left=margins[0], right=0.15, top=top,
                      wspace=max(margins[1:], default=0.0) + 0.15)
        return fig

    return _render(draw)


# --------------------------------------------------------------------------- 3. comparison

def comparison_plot(names: Sequence[str], rmse: Any, max_std: Any, *, highlight: int | None = 0,
                    title: str, unit: str = "counts") -> bytes:
    """Horizontal bars of RMSE per query for the plan and the baselines, as PNG bytes.

    ``max_std`` (the largest per-query standard deviation; NaN where a mechanism has none, or
    ``None`` for no markers) is drawn as black diamonds; both values are written at the end
    of each row. Row ``highlight`` (default 0, the plan; ``None`` for none) is drawn in a
    distinct colour with a bold label. A log x axis is used when the values span more than
    30× (then all must be positive). Height grows with the number of rows (≥ 4 inches).
    """
    title, unit = _title(title), _unit(unit)
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise ReportError("names must be a list of strings")
    labels = [str(x) for x in names]
    m = len(labels)
    if m == 0:
        raise ReportError("names is empty: nothing to plot")
    r = _vector(rmse, "rmse", min_value=0.0)
    _same_length(r, "rmse", m, "names")
    if max_std is None:
        ms = np.full(m, np.nan)
    else:
        ms = _vector(max_std, "max_std", allow_nan=True, min_value=0.0)
        _same_length(ms, "max_std", m, "names")
    if highlight is not None:
        if not isinstance(highlight, (int, np.integer)) or isinstance(highlight, bool) \
                or not -m <= int(highlight) < m:
            raise ReportError(f"highlight must be an index into names (0…{m - 1}) or None, got {highlight!r}")
        highlight = int(highlight) % m
    vals = np.concatenate([r, ms[np.isfinite(ms)]])
    hi = float(vals.max())
    lo = float(vals.min())
    log = lo > 0 and hi / lo > 30
    height = max(4.0, round(0.42 * m + 1.5, 1))

    def draw() -> Figure:
        fig, (ax,) = _new_figure((FIGSIZE[0], height))
        y = np.arange(m)
        colours = [_HIGHLIGHT if i == highlight else _BASELINE for i in range(m)]
        ax.barh(y, r, height=0.6, color=colours, zorder=2)
        has_ms = np.isfinite(ms)
        if has_ms.any():
            ax.scatter(ms[has_ms], y[has_ms], marker="D", s=28, color="black", zorder=3)
        for i in range(m):
            text = f"RMSE {r[i]:.4g}" + (f" · max std {ms[i]:.4g}" if has_ms[i] else "")
            ax.annotate(text, (max(r[i], ms[i]) if has_ms[i] else r[i], y[i]), xytext=(6, 0),
                        textcoords="offset points", va="center", fontsize=8,
                        fontweight="bold" if i == highlight else "normal")
        ax.set_yticks(y, labels=labels)
        if highlight is not None:
            ax.get_yticklabels()[highlight].set_fontweight("bold")
        ax.set_ylim(m - 0.4, -0.6)
        if log:
            ax.set_xscale("log")
            ax.set_xlim(lo / 2, hi * (hi / (lo / 2)) ** 0.45)
        else:
            ax.set_xlim(0, hi * 1.45 if hi > 0 else 1.0)
        ax.set_xlabel(f"error per query ({unit})" + (", log scale" if log else ""))
        ax.grid(True, axis="x", which="both", alpha=0.3, zorder=0)
        handles: list[Artist] = []
        if highlight is not None:
            handles.append(Patch(color=_HIGHLIGHT, label=f"RMSE: {labels[highlight]}"))
            if m > 1:
                handles.append(Patch(color=_BASELINE, label="RMSE: baselines"))
        else:
            handles.append(Patch(color=_BASELINE, label="RMSE"))
        if has_ms.any():
            handles.append(Line2D([], [], marker="D", ls="none", color="black",
                                  label="max per-query std"))
        if len(handles) > 1:
            fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), frameon=False)
        ax.set_title(title)
        return fig

    return _render(draw)


# ------------------------------------------------------------------------------ 4. results

def _intervals(ci_low: Any, ci_high: Any, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Validated (low, high) arrays, NaN where a query has no interval; None when none has."""
    if ci_low is None and ci_high is None:
        return None
    if ci_low is None or ci_high is None:
        raise ReportError("ci_low and ci_high must both be given or both be None")
    lows = []
    for name, c in (("ci_low", ci_low), ("ci_high", ci_high)):
        a = np.asarray(c, dtype=np.float64)
        if a.ndim == 0:      # a scalar (NaN for "no intervals") applies to every query
            a = np.full(k, float(a))
        lows.append(_vector(a, name, allow_nan=True))
        _same_length(lows[-1], name, k, "estimate")
    lo, hi = lows
    if not np.array_equal(np.isnan(lo), np.isnan(hi)):
        i = int(np.flatnonzero(np.isnan(lo) != np.isnan(hi))[0])
        raise ReportError(f"ci_low and ci_high disagree on which queries have intervals "
                          f"(index {i}: {lo[i]}, {hi[i]})")
    if np.isnan(lo).all():
        return None
    ok = ~np.isnan(lo)
    if (lo[ok] > hi[ok]).any():
        i = int(np.flatnonzero(ok & (lo > hi))[0])
        raise ReportError(f"ci_low > ci_high at index {i}: {lo[i]} > {hi[i]}")
    return lo, hi


def results_plot(estimate: Any, ci_low: Any, ci_high: Any, *, kind: str,  # noqa: C901 (counted allow-list)
                 groups: Sequence[tuple[str, int, int]] | None = None, title: str,
                 truth: Any = None, unit: str = "counts", post: Any = None,
                 series: Sequence[tuple[str, Any]] | None = None,
                 tick_labels: Sequence[str] | None = None, xlabel: str | None = None) -> bytes:
    """Released answers with their 95% intervals, as PNG bytes.

    ``kind="marginals"``: bars (coloured per group) with interval whiskers, grouped by
    ``groups`` = ``[(table name, start, stop), …]``; ``kind="cdf"``: the estimate as a line
    over the query index with the interval as a shaded band; ``kind="generic"``: points with
    interval whiskers. ``truth`` (optional, same length) is overlaid. Intervals may be NaN
    (projection plans have none; ``None`` or a scalar NaN also work): the estimates alone
    are drawn and the title says "no per-query intervals". Large k is evenly subsampled
    (generic ≤ 2,000 points, marginals ≤ 2,000 bars, cdf ≤ 20,000 points) and the title
    says so; the x axis always shows the original query index.

    ``post``: the post-processed estimates, drawn over the released ones. ``series`` (cdf):
    ``[(name, query indices in order)]`` — one CDF per group (e.g. age CDF per sex), each a
    line with its own band over its own position. ``tick_labels``: the queries' labels, used
    as x tick labels when at most 40 are drawn; ``xlabel`` names the axis.
    """
    title, unit = _title(title), _unit(unit)
    if kind not in ("marginals", "cdf", "generic"):
        raise ReportError(f"kind must be 'marginals', 'cdf' or 'generic', got {kind!r}")
    est = _vector(estimate, "estimate")
    k = est.size
    iv = _intervals(ci_low, ci_high, k)
    tr = None
    if truth is not None:
        tr = _vector(truth, "truth")
        _same_length(tr, "truth", k, "estimate")
    grp = _groups(groups, k, "groups")
    pp = None
    if post is not None:
        pp = _vector(post, "post")
        _same_length(pp, "post", k, "estimate")
    limit = {"generic": MAX_GENERIC_POINTS, "marginals": MAX_BARS, "cdf": MAX_LINE_POINTS}[kind]
    idx = _subsample(k, limit)
    notes = []
    if idx.size < k:
        notes.append(f"showing {idx.size:,} of {k:,} queries, evenly subsampled")
    if iv is None:
        notes.append("no per-query intervals")
    else:
        missing = int(np.isnan(iv[0]).sum())
        if missing:
            notes.append(f"no interval for {missing:,} of {k:,} queries")
    full_title = _with_notes(title, notes)

    def draw() -> Figure:  # noqa: C901 (counted allow-list)
        fig, (ax,) = _new_figure()
        x = idx
        e = est[idx]
        if grp:
            _draw_groups(ax, grp, shade=kind != "marginals")
        if kind == "marginals":
            step = max(1.0, k / idx.size)
            if grp:
                gid = np.zeros(k, dtype=np.int64) - 1
                for j, (_, s, t) in enumerate(grp):
                    gid[s:t] = j
                colours: list[str] | str = [f"C{gid[i] % 10}" if gid[i] >= 0 else "0.6" for i in idx]
            else:
                colours = "C0"
            if idx.size <= 300:
                ax.bar(x, e, width=0.8 * step, color=colours, alpha=0.85, zorder=2, label="estimate")
            else:  # bars under a pixel wide: one line collection draws them ~10× faster
                ax.vlines(x, 0, e, colors=colours, lw=0.8, alpha=0.85, zorder=2, label="estimate")
            ax.axhline(0, color="0.3", lw=0.6, zorder=1)
            ax.set_xlabel(xlabel or "cell (query index)" + ("; bar colour = marginal table" if grp else ""))
        elif kind == "cdf" and series:
            for c, (name, rows) in enumerate(series):
                rows = np.asarray(rows, dtype=np.int64)
                pos = np.arange(rows.size)
                if iv is not None:
                    ax.fill_between(pos, iv[0][rows], iv[1][rows], color=f"C{c % 10}", alpha=0.25,
                                    lw=0, label="95% interval" if c == 0 else None)
                ax.plot(pos, est[rows], color=f"C{c % 10}", lw=1.5,
                        marker="o" if rows.size <= 60 else None, ms=3, zorder=3,
                        label=f"estimate: {name}" if name else "estimate")
                if pp is not None:
                    ax.plot(pos, pp[rows], color=f"C{c % 10}", lw=1.0, ls=":", zorder=4,
                            label="post-processed" if c == 0 else None)
            ax.set_xlabel(xlabel or "position in the CDF (value, increasing)")
        elif kind == "cdf":
            if iv is not None:
                lo, hi = iv[0][idx], iv[1][idx]
                ax.fill_between(x, lo, hi, color="C0", alpha=0.25, lw=0, label="95% interval",
                                step=None)
            ax.plot(x, e, color="C0", lw=1.5, marker="o" if idx.size <= 60 else None, ms=3,
                    label="estimate", zorder=3)
            ax.set_xlabel(xlabel or "query index (cell, increasing)")
        else:
            ax.plot(x, e, ls="none", marker="o" if idx.size <= 200 else ".",
                    ms=4 if idx.size <= 200 else 3, color="C0", label="estimate", zorder=3)
            ax.set_xlabel(xlabel or "query index")
        if iv is not None and kind != "cdf":
            lo, hi = iv[0][idx], iv[1][idx]
            ok = ~np.isnan(lo)
            few = idx.size <= 200
            ax.errorbar(x[ok], (lo[ok] + hi[ok]) / 2, yerr=(hi[ok] - lo[ok]) / 2, fmt="none",
                        ecolor="black" if few else "0.55", elinewidth=0.8 if few else 0.5,
                        alpha=0.8 if few else 0.6, capsize=2 if idx.size <= 100 else 0,
                        zorder=4 if kind == "marginals" else 2, label="95% interval")
        if pp is not None and not (kind == "cdf" and series):
            ax.plot(x, pp[idx], ls="none" if kind != "cdf" else ":", marker="D" if kind != "cdf" else None,
                    ms=3, color="#2ca02c", label="post-processed", zorder=5)
        if tick_labels is not None and idx.size <= 40 and not (kind == "cdf" and series):
            ax.set_xticks(x)
            ax.set_xticklabels([str(tick_labels[i]) for i in idx], rotation=60, ha="right",
                               fontsize=7)
        if tr is not None:
            t = tr[idx]
            if kind == "cdf":
                ax.plot(x, t, color="black", ls="--", lw=1.1, label="true value", zorder=4)
            else:
                ax.plot(x, t, ls="none", marker="_" if kind == "marginals" else "x",
                        ms=(9 if idx.size <= 100 else 5 if idx.size <= 400 else 2.5) if kind == "marginals"
                        else 4, mew=1.5 if idx.size <= 400 else 1.0, color="#d62728",
                        label="true value", zorder=5)
        pad = 0.5 * max(1.0, k / idx.size)
        if not (kind == "cdf" and series):
            ax.set_xlim(-pad, k - 1 + pad)
        ax.set_ylabel(f"estimate ({unit})")
        ax.grid(True, axis="y", alpha=0.3)
        handles, names = ax.get_legend_handles_labels()
        rank = {"estimate": 0, "95% interval": 1, "post-processed": 2, "true value": 3}
        pairs = sorted(zip(handles, names, strict=True), key=lambda hn: rank.get(hn[1], 3))
        handles, names = [h for h, _ in pairs], [n for _, n in pairs]
        if len(handles) > 1:
            fig.legend(handles, names, loc="outside lower center", ncols=min(len(handles), 4),
                       frameon=False)
        ax.set_title(full_title)
        return fig

    return _render(draw)


# ------------------------------------------------------------------------------- 5. data URI

def png_data_uri(png: bytes) -> str:
    """``data:image/png;base64,…`` for an ``<img src=…>`` (checks the PNG signature)."""
    if not isinstance(png, (bytes, bytearray, memoryview)):
        raise ReportError(f"png must be bytes, got {type(png).__name__}")
    png = bytes(png)
    if not png.startswith(PNG_MAGIC):
        raise ReportError("png does not start with the PNG signature")
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def interval_width_plot(half_width: Any, estimate: Any, *, title: str, unit: str = "counts",
                        groups: Sequence[tuple[str, int, int]] | None = None) -> bytes:
    """The 95% interval half-width of every answer, in counts and relative to the estimate —
    intervals that are invisible next to large counts on the estimates' scale, seen on their
    own (a log scale when they span more than two decades), as PNG bytes."""
    title, unit = _title(title), _unit(unit)
    hw = _vector(half_width, "half_width", min_value=0.0)
    est = _vector(estimate, "estimate")
    _same_length(est, "estimate", hw.size, "half_width")
    k = hw.size
    grp = _groups(groups, k, "groups")
    idx = _subsample(k, MAX_GENERIC_POINTS)

    def draw() -> Figure:
        fig, (ax1, ax2) = _new_figure(ncols=2)
        if grp:
            _draw_groups(ax1, grp)
            _draw_groups(ax2, grp)
        ax1.plot(idx, hw[idx], ls="none", marker=".", ms=3, color="C0")
        ax1.set_ylabel(f"95% half-width ({unit})")
        ax1.set_xlabel("query index")
        pos = hw[idx] > 0
        if pos.any() and float(hw[idx][pos].max()) > 100 * float(hw[idx][pos].min()):
            ax1.set_yscale("log")
        rel = np.where(np.abs(est) > 0, hw / np.maximum(np.abs(est), 1e-300), np.nan)
        ok = np.isfinite(rel[idx])
        ax2.plot(idx[ok], rel[idx][ok], ls="none", marker=".", ms=3, color="C1")
        ax2.set_ylabel("half-width / |estimate|")
        ax2.set_xlabel("query index")
        if ok.any() and float(np.nanmax(rel[idx])) > 100 * max(float(np.nanmin(rel[idx][ok])), 1e-300):
            ax2.set_yscale("log")
        for ax in (ax1, ax2):
            ax.grid(True, alpha=0.3)
        fig.suptitle(title)
        return fig

    return _render(draw)
