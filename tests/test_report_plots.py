"""The report figures (``factorize.report.plots``): valid, deterministic PNGs and clear refusals.

Independent truths: the PNG signature and header, matplotlib's own decoder (``imread``) and
the documented pixel sizes (8 × 4 in at 100 dpi, panels 4.6 × 3.1 in); colours the figures
must (or must not) contain — viridis' end colours for a heat map, one colour for values equal
to 1e-6 relative, the plan's highlight colour; real workloads
(``marginals:2x5x6x2:2``, ``kron(prefix:8,prefix:8)``) for the query counts and groups; and
the figure itself, captured just before it is saved, for the title notes, the axes and the
lines drawn.
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import subprocess
import sys

import matplotlib
import matplotlib.image
import numpy as np
import pytest
from matplotlib.colors import to_rgb

from factorize.report import plots as P
from workloads import parse_workload

MAGIC = b"\x89PNG\r\n\x1a\n"


def decode(png: bytes) -> np.ndarray:
    """The RGBA pixels, after checking the signature and that IHDR agrees with the decoder."""
    assert isinstance(png, bytes) and png[:8] == MAGIC
    assert png[12:16] == b"IHDR"
    w, h = struct.unpack(">II", png[16:24])
    img = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert img.shape == (h, w, 4)
    assert img.dtype == np.float32 and np.isfinite(img).all()
    return img


def has_colour(img: np.ndarray, colour: str, tol: float = 0.02, min_pixels: int = 20) -> bool:
    d = np.abs(img[..., :3] - np.array(to_rgb(colour), dtype=np.float32)).max(axis=-1)
    return int((d <= tol).sum()) >= min_pixels


def marginal_groups(sizes, names):
    out, start = [], 0
    for i in range(len(sizes)):
        for j in range(i + 1, len(sizes)):
            out.append((f"{names[i]}×{names[j]}", start, start + sizes[i] * sizes[j]))
            start += sizes[i] * sizes[j]
    return out


GROUPS = marginal_groups([2, 5, 6, 2], "abcd")
K_MARG = parse_workload("marginals:2x5x6x2:2").shape[0]


@pytest.fixture
def captured(monkeypatch):
    """Titles and the figure's artists, recorded just before each figure is saved."""
    seen = []
    real = P._png

    def spy(fig):
        ax = fig.axes[0]
        seen.append({"title": ax.get_title(), "suptitle": fig.get_suptitle(),
                     "lines": [ln.get_xdata() for ln in ax.get_lines()], "n_axes": len(fig.axes),
                     "images": len(ax.get_images())})
        return real(fig)

    monkeypatch.setattr(P, "_png", spy)
    return seen


# ------------------------------------------------------------------------------ per query std

def test_per_query_std_1d_with_marginal_groups():
    assert GROUPS[-1][2] == K_MARG == 78
    std = 1.0 + 0.1 * np.sin(np.arange(K_MARG))
    png = P.per_query_std_plot(std, labels=GROUPS, title="Standard deviation of each answer")
    assert decode(png).shape == (400, 800, 4)
    assert png == P.per_query_std_plot(std, labels=GROUPS, title="Standard deviation of each answer")
    assert png != P.per_query_std_plot(std * 2, labels=GROUPS, title="Standard deviation of each answer")
    assert not has_colour(decode(png), "#fde725")  # no viridis heat map on the 1-D path


def test_per_query_std_heat_map_for_kron_grid(captured):
    W = parse_workload("kron(prefix:8,prefix:8)")
    std = np.linalg.norm(W.dense(), axis=1)  # identity strategy: std ∝ row norms of W
    png = P.per_query_std_plot(std, grid_shape=(8, 8), title="kron(prefix:8,prefix:8)")
    img = decode(png)
    assert img.shape == (400, 800, 4)
    assert captured[-1]["images"] == 1 and captured[-1]["n_axes"] == 2  # image + colour bar
    assert has_colour(img, "#fde725", tol=0.03) and has_colour(img, "#440154", tol=0.03)
    # a 2-D array is the same grid
    assert P.per_query_std_plot(std.reshape(8, 8), title="kron(prefix:8,prefix:8)") == png
    with pytest.raises(ValueError, match="grid_shape"):
        P.per_query_std_plot(std, grid_shape=(8, 7), title="t")
    with pytest.raises(ValueError, match="only drawn on 1-D"):
        P.per_query_std_plot(std, grid_shape=(8, 8), labels=[("a", 0, 8)], title="t")


