"""Throughput of the histogram engines (records/s); writes reports/bench_histogram.md.

    python reports/bench_histogram.py [--n 10000000] [--repeats 3] [--threads 2]

Synthetic, non-private records (seeded) over the domain x0..x3 of sizes (10, 20, 30, 40)
(N = 240,000 cells) are written to a temporary directory outside the repository as Parquet
(int64 columns, and int8 columns) and CSV. Measured, end to end (file -> validated int64
histogram, including connecting to DuckDB and all checks):

- ``histogram_duckdb`` on Parquet and on CSV, with ``threads`` DuckDB threads and with
  DuckDB's default (all cores);
- ``histogram_numpy`` on the records already in memory (int64 and int8 arrays).

For context, two raw DuckDB queries (no validation) show the effect of the perfect-hash
aggregate the engine enables: ``GROUP BY`` the cell-index expression with DuckDB's default
``perfect_ht_threshold`` (12 bits) and with 22 bits. Every result is checked against the
NumPy histogram. Reported: best and median wall time of ``repeats`` runs.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from factorize.engines import histogram_duckdb, histogram_numpy
from factorize.io.provenance import machine_info
from workloads import Domain

SIZES = (10, 20, 30, 40)
SEED = 20240611
TARGET = 1e7  # records/s, Parquet path on 2 cores


def machine() -> dict[str, str]:
    return {
        **machine_info(),
        "Python": platform.python_version(),
        "numpy": np.__version__,
        "duckdb": duckdb.__version__,
        "pyarrow": pa.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def timed(fn: Callable[[], np.ndarray], repeats: int, expected: np.ndarray) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        h = fn()
        times.append(time.perf_counter() - t0)
        if not np.array_equal(np.asarray(h), expected):
            raise SystemExit("benchmark result differs from the NumPy histogram")
    return min(times), statistics.median(times)


def raw_groupby(path: Path, threads: int, bits: int, domain: Domain) -> np.ndarray:
    strides = [int(np.prod(domain.sizes[j + 1 :])) for j in range(len(domain))]
    index = " + ".join(f"CAST({a} AS BIGINT) * {s}" for a, s in zip(domain.attributes, strides))
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7, help="number of synthetic records")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="DuckDB threads for the main measurements")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench_histogram.md")
    args = ap.parse_args()
    n, reps, thr = args.n, args.repeats, args.threads

    domain = Domain([f"x{j}" for j in range(len(SIZES))], SIZES)
    rng = np.random.default_rng(SEED)
    recs = np.stack([rng.integers(0, s, n, dtype=np.int64) for s in SIZES], axis=1)
    recs8 = recs.astype(np.int8)
    expected = np.bincount(np.ravel_multi_index(tuple(recs.T), SIZES), minlength=domain.size)

    rows: list[tuple[str, int | str, float, float, str]] = []
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
            best, med = timed(fn, reps, expected)
            rows.append((label, threads, best, med, note))
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

    info = machine()
    pq_best = max(n / r[2] for r in rows if r[0].startswith("histogram_duckdb, Parquet") and r[1] == thr)
    verdict = "met" if pq_best >= TARGET else "NOT met"
    lines = [
        "# Histogram engine throughput",
        "",
        f"Generated by `python reports/bench_histogram.py --n {n} --repeats {reps} --threads {thr}`.",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        "",
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
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
