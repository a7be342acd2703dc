"""``python -m benchmarks --suite raw``: raw data in the engines: mapping raw columns to
codes with a domain schema, against the coded path, on 10⁷ synthetic Parquet records; and
raw-string Adult → all 2-way marginal answers through the CLI. Writes reports/bench_raw.md
(+ .json).

    python -m benchmarks --suite raw [--n 10000000] [--repeats 5] [--csv-n 1000000] [--adult-repeats 3] [--spark]

1. **Synthetic records** (numpy seed ``SEED``, uniform codes, non-private) over an Adult-like
   schema: sex, race, relationship (categorical text), income>50K (boolean), age (integer
   range 17..90, clamped) and salary (numeric, 20 bins, clamped; raw values continuous
   float64 drawn uniformly inside each bin), N = 177,600 cells. The same records are written
   as a *coded* Parquet file (int32 codes, read with the domain of sizes) and a *raw* one
   (strings, bool, int64, float64, read with the schema), row groups of 10⁶, in a temporary
   directory outside the repository. ``engines.histogram_duckdb`` and ``marginals_duckdb``
   (all 15 2-way marginals) are timed end to end, path → validated counts, coded and raw
   alternately (``harness.interleaved``: ABAB…, so drift in the machine's load hits both), and
   every result is compared with the NumPy counts of the generated codes. A second raw variant
   leaves out the float column (5 attributes, N = 8,880) to show what the continuous column
   costs; one case groups those raw columns in DuckDB with no mapping and no checks, and a
   *floor* maps the 6 raw columns with the fewest DuckDB operations and no checks (valid for
   this data only); a *reference* groups the coded file by one packed cell key with no checks
   (what the coded path could reach if file statistics proved every code in range). Both paths run with DuckDB's default thread count. The 1-minute load
   average is recorded around every measurement: other work may share the machine, and the
   ratios (measured in the same run, interleaved) are the figures to read.
2. **Raw-string Adult**: the raw copy of the shared Adult data (``../shared/data/adult`` or
   ``FACTORIZE_ADULT_DIR``) built by ``benchmarks/raw_adult.py`` (its schema uses every
   kind of attribute), all 2-way marginals (148,137 answers, structured residual plan,
   ρ = 0.5): ``factorize plan`` and ``factorize run --seed 1`` (verification, engine,
   measurement, noise, writing) each in a fresh process (``harness.run_process``), wall time
   including the interpreter start; raw CSV, raw Parquet, and the coded CSV with the domain of
   sizes; the answers of raw and coded runs must be identical.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO_ROOT, factorize_env, run_process

NAME = "raw"
SUMMARY = ("raw columns mapped by a domain schema vs the coded path (DuckDB, 10⁷ Parquet records), "
           "and raw-string Adult → all 2-way marginal answers through the CLI")

SEED = 20261116
ROW_GROUP = 1_000_000
#: DuckDB's ``perfect_ht_threshold`` for the reference queries: the engine's cap (a perfect-hash
#: table of 2**22 entries per thread, ``factorize.engines.duckdb_engine``), so they group with
#: the same aggregate the engine may use.
PERFECT_HT_BITS = 22
SEX = ["Female", "Male"]
RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
REL = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
SALARY_EDGES = [2500 * i for i in range(20)] + [1_000_000]
SCHEMA_DOC = {"format": "factorize-domain-schema", "version": 1, "attributes": [
    {"name": "sex", "kind": "categorical", "values": SEX},
    {"name": "race", "kind": "categorical", "values": RACE},
    {"name": "relationship", "kind": "categorical", "values": REL},
    {"name": "income>50K", "kind": "categorical", "values": [False, True]},
    {"name": "age", "kind": "integer", "min": 17, "max": 90, "outside": "clamp"},
    {"name": "salary", "kind": "numeric", "edges": SALARY_EDGES, "closed": "left", "outside": "clamp"},
]}


def add_arguments(parser) -> None:
    parser.add_argument("--n", type=int, default=10_000_000, help="synthetic Parquet records")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds of the Parquet cases")
    parser.add_argument("--csv-n", type=int, default=1_000_000, help="records of the CSV comparison (0: none)")
    parser.add_argument("--adult-repeats", type=int, default=3, help="rounds of the Adult `run` (fresh processes)")
    parser.add_argument("--spark", action="store_true", help="also time the Spark engine (needs pyspark)")


def _bench_con() -> Any:
    """A DuckDB connection configured as the engine's (threads: DuckDB's default, as the engine;
    the perfect-hash aggregate allowed up to :data:`PERFECT_HT_BITS`)."""
    import duckdb

    return duckdb.connect(":memory:", config={"temp_directory": "", "preserve_insertion_order": False,
                                              "perfect_ht_threshold": PERFECT_HT_BITS})


def group_raw_sql(path: Path, names: list[str]) -> int:
    """DuckDB groups the raw columns themselves (no mapping, no checks): text is grouped in a
    hash table (no perfect-hash aggregate on strings); returns the number of rows."""
    con = _bench_con()
    try:
        cols = ", ".join('"' + n.replace('"', '""') + '"' for n in names)
        return int(con.execute(f"SELECT sum(n) FROM (SELECT {cols}, count(*) AS n FROM "
                               f"read_parquet('{path}') GROUP BY ALL)").fetchone()[0])
    finally:
        con.close()


def minimal_mapping_sql(path: Path, sizes: tuple[int, ...]):
    """The floor of mapping these raw columns in DuckDB SQL: the fewest operations that turn
    them into keys DuckDB can group with its perfect-hash aggregate, with no checks at all
    (valid only for this data: every value is listed, every age in range, every salary
    finite and non-negative): one ENUM cast per text value (an ENUM's range is known), the
    boolean as an integer (``% 2``: the range DuckDB needs), the raw age (its Parquet
    statistics give the range), the salary bin by one division (``floor(x / 2500)``, exact
    here, as the engine's SQL for equal-width bins in ``factorize.engines.schema_sql``) with
    the open top bin in a CASE, packed with the boolean into one key (as the engine packs
    them). Returns the histogram."""
    import numpy as np

    def enum(col: str, values: list[str]) -> str:
        return f"TRY_CAST({col} AS ENUM({', '.join(repr(v) for v in values)}))"

    keys = [enum("sex", SEX), enum("race", RACE), enum("relationship", REL), "age",
            'CAST(CAST("income>50K" AS UTINYINT) % 2 AS UTINYINT) * 20 + CAST(CAST(CASE WHEN salary < 47500 '
            'THEN CAST(floor(salary / 2500.0) AS BIGINT) ELSE 19 END AS UTINYINT) % 20 AS UTINYINT)']
    codes = ["enum_code(k0)", "enum_code(k1)", "enum_code(k2)", "k4 // 20", "k3 - 17", "k4 % 20"]
    con = _bench_con()
    try:
        select = ", ".join(f"{c} AS k{j}" for j, c in enumerate(keys))
        con.execute(f"CREATE TEMP TABLE g AS SELECT {select}, count(*) AS n FROM read_parquet('{path}') GROUP BY ALL")
        res = con.execute(f"SELECT {', '.join(f'{c} AS c{j}' for j, c in enumerate(codes))}, n FROM g").fetchnumpy()
    finally:
        con.close()
    cells = np.ravel_multi_index(tuple(np.asarray(res[f"c{j}"], dtype=np.int64) for j in range(6)), sizes)
    return np.bincount(cells, weights=np.asarray(res["n"], dtype=np.int64), minlength=int(np.prod(sizes))).astype(np.int64)


def packed_coded_sql(path: Path, sizes: tuple[int, ...]):
    """A reference for the coded path, not a safe one: the int32 codes grouped by one
    mixed-radix cell key ``Σ_j code_j · stride_j`` (DuckDB derives its range from the
    Parquet statistics and keeps the perfect-hash aggregate, with a table of 2**18 slots
    instead of 2**22 for separate keys), with no checks at all. The engine cannot group
    codes so: it checks them after grouping, and a code out of range would alias another
    cell (the raw path packs only keys in range by construction). What the coded path
    could reach if file statistics were trusted to prove every code in range. Returns the
    histogram."""
    import numpy as np

    names = [a["name"] for a in SCHEMA_DOC["attributes"]]
    strides = [math.prod(sizes[j + 1:]) for j in range(len(sizes))]  # row-major: the first attribute slowest
    cell = " + ".join(f'CAST("{n}" AS INTEGER) * {st}' for n, st in zip(names, strides, strict=True))
    con = _bench_con()
    try:
        con.execute(f"CREATE TEMP TABLE g AS SELECT {cell} AS cell, count(*) AS n FROM "
                    f"read_parquet('{path}') GROUP BY ALL")
        res = con.execute("SELECT cell, n FROM g").fetchnumpy()
    finally:
        con.close()
    return np.bincount(np.asarray(res["cell"], dtype=np.int64), weights=np.asarray(res["n"], dtype=np.int64),
                       minlength=int(np.prod(sizes))).astype(np.int64)


def numpy_floor(path: Path, sizes: tuple[int, ...], raw: bool, threads: int):
    """The same-engine cross-check, outside DuckDB: the histogram of the file by pyarrow and
    NumPy, row groups on ``threads`` threads, with no checks at all (valid only for this
    data). Coded: the int32 codes, one combined cell index, ``bincount``. Raw: text read as
    its Parquet dictionary and mapped once per dictionary entry, the boolean and
    ``age - 17`` as integers, the salary bin by ``min(floor(x) // 2500, 19)``. Its raw /
    coded ratio says how much of the DuckDB ratio comes from the data (a float64 column of
    10⁷ distinct values against a 5-bit code) rather than from the engine."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import pyarrow.parquet as pq

    text = {"sex": SEX, "race": RACE, "relationship": REL}
    n_cells = int(np.prod(sizes))

    def text_codes(col, values: list[str]):
        lut = {v: i for i, v in enumerate(values)}
        parts = []
        for chunk in col.chunks:
            m = np.array([lut[x] for x in chunk.dictionary.to_pylist()], dtype=np.int32)
            parts.append(m[chunk.indices.to_numpy(zero_copy_only=False)])
        return np.concatenate(parts)

    def group(i: int):
        f = pq.ParquetFile(path, read_dictionary=list(text) if raw else None)
        t = f.read_row_group(i, use_threads=False)
        if raw:
            x = t.column("salary").to_numpy()
            cols = [text_codes(t.column(a), text[a]) for a in text] + [
                t.column("income>50K").to_numpy().astype(np.int32), t.column("age").to_numpy() - 17,
                np.minimum(np.floor(x).astype(np.int64) // 2500, 19)]
        else:
            cols = [t.column(j).to_numpy() for j in range(t.num_columns)]
        idx = cols[0].astype(np.int64)
        for c, s in zip(cols[1:], sizes[1:], strict=False):
            idx = idx * s + c
        return np.bincount(idx, minlength=n_cells)

    n_groups = pq.ParquetFile(path).num_row_groups
    with ThreadPoolExecutor(threads) as ex:
        return sum(ex.map(group, range(n_groups)))


def generate(n: int, tmp: Path, rng) -> dict[str, Any]:
    """Coded and raw Parquet files of the same ``n`` records; the codes' histogram."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from workloads.schema import DomainSchema

    schema = DomainSchema.from_dict(SCHEMA_DOC)
    sizes = schema.sizes
    codes = [rng.integers(0, s, n).astype(np.int32) for s in sizes]
    names = list(schema.names)
    pq.write_table(pa.table(dict(zip(names, codes, strict=True))), tmp / "coded.parquet", row_group_size=ROW_GROUP)
    e = np.asarray(SALARY_EDGES, dtype=np.float64)
    salary = e[codes[5]] + rng.random(n) * (e[codes[5] + 1] - e[codes[5]])
    raw = {"sex": pa.array(np.asarray(SEX, dtype=object)[codes[0]], pa.string()),
           "race": pa.array(np.asarray(RACE, dtype=object)[codes[1]], pa.string()),
           "relationship": pa.array(np.asarray(REL, dtype=object)[codes[2]], pa.string()),
           "income>50K": pa.array(codes[3].astype(bool)),
           "age": pa.array(codes[4].astype(np.int64) + 17),
           "salary": pa.array(salary)}
    pq.write_table(pa.table(raw), tmp / "raw.parquet", row_group_size=ROW_GROUP)
    pq.write_table(pa.table({k: v for k, v in raw.items() if k != "salary"}), tmp / "raw5.parquet",
                   row_group_size=ROW_GROUP)
    pq.write_table(pa.table({k: v for k, v in zip(names[:5], codes[:5], strict=True)}), tmp / "coded5.parquet",
                   row_group_size=ROW_GROUP)
    hist = np.bincount(np.ravel_multi_index(tuple(codes), sizes), minlength=int(np.prod(sizes)))
    return {"schema": schema, "hist": hist, "raw_cols": raw, "codes": codes}


def released_numbers(path: Path) -> dict[str, list[str]]:
    """An answers file's query numbers and released numbers, column by column, as written (cell
    labels differ between raw and coded runs: the schema's labels vs the codes)."""
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(x for x in fh if not x.startswith("#")))
    header = rows[0]
    keep = [c for c in ("query", "table", "estimate", "std_error", "ci_low", "ci_high") if c in header]
    return {c: [r[header.index(c)] for r in rows[1:]] for c in keep}


def cli(*args: str):
    """``python -m factorize.cli.plan ARGS`` in a fresh process in the checkout (a
    ``harness.Process``: wall seconds, load before); stops the benchmark when it fails."""
    p = run_process([sys.executable, "-m", "factorize.cli.plan", *args], env=factorize_env(), cwd=REPO_ROOT)
    if p.returncode != 0:
        raise SystemExit(f"factorize {' '.join(args)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p


def adult_section(tmp: Path, repeats: int) -> dict[str, Any]:
    from benchmarks import raw_adult

    if not raw_adult.ADULT_CSV.is_file():
        return {"skipped": f"Adult data not found in {raw_adult.ADULT_DIR}"}
    codes, names = raw_adult.read_coded()
    schema_path = raw_adult.write_schema(tmp / "adult-schema.json")
    raw_csv = raw_adult.write_raw(tmp / "adult-raw.csv", codes, names)
    raw_pq = raw_adult.write_raw(tmp / "adult-raw.parquet", codes, names)
    spec = "marginals:85x9x100x16x7x15x6x5x2x100x100x99x42x2:2"
    named = "marginals[" + ",".join(names) + "]:2"
    out: dict[str, Any] = {"spec": spec, "named_spec": named, "records": int(codes.shape[0]), "runs": {}}
    plans = {}
    for label, dom in (("raw", schema_path), ("coded", raw_adult.ADULT_DOMAIN)):
        plan = tmp / f"adult-{label}.plan"
        p = cli("plan", "--workload", spec, "--privacy", "rho=0.5", "--domain", str(dom), "--out", str(plan))
        out[f"plan_{label}_s"] = p.wall_s
        plans[label] = plan
    answers: dict[str, dict[str, list[str]]] = {}
    for _ in range(repeats):
        for label, plan, data in (("raw CSV", plans["raw"], raw_csv), ("raw Parquet", plans["raw"], raw_pq),
                                  ("coded CSV", plans["coded"], raw_adult.ADULT_CSV)):
            ans = tmp / "answers.csv"
            p = cli("run", str(plan), "--data", str(data), "--out", str(ans), "--overwrite", "--seed", "1")
            rec = out["runs"].setdefault(label, {"times": [], "load_before": [], "cpu": [], "peak_rss_mib": []})
            rec["times"].append(p.wall_s)
            rec["load_before"].append(p.load_before)
            rec["cpu"].append(p.cpu_s)
            rec["peak_rss_mib"].append(p.peak_rss_mib)
            answers[label] = released_numbers(ans)
    for rec in out["runs"].values():
        rec["best_s"], rec["median_s"] = min(rec["times"]), statistics.median(rec["times"])
    out["answers"] = len(answers["raw CSV"]["estimate"])
    out["identical_answers"] = answers["raw CSV"] == answers["coded CSV"] == answers["raw Parquet"]
    if not out["identical_answers"]:
        raise SystemExit("raw and coded Adult releases differ")
    return out


def run(args, harness):
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from factorize.engines import histogram_duckdb, marginals_duckdb
    from workloads import Domain
    from workloads.schema import DomainSchema

    rng = np.random.default_rng(SEED)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="factorize-bench-raw-") as tmp_s:
        tmp = Path(tmp_s)
        t = harness.measure(lambda: generate(args.n, tmp, rng))
        g = t.result
        results["generate_s"] = t.best
        schema: DomainSchema = g["schema"]
        raw_dom = schema.domain()
        coded_dom = Domain(raw_dom.attributes, raw_dom.sizes)
        raw5, coded5 = schema.project(list(schema.names[:5])).domain(), coded_dom.project(list(schema.names[:5]))
        hist, hist5 = g["hist"], g["hist"].reshape(raw_dom.sizes).sum(axis=5).ravel()
        files = {k: round((tmp / f"{k}.parquet").stat().st_size / 2**20, 1) for k in ("coded", "raw", "coded5", "raw5")}
        print(f"generated {args.n:,} records in {results['generate_s']:.1f}s: {files} MiB", flush=True)

        def check(name: str, result: Any) -> None:
            if "no mapping" in name:
                ok = result == args.n
            elif "2-way" in name:
                ok = all(np.array_equal(result[s], hist.reshape(raw_dom.sizes).sum(
                    axis=tuple(k for k in range(6) if k not in s)).ravel()) for s in result)
            else:
                ok = np.array_equal(result, hist5 if "5 attr" in name else hist)
            if not ok:
                raise SystemExit(f"{name}: result differs from the generated records")

        pairs = [(i, j) for i in range(6) for j in range(i + 1, 6)]
        threads = int(duckdb_threads())
        cases = {
            "histogram coded (6 attr)": lambda: histogram_duckdb(tmp / "coded.parquet", coded_dom),
            "histogram raw (6 attr)": lambda: histogram_duckdb(tmp / "raw.parquet", raw_dom),
            "histogram coded (5 attr, no float)": lambda: histogram_duckdb(tmp / "coded5.parquet", coded5),
            "histogram raw (5 attr, no float)": lambda: histogram_duckdb(tmp / "raw5.parquet", raw5),
            "raw (5 attr) grouped by raw values, no mapping": lambda: group_raw_sql(
                tmp / "raw5.parquet", list(schema.names[:5])),
            "floor: raw (6 attr), minimal mapping, no checks": lambda: minimal_mapping_sql(
                tmp / "raw.parquet", raw_dom.sizes),
            "reference: coded (6 attr), one packed cell key, no checks": lambda: packed_coded_sql(
                tmp / "coded.parquet", raw_dom.sizes),
            "NumPy floor: coded (6 attr), no checks": lambda: numpy_floor(
                tmp / "coded.parquet", raw_dom.sizes, False, threads),
            "NumPy floor: raw (6 attr), no checks": lambda: numpy_floor(
                tmp / "raw.parquet", raw_dom.sizes, True, threads),
            "2-way marginals coded": lambda: marginals_duckdb(tmp / "coded.parquet", coded_dom, pairs),
            "2-way marginals raw": lambda: marginals_duckdb(tmp / "raw.parquet", raw_dom, pairs),
        }
        histogram_duckdb(tmp / "raw.parquet", raw_dom)  # warm the file cache
        histogram_duckdb(tmp / "coded.parquet", coded_dom)
        results["parquet"] = {k: t.as_dict() for k, t in harness.interleaved(cases, args.repeats, check=check).items()}
        for k, v in results["parquet"].items():
            print(f"{k:38s} best {v['best_s']:.3f}s median {v['median_s']:.3f}s loads {v['load_before']}", flush=True)

        if args.csv_n:
            m = args.csv_n
            coded_t = pa.table({a: c[:m] for a, c in zip(raw_dom.attributes, g["codes"], strict=True)})
            raw_t = pa.table({k: v.slice(0, m) for k, v in g["raw_cols"].items()})
            pacsv.write_csv(coded_t, tmp / "coded.csv")
            pacsv.write_csv(raw_t, tmp / "raw.csv")
            hm = np.bincount(np.ravel_multi_index(tuple(c[:m] for c in g["codes"]), raw_dom.sizes),
                             minlength=raw_dom.size)

            def check_csv(name: str, result: Any) -> None:
                if not np.array_equal(result, hm):
                    raise SystemExit(f"{name}: result differs from the generated records")

            csv_cases = {"histogram coded CSV": lambda: histogram_duckdb(tmp / "coded.csv", coded_dom),
                         "histogram raw CSV": lambda: histogram_duckdb(tmp / "raw.csv", raw_dom)}
            results["csv"] = {k: t.as_dict() for k, t in
                              harness.interleaved(csv_cases, max(2, args.repeats // 2), check=check_csv).items()}
            results["csv_n"] = m
            for k, v in results["csv"].items():
                print(f"{k:38s} best {v['best_s']:.3f}s median {v['median_s']:.3f}s", flush=True)

        if args.spark:
            try:
                from factorize.engines.spark_engine import histogram_spark, spark_session

                spark = spark_session()
                histogram_spark(str(tmp / "coded.parquet"), coded_dom, spark=spark)  # JVM warm-up
                spark_cases = {
                    "Spark histogram coded (6 attr)": lambda: histogram_spark(str(tmp / "coded.parquet"), coded_dom,
                                                                              spark=spark),
                    "Spark histogram raw (6 attr)": lambda: histogram_spark(str(tmp / "raw.parquet"), raw_dom,
                                                                            spark=spark)}
                results["spark"] = {k: t.as_dict() for k, t in
                                    harness.interleaved(spark_cases, max(2, args.repeats // 2), check=check).items()}
                harness.uses("pyspark", java=True)
                for k, v in results["spark"].items():
                    print(f"{k:38s} best {v['best_s']:.3f}s median {v['median_s']:.3f}s", flush=True)
            except Exception as exc:  # noqa: BLE001 - reported, not fatal
                results["spark"] = {"skipped": f"{type(exc).__name__}: {exc}"[:300]}

        results["adult"] = adult_section(tmp, args.adult_repeats)
        print(json.dumps({k: v for k, v in results["adult"].items() if k != "runs"}), flush=True)
    return write_report(args, results, files, raw_dom)


def ratio(rows: dict[str, Any], raw: str, coded: str, key: str) -> float:
    return rows[raw][key] / rows[coded][key]


def paired(raw: dict[str, Any], coded: dict[str, Any]) -> dict[str, float]:
    """The raw / coded wall ratio of each round (the two runs of a round are close in time, so
    a change of the machine's load hits both): median, lowest and highest."""
    r = [a / b for a, b in zip(raw["times"], coded["times"], strict=True)]
    return {"paired_median": statistics.median(r), "paired_min": min(r), "paired_max": max(r)}


def duckdb_threads() -> str:
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        row = con.execute("SELECT current_setting('threads')").fetchone()
        return "unknown" if row is None else str(row[0])
    finally:
        con.close()


def write_report(args, results: dict[str, Any], files: dict[str, float], dom):
    from benchmarks.harness import Report

    duck_threads = duckdb_threads()
    P = results["parquet"]
    pairs = [("histogram raw (6 attr)", "histogram coded (6 attr)"),
             ("histogram raw (5 attr, no float)", "histogram coded (5 attr, no float)"),
             ("2-way marginals raw", "2-way marginals coded")]
    pairs.append(("raw (5 attr) grouped by raw values, no mapping", "histogram coded (5 attr, no float)"))
    pairs.append(("floor: raw (6 attr), minimal mapping, no checks", "histogram coded (6 attr)"))
    pairs.append(("NumPy floor: raw (6 attr), no checks", "NumPy floor: coded (6 attr), no checks"))
    summary = {raw: {"median_ratio": ratio(P, raw, coded, "median_s"), "best_ratio": ratio(P, raw, coded, "best_s"),
                     "cpu_ratio": ratio(P, raw, coded, "median_cpu_s"), **paired(P[raw], P[coded])}
               for raw, coded in pairs}
    ref = "reference: coded (6 attr), one packed cell key, no checks"
    h6 = "histogram raw (6 attr)"
    vs_ref = {"median_ratio": ratio(P, h6, ref, "median_s"), "best_ratio": ratio(P, h6, ref, "best_s"),
              "cpu_ratio": ratio(P, h6, ref, "median_cpu_s"), **paired(P[h6], P[ref])}
    target = summary["histogram raw (6 attr)"]["paired_median"] <= 1.5
    adult = results["adult"]
    payload = {"n": args.n, "seed": SEED, "schema": SCHEMA_DOC, "cells": dom.size, "files_mib": files,
               "duckdb_threads": duck_threads, "results": results, "ratios": summary,
               "ratio_raw_vs_packed_coded_reference": vs_ref,
               "target_mapping_le_1_5x": target}

    def row(name: str, v: dict[str, Any]) -> str:
        loads = f"{min(v['load_before']):.1f}–{max(v['load_after'] if 'load_after' in v else v['load_before']):.1f}"
        return (f"| {name} | {len(v['times'])} | {v['best_s']:.3f} | {v['median_s']:.3f} | "
                f"{v['median_cpu_s']:.3f} | {args.n / v['median_s'] / 1e6:.1f} M | {loads} |")

    lines = [
        f"## {args.n:,} synthetic Parquet records: raw (schema) vs coded (sizes)",
        "",
        (f"{args.n:,} records, uniform codes (seed {SEED}), schema: sex, race, relationship (text), "
         f"income>50K (boolean), age (integer 17..90, clamped), salary (20 bins, float64 raw values "
         f"drawn inside each bin); N = {dom.size:,} cells. Files (MiB): {files}, written by pyarrow "
         f"with its defaults (dictionary-encoded columns where the dictionary fits, as real Parquet writers do: "
         f"the text columns; the float64 salary falls back to plain encoding), snappy, row groups of "
         f"{ROW_GROUP:,}, the same for both. End to end, path → "
         "validated counts, every result compared with the generated codes' counts; "
         f"{args.repeats} interleaved rounds. DuckDB threads: {duck_threads} (DuckDB's default, the same "
         "for every case: the engine's threads=None; factorize's thread policy sets only BLAS pools). "
         "The 1-minute load average before / after each run is in the tables and the JSON: other work "
         "may share the machine, so absolute times move between runs; the ratios compare runs "
         "interleaved in the same rounds."),
        "",
        "| case | runs | best (s) | median (s) | median CPU (s) | records/s (median) | load |",
        "|---|---:|---:|---:|---:|---:|---|",
        *[row(k, v) for k, v in P.items()],
        "",
        ("Ratios: of the medians, of the best times and of the median CPU times, and the median "
         "(lowest–highest) of the ratios round by round, each round's raw run next to its coded run."),
        "",
        "| raw / coded (same attributes) | median wall ratio | best wall ratio | median CPU ratio | "
        "per round: median (range) |",
        "|---|---:|---:|---:|---:|",
        *[f"| {k} | {v['median_ratio']:.2f}× | {v['best_ratio']:.2f}× | {v['cpu_ratio']:.2f}× | "
          f"{v['paired_median']:.2f}× ({v['paired_min']:.2f}–{v['paired_max']:.2f}) |"
          for k, v in summary.items()],
        (f"| histogram raw (6 attr) / {ref} | {vs_ref['median_ratio']:.2f}× | {vs_ref['best_ratio']:.2f}× | "
         f"{vs_ref['cpu_ratio']:.2f}× | {vs_ref['paired_median']:.2f}× ({vs_ref['paired_min']:.2f}–"
         f"{vs_ref['paired_max']:.2f}) |"),
        "",
        (f"**Target raw ≤ 1.5× coded on {args.n:,} Parquet records: "
         f"{'MET' if target else 'NOT MET'}** (histogram, 6 attributes, median of the per-round ratios "
         f"{summary['histogram raw (6 attr)']['paired_median']:.2f}×; median CPU ratio "
         f"{summary['histogram raw (6 attr)']['cpu_ratio']:.2f}×)."),
        "",
    ]
    if "csv" in results:
        C = results["csv"]
        lines += [f"### CSV, {results['csv_n']:,} records", "",
                  "| case | runs | best (s) | median (s) | ratio raw/coded (median) |", "|---|---:|---:|---:|---:|",
                  *[f"| {k} | {len(v['times'])} | {v['best_s']:.3f} | {v['median_s']:.3f} | "
                    f"{v['median_s'] / C['histogram coded CSV']['median_s']:.2f}× |" for k, v in C.items()], ""]
    if "spark" in results:
        S = results["spark"]
        if "skipped" in S:
            lines += ["### Spark", "", f"Not measured: {S['skipped']}", ""]
        else:
            lines += ["### Spark (local mode, warm session)", "",
                      "| case | runs | best (s) | median (s) | ratio raw/coded (median) |", "|---|---:|---:|---:|---:|",
                      *[f"| {k} | {len(v['times'])} | {v['best_s']:.3f} | {v['median_s']:.3f} | "
                        f"{v['median_s'] / S['Spark histogram coded (6 attr)']['median_s']:.2f}× |"
                        for k, v in S.items()], ""]
    if "skipped" in adult:
        lines += ["## Raw-string Adult", "", f"Not measured: {adult['skipped']}", ""]
    else:
        R = adult["runs"]
        ok = R["raw CSV"]["median_s"] <= 10
        lines += [
            "## Raw-string Adult → all 2-way marginal answers (CLI, fresh processes)",
            "",
            (f"{adult['records']:,} records decoded to raw values by `benchmarks/raw_adult.py` (text categories, "
             "integers, booleans, bin midpoints, an unlisted country for the catch-all); workload "
             f"`{adult['spec']}` (= `{adult['named_spec'][:60]}…` with the schema), ρ = 0.5, structured "
             f"residual plan, {adult['answers']:,} answers. `plan` took {adult['plan_raw_s']:.2f} s with "
             f"the schema, {adult['plan_coded_s']:.2f} s with the sizes. `run --seed 1` (interpreter start, "
             "plan verification, engine, exact measurement, noise, writing):"),
            "",
            "| data | runs | best (s) | median (s) | load before |",
            "|---|---:|---:|---:|---|",
            *[f"| {k} | {len(v['times'])} | {v['best_s']:.2f} | {v['median_s']:.2f} | "
              f"{min(v['load_before']):.1f}–{max(v['load_before']):.1f} |" for k, v in R.items()],
            "",
            (f"Raw and coded releases identical (test mode; every query's estimate, standard error and "
             f"interval as written): **{adult['identical_answers']}**. "
             f"Target ≤ 10 s for raw-string Adult → answers including verification: "
             f"**{'MET' if ok else 'NOT MET'}** (median {R['raw CSV']['median_s']:.2f} s)."),
            "",
        ]
    fl = summary["floor: raw (6 attr), minimal mapping, no checks"]
    by_raw = summary["raw (5 attr) grouped by raw values, no mapping"]
    npf = summary["NumPy floor: raw (6 attr), no checks"]
    five = summary["histogram raw (5 attr, no float)"]
    lines += [
        "## Where the time goes",
        "",
        ("The coded path reads the int32 codes (dictionary-encoded, a few bits a value) and DuckDB "
         "groups them with its *perfect-hash* aggregate: an array indexed by the codes, no hashing, "
         "possible because it knows every column's minimum and maximum (Parquet statistics) and "
         "their bits add up to at most 22. The raw path reads text, booleans, int64 and float64 and "
         "must turn every row into keys of a known range before grouping them. Text is cast to an "
         "ENUM of the schema's values (an ENUM's range is its number of values); the boolean becomes "
         "an integer `% 2`; an integer column (age) is grouped by its raw value when its Parquet "
         "statistics let DuckDB keep the perfect-hash aggregate (checked on the plan with `EXPLAIN`, "
         "else it is mapped per row), and mapped, clamped and checked afterwards on the grouped "
         "table; the salary bin is arithmetic (`floor(x / 2500)` for the inner bins and the first, "
         "exact for integer edges, first in a CASE; the top bin, the range and NaN by comparisons; "
         "other edges take a binary search, nested CASE of depth ⌈log₂(m + 2)⌉) reduced `% 20`. "
         "These two integer keys, in range by construction, are packed into one, "
         "`k_income · 20 + k_salary` (40 values: 6 bits with the NULL slot, against 2 + 5 for two "
         "keys), which halves the perfect-hash table (2²¹ slots, where the coded path's separate "
         "keys need 2²², 36 MB per thread: beyond the caches). A refused value is NULL "
         "there, and only when some key is NULL (refused, or text that matches only after trimming "
         "its spaces) is the file mapped again by the full SQL, which counts the reasons per column "
         "(never showing a value). Grouping the raw text itself (the *grouped by raw values* row, "
         f"{by_raw['median_ratio']:.2f}× the coded 5 attributes) is slower: text cannot be grouped "
         "by the perfect-hash aggregate."),
        "",
        ("The *floor* row is the cheapest DuckDB mapping of these raw columns to such keys that we "
         "found, with no checks at all (valid only because every generated value is listed, in "
         "range and non-negative): the ENUM casts, the raw age, and the boolean `% 2` packed with "
         "the salary's one division in a two-branch CASE. It runs at "
         f"{fl['paired_median']:.2f}× the "
         f"coded path (per round; CPU {fl['cpu_ratio']:.2f}×). Without the float column the raw path "
         f"runs at {five['paired_median']:.2f}× (CPU {five['cpu_ratio']:.2f}×): the ratio above that "
         "comes from the salary, 80 MB of float64 with 10⁷ distinct values, each read and binned, "
         "where the coded file holds a 5-bit code. The *NumPy floor* rows are the same-engine "
         "cross-check outside DuckDB (pyarrow row groups on as many threads as DuckDB uses, text "
         "mapped once per Parquet dictionary entry, `bincount`, no checks): NumPy's raw / coded "
         f"ratio on the same files is {npf['paired_median']:.2f}× (CPU {npf['cpu_ratio']:.2f}×). So "
         "the ratio is a property of the data more than of the engine: a faster engine for raw "
         "data only would meet a 1.5× ratio against DuckDB's coded path, but not against itself. "
         "The CPU column is the process's CPU time (all threads), less sensitive to the other work "
         "on the machine than the wall time."),
        "",
        ("The *reference* row groups the coded file by one packed cell key (2¹⁸ slots) with no "
         f"checks: {P[ref]['median_s']:.3f} s against the engine's {P['histogram coded (6 attr)']['median_s']:.3f} s "
         "for the coded path. The engine cannot group codes so: it checks every code after "
         "grouping, and an out-of-range code packed with the others would alias another cell; "
         "it could only if the file's statistics were trusted to prove every code in range. "
         f"Against that reference the raw path runs at {vs_ref['paired_median']:.2f}× per round "
         f"(CPU {vs_ref['cpu_ratio']:.2f}×)."),
        "",
    ]
    return Report("Raw data in the engines: schema mapping vs the coded path", "\n".join(lines), payload)
