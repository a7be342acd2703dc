"""The plan report's two figures are laid out once, without a layout engine, and nothing
they draw is cut off: every visible text (titles, tick labels, axis labels, group names,
the colour bar's label) lies inside the figure, for narrow and wide tick labels, rotated
group names, a heat map and the two-panel error plot; log axes over many decades carry no
minor ticks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from matplotlib.text import Text

from factorize.report import plots

NS = np.array([10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000])


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the plotting functions render, captured before ``_png`` clears them."""
    figs: list[Any] = []
    real = plots._png

    def capture(fig):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        w, h = fig.get_size_inches()
        # everything drawn (tick labels in view, titles, labels, legends), in inches
        tight = fig.get_tightbbox(renderer)
        titles = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
        figs.append((fig.get_layout_engine(), w, h, tight, titles,
                     [(ax.xaxis.get_minorticklocs(), ax.xaxis.get_scale()) for ax in fig.axes]))
        return real(fig)

    monkeypatch.setattr(plots, "_png", capture)
    return figs


def _inside(figs: list[Any]) -> None:
    for engine, w, h, b, titles, _ in figs:
        assert engine is None  # laid out once by _fixed_layout, no engine at draw time
        tol = 0.01  # inches (one pixel at 100 dpi)
        assert b.x0 >= -tol and b.y0 >= -tol and b.x1 <= w + tol and b.y1 <= h + tol, \
            f"something of {titles[:3]} is drawn outside the {w}×{h} in figure: {b}"


def test_per_query_plots_keep_every_label_inside(drawn: list[Any]) -> None:
    plots.per_query_std_plot(np.random.default_rng(0).random(47) + 1,
                             labels=[("x0 × x1", 0, 12), ("x0 × x2", 12, 32), ("x1 × x2", 32, 47)],
                             title="Standard deviation of each answer")
    names = [(f"attribute{i} × attribute{i + 1}", 3 * i, 3 * i + 3) for i in range(15)]  # 45°
    plots.per_query_std_plot(np.linspace(1e4, 1.23456e5, 45), labels=names, title="wide ticks")
    plots.per_query_std_plot(np.random.default_rng(1).random(288) + 1.5, grid_shape=(8, 36),
                             title="Standard deviation of each answer")
    # value labels on both axes (long ones shortened), and a grid of equal values (no bar)
    ages = [f"age {a} years and some" for a in range(17, 53)]
    plots.per_query_std_plot(np.random.default_rng(2).random(288) + 1.5, grid_shape=(8, 36),
                             axes_labels=("marital-status", [f"Married-civ-spouse {i}" for i in range(8)],
                                          "age", ages), title="Standard deviation of each answer")
    plots.per_query_std_plot(np.full(288, 2.5), grid_shape=(8, 36), title="equal")
    assert len(drawn) == 5
    _inside(drawn)


def test_error_vs_n_keeps_labels_inside_and_drops_minor_ticks(drawn: list[Any]) -> None:
    plots.error_vs_n_plot(NS, {"RMSE (counts)": np.full(NS.size, 3.7)}, title="Error vs n",
                          relative=True)
    # a narrow y range keeps its (labelled) minor ticks: they must fit too
    plots.error_vs_n_plot(NS, {"RMSE (counts)": np.full(NS.size, 12345.0),
                               "RMSE + bias β·n (bound)": np.sqrt(12345.0 ** 2 + (1e-3 * NS) ** 2)},
                          title="Error vs n", relative=True)
    plots.error_vs_n_plot(NS, {"RMSE (bound)": 5.0 / np.sqrt(NS)}, title="one panel")
    _inside(drawn)
    for *_, axes in drawn:
        for minor, scale in axes:
            assert scale == "log" and len(minor) == 0  # n spans five decades
