"""Unions of Kronecker strategies over groups of workload blocks (HDMM's OPT_+).

Between the union family (one Kronecker strategy per block, ``structured.union``) and one
Kronecker strategy shared by all blocks (``structured.shared_kron``) lie the groupings: the
blocks are partitioned into groups g, group g gets its own shared Kronecker strategy
``α_g ⊗_j A_{g,j}`` (``pure_dp.kron.optimize_kron`` p-Identity factors for Laplace noise,
``shared_kron_gaussian.optimize_kron_l2`` factors for Gaussian noise, each factor of unit
column norm), and block o of group g is answered from its group's measurement alone,
``(w_o / α_g) ⊗_j W_{o,j} Ã_{g,j}⁺``. With ``V_g = Σ_{o∈g} w_o² Π_j tr(G_{o,j} (A_{g,j}ᵀA_{g,j})⁺)``
(the group's optimiser value) the total variance per unit noise is

    Laplace (Δ₁ = Σ_g α_g):       2 (Σ_g α_g)² Σ_g V_g / α_g²,   α_g ∝ V_g^{1/3},  → 2 (Σ_g V_g^{1/3})³
    Gaussian (Δ₂² = Σ_g α_g²):     (Σ_g α_g²) Σ_g V_g / α_g²,     α_g ∝ V_g^{1/4},  → (Σ_g V_g^{1/2})²

(Hölder; HDMM's union template uses the same cube-root rule). The groupings tried
(:func:`candidate_groupings`): blocks with the same set of measured attributes (those whose
factor is not a total) together; and each block with a block whose measured attributes
contain its own (nested supports, to the largest). Every candidate with at least two groups,
fewer groups than blocks and at most :data:`MAX_GROUPS` groups is optimised; the lowest total
is kept and the others recorded.

Encoding: the union codec (family ``"kron_groups"``): strategy factors ``A.<g>.<j>``,
reconstruction factors ``R.<i>``. Certificate: the union family's lower bound for W (it depends
on W alone), re-verified as the ``kron`` family's (``shared_kron.verify_certificate``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import KronBlock, StructureError, Term
from .reconstruction import StructuredReconstruction
from .strategy import StructuredStrategy
from .workload_blocks import WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.records import FamilyCertificate

FAMILY = "kron_groups"
#: The per-factor p-Identity searches of a group (Laplace) take the fixed two random restarts
#: per p and no escape sweeps: a grouping optimises one Kronecker strategy per group (HDMM's
#: SF1 persons: 12 groups, 25 s at the small-factor default of 16 restarts).
GROUP_SEARCH = {"restarts": 2}
#: Groupings of more groups than this are not tried (each group is one OPT_⊗ search).
MAX_GROUPS = 16


@dataclass(frozen=True)
class Group:
    """One group: its blocks, its shared factors (one per attribute, unit column norms) and
    the optimiser's value V_g."""

    blocks: tuple[int, ...]
    factors: tuple[np.ndarray, ...]
    value: float


def _measured(wb: WorkloadBlock) -> frozenset[int]:
    return frozenset(j for j, f in enumerate(wb.factors) if f.kind != "total")


def candidate_groupings(wblocks: Sequence[WorkloadBlock]) -> list[tuple[str, list[list[int]]]]:
    """The groupings tried (module docstring), each with at least two groups and fewer groups
    than blocks, without repeats."""
    supports = [_measured(wb) for wb in wblocks]
    same: dict[frozenset[int], list[int]] = {}
    for o, S in enumerate(supports):
        same.setdefault(S, []).append(o)
    out: list[tuple[str, list[list[int]]]] = [("same measured attributes", list(same.values()))]
    tops = [S for S in same if not any(S < T for T in same)]
    nested: dict[frozenset[int], list[int]] = {T: [] for T in tops}
    for o, S in enumerate(supports):
        home = max((T for T in tops if S <= T), key=lambda T: (len(T), sorted(T)))
        nested[home].append(o)
    out.append(("nested measured attributes", [g for g in nested.values() if g]))
    seen: set[tuple[tuple[int, ...], ...]] = set()
    kept = []
    for name, groups in out:
        key = tuple(sorted(tuple(sorted(g)) for g in groups))
        if 2 <= len(groups) < len(wblocks) and len(groups) <= MAX_GROUPS and key not in seen:
            seen.add(key)
            kept.append((name, [sorted(g) for g in groups]))
    return kept


def _normalise(F: np.ndarray, noise: str) -> np.ndarray:
    norms = np.abs(F).sum(axis=0) if noise == "laplace" else np.linalg.norm(F, axis=0)
    return F / float(np.max(norms))


def _optimise_group(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], members: list[int],
                    noise: str, seed: int) -> Group:
    sub = [wblocks[o] for o in members]
    if noise == "laplace":
        from factorize.pure_dp.kron import optimize_kron

        from .shared_kron import product_workload

        ks = optimize_kron(product_workload(sizes, sub), seed=seed, one_d=GROUP_SEARCH,
                           escape=False)
        factors = tuple(_normalise(np.asarray(F, dtype=np.float64), noise) for F in ks.factors)
    else:
        from .shared_kron_gaussian import optimize_kron_l2

        kg = optimize_kron_l2(sizes, sub)
        factors = tuple(_normalise(np.asarray(F, dtype=np.float64), noise) for F in kg.factors)
    return Group(tuple(members), factors, _group_value(sub, factors))


