"""The residual strategy of a marginal workload, and its compact file encoding.

Planner (``factorize.planner.marginal_optimum``, docs/math.md §5.3): the optimal plan is
``X = AᵀA = Σ_T x_T P_T`` over the downward closure of the workload's subsets, with
``P_T = ⊗_{j∈T} C_j ⊗_{j∉T} K_j``. Write ``C_j = U_jᵀU_j`` with U_j an orthonormal basis of
1^⊥ (the Helmert basis, :func:`helmert`) and ``K_j = 𝟙𝟙ᵀ/n_j``: then
``P_T = G_TᵀG_T`` with ``G_T = ⊗_{j∈T} U_j ⊗_{j∉T} 1ᵀ/√n_j``, and ``A = [√x_T G_T]_T`` is the
stack of blocks

    s_T ⊗_{j∈T} U_j ⊗_{j∉T} 1ᵀ,    s_T² = x_T / Π_{j∉T} n_j = y_T / Π_{j∈T}(1 − 1/n_j),

``y_T = x_T dim_T / N`` the diagonal shares (Σ y_T = 1: the L2 add/remove sensitivity is 1,
every column of A has norm √(Σ y_T)). Block T is measured from the records' T-marginal:
``s_T (⊗_{j∈T} U_j) m_T`` — the "residual" of ResidualPlanner (He et al. 2023, §4), here
with an orthonormal basis so that the blocks are orthogonal and the least-squares
reconstruction is explicit: since ``I = U_jᵀU_j + 𝟙𝟙ᵀ/n_j``,

    marginal_S = w_S Σ_{T⊆S} (1/s_T) (⊗_{j∈T} U_jᵀ ⊗_{j∈S∖T} 𝟙/n_j) ỹ_T

(``R = W A⁺``), whose every cell has variance ``σ² w_S² Σ_{T⊆S} ρ_{S,T}² / y_T = σ² f_S(y)``,
the planner's objective. All marginals come from one estimate of the histogram's projection
onto the closure: they are mutually consistent.

Encoding (arrays; the reconstruction follows from the rule above and is rebuilt on load, so a
plan's size is O(closure + Σ n_j²), never O(terms)): ``strategy.support`` (blocks × width,
−1 padded), ``strategy.scale`` (s_T), ``recon.support`` and ``recon.weight`` (the workload's
blocks, in row order), ``recon.inverse`` (the reconstruction's 1/s_T), ``U.n``, ``V.n`` and
``mean.n`` per attribute size n.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import WorkloadBlock

FAMILY = "residual"
#: The certificate method of residual plans (the marginal planner's solution, re-verified by
#: :func:`marginal_solution_bounds`).
CERTIFICATE = ("marginal-algebra (MATH.md §2.3): upper from the coefficients x, lower "
               "from the dual witness (q uniform; block weights ω for γ₂)")
BASIS = "Helmert, truncated to 53 bits below its largest entry (U.n); V.n = U.nᵀ; mean.n = 1/n"


def helmert(n: int) -> np.ndarray:
    """The (n−1)×n Helmert basis of 1^⊥: row i (1-based) is ``(1, …, 1, −i, 0, …)/√(i(i+1))``
    with i ones — orthonormal rows, every column of squared norm ``1 − 1/n``."""
    if n < 2:
        raise StructureError("a residual basis needs an attribute of size ≥ 2")
    H = np.zeros((n - 1, n))
    for i in range(1, n):
        H[i - 1, :i] = 1.0
        H[i - 1, i] = -float(i)
        H[i - 1] /= math.sqrt(i * (i + 1))
    return H


def factor_arrays(sizes: Sequence[int]) -> dict[str, np.ndarray]:
    """``U.n`` (the measured Helmert basis), ``V.n = U.nᵀ`` and ``mean.n = 𝟙/n`` per size ≥ 2."""
    from factorize.privacy.lattice import quantize

    out: dict[str, np.ndarray] = {}
    for n in sorted({int(n) for n in sizes if n > 1}):
        U = quantize(helmert(n)).measured
        out[f"U.{n}"] = U
        out[f"V.{n}"] = np.ascontiguousarray(U.T)
        out[f"mean.{n}"] = np.full((n, 1), 1.0 / n)
    return out


def residual_scale(x_T: float, sizes: Sequence[int], T: Sequence[int]) -> float:
    """``s_T = √(x_T / Π_{j∉T} n_j)`` quantized to the measured scale (module docstring)."""
    from .strategy import measured_scale

    outside = math.prod(n for j, n in enumerate(sizes) if j not in set(T))
    return measured_scale(math.sqrt(x_T) / math.sqrt(float(outside)))


def build(sizes: Sequence[int], closure: Sequence[tuple[int, ...]], x: Mapping[tuple[int, ...], float],
          wblocks: Sequence[WorkloadBlock]
          ) -> tuple[StructuredStrategy, StructuredReconstruction, tuple[dict[str, Any], dict[str, np.ndarray]]]:
    """The residual strategy for coefficients ``x`` on ``closure``, its reconstruction of the
    marginal blocks ``wblocks`` (module docstring), and their file encoding (:func:`encode`)."""
    sizes = tuple(int(n) for n in sizes)
    arrays = factor_arrays(sizes)
    scales = np.array([residual_scale(float(x[T]), sizes, T) for T in closure])
    supports = [tuple(T) for T in closure]
    out_support, out_weight = _marginal_blocks(wblocks)
    inverse = 1.0 / scales
    strategy, recon = _assemble(sizes, supports, scales, out_support, out_weight, inverse, arrays)
    return strategy, recon, encode(supports, scales, out_support, out_weight, inverse, arrays,
                                   strategy.m)


def _marginal_blocks(wblocks: Sequence[WorkloadBlock]) -> tuple[list[tuple[int, ...]], list[float]]:
    supports, weights = [], []
    for o, wb in enumerate(wblocks):
        S = wb.marginal_support
        if S is None:
            raise StructureError(f"workload block {o} is not a marginal: a residual plan needs a "
                                 "marginal workload")
        supports.append(S)
        weights.append(float(wb.weight))
    return supports, weights


def _assemble(sizes: tuple[int, ...], supports: Sequence[tuple[int, ...]], scales: np.ndarray,
              out_support: Sequence[tuple[int, ...]], out_weight: Sequence[float],
              inverse: np.ndarray, arrays: dict[str, np.ndarray]
              ) -> tuple[StructuredStrategy, StructuredReconstruction]:
    blocks = [KronBlock(float(s), T, tuple(f"U.{sizes[j]}" for j in T))
              for T, s in zip(supports, scales, strict=True)]
    strategy = StructuredStrategy(sizes, blocks, arrays, FAMILY)
    index = {T: i for i, T in enumerate(supports)}
    terms: list[Term] = []
    rows = []
    for o, (S, w) in enumerate(zip(out_support, out_weight, strict=True)):
        rows.append(math.prod(sizes[j] for j in S))
        for r in range(len(S) + 1):
            for T in itertools.combinations(S, r):
                b = index.get(T)
                if b is None:
                    continue  # missing residual: the identity check refuses the plan
                chosen = set(T)
                names = tuple(f"V.{sizes[j]}" if j in chosen else f"mean.{sizes[j]}" for j in S)
                terms.append(Term(o, b, float(w * inverse[b]), tuple(S), names))
    return strategy, StructuredReconstruction(rows, terms, arrays, strategy)


# ---------------------------------------------------------------------------------------
# file encoding


def _pad(supports: Sequence[tuple[int, ...]]) -> np.ndarray:
    width = max((len(T) for T in supports), default=0)
    out = np.full((len(supports), max(width, 1)), -1.0)
    for i, T in enumerate(supports):
        out[i, :len(T)] = T
    return out


def unpad_subsets(a: np.ndarray, d: int, what: str) -> list[tuple[int, ...]]:
    if a.ndim != 2:
        raise StructureError(f"{what} must be a 2-D array")
    out = []
    for row in a.tolist():
        k = next((i for i, v in enumerate(row) if v == -1.0), len(row))
        head, tail = row[:k], row[k:]
        if any(v != -1.0 for v in tail):
            raise StructureError(f"{what}: −1 padding must come last")
        if any(not (v == int(v) and 0 <= v < d) for v in head):
            raise StructureError(f"{what}: entries must be attribute indices < {d}")
        T = tuple(int(v) for v in head)
        if any(y <= x for x, y in zip(T, T[1:], strict=False)):
            raise StructureError(f"{what}: a subset is not strictly increasing")
        out.append(T)
    return out


def encode(supports: Sequence[tuple[int, ...]], scales: np.ndarray,
           out_support: Sequence[tuple[int, ...]], out_weight: Sequence[float],
           inverse: np.ndarray, arrays: Mapping[str, np.ndarray], m: int
           ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Manifest fields and arrays of a residual plan (module docstring)."""
    out = {"strategy.support": _pad(supports), "strategy.scale": np.asarray(scales, dtype=np.float64),
           "recon.support": _pad(out_support),
           "recon.weight": np.asarray(out_weight, dtype=np.float64),
           "recon.inverse": np.asarray(inverse, dtype=np.float64), **arrays}
    manifest = {"family": FAMILY, "blocks": len(supports), "measurements": int(m),
                "workload_blocks": len(out_support), "basis": BASIS}
    return manifest, out


