"""Building marginal-weights plans (``structured.marginal_weights``' family: the weighted
marginal strategy with its least-squares reconstruction, and the certificate a new plan states;
the verifier imports ``structured.marginal_weights``, never this module)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import KronBlock, StructureError, Term, structured_norm
from .marginal_weights import (
    CERTIFICATE,
    CERTIFICATE_GRAM,
    CERTIFICATE_MARGINAL,
    FAMILY,
    MAX_FACTOR_ENTRIES,
    _matrix_factors,
)
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.records import FamilyCertificate


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
          W: Any = None, fallback: tuple[FamilyCertificate, dict[str, np.ndarray]] | None = None):
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
    return bool(np.all(f.explicit == f.explicit[:, :1]))


def _subsets(attrs: set[int]) -> list[tuple[int, ...]]:
    a = sorted(attrs)
    return [U for r in range(len(a) + 1) for U in itertools.combinations(a, r)]


def marginal_certificate(W: Any, norm: str) -> tuple[FamilyCertificate, dict[str, np.ndarray]] | None:
    """The marginal algebra's certificate for a stack of marginals (module docstring); None
    for any other workload."""
    from factorize.planner.marginal_algebra import marginal_family
    from factorize.planner.marginal_optimum import solve_marginals

    from .residual import _pad

    family = marginal_family(W)
    if family is None:
        return None
    sol = solve_marginals(family, structured_norm(norm))
    subsets = [tuple(T) for T in sol.x.subsets]
    arrays = {"cert.x": np.asarray(sol.x.values, dtype=np.float64), "cert.x_support": _pad(subsets)}
    omega = sol.block_weights()
    if omega is not None:
        arrays["cert.omega"] = np.asarray(omega[1], dtype=np.float64)
        arrays["cert.omega_support"] = _pad([tuple(S) for S in omega[0]])
    return {"method": CERTIFICATE_MARGINAL, "norm": norm, "lower": float(sol.lower)}, arrays


def certificate(wblocks: Sequence[WorkloadBlock], norm: str, options: Any, W: Any = None,
                fallback: tuple[FamilyCertificate, dict[str, np.ndarray]] | None = None
                ) -> tuple[FamilyCertificate, dict[str, np.ndarray]]:
    """The lower bound (module docstring) and its witnesses (planning time: the marginal
    planner for a stack of marginals, the closed form of ``subset_algebra`` for a workload in
    the algebra, else ``fallback`` — the union family's certificate of the same workload, the
    same witnesses and trace bound, which the strategy search has already built — or the
    solves of each distinct explicit factor)."""
    from .subset_algebra import algebra_certificate
    from .union import combine_block_bounds, planned_trace_lower
    from .union_build import _factorize

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
    lower = combine_block_bounds(norm, [(wb.rows, abs(wb.weight) * math.prod(
        lowers[f.key] for f in wb.factors if f.kind == "matrix")) for wb in wblocks])
    gram = planned_trace_lower(wblocks, [f.n for f in wblocks[0].factors]) \
        if wblocks else None
    if gram is None:
        return {"method": CERTIFICATE, "norm": norm, "lower": lower}, arrays
    return {"method": CERTIFICATE_GRAM, "norm": norm, "lower": max(lower, gram)}, arrays
