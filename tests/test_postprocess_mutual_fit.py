"""The mutual fit of tables that raking cannot make consistent (``postprocess.mutual_fit``).

Independent truth: the fit's limit is the Kullback–Leibler (I-)projection of the floored start
onto the consistent tables of total n (every update multiplies a table by a function of one of
its marginals, so the iterates stay in the exponential family through the start, and a
consistent member of it is the I-projection: Csiszár 1975, Thm 3.1); it is compared with
cvxpy's exponential-cone solution of that projection. Tolerances: the solver's (Clarabel, 1e-9
gaps) bounds the comparison at 1e-5 relative to the total.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from factorize.postprocess.mutual_fit import FLOOR, disagreement, fit_mutually
from factorize.postprocess.raking import MUTUAL_TOL, RAKE_TOL, rake_tables
from factorize.postprocess.tables import marginal


def _upto3(sizes: list[int]) -> list[tuple[int, ...]]:
    d = len(sizes)
    return [T for r in range(1, 4) for T in itertools.combinations(range(d), r)]


def _noisy_tables(sizes: list[int], attrs: list[tuple[int, ...]], seed: int, records: int,
                  sigma: float) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, n, size=records) for n in sizes], axis=1)
    codes[:, 1] = np.where(rng.random(records) < 0.8, codes[:, 0] % sizes[1], codes[:, 1])
    out = []
    for T in attrs:
        t = np.zeros(tuple(sizes[j] for j in T))
        np.add.at(t, tuple(codes[:, j] for j in T), 1.0)
        out.append(np.maximum(t + rng.normal(0.0, sigma, t.shape), 0.0))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_mutual_fit_is_the_kl_projection_of_the_floored_start(seed):
    cp = pytest.importorskip("cvxpy")
    sizes = [2, 3, 2, 2]
    attrs = _upto3(sizes)
    tables = _noisy_tables(sizes, attrs, seed, records=60, sigma=4.0)
    n = 60.0
    fit = fit_mutually(attrs, tables, np.ones(len(attrs)), n, tol=1e-12, max_sweeps=20000)
    assert fit.disagreement <= 1e-9 * n
    start = [t + FLOOR * n / max(x.size for x in tables) for t in tables]
    mus = [cp.Variable(t.size, nonneg=True) for t in start]
    cons = []

    def marg_matrix(T, U):
        shape = tuple(sizes[j] for j in T)
        M = np.zeros((math.prod(sizes[j] for j in U), math.prod(shape)))
        for cell in itertools.product(*(range(s) for s in shape)):
            row = np.ravel_multi_index(tuple(cell[T.index(j)] for j in U), tuple(sizes[j] for j in U)) if U else 0
            M[row, np.ravel_multi_index(cell, shape)] = 1.0
        return M

    for (s, S), (t, T) in itertools.combinations(enumerate(attrs), 2):
        U = tuple(sorted(set(S) & set(T)))
        cons.append(marg_matrix(S, U) @ mus[s] == marg_matrix(T, U) @ mus[t])
    cons += [cp.sum(m) == n for m in mus]
    obj = sum(cp.sum(cp.rel_entr(m, z.reshape(-1)) - m) for m, z in zip(mus, start, strict=True))
    cp.Problem(cp.Minimize(obj), cons).solve(solver=cp.CLARABEL)
    for m, f in zip(mus, fit.tables, strict=True):
        np.testing.assert_allclose(f.reshape(-1), m.value, atol=1e-5 * n)


def test_raking_hands_three_parent_levels_to_the_mutual_fit_and_they_agree():
    """Three 2-way tables, consistent pairwise but with no joint table (a = b, a = c, b ≠ c on
    binary attributes): raking fixes them and cannot fit the 3-way table to all three; the
    mutual fit moves every table and they agree to MUTUAL_TOL of the total."""
    n = 100.0
    eq = np.array([[0.5, 0.0], [0.0, 0.5]]) * n
    ne = np.array([[0.0, 0.5], [0.5, 0.0]]) * n
    attrs = [(0, 1), (0, 2), (1, 2), (0, 1, 2)]
    tables = [eq, eq, ne, np.full((2, 2, 2), n / 8)]
    r = rake_tables(attrs, tables, np.ones(4), [2, 2, 2], n)
    assert r.mutual_sweeps > 0
    assert r.disagreement <= MUTUAL_TOL * n
    assert disagreement(attrs, r.tables) == r.disagreement
    for t in r.tables:
        assert float(t.min()) > 0.0
        assert abs(float(t.sum()) - n) <= 1e-9 * n
    for T, t in zip(attrs[:3], r.tables[:3], strict=True):
        np.testing.assert_allclose(marginal(r.tables[3], attrs[3], T), t, atol=MUTUAL_TOL * n)


def test_tables_raking_makes_consistent_skip_the_mutual_fit():
    sizes = [3, 4, 2]
    attrs = [(0,), (0, 1), (1, 2)]
    tables = _noisy_tables(sizes, attrs, 5, records=200, sigma=1.0)
    r = rake_tables(attrs, tables, np.ones(3), sizes, 200.0)
    assert r.mutual_sweeps == 0 and r.disagreement <= RAKE_TOL * 200.0


def test_a_zero_total_gives_zero_tables():
    fit = fit_mutually([(0,), (0, 1)], [np.ones(2), np.ones((2, 2))], np.ones(2), 0.0,
                       tol=1e-10, max_sweeps=10)
    assert all(float(np.abs(t).max()) == 0.0 for t in fit.tables) and fit.disagreement == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_integer_rounding_repairs_three_parent_levels_to_exact_agreement(seed):
    """Consistent real ≤3-way tables (the marginals of a real histogram) rounded: every table a
    non-negative integer table of one total, and — with the unit-cycle repair of the third
    parent — every two tables agree exactly; every integer cell within 3 of its real value."""
    from factorize.postprocess.rounding import round_tables
    from factorize.postprocess.tables import marginal_layout
    from workloads.spec import parse_workload

    sizes = [3, 4, 3, 5]
    layout = marginal_layout(parse_workload("marginals_upto:3x4x3x5:3"), sizes)
    rng = np.random.default_rng(seed)
    hist = rng.gamma(0.3, 4.0, size=tuple(sizes))
    hist *= 200.0 / hist.sum()
    real = [np.asarray(marginal(hist, (0, 1, 2, 3), T), dtype=np.float64) for T in layout.tables]
    r = round_tables(layout, real)
    assert r.disagreement == 0 and not r.unforced
    for t, x in zip(r.tables, real, strict=True):
        assert t.dtype.kind == "i" and int(t.min()) >= 0 and int(t.sum()) == r.total == 200
        assert float(np.abs(t - x).max()) <= 3.0
    assert disagreement(layout.tables, [t.astype(np.float64) for t in r.tables]) == 0.0
