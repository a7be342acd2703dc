"""The report figures: matplotlib (Agg) drawings returned as PNG bytes.

Every function draws on its own :class:`matplotlib.figure.Figure` with a
:class:`~matplotlib.backends.backend_agg.FigureCanvasAgg` — pyplot is never used, so no
figure, current axes or backend state leaks between calls or into the caller's session.
Each figure is drawn under matplotlib's default style plus a few fixed settings (so a user's
``matplotlibrc`` or style cannot change the output) and saved without a ``Software`` /
date stamp: identical inputs give byte-identical PNGs.

Sizes: 8 × 4 inches at 100 dpi (800 × 400 pixels; 11 × 4 for the two-panel
:func:`error_vs_n_plot`, taller for :func:`comparison_plot` with many rows); the table panels
of a results report 4.6 × 3.1 inches (:data:`PANEL_SIZE`), several to a row of the page.

Layout. The two figures of every plan report (:func:`per_query_std_plot`,
:func:`error_vs_n_plot`) are laid out once, before drawing, by :func:`_fixed_layout`: margins
in inches computed from what the figure holds (title lines, the widest tick label as the
axis formatter writes it, group names on the top axis, a colour bar) — not by matplotlib's
constrained layout, which measures every text artist again at draw time and was about 40%
of their cost. Log axes spanning more than two decades get no minor ticks (a minor grid
there adds nothing but ink and tick objects). The other figures (with legends outside the
axes, long row names) keep the constrained layout.

- :func:`per_query_std_plot` — standard deviation of each answer of a plan (step plot, or a
  heat map for a 2-D grid of queries, in value labels when given), optional group bands (one
  per table);
- :func:`error_vs_n_plot` — RMSE against dataset size n, log–log, optionally also RMSE / n;
- :func:`comparison_plot` — the plan against baselines (RMSE bars, max per-query std markers);
- :func:`bar_panel`, :func:`line_panel`, :func:`heatmap_panel` — one table of a release: bars
  with 95% whiskers (a small table), lines with 95% bands (a CDF or range per group, or one
  attribute's values), a heat map (two crossed attributes), every cell drawn, axes in value
  labels;
- :func:`png_data_uri` — ``data:image/png;base64,…`` for embedding in HTML.

Colour scales. Values whose spread is below :data:`EQUAL_RTOL` of their magnitude
(:func:`equal_to_precision`: a plan's per-query standard deviations that differ by rounding
only) are drawn in one colour, without a colour bar, and the title says they are equal to
that precision — a colour scale would spread its whole range over the rounding.

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
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from .errors import ReportError

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.typing import RcKeyType

__all__ = ["DPI", "EQUAL_RTOL", "FIGSIZE", "PANEL_SIZE", "bar_panel", "comparison_plot",
           "equal_to_precision", "error_vs_n_plot", "heatmap_panel", "line_panel",
           "per_query_std_plot", "png_data_uri"]

#: Default figure size (inches) and resolution: 800 × 400 pixels.
FIGSIZE = (8.0, 4.0)
DPI = 100
#: A table panel (:func:`bar_panel`, :func:`line_panel`, :func:`heatmap_panel`): 4.6 × 3.1
#: inches, 460 × 310 pixels.
PANEL_SIZE = (4.6, 3.1)
#: Values whose spread is at most this fraction of their largest magnitude are drawn in one
#: colour (:func:`equal_to_precision`): a colour scale over them would show rounding only.
EQUAL_RTOL = 1e-6
#: Value labels written along a panel's or heat map's axis at most (evenly spaced beyond).
MAX_TICKS = 12
#: Column labels written under a plan's per-query heat map at most (they are upright there).
MAX_HEATMAP_COLUMNS = 8
#: A bar panel names every bar up to this many (the results report's bar tables).
MAX_BAR_LABELS = 40
#: Value labels are shortened to this many characters on an axis.
MAX_LABEL_CHARS = 24
#: Group names are written on the top axis only up to this many groups (bands always drawn).
MAX_GROUP_NAMES = 40
_FLAT_COLOUR = "#21918c"  # viridis' middle: one colour for values equal to EQUAL_RTOL

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


def _named_groups(groups: list[tuple[str, int, int]], k: int, width: float
                  ) -> tuple[list[tuple[str, int, int]], int]:
    """(the groups whose names are written on the top axis, their rotation): none beyond
    ``MAX_GROUP_NAMES`` groups; else, in order, each group whose centre is far enough from the
    previous named one's for the names not to overlap on an axis ``width`` inches wide over
    ``k`` queries — a line of 7.5 pt text apart when rotated, half of both names apart when
    upright — so a narrow table between wide ones loses its name, never its band."""
    if len(groups) > MAX_GROUP_NAMES:
        return [], 0
    per_query = width / max(k, 1)
    line = _pt(_LINE_EM * 7.5) * 1.2
    kept: list[tuple[str, int, int]] = []
    for g in groups:
        centre = (g[1] + g[2] - 1) / 2
        if not kept or (centre - (kept[-1][1] + kept[-1][2] - 1) / 2) * per_query >= line:
            kept.append(g)
    longest = max(len(n) for n, _, _ in kept)
    rot = 0 if len(kept) * max(longest, 3) <= 90 else (45 if len(kept) <= 20 else 90)
    if rot == 0:
        upright = [kept[0]]
        for g in kept[1:]:
            prev = upright[-1]
            gap = ((g[1] + g[2]) - (prev[1] + prev[2])) / 2 * per_query
            if gap >= (len(g[0]) + len(prev[0])) / 2 * _CHAR_EM * _pt(7.5) + _pt(4.0):
                upright.append(g)
        kept = upright
    return kept, rot


def _draw_groups(ax: Any, groups: list[tuple[str, int, int]], k: int) -> tuple[float, float]:
    """Alternating shaded bands (x in query-index units, cell j spans [j-½, j+½]), dotted
    separators (up to ``MAX_GROUP_NAMES`` groups) and the names of :func:`_named_groups` as
    ticks on a top axis. Returns (the height, in inches, the names take above the axes — a line
    of 7.5 pt text, or the longest name's width × sin(rotation) when they are rotated; 0
    without names —, how far the last name reaches right of its centre: names written at 45°
    start at the centre, so its full width × cos 45°, upright ones half their width)."""
    for j, (_, start, stop) in enumerate(groups):
        if j % 2 == 0:
            ax.axvspan(start - 0.5, stop - 0.5, color="0.5", alpha=0.12, lw=0, zorder=0)
        if j > 0 and len(groups) <= MAX_GROUP_NAMES:
            ax.axvline(start - 0.5, color="0.4", lw=0.6, ls=":", zorder=1)
    named, rot = _named_groups(groups, k, 0.8 * float(ax.figure.get_size_inches()[0]))
    if not named:
        return 0.0, 0.0
    top = ax.secondary_xaxis("top")
    names = [g[0] for g in named]
    top.set_xticks([(s + e - 1) / 2 for _, s, e in named], labels=names, rotation=rot,
                   ha="left" if rot == 45 else "center", fontsize=7.5)
    top.tick_params(axis="x", length=0, pad=2)
    longest = max(len(n) for n in names)
    text = longest * _CHAR_EM * _pt(7.5) * np.sin(np.radians(rot))
    height = _pt(2.0) + max(_pt(_LINE_EM * 7.5), text + _pt(7.5) * np.cos(np.radians(rot)))
    last = len(names[-1]) * _CHAR_EM * _pt(7.5)
    overhang = last * np.cos(np.radians(45)) if rot == 45 else (last / 2 if rot == 0 else _pt(7.5))
    return height, float(overhang)


# ------------------------------------------------------------------------------ 1. per query

def per_query_std_plot(std: Any, *, grid_shape: tuple[int, int] | None = None,
                       labels: Sequence[tuple[str, int, int]] | None = None, title: str,
                       unit: str = "counts",
                       axes_labels: tuple[str, Sequence[str], str, Sequence[str]] | None = None) -> bytes:
    """The standard deviation of each of a plan's answers, as PNG bytes.

    1-D workloads: a step plot over the query index with the RMSE as a dashed reference line;
    ``labels`` = ``[(name, start, stop), …]`` (e.g. one per marginal table, rows start…stop-1)
    shades alternate bands and names them on the top axis. 2-D workloads: ``grid_shape=(r, c)``
    draws an r × c heat map with a colour bar, query ``i·c + j`` at row i, column j (the row
    order of ``kron(A, B)`` with A of r rows and B of c rows); ``labels`` is then refused.
    ``axes_labels`` = ``(row name, r row labels, column name, c column labels)``: the heat
    map's axes in value labels (thinned to :data:`MAX_TICKS`), else in query indices. Values
    equal to :data:`EQUAL_RTOL` relative are drawn in one colour, without a colour bar, and
    the title says so. The title gets a second line with the largest value and the RMSE.
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
    elif axes_labels is not None:
        raise ReportError("axes_labels name a heat map's axes: give grid_shape too")
    named = None
    if grid is not None and axes_labels is not None:
        row_name, row_labels, col_name, col_labels = axes_labels
        named = (str(row_name), _labels(row_labels, grid[0], "axes_labels rows"), str(col_name),
                 _labels(col_labels, grid[1], "axes_labels columns"))
    groups = _groups(labels, k, "labels")
    rmse = float(np.sqrt(np.mean(s * s)))
    flat = grid is not None and equal_to_precision(s)
    full_title = (f"{title}\nall {k:,} queries equal to {s.max():.6g} {unit} (to {EQUAL_RTOL:g} "
                  "relative)" if flat else
                  f"{title}\nmax {s.max():.4g} {unit}, RMSE {rmse:.4g} {unit} over {k:,} queries")

    def draw() -> Figure:
        fig, (ax,) = _new_figure(constrained=False)
        names_height = 0.0
        right = 0.15
        cax = None
        if grid is not None:
            r, c = grid
            extent = (-0.5, c - 0.5, -0.5, r - 0.5)
            if flat:  # one colour: a scale would spread its range over rounding
                ax.imshow(np.zeros((r, c)), origin="lower", aspect="auto", interpolation="nearest",
                          cmap=ListedColormap([_FLAT_COLOUR]), vmin=-1, vmax=1, extent=extent)
            else:
                im = ax.imshow(s.reshape(r, c), origin="lower", aspect="auto", cmap="viridis",
                               interpolation="nearest", extent=extent)
                cax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # placed once the margins are known
                cb = fig.colorbar(im, cax=cax)
                cb.set_label(f"standard deviation ({unit})")
                # gap, bar, then the bar's tick labels and label (the y-label margin, mirrored)
                right = _CBAR_GAP + _CBAR_WIDTH + _ylabel_margin(cax)
            if named is not None:
                _value_ticks(ax.yaxis, named[1], MAX_TICKS, rotate=False)
                _value_ticks(ax.xaxis, named[3], MAX_HEATMAP_COLUMNS, rotate=False)
                ax.set_ylabel(named[0])
                ax.set_xlabel(named[2])
            else:
                ax.set_xlabel(f"query index along the second factor (column, 0…{c - 1})")
                ax.set_ylabel(f"first factor (row, 0…{r - 1})")
        else:
            x = np.arange(k)
            if groups:
                names_height, overhang = _draw_groups(ax, groups, k)
                right = max(right, overhang + 0.05)
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
        if cax is not None:
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


