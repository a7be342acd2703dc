"""Whether MOSEK can run here: installed *and* licensed — which only a solve can tell, so this
module imports cvxpy inside the call. Apart from ``solvers.backends`` (which imports cvxpy at
load) so that the cvxpy-free ``solvers.options.require_backend`` can ask without a circle."""

from __future__ import annotations

import functools


@functools.cache
def mosek_available() -> bool:
    """True only if MOSEK imports *and* checks out a license; never raises."""
    try:
        import cvxpy as cp
        import mosek  # noqa: F401

        if "MOSEK" not in cp.installed_solvers():
            return False
        x = cp.Variable()
        cp.Problem(cp.Minimize(x), [x >= 1]).solve(solver=cp.MOSEK)
        return True
    except Exception:  # any import, license or runtime failure means "not available"
        return False
