"""Structured strategies and reconstructions: measured per attribute subset, never over N cells.

A structured mechanism over a product domain (attribute sizes ``n_0 … n_{d−1}``, N = Π n_j)
measures a *union of Kronecker blocks* and reconstructs the workload with a *sum of
Kronecker terms*:

    A = [ s_b · ⊗_j F_{b,j} ]_b          F_{b,j} a stored factor on the block's support,
                                          the all-ones row 1ᵀ_{n_j} elsewhere;
    (R ỹ)_o = Σ_{terms t of block o} c_t · (⊗_j G_{t,j}) ỹ_{in(t)}.

Both families of the seeds live here as data, not as code paths:

* **residual** (marginal workloads, :mod:`.residual`): one block per subset T of the workload's
  downward closure, ``s_T ⊗_{j∈T} U_j``, U_j an orthonormal basis of 1^⊥; the reconstruction
  of marginal S sums the residuals T ⊆ S. With ``s_T² = y_T / Π_{j∈T}(1 − 1/n_j)`` this is the
  optimal plan ``A = X^{1/2}`` of ``factorize.planner.marginal_optimum`` (docs/math.md §5.3) written in a
  basis where it is block-diagonal.
* **union** (unions of Kronecker products, :mod:`.union`): one Kronecker block per workload
  block, ``W_o = ⊗_j R_{o,j} A_{o,j}``, weighted across blocks.

Modules: :mod:`.blocks` (the data types), :mod:`.strategy` (matvec, measurement from marginal
tables, dense form for small domains), :mod:`.reconstruction` (answers, exact per-query
variances), :mod:`.sensitivity` (certified L1/L2 sensitivity under both relations),
:mod:`.workload_blocks` (a workload's blocks as per-attribute factors), :mod:`.identity`
(the certified residual ``max|W − R·Ã|`` checked in the algebra).
"""