def test_per_query_std_bad_input():
    with pytest.raises(ValueError, match="empty"):
        P.per_query_std_plot([], title="t")
    with pytest.raises(ValueError, match="non-finite"):
        P.per_query_std_plot([1.0, np.nan], title="t")
    with pytest.raises(ValueError, match="≥ 0"):
        P.per_query_std_plot([1.0, -1.0], title="t")
    with pytest.raises(ValueError, match="start < stop"):
        P.per_query_std_plot(np.ones(5), labels=[("a", 0, 6)], title="t")
    with pytest.raises(ValueError, match="overlaps"):
        P.per_query_std_plot(np.ones(5), labels=[("a", 0, 3), ("b", 2, 5)], title="t")


# ---------------------------------------------------------------------------- error vs n

NS = np.array([10, 30, 100, 300, 1_000, 3_000, 10_000])


def test_error_vs_n_plot(captured):
    series = {"factorization": np.full(NS.size, 5.0), "factorization (bound)": np.full(NS.size, 5.5),
              "least-squares": np.minimum(5.0, np.sqrt(NS) / 3)}
    png = P.error_vs_n_plot(NS, series, title="Error vs dataset size")
    assert decode(png).shape == (400, 800, 4)
    assert png == P.error_vs_n_plot(NS, series, title="Error vs dataset size")
    rel = P.error_vs_n_plot(NS, series, title="Error vs dataset size", relative=True)
    assert decode(rel).shape == (400, 1100, 4)
    assert captured[-1]["n_axes"] == 2 and captured[-1]["suptitle"] == "Error vs dataset size"
    # NaN = a size that was not measured (skipped); order of ns does not matter
    gap = dict(series, **{"least-squares": np.where(NS == 300, np.nan, series["least-squares"])})
    decode(P.error_vs_n_plot(NS[::-1], {k: v[::-1] for k, v in gap.items()}, title="t"))


def test_error_vs_n_bad_input():
    with pytest.raises(ValueError, match="has 3 entries but ns has 7"):
        P.error_vs_n_plot(NS, {"a": [1.0, 2.0, 3.0]}, title="t")
    with pytest.raises(ValueError, match="non-empty mapping"):
        P.error_vs_n_plot(NS, {}, title="t")
    with pytest.raises(ValueError, match="ns is empty"):
        P.error_vs_n_plot([], {"a": []}, title="t")
    with pytest.raises(ValueError, match="positive"):
        P.error_vs_n_plot(NS, {"a": np.zeros(NS.size)}, title="t")
    with pytest.raises(ValueError, match="non-finite"):
        P.error_vs_n_plot(NS, {"a": np.full(NS.size, np.inf)}, title="t")
    with pytest.raises(ValueError, match="no finite value"):
        P.error_vs_n_plot(NS, {"a": np.full(NS.size, np.nan)}, title="t")


# ---------------------------------------------------------------------------- comparison

def test_comparison_plot_highlight_and_size():
    names = ["this plan", "identity", "hierarchical"]
    png = P.comparison_plot(names, [3.2, 12.5, 4.1], [4.0, 12.5, np.nan], title="vs baselines")
    img = decode(png)
    assert img.shape == (400, 800, 4)
    assert has_colour(img, P._HIGHLIGHT, min_pixels=500)
    none = decode(P.comparison_plot(names, [3.2, 12.5, 4.1], None, highlight=None, title="vs baselines"))
    assert not has_colour(none, P._HIGHLIGHT)
    assert png == P.comparison_plot(names, [3.2, 12.5, 4.1], [4.0, 12.5, np.nan], title="vs baselines")
    many = P.comparison_plot([f"m{i}" for i in range(12)], np.arange(1.0, 13.0), np.arange(2.0, 14.0),
                             highlight=3, title="many")
    assert decode(many).shape == (650, 800, 4)  # 0.42·12 + 1.5 = 6.5 in
    decode(P.comparison_plot(names, [1.0, 500.0, 2.0], [1.5, 600.0, 3.0], title="log axis"))


