"""Running a structured plan: marginal tables from the data engine, exact lattice measurement,
noise once, reconstruction with exact per-query variances, labeled answers.

Measurement (before the charge): the distinct supports of the strategy's blocks are the
marginal tables to read (``executor.data.load_marginals``: one grouped scan inside DuckDB or
Spark, the same validation and messages as every run; memory proportional to the tables'
cells, never to N); ``q = round(Ã_b m_b / γ)`` exactly per block (``structured.strategy``).

Release (after the charge): ``ỹ = γ(q + Y)`` with exact discrete Gaussian / Laplace Y
(``privacy.sample_lattice``); answers ``R ỹ`` term by term; standard error ``√v·‖r_i‖`` (v the
variance of the noise actually sampled); 95% interval ``± (c·se + (γ/2)‖r_i‖₁ + β·n⁺)`` with n⁺
bounded from the release (``structured.records``: the total's measurement, or weights on one
block's answers) — coverage ≥ 95% by the union bound, as for dense plans (``kinds.factorization.plan``). The
answers' labels (their table, cell and query) come from the workload, as for every plan kind
(``executor.pipeline``, ``executor.labels``).

Post-processing (a plan with a ``postprocess`` record; marginal workloads only): the released
tables projected onto non-negative consistent tables and, for ``integer``, rounded to integer
tables of one total (``executor.postprocess.marginal_postprocess``), written beside the
estimates as ``estimate_postprocessed``; it reads released values only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from factorize.kinds.structured.plan import StructuredPlan
from factorize.plan.check_record import PlanCheck

from .session import ExecutionError


def measure(plan: StructuredPlan, tables: Any) -> np.ndarray:
    """The exact measurement from the marginal tables (module docstring)."""
    strategy = plan.strategy.measured()
    if plan.noise.sampler == "float":
        return strategy.apply_tables(tables)
    if plan.noise.grid is None:  # verified plans with an exact sampler state their lattice grid
        raise ExecutionError("the plan's exact sampler has no lattice grid")
    return strategy.measure(tables, plan.noise.grid)


def release(plan: StructuredPlan, check: PlanCheck, measurement: np.ndarray, rng: Any, *,
            allow_float_noise: bool = False, metadata: dict[str, Any] | None = None,
            deadline: float | None = None) -> Any:
    """Noise once, reconstruct, error bars (module docstring) through the one release
    (``executor.linear_release``); ``check`` the plan's PlanCheck. A plan with a
    ``postprocess`` record then projects (and rounds) the released tables
    (``executor.postprocess.marginal_postprocess``), stopping at ``deadline``
    (``time.monotonic()``)."""
    from factorize.plan.manifest import domain_manifest
    from factorize.structured.families import estimate_words
    from factorize.structured.records import n_upper

    from .linear_release import LinearMeasurement
    from .linear_release import release as linear_release

    beta = check.established_number("beta")
    recon = plan.reconstruction

    def n_plus(noisy: np.ndarray, est: np.ndarray, sd: float) -> float:
        return n_upper(plan, check, noisy, est, sd, beta) if beta > 0 else 0.0

    def row_norms(lo: int, hi: int) -> np.ndarray:
        return np.sqrt(recon.row_sq_norms()[lo:hi])

    m = LinearMeasurement(
        values=measurement, noise=plan.noise, reconstruct=recon.apply,
        row_norms=row_norms, row_l1_norms=recon.row_l1_norms, beta=beta,
        n_upper=n_plus, n_bound=plan.bias["n_bound"],
        describe={"mechanism": f"structured ({plan.family})", "estimates": estimate_words(plan.family),
                  "workload": plan.workload["spec"],
                  "workload_fingerprint": plan.workload["fingerprint"],
                  "domain": domain_manifest(plan.domain), "guarantee": plan.guarantee.to_dict(),
                  "neighbouring": plan.relation.key})
    rel = linear_release(m, rng, allow_float_noise=allow_float_noise, metadata=metadata,
                         variance_note="std_error² is the exact variance of each answer "
                                       "(independent noise coordinates, reconstruction R known)")
    post = plan.postprocess
    if post is not None:
        from .postprocess import attach, marginal_postprocess

        attach(rel, post["method"], lambda: marginal_postprocess(check.workload, plan.domain.sizes,
                                                                 rel.estimate, post, deadline))
    return rel
