"""``engines.marginals_duckdb`` / ``executor.data.load_marginals``: marginal tables of records
equal the dense histogram's marginals, for any domain size, with the DuckDB engine's checks
and messages (values never shown); the scan planner covers every requested subset.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from factorize.engines import (
    DataError,
    MarginalTables,
    duckdb_engine,
    histogram_duckdb,
    marginals_duckdb,
    marginals_from_histogram,
)
from factorize.engines.marginal_tables import maximal_subsets, normalize_subsets, plan_scans, subset_cells
from factorize.engines.synthetic import synthetic_domain, synthetic_records
from factorize.executor.data import load_histogram, load_marginals
from tests.engine_files import write_csv, write_parquet
from workloads import Domain

SENTINEL = 987654
DOM = Domain(["a", "b", "c"], [3, 4, 5])


# -- helpers ----------------------------------------------------------------------------------


def random_records(rng: np.random.Generator, sizes: tuple[int, ...], n: int) -> np.ndarray:
    return np.stack([rng.integers(0, s, n) for s in sizes], axis=1)


def dense_marginal(h: np.ndarray, sizes: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    other = tuple(j for j in range(len(sizes)) if j not in subset)
    return np.asarray(h.reshape(sizes).sum(axis=other), dtype=np.int64).reshape(-1)


def records_marginal(recs: np.ndarray, sizes: tuple[int, ...], subset: tuple[int, ...]) -> np.ndarray:
    """Reference straight from the records (no dense histogram): bincount of the projection."""
    if not subset:
        return np.array([len(recs)], dtype=np.int64)
    cells = np.ravel_multi_index(tuple(recs[:, list(subset)].T), [sizes[j] for j in subset])
    return np.bincount(cells, minlength=math.prod(sizes[j] for j in subset)).astype(np.int64)


def assert_matches_histogram(m: MarginalTables, h: np.ndarray, domain: Domain, subsets: list) -> None:
    assert m.n_records == int(h.sum())
    distinct = list(dict.fromkeys(tuple(s) for s in subsets))
    assert list(m) == distinct
    for s in distinct:
        t = m[s]
        assert t.dtype == np.int64 and t.shape == (subset_cells(domain.sizes, s),), s
        np.testing.assert_array_equal(t, dense_marginal(h, domain.sizes, s), err_msg=str(s))


def raises_private(fn, *args, sentinel: object = SENTINEL, match: str | None = None, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        fn(*args, **kwargs)
    # the counted rendering (what `factorize data check` prints); the public one (str) has
    # no counts: tests/test_security_refusals.py
    msg = info.value.for_holder()
    assert str(sentinel) not in msg and str(sentinel) not in str(info.value), msg
    if match is not None:
        assert match in msg, msg
    return msg


def same_refusal(path: Path, domain: Domain, subsets: list, **kwargs) -> str:
    """marginals_duckdb refuses ``path`` with exactly histogram_duckdb's message."""
    hist_msg = raises_private(histogram_duckdb, path, domain, **kwargs)
    marg_msg = raises_private(marginals_duckdb, path, domain, subsets, **kwargs)
    assert marg_msg == hist_msg
    return marg_msg


SUBSETS_4 = [(), (0,), (0, 2), (1, 2, 3), (0, 2), (), (2,), (3,), (0, 1, 2, 3), (1,), (0, 3), (2, 3)]


# -- equality with the dense histogram --------------------------------------------------------


