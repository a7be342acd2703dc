"""Errors raised by the solvers: each says which failure happened and why.

A solve never returns a silently poor answer: a failed, stalled, timed-out or inaccurate
solve raises one of these, and the planner raises ``CertificateGapError`` when the
re-checked certificate is looser than requested.
"""

from __future__ import annotations

from factorize.errors import SolverError

__all__ = [
    "SolverError", "BackendUnavailableError", "SolverFailedError", "SolverInaccurateError",
    "SolverTimeLimitError", "CertificateGapError", "CertificateInvalidError",
]


class BackendUnavailableError(SolverError):
    """The requested back-end is not installed or has no license."""


class SolverFailedError(SolverError):
    """The back-end crashed or reported the problem infeasible / unbounded / failed."""


class SolverInaccurateError(SolverError):
    """The back-end stopped with an inaccurate status (stalled or hit its iteration limit)."""


class SolverTimeLimitError(SolverError):
    """The back-end hit the time limit before reaching its tolerances."""


class CertificateGapError(SolverError):
    """The independently re-checked certificate is looser than the requested gap."""


class CertificateInvalidError(SolverError):
    """The solution's certificate failed verification (residual, witness validity, bounds)."""
