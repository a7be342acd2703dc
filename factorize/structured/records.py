"""Bounding the number of records from a structured release (``plan.bias``, structured form).

The intervals add the reconstruction's bias ``β·n`` with n private under add/remove
neighbours, so n is bounded from released values (post-processing, failing with probability
``plan.bias.ALPHA_N``):

* ``total`` — a strategy block with empty support measures ``s·n`` itself:
  ``n ≤ (ỹ_∅ + γ/2 + t·sd) / s`` (t the tail multiplier of ``plan.bias``);
* ``weights`` — one workload block o with per-attribute weights ``b_j ≥ 0``,
  ``W_{o,j}ᵀ b_j ≥ μ_j`` (a linear program per distinct factor, ``plan.bias.lp_weights``;
  all ones for an identity, ``[1]`` for a summed-out attribute): with ``b = ⊗_j b_j`` and the
  block's weight w_o as a 1×1 factor, ``Wᵀb ≥ μ = |w_o| Π μ_j`` and the bound of ``plan.bias``
  applies to the block's released answers, ``c = R_oᵀ b`` computed through the block's
  reconstruction terms (one per block in a union plan; several reading one strategy block in
  a marginal-weights plan, summed with the float error of the sum added to ‖c‖);
* ``cap`` — 2⁵³ (the exact measurement's limit).

The planner picks, from public quantities only, the block whose bound has the smallest noise
per unit of μ; the verifier re-derives μ with rounding allowances and requires μ > β‖b‖₁.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .blocks import StructureError, Term
from .reconstruction import StructuredReconstruction
from .workload_blocks import WorkloadBlock

if TYPE_CHECKING:
    from factorize.plan.check_record import PlanCheck
    from factorize.plan.records import BiasRecord, NBoundRecord

PREFIX = "nbound."


def _block_parts(recon: StructuredReconstruction, wb: WorkloadBlock, o: int,
                 weights: Sequence[np.ndarray] | None = None
                 ) -> tuple[list[np.ndarray], list[tuple[int, list[np.ndarray], list[int], Term]], list[np.ndarray]]:
    """(workload leaves, reconstruction terms, weights) of block o: the leaves in the
    Kronecker order of its answers (the block's weight leading as a 1×1 factor, then one
    per attribute the block does not sum out); each term as ``(strategy block, factors,
    positions)`` — its scale as a 1×1 factor, then its factor per attribute, and for each
    attribute the leaf it reads weights from (−1: a one-row factor, weight [1]), and the term
    (a mixed one is applied by ``structured.mixing.rmatvec_term``)."""
    terms = [recon.terms[i] for i in recon.by_block[o]]
    if not terms:
        raise StructureError(f"workload block {o} has no reconstruction term")
    active = list(wb.active())
    leaves = [np.array([[wb.weight]])] + [wb.factor(j).dense() for j in active]
    where = {j: i + 1 for i, j in enumerate(active)}
    parts = []
    for t in terms:
        pos = [where.get(j, -1) for j in t.attrs]
        if sorted(p for p in pos if p > 0) != list(range(1, len(leaves))):
            raise StructureError(f"a term of workload block {o} does not map its attributes")
        parts.append((t.in_block, [np.array([[t.scale]])] + [recon.arrays[n] for n in t.names], pos, t))
    if weights is None:
        from factorize.plan.bias import lp_weights

        weights = [np.ones(1)]
        for L in leaves[1:]:
            b = np.ones(L.shape[0]) if L.shape[0] == L.shape[1] and np.array_equal(L, np.eye(L.shape[0])) \
                else lp_weights(L)
            if b is None:
                raise StructureError("no non-negative weights count every record")
            weights.append(b)
    return leaves, parts, list(weights)


def _c_vector(recon: StructuredReconstruction, parts: list, weights: Sequence[np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(b, c = Rᵀb, err)`` over the strategy blocks the terms read: b the normalized weights'
    Kronecker product over the block's answers, err an entrywise bound on c's float error
    from summing several terms (0 for one term per strategy block)."""
    from factorize.kron import kron_rmatvec, kron_vector
    from factorize.numerics import gamma
    from factorize.plan.bias import normalized_weights

    bs = normalized_weights(weights)
    b = kron_vector(bs)
    from .mixing import rmatvec_term

    per_block: dict[int, list[tuple[list[np.ndarray], np.ndarray, Term]]] = {}
    for blk, R, pos, t in parts:
        bt = kron_vector([bs[0]] + [bs[p] if p > 0 else np.ones(1) for p in pos])
        per_block.setdefault(blk, []).append((R, bt, t))
    cs, errs = [], []
    for blk in sorted(per_block):
        group = per_block[blk]
        cs.append(np.sum([rmatvec_term(recon, t, bt) if t.mix is not None else kron_rmatvec(R, bt)
                          for R, bt, t in group], axis=0))
        if len(group) > 1:  # |fl(Σ_t x_t) − Σ_t x_t| ≤ γ Σ_t |R_t|ᵀ|b_t| (products and sum)
            absum = np.sum([kron_rmatvec([np.abs(F) for F in R], np.abs(bt)) for R, bt, _ in group], axis=0)
            errs.append(gamma(len(group) + 4 * len(bs) + 8) * absum)
        else:
            errs.append(np.zeros_like(cs[-1]))
    return b, np.concatenate(cs), np.concatenate(errs)


