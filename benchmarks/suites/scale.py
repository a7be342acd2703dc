"""``python -m benchmarks --suite scale``: the specialised solvers against the generic SDP.

Measured side by side in one run, both norms (γ_F, γ₂) for every case:

- the generic cvxpy SDP (``method="sdp"``, every available back-end: SCS, Clarabel, …),
- the specialised dual fixed-point solvers (``method="dual"``),
- the marginal algebra (``method="algebra"``) on marginal workloads, when
  ``factorize.planner.marginal_optimum`` can be imported (otherwise "not available"),

on prefix n = 64 … 2048, all-range n = 16 … 128, a random ±1 512×512 matrix, and all
2-way marginals over 20 binary attributes and over the 14 Adult attributes.

Each run is one fresh subprocess (``python -m benchmarks.suites.scale --case …``, run
and reaped by ``harness.run_process``) with a time limit (passed to the solver, and a hard wall limit ``limit + grace`` enforced by
the parent) and an address-space cap (``RLIMIT_AS``, set in the child before anything
is imported) so that an out-of-memory run fails alone instead of taking the machine
down. Peak RSS comes from the kernel's accounting of the reaped child (``wait4``), so it
is known even for a run that was killed.

SDP runs are *skipped*, with the reason printed, where ``reports/bench_core.md`` shows
them failing (see ``sdp_skip_reason``); the dual solver is skipped where its dense N×N
Gram matrix cannot be formed. The report ends with least-squares fits of
log(seconds) against log(N) and the time targets (``TARGETS``), PASS/FAIL computed from the
rows. The module's pure pieces (skip rules, fits, targets, rendering) are unit-tested
in ``tests/test_bench_scale.py``.
"""

from __future__ import annotations

import json
import math
import resource
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness import ADULT_DIR, REPO_ROOT, factorize_env, json_safe, run_process

NAME = "scale"
SUMMARY = ("the specialised solvers (dual, marginal algebra) against the generic SDP: prefix up to "
           "2048, all-range up to 128, random 512×512, 2-way marginals (20 binary, Adult)")

ADULT_DOMAIN = ADULT_DIR / "adult-domain.json"

DEFAULT_TIME_LIMIT = 300.0
DEFAULT_MEMORY_CAP_GIB = 16.0
#: Seconds the parent waits past the solver's own time limit before killing the child
#: (the limit is checked between iterations / solves, and cvxpy's compilation is not timed).
WALL_GRACE = 60.0
GAP_TOL = 1e-6
NORMS = ("gamma_f", "gamma_2")
NORM_NAMES = {"gamma_f": "γ_F", "gamma_2": "γ₂"}
SPECIALISED = ("dual", "algebra")
RANDOM_SEED = 1

# Limits read off reports/bench_core.md (2 cores, 24 GiB; per-case limit 240 s).
CLARABEL_MAX_N = 64          # prefix:128 was OOM-killed after 54 s; N = 64 took 113 s, 3.5 GB
QUICK_INTERIOR_MAX_N = 16    # --quick: Clarabel prefix:64 alone would take ~2 minutes
SCS_MAX_N = 256              # γ₂ prefix:128 took 55 s; each iteration is O((N + r)³)
SCS_ALLRANGE_G2_MAX_N = 64   # γ₂ allrange:32 took 73 s, allrange:64 hit the time limit
SDP_MAX_MARGINAL_N = 10**6   # the SDP needs W dense and an (N + r)-square PSD cone
DUAL_MAX_N = 16384           # the dual solver's dense N×N Gram: 2 GiB at N = 16384

SIGNAL_NAMES = {signal.SIGKILL: "SIGKILL", signal.SIGABRT: "SIGABRT", signal.SIGSEGV: "SIGSEGV",
                signal.SIGBUS: "SIGBUS", signal.SIGTERM: "SIGTERM"}
_OOM_MARKERS = ("MemoryError", "memory allocation of", "bad_alloc", "Cannot allocate memory",
                "out of memory", "Unable to allocate")


# ---------------------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One workload of the suite: its spec, its family (for skip rules and fits), a label."""

    spec: str
    family: str  # "prefix", "allrange", "random", "marginals"
    label: str
    unavailable: str | None = None  # why the case cannot be built (e.g. a missing domain file)


