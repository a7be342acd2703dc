"""``python -m benchmarks --suite big_release``: big releases at the cost of the data pass.
Writes reports/bench_big_release.md (+ .json).

    python -m benchmarks --suite big_release [--baseline DIR] [--attributes 100]
        [--records 1000000] [--address-space-gb 10] [--samples 4194304] [--skip-wide] [--seed 7]

Every case is a fresh process reaped with ``wait4`` (``harness.run_process``: wall and CPU
seconds, peak resident memory), run from a source tree with that tree first on
``PYTHONPATH``:

1. **exact noise**: ``discrete_gaussian`` at the σ² that Adult's ≤3-way plan samples
   (σ = 1.00052 on the grid 2⁻²³, ``lattice_sigma2``: σ_lattice ≈ 8.39·10⁶), ``--samples``
   draws from ``SecureRandom`` — samples per CPU second and the bytes ``os.urandom`` gave per
   sample (counted by wrapping ``os.urandom`` in the child);
2. **Adult ≤3-way** (../shared/data/adult: 48,842 records, 14 attributes, 21,043,262
   answers), ρ = 0.5: ``factorize plan`` then ``factorize run`` to Parquet, each timed;
   then a run in test mode (``--seed``, default 7) of the first tree's plan file with every phase of the pipeline
   timed — load, verify, labels, measure, release, write: CPU seconds and the peak resident
   set of each phase alone (that row's own peak RSS is the last phase's: resetting VmHWM
   resets what ``wait4`` reports) — and the SHA-256 of its answers' values
   (:func:`values_sha256`: every column's values and nulls and the metadata, whatever the
   Parquet encoding), which must be the same in every tree (a change of speed, memory or
   encoding releases the same answers), beside the SHA-256 of the file's bytes;
3. **wide 3-way**: all 3-way marginals over ``--attributes`` synthetic attributes of sizes
   ``2 + (7j mod 9)`` (public records from ``engines.synthetic``, ``--records`` of them),
   ρ = 0.5: ``plan``, then ``run`` under an address-space limit of ``--address-space-gb``
   (``RLIMIT_AS``, as ``ulimit -v``), where a failure (e.g. DuckDB out of memory) is
   reported, not raised.

With ``--baseline DIR`` (a source tree of an earlier commit, e.g.
``git archive <commit> | tar -x -C DIR``) every case runs from DIR too, in the same session
right after this tree's, so the before/after pairs share the machine and its load; each tree
plans with its own code.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

NAME = "big_release"
SUMMARY = ("big releases: exact-noise throughput, Adult ≤3-way and wide 3-way `run` "
           "(CPU, peak RSS, address-space limit), before/after with --baseline")

#: The Adult ≤3-way workload (the domain's sizes, attribute order of adult-domain.json).
ADULT_SPEC = "marginals_upto:85x9x100x16x7x15x6x5x2x100x100x99x42x2:3"
#: Adult ≤3-way's exact-noise parameters: σ of its plan and its lattice grid γ = 2⁻²³.
ADULT_SIGMA, ADULT_GRID = 1.00052, 2.0**-23

_NOISE = """
import json, os, resource, sys, time
from factorize.privacy.sampling import SecureRandom, discrete_gaussian, lattice_sigma2
got = [0]
real = os.urandom
def counted(n):
    got[0] += n
    return real(n)
os.urandom = counted
s2 = lattice_sigma2({sigma!r}, {grid!r})[0]
n = {n}
u0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
y = discrete_gaussian(s2, n, SecureRandom())
wall = time.perf_counter() - t0
u1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (u1.ru_utime - u0.ru_utime) + (u1.ru_stime - u0.ru_stime)
print(json.dumps({{"n": n, "sampler_cpu_s": cpu, "sampler_user_s": u1.ru_utime - u0.ru_utime,
                  "sampler_sys_s": u1.ru_stime - u0.ru_stime, "sampler_wall_s": wall,
                  "bytes_per_sample": got[0] / n, "variance_ratio": float(y.var()) / float(s2)}}))
"""

#: A ``run`` in test mode (``--seed``) with each pipeline phase timed: CPU seconds and the
#: peak resident set of the phase alone (VmHWM reset through /proc/self/clear_refs before it),
#: printed as one JSON line after the run's own output.
_PHASES = """
import json, resource, sys
try:
    from factorize.kinds.structured.kind import StructuredKind
