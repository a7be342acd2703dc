"""Convex geometry behind the seeds' geometric mechanisms (pure math, numpy only).

``mee``: the minimum-volume enclosing ellipsoid of a symmetric point set (D-optimal design).
"""

from factorize.geometry.mee import EnclosingEllipsoid, minimum_enclosing_ellipsoid

__all__ = ["EnclosingEllipsoid", "minimum_enclosing_ellipsoid"]
