"""Convex geometry behind the seeds' geometric mechanisms (pure math, numpy only).

``mee``: the minimum-volume enclosing ellipsoid of a symmetric point set (D-optimal design).
``spectral_projection``: projections onto the simplex and the spectraplex {M ⪰ 0, tr M = t}.
"""

from factorize.geometry.mee import EnclosingEllipsoid, minimum_enclosing_ellipsoid
from factorize.geometry.spectral_projection import project_to_simplex, project_to_spectraplex

__all__ = ["EnclosingEllipsoid", "minimum_enclosing_ellipsoid", "project_to_simplex",
           "project_to_spectraplex"]
