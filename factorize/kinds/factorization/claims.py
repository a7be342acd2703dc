"""Every accuracy statement a factorization plan carries, recomputed from its arrays and the
rebuilt workload (``kinds.factorization.verify.verify_plan`` step 8), or refused.

A plan file is signed by nothing: anyone who can rewrite it can also fix its digests. So the
verifier trusts no number in the manifest. The noise is re-derived in ``checks``; here:

* **bias** — the stated residual bound β must cover the certified residual of W − RÃ, and the
  n-bound weights must count every record (``plan.bias``: μ > β·‖b‖₁);
* **expected error** — per-query std (min, max, mean), RMSE, expected max, rounding bias,
  bias per record, CI method and multiplier: recomputed from R, the noise and β;
* **post-processing** — a known method, bounded iteration counts (``MAX_ITERATIONS``),
  non-negative finite tolerances; for least squares the gap target and the bound coefficient
  recomputed, a public n only under replace neighbours; for a structured plan
  (:func:`check_marginal_postprocess`) a workload of marginal tables;
* **strategy choice** — every standard candidate's score recomputed by the same calibration
  (the optimum's, when it was not chosen, cannot be: the optimum is not in the file, so it
  must at least not beat the chosen one);
* **certificate** (with ``certificate=True``) — upper and lower bounds, gap and residual by
  ``certificate.verify`` (one SVD per factor), and the any-mechanism bound by
  ``plan.lower_bound``.

Numbers are compared to 1e-9 relative; a missing or mistyped field is a refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from factorize.choices import Norm
from factorize.kinds.factorization.plan import Plan, expected_error
from factorize.numerics import is_int, is_number
from factorize.plan.check_record import PlanCheck, guard, same_number
from factorize.plan.checks import iterations_and_tol, max_iterations
from factorize.plan.errors import PlanError
from factorize.plan.files import json_number
from factorize.plan.manifest import POSTPROCESS_METHODS

_EE_STRINGS = ("expected_max_method", "variance_note", "ci_method", "bias_note")


def manifest_consistency(plan: Plan) -> tuple[bool, str]:
    """Fields the manifest states twice must agree."""
    problems: list[str] = []
    n = plan.noise
    if n.guarantee != plan.guarantee:
        problems.append("noise.guarantee differs from guarantee")
    if n.relation is not plan.relation:
        problems.append("noise.relation differs from neighbouring")
    if n.dim != plan.factorization.strategy_rows:
        problems.append("noise.dim differs from the strategy's rows")
    if plan.bounds["norm"] != plan.norm:
        problems.append("certificate.norm differs from factorization.norm")
    # a plan may record no provenance: its mechanism is then the factorization mechanism
    mech = plan.provenance.get("mechanism", "factorization")
    post = plan.postprocess
    if (mech == "least-squares") != (post is not None and post["method"] == "least_squares"):
        problems.append("the least-squares mechanism and its post-processing go together")
    return (not problems, "; ".join(problems) if problems else
            "guarantee, relation, dimension and norm stated consistently")


def check_factorization_claims(out: PlanCheck, plan: Plan, W: Any, g: Any, certificate: bool) -> None:
    """Record the claim checks of the module docstring on ``out``."""
    beta = guard(out, "bias", lambda: _check_bias(out, plan, W))
    if beta is not None:
        guard(out, "expected error", lambda: _check_expected_error(out, plan, beta))
    guard(out, "postprocess", lambda: _check_postprocess(out, plan))
    guard(out, "strategy search", lambda: _check_search(plan))
    if g is not None and out.ok("noise"):
        guard(out, "strategy choice", lambda: _check_strategy_choice(out, plan, W, g))
    if certificate and out.ok("W = R·A"):
        guard(out, "certificate", lambda: _check_certificate(out, plan, W))
        if g is not None:
            guard(out, "any-mechanism bound", lambda: _check_any_mechanism(out, plan, W, g))


def _check_bias(out: PlanCheck, plan: Plan, W: Any) -> float:
    from factorize.plan.bias import METHODS, certified_mu
    from workloads.structured import kron_leaves

    bias = plan.bias
    residual = out.derived.get("residual")
    if residual is None:
        raise PlanError("the residual W − RÃ was not certified")
    beta: float
    weights: tuple[np.ndarray, ...]
    if bias is None:
        if plan.schema_version >= 2:
            raise PlanError(f"a schema-{plan.schema_version} plan must state its bias")
        beta, method, weights = residual, "cap", ()  # schema 1 states no bias: derive it, cap n
    else:
        stated, n_bound, weights = json_number(bias["residual_bound"]), bias["n_bound"], plan.n_weights
        if stated is None or stated < 0:
            raise PlanError(f"bias.residual_bound must be a finite number ≥ 0, got "
                            f"{bias['residual_bound']!r}")
        if not isinstance(n_bound, str) or n_bound not in METHODS:
            raise PlanError(f"unknown n-bound method {n_bound!r}")
        beta, method = stated, n_bound
        if (method == "weights") != bool(weights):
            raise PlanError("n-bound weights are present if and only if the method is 'weights'")
    if beta < residual:
        out.record("bias", False, f"the plan states a residual bound {beta:.3g} below the certified "
                   f"residual {residual:.3g} of W − RÃ (its intervals would be too narrow)")
        return float(beta)
    leaves = kron_leaves(W)
    if plan.factorization.is_kron and len(leaves) == len(plan.factorization.R_factors):
        dense = [leaf.dense() for leaf in leaves]
    elif W.shape[0] * W.shape[1] <= 5e7:
        dense = [W.dense()]
    else:
        dense = None
    mu, b_l1, _ = certified_mu(method, list(weights), W, dense)
    if method != "cap" and not mu > beta * b_l1:
        out.record("bias", False, f"the n-bound weights count every record only μ = {mu:.3g} times, "
                   f"not more than the bias β·‖b‖₁ = {beta * b_l1:.3g}")
        return float(beta)
    if plan.certificate.eta and method == "cap":
        out.record("bias", False, "an approximate-γ₂ plan needs n-bound weights: its bias η·n "
                   "cannot be bounded otherwise")
        return float(beta)
    out.derived.update(beta=float(beta), n_bound=method, n_weights=list(weights), mu=mu, b_l1=b_l1)
    out.record("bias", True, f"|bias_i| ≤ {beta:.3g}·n (certified residual {residual:.3g}); n bounded "
               + ("from the release by weights with μ = " + f"{mu:.6g}" if method != "cap"
                  else "by the record cap 2^53"))
    return float(beta)


def _check_expected_error(out: PlanCheck, plan: Plan, beta: float) -> None:
    exp = expected_error(plan.factorization, plan.noise, beta)
    stated: Mapping[str, Any] = plan.expected_error  # compared key by key with the recomputed
    recomputed: Mapping[str, Any] = exp
    bad = []
    for key, value in recomputed.items():
        if key not in stated:
            if key in ("bias_per_record", "bias_note") and plan.schema_version < 2:
                continue  # schema 1 states no bias
            bad.append(f"{key} missing")
        elif isinstance(value, str):
            if stated[key] != value:
                bad.append(key)
        elif not same_number(stated[key], value, absolute=1e-300):
            bad.append(f"{key} {stated[key]!r} ≠ {value:.6g}")
    out.derived["expected_error"] = exp
    out.record("expected error", not bad,
               f"per-query std ≤ {exp['per_query_std_max']:.6g}, RMSE {exp['rmse']:.6g}, "
               f"E[max] ≤ {exp['expected_max_bound']:.6g}"
               + ("" if not bad else " — the plan states otherwise: " + ", ".join(bad[:4])))








def _check_postprocess(out: PlanCheck, plan: Plan) -> None:
    from factorize.kinds.factorization.plan import least_squares_bound_coefficient
    from factorize.plan.rules import LS_GAP_FRACTION

    post = plan.postprocess
    if post is None:
        out.record("postprocess", True, "none")
        return
    if post["method"] not in POSTPROCESS_METHODS:
        raise PlanError(f"unknown post-processing {post!r}")
    if post["method"] in ("nonneg", "integer"):
        it, tol = iterations_and_tol(post)
        out.record("postprocess", True, f"{post['method']}: at most {it} iterations, tolerance {tol:g}")
        return
    it = max_iterations(post)
    fact = plan.factorization
    n = post.get("n")
    if n is not None and not (is_int(n) and n >= 1):
        raise PlanError(f"the public dataset size must be a positive integer, got {n!r}")
    if n is not None and plan.relation.key != "replace":
        raise PlanError("a public dataset size needs replace-one neighbours")
    if post.get("body") != "conv_columns":
        raise PlanError(f"unknown least-squares body {post.get('body')!r}")
    energy = plan.noise.variance_bound * fact.frobenius_R() ** 2
    gap = LS_GAP_FRACTION * energy
    coef = least_squares_bound_coefficient(fact, plan.noise)
    problems = []
    if not same_number(post.get("gap_tol"), gap):
        problems.append(f"gap_tol {post.get('gap_tol')!r} ≠ {gap:.6g}")
    if not same_number(post.get("bound_coefficient"), coef):
        problems.append(f"bound_coefficient {post.get('bound_coefficient')!r} ≠ {coef!r}")
    out.record("postprocess", not problems,
               f"least_squares: at most {it} iterations, gap target {gap:.6g}"
               + ("" if not problems else " — the plan states otherwise: " + ", ".join(problems)))


def _check_search(plan: Plan) -> None:
    """The family search's record (``plan.search_record``), when the plan states one."""
    from factorize.plan.search_record import search_problems

    record = plan.provenance.get("strategy_search")
    if record is None:
        return
    problems = search_problems(record, "dense", plan.norm, plan.expected_error)
    if problems:
        raise PlanError("; ".join(problems[:4]))


