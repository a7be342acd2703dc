"""``factorize bench --suite NAME [suite options]``: every benchmark suite, one harness.

The suites are the modules of ``factorize.bench.suites`` listed in :data:`SUITES`; each has
``NAME``, ``SUMMARY``, ``add_arguments(parser)`` and ``run(args, harness)`` and measures and
writes through ``factorize.bench.harness`` (machine, versions, load, times, ratios, and the
common header of ``reports/bench_<suite>.md`` + ``.json``). ``factorize bench --list`` lists
them.

Importing this package loads only this registry (the CLI reads the suite names from it while
it builds its parser); a suite's module is imported when that suite runs or is listed.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from types import ModuleType

from factorize.errors import InternalError

from .errors import BenchError

#: Suite name → its module. The name is the report's: ``reports/bench_<name>.md``.
SUITES: dict[str, str] = {name: f"factorize.bench.suites.{name}" for name in (
    "core", "scale", "pure_dp_table", "hdmm_suite", "marginals", "geometric", "mee",
    "engines", "histogram", "local", "threads", "executor", "raw", "hdmm_unions")}

#: What every suite module defines.
INTERFACE = ("NAME", "SUMMARY", "add_arguments", "run")

DEFAULT_SUITE = "core"


def suite_names() -> tuple[str, ...]:
    return tuple(SUITES)


def load_suite(name: str) -> ModuleType:
    if name not in SUITES:
        raise BenchError(f"unknown benchmark suite {name!r}; known: {', '.join(SUITES)}")
    mod = importlib.import_module(SUITES[name])
    missing = [a for a in INTERFACE if not hasattr(mod, a)]
    if missing or name != mod.NAME:
        raise InternalError(f"{SUITES[name]} is not a suite: missing {missing}" if missing
                            else f"{SUITES[name]}.NAME is {mod.NAME!r}, registered as {name!r}")
    return mod


def report_path(mod: ModuleType) -> str:
    """The suite's default report: ``reports/bench_<NAME>.md`` unless it names another (``REPORT``)."""
    return f"reports/{getattr(mod, 'REPORT', 'bench_' + mod.NAME)}.md"


def suite_parser(name: str) -> argparse.ArgumentParser:
    """The suite's own options, plus ``--out`` (every suite writes a report and its JSON twin)."""
    mod = load_suite(name)
    p = argparse.ArgumentParser(prog=f"factorize bench --suite {name}", description=mod.SUMMARY,
                                allow_abbrev=False)
    p.add_argument("--out", default=report_path(mod), metavar="FILE.md",
                   help="the Markdown report; its JSON twin is written next to it "
                        f"(default {report_path(mod)})")
    mod.add_arguments(p)
    return p


def list_suites() -> list[tuple[str, str]]:
    """(name, one-line summary) of every suite."""
    return [(name, load_suite(name).SUMMARY) for name in SUITES]


def run_suite(name: str, argv: Sequence[str] = (), *, threads: str | None = None) -> int:
    """Parse the suite's options, run it under a :class:`~factorize.bench.harness.Harness` and
    write its report; the suite's exit code (0 unless it says otherwise)."""
    from factorize.bench.harness import Harness

    args = suite_parser(name).parse_args(list(argv))
    harness = Harness(name, argv, threads=threads)
    report = load_suite(name).run(args, harness)
    if report is None:
        return 0
    md, js = harness.write(report, args.out)
    print(f"wrote {md} and {js}")
    return report.exit_code
