"""SDP back-ends through cvxpy: SCS (default), Clarabel, MOSEK (only when licensed).

``SolverOptions`` (the back-end, its tolerance, an iteration cap and a wall-clock limit) and
``require_backend`` live in the cvxpy-free ``solvers.options`` (re-exported here); importing
this module loads cvxpy, so the planner imports it only to solve an SDP. ``solve_cvxpy``
runs one cvxpy problem and turns every non-optimal outcome into a ``solvers.errors`` exception that says which back-end, what status and why.
"""

from __future__ import annotations

import time
import warnings

import cvxpy as cp

from solvers.errors import (
    BackendUnavailableError,
    SolverFailedError,
    SolverInaccurateError,
    SolverTimeLimitError,
)
from solvers.mosek_licence import mosek_available  # noqa: F401 - re-exported
from solvers.options import (  # noqa: F401 - re-exported: the cvxpy-free half lives there
    BACKENDS,
    DEFAULT_EPS,
    DEFAULT_MAX_ITERS,
    SolveInfo,
    SolverOptions,
    require_backend,
)


def available_backends() -> tuple[str, ...]:
    """The back-ends usable on this machine, in order of preference for tight solves."""
    installed = set(cp.installed_solvers())
    out = [b for b in ("scs", "clarabel") if b.upper() in installed]
    if mosek_available():
        out.append("mosek")
    return tuple(out)


def _solver_kwargs(opts: SolverOptions) -> dict:
    eps, cap, tl = opts.tolerance, opts.iteration_cap, opts.time_limit
    if opts.backend == "scs":
        kw = dict(solver=cp.SCS, eps_abs=eps, eps_rel=eps, max_iters=cap, acceleration_lookback=10)
        if tl is not None:
            kw["time_limit_secs"] = tl
        return kw
    if opts.backend == "clarabel":
        kw = dict(solver=cp.CLARABEL, tol_gap_abs=eps, tol_gap_rel=eps, tol_feas=eps, max_iter=cap)
        if tl is not None:
            kw["time_limit"] = tl
        return kw
    params = {"MSK_DPAR_INTPNT_CO_TOL_REL_GAP": eps, "MSK_DPAR_INTPNT_CO_TOL_PFEAS": eps,
              "MSK_DPAR_INTPNT_CO_TOL_DFEAS": eps, "MSK_IPAR_INTPNT_MAX_ITERATIONS": cap}
    if tl is not None:
        params["MSK_DPAR_OPTIMIZER_MAX_TIME"] = tl
    return dict(solver=cp.MOSEK, mosek_params=params)


def _require_in_cvxpy(opts: SolverOptions) -> None:
    """``require_backend`` plus cvxpy's own view: the back-end's interface imports."""
    require_backend(opts)
    if opts.backend.upper() not in cp.installed_solvers():
        raise BackendUnavailableError(f"back-end {opts.backend} is not installed in cvxpy")


def solve_cvxpy(problem: cp.Problem, opts: SolverOptions, what: str) -> SolveInfo:
    """Solve ``problem`` with ``opts``; raise a ``SolverError`` for anything but optimal.

    ``what`` names the problem in error messages (e.g. "γ_F SDP of a 64×64 workload").
    """
    _require_in_cvxpy(opts)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # cvxpy warns on inaccurate status; we raise instead
            warnings.simplefilter("ignore", UserWarning)
            problem.solve(verbose=opts.verbose, **_solver_kwargs(opts))
    except cp.error.SolverError as exc:
        raise SolverFailedError(f"{opts.backend} failed on the {what}: {exc}") from exc
    seconds = time.perf_counter() - start
    stats = problem.solver_stats
    iters = getattr(stats, "num_iters", None)
    status = problem.status
    hit_time = opts.time_limit is not None and seconds >= 0.97 * opts.time_limit
    if status == cp.OPTIMAL:
        return SolveInfo(opts.backend, status, seconds, iters, float(problem.value))
    if hit_time or status == cp.USER_LIMIT:
        raise SolverTimeLimitError(
            f"{opts.backend} hit the time limit of {opts.time_limit} s on the {what} after "
            f"{seconds:.1f} s and {iters} iterations (status {status!r}); raise --time-limit")
    if status == cp.OPTIMAL_INACCURATE:
        cap_hit = iters is not None and iters >= opts.iteration_cap
        why = (f"it reached its iteration cap of {opts.iteration_cap}" if cap_hit
               else "it stalled before reaching its tolerances")
        raise SolverInaccurateError(
            f"{opts.backend} returned an inaccurate solution of the {what}: {why} "
            f"(tolerance {opts.tolerance:g}, {iters} iterations, {seconds:.1f} s)")
    raise SolverFailedError(
        f"{opts.backend} did not solve the {what}: status {status!r} after {seconds:.1f} s")
