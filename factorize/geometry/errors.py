"""The geometry layer's errors, apart from its other modules so that each can raise them
without importing another."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["GeometryError", "GeometryTypeError"]


class GeometryError(InputError):
    """Bad input to a geometric computation — JL projections, moment bodies, enclosing
    ellipsoids, column-subset searches, least-squares projections, lower bounds: a matrix
    of the wrong shape or with non-finite entries, a tolerance, size bound or relation out
    of range. The message names the argument and the value it got."""


class GeometryTypeError(GeometryError, TypeError):
    """An argument of the wrong kind (an ``rng`` without ``words(n)``); still a
    :class:`TypeError`, as it always was, so ``except TypeError`` keeps working."""
