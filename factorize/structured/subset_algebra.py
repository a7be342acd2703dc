"""The optimal strategy of the algebra of attribute subsets for any union of Kronecker products.

Symmetry (the γ_F program ``min tr(WᵀW X⁺)`` s.t. ``diag X ≤ 1``, docs/math.md §4.1, is
convex and invariant under permuting the values of each attribute whenever WᵀW is): average a
factor's Gram ``G = FᵀF`` (r × n) over all n! permutations of its values,

    Ḡ = a·C + c·K,   C = I − 𝟙𝟙ᵀ/n,  K = 𝟙𝟙ᵀ/n,   c = ‖F𝟙‖²/n,   a = ‖F C‖²_F/(n − 1),

and a block ``w ⊗_j F_j`` of the workload to ``w² ⊗_j Ḡ_j = Σ_U λ_U P_U`` with

    λ_U = Σ_blocks w² Π_{j∈U} a_j Π_{j∉U} c_j,     P_U = ⊗_{j∈U} C_j ⊗_{j∉U} K_j

(the residual projectors of ``structured.residual``; ``d_U = rank P_U = Π_{j∈U}(n_j − 1)``,
``diag P_U = d_U / N``). For every X of the algebra, ``X = Σ_U x_U P_U``, the error is
``tr(WᵀW X⁺) = tr(Ḡ X⁺) = Σ_U d_U λ_U / x_U`` — it reads W only through λ — and the
diagonal constraint is ``Σ_U x_U d_U / N ≤ 1``. Its minimiser is closed-form (Lagrange):

    x_U = N √λ_U / T,   T = Σ_U d_U √λ_U,   value T² / N,   γ_F = T / √(N k).

This is HDMM's Marginals template (McKenna et al., PVLDB 2018, §5) solved exactly over the
whole algebra (not only marginal weights), for a workload of any factors — ResidualPlanner's
closed form (Xiao, Ding, Gong, "ResidualPlanner", NeurIPS 2023, §4) when W is a marginal
family.

When every factor's Gram already lies in ``span{I, 𝟙𝟙ᵀ}`` (identities, totals, their stacks:
a census union of identity and total factors) WᵀW is invariant, the algebra's optimum is the
optimum over *all* strategies, and the uniform dual witness certifies it:
``γ_F(W) ≥ ‖W‖_tr / √(N k)`` (docs/math.md §4.1 at q = 𝟙/N) with ``‖W‖_tr = T`` exactly
(``(WᵀW)^{1/2} = Σ_U √λ_U P_U``): gap 0 up to rounding (:func:`algebra_certificate`). For
other factors (groupings, prefixes) the plan is the best strategy of the algebra and the
lower bound is the union family's (``marginal_weights.certificate``).

Strategy: one residual block per U with λ_U > 0, ``s_U ⊗_{j∈U} U_j ⊗_{j∉U} 𝟙ᵀ``
(``structured.residual``: Helmert bases, ``s_U = √(x_U / Π_{j∉U} n_j)``); reconstruction
``R = W X⁺ Aᵀ``, for block o and residual block U the Kronecker term

    (w / s_U) ⊗_{j∈U} F_j U_jᵀ ⊗_{j∈active∖U} F_j 𝟙 / n_j

(a factor with ``F_j U_jᵀ = 0`` — a total — drops the term). ``R·A = W`` because every U with
``W P_U ≠ 0`` has ``λ_U = ‖W P_U‖²_F > 0`` and is measured. Encoding: the union codec
(``structured.union.encode``) with family ``"subset_algebra"``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import AxisFactor, WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.records import FamilyCertificate

FAMILY = "subset_algebra"
CERTIFICATE_ALGEBRA = ("subset algebra: WᵀW lies in the algebra of attribute subsets (identity "
                       "and total factors), the uniform dual witness gives ‖W‖_tr/√(Nk) with "
                       "‖W‖_tr = Σ_U d_U √λ_U, recomputed from the workload")
#: Reconstruction factors F_j U_jᵀ are stored densely: at most this many entries each.
MAX_FACTOR_ENTRIES = 1 << 24
#: Relative allowance taken off the closed-form lower bound (λ_U from sums and products of at
#: most 2d + 3 correctly rounded nonnegative terms per block, their square roots and one
#: division: far below 1e-12 of the value for any d ≤ 64).
LOWER_ALLOWANCE = 1e-12


@dataclass(frozen=True)
class FactorMoments:
    """``(a, c)`` of a factor (module docstring) and whether its Gram is exactly ``a·C + c·K``."""

    a: float
    c: float
    invariant: bool


def factor_moments(f: AxisFactor) -> FactorMoments:
    """``a = ‖F C‖²_F/(n−1)``, ``c = ‖F𝟙‖²/n`` (identity: 1, 1; total: 0, n); ``invariant``
    when ``FᵀF`` equals ``a·C + c·K`` exactly (compared entry by entry)."""
    n = f.n
    if f.kind == "identity":
        return FactorMoments(1.0 if n > 1 else 0.0, 1.0, True)
    if f.kind == "total":
        return FactorMoments(0.0, float(n), True)
    F = np.asarray(f.matrix, dtype=np.float64)
    s = F.sum(axis=1)
    c = float(s @ s) / n
    centred = F - s[:, None] / n
    a = float(np.sum(centred * centred)) / (n - 1) if n > 1 else 0.0
    if a <= 1e-24 * max(float(np.sum(F * F)), 1e-300):
        a = 0.0  # constant rows: F C = 0 up to the rounding of the row means
    G = F.T @ F
    off = G[0, 1] if n > 1 else 0.0
    invariant = bool(np.all(np.diag(G) == G[0, 0])
                     and np.all(G[~np.eye(n, dtype=bool)] == off))
    return FactorMoments(a, c, invariant)


def subset_eigenvalues(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int]
                       ) -> tuple[dict[tuple[int, ...], float], bool]:
    """``λ_U`` (module docstring) for every U with ``λ_U > 0`` — U runs over the subsets of
    each block's attributes with ``a_j > 0`` — and whether WᵀW itself lies in the algebra."""
    sizes = tuple(int(n) for n in sizes)
    memo: dict[str, FactorMoments] = {}
    parts: dict[tuple[int, ...], list[float]] = {}
    invariant = True
    for wb in wblocks:
        moments = []
        for j in range(len(sizes)):
            f = wb.factor(j)
            if f.key not in memo:
                memo[f.key] = factor_moments(f)
            moments.append(memo[f.key])
            invariant = invariant and memo[f.key].invariant
        w2 = float(wb.weight) ** 2
        centred = [j for j, mo in enumerate(moments) if mo.a > 0 and sizes[j] > 1]
        for r in range(len(centred) + 1):
            for U in itertools.combinations(centred, r):
                Us = set(U)
                v = w2 * math.prod(moments[j].a if j in Us else moments[j].c
                                   for j in range(len(sizes)))
                if v > 0:
                    parts.setdefault(U, []).append(v)
    return {U: math.fsum(v) for U, v in parts.items()}, invariant


