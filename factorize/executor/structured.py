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
block's answers) — coverage ≥ 95% by the union bound, as for dense plans (``plan.model``). Every answer is labeled with its marginal's attributes and
its cell's values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from factorize.plan.structured_plan import StructuredPlan

from .session import ExecutionError


def measure(plan: StructuredPlan, tables: Any) -> np.ndarray:
    """The exact measurement from the marginal tables (module docstring)."""
    strategy = plan.strategy.measured()
    if plan.noise.sampler == "float":
        return strategy.apply_tables(tables)
    return strategy.measure(tables, plan.noise.grid)


def labels(plan: StructuredPlan) -> tuple[Any, Any]:
    """``marginal`` (attribute names of each answer's block) and ``cell`` (its values, comma
    separated) for every answer of a marginal workload; block and row indices otherwise.
    Arrow arrays built in vectorised form (the marginal names dictionary-encoded), computed
    once per plan: Adult's 21·10⁶ ≤3-way answers take seconds, not Python strings each."""
    cached = getattr(plan.reconstruction, "_labels", None)
    if cached is None:
        cached = plan.reconstruction._labels = _labels(plan)
    return cached


def _labels(plan: StructuredPlan) -> tuple[Any, Any]:
    import pyarrow as pa

    from factorize.structured.residual import unpad_subsets

    from .labels import arrow_call, marginal_columns, quoted_labels

    sizes = [int(n) for n in plan.domain.sizes]
    from factorize.structured.families import codec

    if codec(plan.family).marginal_labels:
        return marginal_columns(sizes, list(plan.domain.attributes), quoted_labels(plan.domain),
                                unpad_subsets(plan.encoding["recon.support"], len(sizes), "recon.support"))
    names = [f"block {o}" for o in range(len(plan.reconstruction.out_rows))]
    counts = [int(r) for r in plan.reconstruction.out_rows]
    try:
        from pyarrow._compute import CastOptions
    except ImportError:  # pragma: no cover - see labels.arrow_call
        from pyarrow.compute import CastOptions
    to_text = CastOptions.safe(pa.string())  # pc.cast(…, pa.string())'s options
    cells = [arrow_call("cast", [pa.array(np.arange(r, dtype=np.int64))], to_text) for r in counts]
    index = np.repeat(np.arange(len(names), dtype=np.int32), counts)
    marginal = pa.DictionaryArray.from_arrays(pa.array(index), pa.array(names, type=pa.string()))
    return marginal, pa.chunked_array(cells, type=pa.string())


def release(plan: StructuredPlan, check: Any, measurement: np.ndarray, rng: Any, *,
            allow_float_noise: bool = False, metadata: dict[str, Any] | None = None) -> Any:
    """Noise once, reconstruct, error bars (module docstring); ``check`` the plan's PlanCheck."""
    from factorize.plan.model import ci_method, ci_multiplier, domain_manifest
    from factorize.privacy import add_noise, sample_lattice, sampled_variance
    from factorize.structured.records import n_upper

    from .release import NOT_PRIVATE, Release

    spec = plan.noise
    if spec.sampler == "float":
        if not allow_float_noise:
            raise ExecutionError("the plan uses floating-point noise (sampler 'float'); refusing "
                                 "(pass --allow-float-noise to accept it)")
        noisy = add_noise(np.asarray(measurement, dtype=np.float64), spec, rng)
    else:
        noisy = sample_lattice(measurement, spec, rng)
    recon = plan.reconstruction
    est = recon.apply(noisy)
    v = sampled_variance(spec)
    sd = math.sqrt(v)
    se = sd * np.sqrt(recon.row_sq_norms())
    rounding = 0.5 * spec.grid * recon.row_l1_norms() if spec.grid else np.zeros_like(se)
    beta = float(check.derived.get("beta", 0.0))
    n_plus = n_upper(plan, check.derived, noisy, est, sd, beta) if beta > 0 else 0.0
    c = ci_multiplier(spec)
    half = c * se + rounding + beta * n_plus
    meta = dict(metadata or {})
    test_mode = bool(getattr(rng, "is_test_mode", False))
    meta.update({
        "test_mode": test_mode, "mechanism": f"structured ({plan.family})",
        "workload": plan.workload["spec"], "workload_fingerprint": plan.workload["fingerprint"],
        "domain": domain_manifest(plan.domain),
        "guarantee": plan.guarantee.to_dict(), "neighbouring": plan.relation.key,
        "noise": {"family": spec.family, "sampler": spec.sampler, "scale": spec.scale,
                  "grid": spec.grid},
        "ci": {"level": 0.95, "method": ci_method(spec), "multiplier": c,
               "rounding_bias_added": bool(spec.grid), "bias_per_record": beta, "n_upper": n_plus,
               "n_bound": plan.bias.get("n_bound"),
               "note": "estimate ± (multiplier·std_error + rounding bias + bias_per_record·n_upper); "
                       "n_upper bounds n except with probability 1e-3, the noise term holds with "
                       "probability 0.951: coverage ≥ 0.95"},
        "variance": "std_error² is the exact variance of each answer (independent noise "
                    "coordinates, reconstruction R known)",
        "n_queries": int(est.size),
    })
    if test_mode:
        meta["warning"] = NOT_PRIVATE
    marg, cell = labels(plan)
    rel = Release(estimate=est, std_error=se, ci_low=est - half, ci_high=est + half, metadata=meta)
    rel.extra["labels"] = {"marginal": marg, "cell": cell}
    return rel
