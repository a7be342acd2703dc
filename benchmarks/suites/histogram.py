"""``python -m benchmarks --suite histogram``: throughput of the histogram engines (records/s);
writes reports/bench_histogram.md (+ .json).

    python -m benchmarks --suite histogram [--n 10000000] [--repeats 3] [--duckdb-threads 2]

Synthetic, non-private records (seeded) over the domain x0..x3 of sizes (10, 20, 30, 40)
(N = 240,000 cells) are written to a temporary directory outside the repository as Parquet
(int64 columns, and int8 columns) and CSV. Measured, end to end (file -> validated int64
histogram, including connecting to DuckDB and all checks):

- ``histogram_duckdb`` on Parquet and on CSV, with ``--duckdb-threads`` DuckDB threads and
  with DuckDB's default (all cores);
- ``histogram_numpy`` on the records already in memory (int64 and int8 arrays).

For context, two raw DuckDB queries (no validation) show the effect of the perfect-hash
aggregate the engine enables: ``GROUP BY`` the cell-index expression with DuckDB's default
``perfect_ht_threshold`` (12 bits) and with 22 bits. Every result is checked against the
NumPy histogram. Reported: best and median wall time of ``repeats`` runs (the harness's timer).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

NAME = "histogram"
SUMMARY = "histogram engine throughput: DuckDB (Parquet, CSV) vs numpy on 10⁷ records"

SIZES = (10, 20, 30, 40)
SEED = 20240611
TARGET = 1e7  # records/s, Parquet path on 2 cores


def timed(harness, fn: Callable[[], Any], repeats: int, expected):
    """``repeats`` runs timed by the harness (a ``Timing``); each result checked after its run."""
    import numpy as np

    def check(h) -> None:
        if not np.array_equal(np.asarray(h), expected):
            raise SystemExit("benchmark result differs from the NumPy histogram")

    return harness.measure(fn, repeats, check=check)


def raw_groupby(path: Path, threads: int, bits: int, domain):
    import duckdb
    import numpy as np

    strides = [int(np.prod(domain.sizes[j + 1 :])) for j in range(len(domain))]
    index = " + ".join(f"CAST({a} AS BIGINT) * {s}" for a, s in zip(domain.attributes, strides, strict=True))
    con = duckdb.connect(":memory:", config={"threads": threads, "perfect_ht_threshold": bits, "temp_directory": ""})
    try:
        res = con.execute(
            f"SELECT cell, count(*) AS n FROM (SELECT {index} AS cell FROM read_parquet('{path}')) GROUP BY cell"
        ).fetchnumpy()
    finally:
        con.close()
    h = np.zeros(domain.size, dtype=np.int64)
    h[np.asarray(res["cell"])] = np.asarray(res["n"])
    return h


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=10**7, help="number of synthetic records")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duckdb-threads", type=int, default=2,
                        help="DuckDB threads for the main measurements (BLAS threads: factorize's --threads)")


def run(args, harness):
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from benchmarks.harness import Report
    from factorize.engines import histogram_duckdb, histogram_numpy
    from workloads import Domain

    n, reps, thr = args.n, args.repeats, args.duckdb_threads

    domain = Domain([f"x{j}" for j in range(len(SIZES))], SIZES)
    rng = np.random.default_rng(SEED)
    recs = np.stack([rng.integers(0, s, n, dtype=np.int64) for s in SIZES], axis=1)
    recs8 = recs.astype(np.int8)
    expected = np.bincount(np.ravel_multi_index(tuple(recs.T), SIZES), minlength=domain.size)

    rows: list[tuple[str, int | str, float, float, str]] = []
    timings: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="factorize-bench-") as tmp:
        tmpdir = Path(tmp)
        cols = {a: recs[:, j] for j, a in enumerate(domain.attributes)}
        files = {
            "parquet_i64": tmpdir / "records_i64.parquet",
            "parquet_i8": tmpdir / "records_i8.parquet",
            "csv": tmpdir / "records.csv",
        }
        pq.write_table(pa.table(cols), files["parquet_i64"])
        pq.write_table(pa.table({a: c.astype(np.int8) for a, c in cols.items()}), files["parquet_i8"])
        pacsv.write_csv(pa.table(cols), files["csv"])
        sizes = {k: f"{p.stat().st_size / 2**20:.1f} MiB" for k, p in files.items()}

        def add(label: str, threads: int | str, fn: Callable[[], np.ndarray], note: str = "") -> None:
            t = timed(harness, fn, reps, expected)
            best, med = t.best, t.median
            rows.append((label, threads, best, med, note))
            timings.append({"label": label, "threads": threads, "records_per_s": n / best, "file": note,
                            **t.as_dict()})
            print(f"{label:52s} threads={threads!s:8s} best {best:7.3f}s  {n / best / 1e6:6.1f} M rec/s", flush=True)

        default_threads = os.cpu_count() or 1
        for key, kind in (("parquet_i64", "int64"), ("parquet_i8", "int8")):
            p = files[key]
            label = f"histogram_duckdb, Parquet ({kind} columns)"
            add(label, thr, lambda p=p: histogram_duckdb(p, domain, threads=thr), sizes[key])
            if default_threads != thr:
                add(label, f"default ({default_threads})", lambda p=p: histogram_duckdb(p, domain), sizes[key])
        add("histogram_duckdb, CSV", thr, lambda: histogram_duckdb(files["csv"], domain, threads=thr), sizes["csv"])
        if default_threads != thr:
            add("histogram_duckdb, CSV", f"default ({default_threads})", lambda: histogram_duckdb(files["csv"], domain), sizes["csv"])
        add("histogram_numpy, in memory (int64 array)", 1, lambda: histogram_numpy(recs, domain))
        add("histogram_numpy, in memory (int8 array)", 1, lambda: histogram_numpy(recs8, domain))
        add("raw SQL GROUP BY cell index, Parquet i64, perfect_ht_threshold=12 (DuckDB default), no checks",
            thr, lambda: raw_groupby(files["parquet_i64"], thr, 12, domain))
        add("raw SQL GROUP BY cell index, Parquet i64, perfect_ht_threshold=22, no checks",
            thr, lambda: raw_groupby(files["parquet_i64"], thr, 22, domain))

    pq_best = max(n / r[2] for r in rows if r[0].startswith("histogram_duckdb, Parquet") and r[1] == thr)
    verdict = "met" if pq_best >= TARGET else "NOT met"
    lines = [
        "## Setup",
        "",
        (
            f"- {n:,} synthetic records (numpy seed {SEED}, uniform) over 4 attributes of sizes {SIZES} "
            f"(N = {domain.size:,} cells), files in a temporary directory outside the repository."
        ),
        (
            "- Times are end to end: file (or array) -> validated int64 histogram, including the DuckDB "
            "connection, the schema/header checks and the per-column value checks. Each result is "
            "compared with `np.bincount(np.ravel_multi_index(...))`."
        ),
        f"- best / median of {reps} runs; throughput = records / best time.",
        "",
        "## Results",
        "",
        "| engine / input | threads | best (s) | median (s) | records/s (best) | file size |",
        "|---|---|---:|---:|---:|---|",
        *[f"| {label} | {t} | {b:.3f} | {m:.3f} | {n / b / 1e6:.1f} M | {note} |" for label, t, b, m, note in rows],
        "",
        (
            f"Target ≥ 10⁷ records/s for the Parquet path on {thr} threads: **{verdict}** "
            f"(best {pq_best / 1e6:.1f} M records/s)."
        ),
        "",
        "## Notes",
        "",
        (
            "- `histogram_duckdb` scans the file once: `GROUP BY` the raw domain columns into an "
            "in-memory table of distinct value tuples (≤ N rows for valid data), runs the checks on it "
            "weighted by counts, then `GROUP BY` the cell index `Σ code_j·stride_j` on that small table."
        ),
        (
            "- It raises DuckDB's `perfect_ht_threshold` to fit the domain (capped at 22 bits), so Parquet "
            "integer columns with min/max statistics use the perfect-hash aggregate; the two raw-SQL rows "
            "show the generic hash aggregate against it."
        ),
        (
            "- CSV is read with every column as VARCHAR (integers recognised by a pattern, so `1.5` is not "
            "rounded): the CSV parse and hashing strings dominate, so CSV is several times slower than Parquet."
        ),
        (
            "- Compare the int8 and int64 Parquet rows for the effect of narrow column types (the files are "
            "compressed either way; the aggregate, not the scan, dominates). In a one-off experiment (not "
            "part of this script), grouping the CSV by TRY_CAST integers plus a canonical-spelling check "
            "(needed so that `1.5` is refused, not rounded) was slower than grouping the raw strings "
            "(5.8 s vs 4.3 s), so CSV keeps the raw-string grouping."
        ),
        "",
    ]
    return Report("Histogram engine throughput", "\n".join(lines),
                  {"n": n, "repeats": reps, "duckdb_threads": thr, "seed": SEED, "sizes": list(SIZES),
                   "cells": domain.size, "rows": timings, "parquet_best_records_per_s": pq_best,
                   "target_records_per_s": TARGET, "target_met": pq_best >= TARGET})
