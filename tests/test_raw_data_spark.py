"""Raw data in Spark: the schema's Spark SQL equals its Python reference on
random raw values of every column type, raw-string Adult gives the coded file's marginals,
out-of-schema values get the DuckDB engine's message (counts, no values), blank CSV lines are
refused. Spark in local mode: behind the ``spark`` mark (``python -m pytest -m spark``)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from factorize.engines import DataError, histogram_duckdb, marginals_duckdb
from factorize.engines.schema_sql import code_sql, prepare_sql
from tests import raw_adult
from tests.engine_files import spark  # noqa: F401 (a fixture)
from tests.test_raw_data import DOM, SECRET, write_csv
from tests.test_schema_sql import SCHEMA, cases, python_codes, raw_values
from workloads import Domain
from workloads.schema import read_domain

pytestmark = pytest.mark.spark


def test_spark_sql_equals_the_reference(spark, tmp_path):  # noqa: F811
    from pyspark.sql import functions as F

    from factorize.engines.spark_engine import _type_class

    by_class: dict[str, list[str]] = {}
    for name, tc in cases():
        if tc != "null":  # Parquet stores an all-null column as INT32: Spark never sees NullType here
            by_class.setdefault(tc, []).append(name)
    for tc, names in by_class.items():
        rng = np.random.default_rng(len(tc))
        columns = {"i": pa.array(np.arange(300))}
        for name in names:
            columns[name] = raw_values(SCHEMA[name].to_dict(), tc, rng, 300)
        path = tmp_path / f"{tc}.parquet"
        pq.write_table(pa.table(columns), path)
        df = spark.read.parquet(str(path))
        preps, codes = [F.col("i")], []
        for j, name in enumerate(names):
            attr = SCHEMA[name]
            assert _type_class(df.schema[name].dataType) == tc
            exprs = prepare_sql(attr, f"`{name}`", tc, "spark")
            pnames = [f"p{j}_{k}" for k in range(len(exprs))]
            preps += [F.expr(e).alias(p) for e, p in zip(exprs, pnames, strict=True)]
            codes.append(F.expr(code_sql(attr, [f"`{p}`" for p in pnames], tc, "spark")).alias(name))
        rows = df.select(*preps).select("i", *codes).orderBy("i").collect()
        for name in names:
            got = [r[name] for r in rows]
            want = python_codes(SCHEMA[name], columns[name], tc)
            bad = [(v, g, w) for v, g, w in zip(columns[name].to_pylist(), got, want, strict=True) if g != w]
            assert not bad, (name, tc, bad[:10])


@pytest.mark.skipif(not raw_adult.ADULT_CSV.is_file(), reason="Adult data not found")
def test_raw_adult_marginals_in_spark_equal_the_coded_file(spark, tmp_path):  # noqa: F811
    from factorize.engines.spark_engine import marginals_spark

    codes, names = raw_adult.read_coded()
    schema = read_domain(raw_adult.write_schema(tmp_path / "schema.json"))
    subsets = [(i, j) for i in range(14) for j in range(i + 1, 14)]
    want = marginals_duckdb(raw_adult.ADULT_CSV, Domain.from_json(raw_adult.ADULT_DOMAIN), subsets)
    for suffix in (".csv", ".parquet"):
        data = raw_adult.write_raw(tmp_path / f"raw{suffix}", codes, names)
        got = marginals_spark(str(data), schema, subsets, spark=spark)
        assert got.n_records == want.n_records
        for s in subsets:
            np.testing.assert_array_equal(got[s], want[s], err_msg=f"{suffix} {s}")


def test_out_of_schema_message_is_duckdbs(spark, tmp_path):  # noqa: F811
    from factorize.engines.spark_engine import histogram_spark

    rows = [["Male", 18, 1.0], [f"S{SECRET}", 18, 1.0], [None, "x", 2.0], ["Female", f"{SECRET}.5", 3.0]]
    path = write_csv(tmp_path / "bad.csv", ["sex", "age", "pay"], rows)
    with pytest.raises(DataError) as a:
        histogram_duckdb(path, DOM)
    with pytest.raises(DataError) as b:
        histogram_spark(str(path), DOM, spark=spark)
    assert str(a.value) == str(b.value) and str(SECRET) not in str(b.value)
    good = write_csv(tmp_path / "good.csv", ["sex", "age", "pay"], [["Male", 18, 1.0], ["Female", 40, "x"]])
    np.testing.assert_array_equal(histogram_spark(str(good), DOM, spark=spark), histogram_duckdb(good, DOM))
    pq.write_table(pa.table({"sex": [1.5], "age": [18], "pay": [1.0]}), tmp_path / "t.parquet")
    with pytest.raises(DataError, match="column 'sex' has type DOUBLE: it holds numbers"):
        histogram_spark(str(tmp_path / "t.parquet"), DOM, spark=spark)


def test_blank_lines_refused_in_spark(spark, tmp_path):  # noqa: F811
    from factorize.engines.spark_engine import histogram_spark

    path = tmp_path / "b.csv"
    path.write_text("sex,age,pay\nMale,18,1\n\nFemale,19,2\n")
    with pytest.raises(DataError, match="has a blank line") as info:
        histogram_spark(str(path), DOM, spark=spark)
    assert "line 3 is blank" in info.value.for_holder() and "line 3" not in str(info.value)
    folder = tmp_path / "parts.csv"
    folder.mkdir()
    (folder / "part-0.csv").write_text("sex,age,pay\nMale,18,1\n")
    (folder / "part-1.csv").write_text("sex,age,pay\nMale,18,1\n\n")
    with pytest.raises(DataError, match="part-1.csv' has a blank line") as info:
        histogram_spark(str(folder), DOM, spark=spark)
    assert "part-1.csv': line 3 is blank" in info.value.for_holder()
