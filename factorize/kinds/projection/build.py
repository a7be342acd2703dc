"""Building a projection plan (JL, covariance, relaxed projection; needs the planner's
geometry; verifying or running a projection plan never imports this module). The plan and its
claims are ``kinds.projection.plan``, its verification ``kinds.projection.verify``."""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.kinds.projection.codec import PROJECTION_SCHEMA_VERSION
from factorize.kinds.projection.plan import (
    MOMENT_KINDS,
    PROJECTION_KINDS,
    ProjectionPlan,
    moment_layout,
    moment_sensitivity,
    projection_claims,
)
from factorize.plan.errors import PlanError
from factorize.plan.records import workload_record

from .options import ProjectionOptions

if TYPE_CHECKING:
    from factorize.privacy import Guarantee
    from workloads import Workload


def build(options: ProjectionOptions) -> ProjectionPlan:
    """A ``jl`` / ``covariance`` / ``relaxed-projection`` plan from ``options``
    (:class:`ProjectionOptions`; module docstring).

    ``rng``: the randomness for T (jl); default OS randomness (``SecureRandom``) — T is public
    and data-independent, but a predictable T is not what a production plan should ship.
    """
    o = options
    workload, guarantee, kind, n, relation = o.workload, o.guarantee, o.mechanism, o.n, o.relation
    domain, noise_family, exact, rng = o.domain, o.noise_family, o.exact, o.rng
    allow_weak_guarantee = o.allow_weak_guarantee
    from factorize.plan.rules import choose_grid, default_domain
    from factorize.privacy import Neighbouring, PureDP, calibrate, parse_guarantee
    from factorize.privacy.policy import check_guarantee
    from workloads import parse_workload
    from workloads.domain import check_workload_axes
    from workloads.spec import embedded_files

    t0 = time.perf_counter()
    if kind not in PROJECTION_KINDS:
        raise PlanError(f"unknown projection mechanism {kind!r}; expected one of {PROJECTION_KINDS}")
    W = parse_workload(workload) if isinstance(workload, str) else workload
    if not W.spec:
        raise PlanError("the workload needs a spec (the plan rebuilds W from it)")
    g = parse_guarantee(guarantee) if isinstance(guarantee, str) else guarantee
    check_guarantee(g, n=int(n) if isinstance(n, int) and not isinstance(n, bool) else None,
                    allow_weak=allow_weak_guarantee)
    rel = Neighbouring.parse(relation)
    if rel.key != "replace":
        raise PlanError(f"the {kind} mechanism projects onto n·K and needs the dataset size n, "
                        "which is public only under replace-one neighbours (--neighbouring replace)")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise PlanError(f"the public dataset size n must be a positive integer, got {n!r}")
    n = int(n)
    k, N = W.shape
    arrays: dict[str, np.ndarray] = {}
    if kind == "jl":
        if not isinstance(g, PureDP):
            raise PlanError("the JL mechanism is the pure ε-DP mechanism of Nikolov 2023; use "
                            "--mechanism least-squares for (ε, δ)-DP or zCDP")
        if noise_family not in (None, "l2_knorm"):
            raise PlanError("the JL mechanism uses ℓ2-ball K-norm noise (Nikolov 2023, Lemma 15)")
        from factorize.geometry.jl import (
            choose_projection_dim,
            jl_sensitivity,
            project_workload,
            sample_projection,
            workload_diameter,
        )
        from factorize.privacy import SecureRandom

        Wd = W.dense()
        norms = np.linalg.norm(Wd, axis=0)
        diam = workload_diameter(Wd)
        choice = choose_projection_dim(n, g.epsilon, k, norms, diameter=diam, relation=rel.key)
        ell = int(choice.ell)
        T = sample_projection(ell, k, rng if rng is not None else SecureRandom())
        sens = jl_sensitivity(project_workload(T, Wd), rel.key)
        spec = calibrate(g, sensitivity_l2=sens, dim=ell, relation=rel, family="l2_knorm")
        arrays["T"] = T
    else:
        lay = moment_layout(W)
        family = noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
        snorm = "l1" if family == "laplace" else "l2"
        sens = moment_sensitivity(lay.m, snorm, rel.key)
        grid = choose_grid(sens, lay.pairs, snorm) if exact and family != "l2_knorm" else None
        spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                         sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=lay.pairs,
                         relation=rel, family=family)
    decoder, bounds, expected = projection_claims(kind, W, g, n, spec,
                                                  arrays["T"].shape[0] if kind == "jl" else None)
    if domain is not None:
        dom = domain
    elif kind in MOMENT_KINDS:
        from workloads import Domain

        dom = Domain([f"x{i}" for i in range(moment_layout(W).d)], [2] * moment_layout(W).d)
    else:
        dom = default_domain(W)
    if dom.size != N:
        raise PlanError(f"the workload has N={N} cells but the domain has {dom.size}")
    if kind in MOMENT_KINDS and list(dom.sizes) != [2] * moment_layout(W).d:
        raise PlanError(f"the {kind} mechanism needs {moment_layout(W).d} binary attributes in the "
                        "domain, got " + ", ".join(f"{a}={s}" for a, s in zip(dom.attributes, dom.sizes, strict=True)))
    check_workload_axes(W, dom)
    from factorize.io.provenance import versions

    return ProjectionPlan(
        kind=kind,
        workload=workload_record(W),
        domain=dom, relation=rel, guarantee=g, n=n, noise=spec, decoder=decoder,
        bounds=bounds, expected_error=expected, arrays=arrays, embedded=embedded_files(W),
        schema_version=PROJECTION_SCHEMA_VERSION,
        provenance={"versions": versions(), "mechanism": kind,
                    "plan_seconds": time.perf_counter() - t0,
                    "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")},
    )


def build_projection_plan(workload: Workload | str, guarantee: Guarantee | str, mechanism: str, *,
                          n: int, **fields: Any) -> ProjectionPlan:
    """:func:`build` of ``ProjectionOptions(workload=workload, guarantee=guarantee,
    mechanism=mechanism, n=n, **fields)`` — every other field is an option's name
    (:class:`~factorize.kinds.projection.options.ProjectionOptions`)."""
    return build(ProjectionOptions(workload=workload, guarantee=guarantee, mechanism=mechanism, n=n,
                                   **fields))
