"""``factorize schema draft|check`` (``engines/schema_draft.py`` does the work; imported only
when the command runs, so the other commands' start-up does not pay for the engines)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``schema`` with ``draft`` and ``check`` to an argparse sub-parsers object."""
    top = subparsers.add_parser("schema", help="domain schemas: raw values, codes and labels (docs/schema.md)")
    sub = top.add_subparsers(dest="schema_command", required=True)
    d = sub.add_parser("draft", help="draft a schema FROM a data file: NOT public until reviewed")
    d.add_argument("data", help="records .csv / .parquet, or FILE.duckdb::TABLE")
    d.add_argument("--out", required=True, help="schema file to write (.json)")
    d.add_argument("--columns", default=None, help="comma-separated columns (default: all)")
    d.add_argument("--max-categories", type=int, default=None,
                   help="most distinct values of a column drafted as categorical / integer range "
                        "(default 64)")
    d.add_argument("--bins", type=int, default=None,
                   help="bins of a column drafted as numeric (default 20)")
    d.set_defaults(func=_draft)
    c = sub.add_parser("check", help="validate a schema file and list its codes and labels")
    c.add_argument("schema", help="domain schema .json")
    c.set_defaults(func=_check)


def _draft(args: argparse.Namespace) -> int:
    from factorize.engines import schema_draft as sd

    return _print(sd.draft_schema_command(
        args.data, args.out, columns=args.columns,
        max_categories=sd.DEFAULT_MAX_CATEGORIES if args.max_categories is None else args.max_categories,
        bins=sd.DEFAULT_BINS if args.bins is None else args.bins))


def _check(args: argparse.Namespace) -> int:
    from factorize.engines.schema_draft import check_schema_command

    return _print(check_schema_command(args.schema))


def _print(lines: list[str]) -> int:
    print("\n".join(lines))
    return 0
