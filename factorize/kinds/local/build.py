"""Planning a local-model release (needs the planner; verifying, inspecting or running a local
plan never imports this module): the approximate-γ₂ factorization over an η grid, compressed
and normalised, with its certificate and the bounds of ``kinds.local.plan``."""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from factorize.privacy import Guarantee
    from workloads import Workload

from factorize.kinds.local.plan import (
    ETA_GRID,
    LocalPlan,
    compress,
    derived_bounds,
    n_needed,
    predicted_errors,
    randomizer_spec,
)
from factorize.plan.errors import PlanError
from factorize.plan.records import LocalBounds, PredictedErrors, RandomizerRecord, workload_record

from .options import LocalOptions


def build(options: LocalOptions) -> LocalPlan:
    """The local plan of the module docstring from ``options`` (:class:`LocalOptions`):
    ``options.eta`` fixes η, else the grid is searched."""
    o = options
    workload, guarantee, n, randomizer = o.workload, o.guarantee, o.n, o.randomizer
    eta, alpha, domain, allow_weak_guarantee = o.eta, o.alpha, o.domain, o.allow_weak_guarantee
    from factorize.plan.rules import check_eta, default_domain
    from factorize.planner.routes import CertifiedFactorization, solve
    from factorize.privacy import parse_guarantee
    from factorize.privacy.policy import check_guarantee
    from workloads import parse_workload
    from workloads.domain import check_workload_axes
    from workloads.spec import embedded_files

    t0 = time.perf_counter()
    W = parse_workload(workload) if isinstance(workload, str) else workload
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    check_guarantee(g, allow_weak=allow_weak_guarantee)
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise PlanError(f"the planning dataset size n must be a positive integer, got {n!r}")
    if eta is not None:
        check_eta(eta, W)
    kind = randomizer or ("l2" if g.kind == "pure_dp" else "gaussian")
    Wd = W.dense()
    wmax = float(np.max(np.abs(Wd)))
    grid = [eta] if eta is not None else [e * wmax for e in ETA_GRID]
    # (score, predicted errors, η, R, A, the solve, the randomizer) of the best η so far
    best: tuple[float, PredictedErrors, float, np.ndarray, np.ndarray, CertifiedFactorization,
                RandomizerRecord] | None = None
    for e in grid:
        res = solve(W, "approx_gamma_2", eta=float(e))
        if not isinstance(res, CertifiedFactorization):
            raise PlanError("the approximate-γ₂ solve gave no factorization (R, A)")
        fact = res.factorization
        R, A = fact.R_factors[0], fact.A_factors[0]
        if len(fact.R_factors) > 1:
            from functools import reduce
            R = reduce(np.kron, fact.R_factors)
            A = reduce(np.kron, fact.A_factors)
        R, A = compress(R, A)
        from factorize.numerics import column_norms_upper

        c = float(np.max(column_norms_upper(A, "l2", "the strategy A")))
        A, R = A / c, R * c  # max_x ‖a_x‖ ≤ 1 up to the rounding of the division (≤ 1 + 2u)
        spec = randomizer_spec(kind, g, A.shape[0])
        pred = predicted_errors(R, float(e), spec["variance"], int(n))
        # with a target α: the η needing the fewest users; else the smallest error at n
        score = (n_needed(R, float(e), spec["variance"], alpha) if alpha is not None
                 else pred["predicted_max_error"])
        if best is None or score < best[0]:
            best = (score, pred, float(e), R, A, res, spec)
    if best is None:
        raise PlanError("no approximation radius η to plan with (the η grid is empty)")
    _, pred, e, R, A, res, spec = best
    from factorize.factorization import Factorization
    from factorize.planner.certificate import ApproxGamma2Witness, Certificate, verify

    w = res.certificate.witness
    if not isinstance(w, ApproxGamma2Witness):
        raise PlanError(f"the approximate-γ₂ solve returned a {type(w).__name__}, not its (U, d) witness")
    U = np.asarray(w.U, dtype=np.float64)
    d = np.asarray(w.d, dtype=np.float64)
    residual = float(np.max(np.abs(Wd - R @ A)))

    # the certificate of the stored (compressed, normalised) factors, as the verifier sees it
    cert = Certificate("approx_gamma_2", Factorization.dense(R, A), ApproxGamma2Witness(U=U, d=d), eta=e)
    v = verify(cert, Wd)
    if not v.passed:
        raise PlanError("the compressed local factorization does not verify: " + "; ".join(v.failures))
    bounds: LocalBounds = {"gamma2_upper": v.upper, "gamma2_lower": v.lower, "gap": v.gap,
                           "residual": residual, "plan_n": int(n),
                           "target_alpha": alpha, "eta_grid": [float(x) for x in grid],
                           **derived_bounds(R, A, Wd, e, g, spec, int(n), alpha, cert)}
    dom = domain if domain is not None else default_domain(W)
    check_workload_axes(W, dom)
    return LocalPlan(
        embedded=embedded_files(W),
        workload=workload_record(W),
        domain=dom, guarantee=g, randomizer=spec, eta=e, R=R, A=A, U=U, d=d, bounds=bounds,
        provenance={"mechanism": "local", "plan_seconds": time.perf_counter() - t0,
                    "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")})


def build_local_plan(workload: Workload | str, guarantee: Guarantee | str, *, n: int,
                     **fields: Any) -> LocalPlan:
    """:func:`build` of ``LocalOptions(workload=workload, guarantee=guarantee, n=n, **fields)``
    — every other field is an option's name (:class:`~factorize.kinds.local.options.LocalOptions`)."""
    return build(LocalOptions(workload=workload, guarantee=guarantee, n=n, **fields))