except ImportError:  # a baseline tree from before the plan-kind packages
    from factorize.executor.kinds import StructuredKind
import factorize.executor.pipeline as pipeline
import factorize.executor.session as session
rows = []
def status(key):
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) / 1024 for l in fh if l.startswith(key))
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
def timed(owner, name, label):
    f = getattr(owner, name)
    def g(*a, **k):
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        c0, r0 = cpu(), status("VmRSS")
        try:
            return f(*a, **k)
        finally:
            rows.append({{"phase": label, "cpu_s": cpu() - c0, "rss_before_mib": r0,
                         "peak_mib": status("VmHWM"), "rss_after_mib": status("VmRSS")}})
    setattr(owner, name, g)
for name in ("load", "verify", "measure", "release"):
    timed(StructuredKind, name, name)
timed(pipeline, "_labels", "labels")
timed(session.ReleaseSession, "write", "write")
from factorize.cli.app import main
sys.argv = ["factorize", "run", *sys.argv[1:]]
code = main()
print(json.dumps({{"phases": rows, "cpu_s": cpu()}}))
sys.exit(code)
"""

_LIMITED = """
import resource, runpy, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv = ["factorize"] + sys.argv[2:]
runpy.run_module("factorize", run_name="__main__", alter_sys=True)
"""


def add_arguments(parser) -> None:
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="a source tree of an earlier commit: every case also runs from it")
    parser.add_argument("--samples", type=int, default=1 << 22, help="exact-noise draws (case 1)")
    parser.add_argument("--attributes", type=int, default=100, help="attributes of the wide case")
    parser.add_argument("--records", type=int, default=10**6, help="records of the wide case")
    parser.add_argument("--address-space-gb", type=float, default=10.0,
                        help="RLIMIT_AS of the wide case's run, in 10⁹ bytes (0: none)")
    parser.add_argument("--skip-wide", action="store_true", help="cases 1 and 2 only")
    parser.add_argument("--seed", type=int, default=7,
                        help="test-mode seed of the phase-timed Adult run (every tree: same bytes?)")


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _row(case: str, tree: str, phase: str, p: Any) -> dict:
    failed = p.returncode != 0
    tail = (p.stderr.strip().splitlines() or [""])[-1][:300] if failed else ""
    if failed and p.term_signal is not None:
        tail = f"killed by signal {p.term_signal}" + (f" ({tail})" if tail else "")
    return {"case": case, "tree": tree, "phase": phase, "wall_s": p.wall_s, "cpu_s": p.cpu_s,
            "user_s": p.usage.ru_utime, "sys_s": p.usage.ru_stime, "peak_rss_mib": p.peak_rss_mib,
            "ok": not failed, "returncode": p.returncode, "error": tail,
            "load": [p.load_before, p.load_after]}


def _factorize(harness, tree: Path, args: list[str], limit: int | None = None) -> Any:
    if limit:
        cmd = [sys.executable, "-c", _LIMITED, str(limit), *args]
    else:
        cmd = [sys.executable, "-m", "factorize", *args]
    return harness.process(cmd, env=_env(tree), cwd=tree)


def _noise(harness, tree: Path, label: str, n: int) -> dict:
    import json

    code = _NOISE.format(sigma=ADULT_SIGMA, grid=ADULT_GRID, n=n)
    p = harness.process([sys.executable, "-c", code], env=_env(tree), cwd=tree)
    row = _row("exact noise", label, f"{n} draws", p)
    if row["ok"]:
        row.update(json.loads(p.stdout.strip().splitlines()[-1]))
    return row


def _phases(harness, tree: Path, label: str, case: str, plan: Path, data: Path, out: Path,
            seed: int) -> dict:
    """One ``run --seed`` of ``plan`` with every phase timed (:data:`_PHASES`); the answers
    file's SHA-256 (the same seed must give the same bytes in every tree)."""
    import hashlib
    import json

    p = harness.process([sys.executable, "-c", _PHASES.format(), str(plan), "--data", str(data),
                         "--out", str(out), "--seed", str(seed)], env=_env(tree), cwd=tree)
    row = _row(case, label, f"run --seed {seed}, by phase", p)
    if row["ok"]:
        row.update(json.loads(p.stdout.strip().splitlines()[-1]))
        row["file_sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
        row["sha256"] = values_sha256(out)
    out.unlink(missing_ok=True)
    return row


def values_sha256(path: Path) -> str:
    """SHA-256 of a Parquet answers file's values, independent of its encoding, compression
    and row groups: the ``factorize`` metadata, then per column (in order) its name and the
    SHA-256 of its rows — validity, then numbers as their little-endian bytes, text (a
    dictionary column decoded) as each value's UTF-8 length and bytes."""
    import hashlib

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    names = f.schema_arrow.names
    # per column: validity, lengths (text) and values, each its own stream, so that the
    # digest does not depend on where the row groups end
    per = {n: [hashlib.sha256() for _ in range(3)] for n in names}
    for i in range(f.num_row_groups):
        group = f.read_row_group(i)
        for n in names:
            col = group.column(n).combine_chunks()
            if pa.types.is_dictionary(col.type):
                col = col.dictionary_decode()
            valid, lengths, values = per[n]
            valid.update(np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool).tobytes())
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                text = pc.fill_null(col, "").cast(pa.large_string())  # nulls: empty slots
                offsets = np.frombuffer(text.buffers()[1], dtype="<i8")[text.offset:text.offset + len(text) + 1]
                lengths.update(np.diff(offsets).tobytes())
                values.update(memoryview(text.buffers()[2])[offsets[0]:offsets[-1]])
            else:
                numbers = col.fill_null(0).to_numpy()
                values.update(numbers.astype(numbers.dtype.newbyteorder("<")).tobytes())
    out = hashlib.sha256(f.schema_arrow.metadata[b"factorize"])
    for n in names:
        out.update(n.encode("utf-8") + b"\0" + b"".join(h.digest() for h in per[n]))
    return out.hexdigest()


