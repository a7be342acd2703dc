"""Building a mechanism plan (needs the planner, hence cvxpy, unless a certificate is given).

``build(FactorizationOptions(workload=..., guarantee=..., ...))`` (``KIND.build``; ``build_plan``
is its keyword form):

1. the factorization and its certificate: ``planner.solve`` (per-factor SDPs), or a
   ``Certificate`` from any source, which is re-verified here (``certificate.verify``) —
   any non-negative dual witness gives a valid lower bound;
2. the sensitivity of the strategy the executor measures (``privacy.lattice.measured_factors``:
   A truncated to 53 bits below each factor's largest entry) under the chosen neighbouring
   relation (``privacy.kron_sensitivity``, a certified upper bound: L2 for Gaussian / K-norm
   noise, L1 for Laplace);
3. the noise (``privacy.calibrate``): analytic / discrete Gaussian for (ε, δ)-DP, σ = Δ/√(2ρ)
   for ρ-zCDP, Laplace with the L1 sensitivity or the ℓ2-ball K-norm for pure ε-DP.
   Exact sampling (default) releases on a lattice γZ; γ is the largest power of two with
   ``γ√m ≤ 10⁻³·Δ₂`` (Gaussian) or ``γm ≤ 10⁻³·Δ₁`` (Laplace), so the rounding inflation of the
   sensitivity (``privacy.discretized_sensitivity``) costs at most 0.1% of the noise scale,
   and only ``s/m`` of that, s the spread (``privacy.kron_spread``: the most coordinates
   neighbours can move; 1 for the identity, the tree depth for a tree);
   powers of two keep the sampler's rationals small and ``y/γ`` exact;
4. the reconstruction's bias (``plan.bias``): the certified residual β ≥ |W − RÃ| and the
   weights b with Wᵀb ≥ μ·1 that let the executor bound n from the release;
5. the expected error (``plan.expected_error``) and provenance.

Refused: guarantees beyond the documented ceilings (``privacy.policy``) unless
``allow_weak_guarantee``; an approximation radius η above ``ETA_MAX_FRACTION``·max|W| (at that
radius the zero matrix is nearly feasible and the release says little); a domain whose
attributes do not line up with the workload's axes.
"""

from __future__ import annotations

import datetime as _dt
import time
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.choices import NoiseFamily, Norm
from factorize.io.provenance import versions
from factorize.plan.build_inputs import plan_inputs
from factorize.plan.errors import PlanError
from factorize.planner.certificate import Certificate, verify
from workloads import Workload

if TYPE_CHECKING:
    from factorize.factorization import Factorization
    from factorize.privacy import Guarantee, NoiseSpec
from factorize.kinds.factorization.codec import SCHEMA_VERSION
from factorize.kinds.factorization.plan import Plan, expected_error
from factorize.plan.lower_bound import any_mechanism_lower_bound, laplace_bound
from factorize.plan.manifest import POSTPROCESS_METHODS
from factorize.plan.records import BiasRecord, PostprocessRecord, StrategyChoice, workload_record
from factorize.plan.rules import (
    CHOICE_MAX_CELLS,
    CHOICE_MAX_ENTRIES,
    LS_GAP_FRACTION,
    check_eta,
    choice_objective,
    choose_grid,
    workload_max_abs,
)

from .options import FactorizationOptions

#: Plan mechanisms ``build_plan`` writes: the factorization mechanism and two geometric ones.
MECHANISMS = ("factorization", "ellipsoid", "least-squares")
LS_MAX_ITER = 20000


def _dense_witness(witness):
    """A Kronecker witness (tuples of factor weights) as one dense witness (⊗ of the factors)."""
    from factorize.planner.certificate import Gamma2Witness, GammaFWitness

    if isinstance(witness, GammaFWitness):
        return GammaFWitness(q=(reduce(np.kron, witness.q),))
    return Gamma2Witness(p=(reduce(np.kron, witness.p),), q=(reduce(np.kron, witness.q),))


