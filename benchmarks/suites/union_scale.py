"""``python -m benchmarks --suite union_scale``: plan and run time of random unions of Kronecker
products at census scale — up to 40 blocks over up to 10⁹ cells — the sizes the planner promises
to plan in ≤ 30 s and run on 10⁶ records in ≤ 30 s on 2 cores. Writes
reports/bench_union_scale.md and .json.

    python -m benchmarks --suite union_scale [--seeds 1 2 …] [--records N]

The workloads are drawn by :func:`random_union` from fixed seeds (the report lists each spec, so
a row can be replayed with ``factorize plan --workload SPEC --domain DOMAIN``): 3–6 attributes of
8–115 values (N ≤ 10⁹), 10–40 blocks, each factor identity, total (most often), prefix, allrange
(≤ 32 values) or a width range, at most 2·10⁶ queries. Every row is the real command line in fresh
processes (``hdmm_suite.plan_row``: ``plan``, ``verify``, ``run``) under Laplace (ε = 1) and
Gaussian (ρ = 0.5) noise, run on ``--records`` synthetic public records (``engines.synthetic``,
independent uniform codes). The figures are the plan's own statements, re-derived by ``verify``.
"""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

from benchmarks.harness import value_or_dash

NAME = "union_scale"
SUMMARY = ("random unions of ≤ 40 Kronecker products over ≤ 10⁹ cells: plan, verify and run time "
           "(10⁶ records), Laplace and Gaussian, with the certified gap")
TITLE = "Unions of Kronecker products at census scale: plan and run time"

#: the seeds of the default run (each draws one workload): small domains, and big ones
SEEDS = (1, 4, 7)
BIG_SEEDS = (5, 9, 11, 13, 21, 29)
#: the promised limits, seconds on 2 cores
PLAN_LIMIT_S = 30.0
RUN_LIMIT_S = 30.0
MAX_CELLS = 10**9
MAX_QUERIES = 2_000_000


def random_union(seed: int, big: bool = False) -> tuple[str, list[int]]:
    """``(spec, sizes)`` of one random union (module docstring), attributes named x0, x1, …;
    ``big``: 4–6 attributes of 50–115 values (N of 10⁷–10⁹), most factors total."""
    from workloads.spec import parse_workload

    rng = random.Random(seed)
    while True:
        d = rng.randint(4, 6) if big else rng.randint(3, 6)
        sizes = [rng.choice([50, 64, 100, 115] if big else [8, 16, 32, 50, 64, 100, 115]) for _ in range(d)]
        while math.prod(sizes) > MAX_CELLS:
            sizes[rng.randrange(d)] //= 2
        kinds = ["identity", "total", "total", "total", "prefix", "allrange", "width"]
        if big:
            kinds += ["total"] * 6
        blocks = []
        for _ in range(rng.randint(10, 40)):
            fs = []
            for n in sizes:
                k = rng.choice(kinds)
                if k == "allrange" and n > 32:
                    k = "prefix"
                fs.append(f"width:{n}:{rng.randint(1, n)}" if k == "width" else f"{k}:{n}")
            if all(f.startswith("total") for f in fs):
                fs[0] = f"identity:{sizes[0]}"
            blocks.append("kron(" + ",".join(fs) + ")")
        spec = "vstack(" + ",".join(blocks) + ")"
        if parse_workload(spec).shape[0] <= MAX_QUERIES:
            return spec, sizes


def add_arguments(parser) -> None:
    parser.add_argument("--seeds", type=int, nargs="*", default=list(SEEDS),
                        help="the seeds of small-domain workloads (default: %(default)s)")
    parser.add_argument("--big-seeds", type=int, nargs="*", default=list(BIG_SEEDS),
                        help="the seeds of 10⁷–10⁹-cell workloads (default: %(default)s)")
    parser.add_argument("--records", type=int, default=1_000_000,
                        help="synthetic records each plan runs on (0: no runs)")


def run(args, harness):
    from benchmarks.harness import Report
    from benchmarks.suites.hdmm_suite import plan_row
    from factorize.engines.synthetic import synthetic_records

    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        w = Path(tmp)
        for seed, big in [(s, False) for s in args.seeds] + [(s, True) for s in args.big_seeds]:
            spec, sizes = random_union(seed, big)
            domain = ",".join(f"x{j}={n}" for j, n in enumerate(sizes))
            data = None
            if args.records:
                data = synthetic_records(args.records, sizes, seed, w / f"s{seed}.parquet")
            row: dict = {"seed": f"{seed}{' big' if big else ''}", "spec": spec, "domain": domain,
                         "blocks": spec.count("kron("), "N": math.prod(sizes)}
            for key, privacy in (("laplace", "epsilon=1"), ("gaussian", "rho=0.5")):
                row[key] = plan_row(f"seed{seed}{'big' if big else ''}", spec, w, privacy=privacy, domain=domain, data=data)
                print(seed, key, f"{row[key]['plan_s']:.1f}s plan", f"{row[key].get('run_s', 0):.1f}s run",
                      flush=True)
            if data is not None:
                data.unlink()
            rows.append(row)
    report = {"load_before": list(harness.load_start or []), "records": args.records, "rows": rows,
              "date": harness.started[:10]}
    return Report(TITLE, render(report), report)


def render(report: dict) -> str:
    """The suite's text after the common header (machine, versions, load: the harness)."""
    lines = [
        "Regenerate: `python -m benchmarks --suite union_scale` (fresh processes, imports included; "
        f"runs on {report['records']:,} synthetic records). *gap* = the plan's value / its certified "
        "lower bound (Laplace: per-query RMSE over √2·γ_F(W)/ε; Gaussian: the γ_F objective per unit "
        f"σ over the certificate's bound). Limits: plan ≤ {PLAN_LIMIT_S:g} s, run ≤ {RUN_LIMIT_S:g} s.",
        "",
        "| seed | blocks | N | k | Laplace plan s | verify s | run s | family | gap | "
        "Gaussian plan s | verify s | run s | family | gap |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    worst_plan = worst_run = 0.0
    for r in report["rows"]:
        cells = []
        for key in ("laplace", "gaussian"):
            p = r[key]
            bound = p.get("laplace_bound") if key == "laplace" else p.get("lower")
            value = p["rmse"] if key == "laplace" else p.get("value")
            gap = "—" if not bound or value is None else f"{value / bound:.3f}"
            worst_plan = max(worst_plan, p["plan_s"])
            worst_run = max(worst_run, p.get("run_s") or 0.0)
            cells += [f"{p['plan_s']:.1f}", f"{p['verify_s']:.1f}", value_or_dash(p.get("run_s"), ".1f"),
                      str(p.get("chosen") or p.get("kind")), gap]
        lines.append(f"| {r['seed']} | {r['blocks']} | {r['N']:,} | {r['laplace']['k']:,} | " + " | ".join(cells) + " |")
    lines += ["", f"Largest plan time {worst_plan:.1f} s (limit {PLAN_LIMIT_S:g}); largest run time "
              f"{worst_run:.1f} s (limit {RUN_LIMIT_S:g}).", "", "Workloads:", ""]
    lines += [f"- seed {r['seed']}: `--domain {r['domain']}` `--workload {r['spec']}`" for r in report["rows"]]
    return "\n".join(lines)