@pytest.mark.parametrize(
    "sizes,n,seed",
    [((3, 1, 4, 5), 700, 0), ((2, 7, 1, 3), 50, 1), ((1, 1, 1, 1), 5, 2), ((9, 8, 3, 2), 4000, 3)],
)
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_matches_dense_histogram(tmp_path, sizes, n, seed, fmt):
    rng = np.random.default_rng(seed)
    domain = Domain([f"x{j}" for j in range(len(sizes))], sizes)
    recs = random_records(rng, sizes, n)
    cols = {a: recs[:, j] for j, a in enumerate(domain.attributes)}
    if fmt == "csv":
        path = tmp_path / "r.csv"
        pacsv.write_csv(pa.table(cols), path)
    else:
        path = write_parquet(tmp_path / "r.parquet", cols)
    h = histogram_duckdb(path, domain)
    m = marginals_duckdb(path, domain, SUBSETS_4)
    assert_matches_histogram(m, h, domain, SUBSETS_4)
    # every subset of the domain, requested at once, and each alone
    every = [s for r in range(len(sizes) + 1) for s in itertools.combinations(range(len(sizes)), r)]
    assert_matches_histogram(marginals_duckdb(path, domain, every), h, domain, every)
    for s in every:
        assert_matches_histogram(marginals_duckdb(str(path), domain, [s], threads=1), h, domain, [s])


def test_tables_are_readonly_and_shaped(tmp_path):
    recs = np.array([[0, 1, 2], [2, 3, 4], [1, 0, 0], [0, 1, 2]])
    path = write_csv(tmp_path / "r.csv", ["a", "b", "c"], recs.tolist())
    m = marginals_duckdb(path, DOM, [(0, 2), [1], ()])
    assert m.n_records == 4 and len(m) == 3 and (0, 2) in m and [1] in m and (2,) not in m
    np.testing.assert_array_equal(m[()], [4])
    np.testing.assert_array_equal(m[[1]], [1, 2, 0, 1])
    assert m.shape((0, 2)) == (3, 5) and m.names((0, 2)) == ("a", "c")
    t = m.table((0, 2))
    assert t.shape == (3, 5) and t[0, 2] == 2 and t[2, 4] == 1 and t[1, 0] == 1
    with pytest.raises(ValueError):
        m[(0, 2)][0] = 7
    assert dict(m.items()).keys() == {(0, 2), (1,), ()}


def test_csv_spellings_of_one_code_are_one_code(tmp_path):
    # "1", " 1 ", "+1", "1.0" are the same code: the tables merge them
    path = tmp_path / "spell.csv"
    path.write_text('a,b,c\n1,2,3\n 1 ,+2,3.0\n"1.",2,3\n0,0,4\n', encoding="utf-8")
    m = marginals_duckdb(path, DOM, [(0, 1, 2), (0,)])
    np.testing.assert_array_equal(m[(0,)], [1, 3, 0])
    assert m[(0, 1, 2)][(1 * 4 + 2) * 5 + 3] == 3


