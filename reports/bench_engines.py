"""DuckDB vs Spark (local mode) histogram engines on 10⁷–10⁸ synthetic records.

    python reports/bench_engines.py [--n 10000000,100000000] [--csv-n 10000000] [--budget-s 540]

Writes ``reports/bench_engines.md`` and ``reports/bench_engines.json``.

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

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from factorize.engines import histogram_duckdb
from factorize.io.provenance import machine_info
from workloads import Domain

SIZES = (2, 5, 10, 10, 10)
SEED = 20241121
CHUNK = 5_000_000
ROW_GROUP = 1_000_000


def java_version() -> str:
    try:
        res = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
        return (res.stderr or res.stdout).strip().splitlines()[0]
    except Exception as exc:  # noqa: BLE001
        return f"unknown ({type(exc).__name__})"


def machine() -> dict[str, str]:
    import pyspark

    return {
        **machine_info(),
        "Python": platform.python_version(),
        "numpy": np.__version__,
        "duckdb": duckdb.__version__,
        "pyarrow": pa.__version__,
        "pyspark": pyspark.__version__,
        "Java": java_version(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def write_records(n: int, domain: Domain, pq_path: Path, csv_path: Path | None, seed: int) -> np.ndarray:
    """Write ``n`` uniform records chunk by chunk; return their histogram (NumPy bincount)."""
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
            table = pa.table(dict(zip(domain.attributes, cols)), schema=schema)
            writer.write_table(table, row_group_size=ROW_GROUP)
            if csv_writer is not None:
                csv_writer.write_table(table)
            done += m
    if csv_writer is not None:
        csv_writer.close()
    return expected


def timed(fn: Callable[[], np.ndarray], repeats: int, expected: np.ndarray) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        h = fn()
        times.append(time.perf_counter() - t0)
        if not np.array_equal(np.asarray(h), expected):
            raise SystemExit("benchmark histogram differs from the NumPy histogram")
    return times


def mib(path: Path) -> float:
    return path.stat().st_size / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="10000000,100000000", help="comma-separated record counts (Parquet)")
    ap.add_argument("--csv-n", type=int, default=10_000_000, help="records in the CSV file (0: no CSV)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (best and median reported)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="wall-clock budget for the whole script")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_engines.md")
    args = ap.parse_args()
    t_script = time.perf_counter()
    ns = sorted(int(x) for x in args.n.split(",") if x.strip())
    reps = args.repeats

    def left() -> float:
        return args.budget_s - (time.perf_counter() - t_script)

    from factorize.engines.spark_engine import histogram_spark, spark_session

    domain = Domain([f"x{j}" for j in range(len(SIZES))], SIZES)
    rows: list[dict[str, Any]] = []
    extrapolated: list[dict[str, Any]] = []
    setup: dict[str, Any] = {}

    def record(n: int, fmt: str, engine: str, times: list[float], size_mib: float, note: str = "") -> None:
        best = min(times)
        rows.append({"n": n, "format": fmt, "engine": engine, "runs": len(times), "best_s": best,
                     "median_s": statistics.median(times), "records_per_s": n / best,
                     "file_mib": round(size_mib, 1), "note": note, "measured": True})
        print(f"{n:>11,} {fmt:8s} {engine:28s} best {best:8.3f}s  median {statistics.median(times):8.3f}s  "
              f"{n / best / 1e6:7.2f} M rec/s  ({left():.0f}s left)", flush=True)

    with tempfile.TemporaryDirectory(prefix="factorize-bench-engines-") as tmp:
        tmpdir = Path(tmp)
        t0 = time.perf_counter()
        spark = spark_session()
        setup["spark_session_start_s"] = time.perf_counter() - t0
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
            t0 = time.perf_counter()
            expected = write_records(n, domain, pq_path, csv_path, SEED + idx)
            setup[f"generate_{n}_s"] = time.perf_counter() - t0
            print(f"{n:,}: wrote Parquet {mib(pq_path):.1f} MiB"
                  + (f" and CSV {mib(csv_path):.1f} MiB" if csv_path else "")
                  + f" in {setup[f'generate_{n}_s']:.1f}s", flush=True)

            if idx == 0:
                t0 = time.perf_counter()
                h = histogram_spark(pq_path, domain)
                setup["spark_first_query_s"] = time.perf_counter() - t0
                setup["spark_first_query_n"] = n
                assert np.array_equal(h, expected)
                print(f"Spark first query (JVM warm-up), {n:,} Parquet records: {setup['spark_first_query_s']:.2f}s",
                      flush=True)

            times = timed(lambda p=pq_path: histogram_duckdb(p, domain), runs_here, expected)
            record(n, "parquet", "duckdb", times, mib(pq_path))
            per_record[("parquet", "duckdb")] = min(times) / n
            times = timed(lambda p=pq_path: histogram_spark(p, domain, spark=spark), runs_here, expected)
            record(n, "parquet", "spark", times, mib(pq_path))
            per_record[("parquet", "spark")] = min(times) / n

            if csv_path is not None:
                csv_reps = max(1, min(runs_here, 2))
                times = timed(lambda p=csv_path: histogram_duckdb(p, domain), csv_reps, expected)
                record(n, "csv", "duckdb", times, mib(csv_path))
                times = timed(lambda p=csv_path: histogram_spark(p, domain, spark=spark), csv_reps, expected)
                record(n, "csv", "spark", times, mib(csv_path), "csv_multiline=True (default): one task per file")
                spark_csv = min(times)
                if left() > spark_csv * csv_reps * 1.5 + 60 * (len(ns) - idx - 1):
                    times = timed(lambda p=csv_path: histogram_spark(p, domain, spark=spark, csv_multiline=False),
                                  csv_reps, expected)
                    record(n, "csv", "spark (csv_multiline=False)", times, mib(csv_path),
                           "file split across tasks; a quoted line break would make the file unparsable")
                csv_path.unlink()
            pq_path.unlink()

    setup["script_s"] = time.perf_counter() - t_script
    info = machine()
    ratios = []
    for r in rows:
        if r["engine"] != "duckdb":
            base = next(b for b in rows if b["n"] == r["n"] and b["format"] == r["format"] and b["engine"] == "duckdb")
            r["spark_over_duckdb"] = r["best_s"] / base["best_s"]
            ratios.append(r)
    for r in extrapolated:
        if r["engine"] == "spark":
            base = next(b for b in extrapolated if b["n"] == r["n"] and b["engine"] == "duckdb")
            r["spark_over_duckdb"] = r["best_s"] / base["best_s"]

    cmd = "python reports/bench_engines.py " + " ".join(sys.argv[1:])
    payload = {"command": cmd.strip(), "machine": info, "domain": {"sizes": list(SIZES), "cells": domain.size},
               "seed": SEED, "setup": setup, "results": rows, "extrapolated": extrapolated}
    args.out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")

    def fmt_row(r: dict[str, Any]) -> str:
        ratio = f"{r['spark_over_duckdb']:.1f}×" if "spark_over_duckdb" in r else ""
        med = f"{r['median_s']:.3f}" if r.get("measured") else "—"
        runs = r.get("runs", "—")
        size = f"{r['file_mib']:.1f} MiB" if "file_mib" in r else ""
        return (f"| {r['n']:,} | {r['format']} | {r['engine']} | {runs} | {r['best_s']:.3f} | {med} | "
                f"{r['records_per_s'] / 1e6:.2f} M | {ratio} | {size} | {r['note']} |")

    lines = [
        "# Histogram engines: DuckDB vs Spark (local mode)",
        "",
        f"Generated by `{cmd.strip()}` in {setup['script_s']:.0f} s.",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
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
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
