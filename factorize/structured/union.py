"""Union-of-Kronecker strategies built by hand: one Kronecker block per workload block.

For a workload ``W = [w_o ⊗_j W_{o,j}]_o`` (``structured.workload_blocks``) each distinct factor
gets its optimal factorization ``W_f = R_f A_f`` for the plan's objective (``planner.solve``;
the identity is its own optimum, ``R = A = I``; a summed-out attribute needs no factor), with
``A_f`` scaled to unit largest column norm. Block o measures ``s_o ⊗_j A_{o,j}`` and is
reconstructed by ``(w_o / s_o) ⊗_j R_{o,j}``. The block weights minimise the objective at unit
sensitivity: with ``κ_o = Π_j max_x ‖A_{o,j} e_x‖²`` (Δ² ≤ Σ_o s_o² κ_o) and
``V_o = w_o² Π_j ‖R_{o,j}‖²`` (Frobenius² for γ_F, largest row norm² for γ₂),

* γ_F (total variance ``Σ_o V_o / s_o²``): Cauchy–Schwarz gives ``s_o² ∝ √(V_o / κ_o)``;
* γ₂ (worst query ``max_o V_o / s_o²``): equalised, ``s_o² ∝ V_o``,

normalised to ``Σ_o s_o² κ_o = 1`` (the union-of-Kronecker weights of HDMM, McKenna et al.,
PVLDB 2018, §6, in closed form for fixed blocks; optimising the blocks is HDMM's problem).
For Laplace noise (L1 sensitivity) the column L1 norms add instead: with
``κ¹_o = Π_j max_x ‖A_{o,j} e_x‖₁`` (Δ₁ ≤ Σ_o s_o κ¹_o), minimising ``Σ_o V_o / s_o²`` under
``Σ_o s_o κ¹_o = 1`` gives (Lagrange) ``s_o ∝ (V_o / κ¹_o)^{1/3}``, and the worst query is
again equalised, ``s_o ∝ √V_o``.

Certificate: each factor's dual witness (``certificate``) gives ``L_f ≤ γ(W_f)``; Kronecker
products multiply (a witness ``q = ⊗ q_j`` gives the product of the factors' bounds, docs/math.md
§5.1), identities and totals have γ = 1, and across blocks ``γ_F(W)² ≥ Σ_o k_o L_o² / k``
(every factorization of W factors each block with the same A) and ``γ₂(W) ≥ max_o L_o``
(a submatrix); for k ≤ 4096 rows also the uniform-weight trace-norm bound
``‖W‖_tr/√(kN)`` computed from the k×k matrix ``W·Wᵀ`` formed block by block
(:func:`uniform_trace_lower`; plans written before it state the older method and are checked
by it). The upper bound is the value the plan achieves.

Encoding: arrays ``A.i`` / ``R.i`` (one pair per distinct factor; ``M.i`` / ``N.i`` the mixing
matrices and their inverses of mixed blocks and terms, ``structured.mixing``), ``union.block_scale``,
``union.term_scale`` and the witnesses ``cert.f{i}.p`` / ``cert.f{i}.q``; the manifest lists
each block's support and factor names and each term's attributes and factor names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import WorkloadBlock

FAMILY = "union"
CERTIFICATE = ("union of Kronecker products: per-factor dual witnesses, multiplied within a "
               "block, combined across blocks; upper = the value the plan achieves")


def encode(strategy: StructuredStrategy, recon: StructuredReconstruction, family: str = FAMILY
           ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Manifest fields and arrays of a plan in the union codec (also used by
    ``structured.marginal_weights``, whose terms differ only in number)."""
    def block(b: KronBlock) -> dict[str, Any]:
        out: dict[str, Any] = {"support": list(b.support), "factors": list(b.names)}
        if b.mix is not None:
            out["mix"] = {"factor": b.mix, "attrs": list(b.mix_attrs)}
        return out

    def term(t: Term) -> dict[str, Any]:
        out: dict[str, Any] = {"out": t.out_block, "in": t.in_block, "attrs": list(t.attrs),
                               "factors": list(t.names)}
        if t.mix is not None:
            out["mix"] = t.mix
        return out

    manifest = {"family": family, "measurements": strategy.m,
                "blocks": [block(b) for b in strategy.blocks],
                "terms": [term(t) for t in recon.terms],
                "out_rows": list(recon.out_rows)}
    arrays = {**strategy.arrays, **{k: v for k, v in recon.arrays.items() if k not in strategy.arrays},
              "union.block_scale": np.array([b.scale for b in strategy.blocks]),
              "union.term_scale": np.array([t.scale for t in recon.terms])}
    return manifest, arrays