def _dims(U: Sequence[int], sizes: Sequence[int]) -> float:
    return float(math.prod(sizes[j] - 1 for j in U))


def optimum(lam: dict[tuple[int, ...], float], sizes: Sequence[int]) -> tuple[dict[tuple[int, ...], float], float]:
    """The closed-form minimiser ``x_U = N √λ_U / T`` and ``T = Σ_U d_U √λ_U``."""
    N = float(math.prod(int(n) for n in sizes))
    T = math.fsum(_dims(U, sizes) * math.sqrt(v) for U, v in lam.items())
    if not T > 0:
        raise StructureError("the workload is zero: nothing to measure")
    return {U: N * math.sqrt(v) / T for U, v in lam.items()}, T


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], norm: str, *,
          fallback: tuple[FamilyCertificate, dict[str, np.ndarray]]):
    """Strategy, reconstruction, encoding, certificate and certificate arrays (module
    docstring) — γ_F only: the worst query's variance (γ₂) is not a function of λ.
    Certificate: the closed form when WᵀW lies in the algebra, else ``fallback`` (the union
    family's certificate of the same workload, ``shared_kron.verify_certificate`` re-checks
    it; ``kinds.structured.build_family`` builds it first)."""
    from . import union
    from .residual import factor_arrays, residual_scale

    if norm != "gamma_f":
        raise StructureError("the subset-algebra family optimises gamma_f (total variance); "
                             "gamma_2 plans of marginal workloads are the residual family's")
    sizes = tuple(int(n) for n in sizes)
    if not wblocks:
        raise StructureError("an empty workload")
    lam, invariant = subset_eigenvalues(wblocks, sizes)
    x, T = optimum(lam, sizes)
    closure = sorted(x, key=lambda U: (len(U), U))
    bases = factor_arrays(sizes)
    arrays: dict[str, np.ndarray] = {}
    a_name: dict[int, str] = {}
    for U in closure:
        for j in U:
            if sizes[j] not in a_name:
                a_name[sizes[j]] = name = f"A.{len(a_name)}"
                arrays[name] = bases[f"U.{sizes[j]}"]
    scaled = [(residual_scale(x[U], sizes, U), U) for U in closure]
    blocks = [KronBlock(s, U, tuple(a_name[sizes[j]] for j in U)) for s, U in scaled]
    strategy = StructuredStrategy(sizes, blocks, arrays, FAMILY)
    factors: dict[tuple[str, str], str] = {}

    def factor(f: AxisFactor, kind: str) -> str | None:
        """``F Uᵀ`` (kind "U") or ``F𝟙/n`` (kind "1") by name; None when it is zero."""
        key = (f.key, kind)
        if key not in factors:
            F = f.dense()
            G = F @ arrays[a_name[f.n]].T if kind == "U" else F.sum(axis=1, keepdims=True) / f.n
            if G.size > MAX_FACTOR_ENTRIES:
                raise StructureError(f"a reconstruction factor of {G.size} entries is too large")
            if not np.any(G):
                factors[key] = ""
            else:
                factors[key] = name = f"R.{len(factors)}"
                arrays[name] = np.ascontiguousarray(G, dtype=np.float64)
        return factors[key] or None

    terms: list[Term] = []
    for o, wb in enumerate(wblocks):
        active = set(wb.active())
        for b, (s, U) in enumerate(scaled):
            if not set(U) <= active:
                continue  # a total factor on an attribute of U: F U_jᵀ = 0
            attrs = tuple(sorted(active))
            names = [factor(wb.factor(j), "U" if j in set(U) else "1") for j in attrs]
            if any(nm is None for nm in names):
                continue
            terms.append(Term(o, b, float(wb.weight / s), attrs, tuple(str(nm) for nm in names)))
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, arrays, strategy)
    cert = _closed_form_certificate(T, wblocks, sizes, norm) if invariant else None
    if cert is None:
        cert = fallback
    return strategy, recon, union.encode(strategy, recon, FAMILY), cert[0], cert[1]