def test_comparison_bad_input():
    with pytest.raises(ValueError, match="rmse has 2 entries but names has 3"):
        P.comparison_plot(["a", "b", "c"], [1.0, 2.0], [1.0, 2.0, 3.0], title="t")
    with pytest.raises(ValueError, match="names is empty"):
        P.comparison_plot([], [], [], title="t")
    with pytest.raises(ValueError, match="highlight"):
        P.comparison_plot(["a"], [1.0], [1.0], highlight=1, title="t")
    with pytest.raises(ValueError, match="non-finite"):
        P.comparison_plot(["a", "b"], [1.0, np.nan], [1.0, 1.0], title="t")


# ---------------------------------------------------------------------------- table panels

def test_bar_panel_names_every_cell_and_draws_intervals(captured):
    est = np.array([13040.1, 520.7, 180.9, 28734.0])
    labels = ["Female, White", "Female, Asian-Pac-Islander", "Male, Other", "Male, White"]
    png = P.bar_panel(est, est - 6.6, est + 6.6, labels=labels, title="sex,race", xlabel="sex, race")
    assert decode(png).shape == (310, 460, 4)  # PANEL_SIZE at 100 dpi
    assert captured[-1]["title"] == "sex,race"
    assert png == P.bar_panel(est, est - 6.6, est + 6.6, labels=labels, title="sex,race",
                              xlabel="sex, race")
    no_ci = P.bar_panel(est, None, None, labels=labels, title="sex,race", xlabel="sex, race")
    assert "no per-query intervals" in captured[-1]["title"] and no_ci != png
    # a projection release's NaN intervals mean the same
    assert P.bar_panel(est, np.nan, np.nan, labels=labels, title="sex,race", xlabel="sex, race") == no_ci


def test_line_panel_draws_each_series_over_value_labels(captured):
    W = parse_workload("prefix:12")
    h = np.random.default_rng(1).integers(0, 20, (12, 2)).astype(float)
    cdf = (W.dense() @ h).reshape(-1)  # rows: (age, sex) row-major, as kron(prefix, identity)
    est = cdf + np.random.default_rng(2).normal(0, 4, cdf.size)
    ages = [str(a) for a in range(17, 29)]
    series = [("sex=Female", np.arange(0, 24, 2)), ("sex=Male", np.arange(1, 24, 2))]
    png = P.line_panel(est, est - 8, est + 8, series=series, x_labels=ages, title="cdf(age) by sex",
                       xlabel="age ≤ (cut-off)", post=np.maximum(est, 0))
    decode(png)
    assert captured[-1]["title"] == "cdf(age) by sex"
    assert len(captured[-1]["lines"]) == 4  # two estimates, two post-processed
    with pytest.raises(ValueError, match="need 12 indices"):
        P.line_panel(est, None, None, series=[("a", np.arange(11))], x_labels=ages, title="t", xlabel="x")
    with pytest.raises(ValueError, match="non-empty list"):
        P.line_panel(est, None, None, series=[], x_labels=ages, title="t", xlabel="x")


