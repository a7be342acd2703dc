"""``spark_engine.marginals_spark``: Spark (local mode) gives the DuckDB engine's marginal tables
and the DuckDB engine's error messages; ``load_marginals(engine="spark")`` dispatches to it.

Spark must start here (as in ``test_engines_spark.py``): if it cannot, the tests FAIL with
the reason. One SparkSession serves the whole module.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from factorize.engines import DataError, histogram_duckdb, marginals_duckdb
from factorize.executor.data import load_marginals
from tests.engine_files import spark, write_csv, write_parquet  # noqa: F401 (spark: a fixture)
from workloads import Domain

pytestmark = pytest.mark.spark

SENTINEL = 987654
DOM = Domain(["a", "b", "c"], [3, 4, 5])


def marg_spark(*args, **kwargs):
    from factorize.engines.spark_engine import marginals_spark

    return marginals_spark(*args, **kwargs)


def assert_same_tables(m, ref, subsets) -> None:
    assert m.n_records == ref.n_records
    assert list(m) == list(ref) == list(dict.fromkeys(tuple(s) for s in subsets))
    for s in ref:
        assert m[s].dtype == np.int64
        np.testing.assert_array_equal(m[s], ref[s], err_msg=str(s))


def same_refusal(path, domain, subsets, **kwargs) -> str:
    with pytest.raises(DataError) as d_info:
        marginals_duckdb(path, domain, subsets, **kwargs)
    with pytest.raises(DataError) as s_info:
        marg_spark(path, domain, subsets, **kwargs)
    assert str(s_info.value) == str(d_info.value)
    assert s_info.value.for_holder() == d_info.value.for_holder()
    assert str(SENTINEL) not in str(s_info.value) + s_info.value.for_holder()
    return s_info.value.for_holder()  # the counted rendering (factorize data check)


SUBSETS = [(), (0,), (0, 2), (1, 2, 3), (0, 2), (), (2,), (0, 1, 2, 3), (3,), (1,)]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_spark_matches_duckdb_and_histogram(spark, tmp_path, fmt):
    rng = np.random.default_rng(1)
    sizes = (3, 1, 4, 5)
    domain = Domain(["w", "x", "y", "z"], sizes)
    recs = np.stack([rng.integers(0, s, 900) for s in sizes], axis=1)
    cols = {a: recs[:, j] for j, a in enumerate(domain.attributes)}
    if fmt == "csv":
        path = tmp_path / "r.csv"
        pacsv.write_csv(pa.table(cols), path)
    else:
        path = write_parquet(tmp_path / "r.parquet", cols)
    ref = marginals_duckdb(path, domain, SUBSETS)
    assert_same_tables(marg_spark(path, domain, SUBSETS), ref, SUBSETS)
    h = histogram_duckdb(path, domain)
    np.testing.assert_array_equal(ref[(0, 1, 2, 3)], h)
    assert_same_tables(load_marginals(path, domain, SUBSETS, engine="spark"), ref, SUBSETS)
    # a DataFrame input
    df = spark.createDataFrame([tuple(int(v) for v in r) for r in recs], list(domain.attributes))
    assert_same_tables(marg_spark(df, domain, SUBSETS), ref, SUBSETS)


def test_spark_wide_and_huge_domains(spark, tmp_path):
    # 45 binary attributes (N = 2**45, too many cells for a dense histogram; 2 mask chunks of
    # <= 31 columns): all 2-way tables
    rng = np.random.default_rng(2)
    d, n = 45, 200
    domain = Domain([f"f{j}" for j in range(d)], [2] * d)
    recs = (rng.random((n, d)) < 0.3).astype(np.int64)
    path = write_parquet(tmp_path / "wide.parquet", {a: recs[:, j] for j, a in enumerate(domain.attributes)})
    subsets = [()] + [(j,) for j in range(d)] + list(itertools.combinations(range(d), 2))
    assert_same_tables(marg_spark(path, domain, subsets), marginals_duckdb(path, domain, subsets), subsets)
    # a bad value in the second mask chunk: the DuckDB message
    bad = {a: recs[:, j].copy() for j, a in enumerate(domain.attributes)}
    bad["f40"][5] = SENTINEL
    bad["f3"] = bad["f3"].astype(np.float64)
    bad["f3"][7] = np.nan
    bad_path = write_parquet(tmp_path / "bad.parquet", bad)
    msg = same_refusal(bad_path, domain, [(0, 1)])
    assert "column 'f40': 1 row outside 0..1" in msg and "column 'f3': 1 row missing" in msg


def test_spark_refusals_match_duckdb(spark, tmp_path):
    subsets = [(0, 1), (2,)]
    rows = [[0, 1, 2], [2, 3, 4], [1, SENTINEL, 1], [None, 0, "x"]]
    msg = same_refusal(write_csv(tmp_path / "bad.csv", ["a", "b", "c"], rows), DOM, subsets)
    assert "column 'b': 1 row outside 0..3" in msg and "column 'c': 1 row not an integer" in msg
    same_refusal(write_csv(tmp_path / "m.csv", ["a", "c", "zz"], [[0, SENTINEL, 1]]), DOM, subsets)
    extra = write_csv(tmp_path / "x.csv", ["junk", "a", "b", "c"], [[SENTINEL, 0, 1, 2]])
    same_refusal(extra, DOM, subsets)
    ok = marg_spark(extra, DOM, subsets, allow_extra_columns=True)
    assert ok.n_records == 1 and ok[(0, 1)][1] == 1
    header_only = tmp_path / "h.csv"
    header_only.write_text("a,b,c\n", encoding="utf-8")
    assert "no records" in same_refusal(header_only, DOM, subsets)
    empty_pq = write_parquet(tmp_path / "e.parquet", {k: pa.array([], pa.int64()) for k in DOM.attributes})
    assert "no records" in same_refusal(empty_pq, DOM, [()])
    with pytest.raises(ValueError):
        marg_spark(extra, DOM, [(1, 0)])


def test_structured_plans_run_on_spark_as_on_duckdb(spark, tmp_path):
    """The one pipeline with --engine spark: a residual marginal plan and a union plan whose
    block table is held sparse give, in test mode, the same answers as with DuckDB."""
    from factorize.executor.pipeline import run
    from factorize.kinds.structured.build import build_structured_plan
    from factorize.kinds.structured.plan import save_structured_plan

    rng = np.random.default_rng(4)
    cases = [
        ("residual", "marginals:3x4x5:2", DOM, None),
        ("union", "kron(width:400:398,width:400:398,width:300:298)",
         Domain(["x", "y", "z"], [400, 400, 300]), "union"),
    ]
    for name, spec, dom, strategy in cases:
        plan = build_structured_plan(spec, "rho=0.5", norm="gamma_f", domain=dom, strategy=strategy)
        p = tmp_path / f"{name}.plan"
        save_structured_plan(plan, p)
        recs = np.column_stack([rng.integers(0, s, 300) for s in dom.sizes])
        data = write_parquet(tmp_path / f"{name}.parquet", {a: recs[:, j] for j, a in enumerate(dom.attributes)})
        a = run(str(p), str(data), str(tmp_path / f"{name}_d.csv"), seed=9, engine="duckdb")
        b = run(str(p), str(data), str(tmp_path / f"{name}_s.csv"), seed=9, engine="spark")
        np.testing.assert_array_equal(a.estimate, b.estimate)
        np.testing.assert_array_equal(a.std_error, b.std_error)