def _check_strategy_choice(out: PlanCheck, plan: Plan, W: Any, g: Any) -> None:
    from factorize.plan.rules import CHOICE_MAX_CELLS, CHOICE_MAX_ENTRIES, choice_objective
    from factorize.planner.strategies import OPTIMIZED_PREFIX, strategy_candidates

    choice = plan.provenance.get("strategy_choice")
    if not choice or not choice.get("candidates"):
        return
    cands = choice["candidates"]
    if not isinstance(cands, dict) or choice.get("chosen") not in cands:
        raise PlanError("strategy_choice must name the chosen candidate among its candidates")
    objective = choice.get("objective")
    norms: dict[str | None, Norm] = {"rmse": "gamma_f", "per_query_std_max": "gamma_2"}
    norm = norms.get(objective)
    if norm is None:
        raise PlanError(f"unknown strategy-choice objective {objective!r}")
    rel = plan.relation
    family = plan.noise.family
    exact = plan.noise.is_exact
    spread = plan.noise.spread is not None  # plans written before the spread: inflation over m
    own = choice_objective(plan.factorization, g, rel, family, exact, norm, spread)
    recomputed = {name: choice_objective(fact, g, rel, family, exact, norm, spread)
                  for name, fact in strategy_candidates(W, family, norm, rel.key, CHOICE_MAX_CELLS,
                                                        CHOICE_MAX_ENTRIES)}
    problems = []
    if not same_number(cands[choice["chosen"]], own):
        problems.append(f"the chosen {choice['chosen']!r} scores {own:.6g}, the plan says "
                        f"{cands[choice['chosen']]!r}")
    for name, value in cands.items():
        if name == "optimal factorization" or name.startswith(OPTIMIZED_PREFIX):
            # not re-derivable without re-running its solve or search: the chosen one was
            # recomputed above; another may only be stated no better than it
            if name != choice["chosen"] and not (is_number(value) and value >= own * (1 - 1e-9)):
                problems.append(f"{name!r} is said to beat the chosen strategy")
            continue
        if name not in recomputed or not same_number(value, recomputed[name]):
            problems.append(f"{name} {value!r} ≠ {recomputed.get(name)!r}")
    bounded = sum(1 for n in cands if n != choice["chosen"]
                  and (n == "optimal factorization" or n.startswith(OPTIMIZED_PREFIX)))
    out.record("strategy choice", not problems,
               f"{choice['chosen']} chosen: its {objective} and {len(cands) - 1 - bounded} standard "
               f"candidates' re-derived; {bounded} other(s) (the γ_F optimum, optimised searches) "
               "checked no better"
               + ("" if not problems else " — " + "; ".join(problems[:3])))