def test_superset_scans_and_budget_edge_cases(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    sizes = (2, 3, 1, 5, 4, 2, 7)
    domain = Domain([f"x{j}" for j in range(len(sizes))], sizes)
    recs = random_records(rng, sizes, 3000)
    path = write_parquet(tmp_path / "r.parquet", {a: recs[:, j] for j, a in enumerate(domain.attributes)})
    h = histogram_duckdb(path, domain)
    subsets = [s for r in range(4) for s in itertools.combinations(range(len(sizes)), r)]
    subsets.append((0, 1, 3, 4, 6))  # a big one (840 cells) next to the 3-way tables
    # budget 1: one scan per maximal subset; 64, 4096: supersets; 2**40 (the default for few
    # distinct tuples): one scan over all 7 attributes (1680 cells, made dense)
    for budget in (1, 64, 2**12, 2**40):
        monkeypatch.setattr(duckdb_engine, "_scan_budget", lambda n_distinct, b=budget: b)
        assert_matches_histogram(marginals_duckdb(path, domain, subsets), h, domain, subsets)
    # 40 records: the measured table (1680 cells) stays sparse
    small = write_parquet(tmp_path / "s.parquet", {a: recs[:40, j] for j, a in enumerate(domain.attributes)})
    assert_matches_histogram(marginals_duckdb(small, domain, subsets), histogram_duckdb(small, domain), domain, subsets)


def test_no_dense_histogram_for_a_huge_domain(tmp_path):
    # 100 binary attributes: N = 2**100 cells; 2-way tables (and their closure) are exact
    rng = np.random.default_rng(5)
    d, n = 100, 300
    sizes = (2,) * d
    domain = Domain([f"f{j}" for j in range(d)], sizes)
    assert domain.size == 2**100
    recs = (rng.random((n, d)) < rng.uniform(0.1, 0.9, d)).astype(np.int8)
    path = write_parquet(tmp_path / "wide.parquet", {a: recs[:, j] for j, a in enumerate(domain.attributes)})
    pairs = list(itertools.combinations(range(d), 2))
    subsets = [()] + [(j,) for j in range(d)] + pairs
    m = marginals_duckdb(path, domain, subsets)
    assert m.n_records == n and len(m) == len(subsets)
    for s in subsets:
        np.testing.assert_array_equal(m[s], records_marginal(recs, sizes, s), err_msg=str(s))
    # CSV too, with a few 3-way tables
    csv_path = tmp_path / "wide.csv"
    pacsv.write_csv(pa.table({a: recs[:, j] for j, a in enumerate(domain.attributes)}), csv_path)
    few = [(0, 1, 99), (5, 50), (7,)]
    m2 = marginals_duckdb(csv_path, domain, few)
    for s in few:
        np.testing.assert_array_equal(m2[s], records_marginal(recs, sizes, s))
    raises_private(histogram_duckdb, path, domain, match="marginals")  # the dense route is refused


def test_synthetic_records_are_seeded_public_data(tmp_path):
    sizes = [2 + (7 * j) % 9 for j in range(6)]
    domain = synthetic_domain(sizes)
    p1 = synthetic_records(5000, sizes, 3, tmp_path / "a.parquet")
    p2 = synthetic_records(5000, sizes, 3, tmp_path / "b.parquet", correlation=0.0)
    p3 = synthetic_records(5000, sizes, 4, tmp_path / "c.parquet", correlation=0.5)
    t1, t2, t3 = (pq.read_table(p) for p in (p1, p2, p3))
    assert t1.equals(t2) and not t1.equals(t3)
    assert t1.column_names == list(domain.attributes) and t1.num_rows == 5000
    for j, s in enumerate(sizes):
        col = t3.column(j).to_numpy()
        assert col.dtype == np.uint8 and col.min() >= 0 and col.max() < s
    every = [s for r in range(3) for s in itertools.combinations(range(len(sizes)), r)]
    h = histogram_duckdb(p3, domain)
    assert_matches_histogram(marginals_duckdb(p3, domain, every), h, domain, every)
    with pytest.raises(ValueError):
        synthetic_records(10, [2, 0], 0, tmp_path / "x.parquet")


# -- adult ------------------------------------------------------------------------------------


def test_adult_all_pairs_match_projected_histograms(adult):
    csv_path, dom_path = adult
    full = Domain.from_json(dom_path)
    d = len(full)
    pairs = list(itertools.combinations(range(d), 2))
    m = marginals_duckdb(csv_path, full, [()] + [(j,) for j in range(d)] + pairs)
    assert m.n_records == 48842
    for s in [(0, 1), (7, 8), (8, 13), (2, 11), (12, 13)] + [(j,) for j in range(d)]:
        proj = full.project([full.attributes[j] for j in s])
        np.testing.assert_array_equal(m[s], histogram_duckdb(csv_path, proj, allow_extra_columns=True))
    for s in pairs:
        assert int(m[s].sum()) == 48842


# -- refusals: the messages of histogram_duckdb ----------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize(
    "bad,kind",
    [
        (SENTINEL, "outside 0..3"),
        (-1, "outside 0..3"),
        (1.5, "not an integer"),
        (f"abc{SENTINEL}", "not an integer"),
        (None, "missing"),
        (float("nan"), None),
    ],
)
def test_bad_values_same_refusal_as_histogram(tmp_path, fmt, bad, kind):
    rows = [[0, 1, 2], [2, 3, 4], [1, bad, 1], [0, 0, 0]]
    if fmt == "csv":
        path = write_csv(tmp_path / "bad.csv", ["a", "b", "c"], rows)
        kind = "not an integer" if isinstance(bad, float) and np.isnan(bad) else kind
    else:
        if bad is None or isinstance(bad, float):
            colb = pa.array([r[1] for r in rows], pa.float64())
        elif isinstance(bad, str):
            colb = pa.array([str(r[1]) for r in rows])
        else:
            colb = pa.array([r[1] for r in rows], pa.int64())
        kind = "missing" if isinstance(bad, float) and np.isnan(bad) else kind
        path = write_parquet(tmp_path / "bad.parquet", {"a": [r[0] for r in rows], "b": colb, "c": [r[2] for r in rows]})
    # the refused column need not be in any requested subset: every record is checked
    for subsets in ([(0, 1), (2,)], [(0, 2)], [()]):
        msg = same_refusal(path, DOM, subsets)
        if fmt == "parquet" and isinstance(bad, str):  # text in a typed file: refused as such
            assert "['b']" in msg and "hold text" in msg
            continue
        assert f"column 'b': 1 row {kind}" in msg and "'a'" not in msg


