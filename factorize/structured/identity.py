"""``W = R·Ã`` checked in the algebra: a certified ``β ≥ max|W − R·Ã|`` without forming W.

For workload block o (``w_o ⊗_j W_{o,j}``) the reconstruction's terms t each contribute
``c_t s_{in(t)} ⊗_j P_{t,j}`` with ``P_{t,j} = G_{t,j} F_{in(t),j}`` (G the term's factor, ``[[1]]``
when absent; F the strategy's factor, ``1ᵀ`` off its support). Give each term, on each
attribute j, the *choice* ``(G name, F name)``. The check is exact in the algebra when

    the terms of block o are the full product of per-attribute choice sets C_j, each
    combination exactly once,

for then ``Σ_t ⊗_j P_{t,j} = ⊗_j Q_j`` with ``Q_j = Σ_{c∈C_j} P_c`` (distributivity). A union
plan has one choice per attribute (one term per block); a residual plan has
``C_j = {(V_j, U_j), (mean_j, 1ᵀ)}`` on each attribute of the marginal, ``Q_j = V_jU_j + J/n_j``.
With ``e_t = c_t s_{in(t)}`` (its float product within ``u|e_t|``) and any ``ē``:

    Σ_t e_t ⊗P_t − w ⊗W = ē(⊗Q − ⊗W) + (ē − w)⊗W + Σ_t (e_t − ē) ⊗P_t,

and taking ``ē = w``, entrywise

    |·| ≤ |w| Σ_j Π_{i<j} q_i · ε_j · Π_{i>j} ω_i  +  max_t |e_t − w| · Π_j Σ_{c∈C_j} max|P_c|,

``q_j ≥ max|Q_j|``, ``ε_j ≥ max|Q_j − W_j|``, ``ω_j = max|W_j|`` (the Kronecker telescoping of
``plan.bias.residual_bound``). Per attribute, ``fl(G F)`` is within ``γ_k |G||F|`` of the exact
product and the sum over C_j within ``γ_{|C_j|} Σ|P_c|``; every bound is rounded up. Attributes
where every term has neither factor (``P = 1ᵀ``) and the workload sums the attribute out are
exact and skipped. A term set that is not a full product is refused with the counts: a dropped
or duplicated residual, a term reading the wrong measurement.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from factorize.numerics import U as _U
from factorize.numerics import gamma, round_up

from .blocks import StructureError
from .reconstruction import StructuredReconstruction
from .workload_blocks import WorkloadBlock

Choice = tuple[str | None, str | None]


def reconstruction_residual(recon: StructuredReconstruction,
                            wblocks: Sequence[WorkloadBlock]) -> float:
    """The certified β of the module docstring (``recon.strategy`` must be the measured
    strategy); :class:`StructureError` when the terms are not a full product or do not match
    the workload's blocks."""
    s = recon.strategy
    if len(wblocks) != len(recon.out_rows):
        raise StructureError(f"the reconstruction has {len(recon.out_rows)} output blocks, the "
                             f"workload {len(wblocks)}")
    memo: dict[tuple, tuple[float, float, float, float]] = {}
    beta = 0.0
    for o, wb in enumerate(wblocks):
        if wb.rows != recon.out_rows[o]:
            raise StructureError(f"output block {o} has {recon.out_rows[o]} rows, the workload "
                                 f"block {wb.rows}")
        terms = [recon.terms[i] for i in recon.by_block[o]]
        if not terms:
            raise StructureError(f"workload block {o} is not reconstructed by any term")
        choices: list[dict[int, Choice]] = []
        for t in terms:
            inner = dict(zip(s.blocks[t.in_block].support, s.blocks[t.in_block].names))
            mine = dict(zip(t.attrs, t.names))
            choices.append({j: (mine.get(j), inner.get(j)) for j in set(mine) | set(inner)})
        attrs = sorted({j for c in choices for j in c} | set(wb.active()))
        per_attr: list[list[Choice]] = []
        for j in attrs:
            seen: dict[Choice, None] = {}
            for c in choices:
                seen.setdefault(c.get(j, (None, None)), None)
            per_attr.append(list(seen))
        combos = {tuple(c.get(j, (None, None)) for j in attrs) for c in choices}
        full = math.prod(len(cs) for cs in per_attr)
        if len(combos) != len(terms) or full != len(terms):
            raise StructureError(
                f"workload block {o}: its {len(terms)} terms are not the full product of their "
                f"per-attribute choices ({' × '.join(str(len(cs)) for cs in per_attr)} = {full}, "
                f"{len(combos)} distinct): a residual is missing, duplicated or misplaced")
        q, eps, omega, p = [], [], [], []
        for j, cs in zip(attrs, per_attr):
            wf = wb.factor(j)
            key = (j, tuple(cs), wf.key)
            if key not in memo:
                memo[key] = _attribute(recon, j, cs, wf)
            qj, ej, wj, pj = memo[key]
            q.append(qj)
            eps.append(ej)
            omega.append(wj)
            p.append(pj)
        tele = 0.0
        for j in range(len(attrs)):
            tele += math.prod(q[:j]) * eps[j] * math.prod(omega[j + 1:])
        tele = round_up(tele, 2 * len(attrs) + 1)
        # |c·s − w| ≤ |fl(c·s) − w| + u|fl(c·s)| (one rounded product), then the subtraction
        e = np.array([t.scale for t in terms]) * np.array([s.blocks[t.in_block].scale for t in terms])
        dev = round_up(float(np.max(np.abs(e - wb.weight) + _U * np.abs(e))), 2)
        spread = round_up(dev * round_up(math.prod(p), len(p) + 1), 1)
        beta = max(beta, round_up(abs(wb.weight) * tele + spread, 3))
    return beta


def _attribute(recon: StructuredReconstruction, j: int, choices: list[Choice],
               W_factor) -> tuple[float, float, float, float]:
    """``(q_j, ε_j, ω_j, Σ_c max|P_c|)`` of the module docstring for one attribute."""
    s = recon.strategy
    n = s.sizes[j]
    Wj = W_factor.dense()
    Q = np.zeros(Wj.shape)
    err = np.zeros(Wj.shape)
    absP = np.zeros(Wj.shape)
    pmax = 0.0
    for g_name, f_name in choices:
        G = recon.arrays[g_name] if g_name is not None else np.ones((1, 1))
        F = s.arrays[f_name] if f_name is not None else np.ones((1, n))
        if G.shape[1] != F.shape[0] or (G.shape[0], F.shape[1]) != Wj.shape:
            raise StructureError(f"attribute {j}: a term's product has shape "
                                 f"{(G.shape[0], F.shape[1])}, the workload factor {Wj.shape}")
        P = G @ F
        slack = gamma(max(G.shape[1], 1)) * (np.abs(G) @ np.abs(F))
        Q += P
        err += slack
        absP += np.abs(P)
        pmax += float(np.max(np.abs(P) + slack))
    if len(choices) > 1:
        err += gamma(len(choices)) * absP
    eps = round_up(float(np.max(np.abs(Q - Wj) + err)), 3)
    q = round_up(float(np.max(np.abs(Q) + err)), 2)
    return q, eps, float(np.max(np.abs(Wj))), round_up(pmax, len(choices) + 1)
