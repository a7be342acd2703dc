"""Marginal-weight strategies with their least-squares reconstruction, as a structured plan.

Strategy (OPT_M of McKenna, Miklau, Hay, Machanavajjhala, "Optimizing error of
high-dimensional statistical queries under differential privacy", PVLDB 2018, §5; weights
from ``pure_dp.marginals``): one block per chosen attribute subset S, ``θ_S ⊗_{j∈S} I_{n_j}``
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
planner's certified optimum (``planner.marginals.solve_marginals``: its coefficients and dual
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

import itertools
import math
from typing import Any, Sequence

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
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


def subset_lambdas(sizes: Sequence[int], weighted: Sequence[tuple[float, tuple[int, ...]]]
                   ) -> dict[tuple[int, ...], float]:
    """``λ_U = Σ_{S⊇U} θ_S² Π_{j∉S} n_j`` for every U below a chosen subset (module docstring)."""
    lam: dict[tuple[int, ...], float] = {}
    parts: dict[tuple[int, ...], list[float]] = {}
    for theta, S in weighted:
        outside = math.prod(n for j, n in enumerate(sizes) if j not in set(S))
        v = theta * theta * outside
        for r in range(len(S) + 1):
            for U in itertools.combinations(S, r):
                parts.setdefault(U, []).append(v)
    for U, vs in parts.items():
        lam[U] = math.fsum(vs)
    return lam


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock],
          weighted: Sequence[tuple[float, Sequence[int]]], norm: str, *, options: Any = None,
          W: Any = None, fallback: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None):
    """Strategy, reconstruction, encoding, certificate and certificate arrays for the weights
    ``weighted = [(θ_S, S)]`` (module docstring; ``W`` the workload, for the marginal
    certificate); :class:`StructureError` when the workload's rows are not in the strategy's
    row space."""
    from factorize.privacy.lattice import quantize

    from . import union
    from .strategy import measured_scale

    sizes = tuple(int(n) for n in sizes)
    items = sorted(((float(t), tuple(sorted(int(j) for j in S if sizes[int(j)] > 1)))
                    for t, S in weighted if t > 0), key=lambda z: (len(z[1]), z[1]))
    if not items:
        raise StructureError("a marginal-weights strategy needs a positive weight")
    total = math.fsum(t for t, _ in items)
    arrays: dict[str, np.ndarray] = {}
    ident: dict[int, str] = {}
    for _, S in items:
        for j in S:
            if sizes[j] not in ident:
                ident[sizes[j]] = name = f"A.{len(ident)}"
                arrays[name] = quantize(np.eye(sizes[j])).measured
    scaled = [(measured_scale(t / total), S) for t, S in items]
    blocks = [KronBlock(s, S, tuple(ident[sizes[j]] for j in S)) for s, S in scaled]
    strategy = StructuredStrategy(sizes, blocks, arrays, FAMILY)
    lam = subset_lambdas(sizes, scaled)
    factors: dict[tuple[str, str], str] = {}

    def factor(wb_j: Any, kind: str) -> str:
        key = (wb_j.key, kind)
        if key not in factors:
            W = wb_j.dense()
            if W.size > MAX_FACTOR_ENTRIES:
                raise StructureError(f"a reconstruction factor of {W.size} entries is too large")
            mean = W.sum(axis=1, keepdims=True) / wb_j.n
            G = {"C": W - mean, "K": np.repeat(mean, wb_j.n, axis=1), "1": W.sum(axis=1, keepdims=True)}[kind]
            factors[key] = name = f"R.{len(factors)}"
            arrays[name] = np.ascontiguousarray(G, dtype=np.float64)
        return factors[key]

    terms: list[Term] = []
    for o, wb in enumerate(wblocks):
        active = set(wb.active())
        centred = {j for j in active if not _constant_rows(wb.factor(j))}
        covered = [U for U in _subsets(centred) if U in lam]
        if len(covered) != 2 ** len(centred):
            raise StructureError(f"workload block {o} needs the interactions of attributes "
                                 f"{sorted(centred)}, which no chosen subset covers")
        for b, (s, S) in enumerate(scaled):
            Sset = set(S)
            attrs = tuple(sorted(Sset | active))
            outside = math.prod(sizes[j] for j in range(len(sizes)) if j not in Sset | active)
            for r in range(len(Sset & centred) + 1):
                for U in itertools.combinations(sorted(Sset & centred), r):
                    Uset = set(U)
                    names = tuple(factor(wb.factor(j), "C" if j in Uset else "K" if j in Sset else "1")
                                  for j in attrs)
                    c = wb.weight * s * outside / lam[U]
                    terms.append(Term(o, b, float(c), attrs, names))
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, arrays, strategy)
    cert, cert_arrays = certificate(wblocks, norm, options, W, fallback)
    return strategy, recon, union.encode(strategy, recon, FAMILY), cert, cert_arrays


def _constant_rows(f: Any) -> bool:
    if f.kind == "total":
        return True
    if f.kind == "identity":
        return f.n == 1
    return bool(np.all(f.matrix == f.matrix[:, :1]))


def _subsets(attrs: set[int]) -> list[tuple[int, ...]]:
    a = sorted(attrs)
    return [U for r in range(len(a) + 1) for U in itertools.combinations(a, r)]


def _matrix_factors(wblocks: Sequence[WorkloadBlock]) -> list[Any]:
    """The distinct explicit workload factors, in order of first appearance."""
    seen: dict[str, Any] = {}
    for wb in wblocks:
        for f in wb.factors:
            if f.kind == "matrix" and f.key not in seen:
                seen[f.key] = f
    return list(seen.values())


def marginal_certificate(W: Any, norm: str) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """The marginal algebra's certificate for a stack of marginals (module docstring); None
    for any other workload."""
    from factorize.planner.marginal_algebra import marginal_family
    from factorize.planner.marginals import solve_marginals

    from .residual import _pad

    family = marginal_family(W)
    if family is None:
        return None
    sol = solve_marginals(family, norm)
    subsets = [tuple(T) for T in sol.x.subsets]
    arrays = {"cert.x": np.asarray(sol.x.values, dtype=np.float64), "cert.x_support": _pad(subsets)}
    if sol.weights is not None:
        arrays["cert.omega"] = np.asarray(sol.weights, dtype=np.float64)
        arrays["cert.omega_support"] = _pad([tuple(S) for S in sol.weight_subsets])
    return {"method": CERTIFICATE_MARGINAL, "norm": norm, "lower": float(sol.lower)}, arrays


def certificate(wblocks: Sequence[WorkloadBlock], norm: str, options: Any, W: Any = None,
                fallback: tuple[dict[str, Any], dict[str, np.ndarray]] | None = None
                ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The lower bound (module docstring) and its witnesses (planning time: the marginal
    planner for a stack of marginals, the closed form of ``subset_algebra`` for a workload in
    the algebra, else ``fallback`` — the union family's certificate of the same workload, the
    same witnesses and trace bound, which the strategy search has already built — or the
    solves of each distinct explicit factor)."""
    from .subset_algebra import algebra_certificate
    from .union import _combine, _factorize, planned_trace_lower

    if W is not None:
        marg = marginal_certificate(W, norm)
        if marg is not None:
            return marg
    if wblocks:
        alg = algebra_certificate(wblocks, [f.n for f in wblocks[0].factors], norm)
        if alg is not None:
            return alg
    if fallback is not None:
        return fallback

    arrays: dict[str, np.ndarray] = {}
    lowers: dict[str, float] = {}
    for i, f in enumerate(_matrix_factors(wblocks)):
        _, _, witness, lower = _factorize(f, norm, options)
        lowers[f.key] = lower
        for key, v in witness.items():
            arrays[f"cert.w{i}.{key}"] = v
    lower = _combine(norm, [(wb.rows, abs(wb.weight) * math.prod(
        lowers[f.key] for f in wb.factors if f.kind == "matrix")) for wb in wblocks])
    gram = planned_trace_lower(wblocks, [f.n for f in wblocks[0].factors]) \
        if wblocks else None
    if gram is None:
        return {"method": CERTIFICATE, "norm": norm, "lower": lower}, arrays
    return {"method": CERTIFICATE_GRAM, "norm": norm, "lower": max(lower, gram)}, arrays