def binary_marginals_spec(d: int, way: int = 2) -> str:
    """All ``way``-way marginals over ``d`` binary attributes."""
    return f"marginals:{'x'.join(['2'] * d)}:{way}"


def adult_marginals_spec(domain_file: Path = ADULT_DOMAIN, way: int = 2) -> str:
    """All ``way``-way marginals over the Adult attributes, sizes in the JSON's key order."""
    sizes = json.loads(Path(domain_file).read_text())
    return f"marginals:{'x'.join(str(int(v)) for v in sizes.values())}:{way}"


MARGINALS_20 = binary_marginals_spec(20)


def full_cases(domain_file: Path = ADULT_DOMAIN) -> list[Case]:
    cases = [Case(f"prefix:{n}", "prefix", f"prefix:{n}") for n in (64, 128, 256, 512, 1024, 2048)]
    cases += [Case(f"allrange:{n}", "allrange", f"allrange:{n}") for n in (16, 32, 64, 128)]
    cases.append(Case(f"random:512x512:seed={RANDOM_SEED}", "random", "random ±1 512×512"))
    cases.append(Case(MARGINALS_20, "marginals", "2-way marginals, 20 binary attrs"))
    try:
        cases.append(Case(adult_marginals_spec(domain_file), "marginals",
                          "2-way marginals, 14 Adult attrs"))
    except (OSError, ValueError) as exc:  # reported as a row, not a crash
        cases.append(Case("marginals:adult", "marginals", "2-way marginals, 14 Adult attrs",
                          unavailable=f"not available: cannot read {domain_file} ({type(exc).__name__}: {exc})"))
    return cases


def quick_cases() -> list[Case]:
    return [Case("prefix:64", "prefix", "prefix:64"), Case("allrange:16", "allrange", "allrange:16"),
            Case(binary_marginals_spec(6), "marginals", "2-way marginals, 6 binary attrs")]


def methods_for(case: Case, sdp_backends: tuple[str, ...]) -> list[tuple[str, str]]:
    """(method, back-end) pairs measured on ``case``: the SDP per back-end, then the specialised."""
    out = [("sdp", b) for b in sdp_backends] + [("dual", "numpy")]
    if case.family == "marginals":
        out.append(("algebra", "numpy"))
    return out


# ---------------------------------------------------------------------------------------
# skip rules (pure)
# ---------------------------------------------------------------------------------------
def sdp_skip_reason(family: str, N: int, norm: str, backend: str, quick: bool = False) -> str | None:
    """Why the generic SDP is not attempted on this case, or None to attempt it.

    The limits are where ``reports/bench_core.md`` shows the back-end failing.
    """
    if family == "marginals" and N >= SDP_MAX_MARGINAL_N:
        return (f"skipped: cannot form the matrix (N = {N:,} ≥ 10⁶ cells; the SDP needs W dense "
                f"and an (N + r)-square PSD cone)")
    if backend in ("clarabel", "mosek"):
        cap = QUICK_INTERIOR_MAX_N if quick else CLARABEL_MAX_N
        if cap < N:
            name = {"clarabel": "Clarabel", "mosek": "MOSEK"}[backend]
            if quick:
                return f"skipped: --quick runs {name} only up to N = {cap}"
            return (f"skipped: {name} beyond N = {cap} (bench_core: Clarabel OOM-killed at "
                    f"prefix:128; N = 64 took 113 s and 3.5 GB)")
        return None
    if family == "allrange" and norm == "gamma_2" and N > SCS_ALLRANGE_G2_MAX_N:
        return (f"skipped: SCS γ₂ on all-range beyond n = {SCS_ALLRANGE_G2_MAX_N} "
                "(bench_core: allrange:64 hit the time limit)")
    if N > SCS_MAX_N:
        return (f"skipped: SCS beyond N = {SCS_MAX_N} (bench_core: γ₂ prefix:128 took 55 s; "
                "O((N + r)³) per iteration)")
    return None


