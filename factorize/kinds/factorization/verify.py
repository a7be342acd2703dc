"""Verification of a plan before any private data is read.

``verify_plan(plan)`` re-derives from the arrays and the public parameters everything the
release and its stated accuracy depend on, trusting none of the numbers in the manifest:

1. file integrity (digests, shapes, finite values, schema version) — ``kinds.factorization.codec``;
2. the manifest agrees with itself (the noise's guarantee, relation and dimension are the
   plan's; the certificate's norm and η are the factorization's);
3. the guarantee is within the documented ceilings (``privacy.policy``) unless overridden;
4. the workload rebuilt from its spec — custom matrices from the plan's own arrays, never a
   path (``plan.embedded``) — has the recorded fingerprint and shape, and the domain's
   attributes line up with its axes;
5. an approximate-γ₂ plan's η is at most ``rules.ETA_MAX_FRACTION``·max|W|;
6. ``W ≈ R·A`` within ``tol·max|W| + η`` (relative tolerance, so a workload of tiny entries
   gets no absolute slack): exactly per factor with a rounding allowance for Kronecker plans
   and small dense ones; for a large dense plan (k·N·m above ``EXACT_RESIDUAL_FLOPS``) by 24
   random ±1 probes — a residual entry above the limit passes one probe with probability
   ≤ ½, so all with ≤ 2⁻²⁴; the bias bound β the plan states must cover the residual;
7. the sensitivity of the strategy the executor measures (``privacy.lattice``), a certified
   upper bound (``privacy.sensitivity``), must not exceed the one the noise was calibrated
   to; the noise scale re-derived from the guarantee (``privacy.calibrate``, grid inflation,
   a power-of-two grid) must not exceed the plan's: an under-noised plan is refused with both
   numbers. (ε, δ) Gaussian noise is decided by its condition, without a root finder: the
   calibration's own acceptance test (``privacy.gaussian_approx_dp_holds``: Balle & Wang's
   exact characterisation, or the CKS20 zCDP conversion at the best Rényi order found, with
   the log-δ margin) must hold at the stated σ and fail at σ·(1 − 1e-9);
8. every accuracy statement is recomputed (``kinds.factorization.claims``): per-query std, RMSE, expected
   max, rounding and reconstruction bias, the n-bound weights, post-processing parameters
   (bounded iteration counts, non-negative tolerances, the least-squares bound coefficient),
   the strategy choice's candidate scores, and — with ``certificate=True``, the default, also
   for ``run`` — the certificate's upper and lower bounds and the any-mechanism bound.

The shared rules (guarantee policy, workload, noise) are ``plan.checks``'s. Only numpy, scipy.linalg, the workloads package and ``factorize.privacy`` are used; no solver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from factorize.numerics import U
from factorize.plan.check_record import PlanCheck, guard
from factorize.plan.checks import (
    check_guarantee_policy,
    check_sensitivity_exact,
    rebuild_workload,
    rederive_noise,
)
from factorize.plan.errors import PlanError
from factorize.plan.table_targets import check_table_targets
from factorize.planner.certificate import DEFAULT_RESIDUAL_TOL

from .plan import Plan

#: Above this many multiply-adds (k·N·m) a dense residual is checked by random probes.
EXACT_RESIDUAL_FLOPS = 2e9


N_PROBES = 24


def verify_plan(plan: Plan, *, certificate: bool = True, raise_on_failure: bool = False,
                workload: Any = None, allow_weak_guarantee: bool = False) -> PlanCheck:
    """Run the checks of the module docstring; ``raise_on_failure`` raises :class:`PlanRefused`."""
    from factorize.privacy import kron_sensitivity, kron_spread
    from factorize.privacy.lattice import measured_factors

    from . import claims

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    record = out.record
    record("file", True, "schema version, array digests, manifest digest, shapes, finite values")
    fact = plan.factorization
    m = fact.strategy_rows

    guard(out, "manifest", lambda: record("manifest", *claims.manifest_consistency(plan)))
    g = check_guarantee_policy(out, plan.guarantee, allow_weak_guarantee)
    W = rebuild_workload(plan.workload, workload, record, plan.embedded, plan.domain)
    out.workload = W
    usable = W is not None and out.ok("workload")
    if usable:  # per-table targets: the workload is D·W for the stated weights or targets
        guard(out, "table targets", lambda: check_table_targets(out, plan))

    # 5–6. η and the residual
    if usable:
        if plan.norm == "approx_gamma_2":
            guard(out, "eta", lambda: _check_eta(out, plan, W))
        guard(out, "W = R·A", lambda: record("W = R·A", *_residual_check(W, plan, out)))

    # 7. sensitivity and noise
    relation = plan.relation
    if g is not None:
        snorm = plan.noise.sensitivity_norm
        measured = guard(out, "sensitivity", lambda: measured_factors(fact.A_factors))
        sens = None if measured is None else guard(
            out, "sensitivity", lambda: kron_sensitivity(measured, snorm, relation))
        if sens is not None:
            out.recomputed_sensitivity = sens.value
            check_sensitivity_exact(out, plan.sensitivity_exact, sens.exact)
            measured_spread = kron_spread(measured, relation, plan.noise.grid) if plan.noise.spread is not None \
                else None
            rederive_noise(out, plan.noise, g, relation, sens.value, m, measured_spread)

    # 8. claims
    if usable:
        guard(out, "claims", lambda: claims.check_factorization_claims(out, plan, W, g, certificate))
    return out.finish(t0, raise_on_failure)


def _check_eta(out: PlanCheck, plan: Plan, W: Any) -> None:
    from factorize.plan.rules import ETA_MAX_FRACTION, check_eta

    eta = plan.certificate.eta
    try:
        check_eta(eta, W)
        out.record("eta", True, f"η = {eta:g} ≤ {ETA_MAX_FRACTION:g}·max|W|")
    except PlanError as exc:
        out.record("eta", False, str(exc))


def _residual_check(W: Any, plan: Plan, out: PlanCheck) -> tuple[bool, str]:
    """W ≈ R·Ã (Ã the measured strategy) within ``tol·max|W| + η``; also sets
    ``out.derived['residual']``, the certified max residual (or the limit, for probes)."""
    from factorize.plan.bias import residual_bound
    from factorize.plan.rules import workload_max_abs
    from factorize.privacy.lattice import measured_factors
    from workloads.structured import kron_leaves

    fact = plan.factorization
    eta = plan.certificate.eta or 0.0
    measured = measured_factors(fact.A_factors)
    limit = DEFAULT_RESIDUAL_TOL * workload_max_abs(W) + eta
    out.derived["residual_limit"] = limit
    leaves = kron_leaves(W)
    if fact.is_kron:
        if len(leaves) != len(fact.R_factors):
            return False, (f"the plan has {len(fact.R_factors)} Kronecker factors, the workload "
                           f"{len(leaves)}")
        Wf = [leaf.dense() for leaf in leaves]
        if [w.shape for w in Wf] != [(R.shape[0], A.shape[1]) for R, A in zip(fact.R_factors, fact.A_factors, strict=True)]:
            return False, "factor shapes differ from the workload's Kronecker factors"
        res = residual_bound(Wf, fact.R_factors, measured)
        out.derived["residual"] = res
        return res <= limit, f"max|W − RÃ| ≤ {res:.3g} (limit {limit:.3g}, per factor, certified)"
    R, A = fact.R_factors[0], measured[0]
    k, m = R.shape
    N = A.shape[1]
    if k * N * m <= EXACT_RESIDUAL_FLOPS:
        res = residual_bound([W.dense()], [R], [A])
        out.derived["residual"] = res
        return res <= limit, f"max|W − RÃ| ≤ {res:.3g} (limit {limit:.3g}, certified)"
    # random ±1 probes (see module docstring)
    from factorize.privacy import SecureRandom

    bits = SecureRandom().words((N * N_PROBES + 63) // 64)
    signs = np.unpackbits(bits.view(np.uint8))[: N * N_PROBES].reshape(N, N_PROBES)
    X = signs.astype(np.float64) * 2.0 - 1.0
    WX = np.asarray(W.matvec(X), dtype=np.float64)
    D = np.abs(WX - R @ (A @ X))
    absW = W.dense() if k * N <= 5e7 else None
    rowW = np.abs(absW).sum(axis=1) if absW is not None else np.abs(WX).max(axis=1) * N
    allowance = 4.0 * (N + m + 2) * U * (rowW + np.abs(R) @ np.abs(A).sum(axis=1))
    worst = float(np.max(D - allowance[:, None]))
    out.derived["residual"] = limit
    return worst <= limit, (f"{N_PROBES} random ±1 probes: max|(W − RÃ)x| − rounding allowance = "
                            f"{worst:.3g} (limit {limit:.3g}; a residual above the limit escapes "
                            f"with probability ≤ 2^-{N_PROBES})")
