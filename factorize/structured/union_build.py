"""Building union-of-Kronecker strategies (``structured.union``'s family: one Kronecker block per
workload block, per-factor optimal factorizations from the planner, closed-form block weights;
the formulas and the certificate are in ``structured.union``, which the verifier imports —
never this module)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .blocks import KronBlock, StructureError, Term, structured_norm
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .union import CERTIFICATE, CERTIFICATE_GRAM, FAMILY, combine_block_bounds, encode, planned_trace_lower
from .workload_blocks import AxisFactor, WorkloadBlock

FactorSolution = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], float]


#: The certified relative gap each workload factor is solved to. A union's plan is within
#: (1 + FACTOR_GAP_TOL) of the value its per-factor optima give — far inside what the budget
#: split across blocks costs — and its bound uses each factor's certified lower bound, so a
#: looser solve never overstates anything. 1e-6 (the planner's default) costs 10–80× more on
#: sliding-window factors (width:115:49 — 0.98 s against 7.95 s, most of it the SDP fallback).
FACTOR_GAP_TOL = 1e-4


def factor_solution(f: AxisFactor, norm: str, options: Any,
                    cache: dict[tuple[str, str], FactorSolution] | None = None) -> FactorSolution:
    """``(R, A, witness arrays, lower bound)`` of one workload factor, A at unit column norm
    (solved once per ``cache``: the union family and the subspace bound share the solves)."""
    if cache is not None and (f.key, norm) in cache:
        return cache[(f.key, norm)]
    out = _factorize(f, norm, options)
    if cache is not None:
        cache[(f.key, norm)] = out
    return out


def _factorize(f: AxisFactor, norm: str, options: Any) -> FactorSolution:
    if f.kind == "identity":
        return np.eye(f.n), np.eye(f.n), {}, 1.0
    from factorize.planner.certificate import Gamma2Witness, GammaFWitness
    from factorize.planner.routes import CertifiedFactorization, solve
    from workloads import DenseWorkload

    kwargs = {"options": options} if options is not None else {}
    res = solve(DenseWorkload(f.explicit), structured_norm(norm), gap_tol=FACTOR_GAP_TOL, **kwargs)
    if not isinstance(res, CertifiedFactorization):  # an explicit factor is no marginal family
        raise StructureError("a workload factor was solved as a marginal family, not densely")
    fact, w = res.certificate.factorization, res.certificate.witness
    R, A = fact.R_factors[0], fact.A_factors[0]
    if len(fact.R_factors) > 1:
        from functools import reduce

        R, A = reduce(np.kron, fact.R_factors), reduce(np.kron, fact.A_factors)
    c = float(np.max(np.linalg.norm(A, axis=0)))
    if isinstance(w, Gamma2Witness):
        witness = {"q": _kron(w.q), "p": _kron(w.p)}
    elif isinstance(w, GammaFWitness):
        witness = {"q": _kron(w.q)}
    else:
        raise StructureError(f"a {norm} solve gave a {type(w).__name__}, not a γ_F or γ₂ witness")
    return R * c, A / c, witness, float(res.verification.lower)


def _kron(vs: Sequence[np.ndarray]) -> np.ndarray:
    """``v_0 ⊗ v_1 ⊗ …`` as float64 (a single vector as it is)."""
    if len(vs) == 1:
        return np.asarray(vs[0], dtype=np.float64)
    out: np.ndarray = np.ones(1)
    for v in vs:
        out = np.kron(out, v)
    return np.asarray(out, dtype=np.float64)


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], norm: str, *, options: Any = None,
          sensitivity_norm: str = "l2", cache: dict[tuple[str, str], FactorSolution] | None = None):
    """The strategy, reconstruction, encoding and certificate of the module docstring; the
    block weights are optimal for noise calibrated to ``sensitivity_norm`` ("l2": Gaussian,
    "l1": Laplace); ``cache``: :func:`factor_solution`'s."""
    from factorize.privacy.lattice import quantize

    sizes = tuple(int(n) for n in sizes)
    arrays: dict[str, np.ndarray] = {}
    names: dict[str, int] = {}
    lowers: dict[str, float] = {}
    cert_arrays: dict[str, np.ndarray] = {}
    for wb in wblocks:
        for f in wb.factors:
            if f.kind == "total" or f.key in names:
                continue
            i = names[f.key] = len(names)
            R, A, witness, lower = factor_solution(f, norm, options, cache)
            arrays[f"A.{i}"] = quantize(A).measured
            arrays[f"R.{i}"] = R
            lowers[f.key] = lower
            for key, v in witness.items():
                cert_arrays[f"cert.f{i}.{key}"] = v
    variances: list[float] = []
    kappas: list[float] = []
    supports = []
    for wb in wblocks:
        support = tuple(j for j, f in enumerate(wb.factors) if f.kind != "total")
        supports.append(support)
        Rs = [arrays[f"R.{names[wb.factors[j].key]}"] for j in support]
        As = [arrays[f"A.{names[wb.factors[j].key]}"] for j in support]
        if norm == "gamma_f":
            variances.append(wb.weight ** 2 * math.prod(float(np.sum(R * R)) for R in Rs))
        else:
            variances.append(wb.weight ** 2 * math.prod(float(np.max(np.sum(R * R, axis=1))) for R in Rs))
        if sensitivity_norm == "l1":
            kappas.append(math.prod(float(np.max(np.sum(np.abs(A), axis=0))) for A in As))
        else:
            kappas.append(math.prod(float(np.max(np.sum(A * A, axis=0))) for A in As))
    V, kappa = np.array(variances), np.array(kappas)
    if sensitivity_norm == "l1":
        s1 = np.cbrt(V / kappa) if norm == "gamma_f" else np.sqrt(V)
        s1 /= float(np.sum(s1 * kappa))
        s2 = s1 * s1
    else:
        s2 = np.sqrt(V / kappa) if norm == "gamma_f" else V.copy()
        s2 /= float(np.sum(s2 * kappa))
    scales = [float(quantize(np.array([[math.sqrt(v)]])).measured[0, 0]) for v in s2]
    blocks = [KronBlock(s, S, tuple(f"A.{names[wb.factors[j].key]}" for j in S))
              for s, S, wb in zip(scales, supports, wblocks, strict=True)]
    terms = [Term(o, o, float(wb.weight / s), S, tuple(f"R.{names[wb.factors[j].key]}" for j in S))
             for o, (s, S, wb) in enumerate(zip(scales, supports, wblocks, strict=True))]
    strategy = StructuredStrategy(sizes, blocks, arrays, FAMILY)
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, arrays, strategy)
    lower = combine_block_bounds(norm, [(wb.rows, abs(wb.weight) * math.prod(
        lowers[f.key] for f in wb.factors if f.kind == "matrix")) for wb in wblocks])
    gram = planned_trace_lower(wblocks, sizes)
    cert = {"method": CERTIFICATE if gram is None else CERTIFICATE_GRAM, "norm": norm,
            "lower": lower if gram is None else max(lower, gram)}
    return strategy, recon, encode(strategy, recon), cert, cert_arrays
