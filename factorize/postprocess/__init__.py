"""Post-processing of released marginal tables, never forming the N-cell histogram.

A release of a marginal workload gives a noisy answer for every cell of every table; these
answers may be negative, are not integers and — for plan families that reconstruct each table
from its own measurements — may disagree between tables. Post-processing reads the released
values only (privacy is unchanged) and returns:

* ``nonneg`` (``postprocess.nonneg``): the Euclidean projection of the released tables onto
  the non-negative, consistent tables (tables that agree on every attribute set they share) —
  the estimator of Private-PGM (McKenna, Sheldon & Miklau, ICML 2019) on the local polytope
  of its relaxed form (McKenna, Pradhan, Sheldon & Miklau, NeurIPS 2021), solved in the
  algebra of marginals (``postprocess.consistency``) with memory proportional to the tables'
  cells;
* ``integer`` (``postprocess.rounding``): those tables rounded to non-negative integers with
  one integer total, consistent on every shared attribute set the method can keep exactly
  (controlled rounding from the total down, as the Census Bureau's TopDown rounds from the
  nation down — Abowd et al., Harvard Data Science Review 2022).

Modules: ``tables`` (which cells of the answers form which table), ``consistency`` (the
orthogonal projection onto consistent tables), ``nonneg``, ``rounding``, ``plan_option``
(the plan-time record), ``errors``.
"""
