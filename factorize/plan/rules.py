"""The rules a plan is built and verified by, in one module both sides import: limits,
tolerances, the lattice grid, the strategy-choice objective. The builders (``kinds.factorization.build``,
``kinds.structured.build_family``, ``kinds.local.plan``'s planner) and the verifiers (``plan.checks``,
``kinds.factorization.claims``, ``kinds.structured.verify``) apply the same function, so a plan the builder
writes is checked by exactly the rule it was made by; nothing here imports a builder or a
solver."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from factorize.kinds.factorization.plan import expected_error
from workloads import Domain, Workload

from .errors import PlanError

#: Rounding inflation allowed, relative to the base sensitivity.
GRID_INFLATION = 1e-3
#: Largest approximation radius η of an approximate-γ₂ plan, as a fraction of max|W| (the
#: local planner's grid stops at 0.3; at η ≥ max|W| the zero matrix would be feasible).
ETA_MAX_FRACTION = 0.5


def workload_max_abs(W: Workload) -> float:
    """``max|W|`` from the structure (the product of the Kronecker leaves' maxima for a
    Kronecker product; the largest block's for a union)."""
    from workloads.structured import kron_leaves

    leaves = kron_leaves(W)
    if len(leaves) > 1:
        return math.prod(workload_max_abs(leaf) for leaf in leaves)
    blocks = getattr(W, "blocks", None)
    if blocks:
        return max(workload_max_abs(b) for b in blocks)
    matrix = getattr(W, "matrix", None)
    if matrix is not None:
        data = matrix.data if hasattr(matrix, "tocoo") else matrix
        return float(np.max(np.abs(data))) if np.size(data) else 0.0
    return float(np.max(np.abs(W.dense())))


def check_eta(eta: Any, W: Workload) -> float:
    """``η`` validated: a finite number with 0 ≤ η ≤ ETA_MAX_FRACTION·max|W|."""
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta < 0:
        raise PlanError(f"the approximation radius η must be a finite number ≥ 0, got {eta!r}")
    limit = ETA_MAX_FRACTION * workload_max_abs(W)
    if eta > limit:
        raise PlanError(f"the approximation radius η = {eta:g} exceeds {ETA_MAX_FRACTION:g}·max|W| "
                        f"= {limit:g}: at that radius the release says little about W")
    return float(eta)


def default_domain(W: Workload) -> Domain:
    """``x0..x{d-1}`` with the sizes of the workload's finest axis layout
    (``workloads.domain.workload_axes``: a Kronecker product's leaves, a marginal workload's
    attributes), provided every other layout is a coarsening of it; one attribute ``x0`` of
    N cells for a workload without axes."""
    from workloads.domain import coarsens, workload_axes

    layouts = sorted(workload_axes(W), key=len, reverse=True)
    sizes = list(layouts[0]) if layouts and layouts[0] else [int(W.shape[1])]
    if not all(coarsens(lay, sizes) for lay in layouts):
        raise PlanError("the workload's blocks have axis layouts that no single domain fits; "
                        "pass --domain")
    return Domain([f"x{i}" for i in range(len(sizes))], sizes)


def choose_grid(base_sensitivity: float, m: int, norm: str) -> float:
    """Largest power of two γ with inflation ``γ√m`` (l2) or ``γm`` (l1) ≤ 10⁻³·Δ."""
    spread = math.sqrt(m) if norm == "l2" else float(m)
    target = GRID_INFLATION * base_sensitivity / spread
    return float(2.0 ** math.floor(math.log2(target)))


#: Frank–Wolfe gap target of the least-squares estimator, relative to E‖z‖² = k·RMSE².
LS_GAP_FRACTION = 1e-4
#: Strategy choice among standard candidates only below these sizes (dense candidates).
CHOICE_MAX_CELLS = 2048
CHOICE_MAX_ENTRIES = 4_000_000
def choice_objective(fact: Any, g: Any, rel: Any, family: str, exact: bool, norm: str,
               spread: bool = True) -> float:
    """The plan's error objective for a strategy, calibrated exactly as ``build_plan`` does:
    RMSE (γ_F) or the largest per-query std (γ₂). ``spread=False``: the lattice inflation over
    all m coordinates, as plans written before the spread (``privacy.kron_spread``) did."""
    from factorize.privacy import calibrate, kron_sensitivity, kron_spread
    from factorize.privacy.lattice import measured_factors

    snorm = "l1" if family == "laplace" else "l2"
    measured = measured_factors(fact.A_factors)
    sens = kron_sensitivity(measured, snorm, rel)
    m = fact.strategy_rows
    grid = choose_grid(sens.value, m, snorm) if exact and family != "l2_knorm" else None
    spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                     sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=m,
                     relation=rel, family=family,
                     spread=kron_spread(measured, rel, grid) if grid is not None and spread else None)
    e = expected_error(fact, spec)
    return e["rmse"] if norm == "gamma_f" else e["per_query_std_max"]


#: The bias statement of a structured plan (``kinds.structured.build_family.plan_bias``,
#: re-derived by ``kinds.structured.verify``).
BIAS_NOTE = ("|((W − R·Ã)h)_i| ≤ residual_bound·n; n bounded from the release by the "
             "strategy's measurement of the total ('total'), by weights nbound.* on one workload "
             "block's answers ('weights'; probability 1e-3 either way), or by 2^53 ('cap')")