def test_file_problems_same_refusal_as_histogram(tmp_path):
    subsets = [(0, 1), (1, 2)]
    # missing and extra columns
    same_refusal(write_csv(tmp_path / "m.csv", ["a", "c", "zz"], [[0, SENTINEL, 1]]), DOM, subsets)
    same_refusal(write_parquet(tmp_path / "m.parquet", {"a": [0], "c": [SENTINEL]}), DOM, subsets)
    extra = write_csv(tmp_path / "x.csv", ["junk", "a", "b", "c"], [[SENTINEL, 0, 1, 2]])
    msg = same_refusal(extra, DOM, subsets)
    assert "'junk'" in msg and "--ignore-extra-columns" in msg
    m = marginals_duckdb(extra, DOM, subsets, allow_extra_columns=True)
    assert m.n_records == 1 and m[(0, 1)][1] == 1
    m = marginals_duckdb(extra, DOM, subsets, columns=["a", "b", "c"])
    assert m[(1, 2)][1 * 5 + 2] == 1
    # empty inputs
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b,c\n", encoding="utf-8")
    assert "no records" in same_refusal(header_only, DOM, subsets)
    empty = tmp_path / "e.csv"
    empty.write_bytes(b"")
    assert "is empty" in same_refusal(empty, DOM, subsets)
    pq_empty = write_parquet(tmp_path / "e.parquet", {k: pa.array([], pa.int64()) for k in DOM.attributes})
    assert "no records" in same_refusal(pq_empty, DOM, [()])
    # malformed rows, repeated columns, missing file, wrong suffix, corrupt parquet
    ragged = tmp_path / "ragged.csv"
    ragged.write_text(f"a,b,c\n0,1,2\n1,2,3,{SENTINEL}\n", encoding="utf-8")
    same_refusal(ragged, DOM, subsets)
    same_refusal(write_csv(tmp_path / "dup.csv", ["a", "b", "c", "b"], [[0, 1, 2, SENTINEL]]), DOM, subsets)
    same_refusal(tmp_path / "nope.parquet", DOM, subsets)
    txt = tmp_path / "d.txt"
    txt.write_text(f"a,b,c\n{SENTINEL},0,0\n", encoding="utf-8")
    same_refusal(txt, DOM, subsets)
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + str(SENTINEL).encode() * 10)
    same_refusal(corrupt, DOM, subsets)


