"""SDP back-end options and the availability check, without importing cvxpy.

``SolverOptions`` carries the back-end, its tolerance, an iteration cap and a wall-clock
limit; ``require_backend`` refuses a back-end that cannot run here. Both are needed by every
``planner.routes.solve`` call — also pure-DP and dual-solver plans that never solve an SDP —
so this module imports neither cvxpy nor a back-end: the availability of SCS / Clarabel is
decided from the module search path (``importlib.util.find_spec``, which loads nothing).
``solvers.backends`` (cvxpy) is imported only when an SDP is actually solved; it checks
again, through cvxpy, before solving. MOSEK needs a licence check that only cvxpy can run, so
asking for MOSEK loads cvxpy here.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass

from factorize.choices import BACKENDS
from solvers.errors import BackendUnavailableError, SolverInputError, SolverTimeLimitError

__all__ = ["BACKENDS", "DEFAULT_EPS", "DEFAULT_MAX_ITERS", "SolveInfo", "SolverOptions",
           "backend_installed", "require_backend"]

#: Default stopping tolerance per back-end. SCS is first order: 1e-9 makes its dual
#: multipliers accurate enough for a certified relative gap ≤ 1e-6 (reports/bench_core.md).
DEFAULT_EPS = {"scs": 1e-9, "clarabel": 1e-8, "mosek": 1e-9}
DEFAULT_MAX_ITERS = {"scs": 500_000, "clarabel": 500, "mosek": 10_000}

#: The Python module cvxpy imports for each back-end (its solver interface's ``import_solver``).
_BACKEND_MODULE = {"scs": "scs", "clarabel": "clarabel", "mosek": "mosek"}


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
            raise SolverInputError(f"unknown solver back-end {self.backend!r}; expected one of {BACKENDS}")
        if self.eps is not None and not (0 < self.eps < 1):
            raise SolverInputError(f"eps must be in (0, 1), got {self.eps}")
        if self.time_limit is not None and not (self.time_limit > 0 and math.isfinite(self.time_limit)):
            raise SolverInputError(f"time_limit must be a positive number of seconds, got {self.time_limit}")

    @property
    def tolerance(self) -> float:
        return self.eps if self.eps is not None else DEFAULT_EPS[self.backend]

    @property
    def iteration_cap(self) -> int:
        return self.max_iters if self.max_iters is not None else DEFAULT_MAX_ITERS[self.backend]

    def remaining(self, elapsed: float) -> SolverOptions:
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


def _findable(module: str) -> bool:
    """True when ``module`` (top level) is on the search path; imports nothing."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def backend_installed(backend: str) -> bool:
    """True when cvxpy and the back-end's module are installed (found, not imported)."""
    return _findable("cvxpy") and _findable(_BACKEND_MODULE[backend])


def require_backend(opts: SolverOptions) -> None:
    """Raise ``BackendUnavailableError`` unless ``opts.backend`` can run here.

    SCS and Clarabel: cvxpy and the back-end are installed (nothing is imported). MOSEK:
    also a licence check, which runs a tiny problem through cvxpy.
    """
    if opts.backend == "mosek":
        if not _findable("mosek"):
            raise BackendUnavailableError(
                "MOSEK was requested but is not usable here (not installed, or no license "
                "found); use --solver scs or --solver clarabel")
        from solvers.mosek_licence import mosek_available

        if not mosek_available():
            raise BackendUnavailableError(
                "MOSEK was requested but is not usable here (not installed, or no license "
                "found); use --solver scs or --solver clarabel")
    if not backend_installed(opts.backend):
        raise BackendUnavailableError(f"back-end {opts.backend} is not installed in cvxpy")
