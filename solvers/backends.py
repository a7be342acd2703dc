"""SDP back-ends through cvxpy: SCS (default), Clarabel, MOSEK (only when licensed).

``SolverOptions`` carries the back-end, its tolerance, an iteration cap and a wall-clock
limit; ``solve_cvxpy`` runs one cvxpy problem and turns every non-optimal outcome into a
``solvers.errors`` exception that says which back-end, what status and why.
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass

import cvxpy as cp

from factorize.choices import BACKENDS
from solvers.errors import (
    BackendUnavailableError,
    SolverFailedError,
    SolverInaccurateError,
    SolverTimeLimitError,
)

#: Default stopping tolerance per back-end. SCS is first order: 1e-9 makes its dual
#: multipliers accurate enough for a certified relative gap ≤ 1e-6 (reports/bench_core.md).
DEFAULT_EPS = {"scs": 1e-9, "clarabel": 1e-8, "mosek": 1e-9}
DEFAULT_MAX_ITERS = {"scs": 500_000, "clarabel": 500, "mosek": 10_000}


@dataclass(frozen=True)
class SolverOptions:
    """How to run one SDP: back-end, tolerance, iteration cap, time limit (seconds)."""

    backend: str = "scs"
    eps: float | None = None
    max_iters: int | None = None
    time_limit: float | None = None
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown solver back-end {self.backend!r}; expected one of {BACKENDS}")
        if self.eps is not None and not (0 < self.eps < 1):
            raise ValueError(f"eps must be in (0, 1), got {self.eps}")
        if self.time_limit is not None and not (self.time_limit > 0 and math.isfinite(self.time_limit)):
            raise ValueError(f"time_limit must be a positive number of seconds, got {self.time_limit}")

    @property
    def tolerance(self) -> float:
        return self.eps if self.eps is not None else DEFAULT_EPS[self.backend]

    @property
    def iteration_cap(self) -> int:
        return self.max_iters if self.max_iters is not None else DEFAULT_MAX_ITERS[self.backend]

    def remaining(self, elapsed: float) -> "SolverOptions":
        """The same options with the time limit reduced by ``elapsed`` seconds."""
        if self.time_limit is None:
            return self
        left = self.time_limit - elapsed
        if left <= 0:
            raise SolverTimeLimitError(
                f"time limit of {self.time_limit:g} s used up before the next solve could start")
        return SolverOptions(self.backend, self.eps, self.max_iters, left, self.verbose)


@dataclass(frozen=True)
class SolveInfo:
    """What the back-end reported."""

    backend: str
    status: str
    seconds: float
    iterations: int | None
    objective: float


@functools.cache
def mosek_available() -> bool:
    """True only if MOSEK imports *and* checks out a license; never raises."""
    try:
        import mosek  # noqa: F401

        if "MOSEK" not in cp.installed_solvers():
            return False
        x = cp.Variable()
        cp.Problem(cp.Minimize(x), [x >= 1]).solve(solver=cp.MOSEK)
        return True
    except Exception:  # any import, license or runtime failure means "not available"
        return False


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


def require_backend(opts: SolverOptions) -> None:
    """Raise ``BackendUnavailableError`` unless ``opts.backend`` can run here."""
    if opts.backend == "mosek" and not mosek_available():
        raise BackendUnavailableError(
            "MOSEK was requested but is not usable here (not installed, or no license found); "
            "use --solver scs or --solver clarabel")
    if opts.backend.upper() not in cp.installed_solvers():
        raise BackendUnavailableError(f"back-end {opts.backend} is not installed in cvxpy")


def solve_cvxpy(problem: cp.Problem, opts: SolverOptions, what: str) -> SolveInfo:
    """Solve ``problem`` with ``opts``; raise a ``SolverError`` for anything but optimal.

    ``what`` names the problem in error messages (e.g. "γ_F SDP of a 64×64 workload").
    """
    require_backend(opts)
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
