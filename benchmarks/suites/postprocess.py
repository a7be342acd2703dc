"""``python -m benchmarks --suite postprocess``: non-negative and integer marginal tables
(``factorize.postprocess``) on Adult, all 2-way marginals — measured, not claimed; writes
reports/bench_postprocess.md (+ .json).

    python -m benchmarks --suite postprocess [--releases 30] [--rho 0.5]

Adult (``../shared/data/adult``, 48,842 records, 14 attributes: 91 tables, 148,137 cells; read
in place, never copied), one structured plan of all 2-way marginals under ρ-zCDP (the planner's
choice: the residual family). Measured:

1. **end to end**, each in a fresh process (``harness.run_factorize``: wall and CPU seconds,
   peak resident memory of the child): ``factorize plan`` and ``factorize run`` (``--seed``
   test noise) of the plan without post-processing, with ``--postprocess nonneg`` and with
   ``--postprocess integer``;
2. **error**, over ``--releases`` releases in this process (test-mode noise, seeds 0, 1, …; the
   exact measurement taken once by the executor from the CSV, the release, then the
   projection and the rounding as ``run`` does them): the total squared error of every answer
   against the true counts (computed here with numpy from the CSV, independently of the
   engine) for the raw estimates, ``nonneg`` and ``integer``; the negative cells, the spread
   of the table totals, and the properties the method states (non-negative, integer, one
   total, tables agreeing where they share attributes), checked on every release; the
   post-processing's seconds, and its peak traced memory (``tracemalloc``) on the first
   release.
"""

from __future__ import annotations

import itertools
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "postprocess"
SUMMARY = ("non-negative / integer consistent marginal tables on Adult all 2-way: error vs "
           "the true counts over ≥ 30 releases, time, memory")
TITLE = "Post-processing of marginal tables: nonneg and integer on Adult, all 2-way marginals"
#: The issue's figures for Adult all 2-way with integer post-processing (fresh ``run``).
TARGET_SECONDS = 30.0
TARGET_MIB = 1024.0


def add_arguments(parser: Any) -> None:
    parser.add_argument("--releases", type=int, default=30, help="Monte Carlo releases (≥ 30)")
    parser.add_argument("--rho", type=float, default=0.5, help="the plan's ρ (zCDP)")


def _truth(layout: Any, csv: Path) -> Any:
    """The true answers of every table, from the records with numpy."""
    import numpy as np

    raw = np.loadtxt(csv, delimiter=",", skiprows=1, dtype=np.int64)
    tables = []
    for T in layout.tables:
        t = np.zeros(layout.shape(T), dtype=np.int64)
        if T:
            np.add.at(t, tuple(raw[:, j] for j in T), 1)
        else:  # np.add.at on a 0-d array adds once: the total is the number of records
            t[()] = raw.shape[0]
        tables.append(t)
    return layout.answers(tables), int(raw.shape[0])


def _disagreement(layout: Any, tables: list) -> float:
    """The largest difference between two tables on the attributes they share."""
    import numpy as np

    from factorize.postprocess.tables import marginal

    worst = 0.0
    for (S, s), (T, t) in itertools.combinations(zip(layout.tables, tables, strict=True), 2):
        shared = tuple(j for j in S if j in T)
        worst = max(worst, float(np.abs(marginal(s, S, shared) - marginal(t, T, shared)).max()))
    return worst


def _end_to_end(harness: Any, work: Path, spec: str, domain: str, csv: Path, rho: float) -> list[dict]:
    """Plan and run in fresh processes without, with nonneg and with integer post-processing."""
    rows = []
    for method in ("none", "nonneg", "integer"):
        plan = work / f"{method}.plan"
        p = harness.factorize(["plan", "--workload", spec, "--privacy", f"rho={rho}", "--domain", domain,
                               "--postprocess", method, "--out", str(plan)])
        r = harness.factorize(["run", str(plan), "--data", str(csv), "--out", str(work / f"{method}.parquet"),
                               "--seed", "1"])
        rows.append({"method": method, "plan_s": p.wall_s, "plan_cpu_s": p.cpu_s,
                     "plan_mib": p.peak_rss_mib, "run_s": r.wall_s, "run_cpu_s": r.cpu_s,
                     "run_mib": r.peak_rss_mib, "run_line": next(
                         (x for x in r.stdout.splitlines() if x.startswith("postprocess")), "")})
        print(f"{method:8s} plan {p.wall_s:6.2f} s {p.peak_rss_mib:6.0f} MiB; run {r.wall_s:6.2f} s "
              f"{r.cpu_s:6.2f} s CPU {r.peak_rss_mib:6.0f} MiB", flush=True)
    return rows


