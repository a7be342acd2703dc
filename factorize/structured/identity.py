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
exact and skipped.

**Sums of Kronecker products that are not a full product** (the least-squares reconstruction
of a marginal-weights strategy, ``structured.marginal_weights``, has coefficients
``θ_S/λ_U`` that do not factor per attribute) are checked in a basis instead. Per attribute j
split the workload factor as ``W_j = B_{j,0} + B_{j,1}``, ``B_{j,0} = W_j 𝟙𝟙ᵀ/n_j`` (its row
means) and ``B_{j,1} = W_j (I − 𝟙𝟙ᵀ/n_j)`` — Frobenius-orthogonal — and write each term's
``P_{t,j} = α_{t,j,0} B_{j,0} + α_{t,j,1} B_{j,1} + E_{t,j}`` (α the Frobenius projections,
``η_{t,j} ≥ max|E_{t,j}|`` certified). Then with ``κ_p = Σ_t e_t Π_j α_{t,j,p_j}`` for every
pattern ``p ∈ {0,1}^attrs`` (the patterns whose B are all nonzero), ``w ⊗_j W_j = w Σ_p ⊗_j
B_{j,p_j}`` and entrywise

    |Σ_t e_t ⊗P_t − w ⊗W| ≤ Σ_p |κ_p − w| Π_j max|B_{j,p_j}|
                            + Σ_t |e_t| (Π_j (a_{t,j} + η_{t,j}) − Π_j a_{t,j}),

``a_{t,j} = Σ_b |α_{t,j,b}| max|B_{j,b}|``, with the float error of e_t, of κ_p and of every
product rounded up. A missing term leaves some ``κ_p`` far from w and the plan is refused.
A term set that is neither is refused with the counts: a dropped or duplicated residual, a
term reading the wrong measurement.

