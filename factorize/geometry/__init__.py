"""Convex geometry behind the geometric mechanisms of docs/math.md §8 (pure math, numpy only).

``mee``: the minimum-volume enclosing ellipsoid of a symmetric point set (D-optimal design).
``spectral_projection``: projections onto the simplex and the spectraplex {M ⪰ 0, tr M = t}.
``base_decomposition``: Nikolov, Talwar & Zhang 2013, Alg. 1 and its Gaussian mechanism (Alg. 2) as W = R·S.
``least_squares``: the projection onto n·K by Frank–Wolfe (Nikolov, Talwar & Zhang 2013, Alg. 3's estimator).
``jl``: the JL mechanism's projection, explicit error bound and decode (Nikolov 2023, Alg. 1).
``moment_bodies``: second-moment projections — spectraplex (Nikolov 2023, §6) and the Grothendieck
relaxation (elliptope, Dwork, Nikolov & Talwar 2014, §4) — and the 2-way-marginal ↔ moment conversion.
``lower_bounds``: spectral (Nikolov, Talwar & Zhang 2013, §2.3.3) and packing (Nikolov 2023, Lemma 7) bounds on any
mechanism's error, with explicit constants (the determinant bound is in ``factorize.research``).
``column_subset_search``: the search for the column subsets those bounds are evaluated on.
Nikolov, Talwar & Zhang 2013, Alg. 4 (pure-DP least squares) is research code: ``factorize.research``.
"""

from factorize.geometry.base_decomposition import base_decomposition, ellipsoid_factorization
from factorize.geometry.least_squares import Projection, project_least_squares
from factorize.geometry.mee import EnclosingEllipsoid, minimum_enclosing_ellipsoid
from factorize.geometry.spectral_projection import project_to_simplex, project_to_spectraplex

__all__ = ["Projection", "project_least_squares", "base_decomposition", "ellipsoid_factorization", "EnclosingEllipsoid", "minimum_enclosing_ellipsoid", "project_to_simplex",
           "project_to_spectraplex"]