def dual_skip_reason(N: int, k: int) -> str | None:
    """Why the dense dual solver is not attempted (it needs W dense and its N×N Gram)."""
    from workloads import DEFAULT_MAX_DENSE_ENTRIES

    if N > DUAL_MAX_N or k * N > DEFAULT_MAX_DENSE_ENTRIES:
        return (f"skipped: cannot form the matrix (the dual solver works on W dense and its "
                f"N×N Gram: {_bytes(8.0 * N * N)} at N = {N:,})")
    return None


def skip_reason(case: Case, N: int, k: int, norm: str, method: str, backend: str,
                quick: bool = False) -> str | None:
    if method == "sdp":
        return sdp_skip_reason(case.family, N, norm, backend, quick)
    if method == "dual":
        return dual_skip_reason(N, k)
    return None


def _bytes(b: float) -> str:
    if b >= 2**70:
        return f"{b:.2g} bytes"
    for unit, size in (("EB", 2**60), ("PB", 2**50), ("TB", 2**40), ("GB", 2**30), ("MB", 2**20)):
        if b >= size:
            return f"{b / size:.3g} {unit}"
    return f"{b / 1024:.3g} KB"


# ---------------------------------------------------------------------------------------
# one run in a fresh process
# ---------------------------------------------------------------------------------------
def classify_termination(*, exit_code: int | None, term_signal: int | None, killed_at_deadline: bool,
                         stderr: str, wall: float, time_limit: float, grace: float,
                         memory_cap_gib: float) -> dict:
    """Status of a child that printed no result line (pure; see ``run_case``)."""
    tail = (stderr.strip().splitlines() or ["no output"])[-1][:200]
    if killed_at_deadline:
        return {"status": "time limit",
                "detail": f"killed at the wall limit ({time_limit:g} s + {grace:g} s grace) after {wall:.0f} s"}
    oom_text = any(m in stderr for m in _OOM_MARKERS)
    if term_signal is not None:
        name = SIGNAL_NAMES.get(term_signal, f"signal {term_signal}")
        if term_signal == signal.SIGKILL:
            return {"status": "out of memory",
                    "detail": f"{name} after {wall:.0f} s (most likely the kernel's out-of-memory killer)"}
        if oom_text or term_signal in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS):
            return {"status": "out of memory" if oom_text else "failed",
                    "detail": f"{name} after {wall:.0f} s (an allocation past the {memory_cap_gib:g} GiB "
                              f"address-space cap aborts native code){': ' + tail if oom_text else ''}"}
        return {"status": "failed", "detail": f"{name} after {wall:.0f} s: {tail}"}
    if oom_text:
        return {"status": "out of memory", "detail": f"exit {exit_code} under the {memory_cap_gib:g} GiB cap: {tail}"}
    return {"status": "failed", "detail": f"exit {exit_code} without a result: {tail}"}


def run_case(spec: str, norm: str, method: str, backend: str, *, time_limit: float = DEFAULT_TIME_LIMIT,
             memory_cap_gib: float = DEFAULT_MEMORY_CAP_GIB, grace: float = WALL_GRACE) -> dict:
    """One (workload, norm, method) run in a fresh subprocess: status, numbers, wall, peak RSS."""
    cap = int(memory_cap_gib * 2**30) if memory_cap_gib > 0 else 0
    cmd = [sys.executable, "-m", "benchmarks.suites.scale", "--case", spec, norm, method, backend,
           repr(float(time_limit)), str(cap)]
    p = run_process(cmd, env=factorize_env(), cwd=REPO_ROOT, deadline=time_limit + grace)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if lines and not p.killed:
        result = json.loads(lines[-1])
    else:
        result = classify_termination(
            exit_code=p.exit_code, term_signal=p.term_signal, killed_at_deadline=p.killed, stderr=p.stderr,
            wall=p.wall_s, time_limit=time_limit, grace=grace, memory_cap_gib=memory_cap_gib)
    result["wall"] = p.wall_s
    result["peak_rss_mb"] = p.usage.ru_maxrss / 1024  # Linux: KiB
    result["load_before"], result["load_after"] = p.load_before, p.load_after
    return result