def decode(sizes: Sequence[int], manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
           ) -> tuple[StructuredStrategy, StructuredReconstruction]:
    """The strategy and reconstruction of a residual plan file (:func:`encode`);
    :class:`StructureError` on any inconsistency."""
    sizes = tuple(int(n) for n in sizes)
    d = len(sizes)
    need = ("strategy.support", "strategy.scale", "recon.support", "recon.weight", "recon.inverse")
    missing = [k for k in need if k not in arrays]
    if missing:
        raise StructureError(f"a residual plan needs arrays {missing}")
    supports = unpad_subsets(arrays["strategy.support"], d, "strategy.support")
    out_support = unpad_subsets(arrays["recon.support"], d, "recon.support")
    scales = np.asarray(arrays["strategy.scale"]).reshape(-1)
    weights = np.asarray(arrays["recon.weight"]).reshape(-1)
    inverse = np.asarray(arrays["recon.inverse"]).reshape(-1)
    if not (scales.size == inverse.size == len(supports)) or weights.size != len(out_support):
        raise StructureError("residual plan arrays disagree in length")
    if manifest.get("blocks") != len(supports) or manifest.get("workload_blocks") != len(out_support):
        raise StructureError("the manifest's block counts disagree with the arrays")
    factors = {k: np.asarray(v) for k, v in arrays.items() if k.split(".")[0] in ("U", "V", "mean")}
    extra = set(arrays) - set(need) - set(factors)
    if extra:
        raise StructureError(f"unexpected arrays in a residual plan: {sorted(extra)[:5]}")
    if len(set(supports)) != len(supports):
        raise StructureError("a residual subset is listed twice in strategy.support")
    if manifest.get("basis") != BASIS:
        raise StructureError("the manifest describes another residual basis")
    strategy, recon = _assemble(sizes, supports, scales, out_support, [float(w) for w in weights],
                                inverse, factors)
    if manifest.get("measurements") != strategy.m:
        raise StructureError(f"the manifest states {manifest.get('measurements')!r} measurements, "
                             f"the strategy has {strategy.m}")
    return strategy, recon