**Mixed blocks** (``structured.mixing``): a term reading one takes, on each mixed attribute,
the choice ``(G_j, Z_j)`` (Z_j the partition) as if the block were plain, and the block's β
adds ``|c s| Π_{j∉X} max|P_j| · max|(⊗_X G_j)(N M − I)|`` per such term (certified, that
module's ``mixing_residual``): the difference between the term's product and the plain
Kronecker product the check counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from factorize.numerics import U as _U
from factorize.numerics import gamma, round_up

from .blocks import StructureError, Term
from .reconstruction import StructuredReconstruction
from .workload_blocks import WorkloadBlock

Choice = tuple[str | None, str | None]


#: Families whose reconstruction is ``W (AᵀA)⁺ Aᵀ`` in the subset algebra: a block's terms may
#: be a sum over strategy blocks that is not a full product (e.g. a total answered from every
#: measured marginal), checked in the basis. Other families keep the full-product rule, under
#: which a missing or misplaced residual is refused outright.
LEAST_SQUARES_FAMILIES = ("marginal_weights", "subset_algebra")


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
            inner = dict(zip(s.blocks[t.in_block].support, s.blocks[t.in_block].names, strict=True))
            mine = dict(zip(t.attrs, t.names, strict=True))
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
        if (len(combos) != len(terms) or full != len(terms)) and (
                len({t.in_block for t in terms}) < len(terms) or s.family in LEAST_SQUARES_FAMILIES):
            # several terms read one strategy block, or a least-squares reconstruction: a sum of
            # Kronecker products, checked in the basis of row means and centred rows (module
            # docstring)
            beta = max(beta, _basis_residual(recon, o, wb, terms, attrs, choices, memo))
            continue
        if len(combos) != len(terms) or full != len(terms):
            raise StructureError(
                f"workload block {o}: its {len(terms)} terms are not the full product of their "
                f"per-attribute choices ({' × '.join(str(len(cs)) for cs in per_attr)} = {full}, "
                f"{len(combos)} distinct): a residual is missing, duplicated or misplaced")
        q, eps, omega, p = [], [], [], []
        for j, cs in zip(attrs, per_attr, strict=True):
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
        block_beta = round_up(abs(wb.weight) * tele + spread, 3)
        mixed = [(t, c) for t, c in zip(terms, choices, strict=True) if t.mix is not None]
        if mixed:
            block_beta = round_up(block_beta + _mixing_part(recon, wb, attrs, mixed, memo), 1)
        beta = max(beta, block_beta)
    return beta


def _mixing_part(recon: StructuredReconstruction, wb: WorkloadBlock, attrs: list[int],
                 mixed: list[tuple[Term, dict[int, Choice]]], memo: dict) -> float:
    """``Σ_t |c_t s_b| · Π_{j∉X} max|P_{t,j}| · max|(⊗_X G_j)(N M − I)|`` over the terms of one
    output block that read mixed blocks (``structured.mixing``): what separates each such
    term's product from the plain Kronecker product the full-product check above counted
    (a partition's columns are unit vectors, so the mixed group's deviation is that of
    ``(⊗_X G_j)(N M − I)`` itself)."""
    from .mixing import mixing_residual

    s = recon.strategy
    total = 0.0
    for t, choice in mixed:
        blk = s.blocks[t.in_block]
        key = ("mixing", t.mix, blk.mix, tuple(t.names))
        if key not in memo:
            memo[key] = mixing_residual(recon, t)
        factors = [abs(t.scale) * (1.0 + 2 * _U), abs(blk.scale), memo[key]]
        for j in attrs:
            if j in blk.mix_attrs:
                continue
            f = wb.factor(j)
            shape = (f.rows, f.n)
            pkey = ("pmax", j, choice.get(j, (None, None)), shape)
            if pkey not in memo:
                P, slack = _term_product(recon, j, choice.get(j, (None, None)), shape)
                memo[pkey] = round_up(float(np.max(np.abs(P) + slack)), 2)
            factors.append(memo[pkey])
        total += round_up(math.prod(factors), len(factors) + 1)
    return round_up(total, len(mixed) + 1)


def _term_product(recon: StructuredReconstruction, j: int, choice: Choice,
                  shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(fl(G F), γ_k |G||F|)``: a term's per-attribute product ``P = G F`` on attribute j (G
    the term's factor, ``[[1]]`` when absent; F the strategy's, ``1ᵀ`` off its support) and
    the entrywise bound on its float error; :class:`StructureError` unless it has the
    workload factor's ``shape``."""
    s = recon.strategy
    g_name, f_name = choice
    G = recon.arrays[g_name] if g_name is not None else np.ones((1, 1))
    F = s.arrays[f_name] if f_name is not None else np.ones((1, s.sizes[j]))
    if G.shape[1] != F.shape[0] or (G.shape[0], F.shape[1]) != tuple(shape):
        raise StructureError(f"attribute {j}: a term's product has shape "
                             f"{(G.shape[0], F.shape[1])}, the workload factor {tuple(shape)}")
    return G @ F, gamma(max(G.shape[1], 1)) * (np.abs(G) @ np.abs(F))


def _attribute(recon: StructuredReconstruction, j: int, choices: list[Choice],
               W_factor) -> tuple[float, float, float, float]:
    """``(q_j, ε_j, ω_j, Σ_c max|P_c|)`` of the module docstring for one attribute."""
    Wj = W_factor.dense()
    Q = np.zeros(Wj.shape)
    err = np.zeros(Wj.shape)
    absP = np.zeros(Wj.shape)
    pmax = 0.0
    for choice in choices:
        P, slack = _term_product(recon, j, choice, Wj.shape)
        Q += P
        err += slack
        absP += np.abs(P)
        pmax += float(np.max(np.abs(P) + slack))
    if len(choices) > 1:
        err += gamma(len(choices)) * absP
    eps = round_up(float(np.max(np.abs(Q - Wj) + err)), 3)
    q = round_up(float(np.max(np.abs(Q) + err)), 2)
    return q, eps, float(np.max(np.abs(Wj))), round_up(pmax, len(choices) + 1)


MAX_PATTERNS = 1 << 16


def _basis_residual(recon: StructuredReconstruction, o: int, wb: WorkloadBlock, terms: list,
                    attrs: list[int], choices: list[dict[int, Choice]], memo: dict) -> float:
    """The certified β of one output block whose terms are a sum of Kronecker products
    (module docstring, second part)."""
    s = recon.strategy
    bases = []                                   # per attribute: (B0, B1, (m0, m1), err0, err1)
    for j in attrs:
        key = ("basis", j, wb.factor(j).key)
        if key not in memo:
            memo[key] = _basis(wb.factor(j).dense(), s.sizes[j])
        bases.append(memo[key])
    live = [[b for b in (0, 1) if B[2][b] > 0] for B in bases]   # basis parts that exist
    if math.prod(len(x) for x in live) > MAX_PATTERNS:
        raise StructureError(f"workload block {o}: too many basis patterns to check")
    e = np.array([t.scale for t in terms]) * np.array([s.blocks[t.in_block].scale for t in terms])
    kappa: dict[tuple[int, ...], float] = {}
    kabs: dict[tuple[int, ...], float] = {}
    spread = 0.0
    d = len(attrs)
    for c, et in zip(choices, e.tolist(), strict=True):
        alphas, a_prod, ae_prod = [], 1.0, 1.0
        for j, B, lv in zip(attrs, bases, live, strict=True):
            pkey = ("proj", j, wb.factor(j).key, c.get(j, (None, None)))
            if pkey not in memo:
                memo[pkey] = _project(recon, j, c.get(j, (None, None)), B)
            a01, eta = memo[pkey]
            a = sum(abs(a01[b]) * B[2][b] for b in lv)
            a_prod *= a
            ae_prod *= a + eta
            alphas.append([(b, a01[b]) for b in lv if a01[b] != 0.0])
        ea = abs(et) * (1.0 + 2 * _U)            # ≥ |c·s| exactly (one rounded product)
        # |e|·(Π(a+η) − Π a) for the remainders, plus |c·s − e|·Π(a+η) for e's rounding
        spread += ea * (round_up(ae_prod, 3 * d + 1) - a_prod * (1.0 - gamma(3 * d + 2)))
        spread += 2 * _U * ea * round_up(ae_prod, 3 * d + 1)
        for combo in _product(alphas):
            pat = tuple(b for b, _ in combo)
            v = et * math.prod(x for _, x in combo)
            kappa[pat] = kappa.get(pat, 0.0) + v
            kabs[pat] = kabs.get(pat, 0.0) + abs(v)
    total = 0.0
    n_ops = len(terms) + d + 2
    for pat in _product([[(b, 0.0) for b in lv] for lv in live]):
        p = tuple(b for b, _ in pat)
        dev = abs(kappa.get(p, 0.0) - wb.weight) + gamma(n_ops) * kabs.get(p, 0.0)
        size = math.prod(B[2][b] for B, b in zip(bases, p, strict=True))
        total += round_up(dev, 2) * round_up(size, d)
    return round_up(round_up(total, len(kappa) + 2) + round_up(max(spread, 0.0), len(terms) + 1), 1)


def _product(lists: list[list[tuple[int, float]]]):
    import itertools

    return itertools.product(*lists) if lists else [()]


def _basis(Wj: np.ndarray, n: int):
    """``(B0, B1, (m0, m1), err0, err1)``: the row-mean part ``B0 = W_j𝟙𝟙ᵀ/n`` and the centred
    part ``B1 = W_j − B0`` as computed, certified bounds ``m_b ≥ max|B_b|`` of the exact parts
    (0 where the part is exactly zero: every row of W_j constant makes ``B0 = W_j``, ``B1 = 0``
    exactly) and entrywise bounds on the float error."""
    if bool(np.all(Wj == Wj[:, :1])):
        zero = np.zeros_like(Wj)
        return Wj, zero, (float(np.max(np.abs(Wj))), 0.0), zero, zero
    r = Wj.sum(axis=1)
    err_r = gamma(n) * np.abs(Wj).sum(axis=1)
    mean = r / n
    B0 = np.repeat(mean[:, None], n, axis=1)
    err0 = np.repeat((err_r / n * (1.0 + 2 * _U) + 2 * _U * np.abs(mean))[:, None], n, axis=1)
    B1 = Wj - B0
    err1 = err0 + 2 * _U * np.abs(B1)
    m0 = round_up(float(np.max(np.abs(B0) + err0)), 2)
    m1 = round_up(float(np.max(np.abs(B1) + err1)), 2)
    return B0, B1, (m0, m1), err0, err1


def _project(recon: StructuredReconstruction, j: int, choice: Choice, basis
             ) -> tuple[tuple[float, float], float]:
    """``((α0, α1), η)``: a term's product P on attribute j projected on the basis, and a
    certified bound ``η ≥ max|P − α0 B0 − α1 B1|`` over the exact P, B0, B1."""
    B0, B1, (m0, m1), err0, err1 = basis
    P, slack = _term_product(recon, j, choice, B0.shape)
    n0, n1 = float(np.sum(B0 * B0)), float(np.sum(B1 * B1))
    a0 = float(np.sum(P * B0)) / n0 if m0 > 0 and n0 > 0 else 0.0
    a1 = float(np.sum(P * B1)) / n1 if m1 > 0 and n1 > 0 else 0.0
    E = P - a0 * B0 - a1 * B1
    bound = (np.abs(E) + slack + abs(a0) * err0 + abs(a1) * err1
             + gamma(4) * (np.abs(P) + abs(a0) * np.abs(B0) + abs(a1) * np.abs(B1)))
    return (a0, a1), round_up(float(np.max(bound)), 4)
