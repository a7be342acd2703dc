"""Certified γ_F / γ₂ plans for (weighted) marginal workloads, in the algebra of subsets.

For a marginal family W (``factorize.planner.marginal_algebra``; block S is ``w_S`` times the
contingency table of S) over N = Π n_j cells, both programs of docs/math.md §3 are invariant
under the group that permutes the values of each attribute; it acts transitively on the
cells and permutes the rows of every block. By convexity an optimal X = AᵀA can be
averaged over the group, so it lies in the group's commutant, the algebra
``X = Σ_T x_T P_T`` (docs/math.md §5.3), whose diagonal is the constant ``Σ_T x_T dim_T / N``.
The strategy is ``A = X^{1/2} = Σ_T √x_T P_T`` and ``R = W A⁺``; ``R·A = W`` exactly when
``x_T > 0`` for every T with ``λ_T > 0`` (``W P_T = 0`` for the others). With the diagonal
shares ``y_T = x_T δ_T``, ``δ_T = dim_T / N`` (``Σ y_T = diag X = 1``) and
``ρ_{S,T} = dim_T / rows_S ≤ 1``, a row of block S (weight w_S) has

    ||r||² = w_S² Σ_{T⊆S} c_{S,T} / x_T = f_S(y),     f_S(y) = w_S² Σ_{T⊆S} ρ_{S,T}² / y_T

(``c_{S,T} = dim_T N / rows_S²``): f_S is the per-cell variance of block S's answers over
σ² for the residual-style strategy of unit L2 sensitivity (``MarginalSolution.
block_variances``). The peer on these variance objectives (max and total) is
ResidualPlanner: Xiao, He, Zhang, Kifer 2023, "An Optimal and Scalable Matrix Mechanism
for Noisy Marginals under Convex Loss Functions" (NeurIPS; arXiv:2305.08175, extended as
"ResidualPlanner+: a scalable matrix mechanism for marginals and beyond").

γ_F (closed form). ``||R||_F² = Σ_blocks rows_S f_S(y) = Σ_T λ_T dim_T / x_T`` with
``λ_T = Σ_{blocks S⊇T} w_S² N / rows_S`` and ``||A||²_{1→2} = Σ_T y_T``; the minimiser
under ``diag X ≤ 1`` is ``x_T ∝ √λ_T``, with value

    γ_F(W) = ||W||_tr / √(N k) = (N / √k) · Σ_T δ_T √ℓ_T,   ℓ_T = λ_T / N,  ||W||_tr = Σ_T dim_T √λ_T

(k counts rows, not weights). The uniform q gives exactly this lower bound (docs/math.md §4.1),
so the certificate is tight up to rounding.

γ₂ (a convex program over the distinct subsets). Copies of a subset with smaller weights
have smaller rows, so only each subset's largest weight matters (``w_S = max_copies w``;
subsets that differ only by attributes of size 1 are one constraint too):

    γ₂(W)² = min_{y ∈ Δ} max_S f_S(y).

Its Lagrange dual over block weights ω ∈ Δ (ω_S the total weight of block S's rows) is

    γ₂(W)² = max_{ω ∈ Δ} φ(ω)²,    φ(ω) = Σ_T √L_T(ω),    L_T(ω) = Σ_{S⊇T} ω_S w_S² ρ_{S,T}²,

the inner minimiser being ``y_T(ω) = √L_T / φ``. This is exactly the Lee–Shraibman–Špalek
bound (Lee, Shraibman, Špalek 2008, "A direct product theorem for discrepancy"; docs/math.md
§4.2) with q uniform and p constant (``ω_S / rows_S``) on the rows of the heaviest copy
of S: ``Wᵀ diag(p) W = Σ_S ω_S w_S² (N/rows_S²) Σ_{T⊆S} P_T``, so
``||D_p^{1/2} W D_q^{1/2}||_tr / √(Σp Σq) = Σ_T dim_T √(Σ_{S⊇T} ω_S w_S²/rows_S²) / √(Σω)
= φ(ω) / √(Σω)``. φ is concave and ½-homogeneous, and for y = y(ω) the primal value is
``max_S f_S(y) = 2 φ max_S ∂_Sφ`` while ``φ² = 2 φ Σ_S ω_S ∂_Sφ``: the gap is 2φ times the
Frank–Wolfe gap of ω.

The dual solver (``_maximise_dual``) is a log-barrier Newton method on
``φ(ω) + μ Σ log ω_S`` (μ ↓ 0 by factors of 100) stopped when the Frank–Wolfe gap is below
~1e-13 φ. Why Newton, and how it scales: first-order methods (Frank–Wolfe, mirror ascent)
converge sublinearly — O(1/ε) iterations at best on this smooth concave objective, whose
gradient is moreover unbounded at the simplex's boundary — which is hopeless for the
1e-10…1e-12 gaps this planner certifies, while the barrier path takes 0–15 Newton steps on
all-k-way and ≤k-way families (0 when the uniform ω is optimal, as for all-binary ones)
and ~10–60 on random 4–6-way families, whatever B. The step's matrix
``diag(ω) Qᵀ diag(¼ L^{-3/2}) Q diag(ω) + μI`` (``Q[T,S] = w_S² ρ_{S,T}²``,
nnz(Q) = Σ_S 2^{|S|}) is dense B×B — the rows of Q for ∅ and singletons touch every
block — but it is *sparse plus low rank*: a row T that lies in one block only (the top
set T = S of every maximal block) adds to the diagonal, and the other "shared" rows
(subsets of several blocks: ∅, singletons, and for 3-way families the pairs) are few,
m₂ ≪ B (m₂ = 1 + d for 2-way, 1 + d + C(d,2) for 3-way families). ``_NewtonSystem`` solves
it by a Schur complement onto those m₂ shared rows (Woodbury), costing O(Σ_S 4^{|S|} +
m₂³) per step instead of O(B³) (B = 19,600, m₂ = 1,276 for 3-way marginals over 50
attributes). Blocks whose diagonal is *not* dominated by their own private rows (nested
blocks such as the total query in ``marginals_upto``, once active) would make the
Woodbury subtraction cancel catastrophically as μ → 0; they are kept as unknowns of a
second, small Schur complement (``S_R = D_R + G_Rᵀ C⁻¹ G_R``, a sum of positive terms), so
nothing is computed as a difference of large numbers. When m₂ + |R| ≥ B the B×B matrix
itself is formed (sparse product) and solved. Symmetry between blocks of the same size
pattern is not exploited: it would help only symmetric families, which the uniform
starting point already solves in zero steps. Only numpy's LAPACK is called on dense
matrices (scipy's dense LAPACK brings a second OpenBLAS thread pool that fights numpy's
over the cores); scipy.sparse does the sparse products. On a loaded 2-core machine,
OpenBLAS threading itself costs up to ~5x on these mid-sized solves
(``OPENBLAS_NUM_THREADS=1`` is faster there). The only size limits are memory:
MAX_ALGEBRA_TERMS on nnz(Q), and MAX_GAMMA2_CORE_BYTES on the dense matrices of a step,
refused with a ValueError that names the limit.

Certificates. ``verify_marginal_solution`` recomputes the upper bound from the stored
coefficients x alone (γ_F: ``√((Σ_T λ_T dim_T / x_T)(Σ_T x_T δ_T) / k)``; γ₂:
``√(max_S w_S² Σ_{T⊆S} c_{S,T}/x_T · Σ_T x_T δ_T)``) and the lower bound from the witness
alone (the trace-norm formula with q uniform, and p from ω for γ₂), with per-attribute
products (a different route from the solver's ratios) and a rounding allowance in the
style of ``factorize.norms``: upper bounds inflated, lower bounds deflated by
``4 (terms + 2) u`` relative, plus an absolute allowance for underflow.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.choices import Method, Norm
from factorize.numerics import U as _U
from factorize.numerics import relative_gap
from factorize.planner.errors import PlannerError
from factorize.planner.marginal_algebra import (
    AlgebraCoefficients,
    MarginalFamily,
    attribute_product,
    marginal_family,
    mask_of,
)
from solvers.errors import CertificateGapError, CertificateInvalidError
from workloads import Workload, parse_workload

if TYPE_CHECKING:
    import scipy.sparse as sp

__all__ = [
    "MARGINAL_NORMS",
    "MAX_GAMMA2_CORE_BYTES",
    "MAX_LOG2_N",
    "MarginalSolution",
    "solve_marginals",
    "verify_marginal_solution",
]

MARGINAL_NORMS = ("gamma_f", "gamma_2")

#: Largest domain (log₂ N) handled: keeps every product of the verification a normal float.
MAX_LOG2_N = 500

#: Most memory for the dense matrices of one γ₂ Newton step: the m₂×m₂ matrix on the
#: shared subsets and the |R|×|R| one on the nested blocks (with their copies).
MAX_GAMMA2_CORE_BYTES = 6 * 2 ** 30

_TINY = 2.0 ** -1022  # smallest normal float: covers terms lost to underflow

#: Factor by which the barrier parameter μ falls between centring rounds (``_maximise_dual``).
_MU_DECREASE = 100.0


@dataclass(frozen=True)
class MarginalSolution:
    """A certified plan ``X = Σ_T x_T P_T`` (diag X = 1) for a marginal family.

    ``x`` holds the strategy coefficients; the dual witness is q uniform (implied) and,
    for γ₂, the block weights ``weights[i]`` (ω, not the family's row weights) on the
    distinct subsets ``weight_subsets[i]``: the rows of the copies of S with the largest
    family weight share ω_S evenly. ``upper``, ``lower`` and ``gap`` are the re-checked
    numbers of ``verify_marginal_solution``.
    """

    family: MarginalFamily
    norm: Norm
    x: AlgebraCoefficients
    weight_subsets: tuple[tuple[int, ...], ...] | None
    weights: tuple[float, ...] | None
    upper: float
    lower: float
    gap: float
    verified: bool
    failures: tuple[str, ...]
    seconds: float
    workload_spec: str | None = None
    fingerprint: str | None = None
    method: Method = "algebra"  # the --method that produced it
    details: dict = field(default_factory=dict)

    @property
    def value(self) -> float:
        """The achieved norm of the plan (= the certified upper bound)."""
        return self.upper

    def block_weights(self) -> tuple[tuple[tuple[int, ...], ...], tuple[float, ...]] | None:
        """``(weight_subsets, weights)``: the γ₂ dual weights ω_S with their subsets, or None
        when the solution states none (γ_F). :class:`CertificateInvalidError` when only one
        of the two is stated."""
        if self.weights is None and self.weight_subsets is None:
            return None
        if self.weights is None or self.weight_subsets is None:
            raise CertificateInvalidError("the marginal solution states block weights without their "
                                          "subsets, or subsets without weights")
        return self.weight_subsets, self.weights

    def diagonal_shares(self) -> dict[tuple[int, ...], float]:
        """``y_T = x_T dim_T / N`` for every subset T of the plan (``Σ_T y_T = diag X = 1``).

        The share of the strategy's unit column norm spent on ``range(P_T)`` (docs/math.md §5.3;
        the module docstring). ``dim_T / N`` is the correctly rounded exact ratio.
        """
        sizes, N = self.family.sizes, self.family.N
        return {tuple(T): float(v) * (math.prod(sizes[j] - 1 for j in T) / N)
                for T, v in zip(self.x.subsets, self.x.values, strict=True)}

    def block_variances(self) -> dict[tuple[tuple[int, ...], float], float]:
        """``f_S(y) = w_S² Σ_{T⊆S} ρ_{S,T}² / y_T`` for every distinct (subset, weight) block.

        The squared norm of every row of such a block in ``R = W A⁺``: the per-cell variance
        of its answers divided by σ² when A (unit L2 sensitivity, ``||A||_{1→2} = 1``) is
        measured with N(0, σ²) noise. ``ρ_{S,T} = dim_T / rows_S``; a T ⊆ S with
        ``y_T = 0`` gives ``inf``. At the γ₂ optimum ``max f_S = γ₂²``; at the γ_F optimum
        ``total_variance() = k γ_F²``. Keys are ``(subset, weight)`` in first-occurrence order.
        """
        base = _unit_block_variances(self.family, self.x)
        out: dict[tuple[tuple[int, ...], float], float] = {}
        for S, w in zip(self.family.subsets, self.family.weights, strict=True):
            key = (S, w)
            if key not in out:
                out[key] = (w * w) * base[S]
        return out

    def total_variance(self) -> float:
        """``Σ_blocks rows_S f_S(y) = ||R||_F²`` (repeats counted; ``= k γ_F²`` at the γ_F optimum)."""
        f = self.block_variances()
        return math.fsum(r * f[(S, w)] for S, r, w in
                         zip(self.family.subsets, self.family.rows, self.family.weights, strict=True))

    def summary_dict(self) -> dict:
        """Plain-JSON summary (``shape`` as Python ints: N may exceed 2⁵³)."""
        fam = self.family
        omega = self.block_weights()
        out: dict[str, Any] = {
            "workload": self.workload_spec,
            "fingerprint": self.fingerprint,
            "shape": [int(fam.k), int(fam.N)],
            "sizes": list(fam.sizes),
            "norm": self.norm,
            "value": self.value,
            "lower": self.lower,
            "upper": self.upper,
            "gap": self.gap,
            "verified": self.verified,
            "seconds": self.seconds,
            "method": self.method,
            "subsets": len(fam.subsets),
            "distinct_subsets": len(fam.unique()),
            "algebra_terms": len(self.x.subsets),
            "coefficients": self.x.to_dict(),
            "block_weights": (None if omega is None else
                              {"subsets": [list(S) for S in omega[0]], "weights": list(omega[1])}),
        }
        if not fam.unit_weights:
            out["row_weights"] = list(fam.weights)
        if self.failures:
            out["failures"] = list(self.failures)
        return out


def _unit_block_variances(family: MarginalFamily, x: AlgebraCoefficients) -> dict[tuple[int, ...], float]:
    """``Σ_{T⊆S} ρ_{S,T}² / y_T`` (weight 1) for every distinct subset S."""
    inc = family.incidence
    index = inc.subset_index
    xv = np.zeros(inc.num_subsets)
    for T, v in zip(x.subsets, x.values, strict=True):
        i = index.get(tuple(T))
        if i is not None:
            xv[i] = float(v)
    arr = _FamilyArrays.of(family)
    with np.errstate(divide="ignore"):
        y = xv * arr.delta
        terms = (arr.dims[inc.pair_t] / arr.rows[inc.pair_s]) ** 2 / y[inc.pair_t]
    f = np.bincount(inc.pair_s, weights=terms, minlength=inc.num_blocks)
    return {b.subset: float(v) for b, v in zip(inc.blocks, f, strict=True)}


# ---------------------------------------------------------------------------------
# per-family float arrays (solver side)
# ---------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class _FamilyArrays:
    """Float views of a family's incidence: ``dims`` (dim_T), ``delta`` (dim_T/N),
    ``rows`` (rows_S), ``gram_weight`` (Σ_copies w²) and ``max_weight`` per distinct S."""

    dims: np.ndarray
    delta: np.ndarray
    rows: np.ndarray
    gram_weight: np.ndarray
    max_weight: np.ndarray

    @staticmethod
    def of(family: MarginalFamily) -> _FamilyArrays:
        inc = family.incidence
        n = np.array(family.sizes, dtype=np.float64)
        dims = attribute_product(n - 1.0, inc.attrs)
        return _FamilyArrays(
            dims=dims, delta=dims / float(family.N),
            rows=attribute_product(n, inc.block_attrs),
            gram_weight=np.array([b.gram_weight for b in inc.blocks]),
            max_weight=np.array([b.max_weight for b in inc.blocks]))


# ---------------------------------------------------------------------------------
# solve
# ---------------------------------------------------------------------------------
def solve_marginals(W: Workload | str | MarginalFamily, norm: Norm = "gamma_f",
                    gap_tol: float = 1e-6) -> MarginalSolution:
    """Optimal γ_F / γ₂ plan for a marginal workload, with a re-checked certificate.

    Raises ``ValueError`` for a workload that is not a marginal family, for
    ``approx_gamma_2`` (not supported in the algebra) or an unknown norm, or a family
    beyond the memory limits (MAX_ALGEBRA_TERMS, MAX_GAMMA2_CORE_BYTES);
    ``CertificateInvalidError`` when the re-check fails and ``CertificateGapError``
    when its relative gap exceeds ``gap_tol``.
    """
    start = time.perf_counter()
    if norm == "approx_gamma_2":
        raise PlannerError("approx_gamma_2 is not supported by the marginal algebra planner "
                         "(the entrywise radius breaks the subset-algebra structure)")
    if norm not in MARGINAL_NORMS:
        raise PlannerError(f"unknown norm {norm!r}; expected one of {', '.join(MARGINAL_NORMS)}")
    spec = fingerprint = None
    if isinstance(W, MarginalFamily):
        family = W
    else:
        if isinstance(W, str):
            W = parse_workload(W)
        found = marginal_family(W)
        if found is None:
            raise PlannerError("the workload is not a stack of marginal blocks (Kronecker products "
                             "of identities and all-ones rows over one product domain)")
        family = found
        spec, fingerprint = W.spec, W.fingerprint()
    if family.N.bit_length() > MAX_LOG2_N:
        raise PlannerError(f"the domain has N ≈ 2^{family.N.bit_length()} cells, above the "
                         f"float64 range this planner certifies (2^{MAX_LOG2_N})")

    details: dict = {}
    t0 = time.perf_counter()
    if norm == "gamma_f":
        x = _solve_gamma_f(family)
        weight_subsets = weights = None
    else:
        x, weight_subsets, weights, details = _solve_gamma_2(family)
    t1 = time.perf_counter()

    draft = MarginalSolution(family=family, norm=norm, x=x, weight_subsets=weight_subsets,
                             weights=weights, upper=math.inf, lower=0.0, gap=math.inf,
                             verified=False, failures=(), seconds=0.0)
    upper, lower, gap, passed, failures = verify_marginal_solution(family, draft)
    details = {**details, "solve_seconds": t1 - t0, "verify_seconds": time.perf_counter() - t1}
    if not passed:
        raise CertificateInvalidError("the marginal-algebra certificate failed verification: "
                                      + "; ".join(failures))
    if not gap <= gap_tol:
        raise CertificateGapError(f"certified relative gap {gap:.3g} exceeds the requested "
                                  f"{gap_tol:g} (lower {lower:.12g}, upper {upper:.12g})")
    return MarginalSolution(family=family, norm=norm, x=x, weight_subsets=weight_subsets,
                            weights=weights, upper=upper, lower=lower, gap=gap, verified=True,
                            failures=(), seconds=time.perf_counter() - start,
                            workload_spec=spec, fingerprint=fingerprint, details=details)


def _coefficients(family: MarginalFamily, y: np.ndarray) -> AlgebraCoefficients:
    """``x_T = y_T / δ_T`` on the closure, rescaled to ``diag X = Σ_T x_T δ_T = 1``."""
    inc = family.incidence
    arr = _FamilyArrays.of(family)
    x = y / arr.delta
    diag = math.fsum((x * arr.delta).tolist())
    return AlgebraCoefficients(sizes=family.sizes, subsets=inc.subsets,
                               values=tuple((x / diag).tolist()))


def _solve_gamma_f(family: MarginalFamily) -> AlgebraCoefficients:
    """``x_T ∝ √λ_T`` on the closure (the exact optimum; see the module docstring)."""
    inc = family.incidence
    arr = _FamilyArrays.of(family)
    ell = np.bincount(inc.pair_t, weights=(arr.gram_weight / arr.rows)[inc.pair_s],
                      minlength=inc.num_subsets)  # λ_T / N
    return _coefficients(family, np.sqrt(ell) * arr.delta)


def _gamma2_matrix(family: MarginalFamily) -> tuple[np.ndarray, sp.csr_array]:
    """The dual's columns and ``Q[T, S] = w_S² ρ_{S,T}²`` (sparse, closure × columns).

    Columns are the distinct subsets, one per set of attributes of size > 1 (the copy of
    largest weight; the others' constraints are implied). Returns the incidence indices of
    the column blocks and Q.
    """
    inc = family.incidence
    arr = _FamilyArrays.of(family)
    best: dict[bytes, int] = {}
    for s, row in enumerate(inc.block_attrs):
        key = row.tobytes()
        b = best.get(key)
        if b is None or arr.max_weight[s] > arr.max_weight[b]:
            best[key] = s
    cols = np.array(sorted(best.values()), dtype=np.int64)
    col_of = np.full(inc.num_blocks, -1, dtype=np.int64)
    col_of[cols] = np.arange(len(cols))
    keep = col_of[inc.pair_s] >= 0
    t, s = inc.pair_t[keep], inc.pair_s[keep]
    vals = arr.max_weight[s] ** 2 * (arr.dims[t] / arr.rows[s]) ** 2
    import scipy.sparse as sp  # here, not at import: the run path's certificate check has no use for it

    Q = sp.csr_array((vals, (t, col_of[s])), shape=(inc.num_subsets, len(cols)))
    Q.sum_duplicates()
    Q.sort_indices()
    return cols, Q


def _solve_gamma_2(family: MarginalFamily):
    cols, Q = _gamma2_matrix(family)
    w, info = _maximise_dual(Q)
    y = np.sqrt(Q @ w)
    y /= y.sum()
    x = _coefficients(family, y)
    blocks = family.incidence.blocks
    return (x, tuple(blocks[c].subset for c in cols.tolist()), tuple(w.tolist()),
            {**info, "columns": int(len(cols)), "nnz": int(Q.nnz)})


class _NewtonSystem:
    """Solves ``(G_wᵀ G_w + μI) z = r`` with ``G_w = diag(√h) Q diag(ω)`` (B×B, never formed).

    Rows of Q that touch one column only ("private": the top set of every maximal block)
    add ``ω_S² h_T Q_{T,S}²`` to the diagonal ``D = μ + …``; the other ("shared") rows form
    ``G`` (m₂×B). Columns with ``D_S ≥ ½ (D_S + ||G e_S||²)`` form P, the others R. Then,
    with ``C = I + G_P D_P⁻¹ G_Pᵀ`` (m₂×m₂, Jacobi-scaled, SPD):

        v = C⁻¹ (G_P D_P⁻¹ r_P + G_R z_R),     z_P = D_P⁻¹ (r_P − G_Pᵀ v),
        (D_R + G_Rᵀ C⁻¹ G_R) z_R = r_R − G_Rᵀ C⁻¹ G_P D_P⁻¹ r_P,

    block elimination of ``[[D, Gᵀ], [G, −I]]`` (v = G z). In P the subtraction loses at
    most ~log10(B) digits (the diagonal dominates the column); R's matrix is a sum of
    positive terms. Two dense solves (numpy LAPACK) of order m₂ and |R| per step. When
    ``m₂ + |R| ≥ B`` (few blocks with many shared subsets, e.g. random 5- and 6-way
    families) the B×B matrix ``D + GᵀG`` is formed (sparse product) and solved instead.
    """

    def __init__(self, Q: sp.csr_array) -> None:
        m, B = Q.shape
        self.B = B
        counts = np.diff(Q.indptr)
        private = np.flatnonzero(counts == 1)
        shared = np.flatnonzero(counts > 1)
        Q1 = Q[private]
        self.p_row, self.p_col, self.p_val2 = private, Q1.indices.astype(np.int64), Q1.data ** 2
        Q2 = Q[shared].tocsr()
        Q2.sort_indices()
        self.m2 = len(shared)
        self.indptr, self.indices = Q2.indptr, Q2.indices.astype(np.int64)
        self.s_row = shared[np.repeat(np.arange(self.m2), np.diff(Q2.indptr))]
        self.s_val = Q2.data
        core = min(self.m2, B)
        need = 8 * 3 * core ** 2
        if need > MAX_GAMMA2_CORE_BYTES:
            raise PlannerError(f"the γ₂ Newton step needs a dense {core}×{core} matrix ({self.m2} "
                             f"subsets shared by several of the {B} blocks; ~{need / 2 ** 30:.1f} "
                             f"GiB), above MAX_GAMMA2_CORE_BYTES={MAX_GAMMA2_CORE_BYTES}")
        self.max_r = 0
        self.dense_steps = 0

    def solve(self, w: np.ndarray, h: np.ndarray, mu: float, rhs: np.ndarray) -> np.ndarray:
        import scipy.sparse as sp

        B, m2 = self.B, self.m2
        D = mu + w * w * np.bincount(self.p_col, weights=h[self.p_row] * self.p_val2, minlength=B)
        if m2 == 0:
            return rhs / D[:, None]
        g = np.sqrt(h[self.s_row]) * self.s_val * w[self.indices]
        J = D + np.bincount(self.indices, weights=g * g, minlength=B)
        in_p = D >= 0.5 * J
        R = np.flatnonzero(~in_p)
        nR = len(R)
        if nR and m2 + nR < B:
            need = 8 * (3 * m2 * nR + 3 * nR * nR + 3 * m2 * m2)
            if need > MAX_GAMMA2_CORE_BYTES:
                raise PlannerError(f"the γ₂ Newton step needs dense matrices on {m2} shared subsets "
                                 f"and {nR} nested blocks (~{need / 2 ** 30:.1f} GiB), above "
                                 f"MAX_GAMMA2_CORE_BYTES={MAX_GAMMA2_CORE_BYTES}")
        self.max_r = max(self.max_r, nR)
        if m2 + nR >= B:  # the low-rank form would be no smaller than the matrix itself
            self.dense_steps += 1
            return self._solve_dense(D, g, rhs)
        inv_sqrt_d = np.where(in_p, 1.0 / np.sqrt(D), 0.0)
        v_data = g * inv_sqrt_d[self.indices]
        v_data[np.abs(v_data) < 1e-150] = 0.0  # their squares cannot move C = I + …
        V = sp.csr_array((v_data, self.indices, self.indptr), shape=(m2, B))
        C = (V @ V.T).toarray()
        C[np.diag_indices(m2)] += 1.0
        G = sp.csr_array((g, self.indices, self.indptr), shape=(m2, B))
        rP = np.where(in_p[:, None], rhs / D[:, None], 0.0)
        b = G @ rP  # G_P D_P⁻¹ r_P (R columns of rP are zero)
        GR = G[:, R].toarray() if nR else np.zeros((m2, 0))
        sol = _spd_solve(C, np.column_stack([GR, b]))
        Y, c = sol[:, :nR], sol[:, nR:]
        z = np.empty_like(rhs)
        if nR:
            S = GR.T @ Y
            S = 0.5 * (S + S.T)
            S[np.diag_indices(nR)] += D[R]
            zR = _spd_solve(S, rhs[R] - GR.T @ c)
            v = c + Y @ zR
            z[R] = zR
        else:
            v = c
        P = np.flatnonzero(in_p)
        z[P] = (rhs[P] - (G.T @ v)[P]) / D[P][:, None]
        return z

    def _solve_dense(self, D: np.ndarray, g: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """The B×B matrix ``D + GᵀG`` itself (few blocks, many shared subsets)."""
        import scipy.sparse as sp

        G = sp.csr_array((g, self.indices, self.indptr), shape=(self.m2, self.B))
        M = (G.T @ G).toarray()
        M[np.diag_indices(self.B)] += D
        return _spd_solve(M, rhs)


def _spd_solve(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``A⁻¹ rhs`` for SPD A, Jacobi-scaled to a unit diagonal (entries below 1e-18 there are
    dropped: they cannot change the solution, and the subnormals they breed slow LAPACK)."""
    s = 1.0 / np.sqrt(np.diag(A))
    As = A * s[:, None] * s[None, :]
    As[np.abs(As) < 1e-18] = 0.0
    try:  # numpy's LAPACK only: mixing in scipy's OpenBLAS makes two thread pools
        out = np.linalg.solve(As, rhs * s[:, None])  # fight over the cores
    except np.linalg.LinAlgError:
        out = np.linalg.lstsq(As, rhs * s[:, None], rcond=None)[0]
    return out * s[:, None]


def _maximise_dual(Q: sp.csr_array | np.ndarray, target: float = 1e-13, max_outer: int = 40,  # noqa: C901 (counted allow-list)
                   max_inner: int = 60) -> tuple[np.ndarray, dict]:
    """Maximise ``φ(ω) = Σ_T √((Qω)_T)`` over the simplex by a log-barrier Newton method.

    Central path of ``F_μ = φ(ω) + μ Σ_S log ω_S`` (``1ᵀω = 1``) with μ ↓ 0 by factors of
    ``_MU_DECREASE`` (100: measured fewest Newton steps in total; 1000 stalls on some random
    families). For each μ, Newton steps until the centring residual ``max_S |g_S − ωᵀg|``
    of ``g = ∇F_μ`` is at most Bμ (on the central path g is constant); each step solves the
    equality-constrained KKT system in the affine scaling ``ω = diag(ω) u`` (barrier
    Hessian μI) by ``_NewtonSystem`` (sparse + low rank), with g shifted by ωᵀg first (the
    projected step is shift-invariant, and the shift avoids a catastrophic cancellation
    near the optimum). The step is clipped per block at 99% of the way to the boundary and
    damped by an Armijo search on F_μ. Then the Frank–Wolfe gap
    ``FW = max_S ∂_Sφ − ωᵀ∇φ`` is at most 2Bμ, and the relative primal-dual gap of γ₂² at
    ω is ``2 FW / φ``. Stops when ``FW ≤ target · φ``, or when FW has not halved in four
    rounds (the rounding floor). Returns the best ω seen and counts.
    """
    import scipy.sparse as sp

    Q = sp.csr_array(Q)
    B = Q.shape[1]
    if B == 1:
        return np.ones(1), {"newton_steps": 0, "outer": 0}
    QT = Q.T.tocsr()
    system = _NewtonSystem(Q)

    def values(w: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        L = Q @ w
        sL = np.sqrt(L)
        return L, float(sL.sum()), QT @ (0.5 / sL)

    def barrier(w: np.ndarray, mu: float) -> float:
        return float(np.sqrt(Q @ w).sum()) + mu * float(np.sum(np.log(w)))

    w = np.full(B, 1.0 / B)
    L, phi, grad = values(w)
    mu = 0.1 * phi / B
    steps = 0
    best_w, best_fw = w.copy(), math.inf
    outer = stalled = 0
    for outer in range(1, max_outer + 1):  # noqa: B007 - the count is read after the loop
        best_err, no_progress = math.inf, 0
        for _ in range(max_inner):
            L, phi, grad = values(w)
            g = grad + mu / w
            # centring residual: on the central path g_S = ν for every S (ν = ωᵀg there);
            # max_S |g_S − ωᵀg| ≤ Bμ keeps FW ≤ 2Bμ
            e = g - w @ g
            err = float(np.max(np.abs(e)))
            if err <= B * mu:
                break
            if err < 0.9 * best_err:
                best_err, no_progress = err, 0
            else:
                no_progress += 1
                if no_progress >= 5:
                    break  # the rounding floor of this μ
            gt = w * e  # shifting g by a constant leaves the projected step unchanged, and
            # without the shift the step is the small difference of two large vectors
            sol = system.solve(w, 0.25 / (L * np.sqrt(L)), mu, np.column_stack([gt, w]))
            a, b = sol[:, 0], sol[:, 1]
            dt = a - (w @ a) / (w @ b) * b
            dec2 = float(gt @ dt)  # Newton decrement², the predicted ascent × 2
            if not dec2 > 0:
                break  # rounding: no ascent direction left
            # per block, at most 99% of the way to the boundary: blocks that the barrier
            # alone holds up (ω_S ∝ μ) fall by up to 100x in one step while the others take
            # their full Newton step (a single step length would shrink every block's step
            # to that of the most constrained one after each decrease of μ)
            dtc = np.maximum(dt, -0.99)
            slope = float(gt @ dtc)  # ascent rate along the clipped step once renormalised
            if not slope > 0:  # clipping spoilt the ascent: one step length for all blocks
                dtc = min(1.0, 0.99 / max(1.0, float(-dt.min()))) * dt
                slope = float(gt @ dtc)
            if dec2 < 0.1 * mu:
                # quadratic-convergence region of the (self-concordant-like) F/μ: a full step;
                # function values would only measure rounding here
                wn = w * (1.0 + dtc)
            else:
                f0 = barrier(w, mu)
                t = 1.0
                while t > 1e-14:
                    wn = w * (1.0 + t * dtc)
                    if barrier(wn / wn.sum(), mu) >= f0 + 0.25 * t * slope:
                        break
                    t *= 0.5
                else:
                    break  # no ascent possible at this precision
            w = wn / wn.sum()
            steps += 1
        L, phi, grad = values(w)
        fw = float(grad.max() - w @ grad)
        if fw < 0.5 * best_fw:
            stalled = 0
        else:
            stalled += 1
        if fw < best_fw:
            best_w, best_fw = w.copy(), fw
        if fw <= target * phi or stalled >= 4:  # converged, or at the rounding floor
            break
        mu /= _MU_DECREASE
    return best_w, {"newton_steps": steps, "outer": outer, "fw_gap": best_fw,
                    "shared_subsets": system.m2, "max_nested_columns": system.max_r,
                    "dense_steps": system.dense_steps}


# ---------------------------------------------------------------------------------
# verification (independent of the solve path)
# ---------------------------------------------------------------------------------
def _products_of_masks(sizes: tuple[int, ...], masks: list[int]) -> np.ndarray:
    """``frac[T] = Π_{j∈T}(1 − 1/n_j) Π_{j∉T}(1/n_j)`` for a few stray masks (Python)."""
    out = []
    for t in masks:
        p = 1.0
        for j, n in enumerate(sizes):
            p *= (1.0 - 1.0 / n) if t >> j & 1 else 1.0 / n
        out.append(p)
    return np.array(out, dtype=np.float64)


def _is_subset_tuple(T: tuple, d: int) -> bool:
    """A strictly increasing tuple of attribute indices < d (ints, not bools)."""
    if any(isinstance(j, bool) or not isinstance(j, (int, np.integer)) for j in T):
        return False
    return all(0 <= j < d for j in T) and all(a < b for a, b in zip(T, T[1:], strict=False))


def verify_marginal_solution(family: MarginalFamily, sol: MarginalSolution  # noqa: C901 (counted allow-list)
                             ) -> tuple[float, float, float, bool, tuple[str, ...]]:
    """Recompute ``(upper, lower, gap, passed, failures)`` from ``sol.x`` and the witness alone.

    Upper (the plan ``A = Σ √x_T P_T``, ``R = W A⁺``): requires finite ``x_T ≥ 0`` on subsets
    of the domain, and ``x_T > 0`` for every T with ``λ_T > 0`` — otherwise ``R·A ≠ W``.
    Then ``||A||²_{1→2} = Σ_T x_T dim_T/N``, and
    γ_F: ``||R||_F² = Σ_T λ_T dim_T / x_T``, ``λ_T = Σ_{blocks S⊇T} w_S² Π_{j∉S} n_j``;
    γ₂: ``||R||²_{2→∞} = max_S w_S² Σ_{T⊆S} c_{S,T}/x_T`` (w_S the largest weight of a copy
    of S), ``c_{S,T} = Π_{j∈T}(1−1/n_j) Π_{j∈S∖T}(1/n_j) Π_{j∉S} n_j``.
    Lower (docs/math.md §5.3): γ_F with q uniform, ``||W||_tr / √(N k)`` (k rows);
    γ₂ (Lee–Shraibman–Špalek) with q uniform and p = ω_S / rows_S on the rows of the copies
    of S with the largest weight w_S (split evenly among them):
    ``||D_p^{1/2} W D_q^{1/2}||_tr / √(Σp Σq)
    = N Σ_T (dim_T/N) √(Σ_{S⊇T} ω_S w_S² Π_{j∈S} n_j^{-2}) / √(Σ_S ω_S)``.
    All per-subset numbers are per-attribute float products over the vectorised incidence
    (``SubsetIncidence``), not the solver's ratios.
    """
    failures: list[str] = []
    sizes = family.sizes
    d, N, k = family.d, family.N, family.k
    if sol.norm not in MARGINAL_NORMS:
        return math.inf, 0.0, math.inf, False, (f"unknown norm {sol.norm!r}",)
    if tuple(sol.x.sizes) != sizes:
        return math.inf, 0.0, math.inf, False, (
            f"coefficients are for sizes {sol.x.sizes}, the workload has {sizes}",)
    if N.bit_length() > MAX_LOG2_N:
        return math.inf, 0.0, math.inf, False, (f"N ≈ 2^{N.bit_length()} is beyond the certified range",)

    # --- the coefficients -----------------------------------------------------------
    inc = family.incidence  # the support: T with λ_T > 0 (every weight is > 0)
    support = inc.masks
    index = inc.subset_index
    xv = np.zeros(len(support))
    stray: dict[int, float] = {}  # coefficients off the support (count in diag X only)
    seen: set[int] = set()
    for T, v in zip(sol.x.subsets, sol.x.values, strict=True):
        v = float(v)
        T = tuple(T)
        if not _is_subset_tuple(T, d):
            failures.append(f"coefficient subset {T} is not a sorted set of attributes < {d}")
            continue
        i = index.get(T)
        if (i is not None and i in seen) or (i is None and mask_of(T) in stray):
            failures.append(f"coefficient subset {T} appears twice")
            continue
        if not (math.isfinite(v) and v >= 0):
            failures.append(f"coefficient x_{T} = {v!r} is not finite and non-negative")
            continue
        if i is None:
            stray[mask_of(T)] = v
        else:
            xv[i] = v
            seen.add(i)
    if failures:
        return math.inf, 0.0, math.inf, False, tuple(failures)
    if not bool(np.all(xv > 0)):
        bad = np.flatnonzero(~(xv > 0))
        failures.append(f"x_T = 0 on {len(bad)} subset(s) with λ_T > 0 (e.g. T = "
                        f"{inc.subsets[int(bad[0])]}): R·A ≠ W")
        return math.inf, 0.0, math.inf, False, tuple(failures)

    n = np.array(sizes, dtype=np.float64)
    inv_n = 1.0 / n
    a_T = attribute_product(1.0 - inv_n, inc.attrs)      # Π_{j∈T}(1 − 1/n_j)
    inv_T = attribute_product(inv_n, inc.attrs)          # Π_{j∈T} 1/n_j
    inv_all = float(np.prod(inv_n))                      # Π_j 1/n_j = 1/N
    frac = a_T * (inv_all / inv_T)                       # dim_T / N
    inv_S = attribute_product(inv_n, inc.block_attrs)    # 1 / rows_S
    out_S = float(np.prod(n)) * inv_S                    # Π_{j∉S} n_j
    blocks = inc.blocks
    w2_sum = np.array([b.gram_weight for b in blocks])   # Σ_copies w² (λ_T)
    w2_max = np.array([b.max_weight for b in blocks]) ** 2  # (max_copies w)² (γ₂)

    B, m = inc.num_blocks, len(support) + len(stray)
    terms = 2 * B + 2 * m + 4 * d + 20
    up = 1.0 + 4.0 * (terms + 2) * _U
    down = 1.0 - 4.0 * (terms + 2) * _U
    pt, ps = inc.pair_t, inc.pair_s

    diag = float(np.sum(xv * frac)) + m * _TINY  # ||A||²_{1→2}
    if stray:
        diag += float(np.sum(np.array(list(stray.values())) * _products_of_masks(sizes, list(stray))))
    Nf = float(N)
    sqrtN_over_k = math.sqrt(N / k)

    with np.errstate(over="ignore", divide="ignore", under="ignore", invalid="ignore"):
        if sol.norm == "gamma_f":
            # λ_T / N = Σ_{S⊇T} (Σ_copies w²) Π_{j∈S} 1/n_j
            lam_N = np.bincount(pt, weights=w2_sum[ps] * inv_S[ps], minlength=len(support))
            s1 = float(np.sum(lam_N * frac / xv)) + m * _TINY  # ||R||_F² / N²
            upper = math.sqrt(Nf) * sqrtN_over_k * math.sqrt(s1 * diag) * up
            lam_low = np.maximum(lam_N - B * _TINY, 0.0)
            lower = math.sqrt(Nf) * sqrtN_over_k * float(np.sum(frac * np.sqrt(lam_low))) * down
        else:
            if sol.weights is None or sol.weight_subsets is None:
                return math.inf, 0.0, math.inf, False, ("a γ₂ solution needs block weights",)
            if len(sol.weights) != len(sol.weight_subsets):
                return math.inf, 0.0, math.inf, False, ("one block weight per weight subset",)
            bindex = inc.block_index
            omega = np.zeros(B)
            strays = []
            for S, v in zip(sol.weight_subsets, sol.weights, strict=True):
                v = float(v)
                S = tuple(S)
                if not (math.isfinite(v) and v >= 0):
                    failures.append(f"block weight ω_{S} = {v!r} is not finite and non-negative")
                i = bindex.get(S) if _is_subset_tuple(S, d) else None
                if i is None:
                    strays.append(S)
                else:
                    omega[i] += v
            if strays:
                failures.append(f"block weights on subsets that are not blocks: {strays[:3]}")
            if failures:
                return math.inf, 0.0, math.inf, False, tuple(failures)
            if not float(np.sum(omega)) > 0:
                return math.inf, 0.0, math.inf, False, ("block weights are all zero",)
            # upper: c_{S,T} = a_T · (inv_S / inv_T) · out_S, row norms w_S² Σ c/x
            c = a_T[pt] * (inv_S[ps] / inv_T[pt]) * out_S[ps]
            r = w2_max * np.bincount(ps, weights=c / xv[pt], minlength=B)
            r_max = float(np.max(r)) + m * _TINY  # ||R||²_{2→∞}
            upper = math.sqrt(r_max * diag) * up
            # lower: eig_T = Σ_{S⊇T} ω_S w_S² inv_S² (p_S = ω_S / rows_S per heaviest row)
            eig = np.bincount(pt, weights=omega[ps] * w2_max[ps] * inv_S[ps] ** 2,
                              minlength=len(support))
            eig_low = np.maximum(eig - B * _TINY, 0.0)
            trace = Nf * float(np.sum(frac * np.sqrt(eig_low)))
            lower = trace / math.sqrt(float(np.sum(omega)) * up) * down

    if not math.isfinite(upper):
        failures.append(f"upper bound {upper!r} is not finite")
    if not (math.isfinite(lower) and lower > 0):
        failures.append(f"lower bound {lower!r} is not positive and finite")
    elif lower > upper:
        failures.append(f"lower bound {lower:.15g} exceeds upper bound {upper:.15g}: one is wrong")
    gap = relative_gap(upper, lower) if math.isfinite(upper) else math.inf
    return upper, lower, gap, not failures, tuple(failures)