def _case_main(spec: str, norm: str, method: str, backend: str, time_limit: float, cap: int) -> None:
    """Child process: cap the address space, run one case, print one JSON line."""
    if cap > 0:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        out = _solve_case(spec, norm, method, backend, time_limit)
    except MemoryError as exc:
        out = {"status": "out of memory",
               "detail": f"MemoryError under the {cap / 2**30:g} GiB address-space cap {str(exc)[:120]}".strip()}
    except Exception as exc:  # noqa: BLE001 - the benchmark reports every failure as a row
        out = {"status": _status_of(exc), "detail": f"{type(exc).__name__}: {str(exc)[:300]}"}
    print(json.dumps(json_safe(out), allow_nan=False), flush=True)


def _status_of(exc: Exception) -> str:
    from solvers import CertificateGapError, SolverTimeLimitError

    if isinstance(exc, SolverTimeLimitError):
        return "time limit"
    if isinstance(exc, CertificateGapError):
        return "gap not met"
    return "failed"


def _solve_case(spec: str, norm: str, method: str, backend: str, time_limit: float) -> dict:
    from solvers import SolverOptions
    from workloads import parse_workload

    W = parse_workload(spec)
    if method == "algebra":
        return _solve_algebra(W, norm, time_limit)
    from factorize.planner.routes import solve

    opts = SolverOptions(backend=backend if method == "sdp" else "scs", time_limit=time_limit)
    r = solve(W, norm, method=method, options=opts, gap_tol=GAP_TOL)
    eps = [s.eps for s in r.solves if getattr(s, "eps", None) is not None]
    iters = [s.iterations for s in r.solves if s.iterations is not None]
    used = "+".join(sorted({getattr(s, "method", method) for s in r.solves}))
    return {"status": "ok", "value": r.value, "lower": r.lower, "gap": r.gap, "seconds": r.seconds,
            "eps": min(eps) if eps else None, "iterations": sum(iters) if iters else None,
            "route": f"planner.solve(method={method!r}) → {used}"}


def _solve_algebra(W, norm: str, time_limit: float) -> dict:
    """The marginal algebra, through the planner (``method="algebra"``)."""
    from factorize.planner.routes import solve
    from solvers import SolverOptions

    r = solve(W, norm, method="algebra", options=SolverOptions(time_limit=time_limit), gap_tol=GAP_TOL)
    return {"status": "ok", "value": r.value, "lower": r.lower, "gap": r.gap, "seconds": r.seconds,
            "eps": None, "iterations": None, "route": "planner.solve(method='algebra')"}


def baseline_rss_mb() -> float:
    """Peak RSS of a process that only imports the numerical stack (the floor of every row)."""
    code = "import factorize.planner.routes, cvxpy, scs, clarabel"
    p = run_process([sys.executable, "-c", code], env=factorize_env(), cwd=REPO_ROOT, deadline=120)
    return p.usage.ru_maxrss / 1024


# ---------------------------------------------------------------------------------------
# the suite
# ---------------------------------------------------------------------------------------
def plan_runs(cases: list[Case], sdp_backends: tuple[str, ...], quick: bool = False) -> list[dict]:
    """Every row of the suite, with ``skip`` set where it is not attempted (no solving)."""
    from workloads import parse_workload

    rows = []
    for case in cases:
        k = N = None
        why = case.unavailable
        if why is None:
            try:
                k, N = (int(d) for d in parse_workload(case.spec).shape)
            except Exception as exc:  # noqa: BLE001 - reported as a row, not a crash
                why = f"not available: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        for norm in NORMS:
            for method, backend in methods_for(case, sdp_backends):
                row = {"workload": case.label, "spec": case.spec, "family": case.family, "N": N, "k": k,
                       "norm": norm, "method": method, "backend": backend}
                if N is None:
                    row["skip"] = why
                else:
                    reason = skip_reason(case, N, k, norm, method, backend, quick)
                    if reason:
                        row["skip"] = reason
                rows.append(row)
    return rows


def add_arguments(parser) -> None:
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--solvers", default=None,
                        help="comma-separated SDP back-ends (default: all available)")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="per-case limit in seconds")
    parser.add_argument("--memory-cap", type=float, default=DEFAULT_MEMORY_CAP_GIB, metavar="GIB",
                        help="address-space cap (RLIMIT_AS) of each case's process, GiB")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the runs and skip reasons, solve nothing, write nothing")


def run(args, harness):
    solvers = tuple(s.strip() for s in args.solvers.split(",")) if args.solvers else None
    return run_scale_benchmark(harness, quick=args.quick, solvers=solvers, time_limit=args.time_limit,
                               memory_cap_gib=args.memory_cap, dry_run=args.dry_run)


