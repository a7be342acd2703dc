"""``python -m benchmarks --suite tables``: published tables from raw data — the six-attribute
office job end to end, and Adult's all 2-way and all ≤3-way marginals with ``--postprocess
nonneg`` and ``integer``; writes reports/bench_tables.md (+ .json).

    python -m benchmarks --suite tables [--releases 30] [--releases-3way 3] [--rho 0.5]
                                        [--skip-3way]

1. **The office job.** Raw-valued Adult (``benchmarks.raw_adult``: UCI's values, written from
   the shared coded file), the hand-written public schema ``docs/examples/adult_schema.json``,
   six attributes (:data:`OFFICE_ATTRIBUTES`): all 2-way marginals, ``cdf(age) by sex`` and
   ``income by education`` in one plan (:data:`OFFICE_SPEC`) under ρ-zCDP. Each step in a fresh
   process (``harness.run_factorize``: wall and CPU seconds, peak resident memory): ``plan``
   with ``--postprocess nonneg`` and with ``integer``, ``run`` of each with ``--tables`` (test
   noise, ``--seed``), and the plan and results reports. The published answers of the integer
   run are checked here: every post-processed answer a non-negative integer, every marginal
   table of one total, the table requested twice with one value per cell.
2. **Monte Carlo.** ``--releases`` releases in this process (test-mode noise, seeds 0, 1, …;
   the exact measurement taken once from the raw CSV by the executor, then the release and the
   post-processing as ``run`` does them): the total squared error of every answer against the
   true answers (the workload operator applied to the true histogram of the coded file, with
   numpy, independently of the post-processing) before and after ``nonneg`` and ``integer``.
3. **Adult all 2-way and all ≤3-way marginals** (coded file, 14 attributes: 91 tables and
   148,137 cells; 470 tables and 21,043,262 cells): ``plan`` and ``run`` in fresh processes
   without, with ``nonneg`` and with ``integer``; Monte Carlo as in 2 (``--releases`` and
   ``--releases-3way`` releases), the truth the tables counted with numpy.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "tables"
SUMMARY = ("published tables end to end: the six-attribute office job from raw CSV, and Adult "
           "all 2-way / ≤3-way marginals with nonneg and integer (time, memory, error ≥ 30 releases)")
TITLE = "Published tables: the office job from raw CSV, and Adult marginals with nonneg and integer"
OFFICE_ATTRIBUTES = ("age", "education-num", "marital-status", "race", "sex", "income>50K")
_TOTALS = {a: f"total[{a}]" for a in OFFICE_ATTRIBUTES}
OFFICE_SPEC = ("vstack(marginals[" + ",".join(OFFICE_ATTRIBUTES) + "]:2,"
               'table("cdf(age) by sex",kron('
               + ",".join({"age": "prefix[age]", "sex": "identity[sex]"}.get(a, _TOTALS[a])
                          for a in OFFICE_ATTRIBUTES) + ")),"
               'table("income by education",kron('
               + ",".join({"education-num": "identity[education-num]",
                           "income>50K": "identity[income>50K]"}.get(a, _TOTALS[a])
                          for a in OFFICE_ATTRIBUTES) + ")))")
#: The issue's figures: the office job from raw CSV to integer tables; Adult 2-way integer run.
OFFICE_TARGET_S = 30.0
ADULT2_TARGET_S = 30.0
ADULT2_TARGET_MIB = 1024.0


def add_arguments(parser: Any) -> None:
    parser.add_argument("--releases", type=int, default=30,
                        help="Monte Carlo releases of the office job and Adult 2-way (≥ 30)")
    parser.add_argument("--releases-3way", type=int, default=3,
                        help="Monte Carlo releases of Adult ≤3-way (each about a minute)")
    parser.add_argument("--rho", type=float, default=0.5, help="every plan's ρ (zCDP)")
    parser.add_argument("--skip-3way", action="store_true", help="leave out Adult all ≤3-way")


def _step(harness: Any, name: str, args: list[str]) -> dict:
    p = harness.factorize(args)
    print(f"{name:28s} {p.wall_s:7.2f} s wall {p.cpu_s:7.2f} s CPU {p.peak_rss_mib:7.0f} MiB", flush=True)
    return {"step": name, "wall_s": p.wall_s, "cpu_s": p.cpu_s, "peak_mib": p.peak_rss_mib,
            "says": next((x for x in p.stdout.splitlines() if x.startswith("postprocess")), "")}


def _published_checks(answers: Path, layout: Any) -> dict:
    """The integer run's published answers: non-negative integers, one total over the marginal
    blocks (identity factors), equal values where two blocks read the same table the same way."""
    import numpy as np
    import pyarrow.parquet as pq

    pp = pq.read_table(answers, columns=["estimate_postprocessed"]).column(0).to_numpy()
    blocks = [pp[layout.offsets[o]:layout.offsets[o + 1]] for o in range(len(layout.block_table))]
    plain = [o for o, fs in enumerate(layout.block_factors) if all(f is None for f in fs)]
    totals = {float(blocks[o].sum()) for o in plain}
    twice = [(o, p) for o in plain for p in plain if o < p and layout.block_table[o] == layout.block_table[p]]
    return {"non_negative_integers": bool(np.all(pp >= 0) and np.array_equal(pp, np.rint(pp))),
            "marginal_totals": sorted(totals), "tables_asked_twice": len(twice),
            "asked_twice_equal": all(np.array_equal(blocks[o], blocks[p]) for o, p in twice)}


def _monte_carlo(plan_path: Path, data: Path, truth: Any, releases: int, *, raw: bool) -> list[dict]:
    """Section 2 of the module docstring; one row per release."""
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
    measurement = StructuredKind().measure(plan, check, str(data), engine="duckdb",
                                           allow_extra_columns=raw).values
    rows = []
    for seed in range(releases):
        est = release(plan, check, measurement, TestRandom(seed)).estimate
        t0 = time.perf_counter()
        fit = project_nonneg(layout, est, max_iter=MARGINAL_MAX_ITER, tol=MARGINAL_TOL)
        t1 = time.perf_counter()
        ints = round_tables(layout, fit.tables)
        t2 = time.perf_counter()
        nonneg, integer = layout.answers(fit.tables), layout.answers(ints.tables)
        rows.append({"seed": seed, "sse_raw": float(np.sum((est - truth) ** 2)),
                     "sse_nonneg": float(np.sum((nonneg - truth) ** 2)),
                     "sse_integer": float(np.sum((integer - truth) ** 2)),
                     "negative_raw": int(np.sum(est < 0)), "iterations": fit.iterations,
                     "residual": fit.residual, "nonneg_disagreement": fit.disagreement,
                     "mutual_sweeps": fit.mutual_sweeps,
                     "integer_disagreement": ints.disagreement, "integer_total": ints.total,
                     "integer_ok": bool(all(int(t.min()) >= 0 and int(t.sum()) == ints.total
                                            for t in ints.tables)),
                     "nonneg_min": float(min(float(t.min()) for t in fit.tables)),
                     "nonneg_s": t1 - t0, "integer_s": t2 - t1})
        r = rows[-1]
        print(f"  release {seed:3d}: SSE raw {r['sse_raw']:.5g} nonneg {r['sse_nonneg']:.5g} integer "
              f"{r['sse_integer']:.5g}; {fit.iterations} iterations {r['nonneg_s']:.2f} s, rounding "
              f"{r['integer_s']:.2f} s", flush=True)
    return rows


def _office(harness: Any, work: Path, rho: float, releases: int) -> dict:
    """Sections 1 and 2 of the module docstring."""
    import numpy as np

    from benchmarks.raw_adult import SCHEMA_PATH, read_coded, write_raw
    from factorize.postprocess.tables import marginal_layout
    from workloads.schema import read_domain
    from workloads.spec import parse_workload, resolve_workload_spec

    codes, names = read_coded()
    raw = write_raw(work / "adult_raw.csv", codes, names)
    steps = []
    for method in ("nonneg", "integer"):
        plan = work / f"office-{method}.plan"
        steps.append(_step(harness, f"plan --postprocess {method}",
                           ["plan", "--domain", str(SCHEMA_PATH), "--privacy", f"rho={rho}",
                            "--workload", OFFICE_SPEC, "--postprocess", method, "--out", str(plan)]))
        folder = work / f"tables-{method}"
        folder.mkdir()
        steps.append(_step(harness, f"run --tables ({method})",
                           ["run", str(plan), "--data", str(raw), "--ignore-extra-columns", "--seed", "1",
                            "--out", str(work / f"office-{method}.parquet"), "--tables", str(folder)]))
    steps.append(_step(harness, "report (plan)", ["report", str(work / "office-integer.plan"),
                                                   "--out", str(work / "plan.html")]))
    steps.append(_step(harness, "report (results)", ["report", "--results", str(work / "office-integer.parquet"),
                                                      "--out", str(work / "results.html")]))
    spec, dom = resolve_workload_spec(OFFICE_SPEC, read_domain(SCHEMA_PATH))
    W = parse_workload(spec)
    layout = marginal_layout(W, dom.sizes)
    published = _published_checks(work / "office-integer.parquet", layout)
    cols = [names.index(a) for a in dom.attributes]
    h = np.bincount(np.ravel_multi_index(tuple(codes[:, j] for j in cols), dom.sizes),
                    minlength=math.prod(dom.sizes)).astype(np.float64)
    truth = W.matvec(h)
    rows = _monte_carlo(work / "office-integer.plan", raw, truth, releases, raw=True)
    tables = sum(1 for _ in layout.tables)
    return {"spec": OFFICE_SPEC, "attributes": list(dom.attributes), "sizes": list(dom.sizes),
            "answers": int(W.shape[0]), "support_tables": tables, "steps": steps,
            "published": published, "rows": rows, "records": int(codes.shape[0])}


def _adult(harness: Any, work: Path, way: int, rho: float, releases: int) -> dict:
    """Section 3 of the module docstring for all ``way``-way (2) or ≤3-way (3) marginals."""
    import json

    import numpy as np

    from benchmarks.harness import ADULT_DIR
    from benchmarks.raw_adult import read_coded
    from factorize.postprocess.tables import marginal_layout
    from workloads.spec import parse_workload

    csv, domain = ADULT_DIR / "adult.csv", ADULT_DIR / "adult-domain.json"
    sizes = list(json.loads(domain.read_text(encoding="utf-8")).values())
    spec = ("marginals:" if way == 2 else "marginals_upto:") + "x".join(map(str, sizes)) + f":{way}"
    steps = []
    for method in ("none", "nonneg", "integer"):
        plan = work / f"a{way}-{method}.plan"
        steps.append(_step(harness, f"plan --postprocess {method}",
                           ["plan", "--workload", spec, "--privacy", f"rho={rho}", "--domain", str(domain),
                            "--postprocess", method, "--out", str(plan)]))
        steps.append(_step(harness, f"run ({method})", ["run", str(plan), "--data", str(csv), "--seed", "1",
                                                        "--out", str(work / f"a{way}-{method}.parquet")]))
    layout = marginal_layout(parse_workload(spec), sizes)
    codes, _ = read_coded()
    tables = []
    for T in layout.tables:
        t = np.zeros(layout.shape(T))
        if T:
            np.add.at(t, tuple(codes[:, j] for j in T), 1.0)
        else:  # np.add.at on a 0-d array adds once: the total is the number of records
            t[()] = float(len(codes))
        tables.append(t)
    truth = layout.answers(tables)
    rows = _monte_carlo(work / f"a{way}-none.plan", csv, truth, releases, raw=False)
    return {"way": way, "spec": spec, "answers": layout.k, "tables": len(layout.tables),
            "steps": steps, "rows": rows}


def run(args: Any, harness: Any) -> Any:
    from benchmarks.errors import BenchError
    from benchmarks.harness import ADULT_DIR, Report

    if args.releases < 1 or args.releases_3way < 1:
        raise BenchError("--releases and --releases-3way must be at least 1")
    if not (ADULT_DIR / "adult.csv").is_file():
        raise BenchError(f"the Adult data is not at {ADULT_DIR} (set FACTORIZE_ADULT_DIR)")
    data: dict[str, Any] = {"rho": args.rho, "releases": args.releases, "releases_3way": args.releases_3way}
    with tempfile.TemporaryDirectory(prefix="factorize-bench-") as tmp:
        work = Path(tmp)
        print("office job", flush=True)
        data["office"] = _office(harness, work, args.rho, args.releases)
        print("Adult all 2-way", flush=True)
        data["adult2"] = _adult(harness, work, 2, args.rho, args.releases)
        if not args.skip_3way:
            print("Adult all <=3-way", flush=True)
            data["adult3"] = _adult(harness, work, 3, args.rho, args.releases_3way)
    report = render(data)
    print(report)
    return Report(TITLE, report, data)


def _summary(values: list[float]) -> str:
    m = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:,.0f} ± {sd:,.0f} ({min(values):,.0f} … {max(values):,.0f})"


def _steps_table(steps: list[dict]) -> list[str]:
    return ["| step | wall s | CPU s | peak MiB | says |", "|---|---:|---:|---:|---|",
            *[f"| {s['step']} | {s['wall_s']:.2f} | {s['cpu_s']:.2f} | {s['peak_mib']:.0f} | "
              f"{s['says'] or '—'} |" for s in steps]]


def _error_table(rows: list[dict], k: int) -> list[str]:
    R = len(rows)
    out = ["| answers | total squared error: mean ± sd (min … max) | RMSE per answer | releases ≤ raw |",
           "|---|---|---:|---:|"]
    for key, name in (("sse_raw", "raw estimates"), ("sse_nonneg", "nonneg"), ("sse_integer", "integer")):
        vals = [r[key] for r in rows]
        better = "—" if key == "sse_raw" else f"{sum(r[key] <= r['sse_raw'] for r in rows)} / {R}"
        out.append(f"| {name} | {_summary(vals)} | {math.sqrt(statistics.fmean(vals) / k):.3f} | {better} |")
    out += ["",
            f"- raw: {statistics.fmean(r['negative_raw'] for r in rows):,.0f} negative answers per release on average.",
            f"- nonneg: ADMM iterations {min(r['iterations'] for r in rows)} … {max(r['iterations'] for r in rows)} "
            f"({statistics.fmean(r['nonneg_s'] for r in rows):.2f} s on average, final residual ≤ "
            f"{max(r['residual'] for r in rows):.2g}); smallest cell {min(r['nonneg_min'] for r in rows):.3g}; "
            f"largest disagreement between two tables on shared attributes "
            f"{max(r['nonneg_disagreement'] for r in rows):.3g} (mutual-fit sweeps "
            f"{max(r.get('mutual_sweeps', 0) for r in rows)}: 0 where raking alone made them consistent).",
            f"- integer: non-negative integer tables of one total in {sum(r['integer_ok'] for r in rows)} / {R} "
            f"releases; largest disagreement on shared attributes {max(r['integer_disagreement'] for r in rows)}; "
            f"rounding {statistics.fmean(r['integer_s'] for r in rows):.2f} s on average."]
    return out


def render(data: dict) -> str:
    """The suite's text after the common header."""
    o = data["office"]
    steps = {s["step"]: s for s in o["steps"]}
    e2e = steps["plan --postprocess integer"]["wall_s"] + steps["run --tables (integer)"]["wall_s"]
    pub = o["published"]
    lines = [
        f"Regenerate: `python -m benchmarks --suite tables --releases {data['releases']} "
        + (f"--releases-3way {data['releases_3way']}" if "adult3" in data else "--skip-3way")
        + f" --rho {data['rho']}`. Every plan ρ = {data['rho']} "
        "zCDP; test-mode noise (`--seed`), so every release here is reproducible. Times are wall "
        "seconds of fresh processes (CPU seconds beside them) on the machine and load above.",
        "",
        "## The office job: raw CSV → published tables",
        "",
        f"Raw-valued Adult ({o['records']:,} records, UCI's values) with the public schema "
        f"`docs/examples/adult_schema.json`, attributes {', '.join(o['attributes'])} (sizes "
        f"{'×'.join(map(str, o['sizes']))}); workload `{o['spec']}` — {o['answers']:,} answers read "
        f"from {o['support_tables']} marginal tables.",
        "",
        *_steps_table(o["steps"]),
        "",
        f"Raw CSV to published non-negative integer tables (plan + run with `--tables`, integer): "
        f"{e2e:.1f} s — target ≤ {OFFICE_TARGET_S:.0f} s **{'met' if e2e <= OFFICE_TARGET_S else 'NOT met'}**.",
        f"Published answers (integer run): non-negative integers {pub['non_negative_integers']}; "
        f"totals of the marginal tables {', '.join(f'{t:,.0f}' for t in pub['marginal_totals'])}; "
        f"{pub['tables_asked_twice']} table(s) requested twice, equal cell by cell: {pub['asked_twice_equal']}.",
        "",
        f"### Error against the true answers ({len(o['rows'])} releases)",
        "",
        *_error_table(o["rows"], o["answers"]),
        "",
    ]
    for key, title in (("adult2", "all 2-way"), ("adult3", "all ≤3-way")):
        if key not in data:
            continue
        a = data[key]
        lines += [f"## Adult, {title} marginals", "",
                  f"`{a['spec']}` (coded file): {a['tables']} tables, {a['answers']:,} answers.", "",
                  *_steps_table(a["steps"]), ""]
        if key == "adult2":
            run_i = next(s for s in a["steps"] if s["step"] == "run (integer)")
            met = run_i["wall_s"] <= ADULT2_TARGET_S and run_i["peak_mib"] <= ADULT2_TARGET_MIB
            lines += [f"`run` with integer: {run_i['wall_s']:.1f} s, {run_i['peak_mib']:.0f} MiB — target "
                      f"≤ {ADULT2_TARGET_S:.0f} s and ≤ {ADULT2_TARGET_MIB:.0f} MiB "
                      f"**{'met' if met else 'NOT met'}**.", ""]
        lines += [f"### Error against the true counts ({len(a['rows'])} releases)", "",
                  *_error_table(a["rows"], a["answers"]), ""]
    lines += ["Post-processing: the marginal tables the answers are read from, projected onto the "
              "non-negative consistent tables of the release's total (ADMM on the local polytope, "
              "`factorize.postprocess.nonneg`) and raked to consistency from the total down "
              "(`postprocess.raking`) — where a level has three or more parents and raking cannot, "
              "fitted to each other by cyclic KL projections (`postprocess.mutual_fit`); `integer` rounds those by controlled rounding from the total "
              "down (`postprocess.rounding`); every answer is read back through its block's factors.", ""]
    return "\n".join(lines)
