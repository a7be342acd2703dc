"""Marginal-weight strategies with their least-squares reconstruction, as a structured plan.

Strategy (OPT_M of McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of
high-dimensional statistical queries under differential privacy", PVLDB 2018, §5; weights
from ``pure_dp.l1_marginal_weights``): one block per chosen attribute subset S, ``θ_S ⊗_{j∈S} I_{n_j}``
(the S-marginal, weighted), so ``‖A‖₁→₁ = Σ_S θ_S``. Its Gram is diagonal in the residual
basis (``marginal_algebra``; ``I = C + K`` with ``K = 𝟙𝟙ᵀ/n`` and ``C = I − K``):

    AᵀA = Σ_U λ_U P_U,   P_U = ⊗_{j∈U} C_j ⊗_{j∉U} K_j,   λ_U = Σ_{S⊇U} θ_S² Π_{j∉S} n_j,

so ``(AᵀA)⁺ = Σ_{λ_U>0} P_U / λ_U`` and the least-squares reconstruction ``R = W (AᵀA)⁺ Aᵀ``
of a workload block ``w ⊗_j W_j`` from block S is a **sum** of Kronecker products (the
coefficients ``θ_S/λ_U`` do not factor per attribute):

    R_{o,S} = Σ_{U⊆S} (w θ_S / λ_U) ⊗_j G_j,   G_j = W_j C_j (j ∈ U),  W_j K_j (j ∈ S∖U),
                                                     W_j 𝟙 (j ∉ S)

(``W_j C_j = 0`` for a summed-out attribute, so U runs over the subsets of S on which the
workload is not a total; ``W_j 𝟙 = n_j`` there). ``R·A = W`` exactly when every such U has
``λ_U > 0`` — the verifier checks it in the algebra (``structured.identity``, basis form), and
the per-query variances come from ``structured.reconstruction`` with the cross products of
terms that read the same block. The workload may be a stack of marginals or any union of
Kronecker products whose rows lie in the strategy's row space (e.g. HDMM's
``⊗_j [I; 1ᵀ]``: every marginal, in Kronecker row order).

Certificate: for a stack of marginals (``marginal_algebra.marginal_family``) the marginal
planner's certified optimum (``planner.marginal_optimum.solve_marginals``: its coefficients and dual
witness stored as ``cert.x`` / ``cert.x_support`` / ``cert.omega``, re-verified by
``verify_marginal_solution``), whose lower bound is the γ optimum itself up to its gap;
otherwise the union family's (``structured.union``): per distinct explicit workload factor
its dual witness, multiplied within a block, combined across blocks; identities and totals
have γ = 1; for k ≤ 4096 also the uniform-weight trace-norm bound
(``union.uniform_trace_lower``). Upper = the value this plan achieves.

Encoding: the union codec (``structured.union.encode``/``decode``) with family
``"marginal_weights"``: strategy factors ``A.i`` (identities), reconstruction factors ``R.i``,
the block and term scales and the term table; witnesses ``cert.w{i}.q`` (``.p`` for γ₂) per
distinct explicit workload factor in order of first appearance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .blocks import StructureError
from .workload_blocks import WorkloadBlock

FAMILY = "marginal_weights"
CERTIFICATE = ("marginal weights: per-factor dual witnesses of the workload, multiplied within a "
               "block, combined across blocks; upper = the value the plan achieves")
CERTIFICATE_GRAM = CERTIFICATE + ("; and ‖W‖_tr/√(kN) from W·Wᵀ/N formed block by block "
                                  "(uniform dual weights)")
CERTIFICATE_MARGINAL = ("marginal weights on a marginal workload: lower from the marginal "
                        "algebra's dual witness (cert.x on cert.x_support; block weights ω for γ₂), "
                        "re-verified; upper = the value the plan achieves")
#: Reconstruction factors W_j C_j / W_j K_j are stored densely: at most this many entries each.
MAX_FACTOR_ENTRIES = 1 << 24


def _matrix_factors(wblocks: Sequence[WorkloadBlock]) -> list[Any]:
    """The distinct explicit workload factors, in order of first appearance."""
    seen: dict[str, Any] = {}
    for wb in wblocks:
        for f in wb.factors:
            if f.kind == "matrix" and f.key not in seen:
                seen[f.key] = f
    return list(seen.values())


def certificate_lower(plan: Any, W: Any) -> float:
    """The lower bound re-derived from the plan's witnesses (each re-verified)."""
    from .union import combine_block_bounds, with_uniform_bound, witness_lower
    from .workload_blocks import workload_blocks

    wblocks = workload_blocks(W, plan.domain.sizes)
    lowers = {f.key: witness_lower(plan, f"cert.w{i}", f.explicit)
              for i, f in enumerate(_matrix_factors(wblocks))}
    expected = {f"cert.w{i}.{k}" for i in range(len(lowers))
                for k in (("q",) if plan.norm == "gamma_f" else ("q", "p"))}
    extra = _own_arrays(plan) - expected
    if extra:
        raise StructureError(f"unexpected certificate arrays {sorted(extra)[:3]}")
    lower = combine_block_bounds(plan.norm, [(wb.rows, abs(wb.weight) * math.prod(
        lowers[f.key] for f in wb.factors if f.kind == "matrix")) for wb in wblocks])
    return with_uniform_bound(plan, lower, wblocks, CERTIFICATE_GRAM)


def _own_arrays(plan: Any) -> set[str]:
    """The certificate arrays of this family's own bound (not the symmetry-reduced one, which
    ``kinds.structured.verify`` verifies for every family)."""
    from .symmetry import ARRAY_PREFIX

    return {a for a in plan.certificate_arrays if not a.startswith(ARRAY_PREFIX)}


def verify_certificate(plan: Any, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap): the achieved value (recomputed by the caller) and the re-verified
    lower bound."""
    from factorize.numerics import relative_gap

    from .subset_algebra import CERTIFICATE_ALGEBRA

    if plan.certificate.get("method") == CERTIFICATE_MARGINAL:
        from .residual import marginal_solution_bounds, unpad_subsets

        sup = plan.certificate_arrays.get("cert.x_support")
        if sup is None:
            raise StructureError("a marginal certificate needs cert.x_support")
        extra = _own_arrays(plan) - {"cert.x", "cert.x_support", "cert.omega", "cert.omega_support"}
        if extra:
            raise StructureError(f"unexpected certificate arrays {sorted(extra)[:3]}")
        _, lower, _ = marginal_solution_bounds(plan, W, unpad_subsets(sup, len(plan.domain.sizes), "cert.x_support"))
    elif plan.certificate.get("method") == CERTIFICATE_ALGEBRA:
        from .subset_algebra import algebra_lower
        from .workload_blocks import workload_blocks

        if plan.certificate_arrays:
            raise StructureError("the subset-algebra certificate carries no arrays")
        alg = algebra_lower(workload_blocks(W, plan.domain.sizes), plan.domain.sizes)
        if alg is None or plan.norm != "gamma_f":
            raise StructureError("the subset-algebra certificate needs a workload whose Gram lies in "
                             "the algebra (identity and total factors) and gamma_f")
        lower = alg
    else:
        lower = certificate_lower(plan, W)
    upper = float(plan.certificate["achieved"])
    return upper, lower, relative_gap(upper, lower)
