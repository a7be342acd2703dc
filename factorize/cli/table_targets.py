"""``factorize plan --table-weights | --table-targets``: per-table precision targets
(``plan.table_targets``) on the command line.

    --table-weights "age,sex=4;cdf(age) by sex=1"      relative weights (default 1; *=W: the rest)
    --table-targets "sex,income=se:2.0;age,education=halfwidth:5;*=se:10"

The workload is rewritten to D·W before any planner sees it (:func:`prepare`); the plan built
for it carries the request and D (:func:`attach`), which the verifier re-derives.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from factorize.cli.errors import UsageError

HELP_WEIGHTS = ("relative weight per table, 'NAME=W;NAME=W' (names as inspect prints them: "
                "age,sex or cdf(age) by sex, or table(NAME,SPEC)'s; *=W for the rest, default 1): "
                "gamma_f then minimises Σ W_t·(total variance of table t), gamma_2 max √W_t·SE_t")
HELP_TARGETS = ("target per table, 'NAME=se:S;NAME=halfwidth:H' (S: the standard error of the "
                "table's least precise cell; H: its 95%% half-width, S = H/c with c the interval "
                "multiplier of the plan's noise; *=… for the rest): the plan minimises the worst "
                "SE_t/S_t (with --norm gamma_2; gamma_f: Σ var/S_t²) and inspect says which "
                "targets the budget meets")


def add_options(p: Any) -> None:
    """Add ``--table-weights`` and ``--table-targets`` to the ``plan`` parser."""
    p.add_argument("--table-weights", default=None, metavar="NAME=W;…", help=HELP_WEIGHTS)
    p.add_argument("--table-targets", default=None, metavar="NAME=se:S;…", help=HELP_TARGETS)


@dataclass(frozen=True)
class Prepared:
    """D·W (``workload``), the domain the tables were named over, W and the plan's record."""

    workload: Any
    domain: Any
    original: Any
    record: dict[str, Any]


def prepare(args: argparse.Namespace, domain: Any) -> Prepared | None:
    """D·W for the request (None without one); a :class:`UsageError` for a request that the
    chosen mechanism cannot take, ``PlanError`` for one that names no table of W."""
    from factorize.plan.rules import default_domain
    from factorize.plan.table_targets import scaled_workload
    from workloads import parse_workload

    weights, targets = getattr(args, "table_weights", None), getattr(args, "table_targets", None)
    if weights is None and targets is None:
        return None
    if weights is not None and targets is not None:
        raise UsageError("give --table-weights or --table-targets, not both")
    if args.mechanism != "factorization" or args.norm not in ("gamma_f", "gamma_2"):
        raise UsageError("--table-weights / --table-targets plan the factorization mechanism for "
                         "--norm gamma_f or gamma_2")
    W = parse_workload(args.workload)
    dom = domain if domain is not None else default_domain(W)
    if weights is not None:
        DW, record = scaled_workload(W, dom, str(weights), "weights", None)
    else:
        DW, record = scaled_workload(W, dom, str(targets), "targets", _multiplier(args, str(targets)))
    return Prepared(DW, dom, W, record)


def _multiplier(args: argparse.Namespace, text: str) -> float | None:
    """The interval multiplier a half-width target is converted with: the noise's the plan will
    have (Gaussian unless pure DP or ``--noise laplace|knorm``); None without such a target."""
    from factorize.plan.manifest import CHEBYSHEV_NOISE, Z_NOISE
    from factorize.plan.table_targets import parse_request
    from factorize.privacy import parse_guarantee

    if all(k != "halfwidth" for k, _ in parse_request(text, "targets").values()):
        return None
    noise = args.noise
    if noise == "auto":
        noise = "laplace" if parse_guarantee(args.privacy).kind == "pure_dp" else "gaussian"
    return Z_NOISE if noise == "gaussian" else CHEBYSHEV_NOISE


def attach(plan: Any, prepared: Prepared | None) -> Any:
    """``plan`` carrying the record (``plan.table_targets.with_targets``; unchanged without
    targets)."""
    from factorize.plan.table_targets import with_targets

    return plan if prepared is None else with_targets(plan, prepared.record)