def test_bad_subsets_are_value_errors(tmp_path):
    path = write_csv(tmp_path / "r.csv", ["a", "b", "c"], [[0, 1, 2]])
    for bad in ([(1, 0)], [(0, 0)], [(3,)], [(-1,)], [(True,)], [("a",)], ["ab"], [(0.0,)], [5], "01"):
        with pytest.raises(ValueError) as info:
            marginals_duckdb(path, DOM, bad)
        assert not isinstance(info.value, DataError)
    wide = Domain(["a", "b", "c"], [2**21, 2**20, 2])
    with pytest.raises(ValueError, match="2\\*\\*40"):
        marginals_duckdb(path, wide, [(0, 1)])
    raises_private(marginals_duckdb, path, {"a": 3}, [()], match="workloads.Domain")
    assert marginals_duckdb(path, DOM, []).n_records == 1  # no tables: only the count


# -- the planner ------------------------------------------------------------------------------


def test_maximal_subsets():
    assert maximal_subsets([(), (0,), (0, 1), (1,), (2,), (0, 1), (1, 2)]) == [(0, 1), (1, 2)]
    assert maximal_subsets([(), ()]) == [()]
    assert maximal_subsets([(3,), (0, 1)]) == [(3,), (0, 1)]
    rng = np.random.default_rng(0)
    for _ in range(300):
        d = int(rng.integers(1, 7))
        subs = [tuple(sorted(rng.choice(d, int(rng.integers(0, d + 1)), replace=False).tolist()))
                for _ in range(int(rng.integers(1, 12)))]
        distinct = list(dict.fromkeys(subs))
        expected = [s for s in distinct if not any(set(s) < set(t) for t in distinct)]
        assert maximal_subsets(subs) == expected


@pytest.mark.parametrize("budget", [1, 100, 4096, 2**17])
def test_plan_scans_covers_every_subset_within_budget(budget):
    rng = np.random.default_rng(budget)
    for _ in range(20):
        d = int(rng.integers(1, 12))
        sizes = [int(s) for s in rng.integers(1, 12, d)]
        subs = [tuple(sorted(rng.choice(d, int(rng.integers(0, min(d, 4) + 1)), replace=False).tolist()))
                for _ in range(int(rng.integers(1, 30)))]
        plans = plan_scans(sizes, subs, budget)
        assert plans == plan_scans(sizes, subs, budget)  # deterministic
        for t in plans:
            assert list(t) == sorted(set(t))
            cells = subset_cells(sizes, t)
            # a scan exceeds the budget only when it is a requested subset itself
            assert cells <= budget or t in subs
        for s in subs:
            assert not s or any(set(s) <= set(t) for t in plans), s


def test_plan_for_all_three_way_subsets_is_small():
    sizes = [2 + (7 * j) % 9 for j in range(30)]
    subs = list(itertools.combinations(range(30), 3))
    plans = plan_scans(sizes, subs, 2**17)
    assert len(plans) < 400  # vs 4,060 scans of the 3-way tables themselves
    assert all(subset_cells(sizes, t) <= 2**17 for t in plans)


# -- histograms (.npy) and load_marginals -----------------------------------------------------


def test_marginals_from_histogram_and_npy_route(tmp_path):
    rng = np.random.default_rng(9)
    sizes = (3, 1, 4, 5)
    domain = Domain(["a", "b", "c", "d"], sizes)
    recs = random_records(rng, sizes, 600)
    h = np.bincount(np.ravel_multi_index(tuple(recs.T), sizes), minlength=domain.size).astype(np.int64)
    assert_matches_histogram(marginals_from_histogram(h, domain, SUBSETS_4), h, domain, SUBSETS_4)
    p = tmp_path / "h.npy"
    np.save(p, h.astype(np.float64))
    m = load_marginals(p, domain, SUBSETS_4)
    assert_matches_histogram(m, h, domain, SUBSETS_4)
    np.testing.assert_array_equal(load_histogram(p, domain), h)
    # the same validation as load_histogram
    bad = h.astype(np.float64)
    bad[3] = SENTINEL + 0.5
    np.save(p, bad)
    assert raises_private(load_marginals, p, domain, SUBSETS_4) == raises_private(load_histogram, p, domain)
    np.save(p, np.zeros(domain.size, dtype=np.int64))
    msg = raises_private(load_marginals, p, domain, [(0,)], match="all zeros")
    assert msg == raises_private(load_histogram, p, domain)
    np.save(p, np.append(h, SENTINEL))
    assert raises_private(load_marginals, p, domain, [(0,)]) == raises_private(load_histogram, p, domain)
    huge = Domain([f"f{j}" for j in range(50)], [2] * 50)
    raises_private(load_marginals, p, huge, [(0, 1)], match="give the records")


