"""``factorize report``: a plan's or a release's report as self-contained HTML or Markdown.

    factorize report FILE.plan --out report.html [--format html|md] [--no-baselines]
    factorize report --results ANSWERS.{csv,json,parquet} --out report.html [--format html|md]
                     [--ledger L.db]   (the dataset's budget and charges, this release's checked)

Exit codes: 0 ok; 2 bad input (unreadable plan or answers, unknown format).
"""

from __future__ import annotations

import argparse
from typing import Any

from factorize.cli.common import EXIT_OK, guarded
from factorize.cli.errors import UsageError


def register(subparsers: Any) -> None:
    r = subparsers.add_parser("report", help="a plan's or released answers' report (HTML / Markdown)")
    r.add_argument("plan", nargs="?", help="plan file (any kind: factorization, structured, projection, local, training)")
    r.add_argument("--results", default=None, help="answers file written by `factorize run`")
    r.add_argument("--out", required=True, help="report.html or report.md")
    r.add_argument("--ledger", default=None,
                   help="with --results: the ledger the release was charged to (opened and verified; "
                        "the report shows the dataset's budget and every charge)")
    r.add_argument("--format", default=None, choices=("html", "md"),
                   help="default: from the --out suffix")
    r.add_argument("--no-baselines", action="store_true",
                   help="skip the comparison with standard strategies (computed on the spot)")
    from factorize.threads import add_option as add_threads_option

    add_threads_option(r)
    r.set_defaults(func=_cmd_report)


@guarded
def _cmd_report(args: argparse.Namespace) -> int:
    if (args.plan is None) == (args.results is None):
        raise UsageError("give either a plan file or --results ANSWERS (one of the two)")
    if args.ledger is not None and args.results is None:
        raise UsageError("--ledger goes with --results (a release's report), not with a plan")
    from factorize.report.render import write_report

    if args.results is not None:
        from factorize.report.results_report import results_report

        report = results_report(args.results, ledger=args.ledger)
    else:
        from factorize.kinds import load_plan, verify_plan
        from factorize.plan.errors import PlanRefused
        from factorize.report.plan_report import plan_report

        plan = load_plan(args.plan)
        failures = verify_plan(plan).failures  # a report states the plan's claims: only verified ones
        if failures:
            raise PlanRefused("plan refused: " + "; ".join(failures))
        report = plan_report(plan, baselines=not args.no_baselines)
    files = write_report(report, args.out, args.format)
    print(f"wrote       {files[0]}" + (f" (+{len(files) - 1} files beside it)" if len(files) > 1 else ""))
    return EXIT_OK
