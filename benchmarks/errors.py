"""The benchmark harness's error (:mod:`benchmarks`)."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["BenchError"]


class BenchError(InputError):
    """A benchmark that cannot be run as given: an unknown suite name, or a run of factorize
    in a child process that failed (the message quotes its exit status and the end of its
    stderr, which says why: missing data, an unavailable back-end, bad input, or a bug the
    child reported). A ``ValueError`` too, exit code 2. A suite module that breaks the
    harness's interface is a :class:`factorize.errors.InternalError` (a bug in the suite)."""