def algebra_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int]) -> float | None:
    """``‖W‖_tr / √(N k)`` lowered by :data:`LOWER_ALLOWANCE` when WᵀW lies in the algebra
    (module docstring), else None."""
    lam, invariant = subset_eigenvalues(wblocks, sizes)
    if not invariant:
        return None
    return _lower_from_trace(optimum(lam, sizes)[1], wblocks, sizes)


def _lower_from_trace(T: float, wblocks: Sequence[WorkloadBlock], sizes: Sequence[int]) -> float:
    N = float(math.prod(int(n) for n in sizes))
    k = float(sum(wb.rows for wb in wblocks))
    return T / math.sqrt(N * k) * (1.0 - LOWER_ALLOWANCE)


def algebra_certificate(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int], norm: str
                        ) -> tuple[FamilyCertificate, dict[str, np.ndarray]] | None:
    """The closed-form certificate of an invariant workload under γ_F (no arrays: the verifier
    recomputes it from W), else None."""
    if norm != "gamma_f":
        return None
    lam, invariant = subset_eigenvalues(wblocks, sizes)
    return _closed_form_certificate(optimum(lam, sizes)[1], wblocks, sizes, norm) if invariant else None


def _closed_form_certificate(T: float, wblocks: Sequence[WorkloadBlock], sizes: Sequence[int],
                             norm: str) -> tuple[FamilyCertificate, dict[str, np.ndarray]] | None:
    """:func:`algebra_certificate` from the trace norm ``T`` :func:`build` already has."""
    if norm != "gamma_f":
        return None
    return ({"method": CERTIFICATE_ALGEBRA, "norm": norm,
             "lower": _lower_from_trace(T, wblocks, sizes)}, {})