# ------------------------------------------------------------------------- 4. table panels

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


def _labels(labels: Any, k: int, name: str) -> list[str]:
    """``k`` tick labels (strings), shortened to :data:`MAX_LABEL_CHARS` characters."""
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise ReportError(f"{name} must be a list of strings")
    out = [str(x) for x in labels]
    if len(out) != k:
        raise ReportError(f"{name} has {len(out)} entries but the panel has {k}")
    return [x if len(x) <= MAX_LABEL_CHARS else x[:MAX_LABEL_CHARS - 1] + "…" for x in out]


def _value_ticks(axis: Any, labels: list[str], limit: int, *, rotate: bool) -> None:
    """At most ``limit`` of ``labels`` as ``axis``'s tick labels: every one, or every s-th from
    the first (s the smallest step that keeps them within ``limit``: evenly spaced, so a reader
    counts the unlabelled cells between two ticks); rotated 45° when ``rotate`` and they would
    not fit upright."""
    at = np.arange(0, len(labels), -(-len(labels) // limit))
    axis.set_ticks(at, labels=[labels[i] for i in at])
    if rotate and at.size * max(len(labels[i]) for i in at) > 48:
        for t in axis.get_ticklabels():
            t.set_rotation(45)
            t.set_ha("right")
            t.set_rotation_mode("anchor")


def equal_to_precision(values: Any, rtol: float = EQUAL_RTOL) -> bool:
    """True when the values' spread is at most ``rtol`` times their largest magnitude (or all are 0): a colour scale would only show rounding, so they are
    drawn in one colour."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return True
    lo, hi = float(v.min()), float(v.max())
    return hi - lo <= rtol * max(abs(lo), abs(hi))


def _panel_title(title: str, note: str | None) -> str:
    return title if not note else f"{title}\n{note}"


def bar_panel(estimate: Any, ci_low: Any, ci_high: Any, *, labels: Sequence[str], title: str,
              xlabel: str, post: Any = None, unit: str = "counts") -> bytes:
    """One small table (at most a few dozen cells) as bars with 95% interval whiskers, every
    bar named by its cell's value labels, as PNG bytes (:data:`PANEL_SIZE`). ``post``: the
    post-processed estimates, drawn as markers over the bars; intervals may be None or NaN
    (no per-query intervals: said under the title)."""
    title, unit = _title(title), _unit(unit)
    est = _vector(estimate, "estimate")
    k = est.size
    iv = _intervals(ci_low, ci_high, k)
    names = _labels(labels, k, "labels")
    pp = None if post is None else _vector(post, "post")
    if pp is not None:
        _same_length(pp, "post", k, "estimate")

    def draw() -> Figure:
        fig, (ax,) = _new_figure(PANEL_SIZE)
        x = np.arange(k)
        ax.bar(x, est, width=0.75, color="C0", alpha=0.85, zorder=2, label="estimate")
        if iv is not None:
            ok = ~np.isnan(iv[0])
            ax.errorbar(x[ok], est[ok], yerr=np.vstack([est[ok] - iv[0][ok], iv[1][ok] - est[ok]]).clip(0),
                        fmt="none", ecolor="black", elinewidth=0.9, capsize=2.5, zorder=3,
                        label="95% interval")
        if pp is not None:
            ax.plot(x, pp, ls="none", marker="D", ms=3.5, color="#2ca02c", zorder=4,
                    label="post-processed")
        ax.axhline(0, color="0.3", lw=0.6, zorder=1)
        _value_ticks(ax.xaxis, names, MAX_BAR_LABELS, rotate=True)
        ax.set_xlim(-0.6, k - 0.4)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"estimate ({unit})")
        ax.grid(True, axis="y", alpha=0.3)
        if iv is not None or pp is not None:
            ax.legend(fontsize=7, loc="best", framealpha=0.85)
        ax.set_title(_panel_title(title, None if iv is not None else "no per-query intervals"),
                     fontsize=10)
        return fig

    return _render(draw)


def line_panel(estimate: Any, ci_low: Any, ci_high: Any, *, series: Sequence[tuple[str, Any]],
               x_labels: Sequence[str], title: str, xlabel: str, post: Any = None,
               unit: str = "counts") -> bytes:
    """A table along an ordered axis (a CDF's cut-offs, ranges, the values of one attribute) as
    one line per series with its 95% band, as PNG bytes (:data:`PANEL_SIZE`).

    ``series``: ``[(name, indices into estimate, one per x position)]`` — e.g. the age CDF for
    each sex; ``x_labels``: the positions' value labels (thinned to :data:`MAX_TICKS`). Every
    point is drawn; ``post`` (same length as ``estimate``) is drawn dotted."""
    title, unit = _title(title), _unit(unit)
    est = _vector(estimate, "estimate")
    k = est.size
    iv = _intervals(ci_low, ci_high, k)
    pp = None if post is None else _vector(post, "post")
    if pp is not None:
        _same_length(pp, "post", k, "estimate")
    if isinstance(series, (str, bytes)) or not isinstance(series, Sequence) or not series:
        raise ReportError("series must be a non-empty list of (name, indices)")
    n = len(x_labels)
    lines = []
    for name, rows in series:
        r = np.asarray(rows, dtype=np.int64)
        if r.ndim != 1 or r.size != n or (r.size and (r.min() < 0 or r.max() >= k)):
            raise ReportError(f"series {name!r}: need {n} indices (one per x label) into the "
                              f"{k} estimates")
        lines.append((str(name), r))
    names = _labels(x_labels, n, "x_labels")

    def draw() -> Figure:
        fig, (ax,) = _new_figure(PANEL_SIZE)
        pos = np.arange(n)
        for c, (name, rows) in enumerate(lines):
            colour = f"C{c % 10}"
            if iv is not None:
                ax.fill_between(pos, iv[0][rows], iv[1][rows], color=colour, alpha=0.25, lw=0,
                                label="95% interval" if c == 0 else None)
            ax.plot(pos, est[rows], color=colour, lw=1.3, marker="o" if n <= 40 else None, ms=2.5,
                    zorder=3, label=name or "estimate")
            if pp is not None:
                ax.plot(pos, pp[rows], color=colour, lw=1.0, ls=":", zorder=4,
                        label="post-processed" if c == 0 else None)
        _value_ticks(ax.xaxis, names, MAX_TICKS, rotate=True)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"estimate ({unit})")
        ax.grid(True, alpha=0.3)
        if len(lines) > 1 or iv is not None or pp is not None:
            ax.legend(fontsize=7, loc="best", framealpha=0.85, ncols=2 if len(lines) > 4 else 1)
        ax.set_title(_panel_title(title, None if iv is not None else "no per-query intervals"),
                     fontsize=10)
        return fig

    return _render(draw)


def heatmap_panel(values: Any, *, row_labels: Sequence[str], col_labels: Sequence[str],
                  row_name: str, col_name: str, title: str, unit: str = "counts",
                  quantity: str = "estimate") -> bytes:
    """A table crossing two (groups of) attributes as an r × c heat map in value labels (rows
    top to bottom, thinned to :data:`MAX_TICKS` tick labels per axis), with a colour bar, as
    PNG bytes (:data:`PANEL_SIZE`). Values equal to :data:`EQUAL_RTOL` relative
    (:func:`equal_to_precision`) are drawn in one colour without a bar, and the title says
    so: a colour scale over them would only show rounding."""
    title, unit = _title(title), _unit(unit)
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise ReportError(f"values must be a non-empty 2-D array, got shape {arr.shape}")
    _vector(arr.reshape(-1), "values")
    r, c = arr.shape
    rows = _labels(row_labels, r, "row_labels")
    cols = _labels(col_labels, c, "col_labels")
    flat = equal_to_precision(arr)

    def draw() -> Figure:
        fig, (ax,) = _new_figure(PANEL_SIZE)
        note = None
        if flat:
            ax.imshow(np.zeros_like(arr), cmap=ListedColormap([_FLAT_COLOUR]), vmin=-1, vmax=1,
                      aspect="auto", interpolation="nearest")
            note = f"all {r * c:,} equal to {float(arr.flat[0]):.6g} (to {EQUAL_RTOL:g} relative)"
        else:
            im = ax.imshow(arr, cmap="viridis", aspect="auto", interpolation="nearest")
            fig.colorbar(im, ax=ax, label=f"{quantity} ({unit})", shrink=0.9)
        _value_ticks(ax.yaxis, rows, MAX_TICKS, rotate=False)
        _value_ticks(ax.xaxis, cols, MAX_TICKS, rotate=True)
        ax.set_ylabel(row_name)
        ax.set_xlabel(col_name)
        ax.set_title(_panel_title(title, note), fontsize=10)
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
