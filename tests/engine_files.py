"""Record files and the Spark session shared by the engine tests (test_engines_*.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    """A CSV file with ``header`` and ``rows`` (``None`` written as an empty field)."""
    lines = [",".join(header)] + [",".join("" if v is None else str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, columns: dict[str, object]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


@pytest.fixture(scope="module")
def spark():
    """One local SparkSession per test module; a Spark that cannot start FAILS the test with
    the reason (the Spark engine is then untested, not skipped)."""
    try:
        from factorize.engines.spark_engine import spark_session, stop_spark_session

        session = spark_session()
    except Exception as exc:  # noqa: BLE001 - any failure to start is a test failure, with its reason
        pytest.fail(f"Spark cannot start, so the Spark engine cannot be tested: {type(exc).__name__}: {exc}",
                    pytrace=False)
    yield session
    stop_spark_session()
