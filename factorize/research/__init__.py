"""Research code: implementations of the papers' algorithms kept for experiments and
benchmarks. Nothing here is used by any plan kind, the CLI, a report or the executor; it is
not part of the supported API (no stability promise, no plan file, no verification, no
ledger), and each module is tested against the claims of its paper.

``pure_least_squares``: Alg. 4 of Nikolov, Talwar & Zhang 2013 ("The Geometry of Differential
Privacy: the Sparse and Approximate Cases"), the least squares mechanism for pure ε-DP with
ℓ2-ball K-norm noise per base-decomposition piece, and its explicit error bound.
``determinant_lower_bound``: the determinant lower bound of Nikolov, Talwar & Zhang 2013 (§2.3.3, detLB) on any
(ε, δ)-DP mechanism, with explicit constants; the bounds a plan states are in
``factorize.geometry.lower_bounds``.

Nothing is imported here.
"""
