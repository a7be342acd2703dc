"""Verification of a projection plan (``jl``, ``covariance``, ``relaxed-projection``) before any
private data is read: re-derives what privacy depends on from the plan's arrays and public
parameters — the workload from its spec (fingerprint), the measurement (``T·W`` for jl; the ±1
second moments of ``parity:d:2`` for the moment kinds, with d binary attributes in the domain),
its sensitivity under replace-one neighbours (``jl_sensitivity`` of TW; the exact flip-set
formula ``projection_plan.moment_sensitivity``, cross-checked against the columns of W when
2^d is small), and the noise scale (``privacy.calibrate``); a plan whose scale is below the
re-derived one is refused. The stated error bound is recomputed too
(``projection_plan.projection_claims``). The executor (``kinds.projection.release``) runs it."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from factorize.errors import InternalError
from factorize.kinds.projection.plan import ProjectionPlan, moment_layout, moment_sensitivity
from factorize.plan.check_record import PlanCheck
from factorize.plan.checks import rebuild_workload
from factorize.plan.errors import PlanError

#: Below this many cells the moment sensitivity is also recomputed from W's columns.
BRUTE_FORCE_CELLS = 4096


def verify_projection_plan(plan: ProjectionPlan, *, raise_on_failure: bool = False,
                           workload: Any = None, allow_weak_guarantee: bool = False) -> PlanCheck:
    """The checks of the module docstring; ``raise_on_failure`` raises ``PlanRefused``."""
    from factorize.plan.check_record import guard
    from factorize.plan.checks import check_guarantee_policy, rederive_noise

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    record = out.record
    record("file", True, "format, schema version, array digests, manifest digest, finite values")
    g = check_guarantee_policy(out, plan.guarantee, allow_weak_guarantee)
    W = rebuild_workload(plan.workload, workload, record, plan.embedded, plan.domain)
    out.workload = W
    noise = plan.noise
    if W is not None and out.ok("workload"):
        measured = guard(out, "measurement", lambda: _measurement_sensitivity(plan, W))
        if measured is not None and g is not None:
            sens, dim, detail = measured
            out.recomputed_sensitivity = sens
            record("measurement", True, detail)
            req = rederive_noise(out, noise, g, plan.relation, sens, dim)
            if req is not None and out.ok("noise"):
                guard(out, "claims", lambda: _check_claims(out, plan, W, g))
    return out.finish(t0, raise_on_failure)


def _check_claims(out: PlanCheck, plan: ProjectionPlan, W: Any, g: Any) -> None:
    """The decoder parameters, bounds and expected error, recomputed (``projection_claims``)."""
    from factorize.kinds.projection.plan import projection_claims
    from factorize.plan.check_record import same_number

    ell = plan.arrays["T"].shape[0] if plan.kind == "jl" else None
    decoder, bounds, expected = projection_claims(plan.kind, W, g, plan.n, plan.noise, ell,
                                                  plan.bounds.get("lower_witness"))
    problems = []
    # each stated record against the recomputed one, key by key
    sections: list[tuple[str, Mapping[str, Any], Mapping[str, Any]]] = [
        ("decoder", plan.decoder, decoder), ("bounds", plan.bounds, bounds),
        ("expected_error", plan.expected_error, expected)]
    for name, stated, recomputed in sections:
        for key, value in recomputed.items():
            if key not in stated:
                if plan.schema_version < 2 and (key.startswith("rmse_bound_95") or key == "lower_witness"):
                    continue  # schema 1 states neither: nothing to compare
                problems.append(f"{name}.{key} missing")
            elif isinstance(value, (str, dict)) or value is None:
                if stated[key] != value:
                    problems.append(f"{name}.{key}")
            elif isinstance(value, int) and not isinstance(value, bool):
                if stated[key] != value or isinstance(stated[key], bool):
                    problems.append(f"{name}.{key} {stated[key]!r} ≠ {value}")
            elif not same_number(stated[key], value):
                problems.append(f"{name}.{key} {stated[key]!r} ≠ {value:.6g}")
    out.derived.update(decoder=decoder, bounds=bounds, expected_error=expected)
    out.record("claims", not problems,
               f"decoder, RMSE bound {bounds['upper_rmse']:.6g} and expected error re-derived"
               + ("" if not problems else " — the plan states otherwise: " + ", ".join(problems[:4])))


def _measurement_sensitivity(plan: ProjectionPlan, W: Any) -> tuple[float, int, str]:
    """(sensitivity, measurement dimension, description) recomputed from first principles."""
    snorm = plan.noise.sensitivity_norm
    if plan.kind == "jl":
        from factorize.geometry.jl import jl_sensitivity

        T = plan.arrays["T"]
        ell = T.shape[0]
        if not np.all(np.abs(np.abs(T) * math.sqrt(ell) - 1.0) <= 1e-12):
            raise PlanError("T is not a ±1/√ℓ matrix (the plan's error bound assumes one)")
        if snorm != "l2":
            raise PlanError("the JL mechanism's noise is calibrated to l2 sensitivity")
        sens = jl_sensitivity(T @ W.dense(), "replace")
        return sens, ell, f"T ∈ R^({ell}×{T.shape[1]}), ±1/√ℓ; TW recomputed"
    lay = moment_layout(W)
    sizes = plan.domain.sizes
    if list(sizes) != [2] * lay.d:
        raise PlanError(f"the moment mechanisms need d={lay.d} binary attributes in the domain")
    sens = moment_sensitivity(lay.m, snorm, "replace")
    detail = (f"±1 second moments of d={lay.d} binary attributes"
              + (" augmented by the constant 1 (marginal cells)" if lay.augmented else "")
              + f": {lay.pairs} measured pairs")
    if 2 ** lay.d <= BRUTE_FORCE_CELLS:
        from factorize.privacy.sensitivity import sensitivity

        cells = np.arange(2 ** lay.d)
        codes = (cells[:, None] >> np.arange(lay.d - 1, -1, -1)) & 1  # attribute 0 slowest
        A = np.stack([lay.moments(c[None, :], np.ones(1)) for c in codes], axis=1)
        brute = float(sensitivity(A, snorm, "replace").value)
        if not math.isclose(brute, sens, rel_tol=1e-9):
            raise InternalError(f"moment sensitivity {sens} disagrees with the measurement's columns ({brute})")
        detail += "; sensitivity cross-checked against the measurement's 2^d columns"
    return sens, lay.pairs, detail