def _c_norm(recon: StructuredReconstruction, parts: list, weights: Sequence[np.ndarray]) -> float:
    """``‖Rᵀb‖₂`` of :func:`_c_vector` (the planner's score; no rounding allowance needed)
    without forming the strategy-side vector: one term's ``Rᵀb`` is ``⊗_j R_jᵀb_j``, so
    ``‖Σ_t ⊗_j u_{t,j}‖² = Σ_{t,t'} Π_j ⟨u_{t,j}, u_{t',j}⟩`` over the terms reading one
    strategy block — O(Σ_j m_j n_j) per term instead of O(Π_j m_j). Mixed terms, or terms
    whose factors do not line up, take :func:`_c_vector`."""
    from factorize.plan.bias import normalized_weights

    bs = normalized_weights(weights)
    per_block: dict[int, list[list[np.ndarray]]] = {}
    for blk, R, pos, t in parts:
        if t.mix is not None:
            return float(np.linalg.norm(_c_vector(recon, parts, weights)[1]))
        vs = [bs[0]] + [bs[p] if p > 0 else np.ones(1) for p in pos]
        per_block.setdefault(blk, []).append([F.T @ v for F, v in zip(R, vs, strict=True)])
    total = 0.0
    for us in per_block.values():
        if len({tuple(u.shape for u in x) for x in us}) != 1:
            return float(np.linalg.norm(_c_vector(recon, parts, weights)[1]))
        for x in us:
            for y in us:
                total += float(np.prod([np.dot(a, b) for a, b in zip(x, y, strict=True)]))
    return float(np.sqrt(max(total, 0.0)))


def choose(recon: StructuredReconstruction, wblocks: Sequence[WorkloadBlock], beta: float
           ) -> tuple[NBoundRecord, dict[str, np.ndarray]]:
    """The ``bias`` fields and weight arrays of the module docstring (planning time)."""
    from factorize.plan.bias import certified_mu

    strategy = recon.strategy
    if any(not b.support for b in strategy.blocks):
        return {"n_bound": "total"}, {}
    best = None
    for o, wb in enumerate(wblocks):
        try:
            leaves, parts, weights = _block_parts(recon, wb, o)
            mu, l1, _ = certified_mu("weights", weights, None, leaves)
        except (StructureError, ValueError, ArithmeticError):
            continue
        if not mu > beta * l1:
            continue
        score = _c_norm(recon, parts, weights) / (mu - beta * l1)
        if best is None or score < best[0]:
            best = (score, o, weights)
    if best is None:
        return {"n_bound": "cap"}, {}
    _, o, weights = best
    return ({"n_bound": "weights", "n_block": int(o)},
            {f"{PREFIX}{i}": np.asarray(b, dtype=np.float64) for i, b in enumerate(weights)})