def test_heat_maps_of_values_equal_to_precision_are_one_colour(captured):
    """Values that differ by less than 1e-6 relative — a plan's per-query deviations equal up to
    rounding — get one colour and no colour bar (a scale would spread viridis over rounding),
    and the title says they are equal to that precision; distinct values keep the scale."""
    flat = 3.363221499095 + np.random.default_rng(0).normal(0, 1e-9, 10)
    assert P.equal_to_precision(flat) and not P.equal_to_precision([1.0, 1.001])
    assert P.equal_to_precision(np.zeros(3))
    png = P.per_query_std_plot(flat, grid_shape=(2, 5), title="std", axes_labels=(
        "sex", ["Female", "Male"], "race", ["White", "Black", "Asian", "Other", "Amer-Indian"]))
    img = decode(png)
    assert captured[-1]["n_axes"] == 1 and "all 10 queries equal to 3.36322 counts" in captured[-1]["title"]
    assert not has_colour(img, "#fde725", tol=0.03) and not has_colour(img, "#440154", tol=0.03)
    assert has_colour(img, P._FLAT_COLOUR, min_pixels=10_000)
    heat = P.heatmap_panel(flat.reshape(2, 5), row_labels=["F", "M"], col_labels=list("abcde"),
                           row_name="sex", col_name="race", title="race by sex", quantity="std")
    assert "equal to 3.36322 (to 1e-06 relative)" in captured[-1]["title"]
    assert captured[-1]["n_axes"] == 1 and has_colour(decode(heat), P._FLAT_COLOUR, min_pixels=10_000)
    varied = P.heatmap_panel(np.arange(10.0).reshape(2, 5), row_labels=["F", "M"],
                             col_labels=list("abcde"), row_name="sex", col_name="race", title="t")
    assert captured[-1]["n_axes"] == 2 and has_colour(decode(varied), "#fde725", tol=0.03)


def test_panels_refuse_bad_input():
    e = np.arange(5.0)
    labels = list("abcde")
    with pytest.raises(ValueError, match="ci_low has 4 entries but estimate has 5"):
        P.bar_panel(e, e[:4], e[:4], labels=labels, title="t", xlabel="x")
    with pytest.raises(ValueError, match="estimate is empty"):
        P.bar_panel([], None, None, labels=[], title="t", xlabel="x")
    with pytest.raises(ValueError, match="estimate has 1 non-finite"):
        P.bar_panel(np.r_[e[:4], np.inf], None, None, labels=labels, title="t", xlabel="x")
    with pytest.raises(ValueError, match="ci_low > ci_high"):
        P.bar_panel(e, e + 1, e - 1, labels=labels, title="t", xlabel="x")
    with pytest.raises(ValueError, match="both be given"):
        P.bar_panel(e, e, None, labels=labels, title="t", xlabel="x")
    with pytest.raises(ValueError, match="disagree"):
        P.bar_panel(e, np.r_[np.nan, e[1:]], e, labels=labels, title="t", xlabel="x")
    with pytest.raises(ValueError, match="labels has 4 entries but the panel has 5"):
        P.bar_panel(e, None, None, labels=labels[:4], title="t", xlabel="x")
    with pytest.raises(ValueError, match="2-D"):
        P.heatmap_panel(e, row_labels=labels, col_labels=["x"], row_name="r", col_name="c", title="t")
    with pytest.raises(ValueError, match="give grid_shape too"):
        P.per_query_std_plot(e, axes_labels=("r", ["a"], "c", list("abcde")), title="t")


# ---------------------------------------------------------------------- cross-cutting checks

def test_png_data_uri():
    png = P.bar_panel([1.0, 2.0], None, None, labels=["a", "b"], title="t", xlabel="x")
    uri = P.png_data_uri(png)
    assert uri.startswith("data:image/png;base64,")
    assert base64.b64decode(uri.split(",", 1)[1]) == png
    with pytest.raises(ValueError, match="PNG signature"):
        P.png_data_uri(b"GIF89a")
    with pytest.raises(ValueError, match="bytes"):
        P.png_data_uri("data")


def test_output_ignores_user_style_and_has_no_software_stamp():
    std = np.linspace(1, 2, 30)
    ref = P.per_query_std_plot(std, title="t")
    with matplotlib.rc_context({"lines.linewidth": 6, "font.size": 20, "axes.facecolor": "black",
                                "figure.dpi": 300}):
        assert P.per_query_std_plot(std, title="t") == ref
    assert b"Software" not in ref and b"matplotlib" not in ref.lower()


def test_no_pyplot_state_and_same_bytes_in_a_fresh_process():
    code = ("import sys, hashlib, numpy as np; from factorize.report import plots as P; "
            "png = P.per_query_std_plot(np.arange(1.0, 5.0), title='t'); "
            "print('matplotlib.pyplot' in sys.modules, hashlib.sha256(png).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    here = hashlib.sha256(P.per_query_std_plot(np.arange(1.0, 5.0), title="t")).hexdigest()
    assert out.stdout.split() == ["False", here]