def _check_certificate(out: PlanCheck, plan: Plan, W: Any) -> None:
    from factorize.planner.certificate import verify

    v = verify(plan.certificate, W)
    out.certificate = {"upper": v.upper, "lower": v.lower, "gap": v.gap, "residual": v.residual,
                       "passed": v.passed}
    b = plan.bounds
    problems = []
    for key, stated, value in (("upper", b["upper"], v.upper), ("lower", b["lower"], v.lower),
                               ("residual_limit", b["residual_limit"], v.residual_limit)):
        if not same_number(stated, value):
            problems.append(f"{key} {stated!r} ≠ {value:.12g}")
    if not same_number(b["gap"], v.gap, absolute=1e-12):  # an infinite gap is never confirmed
        problems.append(f"gap {b['gap']!r} ≠ {v.gap:.3g}")
    # the residual is a rounding-level quantity: equal up to 1e-4 of its tolerance
    tolerance = v.residual_limit - (plan.certificate.eta or 0.0)  # tol·max|W|, η aside
    if not same_number(b["residual"], v.residual, absolute=1e-4 * max(tolerance, 0.0)):
        problems.append(f"residual {b['residual']!r} ≠ {v.residual:.3g}")
    from factorize.plan.lower_bound import laplace_bound, laplace_bound_problems

    lap = laplace_bound(plan.norm, v.lower, plan.guarantee, plan.relation.key, plan.noise.family)
    problems += laplace_bound_problems(b.get("laplace_factorization"), lap, plan.expected_error)
    out.record("certificate", v.passed and not problems,
               v.summary() + ("" if not problems else "; the plan states otherwise: " + ", ".join(problems)))


