"""``python -m benchmarks --suite engines``: DuckDB vs Spark (local mode) histogram engines on
10⁷–10⁸ synthetic records.

    python -m benchmarks --suite engines [--n 10000000,100000000] [--csv-n 10000000] [--budget-s 540]

Writes ``reports/bench_engines.md`` and ``reports/bench_engines.json`` (needs pyspark and Java).

Synthetic, non-private records (numpy seed ``SEED``, uniform) over 5 attributes of sizes
(2, 5, 10, 10, 10) (N = 10,000 cells) are written once per size to a temporary directory
outside the repository, as Parquet (int32 columns, row groups of 10⁶ rows) and, for
``--csv-n`` records, as CSV. Measured end to end -- path → validated int64 histogram,
including every check -- for ``engines.histogram_duckdb`` (embedded DuckDB, all cores) and
``engines.spark_engine.histogram_spark`` (``local[*]``, all cores, warm session). Spark's
session start and its first query (JVM class loading / JIT warm-up) are reported separately.
Every histogram is compared with a NumPy ``bincount`` of the generated records, so both
engines are checked to give identical histograms.

Sizes whose projected time does not fit in ``--budget-s`` are not measured; their row is then
an extrapolation from the largest measured size, labelled as such.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "engines"
SUMMARY = ("DuckDB vs Spark (local mode) histograms of 10⁷–10⁸ synthetic records, Parquet and CSV, "
           "end to end")

SIZES = (2, 5, 10, 10, 10)
SEED = 20241121
CHUNK = 5_000_000
ROW_GROUP = 1_000_000


def write_records(n: int, domain, pq_path: Path, csv_path: Path | None, seed: int):
    """Write ``n`` uniform records chunk by chunk; return their histogram (NumPy bincount)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    schema = pa.schema([(a, pa.int32()) for a in domain.attributes])
    expected = np.zeros(domain.size, dtype=np.int64)
    csv_writer = pacsv.CSVWriter(str(csv_path), schema) if csv_path is not None else None
    with pq.ParquetWriter(str(pq_path), schema) as writer:
        done = 0
        while done < n:
            m = min(CHUNK, n - done)
            cols = [rng.integers(0, s, m, dtype=np.int32) for s in domain.sizes]
            expected += np.bincount(np.ravel_multi_index(tuple(cols), domain.sizes), minlength=domain.size)
            table = pa.table(dict(zip(domain.attributes, cols, strict=True)), schema=schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
            if csv_writer is not None:
                csv_writer.write_table(table)
            done += m
    if csv_writer is not None:
        csv_writer.close()
    return expected


def timed(harness, fn: Callable[[], Any], repeats: int, expected):
    """``repeats`` runs timed by the harness (a ``Timing``); each histogram checked after its run."""
    import numpy as np

    def check(h) -> None:
        if not np.array_equal(np.asarray(h), expected):
            raise SystemExit("benchmark histogram differs from the NumPy histogram")

    return harness.measure(fn, repeats, check=check)


def mib(path: Path) -> float:
    return path.stat().st_size / 2**20


def add_arguments(parser) -> None:
    parser.add_argument("--n", default="10000000,100000000", help="comma-separated record counts (Parquet)")
    parser.add_argument("--csv-n", type=int, default=10_000_000, help="records in the CSV file (0: no CSV)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per measurement (best and median reported)")
    parser.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget for the whole suite")


def run(args, harness):
    import numpy as np

    from benchmarks.harness import Report
    from factorize.engines import histogram_duckdb
    from workloads import Domain

    harness.uses("pyspark", java=True)
    ns = sorted(int(x) for x in args.n.split(",") if x.strip())
    reps = args.repeats

    def left() -> float:
        return args.budget_s - harness.elapsed()

    from factorize.engines.spark_engine import histogram_spark, spark_session

    domain = Domain([f"x{j}" for j in range(len(SIZES))], SIZES)
    rows: list[dict[str, Any]] = []
    extrapolated: list[dict[str, Any]] = []
    setup: dict[str, Any] = {}

    def record(n: int, fmt: str, engine: str, timing, size_mib: float, note: str = "") -> None:
        best, median = timing.best, timing.median
        rows.append({"n": n, "format": fmt, "engine": engine, "runs": len(timing.times), "best_s": best,
                     "median_s": median, "records_per_s": n / best,
                     "file_mib": round(size_mib, 1), "note": note, "measured": True, "timing": timing.as_dict()})
        print(f"{n:>11,} {fmt:8s} {engine:28s} best {best:8.3f}s  median {median:8.3f}s  "
              f"{n / best / 1e6:7.2f} M rec/s  ({left():.0f}s left)", flush=True)

    with tempfile.TemporaryDirectory(prefix="factorize-bench-engines-") as tmp:
        tmpdir = Path(tmp)
        t = harness.measure(spark_session)
        spark = t.result
        setup["spark_session_start_s"] = t.best
        print(f"Spark session start: {setup['spark_session_start_s']:.2f}s", flush=True)

        per_record: dict[tuple[str, str], float] = {}  # (format, engine) -> seconds per record, largest n
        for idx, n in enumerate(ns):
            # Projected cost of this size from the previous one: generation + all measurements.
            if idx > 0:
                scale = n / ns[idx - 1]
                proj_gen = setup[f"generate_{ns[idx - 1]}_s"] * scale
                proj_runs = sum(v * n for (f, _), v in per_record.items() if f == "parquet")
                need = proj_gen + proj_runs * reps
                runs_here = reps
                if need > left():
                    runs_here = 1
                    need = proj_gen + proj_runs
                if need > left():
                    print(f"{n:,}: projected {need:.0f}s > {left():.0f}s left: not measured (extrapolated)", flush=True)
                    for (f, e), v in per_record.items():
                        if f == "parquet":
                            extrapolated.append({"n": n, "format": f, "engine": e, "best_s": v * n,
                                                 "records_per_s": 1 / v, "measured": False,
                                                 "note": f"EXTRAPOLATED linearly from n={ns[idx - 1]:,}, not measured"})
                    continue
            else:
                runs_here = reps
            pq_path = tmpdir / f"records_{n}.parquet"
            csv_path = tmpdir / f"records_{n}.csv" if n == args.csv_n else None
            t = harness.measure(lambda n=n, idx=idx, p=pq_path, c=csv_path: write_records(n, domain, p, c, SEED + idx))
            expected = t.result
            setup[f"generate_{n}_s"] = t.best
            print(f"{n:,}: wrote Parquet {mib(pq_path):.1f} MiB"
                  + (f" and CSV {mib(csv_path):.1f} MiB" if csv_path else "")
                  + f" in {setup[f'generate_{n}_s']:.1f}s", flush=True)

            if idx == 0:
                t = harness.measure(lambda p=pq_path: histogram_spark(p, domain))
                h = t.result
                setup["spark_first_query_s"] = t.best
                setup["spark_first_query_n"] = n
                assert np.array_equal(h, expected)
                print(f"Spark first query (JVM warm-up), {n:,} Parquet records: {setup['spark_first_query_s']:.2f}s",
                      flush=True)

            times = timed(harness, lambda p=pq_path: histogram_duckdb(p, domain), runs_here, expected)
            record(n, "parquet", "duckdb", times, mib(pq_path))
            per_record[("parquet", "duckdb")] = times.best / n
            times = timed(harness, lambda p=pq_path: histogram_spark(p, domain, spark=spark), runs_here, expected)
            record(n, "parquet", "spark", times, mib(pq_path))
            per_record[("parquet", "spark")] = times.best / n

            if csv_path is not None:
                csv_reps = max(1, min(runs_here, 2))
                times = timed(harness, lambda p=csv_path: histogram_duckdb(p, domain), csv_reps, expected)
                record(n, "csv", "duckdb", times, mib(csv_path))
                times = timed(harness, lambda p=csv_path: histogram_spark(p, domain, spark=spark), csv_reps,
                              expected)
                record(n, "csv", "spark", times, mib(csv_path), "csv_multiline=True (default): one task per file")
                spark_csv = times.best
                if left() > spark_csv * csv_reps * 1.5 + 60 * (len(ns) - idx - 1):
                    times = timed(harness,
                                  lambda p=csv_path: histogram_spark(p, domain, spark=spark, csv_multiline=False),
                                  csv_reps, expected)
                    record(n, "csv", "spark (csv_multiline=False)", times, mib(csv_path),
                           "file split across tasks; a quoted line break would make the file unparsable")
                csv_path.unlink()
            pq_path.unlink()

    # ratios against DuckDB measured in the same run (same size and format)
    harness.add_ratios(rows, value="best_s", group=lambda r: (r["n"], r["format"]),
                       baseline=lambda r: r["engine"] == "duckdb", name="spark_over_duckdb",
                       where=lambda r: r["engine"] != "duckdb")
    harness.add_ratios(extrapolated, value="best_s", group=lambda r: r["n"],
                       baseline=lambda r: r["engine"] == "duckdb", name="spark_over_duckdb",
                       where=lambda r: r["engine"] == "spark")
    payload = {"domain": {"sizes": list(SIZES), "cells": domain.size},
               "seed": SEED, "setup": setup, "results": rows, "extrapolated": extrapolated}

    def fmt_row(r: dict[str, Any]) -> str:
        ratio = f"{r['spark_over_duckdb']:.1f}×" if "spark_over_duckdb" in r else ""
        med = f"{r['median_s']:.3f}" if r.get("measured") else "—"
        runs = r.get("runs", "—")
        size = f"{r['file_mib']:.1f} MiB" if "file_mib" in r else ""
        return (f"| {r['n']:,} | {r['format']} | {r['engine']} | {runs} | {r['best_s']:.3f} | {med} | "
                f"{r['records_per_s'] / 1e6:.2f} M | {ratio} | {size} | {r['note']} |")

    lines = [
        "## Setup",
        "",
        (f"- Synthetic records (numpy seed {SEED}, uniform) over 5 attributes of sizes {SIZES} "
        f"(N = {domain.size:,} cells), int32 columns; Parquet written once per size with row groups of "
        f"{ROW_GROUP:,} rows (pyarrow defaults: dictionary encoding, snappy), CSV (pyarrow writer, quoted "
        f"header) for {args.csv_n:,} records; files in a temporary directory outside the repository."),
        ("- Times are end to end: path → validated int64 histogram, with every check of the engines "
        "(missing / non-integer / out-of-range counts per column). Each histogram is compared with the "
        "NumPy `bincount` of the generated records, so the two engines gave identical histograms in every run."),
        ("- DuckDB: `histogram_duckdb` (embedded, default threads = all cores). Spark: `histogram_spark` in "
        "the session of `spark_session()` (`local[*]`, driver memory 2g, shuffle partitions = cores, ANSI on), "
        "already warm: session start and the first query are listed separately below."),
        "- best / median of the runs listed; records/s = records / best time; ratio = Spark best / DuckDB best.",
        "",
        "## Fixed costs of Spark",
        "",
        f"- session start (`spark_session()`, JVM launch): {setup['spark_session_start_s']:.2f} s",
        (f"- first query ({setup.get('spark_first_query_n', 0):,} Parquet records, JVM class loading and JIT): "
        f"{setup.get('spark_first_query_s', float('nan')):.2f} s"),
        *[f"- generating and writing {k.split('_')[1]} records: {v:.1f} s" for k, v in setup.items()
          if k.startswith("generate_")],
        "",
        "## Results",
        "",
        "| records | format | engine | runs | best (s) | median (s) | records/s | Spark/DuckDB | file | note |",
        "|---:|---|---|---:|---:|---:|---:|---:|---|---|",
        *[fmt_row(r) for r in rows],
        *[fmt_row(r) for r in extrapolated],
        "",
        "## Notes",
        "",
        ("- On one small machine DuckDB is expected to win: it is embedded (no JVM, no task scheduling, no "
        "shuffle) and uses a perfect-hash aggregate on the small integer columns. Spark's value is where the "
        "data are: a cluster reading a data lake brings back only the (key, count) aggregate, and its "
        "throughput grows with executors; this benchmark measures only its single-machine overhead."),
        ("- `histogram_spark` does one scan and one `groupBy` on a LongType key (the cell index for valid rows, "
        "a negative code of the per-column problem kinds otherwise); the driver receives at most N + "
        "(number of problem combinations) (key, count) pairs through Arrow."),
        ("- Spark CSV: every column is read as text; a canonical non-negative integer (`17`) is recognised "
         "by a round trip through `try_cast` to long, any other spelling (`+3`, `007`, `3.0`, `abc`) by the "
         "integer pattern (a Java regular expression, at most once per value). With `csv_multiline=True` "
         "(the default, matching DuckDB on quoted line breaks) Spark does not split a CSV file: one task "
         "per file."),
    ]
    if extrapolated:
        lines.append("- Rows marked EXTRAPOLATED were not measured: the projected time did not fit in the "
                     f"budget ({args.budget_s:.0f} s); they scale the per-record time of the largest measured "
                     "size linearly.")
    lines.append("")
    return Report("Histogram engines: DuckDB vs Spark (local mode)", "\n".join(lines), payload)
