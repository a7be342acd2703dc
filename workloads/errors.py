"""Exception types of the :mod:`workloads` package.

All of them derive from ``factorize.errors.InputError`` (a :class:`ValueError`), so callers that only care about
"bad input" can catch ``ValueError``; callers that want to tell the cases apart
catch the specific class.
"""

from __future__ import annotations

from factorize.errors import InputError

__all__ = [
    "WorkloadError",
    "WorkloadSpecError",
    "DenseTooLargeError",
    "DomainError",
]


class WorkloadError(InputError):
    """A workload (or an argument used to build one) is invalid."""


class WorkloadSpecError(WorkloadError):
    """A workload spec string could not be parsed or built.

    Attributes
    ----------
    spec:
        The offending spec string, as given.
    position:
        0-based character offset in ``spec`` where parsing failed, or ``None``
        when the failure is not tied to one position.
    """

    def __init__(self, message: str, spec: str = "", position: int | None = None) -> None:
        super().__init__(message)
        self.spec = spec
        self.position = position


class DenseTooLargeError(WorkloadError):
    """Densifying a workload was refused because it has too many entries."""


class DomainError(InputError):
    """A domain, or records/cells checked against a domain, are invalid.

    Messages never contain record values (records are private data); they
    name the attribute and count the offending rows instead.
    """
