"""The report figures (``factorize.report.plots``): valid, deterministic PNGs and clear refusals.

Independent truths: the PNG signature and header, matplotlib's own decoder (``imread``) and
the documented pixel sizes (8 × 4 in at 100 dpi); colours the figures must (or must not)
contain — viridis' end colours for the heat map, the plan's highlight colour; real workloads
(``marginals:2x5x6x2:2``, ``kron(prefix:8,prefix:8)``) for the query counts and groups; and
the figure itself, captured just before it is saved, for the title notes and the number of
points drawn.
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


# ------------------------------------------------------------------------------- results

def test_results_marginals(captured):
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 100, K_MARG).astype(float)
    est = truth + rng.normal(0, 3, K_MARG)
    png = P.results_plot(est, est - 6, est + 6, kind="marginals", groups=GROUPS, title="2-way marginals",
                         truth=truth)
    assert decode(png).shape == (400, 800, 4)
    assert captured[-1]["title"] == "2-way marginals"
    assert png == P.results_plot(est, est - 6, est + 6, kind="marginals", groups=GROUPS,
                                 title="2-way marginals", truth=truth)


def test_results_cdf_and_nan_intervals(captured):
    W = parse_workload("prefix:64")
    h = np.random.default_rng(1).integers(0, 20, 64).astype(float)
    cdf = W.dense() @ h
    est = cdf + np.random.default_rng(2).normal(0, 4, 64)
    with_ci = P.results_plot(est, est - 8, est + 8, kind="cdf", title="CDF", truth=cdf)
    decode(with_ci)
    assert captured[-1]["title"] == "CDF"
    nan = np.full(64, np.nan)
    no_ci = P.results_plot(est, nan, nan, kind="cdf", title="CDF")
    decode(no_ci)
    assert "no per-query intervals" in captured[-1]["title"]
    # a projection Release's NaN columns, a scalar NaN and None all mean "no intervals"
    assert P.results_plot(est, np.nan, np.nan, kind="cdf", title="CDF") == no_ci
    assert P.results_plot(est, None, None, kind="cdf", title="CDF") == no_ci
    assert no_ci != P.results_plot(est, est - 8, est + 8, kind="cdf", title="CDF")
    for kind in ("marginals", "generic"):
        decode(P.results_plot(est, nan, nan, kind=kind, title=kind))
        assert "no per-query intervals" in captured[-1]["title"]
    # some queries without an interval: drawn where there is one, counted in the title
    part_lo, part_hi = (est - 8).copy(), (est + 8).copy()
    part_lo[:4] = part_hi[:4] = np.nan
    decode(P.results_plot(est, part_lo, part_hi, kind="generic", title="g"))
    assert "no interval for 4 of 64 queries" in captured[-1]["title"]


def test_results_generic_1e5_is_subsampled(captured):
    k = 100_000
    est = np.random.default_rng(3).normal(0, 1, k)
    png = P.results_plot(est, est - 2, est + 2, kind="generic", title="generic")
    assert decode(png).shape == (400, 800, 4)
    assert "showing 2,000 of 100,000 queries" in captured[-1]["title"]
    drawn = captured[-1]["lines"][0]
    assert drawn.size <= P.MAX_GENERIC_POINTS and drawn[0] == 0 and drawn[-1] == k - 1


def test_results_bad_input():
    e = np.arange(5.0)
    with pytest.raises(ValueError, match="ci_low has 4 entries but estimate has 5"):
        P.results_plot(e, e[:4], e[:4], kind="generic", title="t")
    with pytest.raises(ValueError, match="truth has 4 entries"):
        P.results_plot(e, e, e, kind="generic", title="t", truth=e[:4])
    with pytest.raises(ValueError, match="estimate is empty"):
        P.results_plot([], [], [], kind="generic", title="t")
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="estimate has 1 non-finite"):
            P.results_plot(np.r_[e, bad], None, None, kind="cdf", title="t")
    with pytest.raises(ValueError, match="kind"):
        P.results_plot(e, None, None, kind="histogram", title="t")
    with pytest.raises(ValueError, match="ci_low > ci_high"):
        P.results_plot(e, e + 1, e - 1, kind="generic", title="t")
    with pytest.raises(ValueError, match="both be given"):
        P.results_plot(e, e, None, kind="generic", title="t")
    with pytest.raises(ValueError, match="disagree"):
        P.results_plot(e, np.r_[np.nan, e[1:]], e, kind="generic", title="t")
    with pytest.raises(ValueError, match="start < stop"):
        P.results_plot(e, None, None, kind="marginals", groups=[("a", 0, 9)], title="t")
    with pytest.raises(ValueError, match="one-dimensional"):
        P.results_plot(np.ones((2, 2)), None, None, kind="generic", title="t")


# ---------------------------------------------------------------------- cross-cutting checks

def test_png_data_uri():
    png = P.results_plot([1.0, 2.0], None, None, kind="generic", title="t")
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
