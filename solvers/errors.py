"""Errors raised by the solvers: each says which failure happened and why.

A solve never returns a silently poor answer: a failed, stalled, timed-out or inaccurate
solve raises one of these, and the planner raises ``CertificateGapError`` when the
re-checked certificate is looser than requested. Bad arguments to a solver (a non-finite
workload, an unknown back-end, a tolerance out of range) are :class:`SolverInputError`, an
``InputError`` (a ``ValueError``), not a solver failure.
"""

from __future__ import annotations

from factorize.errors import InputError, SolverError

__all__ = [
    "SolverError", "BackendUnavailableError", "SolverFailedError", "SolverInaccurateError",
    "SolverTimeLimitError", "CertificateGapError", "CertificateInvalidError", "SolverInputError",
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


class SolverInputError(InputError):
    """A solver was called with arguments it cannot use (a matrix of the wrong shape or with
    non-finite entries, the zero workload, an unknown back-end, a tolerance, rank or time
    limit out of range): bad input, exit code 2, never a solver failure."""
