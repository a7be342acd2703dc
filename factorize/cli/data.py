"""``factorize data check``: the data holder's own view of why ``run`` refuses a data set.

``factorize run`` refuses records outside a plan's domain without saying how many (a count
in a refusal would let a plan's author, who chooses the domain, read the data off for free).
This command runs the same checks on the data holder's side and prints what the
refusal withholds: the number of records and the rows per column and kind of problem
(``DataError.holder_message``). Its output is NOT differentially private: it is for the data
holder only and must not be passed to a plan's author.
"""

from __future__ import annotations

import argparse
from typing import Any

from factorize.cli.common import EXIT_INPUT, EXIT_OK, guarded
from factorize.cli.errors import UsageError

#: The first line of every output of ``factorize data check``.
NOT_PRIVATE = ("NOT DIFFERENTIALLY PRIVATE: exact counts from the private records, for the data "
               "holder only -- do not pass this output to a plan's author")


def register(subparsers: Any) -> None:
    """Add ``data`` with ``check`` to an argparse sub-parsers object."""
    top = subparsers.add_parser("data", help="the data holder's checks of private data (output NOT private)")
    sub = top.add_subparsers(dest="data_command", required=True)
    c = sub.add_parser(
        "check", help="count records and invalid values per column (NOT private: data holder only)",
        description="Run the checks `factorize run` makes on the records, and print what its refusals "
                    "withhold: the number of records and the rows per column and kind of invalid value. "
                    "The output is NOT differentially private: it is for the data holder only; never "
                    "pass it to a plan's author.")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--domain", help='domain JSON (name→size), domain schema (docs/schema.md) or "a=2,b=5"')
    where.add_argument("--plan", help="take the domain from a plan file (the one `run` refused)")
    c.add_argument("--attributes", default=None, help="comma-separated subset/order of --domain")
    c.add_argument("--data", required=True,
                   help="histogram .npy, records .csv/.parquet, or a DuckDB table FILE.duckdb::TABLE")
    c.add_argument("--ignore-extra-columns", action="store_true",
                   help="records may have columns that are not domain attributes (ignored)")
    c.add_argument("--engine", default="duckdb", choices=("duckdb", "spark"),
                   help="where the records are read (as for `factorize run`)")
    c.set_defaults(func=_check)


@guarded
def _check(args: argparse.Namespace) -> int:
    from factorize.engines import DataError
    from factorize.executor.data import count_records

    domain = _domain(args)
    print(NOT_PRIVATE)
    print(f"data        {args.data}")
    print(f"domain      {len(domain)} attributes: {', '.join(domain.attributes)}")
    try:
        n = count_records(args.data, domain, allow_extra_columns=args.ignore_extra_columns,
                          engine=args.engine)
    except DataError as exc:
        print("result      REFUSED: `factorize run` refuses this data (it says which columns and "
              "what kind of problem, never how many)")
        print(f"details     {exc.for_holder()}")
        return EXIT_INPUT
    print(f"records     {n}")
    print("result      OK: every record is inside the domain")
    return EXIT_OK


def _domain(args: argparse.Namespace) -> Any:
    if args.plan is not None:
        if args.attributes:
            raise UsageError("--attributes goes with --domain, not --plan")
        from factorize.kinds import load_plan

        return load_plan(args.plan).domain
    from factorize.cli.common import parse_domain

    return parse_domain(args.domain, args.attributes)