def run_scale_benchmark(harness=None, quick: bool = False, solvers: tuple[str, ...] | None = None,
                        time_limit: float = DEFAULT_TIME_LIMIT, memory_cap_gib: float = DEFAULT_MEMORY_CAP_GIB,
                        dry_run: bool = False):
    """Run the suite; its report (None for a dry run, which prints the planned runs only)."""
    from benchmarks.harness import Report
    from solvers import available_backends

    backends = tuple(solvers or available_backends())
    cases = quick_cases() if quick else full_cases()
    planned = plan_runs(cases, backends, quick)
    if dry_run:
        attempted = [r for r in planned if "skip" not in r]
        for r in planned:
            print(f"{r['workload']:34s} {r['norm']:8s} {_method_label(r):14s} {r.get('skip', 'run')}")
        print(f"{len(attempted)} runs attempted, {len(planned) - len(attempted)} skipped; worst case "
              f"{len(attempted) * (time_limit + WALL_GRACE) / 3600:.1f} h at {time_limit:g} s + "
              f"{WALL_GRACE:g} s grace each")
        return None

    rows = []
    for r in planned:
        if "skip" in r:
            r = {**{k: v for k, v in r.items() if k != "skip"},
                 "status": "skipped" if r["skip"].startswith("skipped") else "not available",
                 "detail": r["skip"].split(": ", 1)[1]}
        else:
            r = {**r, **run_case(r["spec"], r["norm"], r["method"], r["backend"], time_limit=time_limit,
                                 memory_cap_gib=memory_cap_gib)}
        rows.append(r)
        print(json.dumps(json_safe(r), allow_nan=False), flush=True)
    add_sdp_ratios(rows)
    report = {
        "meta": {
            "time_limit_s": time_limit, "wall_grace_s": WALL_GRACE, "memory_cap_gib": memory_cap_gib,
            "gap_tol": GAP_TOL, "sdp_backends": list(backends), "quick": quick,
            "baseline_rss_mb": baseline_rss_mb(),
            "specs": {c.label: c.spec for c in cases},
        },
        "rows": rows,
        "fits": scaling_fits(rows),
        "targets": evaluate_targets(rows),
        "violations": sdp_violations(rows),
    }
    return Report(TITLE, render_markdown(report), report)


# ---------------------------------------------------------------------------------------
# analysis (pure)
# ---------------------------------------------------------------------------------------
def _ok(r: dict) -> bool:
    return r.get("status") == "ok" and isinstance(r.get("seconds"), (int, float))


def add_sdp_ratios(rows: list[dict]) -> None:
    """``sdp_ratio``: seconds ÷ the fastest finished generic SDP on the same (workload, norm)."""
    from benchmarks.harness import add_ratios

    add_ratios(rows, value="seconds", group=lambda r: (r["spec"], r["norm"]),
               baseline=lambda r: r["method"] == "sdp" and _ok(r), name="sdp_ratio", where=_ok)


def _best_sdp(rows: list[dict]) -> dict[tuple, tuple[float, str]]:
    best: dict[tuple, tuple[float, str]] = {}
    for r in rows:
        if r["method"] == "sdp" and _ok(r):
            key = (r["spec"], r["norm"])
            if key not in best or r["seconds"] < best[key][0]:
                best[key] = (r["seconds"], r["backend"])
    return best


def sdp_violations(rows: list[dict]) -> list[str]:
    """Cases where every specialised route (dual, algebra) that finished is slower
    than the fastest generic SDP on the same case (both finished)."""
    best = _best_sdp(rows)
    mine: dict[tuple, dict] = {}
    for r in rows:
        key = (r["spec"], r["norm"])
        if r["method"] in SPECIALISED and _ok(r) and (key not in mine or r["seconds"] < mine[key]["seconds"]):
            mine[key] = r
    out = []
    for key, r in mine.items():
        if key in best and r["seconds"] > best[key][0]:
            out.append(f"{r['workload']} {NORM_NAMES.get(r['norm'], r['norm'])}: {r['method']} "
                       f"{r['seconds']:.3g} s > SDP ({best[key][1]}) {best[key][0]:.3g} s")
    return out