def _releases(n_releases: int, plan_path: Path, csv: Path) -> tuple[list[dict], int]:
    """The Monte Carlo of the module docstring (item 2); ``(rows, n)``."""
    import tracemalloc

    import numpy as np

    from factorize.executor.structured import release
    from factorize.kinds.structured.kind import StructuredKind
    from factorize.kinds.structured.plan import load_structured_plan
    from factorize.kinds.structured.verify import verify_structured_plan
    from factorize.postprocess.nonneg import project_nonneg
    from factorize.postprocess.plan_option import MARGINAL_MAX_ITER, MARGINAL_TOL
    from factorize.postprocess.rounding import round_tables
    from factorize.postprocess.tables import marginal_layout
    from factorize.privacy import TestRandom

    plan = load_structured_plan(plan_path)
    check = verify_structured_plan(plan, raise_on_failure=True, certificate=False)
    layout = marginal_layout(check.workload, plan.domain.sizes)
    truth, n = _truth(layout, csv)
    measurement = StructuredKind().measure(plan, check, str(csv), engine="duckdb",
                                           allow_extra_columns=False).values
    rows = []
    for seed in range(n_releases):
        est = release(plan, check, measurement, TestRandom(seed)).estimate
        totals = [float(t.sum()) for t in layout.targets(est)[0]]
        t0 = time.perf_counter()
        fit = project_nonneg(layout, est, max_iter=MARGINAL_MAX_ITER, tol=MARGINAL_TOL)
        t1 = time.perf_counter()
        ints = round_tables(layout, fit.tables)
        t2 = time.perf_counter()
        peak = None
        if seed == 0:  # once more under tracemalloc (it slows numpy: not the timed run)
            tracemalloc.start()
            round_tables(layout, project_nonneg(layout, est, max_iter=MARGINAL_MAX_ITER,
                                                tol=MARGINAL_TOL).tables)
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        nonneg, integer = layout.answers(fit.tables), layout.answers(ints.tables)
        rows.append({
            "seed": seed, "sse_raw": float(np.sum((est - truth) ** 2)),
            "sse_nonneg": float(np.sum((nonneg - truth) ** 2)),
            "sse_integer": float(np.sum((integer - truth) ** 2)),
            "negative_raw": int(np.sum(est < 0)), "total_spread_raw": max(totals) - min(totals),
            "n_hat": fit.n_hat, "integer_total": ints.total, "iterations": fit.iterations,
            "residual": fit.residual, "rake_disagreement": fit.disagreement,
            "nonneg_s": t1 - t0, "integer_s": t2 - t1, "traced_peak_mib": peak,
            "min_nonneg": float(min(t.min() for t in fit.tables)),
            "nonneg_disagreement": _disagreement(layout, fit.tables),
            "integer_ok": bool(all(t.dtype.kind == "i" and int(t.min()) >= 0 and int(t.sum()) == ints.total
                                   for t in ints.tables)),
            "integer_disagreement": _disagreement(layout, ints.tables)})
        r = rows[-1]
        print(f"release {seed:3d}: SSE raw {r['sse_raw']:.4g}, nonneg {r['sse_nonneg']:.4g}, integer "
              f"{r['sse_integer']:.4g}; {fit.iterations} iterations {r['nonneg_s']:.2f} s, rounding "
              f"{r['integer_s']:.2f} s", flush=True)
    return rows, n


def _summary(values: list[float]) -> str:
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:,.0f} ± {sd:,.0f} ({min(values):,.0f} … {max(values):,.0f})"


def run(args: Any, harness: Any) -> Any:
    import json

    from benchmarks.errors import BenchError
    from benchmarks.harness import ADULT_DIR, Report

    if args.releases < 1:
        raise BenchError("--releases must be at least 1")
    csv, domain = ADULT_DIR / "adult.csv", ADULT_DIR / "adult-domain.json"
    if not csv.is_file():
        raise BenchError(f"the Adult data is not at {ADULT_DIR} (set FACTORIZE_ADULT_DIR)")
    sizes = list(json.loads(domain.read_text(encoding="utf-8")).values())
    spec = "marginals:" + "x".join(map(str, sizes)) + ":2"
    with tempfile.TemporaryDirectory(prefix="factorize-bench-") as tmp:
        work = Path(tmp)
        e2e = _end_to_end(harness, work, spec, str(domain), csv, args.rho)
        rows, n = _releases(args.releases, work / "none.plan", csv)
    data = {"releases": args.releases, "rho": args.rho, "workload": spec, "records": n,
            "end_to_end": e2e, "rows": rows}
    report = render(data)
    print(report)
    return Report(TITLE, report, data)