def build(options: FactorizationOptions) -> Plan:  # noqa: C901 (counted allow-list)
    """A verified mechanism plan from ``options`` (:class:`FactorizationOptions`); see the module
    docstring. Raises ``PlanError`` on bad input.

    ``mechanism``: ``factorization`` (the optimal W = R·A of ``norm``) or ``ellipsoid``
    (Nikolov, Talwar & Zhang 2013, Alg. 1–2: the base-decomposition Gaussian mechanism, written as W = R·S by
    ``geometry.ellipsoid_factorization``; its certificate keeps the optimal dual witness, so
    the plan's gap says how far the ellipsoid mechanism is from the optimal factorization),
    or ``least-squares`` (Nikolov, Talwar & Zhang 2013, Alg. 3: the optimal factorization's noise, then the executor
    projects the released answers onto n·conv{w_j} by Frank–Wolfe — post-processing of released
    values only; its error bound is ``plan.least_squares_rmse_bound``). The seed projects only
    the pieces of dimension ≥ εn; projecting every piece never increases the error, since the
    projection onto a convex set containing Wh is non-expansive toward it.

    ``public_n``: the dataset size, public only under replace-one neighbours (the data must then
    have exactly that many records); under add/remove the executor estimates n from the
    released values.

    ``search_seed``: base seed of the pure-DP strategy search (``factorize.pure_dp``) run for
    Laplace noise; recorded in the plan, so the same inputs and seed re-plan the same strategy.
    """
    o = options
    workload, guarantee, norm, eta, relation, domain = (o.workload, o.guarantee, o.norm, o.eta,
                                                        o.relation, o.domain)
    noise_family, exact, postprocess, certificate = o.noise_family, o.exact, o.postprocess, o.certificate
    gap_tol, mechanism, public_n, search_seed = o.gap_tol, o.mechanism, o.public_n, o.search_seed
    if mechanism not in MECHANISMS:
        raise PlanError(f"unknown mechanism {mechanism!r}; expected one of {', '.join(MECHANISMS)}")
    if mechanism == "ellipsoid" and (certificate is not None or norm == "approx_gamma_2"):
        raise PlanError("the ellipsoid mechanism takes neither an explicit certificate nor "
                        "approx_gamma_2 (its strategy is fixed by the ellipsoid; norm picks the "
                        "witness, gamma_f or gamma_2)")
    from factorize.privacy import calibrate, kron_sensitivity, kron_spread

    t0 = time.perf_counter()
    W, g, rel, dom = plan_inputs(workload, guarantee, relation, domain, o.allow_weak_guarantee)
    if norm == "approx_gamma_2" or (certificate is not None and certificate.norm == "approx_gamma_2"):
        eta = check_eta(certificate.eta if certificate is not None else eta, W)
    if public_n is not None:
        if mechanism != "least-squares":
            raise PlanError("a public dataset size is used only by the least-squares mechanism")
        if rel.key != "replace":
            raise PlanError("the dataset size is public only under replace-one neighbours; under "
                            "add/remove it is private (the executor estimates it from the release)")
        if isinstance(public_n, bool) or int(public_n) != public_n or public_n < 1:
            raise PlanError(f"the public dataset size must be a positive integer, got {public_n!r}")
    if mechanism == "least-squares" and postprocess not in (None, "none"):
        raise PlanError("the least-squares mechanism's post-processing is its projection; "
                        "do not also give --postprocess")
    if postprocess not in (None, "none", *POSTPROCESS_METHODS):
        raise PlanError(f"unknown post-processing {postprocess!r}; expected one of "
                        f"{('none',) + POSTPROCESS_METHODS}")

    solves: list[dict] = []
    if certificate is None:
        from factorize.planner.routes import DEFAULT_GAP_TOL, CertifiedFactorization, solve

        tol = gap_tol or DEFAULT_GAP_TOL
        result = solve(W, norm, eta=eta, options=o.solver_options, gap_tol=tol)
        if not isinstance(result, CertifiedFactorization):
            # a marginal-algebra solution has no dense factors for the executor: plan the
            # same workload densely (the executor needs R and A; fine while W fits in memory)
            result = solve(W, norm, eta=eta, method="dual", options=o.solver_options, gap_tol=tol)
        if not isinstance(result, CertifiedFactorization):
            raise PlanError("the planner gave no dense factorization (R, A) for the executor")
        cert, v = result.certificate, result.verification
        if mechanism == "ellipsoid":
            from factorize.geometry import ellipsoid_factorization

            witness = _dense_witness(cert.witness)
            cert = Certificate(norm=norm, factorization=ellipsoid_factorization(W.dense()),
                               witness=witness)
            v = verify(cert, W.dense())
            if not v.passed:
                raise PlanError("the ellipsoid mechanism's certificate does not verify: "
                                + "; ".join(v.failures))
        solves = [s.to_dict() if hasattr(s, "to_dict") else {**s.__dict__, "shape": list(s.shape)}
                  for s in result.solves]
        source = "planner"
    else:
        cert = certificate
        v = verify(cert, W)
        if not v.passed:
            raise PlanError("the given certificate does not verify: " + "; ".join(v.failures))
        source = "explicit certificate (re-verified)"
    family: NoiseFamily = noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
    choice = None
    if certificate is None and mechanism == "factorization" and norm in ("gamma_f", "gamma_2") \
            and (family != "gaussian" or rel.key == "replace"):
        cert, choice, v_new = _choose_strategy(cert, W, g, rel, family, exact, norm, search_seed)
        v = v_new or v
    solve_seconds = time.perf_counter() - t0
    fact = cert.factorization
    m = fact.strategy_rows

    snorm = "l1" if family == "laplace" else "l2"
    from factorize.privacy.lattice import measured_factors

    measured = measured_factors(fact.A_factors)
    sens = kron_sensitivity(measured, snorm, rel)
    if not sens.value > 0:
        raise PlanError("the strategy has zero sensitivity")
    grid = choose_grid(sens.value, m, snorm) if exact and family != "l2_knorm" else None
    if exact and family == "l2_knorm":
        exact = False  # no exact sampler for the K-norm: recorded as sampler "float"
    spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                     sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=m,
                     relation=rel, family=family,
                     spread=kron_spread(measured, rel, grid) if grid is not None else None)
    bias, n_weights = plan_bias(W, fact, measured, cert.eta, rel.key, public_n)
    from workloads.spec import embedded_files

    plan = Plan(
        workload=workload_record(W),
        domain=dom,
        relation=rel,
        guarantee=g,
        certificate=cert,
        bounds={"norm": cert.norm, "upper": v.upper, "lower": v.lower, "gap": v.gap,
                "residual": v.residual, "residual_limit": v.residual_limit,
                "any_mechanism": any_mechanism_lower_bound(W, g, rel.key, public_n),
                "laplace_factorization": laplace_bound(cert.norm, v.lower, g, rel.key, family)},
        noise=spec,
        sensitivity_exact=sens.exact,
        postprocess=_postprocess_spec(mechanism, postprocess, public_n, fact, spec),
        expected_error=expected_error(fact, spec, bias["residual_bound"]),
        bias=bias, n_weights=tuple(n_weights), embedded=embedded_files(W),
        schema_version=SCHEMA_VERSION,
        provenance={"versions": versions(), "mechanism": mechanism, "strategy_choice": choice,
                    "certificate_source": source, "solves": solves,
                    "solve_seconds": solve_seconds,
                    "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")},
    )
    return plan