def _ints(v: Any, what: str) -> tuple[int, ...]:
    if not (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
        raise StructureError(f"{what} must be a list of integers")
    return tuple(v)


def _strs(v: Any, what: str) -> tuple[str, ...]:
    if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        raise StructureError(f"{what} must be a list of names")
    return tuple(v)


def decode(sizes: Sequence[int], manifest: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
           family: str = FAMILY) -> tuple[StructuredStrategy, StructuredReconstruction]:
    blocks_m, terms_m, out_rows = manifest.get("blocks"), manifest.get("terms"), manifest.get("out_rows")
    if not (isinstance(blocks_m, list) and isinstance(terms_m, list) and isinstance(out_rows, list)):
        raise StructureError("a union plan lists blocks, terms and out_rows")
    bs = np.asarray(arrays.get("union.block_scale", np.zeros(0))).reshape(-1)
    ts = np.asarray(arrays.get("union.term_scale", np.zeros(0))).reshape(-1)
    if bs.size != len(blocks_m) or ts.size != len(terms_m):
        raise StructureError("union.block_scale / union.term_scale do not match the block and "
                             "term lists")
    factors = {k: np.asarray(v) for k, v in arrays.items() if k.split(".")[0] in ("A", "R", "M", "N")}
    extra = set(arrays) - set(factors) - {"union.block_scale", "union.term_scale"}
    if extra:
        raise StructureError(f"unexpected arrays in a union plan: {sorted(extra)[:5]}")
    blocks = []
    for i, (b, s) in enumerate(zip(blocks_m, bs, strict=True)):
        if not isinstance(b, dict):
            raise StructureError(f"block {i} must be an object")
        mix = b.get("mix")
        if mix is not None and not (isinstance(mix, dict) and isinstance(mix.get("factor"), str)
                                    and str(mix["factor"]).startswith("M.")):
            raise StructureError(f"block {i}: mix must name an M.* factor and its attributes")
        blocks.append(KronBlock(float(s), _ints(b.get("support"), f"block {i} support"),
                                _strs(b.get("factors"), f"block {i} factors"),
                                None if mix is None else str(mix["factor"]),
                                () if mix is None else _ints(mix.get("attrs"), f"block {i} mix attrs")))
    terms = []
    for i, (t, s) in enumerate(zip(terms_m, ts, strict=True)):
        if not isinstance(t, dict) or not all(isinstance(t.get(k), int) and not isinstance(t.get(k), bool)
                                              for k in ("out", "in")):
            raise StructureError(f"term {i} must name its out and in blocks")
        tmix = t.get("mix")
        if tmix is not None and not (isinstance(tmix, str) and tmix.startswith("N.")):
            raise StructureError(f"term {i}: mix must name an N.* factor")
        terms.append(Term(int(t["out"]), int(t["in"]), float(s), _ints(t.get("attrs"), f"term {i} attrs"),
                          _strs(t.get("factors"), f"term {i} factors"), tmix))
    strategy = StructuredStrategy(sizes, blocks, {k: v for k, v in factors.items() if k[:2] in ("A.", "M.")},
                                  family)
    recon = StructuredReconstruction(_ints(out_rows, "out_rows"), terms, factors, strategy)
    if manifest.get("measurements") != strategy.m:
        raise StructureError(f"the manifest states {manifest.get('measurements')!r} measurements, "
                             f"the strategy has {strategy.m}")
    return strategy, recon


def certificate_lower(plan: Any, W: Any) -> float:
    """The union's lower bound (module docstring), each factor's witness re-verified."""
    from .workload_blocks import workload_blocks

    wblocks = workload_blocks(W, plan.domain.sizes)
    index: dict[str, int] = {}
    for name in plan.strategy.arrays:
        index.setdefault(name, int(name.split(".")[1]))
    per_factor: dict[str, float] = {}
    lower_blocks = []
    for o, wb in enumerate(wblocks):
        L = abs(wb.weight)
        blk = plan.strategy.blocks[o]
        names = dict(zip(blk.support, blk.names, strict=True))
        for j, f in enumerate(wb.factors):
            if f.kind != "matrix":
                continue
            i = index[names[j]]
            if f.key not in per_factor:
                per_factor[f.key] = witness_lower(plan, f"cert.f{i}", f.explicit)
            L *= per_factor[f.key]
        lower_blocks.append((wb.rows, L))
    return with_uniform_bound(plan, combine_block_bounds(plan.norm, lower_blocks), wblocks, CERTIFICATE_GRAM)


def witness_lower(plan: Any, prefix: str, matrix: np.ndarray) -> float:
    """One workload factor's re-verified lower bound from the plan's witness arrays
    ``<prefix>.q`` (and ``<prefix>.p`` for γ₂)."""
    from factorize.planner.certificate import gamma_2_lower, gamma_f_lower

    q = plan.certificate_arrays.get(f"{prefix}.q")
    if q is None:
        raise StructureError(f"no witness {prefix}.q for a workload factor")
    if plan.norm == "gamma_f":
        return gamma_f_lower(matrix, q.reshape(-1))
    p = plan.certificate_arrays.get(f"{prefix}.p")
    if p is None:
        raise StructureError(f"no row witness {prefix}.p for a workload factor")
    return gamma_2_lower(matrix, p.reshape(-1), q.reshape(-1))


def with_uniform_bound(plan: Any, lower: float, wblocks: Sequence[WorkloadBlock], method: str) -> float:
    """``max(lower, uniform_trace_lower)`` when the plan's certificate names ``method`` (the
    one with the uniform-weight bound), else ``lower``."""
    if plan.certificate.get("method") != method:
        return lower
    gram = uniform_trace_lower(wblocks, plan.domain.sizes)
    if gram is None:
        raise StructureError("the certificate names the uniform-weight bound, which this "
                         "workload's row count does not allow")
    return max(lower, gram)


def combine_block_bounds(norm: str, lower_blocks: list[tuple[int, float]]) -> float:
    """The workload's lower bound from its blocks' (rows, lower bound) (module docstring)."""
    from factorize.numerics import round_down

    if norm == "gamma_2":
        return round_down(max(L for _, L in lower_blocks), 1)
    k = sum(r for r, _ in lower_blocks)
    return round_down(math.sqrt(math.fsum(r * L * L for r, L in lower_blocks) / k), 4)


def verify_union_certificate(plan: Any, W: Any) -> tuple[float, float, float]:
    """(upper, lower, gap): the achieved value (recomputed by the caller's claims check) and the
    re-verified lower bound."""
    from factorize.numerics import relative_gap

    lower = certificate_lower(plan, W)
    upper = float(plan.certificate["achieved"])
    return upper, lower, relative_gap(upper, lower)


#: The uniform-weight bound forms the k×k matrix W·Wᵀ/N and its eigenvalues (O(k³): about 6 s
#: single-threaded at k = 4,151, HDMM's SF1 persons, where it lifts the lower bound from the
#: per-block product's 1.019 to 1.479): only for k up to this.
MAX_GRAM_ROWS = 6144
#: The certificate method of plans that also use the uniform-weight bound.
CERTIFICATE_GRAM = CERTIFICATE + "; and ‖W‖_tr/√(kN) from W·Wᵀ/N formed block by block (uniform dual weights)"


def planned_trace_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int]) -> float | None:
    """:func:`uniform_trace_lower` for a new plan, or None where the symmetry-reduced dual
    applies (``structured.symmetry``): the uniform weights are its first iterate, so the plan
    states the reduced optimum instead (``kinds.structured.build_family.with_symmetry_bound``), and
    the k×k eigenproblem (6–17 s at k = 4,151) is skipped in planning and verification."""
    from . import symmetry

    if symmetry.reduce(wblocks, sizes) is not None:
        return None
    return uniform_trace_lower(wblocks, sizes)