def _check_any_mechanism(out: PlanCheck, plan: Plan, W: Any, g: Any) -> None:
    from factorize.plan.lower_bound import any_mechanism_lower_bound

    stated = plan.bounds.get("any_mechanism")
    n = None if plan.postprocess is None else plan.postprocess.get("n")
    witness = None if stated is None else stated.get("witness")
    if stated is not None and stated["bound"].startswith("spectral") and witness is None:
        raise PlanError("the spectral any-mechanism bound must state its witness subset")
    # the spectral bound at the stated witness (no search: it holds for any subset); the
    # packing bound (pure DP with a public n) is recomputed in full
    recomputed = any_mechanism_lower_bound(W, g, plan.relation.key, n, witness=witness)
    if recomputed is None:
        ok = stated is None
    else:
        ok = (stated is not None and same_number(stated["value"], recomputed["value"])
              and (stated["bound"], stated["measure"], stated["binds"])
              == (recomputed["bound"], recomputed["measure"], recomputed["binds"])
              and stated.get("witness") == recomputed.get("witness"))
    out.record("any-mechanism bound", ok,
               ("none (workload too large)" if recomputed is None else
                f"RMSE ≥ {recomputed['value']:.4g} ({recomputed['bound']})")
               + ("" if ok else f" — the plan states {stated!r}"))


__all__ = ["check_factorization_claims", "manifest_consistency"]