def certificate_lower(plan: Any, W: Any) -> float:
    """The lower bound re-derived from the plan's witnesses (each re-verified)."""
    from .union import _combine, with_uniform_bound, witness_lower
    from .workload_blocks import workload_blocks

    wblocks = workload_blocks(W, plan.domain.sizes)
    lowers = {f.key: witness_lower(plan, f"cert.w{i}", f.matrix)
              for i, f in enumerate(_matrix_factors(wblocks))}
    expected = {f"cert.w{i}.{k}" for i in range(len(lowers))
                for k in (("q",) if plan.norm == "gamma_f" else ("q", "p"))}
    extra = _own_arrays(plan) - expected
    if extra:
        raise ValueError(f"unexpected certificate arrays {sorted(extra)[:3]}")
    lower = _combine(plan.norm, [(wb.rows, abs(wb.weight) * math.prod(
        lowers[f.key] for f in wb.factors if f.kind == "matrix")) for wb in wblocks])
    return with_uniform_bound(plan, lower, wblocks, CERTIFICATE_GRAM)


def _own_arrays(plan: Any) -> set[str]:
    """The certificate arrays of this family's own bound (not the symmetry-reduced one, which
    ``plan.structured_checks`` verifies for every family)."""
    from .symmetry import ARRAY_PREFIX

    return {a for a in plan.certificate_arrays if not a.startswith(ARRAY_PREFIX)}


def verify_certificate(plan: Any, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap): the achieved value (recomputed by the caller) and the re-verified
    lower bound."""
    from factorize.numerics import relative_gap

    from .subset_algebra import CERTIFICATE_ALGEBRA

    if plan.certificate.get("method") == CERTIFICATE_MARGINAL:
        from factorize.plan.structured_checks import marginal_solution_bounds

        from .residual import _unpad

        sup = plan.certificate_arrays.get("cert.x_support")
        if sup is None:
            raise ValueError("a marginal certificate needs cert.x_support")
        extra = _own_arrays(plan) - {"cert.x", "cert.x_support", "cert.omega", "cert.omega_support"}
        if extra:
            raise ValueError(f"unexpected certificate arrays {sorted(extra)[:3]}")
        _, lower, _ = marginal_solution_bounds(plan, W, _unpad(sup, len(plan.domain.sizes), "cert.x_support"))
    elif plan.certificate.get("method") == CERTIFICATE_ALGEBRA:
        from .subset_algebra import algebra_lower
        from .workload_blocks import workload_blocks

        if plan.certificate_arrays:
            raise ValueError("the subset-algebra certificate carries no arrays")
        alg = algebra_lower(workload_blocks(W, plan.domain.sizes), plan.domain.sizes)
        if alg is None or plan.norm != "gamma_f":
            raise ValueError("the subset-algebra certificate needs a workload whose Gram lies in "
                             "the algebra (identity and total factors) and gamma_f")
        lower = alg
    else:
        lower = certificate_lower(plan, W)
    upper = float(plan.certificate["achieved"])
    return upper, lower, relative_gap(upper, lower)
