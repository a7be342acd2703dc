"""One way to measure and report a benchmark suite (``python -m benchmarks --suite NAME``).

Every suite measures with these pieces and writes through :meth:`Harness.write`, so every
report in ``reports/`` states the same things the same way:

- **the run**: the exact command (``python -m benchmarks --suite NAME …``), when it started
  and how long it took, the BLAS / OpenMP pool sizes it ran with (``factorize.threads``: the
  same policy as the ``factorize`` command, 1 unless ``--threads``);
- **the machine**: CPU model, logical and usable cores, RAM, OS
  (``factorize.io.provenance.machine_info``);
- **the versions**: factorize, Python, numpy, scipy, cvxpy, scs, clarabel, duckdb, pyarrow —
  and pyspark and Java where the suite says it used them (:meth:`Harness.uses`);
- **the load**: the load average (1, 5, 15 min) at the start and the end of the run, and
  the 1-minute load before and after every case measured here (:class:`Timing`,
  :class:`Process`);
- **times**: in this process (:func:`measure`, :func:`interleaved`: wall seconds of every
  round on pytest-benchmark's timer, summarised by pytest-benchmark's ``Stats`` — min as
  *best*, median, mean, standard deviation, quartiles, outliers —, and the CPU seconds of the
  process) or in a fresh process (:func:`run_process`: wall seconds, CPU seconds and peak
  resident memory of the reaped child from ``wait4``, a hard wall limit);
- **ratios** against a baseline measured in the same run (:func:`add_ratios`).

What is kept by hand is what pytest-benchmark's runner does not do: a fresh child process
reaped with ``wait4`` (its peak RSS and CPU time, known even when it is killed at its wall
limit), and the round loop of :func:`measure` / :func:`interleaved`, which checks each
result outside the timed call, runs several cases in turn (ABAB…, so a change of the
machine's load hits every case alike) and records the CPU seconds and the load around
every round.

The report is ``reports/bench_<suite>.md`` (a suite may name another: ``REPORT``) with a JSON
twin next to it: the suite's title, the common header (the list above), then the suite's own
text and tables; the JSON is the suite's payload with the header under the key ``"bench"``.
A suite that rewrites one section of an existing report reads the rest back with
:func:`previous_body`.

A suite is a module of ``benchmarks.suites`` with ``NAME``, ``SUMMARY`` (one line),
``add_arguments(parser)`` (its own options; ``--out`` is added for every suite) and
``run(args, harness) -> Report | None`` (None: nothing to write, e.g. a dry run). The module
imports only the standard library (and the error classes, which import nothing else) at the
top, so ``python -m benchmarks --list`` stays cheap.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import math
import os
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_benchmark.stats import Stats
from pytest_benchmark.timers import default_timer

from benchmarks.errors import BenchError
from factorize.errors import InternalError

#: The repository checkout the benchmarks run from (its subprocesses run there).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: The shared Adult data (``adult.csv``, ``adult-domain.json``): ``../shared/data/adult`` beside
#: the checkout (never copied into the repository), or ``FACTORIZE_ADULT_DIR`` (as the tests').
ADULT_DIR = Path(os.environ.get("FACTORIZE_ADULT_DIR") or REPO_ROOT.parent / "shared" / "data" / "adult")
#: Modules whose installed versions every report states (besides factorize, Python, numpy).
STACK = ("scipy", "cvxpy", "scs", "clarabel", "duckdb", "pyarrow")
#: The pool-size variables the header reports (set by the CLI's thread policy).
POOL_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# ---------------------------------------------------------------------------------------
# load and CPU time
# ---------------------------------------------------------------------------------------
def load_average() -> list[float] | None:
    """The load average over 1, 5 and 15 minutes (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def load1() -> float | None:
    """The 1-minute load average (read before and after every case)."""
    la = load_average()
    return None if la is None else la[0]


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def value_or_dash(x: Any, fmt: str = ".2f") -> str:
    """``format(x, fmt)``, or "—" for a value the run did not produce (None)."""
    return "—" if x is None else format(x, fmt)


def format_load(la: Sequence[float] | None) -> str:
    return "unknown" if la is None else ", ".join(f"{x:.2f}" for x in la)


# ---------------------------------------------------------------------------------------
# a case timed in this process
# ---------------------------------------------------------------------------------------
@dataclass
class Timing:
    """The rounds of one case: wall and CPU seconds, the 1-minute load around each round."""

    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    load_before: list[float | None] = field(default_factory=list)
    load_after: list[float | None] = field(default_factory=list)
    result: Any = None  #: what the last run returned

    @property
    def stats(self) -> Stats:
        """pytest-benchmark's statistics of the wall seconds (min, max, mean, stddev, median,
        quartiles, IQR and stddev outliers, …), computed from the rounds recorded so far."""
        s = Stats()
        for t in self.times:
            s.update(t)
        return s

    @property
    def best(self) -> float:
        return float(self.stats.min)

    @property
    def median(self) -> float:
        return float(self.stats.median)

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu)

    def as_dict(self) -> dict:
        """The JSON form every suite records (``result`` left out): the rounds, the best and
        median, and pytest-benchmark's summary of the wall seconds (``stats``)."""
        stats = self.stats
        return {"times": list(self.times), "cpu": list(self.cpu), "load_before": list(self.load_before),
                "load_after": list(self.load_after), "best_s": stats.min, "median_s": stats.median,
                "median_cpu_s": self.median_cpu, "stats": stats.as_dict()}


