"""``factorize budget``: privacy budgets in a ledger (``factorize.ledger``).

    factorize budget create LEDGER.db --new [--dataset NAME --budget SPEC [--neighbouring R]]
    factorize budget create LEDGER.db --dataset NAME --budget SPEC [--neighbouring R]
    factorize budget show LEDGER.db [--dataset NAME] [--json]
    factorize budget verify LEDGER.db [--json]

SPEC: ``epsilon=1,delta=1e-6`` ((ε, δ)-DP, basic composition), ``rho=0.5`` (zCDP, ρ adds up;
pure-ε releases cost ε²/2) or ``epsilon=1`` (pure DP). R: ``add_remove`` or ``replace`` —
the neighbouring relation every release of the dataset must use (default: the first
release's); ``--relation`` is a deprecated, undocumented spelling of ``--neighbouring``, still
accepted so that old scripts keep working.

A ledger is created only with ``--new`` (refused if a ledger or its anchor is already
there): without it the ledger must exist, so a mistyped or lost ledger path is an error, never
a silently fresh, full budget. Budgets are never changed once created.

Exit codes: 0 ok; 2 bad input, unknown dataset, missing or tampered ledger (``verify``
prints what is inconsistent).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from factorize.choices import NEIGHBOURING
from factorize.cli.common import EXIT_OK, guarded
from factorize.cli.errors import UsageError


def register(subparsers: Any) -> None:
    b = subparsers.add_parser("budget", help="privacy budgets: create, show, verify a ledger")
    sub = b.add_subparsers(dest="budget_command", required=True)

    c = sub.add_parser("create", help="create a ledger (--new) and/or a dataset's budget")
    c.add_argument("ledger", help="ledger database, e.g. LEDGER.db")
    c.add_argument("--new", action="store_true",
                   help="create a new ledger file (refused if one is already there)")
    c.add_argument("--dataset", default=None, help="the dataset's name")
    c.add_argument("--budget", default=None, metavar="SPEC",
                   help="'epsilon=1,delta=1e-6' | 'rho=0.5' | 'epsilon=1'")
    c.add_argument("--neighbouring", dest="relation", default=None, choices=NEIGHBOURING,
                   help="neighbouring relation of the dataset's releases (default: the first "
                        "release's)")
    # the old spelling: still accepted, no longer documented (deprecated)
    c.add_argument("--relation", dest="relation", default=None, choices=NEIGHBOURING,
                   help=argparse.SUPPRESS)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=_cmd_create)

    s = sub.add_parser("show", help="budgets, spent, remaining and history")
    s.add_argument("ledger")
    s.add_argument("--dataset", default=None, help="only this dataset")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_cmd_show)

    v = sub.add_parser("verify", help="re-verify the hash chain, the tables and the anchor")
    v.add_argument("ledger")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=_cmd_verify)


@guarded
def _cmd_create(args: argparse.Namespace) -> int:
    from factorize.ledger import Ledger
    from factorize.privacy.guarantees import parse_guarantee

    if (args.dataset is None) != (args.budget is None):
        raise UsageError("--dataset and --budget go together")
    if args.dataset is None and not args.new:
        raise UsageError("nothing to do: give --new (a new ledger) and/or --dataset NAME "
                         "--budget SPEC")
    if args.relation is not None and args.dataset is None:
        raise UsageError("--neighbouring belongs to a dataset (--dataset, --budget)")
    budget = parse_guarantee(args.budget).to_dict() if args.budget is not None else None
    book = Ledger.create(args.ledger) if args.new else Ledger.open(args.ledger)
    out: dict[str, Any] = {"ledger": args.ledger, "new": bool(args.new)}
    if budget is not None:
        out["dataset"] = book.create_dataset(args.dataset, budget, relation=args.relation)
    if args.json:
        print(json.dumps(out, allow_nan=False))
        return EXIT_OK
    if args.new:
        print(f"created     ledger {args.ledger}")
    if budget is not None:
        from factorize.plan.manifest import guarantee_text
        from factorize.privacy import guarantee_from_dict

        rel = f" under {args.relation} neighbours" if args.relation else ""
        print(f"budget      {args.dataset}: {guarantee_text(guarantee_from_dict(budget))}{rel}")
    return EXIT_OK


@guarded
def _cmd_show(args: argparse.Namespace) -> int:
    from factorize.ledger import Ledger

    summary = Ledger.open(args.ledger).summary(args.dataset)
    if args.json:
        print(json.dumps(summary, allow_nan=False))
        return EXIT_OK
    from factorize.plan.manifest import guarantee_text
    from factorize.privacy import guarantee_from_dict

    print(f"ledger      {summary['ledger']}  ({summary['entries']} entries, chain and anchor "
          "verified)")
    if not summary["datasets"]:
        print("            no datasets (factorize budget create LEDGER --dataset NAME --budget …)")
    for ds in summary["datasets"]:
        print()
        print(f"dataset     {ds['name']}")
        print(f"budget      {guarantee_text(guarantee_from_dict(ds['budget']))}"
              + (f" under {ds['relation']} neighbours" if ds["relation"] else ""))
        print(f"spent       {_components(ds['spent'])}")
        print(f"remaining   {_components(ds['remaining'])}")
        if not ds["history"]:
            print("history     no charges")
            continue
        print("history")
        for h in ds["history"]:
            out = h["output_sha256"][:12] if h["output_sha256"] else "-"
            print(f"  #{h['id']:<4} {h['charged_at'][:19]}  {h['status']:<8}  "
                  f"{guarantee_text(guarantee_from_dict(h['guarantee'])):<22} cost {_components(h['cost']):<28} "
                  f"plan {h['plan_sha256'][:12]}  output {out}")
    return EXIT_OK


@guarded
def _cmd_verify(args: argparse.Namespace) -> int:
    from factorize.ledger import Ledger, LedgerError, LedgerTampered

    try:
        s = Ledger.open(args.ledger).verify()
    except LedgerError as exc:
        if not args.json:
            raise
        print(json.dumps({"ledger": args.ledger, "ok": False,
                          "tampered": isinstance(exc, LedgerTampered), "error": str(exc)}))
        print(f"factorize: {exc}", file=sys.stderr)
        return exc.exit_code  # 5 for a tampered ledger, 2 otherwise (factorize.errors)
    if args.json:
        print(json.dumps(dict(s, ok=True), allow_nan=False))
    else:
        print(f"ok          {s['ledger']}: {s['entries']} entries, hash chain, tables and anchor "
              f"consistent ({s['datasets']} datasets, {s['charges']} charges)")
    return EXIT_OK


def _components(d: dict[str, str]) -> str:
    sym = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{sym.get(k, k)}={v}" for k, v in d.items())