def check(bias: BiasRecord, arrays: dict[str, np.ndarray], recon: StructuredReconstruction,
          wblocks: Sequence[WorkloadBlock], beta: float) -> dict[str, Any]:
    """Verification of the plan's n bound: ``{method, μ, ‖b‖₁, block}`` re-derived, or
    :class:`StructureError` (weights that do not count every record, μ ≤ β‖b‖₁, a total
    bound without a total measurement)."""
    from factorize.plan.bias import certified_mu

    method = bias.get("n_bound")
    if method == "cap":
        return {"n_bound": "cap"}
    if method == "total":
        if not any(not b.support for b in recon.strategy.blocks):
            raise StructureError("the plan bounds n by the total's measurement, but no block "
                                 "measures the total")
        return {"n_bound": "total"}
    if method != "weights":
        raise StructureError(f"unknown n-bound method {method!r}")
    o = bias.get("n_block")
    if not (isinstance(o, int) and not isinstance(o, bool) and 0 <= o < len(wblocks)):
        raise StructureError("the n bound names no workload block")
    k = len([n for n in arrays if n.startswith(PREFIX)])
    stored = [arrays.get(f"{PREFIX}{i}") for i in range(k)]
    weights = [w for w in stored if w is not None and w.ndim == 1]
    if len(weights) != k:
        raise StructureError("the n-bound weights must be vectors nbound.0, nbound.1, …")
    leaves, _, weights = _block_parts(recon, wblocks[o], o, weights)
    mu, l1, _ = certified_mu("weights", weights, None, leaves)
    if not mu > beta * l1:
        raise StructureError(f"the n-bound weights give μ = {mu:.3g} ≤ β‖b‖₁ = {beta * l1:.3g}")
    return {"n_bound": "weights", "n_block": o, "mu": mu, "b_l1": l1}


def n_upper(plan: Any, check: PlanCheck, noisy: np.ndarray, estimates: np.ndarray,
            sd: float, beta: float) -> float:
    """Release time: n⁺ by the method ``check`` verified (module docstring). A numerical
    failure gives the cap; a verification that did not establish the method or its values
    (``PlanCheck.established``) raises InternalError."""
    from factorize.numerics import round_up
    from factorize.plan.bias import N_CAP, n_upper_from, tail_multiplier

    method = check.established("n_bound")
    try:  # InternalError (a RuntimeError) is not caught: it is no numerical failure
        noise = plan.noise
        if method == "total":
            s = plan.strategy.measured()
            tb = next(i for i, blk in enumerate(s.blocks) if not blk.support)
            num = float(noisy[s.offsets[tb]]) + 0.5 * (noise.grid or 0.0) + tail_multiplier(noise.family) * sd
            return 0.0 if num <= 0 else min(N_CAP, round_up(num / abs(s.blocks[tb].scale), 4))
        if method == "weights":
            o, wblocks = check.established("n_block"), check.established("wblocks")
            mu, b_l1 = check.established_number("mu"), check.established_number("b_l1")
            recon = plan.reconstruction
            k = len([n for n in plan.n_weights if n.startswith(PREFIX)])
            weights = [plan.n_weights[f"{PREFIX}{i}"] for i in range(k)]
            _, parts, weights = _block_parts(recon, wblocks[o], o, weights)
            b, c, err = _c_vector(recon, parts, weights)
            est = estimates[recon.offsets[o]:recon.offsets[o + 1]]
            return n_upper_from(b, c, est, mu, beta, b_l1, sd,
                                noise.family, noise.grid, err)
    except (ArithmeticError, ValueError, KeyError, IndexError, StopIteration, StructureError):
        pass
    return N_CAP if beta > 0 else 0.0