def _plan_and_run(harness, tree: Path, label: str, case: str, spec: str, domain: str, data: Path,
                  work: Path, limit: int | None = None, seed: int | None = None) -> list[dict]:
    """``plan`` then ``run`` (timed), and with ``seed`` the phase-timed test-mode run of one
    plan file for every tree — the first tree's, kept as ``seeded.plan`` — so that the answers
    files of the trees can be compared byte for byte (a plan of each tree's own would differ in
    its digest and provenance, which the answers' metadata carry)."""
    tag = "".join(c if c.isalnum() else "_" for c in f"{label}_{case}")  # no folders
    plan = work / f"{tag}.plan"
    rows = [_row(case, label, "plan", _factorize(harness, tree, [
        "plan", "--workload", spec, "--privacy", "rho=0.5", "--domain", domain, "--out", str(plan)]))]
    if not rows[0]["ok"]:
        return rows
    out = work / f"{tag}.parquet"
    rows.append(_row(case, label, "run", _factorize(harness, tree, [
        "run", str(plan), "--data", str(data), "--out", str(out)], limit)))
    if seed is not None:
        shared = work / "seeded.plan"
        if not shared.exists():
            shutil.copyfile(plan, shared)
        rows.append(_phases(harness, tree, label, case, shared, data, work / f"{tag}.seeded.parquet", seed))
    for f in (plan, out):
        f.unlink(missing_ok=True)
    return rows


