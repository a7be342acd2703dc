"""Running a projection plan (``jl``, ``covariance``, ``relaxed-projection``): verify, measure,
add noise once, decode by projection (released values only), write all answers or none.

Verification (``kinds.projection.verify.verify_projection_plan``) re-derives what privacy depends on from the
plan's arrays and public parameters: the workload from its spec (fingerprint), the measurement
(``T·W`` for jl; the ±1 second moments of ``parity:d:2`` for the moment kinds, with d binary
attributes in the domain), its sensitivity under replace-one neighbours (``jl_sensitivity`` of
TW; the exact flip-set formula ``projection_plan.moment_sensitivity``, cross-checked against
the columns of W when 2^d is small), and the noise scale (``privacy.calibrate``); a plan whose
scale is below the re-derived one is refused. The stated error bound is recomputed too.

Measurement: jl — ``TW·h`` from the histogram; moment kinds — ``Σ_records (x_a x_b)_{a<b}``
with ``x = s = 2·code − 1`` (``parity:d:2``; pair products do not depend on the sign
convention) or ``x = (1, s)`` (``marginals:2x…x2:2``), ``MomentLayout``, from a histogram
(``.npy``, small d) or from records (CSV/Parquet through DuckDB's grouped scan,
``engines.distinct_records_duckdb``: no 2^d histogram, d up to hundreds). The data must have
exactly the plan's public n records.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from factorize.executor.linear_release import NOT_PRIVATE, Release, refuse_float_noise
from factorize.executor.session import ExecutionError
from factorize.kinds.projection.plan import ProjectionPlan, moment_layout, moment_matrix
from factorize.kinds.projection.verify import verify_projection_plan
from factorize.plan.manifest import domain_manifest


def measure(plan: ProjectionPlan, data_path: str, W: Any, *,
            allow_extra_columns: bool = False) -> tuple[np.ndarray, int]:
    """The exact (noiseless) measurement and the number of records (module docstring)."""
    from pathlib import Path

    from factorize.engines import DataError, distinct_records_duckdb
    from factorize.executor.data import SUFFIXES, load_histogram

    domain = plan.domain
    if plan.kind == "jl":
        h = load_histogram(data_path, domain, allow_extra_columns=allow_extra_columns)
        return plan.arrays["T"] @ W.matvec(h.astype(np.float64)), int(h.sum())
    lay = moment_layout(W)
    if SUFFIXES.get(Path(data_path).suffix.lower()) == "histogram":
        h = load_histogram(data_path, domain)
        nz = np.flatnonzero(h)
        codes = (nz[:, None] >> np.arange(lay.d - 1, -1, -1)) & 1  # attribute 0 slowest
        return lay.moments(codes, h[nz]), int(h.sum())
    if Path(data_path).suffix.lower() not in SUFFIXES:
        raise DataError(f"unsupported data file {data_path!r}; expected one of {sorted(SUFFIXES)}")
    codes, counts = distinct_records_duckdb(data_path, domain, allow_extra_columns=allow_extra_columns)
    return lay.moments(codes, counts), int(counts.sum())


def release_projection(plan: ProjectionPlan, values: np.ndarray, n_records: int, rng: Any, *,
                       workload: Any, allow_float_noise: bool = False,
                       metadata: dict[str, Any] | None = None, deadline: float | None = None,
                       claims: dict[str, Any] | None = None) -> Release:
    """Noise once, decode, and the released answers with the error bound (no per-query CIs).
    ``values``: the exact measurement — float values, or the integer lattice image of a
    lattice plan (``round_to_grid``). ``claims``: the verifier's re-derived decoder and bounds
    (recomputed here when not given)."""
    from factorize.engines import DataError
    from factorize.privacy import add_noise, sample_lattice

    if claims is None or "decoder" not in claims:
        claims = verify_projection_plan(plan, raise_on_failure=True, workload=workload).derived

    if n_records != plan.n:
        raise DataError(f"the plan's public dataset size is n={plan.n} (replace-one neighbours); "
                        "the data has a different number of records")
    spec = plan.noise
    refuse_float_noise(spec.sampler, allow_float_noise)
    vals = np.asarray(values)
    if spec.sampler == "float":
        noisy = add_noise(vals.astype(np.float64), spec, rng)
    elif vals.dtype.kind in "iuO":
        noisy = sample_lattice(vals, spec, rng)
    else:
        from factorize.privacy import round_to_grid

        if spec.grid is None:  # verified plans with an exact sampler state their lattice grid
            raise ExecutionError("the plan's exact sampler has no lattice grid")
        noisy = sample_lattice(round_to_grid(vals, spec.grid), spec, rng)
    del values, vals
    t0 = time.perf_counter()
    dec = claims["decoder"]
    bounds = claims["bounds"]
    k = plan.shape[0]
    info: dict[str, Any] = {"method": dec["method"]}
    if plan.kind == "jl":
        from factorize.geometry.jl import jl_decode

        Wd = workload.dense()
        res = jl_decode(plan.arrays["T"] @ Wd, noisy, float(plan.n), Wd, gap_tol=float(dec["gap_tol"]),
                        max_iters=int(dec["max_iter"]), deadline=deadline)
        answers = res.answers
        info.update(gap=float(res.gap), iterations=int(res.iterations), converged=bool(res.converged))
        bound = float(bounds["upper_rmse"]) if res.gap <= dec["gap_tol"] else None
    else:
        lay = moment_layout(workload)
        M_noisy = moment_matrix(noisy, lay.m, float(plan.n))
        if plan.kind == "covariance":
            from factorize.geometry.moment_bodies import project_second_moment

            M = project_second_moment(M_noisy, float(dec["trace"]))
            info.update(gap=0.0, iterations=1, converged=True)
        else:
            from factorize.geometry.moment_bodies import project_to_elliptope

            ell = project_to_elliptope(M_noisy, float(plan.n), max_iters=int(dec["max_iter"]),
                                       gap_tol=float(dec["gap_tol"]), rel_gap_tol=0.0,
                                       time_limit=None if deadline is None else
                                       max(1e-3, deadline - time.monotonic()))
            M = ell.M
            info.update(gap=float(ell.gap), iterations=int(ell.iterations),
                        converged=bool(ell.gap <= dec["gap_tol"]))
        answers = lay.answers(M, float(plan.n))
        meas = claims["expected_error"]["measurement_rmse"]
        if plan.noise.family == "gaussian" and meas is not None:
            bound = lay.answer_rmse_bound(meas, plan.n, info["gap"])  # with the gap reached
        else:
            bound = float(bounds["upper_rmse"]) if info["converged"] else None
    info["seconds"] = time.perf_counter() - t0
    test_mode = bool(getattr(rng, "is_test_mode", False))
    meta = dict(metadata or {})
    meta.update({
        "test_mode": test_mode, "mechanism": plan.kind, "workload": plan.workload["spec"],
        "workload_fingerprint": plan.workload["fingerprint"], "guarantee": plan.guarantee.to_dict(),
        "domain": domain_manifest(plan.domain),
        "neighbouring": plan.relation.key, "n": plan.n,
        "noise": {"family": spec.family, "sampler": spec.sampler, "scale": spec.scale, "grid": spec.grid},
        "decode": info,
        "rmse_bound": bound,
        "rmse_bound_95": None if bound is None else math.sqrt(20.0) * bound,
        "rmse_bound_note": (bounds["upper_note"] + "; the realised RMSE exceeds rmse_bound_95 "
                            "= √20·rmse_bound with probability ≤ 5% (Markov)") if bound is not None else
        "no bound: the decode did not reach its gap target",
        "n_queries": int(k),
        "ci": {"level": None, "method": "none: projected answers carry the RMSE bound, not per-query intervals"},
    })
    if test_mode:
        meta["warning"] = NOT_PRIVATE
    nan = np.full(k, np.nan)
    return Release(estimate=np.asarray(answers, dtype=np.float64), std_error=nan, ci_low=nan,
                   ci_high=nan, metadata=meta)


def run_projection_plan(plan_path: str, data_path: str, out_path: str | None = None,
                        **options: Any) -> Release:
    """Run a projection plan through the one pipeline (``executor.pipeline.run``)."""
    from factorize.executor.pipeline import run

    return run(plan_path, data_path, out_path, expect="projection", **options)