@dataclass(frozen=True)
class Target:
    label: str
    spec: str
    norm: str
    max_seconds: float


TARGETS = (
    Target("γ_F prefix:1024 ≤ 12 s", "prefix:1024", "gamma_f", 12.0),
    Target("γ_F prefix:2048 ≤ 120 s", "prefix:2048", "gamma_f", 120.0),
    Target("γ₂ prefix:1024 ≤ 60 s", "prefix:1024", "gamma_2", 60.0),
    Target("γ_F allrange:128 ≤ 30 s", "allrange:128", "gamma_f", 30.0),
    Target("γ_F 2-way marginals, 20 binary attrs ≤ 60 s", MARGINALS_20, "gamma_f", 60.0),
    Target("γ₂ 2-way marginals, 20 binary attrs ≤ 60 s", MARGINALS_20, "gamma_2", 60.0),
)


def evaluate_targets(rows: list[dict], targets=TARGETS, gap_tol: float = GAP_TOL) -> list[dict]:
    """The time targets against the fastest specialised run with gap ≤ ``gap_tol``.

    PASS: that run finished within the target; FAIL: the case ran but no specialised run
    met both the time and the gap (``why`` says what was measured); N/A: not in this run.
    The last entry is "never slower than the generic SDP where both finish".
    """
    out = []
    for t in targets:
        mine = [r for r in rows if r["spec"] == t.spec and r["norm"] == t.norm and r["method"] in SPECIALISED]
        if not mine:
            out.append({"target": t.label, "result": "N/A", "why": "case not in this run"})
            continue
        good = [r for r in mine if _ok(r) and isinstance(r.get("gap"), (int, float)) and r["gap"] <= gap_tol]
        if not good:
            why = "; ".join(f"{r['method']}: {r.get('status')}" + (f" gap {r['gap']:.2g}" if _ok(r) else "")
                            for r in mine)
            out.append({"target": t.label, "result": "FAIL", "why": why})
            continue
        best = min(good, key=lambda r: r["seconds"])
        passed = best["seconds"] <= t.max_seconds
        out.append({"target": t.label, "result": "PASS" if passed else "FAIL",
                    "why": f"{best['method']} {best['seconds']:.3g} s, gap {best['gap']:.2g}",
                    "seconds": best["seconds"], "gap": best["gap"]})
    bad = sdp_violations(rows)
    compared = any(r["method"] in SPECIALISED and "sdp_ratio" in r for r in rows)
    out.append({"target": "never slower than the generic SDP where both finish",
                "result": "FAIL" if bad else ("PASS" if compared else "N/A"),
                "why": "; ".join(bad) if bad else
                ("no violation" if compared else "no case where both finished")})
    return out


def fit_exponent(points: list[tuple[float, float]]) -> dict | None:
    """Least-squares slope b of log(seconds) = a + b·log(N); None with < 2 distinct N."""
    pts = [(float(n), float(s)) for n, s in points if n > 0 and s > 0]
    if len({n for n, _ in pts}) < 2:
        return None
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(s) for _, s in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    resid = [y - (a + b * x) for x, y in zip(xs, ys, strict=True)]
    return {"exponent": b, "log_intercept": a, "points": len(pts),
            "rms_log_residual": math.sqrt(sum(e * e for e in resid) / len(resid)),
            "N": [n for n, _ in pts], "seconds": [s for _, s in pts]}


_DUAL_F_COST = ("one N×N eigendecomposition per iteration, O(N³), independent of k "
                "(the Gram WᵀW is formed once, O(kN²))")
_DUAL_2_COST = "O(kN² + N³) per iteration: prefix k = N → O(N³); all-range k = N(N+1)/2 → O(N⁴)"
_SCS_COST = ("one (N + r)-square eigendecomposition per iteration, O((N + r)³), "
             "times an iteration count that grows with N")

#: (per-iteration cost, its exponent in N; None: depends on k(N)) by (solver, norm).
COST_MODEL = {
    ("dual", "gamma_f"): (_DUAL_F_COST, 3),
    ("dual", "gamma_2"): (_DUAL_2_COST, None),
    ("scs", "gamma_f"): (_SCS_COST, 3),
    ("scs", "gamma_2"): (_SCS_COST, 3),
}

