"""``factorize local …``: the local model (Edmonds, Nikolov & Ullman 2020).

    factorize local plan --workload SPEC --privacy "epsilon=1" | "epsilon=1,delta=1e-6" --n N
                         [--alpha A] [--eta X] [--randomizer l2|gaussian] [--domain ..]
                         [--attributes ..] --out FILE.lplan
    factorize local inspect FILE.lplan            (upper and lower bounds, sample sizes)
    factorize local verify FILE.lplan
    factorize local client FILE.lplan --record "sex=Female,race=White,…" [--max-epsilon 10]  (one message, JSON)
    factorize local simulate FILE.lplan --data RECORDS.{csv,parquet} --out MESSAGES.parquet [--seed S]
    factorize local aggregate FILE.lplan --messages MESSAGES.parquet --out ANSWERS.{csv,json,parquet}
                              [--overwrite]

``client`` reads the record's values through the plan's domain schema as ``run`` reads raw
values (codes where the plan's domain gives sizes only). ``simulate`` plays every client of a
records file (for tests and benchmarks); ``--seed`` makes the messages reproducible and marks
them NOT PRIVATE. Exit codes: 0 ok, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from factorize.cli.common import EXIT_INPUT, EXIT_OK, guarded


def register(subparsers: Any) -> None:
    from factorize.threads import add_option as add_threads_option

    top = subparsers.add_parser("local", help="local differential privacy: plans, clients, server")
    sub = top.add_subparsers(dest="local_command", required=True)
    p = sub.add_parser("plan", help="plan an approximate factorization for the local model")
    p.add_argument("--workload", required=True)
    p.add_argument("--privacy", required=True, help='"epsilon=1" (ℓ2 randomizer) or "epsilon=1,delta=1e-6" (Gaussian)')
    p.add_argument("--n", type=int, required=True, help="planning number of users")
    p.add_argument("--alpha", type=float, default=None, help="target error per query, as a fraction of n")
    p.add_argument("--eta", type=float, default=None, help="fix η (default: searched)")
    p.add_argument("--randomizer", default=None, choices=("l2", "gaussian"))
    p.add_argument("--domain", default=None)
    p.add_argument("--attributes", default=None)
    p.add_argument("--out", required=True)
    p.add_argument("--allow-weak-guarantee", action="store_true",
                   help="plan a guarantee beyond the documented ceilings (ε ≤ 10, δ ≤ 1e-3)")
    add_threads_option(p)
    p.set_defaults(func=_plan)
    for name, fn in (("inspect", _inspect), ("verify", _verify)):
        q = sub.add_parser(name)
        q.add_argument("plan")
        add_threads_option(q)
        q.set_defaults(func=fn)
    c = sub.add_parser("client", help="one user's message for one record (OS randomness)")
    c.add_argument("plan")
    c.add_argument("--record", required=True,
                   help='"attr=value,…" for every domain attribute: raw values of the plan\'s domain '
                        "schema, or codes where the domain gives sizes only")
    c.add_argument("--max-epsilon", type=float, default=None,
                   help="refuse a plan whose ε exceeds this (default: the documented ceiling, 10)")
    add_threads_option(c)
    c.set_defaults(func=_client)
    s = sub.add_parser("simulate", help="play every client of a records file")
    s.add_argument("plan")
    s.add_argument("--data", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--seed", type=int, default=None, help="TEST MODE: reproducible, NOT PRIVATE")
    s.add_argument("--ignore-extra-columns", action="store_true")
    s.add_argument("--max-epsilon", type=float, default=None,
                   help="refuse a plan whose ε exceeds this (default: the documented ceiling, 10)")
    add_threads_option(s)
    s.set_defaults(func=_simulate)
    a = sub.add_parser("aggregate", help="the server: messages → answers with error bars")
    a.add_argument("plan")
    a.add_argument("--messages", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file (refused otherwise, before anything is read)")
    add_threads_option(a)
    a.set_defaults(func=_aggregate)


def _client_plan(path: str, max_epsilon: float | None) -> Any:
    """The plan a client randomizes with, verified first exactly as ``local verify`` does
    (randomizer re-derived, columns in the unit ball, the workload rebuilt, η bounded and
    |W − RA| ≤ η certified, certificate and stated bounds re-derived), the ε ceiling being the
    client's ``--max-epsilon`` and δ the documented ceiling: a client never sends a message
    for a plan the verifier refuses. Its guarantee is shown on stderr before any message."""
    from factorize.errors import InternalError
    from factorize.kinds.local.plan import load_local_plan, verify_local_plan
    from factorize.plan.errors import PlanRefused
    from factorize.plan.manifest import guarantee_text
    from factorize.privacy import ZCDP
    from factorize.privacy.policy import DELTA_CEILING, EPSILON_CEILING

    plan = load_local_plan(path)
    # the ε ceiling is the client's own --max-epsilon; everything else as verify
    failures = verify_local_plan(plan, allow_weak_guarantee=True)
    if failures:
        raise PlanRefused("plan refused: " + "; ".join(failures))
    if isinstance(plan.guarantee, ZCDP):  # the verifier refuses a zCDP local plan
        raise InternalError("a verified local plan holds a zCDP guarantee")
    eps = float(plan.guarantee.epsilon)
    limit = EPSILON_CEILING if max_epsilon is None else float(max_epsilon)
    print(f"guarantee   {guarantee_text(plan.guarantee)} local DP for this message "
          f"({plan.randomizer['kind']} randomizer)", file=sys.stderr)
    if not eps <= limit:
        raise PlanRefused(f"the plan's ε = {eps:g} exceeds --max-epsilon {limit:g}; refusing to "
                          "randomize with it")
    delta = getattr(plan.guarantee, "delta", 0.0)
    if delta > DELTA_CEILING:
        raise PlanRefused(f"the plan's δ = {delta:g} is above the ceiling "
                          f"{DELTA_CEILING:g}; refusing to randomize with it")
    return plan


def _plan(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from factorize.cli.common import parse_domain
        from factorize.kinds.local.kind import KIND
        from factorize.kinds.local.options import LocalOptions
        from workloads.spec import resolve_workload_spec

        workload, domain = resolve_workload_spec(args.workload,
                                                 parse_domain(args.domain, args.attributes))
        plan = KIND.build(LocalOptions(workload=workload, guarantee=args.privacy, n=args.n,
                                       randomizer=args.randomizer, eta=args.eta, alpha=args.alpha,
                                       domain=domain, allow_weak_guarantee=args.allow_weak_guarantee))
        KIND.save(plan, args.out)
        print("\n".join(plan.summary_lines()))
        print(f"wrote       {args.out}")
        return EXIT_OK
    return guarded(run)(args)


def _inspect(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from factorize.kinds.local.plan import load_local_plan, verify_local_plan

        plan = load_local_plan(args.plan)
        failures = verify_local_plan(plan)
        print("status      " + ("VERIFIED" if not failures else
                                "REFUSED — the numbers below are the file's claims, not verified: "
                                + "; ".join(failures)[:500]))
        print("\n".join(plan.summary_lines()))
        return EXIT_OK
    return guarded(run)(args)


def _verify(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from factorize.kinds.local.plan import load_local_plan, verify_local_plan

        failures = verify_local_plan(load_local_plan(args.plan))
        for f in failures:
            print(f"FAIL {f}")
        print("PASS" if not failures else "REFUSED")
        return EXIT_OK if not failures else EXIT_INPUT
    return guarded(run)(args)


def _client(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from factorize.engines.errors import DataError
        from factorize.kinds.local.protocol import encode_record, record_codes

        values: dict[str, str] = {}
        for part in args.record.split(","):
            name, eq, value = part.partition("=")
            name = name.strip()
            if not eq or name in values:
                raise DataError("--record must be \"attr=value,…\" with each attribute once"
                                + (f" ({name!r} is given twice)" if eq else ""))
            values[name] = value
        plan = _client_plan(args.plan, args.max_epsilon)
        y = encode_record(plan, record_codes(plan.domain, values))
        print(json.dumps({"message": [float(v) for v in y]}))
        return EXIT_OK
    return guarded(run)(args)


def _simulate(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        import numpy as np

        from factorize.engines import distinct_records_duckdb
        from factorize.executor.release import make_rng
        from factorize.kinds.local.protocol import encode_codes, write_messages
        from factorize.plan.files import file_sha256

        plan = _client_plan(args.plan, args.max_epsilon)
        codes, counts = distinct_records_duckdb(args.data, plan.domain, allow_extra_columns=args.ignore_extra_columns)
        rows = np.repeat(codes, counts, axis=0)
        rng = make_rng(args.seed)
        Y = encode_codes(plan, rows, rng)
        test = bool(getattr(rng, "is_test_mode", False))
        write_messages(args.out, Y, file_sha256(args.plan), test)
        print(f"simulated   {Y.shape[0]} clients → {args.out}" + ("  [test_mode: NOT PRIVATE]" if test else ""))
        return EXIT_OK
    return guarded(run)(args)


def _aggregate(args: argparse.Namespace) -> int:
    def run(args: argparse.Namespace) -> int:
        from factorize.executor.pipeline import run as release

        rel = release(args.plan, args.messages, args.out, expect="local", overwrite=args.overwrite)
        meta = rel.metadata
        print(f"aggregated  {meta['n']} messages → {meta['n_queries']} answers of "
              f"{meta['workload']} → {args.out}")
        return EXIT_OK
    return guarded(run)(args)
