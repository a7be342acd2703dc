"""``python -m benchmarks [--threads N|max] --suite NAME [suite options]``: every benchmark
suite, one harness. Run from a checkout: the benchmarks are not part of the installed package.

The suites are the modules of ``benchmarks.suites`` listed in :data:`SUITES`; each has
``NAME``, ``SUMMARY``, ``add_arguments(parser)`` and ``run(args, harness)`` and measures and
writes through ``benchmarks.harness`` (machine, versions, load, times, ratios, and the
common header of ``reports/bench_<suite>.md`` + ``.json``). ``python -m benchmarks --list``
lists them.

Importing this package loads only this registry and its command line (:func:`main`); a
suite's module is imported when that suite runs or is listed. The command applies
``factorize``'s thread policy (``--threads``, else ``FACTORIZE_THREADS``, else 1) and maps
errors to exit codes the way the ``factorize`` command does (``factorize.cli.common``).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from types import ModuleType

from factorize.errors import InternalError

from .errors import BenchError

#: Suite modules not named after their suite: the ``marginals`` suite's module is
#: ``marginal_suite``, so that a module's name says its role (``workloads.marginal_builders``,
#: ``engines.marginal_tables``, ``planner.marginal_optimum``, ``pure_dp.l1_marginal_weights``).
_MODULE_OF = {"marginals": "marginal_suite"}

#: Suite name → its module. The name is the report's: ``reports/bench_<name>.md``.
SUITES: dict[str, str] = {name: f"benchmarks.suites.{_MODULE_OF.get(name, name)}" for name in (
    "core", "scale", "pure_dp_table", "hdmm_suite", "marginals", "geometric", "mee",
    "engines", "histogram", "local", "threads", "executor", "raw", "hdmm_unions", "big_release",
    "postprocess", "union_scale", "tables", "training", "training_long", "training_worst",
    "noise_stream")}

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
    p = argparse.ArgumentParser(prog=f"python -m benchmarks --suite {name}", description=mod.SUMMARY,
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
    """Parse the suite's options, run it under a :class:`~benchmarks.harness.Harness` and
    write its report; the suite's exit code (0 unless it says otherwise)."""
    from benchmarks.harness import Harness

    args = suite_parser(name).parse_args(list(argv))
    harness = Harness(name, argv, threads=threads)
    report = load_suite(name).run(args, harness)
    if report is None:
        return 0
    md, js = harness.write(report, args.out)
    print(f"wrote {md} and {js}")
    return report.exit_code


def build_parser() -> argparse.ArgumentParser:
    """The command's own options; every other argument is the suite's (see :func:`main`)."""
    from factorize.threads import add_option as add_threads_option

    p = argparse.ArgumentParser(
        prog="python -m benchmarks", add_help=False, allow_abbrev=False,
        usage="python -m benchmarks [--threads N|max] [--suite NAME] [suite options] | --list",
        description="Run one benchmark suite; every suite records the machine, versions, load and "
                    "times the same way (benchmarks.harness). The suite's own options follow "
                    "--suite NAME (`python -m benchmarks --suite NAME --help`).")
    p.add_argument("-h", "--help", action="store_true", help="this help, or the suite's with --suite")
    p.add_argument("--suite", default=None, choices=suite_names(), metavar="NAME",
                   help=f"the suite to run (default {DEFAULT_SUITE}): " + ", ".join(suite_names()))
    p.add_argument("--list", action="store_true", help="list the suites, one line each")
    add_threads_option(p, top_level=True)
    return p


def _dispatch(args: argparse.Namespace, suite_argv: list[str], parser: argparse.ArgumentParser) -> int:
    if args.list:
        suites = list_suites()
        width = max(len(name) for name, _ in suites)
        for name, summary in suites:
            print(f"{name:<{width}}  {summary}")
        return 0
    if args.help:
        if args.suite is None:
            parser.print_help()
            print("\nsuites (`python -m benchmarks --list`; `python -m benchmarks --suite NAME --help` "
                  "for a suite's options):")
            print("  " + ", ".join(suite_names()))
            return 0
        suite_argv.append("--help")
    return run_suite(args.suite or DEFAULT_SUITE, suite_argv, threads=args.threads)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks``: the arguments this parser does not know go to the suite; the
    suite runs under the thread policy, and an error of factorize's tree (or a ``ValueError``,
    ``OSError``) becomes its exit code with a one-line message (``exit_code_for``)."""
    from factorize.cli.common import apply_thread_policy, exit_code_for

    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    try:
        with apply_thread_policy(args):
            return _dispatch(args, rest, parser)
    except Exception as exc:  # noqa: BLE001 - mapped to an exit code, re-raised when not ours
        code = exit_code_for(exc)
        if code is None:
            raise
        return code