def uniform_trace_lower(wblocks: Sequence[WorkloadBlock], sizes: Sequence[int]) -> float | None:
    """``γ₂(W) ≥ γ_F(W) ≥ ‖W diag(q)^{1/2}‖_tr / √k`` for the uniform ``q = 1/N`` (the γ_F dual
    of docs/math.md §4.1 at one feasible witness), certified; None when k exceeds
    :data:`MAX_GRAM_ROWS`.

    ``‖W D_q^{1/2}‖_tr = Σ_i √λ_i(K)``, ``K = W D_q Wᵀ``, formed block by block without N:
    ``K_{op} = w_o w_p ⊗_j (W_{o,j} W_{p,j}ᵀ / n_j)``. Rounding: each entry of K is within
    ``γ_{n+2d+4}`` of its absolute counterpart ``K^{abs}`` (the same products of |W|), so
    ``‖K̂ − K‖₂ ≤ ‖γ K^{abs}‖_F``; the symmetric eigensolver adds ``norms.rounding_allowance``;
    each eigenvalue is lowered by both (Weyl) before its square root."""
    from factorize.norms import rounding_allowance
    from factorize.numerics import gamma, round_down, round_up

    sizes = tuple(int(n) for n in sizes)
    k = sum(wb.rows for wb in wblocks)
    if k > MAX_GRAM_ROWS or k == 0:
        return None
    off = np.cumsum([0] + [wb.rows for wb in wblocks])
    K = np.zeros((k, k))
    Kabs = np.zeros((k, k))
    memo: dict[tuple[str, str, int], tuple[np.ndarray, np.ndarray]] = {}
    for o, bo in enumerate(wblocks):
        for p in range(o, len(wblocks)):
            bp = wblocks[p]
            M = np.array([[bo.weight * bp.weight]])
            Ma = np.abs(M)
            for j, n in enumerate(sizes):
                fo, fp = bo.factor(j), bp.factor(j)
                key = (fo.key, fp.key, n)
                if key not in memo:
                    A, B = fo.dense(), fp.dense()
                    memo[key] = (A @ B.T / n, np.abs(A) @ np.abs(B).T / n)
                M = np.kron(M, memo[key][0])
                Ma = np.kron(Ma, memo[key][1])
            K[off[o]:off[o + 1], off[p]:off[p + 1]] = M
            K[off[p]:off[p + 1], off[o]:off[o + 1]] = M.T
            Kabs[off[o]:off[o + 1], off[p]:off[p + 1]] = Ma
            Kabs[off[p]:off[p + 1], off[o]:off[o + 1]] = Ma.T
    err = round_up(gamma(max(sizes) + 2 * len(sizes) + 4) * float(np.linalg.norm(Kabs)), 3)
    ev = np.linalg.eigvalsh(K)
    spectral = float(max(abs(ev[0]), abs(ev[-1])))
    slack = round_up(err + rounding_allowance(K.shape, spectral + err), 1)
    roots = np.sqrt(np.clip(ev - slack, 0.0, None))
    tr = float(np.sum(roots))
    if not tr > 0:
        return 0.0
    return round_down(round_down(tr, k + 2) / math.sqrt(k), 3)
