"""The ``factorize`` command line (I/O only: parsing, printing, exit codes).

    factorize solve --workload SPEC --norm gamma_f|gamma_2|approx_gamma_2 [--eta X]
                    [--method auto|dual|sdp|algebra|low-rank] [--solver scs|clarabel|mosek] [--eps E] [--time-limit S]
                    [--gap-tol G] [--json] [--out FILE]
    factorize check FILE [--json]      re-verify a saved result against its workload
    factorize plan | run | verify | inspect    mechanism plans and the executor (plan.py)
    factorize report                           plan / results reports (report.py)
    factorize local …                          local model (local.py)
    factorize budget create|show|verify        privacy-budget ledger (budget.py)
    factorize schema draft|check               domain schemas (schema.py)
    factorize data check                       the data holder's counts, NOT private (data.py)

``--threads N|max`` (top level or on any command but ``budget``; else ``FACTORIZE_THREADS``,
else 1) sizes the BLAS / OpenMP pools before anything numerical is imported
(``factorize/threads.py``).

Exit codes (``common.py``, one rule for every subcommand): 0 success; 2 bad input (workload
spec, arguments, file, thread count); 3 the solver or the certificate failed (the message
says which and why).

The benchmarks are not a subcommand: they live in the repository's ``benchmarks/`` (not
installed) and run from a checkout as ``python -m benchmarks --suite NAME``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from factorize.choices import METHODS, NORMS
from factorize.cli.common import (
    EXIT_SOLVER,
    add_solver_options,
    apply_thread_policy,
    exit_code_for,
    gap_tol,
    solver_options,
)
from factorize.cli.errors import UsageError


def _solve(args: argparse.Namespace) -> int:
    from factorize.io.result_file import save_result
    from factorize.planner.routes import solve

    result = solve(args.workload, args.norm, eta=args.eta, method=args.method,
                   options=solver_options(args), gap_tol=gap_tol(args))
    if args.out and not hasattr(result, "certificate"):
        raise UsageError("--out saves dense or Kronecker factors; a marginal-algebra solution "
                         "has none (its strategy is Σ_T x_T P_T, printed with --json). Use "
                         "--method dual for a dense factorization of a small marginal workload")
    if args.out:
        save_result(result, args.out)
    summary = result.summary_dict()
    if args.out:
        summary["out"] = args.out
    if args.json:
        print(json.dumps(summary, allow_nan=False, default=_json_default))
    else:
        _print_summary(summary)
    return 0


def _print_summary(s: dict) -> None:
    k, N = s["shape"]
    name = {"gamma_f": "γ_F", "gamma_2": "γ₂"}.get(s["norm"]) or f"γ₂(·; η={s['eta']:g})"
    print(f"workload   {s['workload']}  ({k} queries × {N} cells)")
    print(f"norm       {name}")
    print(f"value      {s['value']:.10g}   (the returned factorization's norm = certified upper bound)")
    print(f"lower      {s['lower']:.10g}   (dual witness, re-checked independently of the solver)")
    print(f"gap        {s['gap']:.3g}   (upper / lower − 1)")
    if "residual" in s:
        print(f"residual   {s['residual']:.3g}   (max |W − R·A|)")
    else:
        print(f"strategy   X = Σ_T x_T P_T over {s['algebra_terms']} attribute subsets "
              f"(R·A = W exactly in the algebra)")
    print(f"seconds    {s['seconds']:.2f}")
    print(f"method     {s['method']}")
    for sv in s.get("solves", []):
        kk, nn = sv["shape"]
        how = {"dual": "dual fixed point", "low-rank": "low-rank Burer–Monteiro"}.get(
            sv["method"]) or f"{sv['backend']} SDP eps={sv['eps']:g}"
        print(f"  solve {kk}×{nn} ×{sv['uses']}: {how} "
              f"{sv['seconds']:.2f}s iters={sv['iterations']} primal from {sv['primal_route']}, "
              f"factor gap {sv['gap']:.2g}")
    if "out" in s:
        print(f"wrote      {s['out']}")


def _check(args: argparse.Namespace) -> int:
    from factorize.io.container import ContainerError
    from factorize.io.result_file import load_result
    from factorize.planner.certificate import verify
    from workloads import parse_workload

    loaded = load_result(args.file)
    meta = loaded.manifest["workload"]
    if not meta.get("spec"):
        raise ContainerError(f"{args.file}: the workload has no spec to rebuild it from")
    workload = parse_workload(meta["spec"])
    if workload.fingerprint() != meta["fingerprint"]:
        raise ContainerError(f"{args.file}: the workload rebuilt from {meta['spec']!r} does not match "
                             "the fingerprint recorded in the file")
    check = verify(loaded.certificate, workload)
    if args.json:
        print(json.dumps({"passed": check.passed, "upper": check.upper, "lower": check.lower,
                          "gap": check.gap, "residual": check.residual,
                          "failures": list(check.failures)}, default=_json_default))
    else:
        print(check.summary())
    return 0 if check.passed else EXIT_SOLVER


def _json_default(x):
    """numpy scalars to Python numbers (everything else is already plain JSON)."""
    if hasattr(x, "item"):
        return x.item()
    # json.dumps's ``default`` protocol: an object it cannot serialise must raise TypeError
    raise TypeError(f"cannot serialise {type(x).__name__}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="factorize", description=(
        "Optimal factorization mechanisms for differentially private linear queries, "
        "with certified lower and upper bounds."))
    from factorize.threads import add_option as add_threads_option

    add_threads_option(parser, top_level=True)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("solve", help="optimal factorization of a workload, with a verified certificate")
    p.add_argument("--workload", required=True, metavar="SPEC",
                   help="workload spec, e.g. prefix:64, kron(prefix:8,prefix:8), file:W.npy")
    p.add_argument("--norm", default="gamma_f", choices=NORMS)
    p.add_argument("--eta", type=float, default=None,
                   help="entrywise radius η (required with approx_gamma_2)")
    p.add_argument("--method", default="auto", choices=METHODS,
                   help="auto (default): marginal algebra for marginal workloads, else Kronecker "
                        "factors by the dual fixed-point solver, the generic SDP if that misses "
                        "the gap; approximate γ₂ by low-rank (k+N ≥ 32) or sdp; dual / sdp / "
                        "algebra / low-rank force one")
    add_solver_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", metavar="FILE", help="write factorization + certificate (safetensors)")
    add_threads_option(p)
    p.set_defaults(func=_solve)

    c = sub.add_parser("check", help="re-verify a saved result from its arrays alone")
    c.add_argument("file")
    c.add_argument("--json", action="store_true")
    add_threads_option(c)
    c.set_defaults(func=_check)

    from factorize.cli.plan import register

    register(sub)  # plan, run, verify, inspect (mechanism plans and the executor)
    from factorize.cli.report import register as register_report

    register_report(sub)  # report (HTML / Markdown)
    from factorize.cli.local import register as register_local

    register_local(sub)  # local model: plan, client, simulate, aggregate
    from factorize.cli.budget import register as register_budget

    register_budget(sub)  # budget: create / show / verify a privacy-budget ledger
    from factorize.cli.schema import register as register_schema

    register_schema(sub)  # schema: draft (NOT public) / check a domain schema
    from factorize.cli.data import register as register_data

    register_data(sub)  # data check: the data holder's counts (NOT private)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # One rule for every subcommand (factorize.cli.common.exit_code_for); nothing numerical
    # is imported before the thread policy.
    try:
        with apply_thread_policy(args):
            return args.func(args)
    except Exception as exc:  # noqa: BLE001 - mapped to an exit code, re-raised when not ours
        code = exit_code_for(exc)
        if code is None:
            raise
        return code


if __name__ == "__main__":
    sys.exit(main())