def _one(fn: Callable[[], Any], t: Timing) -> Any:
    t.load_before.append(load1())
    c0, t0 = cpu_seconds(), default_timer()
    result = fn()
    t.times.append(default_timer() - t0)
    t.cpu.append(cpu_seconds() - c0)
    t.load_after.append(load1())
    t.result = result
    return result


def measure(fn: Callable[[], Any], repeats: int = 1, *, check: Callable[[Any], None] | None = None,
            warmup: int = 0) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed (wall: pytest-benchmark's
    timer, ``time.perf_counter``, around the call alone; CPU: this process's user + system
    seconds); ``check(result)`` after each timed run, outside the time (it raises to stop the
    benchmark)."""
    for _ in range(warmup):
        fn()
    t = Timing()
    for _ in range(repeats):
        result = _one(fn, t)
        if check is not None:
            check(result)
    return t


def interleaved(cases: Mapping[str, Callable[[], Any]], repeats: int, *,
                check: Callable[[str, Any], None] | None = None, warmup: int = 0) -> dict[str, Timing]:
    """Every case once per round, ``repeats`` rounds (ABAB…: a change of the machine's load hits
    every case alike); ``warmup`` untimed runs of each case first; ``check(name, result)``
    after each timed run."""
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    out = {name: Timing() for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            result = _one(fn, out[name])
            if check is not None:
                check(name, result)
    return out


# ---------------------------------------------------------------------------------------
# a case in a fresh process
# ---------------------------------------------------------------------------------------
@dataclass
class Process:
    """A child process run to its end (or killed at its wall limit) and reaped with ``wait4``."""

    cmd: list[str]
    status: int            #: the raw wait status
    usage: Any             #: ``resource.struct_rusage`` of the child (and its reaped children)
    killed: bool           #: killed by us at the wall limit
    wall_s: float
    stdout: str
    stderr: str
    load_before: float | None
    load_after: float | None

    @property
    def returncode(self) -> int:
        """The exit code; minus the signal number when a signal ended it (as ``subprocess``)."""
        return os.waitstatus_to_exitcode(self.status)

    @property
    def exit_code(self) -> int | None:
        return os.WEXITSTATUS(self.status) if os.WIFEXITED(self.status) else None

    @property
    def term_signal(self) -> int | None:
        return os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else None

    @property
    def cpu_s(self) -> float:
        return self.usage.ru_utime + self.usage.ru_stime

    @property
    def peak_rss_mib(self) -> float:
        return self.usage.ru_maxrss / 1024  # Linux: KiB

    def as_dict(self) -> dict:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "peak_rss_mib": self.peak_rss_mib,
                "returncode": self.returncode, "killed": self.killed,
                "load_before": self.load_before, "load_after": self.load_after}


def run_process(cmd: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None,
                deadline: float | None = None) -> Process:
    """Run ``cmd`` and reap it with ``wait4``: wall seconds from start to exit, its CPU time and
    peak RSS (known even when it was killed). Past ``deadline`` seconds it is killed (SIGKILL,
    our own child by its pid). Output goes to temporary files, so a chatty child never blocks."""
    cmd = [str(c) for c in cmd]
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        before = load1()
        lock = threading.Lock()
        state = {"reaped": False, "killed": False}
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=None if env is None else dict(env),
                                cwd=None if cwd is None else str(cwd))

        def kill() -> None:
            with lock:
                if not state["reaped"]:
                    state["killed"] = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)

        timer = threading.Timer(deadline, kill) if deadline is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            with lock:
                state["reaped"] = True
            if timer is not None:
                timer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        after = load1()
        killed = state["killed"] and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        fo.seek(0)
        fe.seek(0)
        return Process(cmd, status, usage, killed, wall, fo.read().decode(errors="replace"),
                       fe.read().decode(errors="replace"), before, after)


def factorize_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the checkout first on ``PYTHONPATH``."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_factorize(args: Sequence[str], *, env: Mapping[str, str] | None = None,
                  deadline: float | None = None) -> Process:
    """``python -m factorize ARGS`` in a fresh process in the checkout; raises
    :class:`BenchError` (with its exit status and stderr) when it fails."""
    p = run_process([sys.executable, "-m", "factorize", *args], env=env, cwd=REPO_ROOT, deadline=deadline)
    if p.returncode != 0:
        raise BenchError(f"factorize {' '.join(list(args)[:3])} … failed ({p.returncode}): {p.stderr[-2000:]}")
    return p


# ---------------------------------------------------------------------------------------
# ratios against a baseline of the same run
# ---------------------------------------------------------------------------------------
def add_ratios(rows: list[dict], *, value: str, group: Callable[[dict], Any], baseline: Callable[[dict], bool],
               name: str, where: Callable[[dict], bool] | None = None) -> None:
    """``row[name] = row[value] / b`` where ``b`` is the smallest ``value`` among the rows of the
    same ``group(row)`` that ``baseline`` accepts (measured in this run), on the rows with a
    number that ``where`` accepts (default: all) and have such a baseline."""
    best: dict[Any, float] = {}
    for r in rows:
        if baseline(r) and isinstance(r.get(value), (int, float)):
            key = group(r)
            best[key] = min(best.get(key, math.inf), r[value])
    for r in rows:
        ok = isinstance(r.get(value), (int, float)) and (where is None or where(r))
        if ok and group(r) in best:
            r[name] = r[value] / best[group(r)]


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------
@dataclass
class Report:
    """What a suite hands back: its title, its own Markdown (after the common header) and its
    JSON payload (the header is added under ``"bench"``)."""

    title: str
    markdown: str
    data: dict = field(default_factory=dict)
    exit_code: int = 0


def json_safe(x: Any) -> Any:
    """A strict-JSON copy: numpy scalars and arrays as Python numbers and lists, non-finite
    floats as strings, paths and other objects as their text."""
    if isinstance(x, dict):
        return {k if isinstance(k, (str, int, float, bool)) or k is None else str(k): json_safe(v)
                for k, v in x.items()}
    if isinstance(x, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in (sorted(x, key=str) if isinstance(x, (set, frozenset)) else x)]
    if isinstance(x, (str, bool, int)) or x is None:
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if hasattr(x, "tolist"):  # numpy scalar or array
        return json_safe(x.tolist())
    return str(x)


def previous_body(path: str | Path) -> str | None:
    """The suite's own text of an existing report (None if there is none): without its title
    and, when the harness wrote it, without the common header — for a suite that rewrites one
    section and keeps the rest (e.g. ``--section``, ``--merge``)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    if len(lines) > 1 and lines[0].startswith("- command: `") and lines[1].startswith("- started: "):
        while lines and lines[0].strip():  # the common header (:meth:`Harness.header_markdown`)
            lines = lines[1:]
    return "\n".join(lines).strip("\n") + "\n"