def test_load_marginals_records(tmp_path):
    rng = np.random.default_rng(10)
    recs = random_records(rng, DOM.sizes, 400)
    cols = {a: recs[:, j] for j, a in enumerate(DOM.attributes)}
    subsets = [(0, 1), (1, 2), (1,), ()]
    for name in ("r.parquet", "r.pq", "r.csv"):
        path = tmp_path / name
        if name.endswith(".csv"):
            pacsv.write_csv(pa.table(cols), path)
        else:
            write_parquet(path, cols)
        m = load_marginals(path, DOM, subsets)
        assert_matches_histogram(m, load_histogram(path, DOM), DOM, subsets)
    extra = write_parquet(tmp_path / "extra.parquet", {**cols, "junk": np.full(400, SENTINEL)})
    raises_private(load_marginals, extra, DOM, subsets, match="ignore-extra-columns")
    assert load_marginals(extra, DOM, subsets, allow_extra_columns=True).n_records == 400
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b,c\n", encoding="utf-8")
    raises_private(load_marginals, header_only, DOM, subsets, match="no records")
    raises_private(load_marginals, tmp_path / "missing.csv", DOM, subsets, match="does not exist")
    raises_private(load_marginals, tmp_path / "r.txt", DOM, subsets, match="unknown type")
    raises_private(load_marginals, extra, DOM, subsets, engine="pandas", match="unknown engine")
    with pytest.raises(ValueError):
        load_marginals(extra, DOM, [(2, 1)])


def test_normalize_subsets_keeps_first_order():
    assert normalize_subsets(DOM, [(1,), (), [0, 2], (1,), np.array([0, 2])]) == [(1,), (), (0, 2)]


def test_tables_beyond_the_dense_limit_are_the_records_distinct_cells(tmp_path):
    """A requested table of more than DENSE_TABLE_CELLS cells comes back as a SparseTable
    (distinct cells and counts), also when summed out of a larger scan; it equals the
    records' projection; smaller tables stay dense."""
    from factorize.engines.marginal_tables import DENSE_TABLE_CELLS, SparseTable

    rng = np.random.default_rng(9)
    sizes = (5000, 4000, 3000, 3)
    domain = Domain(["a", "b", "c", "d"], sizes)
    recs = np.column_stack([rng.integers(0, s, 400) for s in sizes])
    recs[:50] = recs[0]
    path = write_parquet(tmp_path / "big.parquet", {a: recs[:, j] for j, a in enumerate(domain.attributes)})
    subsets = [(0, 1, 2, 3), (0, 1, 2), (0, 1), (3,)]
    m = marginals_duckdb(path, domain, subsets)
    for s in subsets:
        cells = math.prod(sizes[j] for j in s)
        t = m[s]
        want_idx = np.ravel_multi_index(recs[:, list(s)].T, [sizes[j] for j in s])
        u, c = np.unique(want_idx, return_counts=True)
        if cells > DENSE_TABLE_CELLS:
            assert isinstance(t, SparseTable)
            np.testing.assert_array_equal(t.cells, u)
            np.testing.assert_array_equal(t.counts, c)
            np.testing.assert_array_equal(t.codes(), np.stack(np.unravel_index(u, t.shape), 1))
            with pytest.raises(ValueError, match="sparse"):
                m.table(s)
        else:
            np.testing.assert_array_equal(t, records_marginal(recs, sizes, s), err_msg=str(s))