#: (solver, family, norm, smallest N, fewest points) of each fit.
FITS = ([("dual", "prefix", n, 256, 2) for n in NORMS] + [("dual", "allrange", n, 1, 2) for n in NORMS]
        + [("scs", fam, n, 1, 3) for fam in ("prefix", "allrange") for n in NORMS])


def scaling_fits(rows: list[dict]) -> list[dict]:
    """Time-growth exponents: dual on prefix N ≥ 256 and all-range, SCS where ≥ 3 points finished."""
    out = []
    for solver, family, norm, n_min, min_points in FITS:
        pts = [(r["N"], r["seconds"]) for r in rows
               if r["family"] == family and r["norm"] == norm and _ok(r) and r["N"] >= n_min
               and (r["method"] == solver or (r["method"] == "sdp" and r["backend"] == solver))]
        model, expected = COST_MODEL[(solver, norm)]
        if solver == "dual" and norm == "gamma_2":
            expected = 4 if family == "allrange" else 3
        fit = fit_exponent(pts) if len(pts) >= min_points else None
        out.append({"solver": solver, "family": family, "norm": norm, "cost_model": model,
                    "model_exponent": expected, "points": len(pts),
                    **({"exponent": fit["exponent"], "rms_log_residual": fit["rms_log_residual"],
                        "N": fit["N"]} if fit else {"exponent": None,
                                                    "why": f"{len(pts)} finished point(s), need {min_points}"})})
    return out


# ---------------------------------------------------------------------------------------
# rendering (pure)
# ---------------------------------------------------------------------------------------
def _method_label(r: dict) -> str:
    return f"sdp ({r['backend']})" if r["method"] == "sdp" else r["method"]


def _fmt_n(N) -> str:
    if N is None:
        return "–"
    if N >= 10**6:
        return f"2^{N.bit_length() - 1}" if N & (N - 1) == 0 else f"{N:.3g}"
    return str(N)


def _num(x, fmt: str) -> str:
    return format(x, fmt) if isinstance(x, (int, float)) else "–"


def _secs(x) -> str:
    """Three significant digits below 100 s (the fast runs are milliseconds), whole seconds above."""
    if not isinstance(x, (int, float)):
        return "–"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def _row_status(r: dict) -> str:
    s = r.get("status", "?")
    if s == "ok":
        return "ok"
    detail = str(r.get("detail", "")).replace("|", "/").replace("\n", " ")
    return f"{s}: {detail}" if detail else s


def _notes(r: dict) -> str:
    bits = []
    if r.get("eps") is not None:
        bits.append(f"eps {r['eps']:g}")
    if r.get("iterations") is not None:
        bits.append(f"{r['iterations']} it")
    if r["method"] == "algebra" and r.get("route"):
        bits.append(str(r["route"]))
    return ", ".join(bits).replace("|", "/")


TITLE = "Planner scaling benchmark: specialised solvers vs the generic SDP"