def _group_value(sub: Sequence[WorkloadBlock], factors: Sequence[np.ndarray]) -> float:
    """``V_g = Σ_o w_o² Π_j tr(G_{o,j} (AᵀA)⁺)`` for the normalised factors."""
    inv = [np.linalg.pinv(F.T @ F) for F in factors]
    total = []
    for wb in sub:
        t = float(wb.weight) ** 2
        for j, f in enumerate(wb.factors):
            D = f.dense()
            t *= float(np.sum((D @ inv[j]) * D))
        total.append(t)
    return math.fsum(total)


def total_variance(values: Sequence[float], noise: str) -> float:
    """The total variance per unit noise of the weighted groups (module docstring)."""
    if noise == "laplace":
        return 2.0 * math.fsum(v ** (1.0 / 3.0) for v in values) ** 3
    return math.fsum(math.sqrt(v) for v in values) ** 2


def weights(values: Sequence[float], noise: str) -> list[float]:
    """``α_g`` (module docstring), summing to 1."""
    raw = [v ** (1.0 / 3.0) if noise == "laplace" else v ** 0.25 for v in values]
    s = math.fsum(raw)
    return [r / s for r in raw]


def optimise(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], noise: str, seed: int
             ) -> tuple[list[Group], dict[str, Any]]:
    """The best grouping of :func:`candidate_groupings` and the record of every one tried
    (groups, total variance per unit noise, seconds); :class:`StructureError` when no
    grouping has between two groups and one group per block."""
    t0 = time.perf_counter()
    cands = candidate_groupings(wblocks)
    if not cands:
        raise StructureError("no grouping of the blocks between one shared Kronecker strategy "
                             "and one per block")
    memo: dict[tuple[int, ...], Group] = {}
    tried = []
    best: tuple[float, list[Group], str] | None = None
    for name, groups in cands:
        t = time.perf_counter()
        gs = []
        for members in groups:
            key = tuple(members)
            if key not in memo:
                memo[key] = _optimise_group(sizes, wblocks, members, noise, seed + 7919 * min(members))
            gs.append(memo[key])
        tv = total_variance([g.value for g in gs], noise)
        tried.append({"grouping": name, "groups": [list(g.blocks) for g in gs],
                      "total_variance_per_unit_noise": tv, "seconds": time.perf_counter() - t})
        if best is None or tv < best[0]:
            best = (tv, gs, name)
    assert best is not None
    record = {"family": "kron groups (OPT_+)", "seed": int(seed), "chosen": best[2],
              "tried": tried, "seconds": time.perf_counter() - t0}
    return best[1], record


def build(sizes: Sequence[int], wblocks: Sequence[WorkloadBlock], groups: Sequence[Group],
          noise: str, cert: FamilyCertificate, cert_arrays: dict[str, np.ndarray]):
    """Strategy, reconstruction, encoding and the given certificate (module docstring)."""
    from factorize.privacy.lattice import quantize

    from .shared_kron import _check_measurements, _summed_out
    from .strategy import measured_scale
    from .union import encode

    sizes = tuple(int(n) for n in sizes)
    alphas = weights([g.value for g in groups], noise)
    arrays: dict[str, np.ndarray] = {}
    blocks: list[KronBlock] = []
    terms: list[Term] = []
    r_names: dict[tuple[int, int, str], str] = {}
    covered: set[int] = set()
    for gi, (g, alpha) in enumerate(zip(groups, alphas, strict=True)):
        if len(g.factors) != len(sizes):
            raise StructureError(f"group {gi}: {len(g.factors)} factors for {len(sizes)} attributes")
        members = [wblocks[o] for o in g.blocks]
        support = tuple(j for j, F in enumerate(g.factors)
                        if not (_summed_out(F) and all(wb.factor(j).kind == "total" for wb in members)))
        pinvs = {}
        for j in support:
            A = quantize(np.asarray(g.factors[j], dtype=np.float64)).measured
            if A.shape[1] != sizes[j]:
                raise StructureError(f"group {gi}, factor {j}: {A.shape[1]} columns for {sizes[j]} values")
            arrays[f"A.{gi}.{j}"] = A
            pinvs[j] = np.linalg.pinv(A)
        _check_measurements(sum(math.prod(arrays[f"A.{h}.{j}"].shape[0] for j in b.support)
                                for h, b in enumerate(blocks))
                            + math.prod(arrays[f"A.{gi}.{j}"].shape[0] for j in support))
        scale = measured_scale(float(alpha))
        blocks.append(KronBlock(scale, support, tuple(f"A.{gi}.{j}" for j in support)))
        for o in g.blocks:
            if o in covered:
                raise StructureError(f"workload block {o} is in two groups")
            covered.add(o)
            wb = wblocks[o]
            names = []
            for j in support:
                f = wb.factor(j)
                key = (gi, j, f.key)
                if key not in r_names:
                    r_names[key] = name = f"R.{len(r_names)}"
                    arrays[name] = np.ascontiguousarray(f.dense() @ pinvs[j])
                names.append(r_names[key])
            terms.append(Term(o, gi, float(wb.weight) / scale, support, tuple(names)))
    if covered != set(range(len(wblocks))):
        raise StructureError("the groups do not cover every workload block")
    terms.sort(key=lambda t: t.out_block)
    strat_arrays = {k: v for k, v in arrays.items() if k.startswith("A.")}
    strategy = StructuredStrategy(sizes, blocks, strat_arrays, FAMILY)
    recon = StructuredReconstruction([wb.rows for wb in wblocks], terms, arrays, strategy)
    return strategy, recon, encode(strategy, recon, FAMILY), dict(cert), dict(cert_arrays)
