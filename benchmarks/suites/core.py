"""``python -m benchmarks --suite core``: the generic SDP back-ends side by side (``reports/bench_core.md``).

Every run forces ``method="sdp"``; the specialised solvers against the SDP at scale are
``python -m benchmarks --suite scale`` (``benchmarks.suites.scale``).

Cases: prefix n ∈ {16, 32, 64, 128} and all-range n ∈ {16, 32, 64}, for γ_F and γ₂,
with every available back-end, plus ``kron(prefix:64,prefix:64,prefix:64)``. Each case
runs in a fresh subprocess (``python -m benchmarks.suites.core --case …``, run by the
harness) so its peak resident memory is its own; a baseline process that only imports the
stack is measured in the same run. Columns: value, certified relative gap, seconds, peak
RSS, and the time relative to the fastest back-end on the same case. Cost growth: the SDP
cone has size N + rank(W) (never k + N), so each interior-point iteration costs
O((N + r)^6) with a dense KKT (Clarabel), each first-order iteration O((N + r)^3) (SCS: one
eigendecomposition).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

NAME = "core"
SUMMARY = ("the generic SDP back-ends (SCS, Clarabel, …) side by side: prefix n = 16…128, "
           "all-range n = 16…64, γ_F and γ₂, and kron(prefix:64)³")

FULL_CASES = ([f"prefix:{n}" for n in (16, 32, 64, 128)]
              + [f"allrange:{n}" for n in (16, 32, 64)])
QUICK_CASES = ["prefix:16", "allrange:16"]
KRON_CASE = "kron(prefix:64,prefix:64,prefix:64)"


def _run_case(spec: str, norm: str, backend: str, time_limit: float) -> dict:
    from benchmarks.harness import run_process

    cmd = [sys.executable, "-m", "benchmarks.suites.core", "--case", spec, norm, backend, str(time_limit)]
    p = run_process(cmd, deadline=time_limit + 120)
    loads = {"load_before": p.load_before, "load_after": p.load_after}
    if p.killed:
        return {"status": f"killed after {time_limit + 120:.0f} s", **loads}
    wall = p.wall_s
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode < 0:
        sig = -p.returncode
        why = " (SIGKILL: most likely the kernel's out-of-memory killer)" if sig == 9 else ""
        return {"status": f"killed by signal {sig} after {wall:.0f} s{why}", "wall": wall, **loads}
    if p.returncode != 0 or not lines:
        err = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"status": f"failed (exit {p.returncode}): {err[:200]}", "wall": wall, **loads}
    out = json.loads(lines[-1])
    out["wall"] = wall
    out.update(loads)
    return out


def _case_main(spec: str, norm: str, backend: str, time_limit: float) -> None:
    """Run one case in this process and print one JSON line (used by the subprocesses)."""
    from factorize.planner.routes import solve
    from solvers import SolverError, SolverOptions

    try:
        # method="sdp": this suite measures the generic SDP back-ends (the specialised solvers
        # are `python -m benchmarks --suite scale`); eps is None for a dual solve, so skip those.
        r = solve(spec, norm, method="sdp",
                  options=SolverOptions(backend=backend, time_limit=time_limit))
        eps = [s.eps for s in r.solves if s.eps is not None]
        out = {"status": "ok", "value": r.value, "lower": r.lower, "gap": r.gap,
               "seconds": r.seconds, "eps": min(eps) if eps else None}
    except SolverError as exc:
        out = {"status": f"{type(exc).__name__}: {str(exc)[:160]}"}
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _baseline_rss() -> float:
    code = ("import resource, factorize.planner.routes, cvxpy, scs, clarabel;"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout.strip())


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="prefix:16 and allrange:16 only (a smoke run)")
    parser.add_argument("--solvers", default=None,
                        help="comma-separated SDP back-ends (default: all available)")
    parser.add_argument("--time-limit", type=float, default=300.0, help="per-case limit in seconds")


def run(args, harness):
    solvers = tuple(s.strip() for s in args.solvers.split(",")) if args.solvers else None
    return run_core_benchmark(harness, quick=args.quick, solvers=solvers, time_limit=args.time_limit)


def run_core_benchmark(harness, quick: bool = False, solvers: tuple[str, ...] | None = None,
                       time_limit: float = 300.0):
    """Run every case; the report (its table and the JSON rows)."""
    from benchmarks.harness import Report
    from solvers import available_backends

    backends = solvers or available_backends()
    cases = QUICK_CASES if quick else FULL_CASES
    rows = []
    for spec in cases:
        for norm in ("gamma_f", "gamma_2"):
            for backend in backends:
                r = _run_case(spec, norm, backend, time_limit)
                rows.append({"workload": spec, "norm": norm, "backend": backend, **r})
                print(json.dumps(rows[-1]), flush=True)
    if not quick:
        for norm in ("gamma_f", "gamma_2"):
            r = _run_case(KRON_CASE, norm, "scs", time_limit)
            rows.append({"workload": KRON_CASE, "norm": norm, "backend": "scs", **r})
            print(json.dumps(rows[-1]), flush=True)
    add_ratios(rows)
    base = _baseline_rss()
    return Report("Planner core benchmark (generic SDP back-ends)",
                  render_markdown(rows, base, backends, time_limit),
                  {"backends": list(backends), "time_limit_s": time_limit, "quick": quick,
                   "baseline_rss_mb": base, "rows": rows})


def _ok(r: dict) -> bool:
    return r.get("status") == "ok"


def add_ratios(rows: list[dict]) -> None:
    """``ratio_to_fastest``: seconds ÷ the fastest finished back-end on the same (workload, norm)."""
    from benchmarks.harness import add_ratios as ratios

    ratios(rows, value="seconds", group=lambda r: (r["workload"], r["norm"]), baseline=_ok,
           name="ratio_to_fastest", where=_ok)


def render_markdown(rows: list[dict], base: float, backends, time_limit: float) -> str:
    """The suite's text after the common header: the setting and the table."""
    lines = [
        f"- back-ends: {', '.join(backends)}; per-case time limit {time_limit:g} s",
        f"- baseline peak RSS of a process that only imports the stack: {base:.0f} MB",
        "- each case runs alone in a fresh process (`python -m benchmarks.suites.core --case …`)",
        "- value = certified upper bound (the returned factorization's norm); gap = upper/lower − 1,",
        "  both recomputed by `certificate.verify` (SVD / eigenvalue, no solver); eps = the tightest",
        "  back-end tolerance the tolerance continuation needed to reach gap ≤ 1e-6.",
        "",
        "| workload | norm | back-end | status | value | gap | eps | seconds | × fastest | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("status") == "ok":
            eps = f"{r['eps']:g}" if r.get("eps") is not None else "–"
            lines.append(f"| {r['workload']} | {r['norm']} | {r['backend']} | ok | {r['value']:.10f} | "
                         f"{r['gap']:.2e} | {eps} | {r['seconds']:.2f} | "
                         f"{r['ratio_to_fastest']:.1f} | {r['peak_rss_mb']:.0f} |")
        else:
            rss = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "–"
            lines.append(f"| {r['workload']} | {r['norm']} | {r['backend']} | {r['status']} | – | – | – | "
                         f"– | – | {rss} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--case":
        _case_main(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    else:
        sys.exit("usage: python -m benchmarks.suites.core --case SPEC NORM BACKEND TIME_LIMIT "
                 "(use `python -m benchmarks --suite core` for the whole benchmark)")