def render(data: dict) -> str:
    """The suite's text after the common header."""
    rows, e2e = data["rows"], data["end_to_end"]
    R = len(rows)
    better_n = sum(r["sse_nonneg"] <= r["sse_raw"] for r in rows)
    better_i = sum(r["sse_integer"] <= r["sse_raw"] for r in rows)
    integer = next(r for r in e2e if r["method"] == "integer")
    met = integer["run_s"] <= TARGET_SECONDS and integer["run_mib"] <= TARGET_MIB
    k = 148137
    lines = [
        f"Regenerate: `python -m benchmarks --suite postprocess --releases {data['releases']} "
        f"--rho {data['rho']}`. Adult all 2-way marginals ({k:,} answers in 91 tables, "
        f"n = {data['records']:,} records), ρ = {data['rho']} zCDP, the planner's structured plan "
        "(residual family); test-mode noise (`--seed`), so every release here is reproducible.",
        "",
        "## End to end (fresh processes)",
        "",
        "| --postprocess | plan s | plan MiB | run s (wall) | run s (CPU) | run peak MiB | run says |",
        "|---|---:|---:|---:|---:|---:|---|",
        *[f"| {r['method']} | {r['plan_s']:.2f} | {r['plan_mib']:.0f} | {r['run_s']:.2f} | "
          f"{r['run_cpu_s']:.2f} | {r['run_mib']:.0f} | {r['run_line'] or '—'} |" for r in e2e],
        "",
        f"Target for `run` with `integer`: ≤ {TARGET_SECONDS:.0f} s and ≤ {TARGET_MIB:.0f} MiB — "
        f"**{'met' if met else 'NOT met'}** ({integer['run_s']:.1f} s, {integer['run_mib']:.0f} MiB).",
        "",
        f"## Error against the true counts ({R} releases)",
        "",
        "Total squared error Σ_i (answer_i − true count_i)² over all answers: mean ± sd (min … max).",
        "",
        "| answers | total squared error | RMSE per answer | releases with error ≤ raw |",
        "|---|---|---:|---:|",
        f"| raw estimates | {_summary([r['sse_raw'] for r in rows])} | "
        f"{math.sqrt(statistics.fmean(r['sse_raw'] for r in rows) / k):.3f} | — |",
        f"| nonneg | {_summary([r['sse_nonneg'] for r in rows])} | "
        f"{math.sqrt(statistics.fmean(r['sse_nonneg'] for r in rows) / k):.3f} | {better_n} / {R} |",
        f"| integer | {_summary([r['sse_integer'] for r in rows])} | "
        f"{math.sqrt(statistics.fmean(r['sse_integer'] for r in rows) / k):.3f} | {better_i} / {R} |",
        "",
        f"- raw estimates: {statistics.fmean(r['negative_raw'] for r in rows):,.0f} negative cells per "
        f"release on average; table totals spread by {max(r['total_spread_raw'] for r in rows):.3g} at "
        "most (one least-squares estimate: one total up to rounding).",
        f"- nonneg: smallest cell {min(r['min_nonneg'] for r in rows):.3g}; largest disagreement between "
        f"two tables on shared attributes {max(r['nonneg_disagreement'] for r in rows):.3g}; ADMM "
        f"iterations {min(r['iterations'] for r in rows)} … {max(r['iterations'] for r in rows)}, "
        f"{statistics.fmean(r['nonneg_s'] for r in rows):.2f} s on average; largest disagreement "
        f"left by raking ≤ {max(r['rake_disagreement'] for r in rows):.3g}; n̂ − n from {min(r['n_hat'] for r in rows) - data['records']:.1f} "
        f"to {max(r['n_hat'] for r in rows) - data['records']:.1f}.",
        f"- integer: every table non-negative integer of one total in {sum(r['integer_ok'] for r in rows)} / "
        f"{R} releases; largest disagreement on shared attributes "
        f"{max(r['integer_disagreement'] for r in rows):.3g}; rounding "
        f"{statistics.fmean(r['integer_s'] for r in rows):.2f} s on average.",
        f"- peak traced memory of the post-processing (first release, `tracemalloc`): "
        f"{rows[0]['traced_peak_mib']:.0f} MiB.",
        "",
        "The projection (`factorize.postprocess.nonneg`) is onto the non-negative tables that agree "
        "on every shared attribute set, of the release's least-squares total (the local polytope; "
        "McKenna et al. 2019, 2021); the rounding (`factorize.postprocess.rounding`) is controlled "
        "rounding from the total down (TopDown-style, Abowd et al. 2022).",
        "",
    ]
    return "\n".join(lines)
