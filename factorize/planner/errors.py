"""The planner's error, apart from its other modules so that each can raise it without
importing another."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["PlannerError"]


class PlannerError(InputError):
    """A planning request the planner cannot take as given: an unknown norm or method, a
    workload, radius η, tolerance or time limit out of range, a marginal family that is
    malformed or too large, a witness or certificate whose shapes do not match the workload.
    Solver failures are :class:`factorize.errors.SolverError` (``solvers.errors``) instead."""