#: Optimised (pure-DP) candidates are formed densely up to this many entries of W (the
#: verifier does not rebuild them: it recomputes only the chosen one's score).
OPTIMIZED_MAX_ENTRIES = 50_000_000


def _choose_strategy(cert: Certificate, W: Workload, g: Any, rel: Any, family: NoiseFamily,
                     exact: bool, norm: Norm, search_seed: int = 0) -> tuple[Certificate, StrategyChoice, Any]:
    """The optimal γ_F / γ₂ factorization is optimal for Gaussian noise under add/remove
    neighbours only. For Laplace (pure DP: L1 sensitivity) or K-norm noise, or replace
    neighbours, the plan takes the best, by its own calibrated objective, of that optimum and
    the standard strategies of ``factorize.planner.strategies`` (histogram, W itself, b-ary trees for
    ranges, per-factor products) and, for Laplace noise, the strategies optimised for it
    (``factorize.pure_dp.candidates``: p-Identity, Kronecker, flat-refined, union and
    marginal-weight strategies found from deterministic starts and seeded restarts; their
    search records go into ``choice["optimized"]``). The certificate keeps the optimum's dual
    witness: still a valid lower bound on the norm, whose gap then says how far the chosen
    strategy is from it in that norm."""
    from factorize.planner.strategies import strategy_candidates

    candidates = strategy_candidates(W, family, norm, rel.key, CHOICE_MAX_CELLS, CHOICE_MAX_ENTRIES)
    optimized: dict[str, dict[str, Any]] = {}
    if family == "laplace":
        from factorize.pure_dp.candidates import optimized_candidates

        for c in optimized_candidates(W, seed=search_seed, max_cells=CHOICE_MAX_CELLS,
                                      max_entries=OPTIMIZED_MAX_ENTRIES):
            candidates.append((c.name, c.factorization))
            optimized[c.name] = c.record
    if not candidates:
        return cert, {"chosen": "optimal factorization", "reason": "too large for the candidates"}, None
    scores = {"optimal factorization": choice_objective(cert.factorization, g, rel, family, exact, norm)}
    facts = {"optimal factorization": cert.factorization}
    for name, fact in candidates:
        try:
            scores[name] = choice_objective(fact, g, rel, family, exact, norm)
            facts[name] = fact
        except Exception:  # noqa: BLE001 - a candidate that cannot be calibrated is skipped
            continue
    best = min(scores, key=scores.__getitem__)
    choice: StrategyChoice = {"chosen": best, "objective": "rmse" if norm == "gamma_f" else "per_query_std_max",
                              "candidates": scores}
    if optimized:
        choice["search_seed"] = int(search_seed)
        choice["optimized"] = {n: r for n, r in optimized.items() if n in scores}
    if best == "optimal factorization":
        return cert, choice, None
    fact = facts[best]
    same_layout = fact.is_kron and cert.factorization.is_kron and \
        len(fact.R_factors) == len(cert.factorization.R_factors)
    witness = cert.witness if same_layout else _dense_witness(cert.witness)
    new = Certificate(norm=cert.norm, factorization=fact, witness=witness)
    v = verify(new, W)  # the workload itself: verify densifies it, or uses its structure
    if not v.passed:  # never ship an unverified plan: keep the optimum
        choice["chosen"] = "optimal factorization"
        choice["rejected"] = f"{best}: " + "; ".join(v.failures)
        return cert, choice, None
    return new, choice, v