def render_markdown(report: dict) -> str:
    """The suite's text after the common header (command, machine, versions, load: the harness)."""
    m = report["meta"]
    lines = [
        (f"- per-case limits: solver time limit {m['time_limit_s']:g} s (passed to the solver; the "
         f"process is killed at {m['time_limit_s']:g} + {m['wall_grace_s']:g} s), address-space cap "
         f"(RLIMIT_AS) {m['memory_cap_gib']:g} GiB, certified gap ≤ {m['gap_tol']:g}"),
        ("- each case runs alone in a fresh process (`python -m benchmarks.suites.scale --case …`), one "
         "after another; peak RSS is the reaped child's `ru_maxrss` (known even when it was killed)"
         + (f"; baseline of a process that only imports the stack: {m['baseline_rss_mb']:.0f} MB"
            if isinstance(m.get("baseline_rss_mb"), (int, float)) else "")),
        ("- value = certified upper bound (the returned plan's norm); gap = upper/lower − 1, as "
         "re-checked by the certificate code; seconds = the solve inside the process (imports and "
         "workload parsing excluded); × SDP = seconds ÷ the fastest generic SDP back-end that "
         "finished on the same workload and norm"),
        "",
        "Workloads:",
        "",
    ]
    lines += [f"- {label}: `{spec}`" for label, spec in m.get("specs", {}).items()]
    lines += [
        "",
        ("Skip rules (from `reports/bench_core.md`, 2 cores / 24 GiB, 240 s limit): Clarabel beyond "
         f"N = {CLARABEL_MAX_N} (OOM-killed at prefix:128; N = 64 took 113 s, 3.5 GB); SCS beyond "
         f"N = {SCS_MAX_N} (γ₂ prefix:128 took 55 s) and for all-range γ₂ beyond n = "
         f"{SCS_ALLRANGE_G2_MAX_N} (time limit at allrange:64); no SDP on marginal workloads with "
         "N ≥ 10⁶ cells — the matrix cannot be formed (2-way marginals over 20 binary attributes "
         "are 760 × 2²⁰, 8·10⁸ entries; an SDP cone of side 2²⁰ + r is out of reach). The dense "
         f"dual solver is skipped where W (more than 5·10⁷ entries) or its N×N Gram (N > {DUAL_MAX_N}) "
         "cannot be formed."),
        "",
        "## Figure targets",
        "",
        f"Each timed against the fastest specialised run (dual or algebra) with gap ≤ {m['gap_tol']:g}.",
        "",
        "| target | result | measured |",
        "|---|---|---|",
    ]
    lines += [f"| {t['target']} | **{t['result']}** | {t['why'].replace('|', '/')} |"
              for t in report["targets"]]
    lines += [
        "",
        "## Results",
        "",
        "| workload | N | norm | method | status | value | gap | seconds | × SDP | peak RSS MB | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        ok = r.get("status") == "ok"
        lines.append(
            f"| {r['workload']} | {_fmt_n(r.get('N'))} | {NORM_NAMES.get(r['norm'], r['norm'])} | "
            f"{_method_label(r)} | {_row_status(r)} | {_num(r.get('value'), '.10f') if ok else '–'} | "
            f"{_num(r.get('gap'), '.2e') if ok else '–'} | {_secs(r.get('seconds')) if ok else '–'} | "
            f"{_num(r.get('sdp_ratio'), '.2g') if ok else '–'} | {_num(r.get('peak_rss_mb'), '.0f')} | "
            f"{_notes(r)} |")
    lines += [
        "",
        "## How the time grows",
        "",
        ("Least-squares slope b of log(seconds) against log(N) (time ∝ N^b), over the finished "
         "runs (dual: prefix N ≥ 256 and all-range; SCS: where ≥ 3 points finished). The model "
         "exponent is the per-iteration cost alone, so b above it means the iteration count grows "
         "with N, below it that fixed overheads still dominate. Per-iteration cost:"),
        "",
        f"- dual γ_F: {COST_MODEL[('dual', 'gamma_f')][0]};",
        f"- dual γ₂: {COST_MODEL[('dual', 'gamma_2')][0]};",
        f"- SCS: {COST_MODEL[('scs', 'gamma_f')][0]}.",
        "",
        "| solver | workload | norm | N | points | exponent b | model | rms log residual |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in report["fits"]:
        ns = f.get("N") or []
        span = f"{int(min(ns))}…{int(max(ns))}" if ns else "–"
        b = f"{f['exponent']:.2f}" if f.get("exponent") is not None else f"– ({f.get('why', '')})"
        model = f"N^{f['model_exponent']}" if f.get("model_exponent") else "–"
        resid = _num(f.get("rms_log_residual"), ".2f")
        lines.append(f"| {f['solver']} | {f['family']} | {NORM_NAMES.get(f['norm'], f['norm'])} | {span} | "
                     f"{f['points']} | {b} | {model} | {resid} |")
    lines += ["", "## Slower than the generic SDP", ""]
    none = ("- none: every specialised run that finished was at least as fast as the fastest "
            "finished SDP on its case")
    lines += [f"- {v}" for v in report["violations"]] or [none]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "--case":
        _case_main(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], float(sys.argv[6]), int(sys.argv[7]))
    else:
        sys.exit("usage: python -m benchmarks.suites.scale --case SPEC NORM METHOD BACKEND TIME_LIMIT "
                 "CAP_BYTES (use `python -m benchmarks --suite scale` for the whole benchmark)")
