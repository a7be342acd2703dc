"""Turning user input (spec string, array, sparse matrix, workload) into a :class:`Workload`."""

from __future__ import annotations

from typing import Any

from .operators import Workload, as_operator
from .spec import parse_workload

__all__ = ["as_workload"]


def as_workload(obj: Any) -> Workload:
    """Return ``obj`` as a workload ``W`` (``k`` x ``N``).

    A :class:`Workload` is returned unchanged; a ``str`` is parsed with
    :func:`parse_workload`; a ``scipy.sparse`` matrix becomes a
    :class:`SparseWorkload`; a numpy array (or nested list/tuple) a
    :class:`DenseWorkload`. Anything else raises :class:`WorkloadError`.
    """
    if isinstance(obj, str):
        return parse_workload(obj)
    return as_operator(obj, "workload")
