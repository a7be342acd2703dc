"""Post-processing of released marginal tables, never forming the N-cell histogram.

A release of a workload of Kronecker blocks (marginals, CDFs, ranges and their products)
gives a noisy answer for every cell of every table; every block reads the records through the
marginal table on its attributes, so its answers are a linear map of that table, which they
determine where the block's factors have full column rank, and determine up to the factors'
null space, total included, where a factor groups the values (``postprocess.tables``). The
answers may be negative, are not integers and — for plan families that estimate each block
from its own measurements — may disagree between tables. Post-processing reads the released
values only (privacy is unchanged), works on those marginal tables and reads every answer back
through its block's factors (so a prefix sum of integer cells is an integer), returning:

* ``nonneg`` (``postprocess.nonneg``): the non-negative, consistent tables (tables that
  agree on every attribute set they share) whose answers fit the released answers best in
  least squares — the estimator of Private-PGM (McKenna, Sheldon & Miklau, ICML 2019) on the
  local polytope of its relaxed form (McKenna, Pradhan, Sheldon & Miklau, NeurIPS 2021),
  solved in the algebra of marginals (``postprocess.consistency``) with memory proportional
  to the tables' cells, and made exactly consistent from the total down by raking
  (``postprocess.raking``);
* ``integer`` (``postprocess.rounding``): those tables rounded to non-negative integers with
  one integer total, consistent on every shared attribute set the method can keep exactly
  (controlled rounding from the total down, as the Census Bureau's TopDown rounds from the
  nation down — Abowd et al., Harvard Data Science Review 2022).

Modules: ``tables`` (which marginal table each block of answers reads, and how),
``consistency`` (the orthogonal projection onto consistent tables), ``nonneg``, ``raking``,
``rounding``, ``plan_option`` (the plan-time record), ``errors``.
"""
