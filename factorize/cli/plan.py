"""``factorize plan | run | verify | inspect``: mechanism plans and the production executor.

    factorize plan --workload SPEC --privacy "epsilon=1,delta=1e-6" [--norm gamma_f|gamma_2|approx_gamma_2]
                   [--mechanism factorization|ellipsoid|least-squares|jl|covariance|relaxed-projection|training]
                   [--strategy auto|dense|residual|subset_algebra|union|marginal_weights|kron|kron_groups|blt|banded|bisr]
                   [--participation epochs=K|k=K,min_sep=B] [--buffers B] [--bands B] [--momentum β] [--streaming]
                   [--public-n N]
                   [--eta X] [--neighbouring add_remove|replace] [--domain FILE.json|"a=2,b=5"]
                   [--attributes a,b] [--noise auto|gaussian|laplace|knorm]
                   [--postprocess none|nonneg|integer]
                   [--table-weights "NAME=W;…" | --table-targets "NAME=se:S;NAME=halfwidth:H;…"]
                   [--solver scs|clarabel|mosek] [--eps E] [--time-limit S] [--gap-tol G]
                   --out FILE.plan [--json]
    factorize run FILE.plan --data DATA.{npy,csv,parquet} --out ANSWERS.{csv,json,parquet}
                  [--tables FOLDER] [--overwrite]
                  [--seed N] [--allow-float-noise] [--ignore-extra-columns] [--json]
                  [--engine duckdb|spark] [--ledger LEDGER.db --dataset NAME]
    factorize verify FILE.plan [--no-certificate] [--allow-weak-guarantee] [--json]
    factorize inspect FILE.plan [--json]

Exit codes: 0 ok; 2 bad input, refused plan or bad data; 3 solver failure.
``--seed`` switches to reproducible *test* noise: every output is marked NOT PRIVATE.
Call :func:`register` on the ``factorize`` sub-parsers to add the commands.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, Literal

from factorize.choices import (
    MECHANISMS,
    NEIGHBOURING,
    NORMS,
    TRAINING_STRATEGIES,
    NoiseFamily,
    StructuredFamily,
    TrainingStrategy,
)
from factorize.cli.common import (
    EXIT_INPUT,
    EXIT_OK,
    add_solver_options,
    gap_tol,
    guarded,
    parse_domain,
    solver_options,
)
from factorize.cli.errors import UsageError
from factorize.structured.families import CODECS, FAMILY_NAMES

#: ``--noise`` → the planner's noise family (None: the guarantee's default; the CLI spells
#: ``l2_knorm`` as ``knorm``).
_NOISE: dict[str, NoiseFamily | None] = {"auto": None, "gaussian": "gaussian", "laplace": "laplace",
                                         "knorm": "l2_knorm"}


def register(subparsers: Any) -> None:
    """Add ``plan``, ``run``, ``verify`` and ``inspect`` to an argparse sub-parsers object."""
    from factorize.cli.table_targets import add_options as add_table_options
    from factorize.threads import add_option as add_threads_option

    p = subparsers.add_parser("plan", help="build a verified mechanism plan file")
    p.add_argument("--workload", required=True, help="workload spec, e.g. prefix:64")
    p.add_argument("--privacy", required=True,
                   help='"epsilon=1,delta=1e-6" ((ε,δ)-DP), "rho=0.5" (zCDP) or "epsilon=1" (pure DP)')
    p.add_argument("--norm", default="gamma_f", choices=NORMS)
    p.add_argument("--eta", type=float, default=None)
    p.add_argument("--mechanism", default="factorization",
                   choices=MECHANISMS,
                   help="factorization (optimal for --norm); ellipsoid (seed 002 Alg. 1–2, "
                        "base decomposition; certified against the optimum's dual witness); "
                        "least-squares (seed 002 Alg. 3: the optimal factorization's noise, then "
                        "the executor projects the release onto n·conv{w_j}); jl (seed 000 Alg. 1, "
                        "pure DP, random projection + K-norm noise + projection back); covariance "
                        "(seed 000 §6) and relaxed-projection (seed 001 §4) for parity:d:2 or "
                        "marginals:2x…x2:2 — "
                        "jl, covariance and relaxed-projection need --neighbouring replace "
                        "--public-n N; training (--workload prefix:N, N steps) plans a "
                        "long-horizon BLT, banded Toeplitz or banded inverse square root (bisr) strategy for DP training under "
                        "--participation, released as a noise stream in the training loop "
                        "(--norm gamma_f: total squared error, gamma_2: the worst step's)")
    p.add_argument("--strategy", default="auto",
                   choices=("auto", *dict.fromkeys(("dense", *FAMILY_NAMES, *TRAINING_STRATEGIES))),
                   help="auto (default): plan every strategy family that applies to the "
                        "workload (factorize.families) and keep the least error under the "
                        "guarantee's objective, recording each family's score or why it did not "
                        "apply (shown by inspect); or one family: dense (dense / Kronecker "
                        "factors, N must fit), "
                        + ", ".join(f"{name} ({CODECS[name].summary})" for name in FAMILY_NAMES)
                        + "; with --mechanism training: blt (default), banded, bisr (banded inverse "
                        "square root: C⁻¹ banded, --bands of it) or dense (the "
                        "optimal dense multi-epoch strategy under --participation epochs=K, with "
                        "a certified gap)")
    p.add_argument("--participation", default=None,
                   help="--mechanism training: how often one record takes part, epochs=K (once "
                        "per epoch, N divisible by K) or k=K,min_sep=B (at most K steps, B apart); "
                        "default: once")
    p.add_argument("--buffers", type=int, default=None,
                   help="--mechanism training --strategy blt: the BLT's buffers (default 4)")
    p.add_argument("--bands", type=int, default=None,
                   help="--mechanism training --strategy banded|bisr: the bands of C (banded) or "
                        "of C⁻¹ (bisr) (default 32)")
    p.add_argument("--streaming", action="store_true",
                   help="--mechanism training --strategy dense: the lower-triangular factor with "
                        "the same CᵀC (same sensitivity and error), which a noise stream needs")
    p.add_argument("--momentum", type=float, default=None,
                   help="--mechanism training: β of heavy-ball momentum (0 ≤ β < 1); the "
                        "workload is then the prefix sums of the momentum-β averages")
    p.add_argument("--public-n", type=int, default=None,
                   help="replace neighbours only: the public dataset size (the data must have "
                        "exactly this many records); needed by jl, covariance, relaxed-projection")
    p.add_argument("--neighbouring", default="add_remove", choices=NEIGHBOURING)
    p.add_argument("--domain", default=None,
                   help='JSON file name→size (e.g. adult-domain.json), or a domain schema '
                        '(docs/schema.md), or inline "sex=2,race=5"')
    p.add_argument("--attributes", default=None, help="comma-separated subset/order of --domain file")
    p.add_argument("--noise", default="auto", choices=tuple(_NOISE),
                   help="noise family (auto: Gaussian for (ε,δ)/zCDP, Laplace for pure DP; "
                        "knorm = ℓ2-ball K-norm for pure DP, float sampler)")
    p.add_argument("--postprocess", default="none", choices=("none", "nonneg", "integer"),
                   help="recorded in the plan, run on the released values: nonneg — the "
                        "least-squares non-negative consistent answers (dense plans: the "
                        "histogram's N cells; structured plans of marginal workloads: the "
                        "tables, never N); integer — those rounded to integer tables of one "
                        "total (factorize.postprocess). Refused for a plan that cannot serve it")
    add_table_options(p)
    add_solver_options(p)
    p.add_argument("--search-seed", type=int, default=0,
                   help="Laplace noise: base seed of the pure-DP strategy search's random "
                        "restarts (recorded in the plan; the same seed re-plans the same strategy)")
    p.add_argument("--out", required=True, help="plan file to write")
    p.add_argument("--allow-weak-guarantee", action="store_true",
                   help="plan a guarantee beyond the documented ceilings (ε ≤ 10, ρ ≤ 10, δ ≤ 1e-3)")
    p.add_argument("--json", action="store_true")
    add_threads_option(p)
    p.set_defaults(func=_cmd_plan)

    r = subparsers.add_parser("run", help="run a plan on private data (verifies it first)")
    r.add_argument("plan")
    r.add_argument("--data", required=True,
                   help="histogram .npy, records .csv/.parquet, or a DuckDB table FILE.duckdb::TABLE")
    r.add_argument("--out", required=True,
                   help="answers .csv, .json or .parquet (a new file: an existing one is refused "
                        "before anything is read or charged, unless --overwrite)")
    r.add_argument("--tables", default=None, metavar="FOLDER",
                   help="also write one tidy CSV per table into FOLDER (an existing folder): "
                        "every part of the workload's vstack is a table, named by table(NAME,SPEC) "
                        "or by its attributes and form (age,sex; cdf(age) by sex); columns: the "
                        "table's attributes (value labels, intervals for CDF and range forms), "
                        "then estimate, std_error, ci_low, ci_high (and estimate_postprocessed "
                        "for a plan with --postprocess); any plan kind")
    r.add_argument("--measurements-out", default=None, metavar="FOLDER",
                   help="also write the release's measurement records into the new folder FOLDER "
                        "(measurements.json + arrays.npz: per clique, y = Q·marginal + noise of "
                        "known standard deviation; private-pgm's LinearMeasurement, see "
                        "factorize.io.mbi_export), computed from the released answers only and "
                        "written with them, all or nothing; structured plans with Gaussian "
                        "noise, others refused before anything is charged")
    r.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out file and existing --tables files (without it "
                        "they are refused: a previous release is never replaced silently)")
    r.add_argument("--seed", type=int, default=None,
                   help="TEST MODE: reproducible noise; the output is NOT PRIVATE")
    r.add_argument("--allow-float-noise", action="store_true",
                   help="accept a plan whose sampler is 'float' (not exact; Mironov 2012)")
    r.add_argument("--ignore-extra-columns", action="store_true",
                   help="records may have columns that are not domain attributes (ignored)")
    r.add_argument("--engine", default="duckdb", choices=("duckdb", "spark"),
                   help="where the histogram is computed (spark: a path Spark can read)")
    r.add_argument("--ledger", default=None, help="privacy-budget ledger (factorize budget create)")
    r.add_argument("--dataset", default=None, help="the dataset's name in the ledger")
    r.add_argument("--allow-weak-guarantee", action="store_true",
                   help="release under a guarantee beyond the documented ceilings (ε ≤ 10, ρ ≤ 10, "
                        "δ ≤ 1e-3, δ < 1/n); the output says so")
    r.add_argument("--postprocess-time-limit", type=float, default=600.0,
                   help="wall-clock seconds for post-processing / decoding after the charge "
                        "(default 600); the answers are released with the state reached")
    r.add_argument("--json", action="store_true")
    add_threads_option(r)
    r.set_defaults(func=_cmd_run)

    v = subparsers.add_parser("verify", help="run the plan checks alone (no data)")
    v.add_argument("plan")
    v.add_argument("--no-certificate", action="store_true", help="skip the certificate re-check (SVD)")
    v.add_argument("--allow-weak-guarantee", action="store_true",
                   help="accept a guarantee beyond the documented ceilings")
    v.add_argument("--json", action="store_true")
    add_threads_option(v)
    v.set_defaults(func=_cmd_verify)

    i = subparsers.add_parser("inspect", help="print a plan's summary")
    i.add_argument("plan")
    i.add_argument("--json", action="store_true")
    add_threads_option(i)
    i.set_defaults(func=_cmd_inspect)


@guarded
def _cmd_plan(args: argparse.Namespace) -> int:
    from factorize.kinds.factorization.kind import KIND
    from factorize.kinds.factorization.options import FactorizationOptions

    if args.mechanism == "training":
        if args.table_weights is not None or args.table_targets is not None:
            raise UsageError("--table-weights / --table-targets plan the factorization mechanism")
        return _plan_training(args)
    if (args.strategy in ("blt", "banded", "bisr") or args.streaming
            or (args.participation, args.buffers, args.bands, args.momentum) != (None,) * 4):
        raise UsageError("--strategy blt|banded|bisr, --participation, --buffers, --bands, --momentum "
                         "and --streaming plan --mechanism training")
    domain = parse_domain(args.domain, args.attributes)
    from workloads.spec import resolve_workload_spec

    args.workload, domain = resolve_workload_spec(args.workload, domain)  # attribute-named specs
    if args.neighbouring == "replace":
        _refuse_replace_invariant(args.workload)
    from factorize.cli.table_targets import attach, prepare

    args.table_scaling = prepare(args, domain)  # per-table targets: plan D·W (plan.table_targets)
    if args.table_scaling is not None:
        args.workload, domain = args.table_scaling.workload, args.table_scaling.domain
    options = None
    if args.solver is not None or args.eps is not None or args.time_limit is not None:
        options = solver_options(args)
    family = _NOISE[args.noise]
    from factorize.kinds.projection.plan import PROJECTION_KINDS
    if args.mechanism in PROJECTION_KINDS:
        if args.postprocess != "none":
            raise UsageError(f"--mechanism {args.mechanism} decodes its answers by its own "
                             f"projection; --postprocess {args.postprocess} does not apply")
        return _plan_projection(args, domain, family)
    if args.strategy in FAMILY_NAMES:
        if args.mechanism != "factorization" or args.norm == "approx_gamma_2":
            raise UsageError(f"--strategy {args.strategy} plans the factorization mechanism for "
                             "gamma_f or gamma_2")
        return _plan_structured(args, domain, family, args.strategy)
    if args.strategy == "auto" and _searchable(args, family):
        return _plan_search(args, domain, family, options)
    plan = KIND.build(FactorizationOptions(
        workload=args.workload, guarantee=args.privacy, norm=args.norm, eta=args.eta,
        relation=args.neighbouring, domain=domain, noise_family=family,
        postprocess=args.postprocess, solver_options=options, gap_tol=gap_tol(args),
        mechanism=args.mechanism, public_n=args.public_n,
        allow_weak_guarantee=args.allow_weak_guarantee, search_seed=args.search_seed))
    plan = attach(plan, args.table_scaling)
    KIND.save(plan, args.out)
    return _print_written(plan, args)


def _plan_training(args: argparse.Namespace) -> int:
    """``--mechanism training``: the long-horizon strategy for the prefix sums of N training
    steps (``kinds.training``); ``--norm`` picks the objective (gamma_f: the total squared
    error; gamma_2: the worst step's)."""
    import re

    from factorize.kinds.training.kind import KIND
    from factorize.kinds.training.options import TrainingOptions

    found = re.fullmatch(r"prefix:([0-9]+)", args.workload.replace(" ", ""))
    if found is None:
        raise UsageError("--mechanism training plans the prefix sums of N training steps: "
                         "--workload prefix:N")
    if args.norm not in ("gamma_f", "gamma_2"):
        raise UsageError("--mechanism training takes --norm gamma_f (total squared error) or "
                         "gamma_2 (the worst step's)")
    if args.strategy not in ("auto", *TRAINING_STRATEGIES):
        raise UsageError("--mechanism training plans --strategy blt, banded, bisr or dense")
    if args.streaming and args.strategy != "dense":
        raise UsageError("--streaming applies to --mechanism training --strategy dense")
    given = [flag for flag, fits in (
        ("--neighbouring", args.neighbouring == "add_remove"), ("--public-n", args.public_n is None),
        ("--domain", args.domain is None), ("--postprocess", args.postprocess == "none"),
        ("--eta", args.eta is None), ("--noise", args.noise in ("auto", "gaussian"))) if not fits]
    if given:
        raise UsageError(f"--mechanism training adds Gaussian noise to a gradient stream under "
                         f"add/remove of one record: {', '.join(given)} does not apply")
    strategy: TrainingStrategy = "blt" if args.strategy == "auto" else args.strategy
    objective: Literal["total", "max"] = "total" if args.norm == "gamma_f" else "max"
    defaults = TrainingOptions(n=int(found.group(1)), guarantee=args.privacy)
    plan = KIND.build(TrainingOptions(
        n=int(found.group(1)), guarantee=args.privacy, participation=args.participation,
        strategy=strategy, objective=objective, momentum=args.momentum,
        buffers=defaults.buffers if args.buffers is None else args.buffers,
        bands=defaults.bands if args.bands is None else args.bands,
        streaming=args.streaming, time_limit=args.time_limit,
        allow_weak_guarantee=args.allow_weak_guarantee))
    KIND.save(plan, args.out)
    return _print_written(plan, args)


def _refuse_replace_invariant(spec: str) -> None:
    """Refuse a workload whose every query has the same answer on replace neighbours: all of
    W's columns equal, so W·(e_x − e_y) = 0 for every pair of records x, y (e.g. ``total:n``,
    the record count, which replace neighbours keep public). No mechanism adds noise to it and
    no plan of noise can be calibrated (sensitivity 0). Checked on the dense matrix where it
    fits (``workloads.DEFAULT_MAX_DENSE_ENTRIES``); a larger such workload is refused by the
    builder's own zero-sensitivity check."""
    import numpy as np

    from factorize.plan.errors import PlanError
    from workloads import DEFAULT_MAX_DENSE_ENTRIES, parse_workload

    W = parse_workload(spec)
    k, N = W.shape
    if N < 2 or k * N > DEFAULT_MAX_DENSE_ENTRIES:
        return
    D = np.asarray(W.dense())
    if np.array_equal(D, np.broadcast_to(D[:, :1], D.shape)):
        raise PlanError("under replace neighbours every query of this workload has the same "
                        "answer on neighbouring datasets (all its columns are equal, e.g. the "
                        "total count, which replace neighbours keep public): there is nothing "
                        "to protect and no noise to calibrate; compute it directly, or plan it "
                        "with --neighbouring add_remove")


def _searchable(args: argparse.Namespace, family: NoiseFamily | None) -> bool:
    """``--strategy auto`` searches every strategy family (``factorize.families``) for the
    factorization mechanism of γ_F or γ₂ under Gaussian or Laplace noise; any other request
    is the dense planner's."""
    return (args.mechanism == "factorization"
            and args.norm in ("gamma_f", "gamma_2") and family in (None, "gaussian", "laplace"))


def _plan_search(args: argparse.Namespace, domain: Any, family: NoiseFamily | None, options: Any) -> int:
    """The best plan of every family that applies (``families.search``), with its table; with
    ``--postprocess``, of every family that can serve it (``postprocess.plan_option``: the
    structured families only for a marginal workload), the plan then carrying the option."""
    from factorize.families import PlanProblem, search
    from factorize.kinds import save_plan
    from factorize.plan.build_inputs import plan_inputs
    from factorize.postprocess.plan_option import with_postprocess

    W, g, rel, dom = plan_inputs(args.workload, args.privacy, args.neighbouring, domain,
                                 args.allow_weak_guarantee)
    if family == "l2_knorm":  # not _searchable: the families plan Gaussian or Laplace noise
        raise UsageError("the strategy search plans Gaussian or Laplace noise, not the K-norm")
    noise = family or ("laplace" if g.kind == "pure_dp" else "gaussian")
    problem = PlanProblem(W, g, rel, dom, noise, args.norm, options=options, gap_tol=gap_tol(args),
                          seed=args.search_seed, allow_weak_guarantee=args.allow_weak_guarantee)
    plan = with_postprocess(search(problem, _serving(args.postprocess, problem)).plan,
                            args.postprocess, W)
    from factorize.cli.table_targets import attach

    plan = attach(plan, getattr(args, "table_scaling", None))
    save_plan(plan, args.out)  # by its kind: the search returns a dense or a structured plan
    return _print_written(plan, args)


def _serving(method: str, problem: Any) -> Any:
    """The families the search may choose from for ``--postprocess method``: all (None)
    without post-processing or for a marginal workload; otherwise the dense family alone,
    which post-processes the histogram — or a refusal saying why neither can serve it."""
    from factorize.families.registry import FAMILIES
    from factorize.postprocess.errors import PostprocessError
    from factorize.postprocess.plan_option import serves_marginals

    if method == "none":
        return None
    why = serves_marginals(problem.workload, problem.domain.sizes)
    if why is None:
        return None
    dense = [f for f in FAMILIES if f.kind == "dense"]
    dense_why = dense[0].applies(problem)
    if dense_why is not None:
        raise PostprocessError(f"--postprocess {method} projects a structured plan's marginal "
                               f"tables, and {why}; the dense planner, which projects the "
                               f"histogram instead, does not apply: {dense_why}")
    return dense


def _plan_structured(args: argparse.Namespace, domain: Any, family: NoiseFamily | None,
                     strategy: StructuredFamily) -> int:
    from factorize.kinds.structured.kind import KIND
    from factorize.kinds.structured.options import StructuredOptions
    from factorize.postprocess.plan_option import with_postprocess

    plan = KIND.build(StructuredOptions(
        workload=args.workload, guarantee=args.privacy, norm=args.norm, relation=args.neighbouring,
        domain=domain, noise_family=family, strategy=strategy, gap_tol=gap_tol(args),
        allow_weak_guarantee=args.allow_weak_guarantee, search_seed=args.search_seed))
    plan = with_postprocess(plan, args.postprocess)
    from factorize.cli.table_targets import attach

    plan = attach(plan, getattr(args, "table_scaling", None))
    KIND.save(plan, args.out)
    return _print_written(plan, args)


def _print_written(plan: Any, args: argparse.Namespace) -> int:
    """The written plan's manifest (``--json``) or summary."""
    if args.json:
        print(json.dumps({"out": args.out, **plan.manifest()}, allow_nan=False, default=str))
    else:
        print("\n".join(plan.summary_lines() + _precision_lines(plan)))
        print(f"wrote       {args.out}")
    return EXIT_OK


def _precision_lines(plan: Any) -> list[str]:
    """Each table's standard error (``executor.precision``) under the plan's summary; none for
    a plan without a data domain (a training plan's noise goes to a gradient stream)."""
    from factorize.executor.precision import precision_lines

    if not hasattr(plan, "domain"):
        return []

    return precision_lines(plan)


def _plan_projection(args: argparse.Namespace, domain: Any, family: NoiseFamily | None) -> int:
    from factorize.kinds.projection.kind import KIND
    from factorize.kinds.projection.options import ProjectionOptions

    if args.public_n is None:
        raise UsageError(f"--mechanism {args.mechanism} needs --public-n N (and --neighbouring replace)")
    plan = KIND.build(ProjectionOptions(
        workload=args.workload, guarantee=args.privacy, mechanism=args.mechanism, n=args.public_n,
        relation=args.neighbouring, domain=domain, noise_family=family,
        allow_weak_guarantee=args.allow_weak_guarantee))
    KIND.save(plan, args.out)
    return _print_written(plan, args)


@guarded
def _cmd_run(args: argparse.Namespace) -> int:
    from factorize.executor.pipeline import run

    if args.seed is not None:
        print("WARNING: --seed test mode: the released answers are NOT PRIVATE", file=sys.stderr)
    rel = run(args.plan, args.data, args.out, seed=args.seed,
              allow_float_noise=args.allow_float_noise,
              allow_extra_columns=args.ignore_extra_columns, engine=args.engine,
              ledger=args.ledger, dataset=args.dataset,
              allow_weak_guarantee=args.allow_weak_guarantee,
              postprocess_seconds=args.postprocess_time_limit, tables=args.tables,
              overwrite=args.overwrite, measurements=args.measurements_out)
    meta = rel.metadata
    projection = "decode" in meta
    if args.json:
        print(json.dumps({"out": args.out, "measurements": args.measurements_out, "metadata": meta},
                         allow_nan=False))
        return EXIT_OK
    tag = "  [test_mode: NOT PRIVATE]" if meta["test_mode"] else ""
    kind = f" ({meta['mechanism']})" if projection else ""
    print(f"released    {meta['n_queries']} answers of {meta['workload']}{kind} → {args.out}{tag}")
    if projection:
        dec = meta["decode"]
        bound = ("no bound (decode missed its gap target)" if meta["rmse_bound"] is None
                 else f"RMSE ≤ {meta['rmse_bound']:.6g}")
        print(f"noise       {meta['noise']['family']} ({meta['noise']['sampler']})")
        print(f"decode      {dec['method']}: {dec['iterations']} iterations, gap {dec['gap']:.3g}, "
              f"{dec['seconds']:.2f}s; {bound}")
    else:
        print(f"noise       {meta['noise']['family']} ({meta['noise']['sampler']}), "
              f"95% CI method {meta['ci']['method']}")
        if "postprocess" in meta:
            print(_postprocess_line(meta["postprocess"]))
    if args.measurements_out is not None:
        print(f"measurements records of the release → {args.measurements_out} (factorize.io.mbi_export)")
    if meta.get("ledger"):
        print(f"ledger      charged to dataset {meta['ledger']['dataset']!r} "
              f"(charge #{meta['ledger']['charge_id']}, {args.ledger})")
    if meta["test_mode"]:
        print("test_mode   true — NOT PRIVATE (--seed)")
    return EXIT_OK


def _postprocess_line(pp: dict[str, Any]) -> str:
    """``run``'s line on the post-processing: its method, n̂, iterations and convergence (or
    why it failed: the release stands without the column)."""
    if "failed" in pp:
        return f"postprocess {pp['method']} FAILED ({pp['failed']}): released without it"
    conv = (f"KKT residual {pp['kkt_residual']:.2g}" if "kkt_residual" in pp else
            f"Frank–Wolfe gap {pp['gap']:.3g}; RMSE ≤ {pp['rmse_bound']:.6g}")
    tables = (f"; integer tables of total {pp['total']}" if "total" in pp
              and pp["method"].startswith("integer") else "")
    return (f"postprocess {pp['method'].split(':')[0]}: n̂={pp['n_hat']:.6g}, "
            f"{pp['iterations']} iterations, {conv}{tables}"
            + ("" if pp.get("converged", True) else " (NOT converged: stopped at the iteration "
                                                    "or time limit)"))


@guarded
def _cmd_verify(args: argparse.Namespace) -> int:
    from factorize.kinds import kind_of_file
    from factorize.plan.files import read_plan_bytes

    source = read_plan_bytes(args.plan)  # one read: kind and plan come from the same bytes
    kind = kind_of_file(source)
    check = kind.verify(kind.load(source), certificate=not args.no_certificate,
                        allow_weak_guarantee=args.allow_weak_guarantee)
    if args.json:
        print(json.dumps(check.to_dict(), allow_nan=False))
    else:
        print("\n".join(check.lines()))
        print(f"{'PASS' if check.passed else 'REFUSED'} ({check.seconds:.2f}s)")
    return EXIT_OK if check.passed else EXIT_INPUT


@guarded
def _cmd_inspect(args: argparse.Namespace) -> int:
    from factorize.kinds import kind_of_plan, load_plan

    plan = load_plan(args.plan)
    status = _quick_status(plan)
    if args.json:
        print(json.dumps({**plan.manifest(), "verification": status}, allow_nan=False, default=str))
    else:
        print(f"status      {status}")
        print("\n".join(kind_of_plan(plan).summary(plan) + _precision_lines(plan)))
    return EXIT_OK


def _quick_status(plan: Any) -> str:
    """Whether the plan's claims hold (the checks of ``verify`` but the certificate's SVD):
    what ``inspect`` prints above the file's own numbers."""
    from factorize.kinds import kind_of_plan

    kind = kind_of_plan(plan)
    failures = kind.verify(plan, certificate=False).failures
    if not failures:
        return ("VERIFIED (noise, sensitivity and claims re-derived; certificate not re-checked: "
                "run factorize verify)" if kind.name in ("factorization", "structured") else "VERIFIED")
    return ("REFUSED — the numbers below are the file's claims, not verified: "
            + "; ".join(failures)[:500])


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry (tests, ``python -m factorize.cli.plan``)."""
    parser = argparse.ArgumentParser(prog="factorize")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    from factorize.cli.common import apply_thread_policy

    @guarded
    def command(args: argparse.Namespace) -> int:
        with apply_thread_policy(args):
            return args.func(args)

    return command(args)


if __name__ == "__main__":
    sys.exit(main())