def marginal_solution_bounds(plan: Any, W: Any, subsets: Any) -> tuple[float, float, float]:
    """(upper, lower, gap) of the marginal planner's solution stored in the plan's
    certificate arrays (``cert.x`` on ``subsets``; ``cert.omega`` for γ₂), re-verified by
    ``planner.marginal_optimum.verify_marginal_solution``."""
    from factorize.planner.marginal_algebra import AlgebraCoefficients, marginal_family
    from factorize.planner.marginal_optimum import MarginalSolution, verify_marginal_solution
    family = marginal_family(W)
    if family is None:
        raise StructureError("the workload is not a marginal family")
    arrays = plan.certificate_arrays
    x = arrays.get("cert.x")
    subsets = tuple(tuple(S) for S in subsets)
    if x is None or x.reshape(-1).size != len(subsets):
        raise StructureError("cert.x must hold one coefficient per subset")
    coeffs = AlgebraCoefficients(sizes=tuple(family.sizes), subsets=subsets,
                                 values=tuple(float(v) for v in x.reshape(-1)))
    weights = weight_subsets = None
    if plan.norm == "gamma_2":
        om, sup = arrays.get("cert.omega"), arrays.get("cert.omega_support")
        if om is None or sup is None:
            raise StructureError("a γ₂ certificate needs block weights cert.omega")
        weight_subsets = tuple(unpad_subsets(sup, family.d, "cert.omega_support"))
        weights = tuple(float(v) for v in om.reshape(-1))
    draft = MarginalSolution(family=family, norm=plan.norm, x=coeffs, weight_subsets=weight_subsets,
                             weights=weights, upper=float("inf"), lower=0.0, gap=float("inf"),
                             verified=False, failures=(), seconds=0.0)
    upper, lower, gap, passed, failures = verify_marginal_solution(family, draft)
    if not passed:
        raise StructureError("the certificate fails: " + "; ".join(failures))
    return upper, lower, gap