def plan_bias(W: Workload, fact: Any, measured: list[np.ndarray], eta: float | None,
              relation: str, public_n: int | None) -> tuple[BiasRecord, list[np.ndarray]]:
    """The plan's ``bias`` section and n-bound weights (``plan.bias``): β certified from the
    factors (dense or per Kronecker factor; for a dense plan too large to multiply out, the
    residual check's limit), and the weights found for W. An approximate-γ₂ plan whose bias
    cannot be bounded from the release is refused."""
    from factorize.plan.bias import find_weights, residual_bound
    from factorize.planner.certificate import DEFAULT_RESIDUAL_TOL
    from workloads.structured import kron_leaves

    leaves = kron_leaves(W)
    dense_leaves = None
    if fact.is_kron and len(leaves) == len(fact.R_factors):
        dense_leaves = [leaf.dense() for leaf in leaves]
    elif not fact.is_kron and W.shape[0] * W.shape[1] <= 5e7:
        dense_leaves = [W.dense()]
    from .verify import EXACT_RESIDUAL_FLOPS

    k, N = W.shape
    m = fact.strategy_rows
    if dense_leaves is not None and (fact.is_kron or k * N * m <= EXACT_RESIDUAL_FLOPS):
        beta = residual_bound(dense_leaves, fact.R_factors, measured)
    else:
        beta = DEFAULT_RESIDUAL_TOL * workload_max_abs(W) + (eta or 0.0)
    method, weights = find_weights(dense_leaves, W)
    if method != "cap":
        from factorize.plan.bias import certified_mu

        mu, b_l1, _ = certified_mu(method, weights, W, dense_leaves)
        if not mu > beta * b_l1:
            method, weights = "cap", []
    if eta and method == "cap" and public_n is None:
        raise PlanError("an approximate-γ₂ plan's bias η·n must be bounded from the release, but "
                        "no non-negative combination of this workload's queries counts every "
                        "record; use an exact factorization (gamma_f / gamma_2)")
    return {"residual_bound": beta, "n_bound": method,
            "note": "|((W − R·Ã)h)_i| ≤ residual_bound·n; n bounded from the release by the "
                    "weights nbound.* (Wᵀb ≥ μ > residual_bound·‖b‖₁), or by 2^53 ('cap')"}, weights


def _postprocess_spec(mechanism: str, postprocess: str | None, public_n: int | None,
                      fact: Factorization, noise: NoiseSpec) -> PostprocessRecord | None:
    """The plan's post-processing step (run by the executor on released values only)."""
    from factorize.kinds.factorization.plan import least_squares_bound_coefficient

    if mechanism == "least-squares":
        k = fact.shape[0]
        energy = noise.variance_bound * fact.frobenius_R() ** 2  # E‖z‖² = k·RMSE²
        return {"method": "least_squares", "body": "conv_columns",
                "n": None if public_n is None else int(public_n),
                "gap_tol": LS_GAP_FRACTION * energy, "max_iter": LS_MAX_ITER,
                "bound_coefficient": least_squares_bound_coefficient(fact, noise),
                "bound_note": "E||y_hat - Wh||^2 <= coefficient * n (Gaussian noise, n exact); "
                              f"k = {k}"}
    if postprocess in (None, "none"):
        return None
    from factorize.postprocess.plan_option import record

    return record(postprocess, structured=False)


def build_plan(workload: Workload | str, guarantee: Guarantee | str, **fields: Any) -> Plan:
    """``factorize.build_plan``: :func:`build` of ``FactorizationOptions(workload=workload,
    guarantee=guarantee, **fields)`` — every other field is an option's name
    (:class:`~factorize.kinds.factorization.options.FactorizationOptions`)."""
    return build(FactorizationOptions(workload=workload, guarantee=guarantee, **fields))
