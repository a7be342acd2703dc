"""Verification of a structured plan from first principles, at any domain size.

``verify_structured_plan(plan)`` trusts none of the manifest's numbers:

1. file integrity (``structured_plan.load_structured_plan``: digests, canonical header,
   finite arrays, a family encoding that decodes into consistent blocks and terms);
2. the guarantee within the documented ceilings (``privacy.policy``);
3. the workload rebuilt from its spec (fingerprint, shape; custom matrices from the plan's own
   arrays), the domain lined up with its axes, and its blocks (``structured.workload_blocks``)
   equal to the reconstruction's output blocks — the same subsets and weights, in order;
4. the family's structure: a residual plan measures exactly the downward closure of the
   workload's subsets (a subset outside it, or a missing or duplicated one, is refused);
5. ``W = R·Ã`` **exactly in the algebra**: per output block the terms form the full product
   of per-attribute choices (or, for a sum of Kronecker products per block, every pattern of
   row-mean / centred parts sums to the workload's weight), and each per-attribute identity is
   checked densely with certified rounding (``structured.identity``) — no randomized check is
   used; the certified residual β
   must be within ``tol·max|W|``;
6. the sensitivity of the measured strategy recomputed (``structured.sensitivity``, certified)
   and the noise re-derived from the guarantee (``checks.rederive_noise``): an under-noised
   plan is refused with both numbers;
7. the claims: the certificate (upper, lower and gap re-derived from its stored coefficients
   and dual witness — ``planner.marginal_optimum.verify_marginal_solution`` — or, for a union plan,
   from each factor's re-verified certificate), the value the plan achieves, every accuracy
   statement (``structured_plan.expected_error``) and the bias section;
8. the post-processing record, if any (``claims.check_marginal_postprocess``): a known method,
   bounded iterations, a tolerance, a workload of marginal tables.

Only numpy, the workloads package, ``factorize.privacy`` and the algebra's verifier are used;
no solver.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from factorize.kinds.structured.plan import StructuredPlan, achieved_norm, expected_error
from factorize.numerics import is_number
from factorize.plan.check_record import PlanCheck, guard, same_number
from factorize.plan.checks import (
    check_guarantee_policy,
    check_sensitivity_exact,
    rebuild_workload,
    rederive_noise,
)
from factorize.plan.files import json_number
from factorize.plan.table_targets import check_table_targets

if TYPE_CHECKING:
    from factorize.structured.workload_blocks import WorkloadBlock


def verify_structured_plan(plan: StructuredPlan, *, certificate: bool = True,
                           raise_on_failure: bool = False, workload: Any = None,
                           allow_weak_guarantee: bool = False) -> PlanCheck:
    """The checks of the module docstring; ``raise_on_failure`` raises ``PlanRefused``."""
    from factorize.structured.sensitivity import strategy_sensitivity, strategy_spread

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    record = out.record
    record("file", True, "schema version, array digests, manifest digest, finite values, "
                         f"{plan.family} encoding decoded ({len(plan.strategy.blocks)} blocks, "
                         f"{len(plan.reconstruction.terms)} terms)")
    g = check_guarantee_policy(out, plan.guarantee, allow_weak_guarantee)
    W = rebuild_workload(plan.workload, workload, record, plan.embedded, plan.domain)
    out.workload = W
    if W is not None and out.ok("workload"):  # per-table targets: the workload is D·W
        guard(out, "table targets", lambda: check_table_targets(out, plan))
    measured = guard(out, "strategy", lambda: plan.strategy.measured())
    if measured is None:
        return out.finish(t0, raise_on_failure)
    recon = plan.reconstruction.rebased(measured)
    wblocks = None
    if W is not None and out.ok("workload"):
        wblocks = guard(out, "structure", lambda: _structure(out, plan, W))
        if wblocks is not None:
            guard(out, "W = R·A", lambda: _identity(out, recon, W, wblocks))
    snorm = plan.noise.sensitivity_norm
    sens = guard(out, "sensitivity", lambda: strategy_sensitivity(measured, snorm, plan.relation))
    if sens is not None and g is not None:
        out.recomputed_sensitivity = sens.value
        check_sensitivity_exact(out, plan.provenance.get("sensitivity_exact"), sens.exact)
        spread = (strategy_spread(measured, plan.relation, plan.noise.grid) if plan.noise.spread is not None
                  else None)  # plans written before the spread inflate over all m
        req = rederive_noise(out, plan.noise, g, plan.relation, sens.value, measured.m, spread)
        if req is not None and req.accounting != plan.noise.accounting:
            out.record("noise accounting", False, "the plan states another accounting than the "
                       f"calibration's: {plan.noise.accounting[:120]!r}")
    if wblocks is not None and out.ok("W = R·A") and sens is not None:
        guard(out, "claims", lambda: _claims(out, plan, W, recon, certificate))
    if W is not None and out.ok("workload"):
        from factorize.plan.checks import check_marginal_postprocess

        guard(out, "postprocess", lambda: check_marginal_postprocess(out, plan.postprocess, W,
                                                                     plan.domain.sizes))
    return out.finish(t0, raise_on_failure)


def _structure(out: PlanCheck, plan: StructuredPlan, W: Any) -> list[WorkloadBlock] | None:
    """Steps 3–4: the workload's blocks against the plan's output blocks and family rules."""
    from factorize.structured.workload_blocks import workload_blocks

    wblocks = workload_blocks(W, plan.domain.sizes)
    rows = tuple(b.rows for b in wblocks)
    if rows != plan.reconstruction.out_rows:
        out.record("structure", False, f"the reconstruction's {len(plan.reconstruction.out_rows)} "
                   f"output blocks do not have the workload's {len(wblocks)} blocks' row counts")
        return None
    problems: list[str] = []
    if plan.family == "residual":
        problems = _residual_rules(plan, wblocks)
    out.record("structure", not problems,
               f"{len(wblocks)} workload blocks match the reconstruction's output blocks"
               + (f"; the residual subsets are the workload's downward closure "
                  f"({len(plan.strategy.blocks)} subsets)" if plan.family == "residual" else "")
               + ("" if not problems else " — REFUSED: " + "; ".join(problems[:4])))
    return wblocks if not problems else None


def _residual_rules(plan: StructuredPlan, wblocks: list[WorkloadBlock]) -> list[str]:
    from itertools import combinations

    from factorize.structured.residual import unpad_subsets

    d = len(plan.domain.sizes)
    problems = []
    out_support = unpad_subsets(plan.encoding["recon.support"], d, "recon.support")
    weights = plan.encoding["recon.weight"].reshape(-1)
    supports: list[tuple[int, ...]] = []
    for o, wb in enumerate(wblocks):
        S = wb.marginal_support
        if S is None:
            return [f"workload block {o} is not a marginal"]
        supports.append(S)
        if out_support[o] != S:
            problems.append(f"output block {o} reconstructs {out_support[o]}, the workload's "
                            f"block is {S}")
        if float(weights[o]) != float(wb.weight):
            problems.append(f"output block {o} has weight {float(weights[o])!r}, the workload's "
                            f"{float(wb.weight)!r}")
    closure = {T for S in supports for r in range(len(S) + 1) for T in combinations(S, r)}
    have = [b.support for b in plan.strategy.blocks]
    extra = [T for T in have if T not in closure]
    missing = sorted(closure - set(have), key=lambda T: (len(T), T))
    if extra:
        problems.append(f"{len(extra)} measured subset(s) outside the workload's closure "
                        f"(e.g. {extra[0]})")
    if missing:
        problems.append(f"{len(missing)} subset(s) of the closure not measured (e.g. {missing[0]})")
    if len(set(have)) != len(have):
        problems.append("a residual subset is measured twice")
    return problems


def _identity(out: PlanCheck, recon: Any, W: Any, wblocks: list) -> None:
    from factorize.planner.certificate import DEFAULT_RESIDUAL_TOL
    from factorize.structured.identity import reconstruction_residual

    beta = reconstruction_residual(recon, wblocks)
    out.derived["wblocks"] = wblocks
    wmax = max(b.max_abs() for b in wblocks)
    limit = DEFAULT_RESIDUAL_TOL * wmax
    out.derived["residual"] = beta
    out.derived["beta"] = beta
    out.record("W = R·A", beta <= limit,
               f"max|W − RÃ| ≤ {beta:.3g} (limit {limit:.3g}), exact in the algebra: every output "
               "block's terms are the full product of per-attribute choices (or a sum checked in "
               "the basis of row means and centred rows), each per-attribute identity checked "
               "densely with certified rounding (no random probes)")


def _claims(out: PlanCheck, plan: StructuredPlan, W: Any, recon: Any, certificate: bool) -> None:
    """Step 7 (module docstring)."""
    from factorize.plan.rules import BIAS_NOTE
    from factorize.privacy import sampled_variance
    from factorize.structured.records import check as check_n_bound
    from factorize.structured.sensitivity import strategy_sensitivity

    problems: list[str] = []
    beta = out.derived["beta"]
    expected = expected_error(plan.noise, plan.reconstruction, beta, plan.norm,
                              sampled_variance(plan.noise))
    _compare(problems, "expected_error", plan.expected_error, expected)
    n_bound = check_n_bound(plan.bias, plan.n_weights, recon, out.derived["wblocks"], beta)
    bias = {"residual_bound": beta, "n_bound": n_bound["n_bound"], "note": BIAS_NOTE}
    if "n_block" in n_bound:
        bias["n_block"] = n_bound["n_block"]
    _compare(problems, "bias", plan.bias, bias)
    delta = strategy_sensitivity(recon.strategy, "l2", "add_remove").value
    achieved = achieved_norm(plan.norm, delta, plan.reconstruction)
    c = plan.certificate
    from factorize.structured.families import codec

    methods = codec(plan.family).certificate_methods()
    if c["method"] not in methods or c["norm"] != plan.norm:
        problems.append("certificate.method / norm describe another certificate")
    if not same_number(c["achieved"], achieved):
        problems.append(f"certificate.achieved {c['achieved']!r} ≠ {achieved:.10g}")
    cert_line = "certificate not re-checked"
    if certificate:
        upper, lower, gap = _certificate(plan, W)
        for key, stated, v in (("upper", c["upper"], upper), ("lower", c["lower"], lower),
                               ("gap", c["gap"], gap)):
            if not same_number(stated, v, absolute=1e-12 if key == "gap" else 0.0):
                problems.append(f"certificate.{key} {stated!r} ≠ {v:.10g}")
        from factorize.plan.lower_bound import laplace_bound, laplace_bound_problems

        lap = laplace_bound(plan.norm, lower, plan.guarantee, plan.relation.key, plan.noise.family)
        problems += laplace_bound_problems(c.get("laplace_factorization"), lap, plan.expected_error)
        if lower > achieved * (1.0 + 1e-9):
            problems.append(f"the lower bound {lower:.10g} exceeds the value {achieved:.10g} the "
                            "plan achieves: the certificate or the strategy is wrong")
        cert_line = (f"certificate re-verified: {lower:.10g} ≤ {plan.norm} ≤ {upper:.10g}; the plan "
                     f"achieves {achieved:.10g}")
    problems += _choice_problems(plan, recon)
    from factorize.plan.search_record import search_problems

    problems += search_problems(plan.provenance.get("strategy_search"), plan.family, plan.norm,
                                expected)
    out.derived.update(expected_error=expected, bias=bias, **n_bound)
    out.record("claims", not problems,
               f"{cert_line}; per-query variances, RMSE, expected max, bias β = {beta:.3g} "
               "re-derived from the structure"
               + ("" if not problems else " — the plan states otherwise: " + "; ".join(problems[:4])))


def _choice_problems(plan: StructuredPlan, recon: Any) -> list[str]:
    """The planner's family choice (``provenance.strategy_choice``, when stated): the chosen
    family is the plan's, its Laplace score is recomputed, and no runner-up is stated better
    (a runner-up's own score would need its plan, so it is only checked no better)."""
    from factorize.kinds.structured.plan import gaussian_rmse, laplace_rmse

    choice = plan.provenance.get("strategy_choice")
    if choice is None:
        return []
    if not isinstance(choice, dict) or choice.get("chosen") != plan.family:
        return [f"strategy_choice names {choice.get('chosen') if isinstance(choice, dict) else choice!r}, "
                f"the plan's family is {plan.family}"]
    score = choice.get("rmse_at_epsilon_1")
    if score is None:
        return ["strategy_choice lists runners-up without the chosen family's score"] \
            if choice.get("runners_up") else []
    mine = laplace_rmse(recon.strategy, plan.reconstruction, plan.relation)
    problems = []
    if not same_number(score, mine):
        problems.append(f"strategy_choice.rmse_at_epsilon_1 {score!r} ≠ {mine:.10g}")
    key: Literal["rmse_at_epsilon_1", "gaussian_rmse_per_sigma"] = "rmse_at_epsilon_1"
    if "gaussian_rmse_per_sigma" in choice:  # chosen under Gaussian noise: by that score
        key = "gaussian_rmse_per_sigma"
        stated = choice[key]
        mine = gaussian_rmse(recon.strategy, plan.reconstruction, plan.relation)
        if not (is_number(stated) and same_number(stated, mine)):
            problems.append(f"strategy_choice.gaussian_rmse_per_sigma {stated!r} ≠ {mine:.10g}")
    for r in choice.get("runners_up") or []:
        v = r.get(key) if isinstance(r, dict) else "?"
        stated_v = json_number(v)
        if v is not None and (stated_v is None or stated_v < mine * (1.0 - 1e-9)):
            problems.append(f"a runner-up is stated better ({v!r}) than the chosen {mine:.6g}")
    return problems


def _compare(problems: list[str], name: str, stated: Mapping[str, Any], recomputed: Mapping[str, Any]) -> None:
    """Every recomputed value of the record ``name`` against the plan's: strings and None
    equal, numbers to 1e-9 (``same_number``); a key the plan leaves out is a problem."""
    for key, value in recomputed.items():
        if key not in stated:
            problems.append(f"{name}.{key} missing")
        elif isinstance(value, str) or value is None:
            if stated[key] != value:
                problems.append(f"{name}.{key}")
        elif not same_number(stated[key], value):
            problems.append(f"{name}.{key} {stated[key]!r} ≠ {value:.6g}")


def _certificate(plan: StructuredPlan, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap) re-derived from the stored certificate arrays."""
    from factorize.numerics import relative_gap
    from factorize.structured.families import codec
    from factorize.structured.symmetry import verify_bound

    upper, lower, gap = codec(plan.family).verify_certificate(plan, W)
    if "symmetry" in plan.certificate:
        lower = max(lower, verify_bound(plan, W))
        gap = relative_gap(upper, lower)
    if "subspace" in plan.certificate:
        from factorize.structured import subspace_bound

        lower = max(lower, subspace_bound.verify_bound(plan, W))
        gap = relative_gap(upper, lower)
    return upper, lower, gap