def java_version() -> str:
    try:
        res = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30, check=False)
        return ((res.stderr or res.stdout).strip().splitlines() or ["unknown"])[0]
    except Exception as exc:  # noqa: BLE001 - provenance only
        return f"unknown ({type(exc).__name__})"


class Harness:
    """One run of one suite: its command, start, machine, versions and load, and the writer."""

    def __init__(self, suite: str, argv: Sequence[str] = (), *, threads: str | None = None):
        self.suite = suite
        self.argv = list(argv)
        self.command = shlex.join(["python", "-m", "benchmarks", "--suite", suite,
                                   *(["--threads", str(threads)] if threads is not None else []), *self.argv])
        self.started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.load_start = load_average()
        self._t0 = time.perf_counter()
        self._extra: list[str] = []
        self._java = False

    # -- measuring -----------------------------------------------------------------------
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self._t0

    def uses(self, *modules: str, java: bool = False) -> None:
        """Also state these modules' versions (e.g. ``pyspark``) and, with ``java``, Java's."""
        self._extra += [m for m in modules if m not in self._extra]
        self._java = self._java or java

    measure = staticmethod(measure)
    interleaved = staticmethod(interleaved)
    process = staticmethod(run_process)
    factorize = staticmethod(run_factorize)
    add_ratios = staticmethod(add_ratios)
    load = staticmethod(load_average)

    # -- describing ----------------------------------------------------------------------
    def versions(self) -> dict[str, str]:
        from factorize.io.provenance import versions

        out = versions(STACK + tuple(self._extra))
        out.pop("safetensors", None)  # provenance's plan-file stack, not a benchmark's
        if self._java:
            out["java"] = java_version()
        return out

    def header(self) -> dict:
        """The common header, for the JSON (``"bench"``) and the Markdown."""
        from factorize.io.provenance import machine_info

        return {"suite": self.suite, "command": self.command, "argv": self.argv, "started": self.started,
                "duration_s": round(self.elapsed(), 3), "machine": machine_info(), "versions": self.versions(),
                "load_average_start": self.load_start, "load_average_end": load_average(),
                "threads": {v: os.environ.get(v, "unset") for v in POOL_VARS}}

    @staticmethod
    def header_markdown(h: dict) -> list[str]:
        d = h["duration_s"]
        took = f"{d:.1f} s" if d < 120 else f"{d / 60:.1f} min"
        return [
            f"- command: `{h['command']}`",
            f"- started: {h['started']}; duration {took}",
            f"- machine: {', '.join(h['machine'].values())}",
            f"- versions: {', '.join(f'{k} {v}' for k, v in h['versions'].items())}",
            (f"- load average (1, 5, 15 min): {format_load(h['load_average_start'])} at the start, "
             f"{format_load(h['load_average_end'])} at the end"),
            f"- BLAS / OpenMP threads: {', '.join(f'{k}={v}' for k, v in h['threads'].items())}",
        ]

    # -- writing -------------------------------------------------------------------------
    def write(self, report: Report, out: str | Path) -> tuple[Path, Path]:
        """``out`` (Markdown: title, common header, the suite's text) and its ``.json`` twin."""
        if "bench" in report.data:
            raise InternalError("a suite's JSON payload may not use the key 'bench' (the common header)")
        h = self.header()
        md = Path(out)
        md.parent.mkdir(parents=True, exist_ok=True)
        body = report.markdown.strip("\n")
        md.write_text("\n".join([f"# {report.title}", "", *self.header_markdown(h), "", body, ""]),
                      encoding="utf-8")
        js = md.with_suffix(".json")
        js.write_text(json.dumps(json_safe({"bench": h, **report.data}), indent=1, allow_nan=False,
                                 ensure_ascii=False) + "\n", encoding="utf-8")
        return md, js
