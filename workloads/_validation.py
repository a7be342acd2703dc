"""Small argument checks shared by the modules of :mod:`workloads`."""

from __future__ import annotations

import numbers
from typing import Any

from .errors import WorkloadError

__all__ = ["positive_int", "nonnegative_int"]


def _as_int(value: Any, name: str, error: type[ValueError]) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def positive_int(value: Any, name: str, error: type[ValueError] = WorkloadError) -> int:
    """Return ``value`` as a Python ``int`` if it is an integer >= 1, else raise ``error``."""
    v = _as_int(value, name, error)
    if v < 1:
        raise error(f"{name} must be a positive integer (>= 1), got {v}")
    return v


def nonnegative_int(value: Any, name: str, error: type[ValueError] = WorkloadError) -> int:
    """Return ``value`` as a Python ``int`` if it is an integer >= 0, else raise ``error``."""
    v = _as_int(value, name, error)
    if v < 0:
        raise error(f"{name} must be a non-negative integer (>= 0), got {v}")
    return v