def run(args, harness):
    from benchmarks.harness import ADULT_DIR, REPO_ROOT, Report
    from factorize.engines.synthetic import synthetic_records

    trees = [("this tree", REPO_ROOT)]
    if args.baseline:
        base = Path(args.baseline).resolve()
        if not (base / "factorize" / "__init__.py").exists():
            raise SystemExit(f"--baseline {base}: not a source tree of factorize")
        trees.append(("baseline", base))
    limit = int(args.address_space_gb * 1e9) or None
    rows: list[dict] = []
    sizes = [2 + (7 * j) % 9 for j in range(args.attributes)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label, tree in trees:
            rows.append(_noise(harness, tree, label, args.samples))
            print(rows[-1])
        adult_dom = str(ADULT_DIR / "adult-domain.json")
        for label, tree in trees:
            rows += _plan_and_run(harness, tree, label, "Adult ≤3-way", ADULT_SPEC, adult_dom,
                                  ADULT_DIR / "adult.csv", work, seed=args.seed)
            print(rows[-1])
        if not args.skip_wide:
            data = Path(synthetic_records(args.records, sizes, 100, work / "wide.parquet"))
            spec = "marginals:" + "x".join(map(str, sizes)) + ":3"
            domain = ",".join(f"x{j}={s}" for j, s in enumerate(sizes))
            case = f"3-way / {args.attributes} attrs"
            for label, tree in trees:
                rows += _plan_and_run(harness, tree, label, case, spec, domain, data, work, limit)
                print(rows[-1])
    report = {"samples": args.samples, "attributes": args.attributes, "records": args.records,
              "address_space_gb": args.address_space_gb, "baseline": args.baseline, "seed": args.seed,
              "rows": rows}
    return Report(TITLE, render(report), report)


TITLE = "Big releases: exact noise, Adult ≤3-way and wide 3-way `run`"


def render(report: dict) -> str:
    """The suite's text after the common header (machine, versions, load: the harness)."""
    lines = [
        "Regenerate: `python -m benchmarks --suite big_release --baseline DIR` (DIR: a source tree "
        "of the earlier commit, e.g. `git archive <commit> | tar -x -C DIR`). Every row is one fresh "
        "process (imports included); CPU = user + system seconds of the process and its threads, "
        "peak = its maximum resident set (`wait4`). Cases: exact discrete-Gaussian noise at "
        "Adult ≤3-way's σ_lattice ≈ 8.39·10⁶; Adult all ≤3-way marginals (21,043,262 answers, "
        "ρ = 0.5, Parquet answers); all 3-way marginals over "
        f"{report['attributes']} synthetic attributes (sizes 2 + (7j mod 9)) on "
        f"{report['records']:,} synthetic records, the run under RLIMIT_AS = "
        f"{report['address_space_gb']:g}·10⁹ bytes.",
        "",
        "| case | tree | phase | wall s | CPU s (user + sys) | peak RSS MiB | load (1 min) before → after | result |",
        "|---|---|---|---:|---:|---:|---|---|",
    ]
    for r in report["rows"]:
        cpu = f"{r['cpu_s']:.1f} ({r['user_s']:.1f} + {r['sys_s']:.1f})"
        result = "ok" if r["ok"] else f"failed: {r['error']}"
        if r["case"] == "exact noise" and r["ok"]:
            result = (f"sampler alone {r['sampler_cpu_s']:.2f} CPU s ({r['sampler_user_s']:.2f} + "
                      f"{r['sampler_sys_s']:.2f}): {r['n'] / r['sampler_cpu_s'] / 1e6:.2f}·10⁶ samples per CPU s, "
                      f"{r['bytes_per_sample']:.1f} random bytes per sample, "
                      f"variance/σ² = {r['variance_ratio']:.4f}")
        load = " → ".join(f"{x:.2f}" for x in r.get("load") or [] if x is not None) or "n/a"
        lines.append(f"| {r['case']} | {r['tree']} | {r['phase']} | {r['wall_s']:.1f} | {cpu} | "
                     f"{r['peak_rss_mib']:.0f} | {load} | {result} |")
    phased = [r for r in report["rows"] if r.get("phases")]
    if phased:
        lines += ["", f"Phases of the test-mode run (`--seed {report.get('seed')}`), each phase's CPU "
                  "seconds and the peak resident set reached during it (VmHWM reset before it; "
                  "MiB):", "",
                  "| case | tree | " + " | ".join(p["phase"] for p in phased[0]["phases"]) + " | total CPU s |",
                  "|---|---|" + "---:|" * (len(phased[0]["phases"]) + 1)]
        for r in phased:
            cells = " | ".join(f"{p['cpu_s']:.1f} s, {p['peak_mib']:.0f}" for p in r["phases"])
            lines.append(f"| {r['case']} | {r['tree']} | {cells} | {r['cpu_s']:.1f} |")
        digests = {r["sha256"] for r in phased}
        lines += ["", "Answers of the same seed (every column's values and the metadata, "
                  "`values_sha256`): " + (
            f"bit-for-bit identical in every tree (SHA-256 {phased[0]['sha256'][:16]}…)."
            if len(digests) == 1 else "DIFFER between trees: " + ", ".join(
                f"{r['tree']} {r['sha256'][:16]}…" for r in phased) + ".")]
        if any(r.get("file_sha256") for r in phased):
            lines.append("The files' own bytes (SHA-256; they differ where the Parquet encoding "
                         "does): " + ", ".join(f"{r['tree']} {r.get('file_sha256', 'n/a')[:16]}…"
                                                for r in phased) + ".")
    return "\n".join(lines) + "\n"
