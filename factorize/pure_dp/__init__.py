"""Optimised pure-DP (Laplace) strategies: HDMM-style strategy families, optimised better.

Minimises the Laplace objective ``‖A‖²_{1→1} · tr(W (AᵀA)⁺ Wᵀ)`` (per-query RMSE at ε = 1:
``sqrt(2·objective/k)``) over strategy families that scale with the workload's structure,
after McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of high-dimensional
statistical queries under differential privacy" (PVLDB 2018, HDMM):

- ``p_identity``  objective and analytic gradient of a p-Identity strategy ``[I; Θ]·D``;
- ``optimizer``   multi-start L-BFGS-B (deterministic starts + recorded seeds, keep the best);
- ``one_d``       OPT_0 for one Gram matrix: identity, b-ary trees, given strategies, restarts;
- ``structure``   a workload as Kronecker blocks with dense factors (or a marginal family);
- ``kron``        OPT_⊗ per factor, unions by alternating per-factor optimisation, OPT_+;
- ``flat``        a Kronecker optimum refined as one p-Identity strategy over a small domain;
- ``l1_marginal_weights``  OPT_M marginal weights in the subset algebra, covering starts,
  chord moves;
- ``evaluate``    the exact RMSE recomputed from a returned strategy (add/remove and replace);
- ``api``         one ``plan_*`` function per family and ``plan_pure_dp`` (best of all);

The comparison with HDMM's published numbers is ``python -m benchmarks --suite pure_dp_table``
(``benchmarks/suites/pure_dp_table.py`` in the repository). Nothing is imported here.
"""
