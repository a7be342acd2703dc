"""Tensor kernels of marginal families: ``W x``, ``Wᵀ y``, ``WᵀW x`` and the dense matrix.

A family over sizes ``n_0, ..., n_{d-1}`` (``N = Π n_j``) has one block per subset ``S``:
``B_S = w_S ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}``. With ``x`` viewed as the C-order tensor
``X[v_0, ..., v_{d-1}]``, ``B_S x = w_S · (X summed over the axes j ∉ S)``, raveled in C
order over ``S``; ``B_Sᵀ y`` broadcasts ``w_S · y`` (a tensor over ``S``) back along the
other axes.

Attributes of size 1 carry no axis, so blocks are grouped by their *effective* subset
``E = {j ∈ S : n_j > 1}`` (equal effective subsets give equal unweighted blocks). Each
group's marginal is computed once, from the smallest already computed group ``E ∪ {j}``
when there is one (summing one more axis), else from the full tensor; ``Wᵀ`` runs the
same lattice backwards (broadcast-adding into the parent). Results equal the
Kronecker-product evaluation up to floating-point summation order (exactly, for integer
data below 2^53).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MarginalPlan", "make_plan", "apply", "apply_transpose", "apply_gram", "dense"]


@dataclass(frozen=True)
class MarginalPlan:
    """How to evaluate one family (built once per workload, on first use).

    ``axes``: the attributes of size > 1 (the tensor's axes, in order); ``groups``: the
    distinct effective subsets; ``block_group[b]``: block b's group; ``order``: group
    indices by decreasing size (parents first); ``source[g]``: ``None`` (sum the full
    tensor) or ``(parent group, axis position in the parent)``.
    """

    sizes: tuple[int, ...]
    axes: tuple[int, ...]
    groups: tuple[tuple[int, ...], ...]
    block_group: tuple[int, ...]
    order: tuple[int, ...]
    source: tuple[tuple[int, int] | None, ...]


def make_plan(sizes: Sequence[int], subsets: Sequence[tuple[int, ...]]) -> MarginalPlan:
    """Group the blocks by effective subset and pick each group's cheapest source."""
    sizes = tuple(sizes)
    axes = tuple(j for j, n in enumerate(sizes) if n > 1)
    index: dict[tuple[int, ...], int] = {}
    block_group = []
    for S in subsets:
        eff = tuple(j for j in S if sizes[j] > 1)
        block_group.append(index.setdefault(eff, len(index)))
    groups = tuple(index)
    order = tuple(sorted(range(len(groups)), key=lambda g: -len(groups[g])))
    source: list[tuple[int, int] | None] = [None] * len(groups)
    for g in order:
        E = groups[g]
        best: tuple[int, int] | None = None
        best_size = math.prod(sizes)
        for j in axes:
            if j in E:
                continue
            parent = tuple(sorted((*E, j)))
            p = index.get(parent)
            if p is None:
                continue
            size = math.prod(sizes[i] for i in parent)
            if size < best_size:
                best, best_size = (p, parent.index(j)), size
        source[g] = best
    return MarginalPlan(sizes, axes, groups, tuple(block_group), order, tuple(source))


def _coalesced(plan: MarginalPlan, g: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The full tensor's shape with runs of consecutive summed (or kept) axes merged, the
    merged summed axes, and the kept-only shape with 1 for each summed run: few, long axes
    make numpy's reductions and broadcasts fast (many axes of size 2 make them crawl)."""
    keep = set(plan.groups[g])
    shape: list[int] = []
    kept_shape: list[int] = []
    summed: list[int] = []
    last: bool | None = None
    for j in plan.axes:
        k = j in keep
        if k == last:
            shape[-1] *= plan.sizes[j]
            if k:
                kept_shape[-1] *= plan.sizes[j]
        else:
            shape.append(plan.sizes[j])
            kept_shape.append(plan.sizes[j] if k else 1)
            if not k:
                summed.append(len(shape) - 1)
        last = k
    return tuple(shape), tuple(summed), tuple(kept_shape)


def _columns_first(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """``x`` (``(P,)`` or ``(P, m)``) as a C-contiguous ``(m, P)`` array: the domain axes
    innermost, so reductions run over long contiguous runs whatever ``m`` is."""
    if x.ndim == 1:
        return x.reshape(1, -1), True
    return np.ascontiguousarray(x.T), False


def _group_shape(plan: MarginalPlan, g: int, m: int) -> tuple[int, ...]:
    return (m, *(plan.sizes[j] for j in plan.groups[g]))


def _sum_out(t: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    """``t`` summed over ``axes`` (descending), one axis at a time as a product with a row of
    ones (BLAS): several times faster than ``t.sum(axis=...)`` over interleaved axes."""
    for a in axes:
        sh = t.shape
        lead, r, trail = math.prod(sh[:a]), sh[a], math.prod(sh[a + 1:])
        if trail == 1:
            t = t.reshape(lead, r) @ np.ones(r)
        else:
            t = np.matmul(np.ones((1, r)), t.reshape(lead, r, trail))
        t = t.reshape(*sh[:a], *sh[a + 1:])
    return t


def _group_marginals(plan: MarginalPlan, xt: np.ndarray) -> list[np.ndarray]:
    """Unweighted marginal tensors (shape ``(m, n_E...)``) of every group, ``xt`` ``(m, N)``."""
    m = xt.shape[0]
    done: dict[int, np.ndarray] = {}
    for g in plan.order:
        src = plan.source[g]
        if src is None:
            shape, summed, _ = _coalesced(plan, g)
            t = _sum_out(xt.reshape(m, *shape), [a + 1 for a in reversed(summed)])
            done[g] = t.reshape(_group_shape(plan, g, m))
        else:
            parent, pos = src
            done[g] = done[parent].sum(axis=pos + 1)  # plan.order puts every parent first
    return [done[g] for g in range(len(plan.groups))]


def _spread(plan: MarginalPlan, acc: list[np.ndarray | None], n: int, m: int) -> np.ndarray:
    """Adjoint of :func:`_group_marginals`: ``Σ_g`` (group tensor ``acc[g]`` broadcast back),
    as an ``(m, N)`` array. Consumes ``acc``."""
    full = np.zeros((m, n))
    for g in reversed(plan.order):
        a = acc[g]
        if a is None:
            continue
        src = plan.source[g]
        if src is None:
            shape, _, kept_shape = _coalesced(plan, g)
            view = full.reshape(m, *shape)
            view += a.reshape(m, *kept_shape)
        else:
            parent, pos = src
            expanded = np.expand_dims(a, pos + 1)
            into = acc[parent]
            if into is None:
                acc[parent] = np.broadcast_to(expanded, _group_shape(plan, parent, m)).copy()
            else:
                into += expanded
        acc[g] = None
    return full


def _finish(outt: np.ndarray, vector: bool) -> np.ndarray:
    return outt[0] if vector else outt.T


def apply(plan: MarginalPlan, weights: Sequence[float], offsets: Sequence[int],
          x: np.ndarray) -> np.ndarray:
    """``W x`` for ``x`` of shape ``(N,)`` or ``(N, m)``."""
    xt, vector = _columns_first(x)
    m = xt.shape[0]
    margs = _group_marginals(plan, xt)
    outt = np.empty((m, offsets[-1]))
    for b, g in enumerate(plan.block_group):
        lo, hi = offsets[b], offsets[b + 1]
        block = margs[g].reshape(m, hi - lo)
        w = weights[b]
        if w == 1.0:
            outt[:, lo:hi] = block
        else:
            np.multiply(block, w, out=outt[:, lo:hi])
    return _finish(outt, vector)


def apply_transpose(plan: MarginalPlan, weights: Sequence[float], offsets: Sequence[int],
                    y: np.ndarray, n: int) -> np.ndarray:
    """``Wᵀ y`` for ``y`` of shape ``(k,)`` or ``(k, m)``."""
    yt, vector = _columns_first(y)
    m = yt.shape[0]
    acc: list[np.ndarray | None] = [None] * len(plan.groups)
    for b, g in enumerate(plan.block_group):
        part = yt[:, offsets[b]:offsets[b + 1]] * weights[b]  # a new array
        shaped = part.reshape(_group_shape(plan, g, m))
        into = acc[g]
        if into is None:
            acc[g] = shaped
        else:
            into += shaped
    return _finish(_spread(plan, acc, n, m), vector)


def apply_gram(plan: MarginalPlan, weights: Sequence[float], x: np.ndarray, n: int) -> np.ndarray:
    """``WᵀW x = Σ_E (Σ_{S: eff(S)=E} w_S²) · spread(marginal_E(x))``."""
    xt, vector = _columns_first(x)
    m = xt.shape[0]
    coef = [0.0] * len(plan.groups)
    for b, g in enumerate(plan.block_group):
        coef[g] += weights[b] * weights[b]
    margs = _group_marginals(plan, xt)
    acc: list[np.ndarray | None] = [c * t for c, t in zip(coef, margs, strict=True)]
    return _finish(_spread(plan, acc, n, m), vector)


def dense(plan: MarginalPlan, weights: Sequence[float], offsets: Sequence[int], n: int) -> np.ndarray:
    """The ``(k, N)`` matrix: row ``offsets[b] + ravel_S(v_S)`` of column ``v`` is ``w_b``."""
    out = np.zeros((offsets[-1], n))
    coords = np.unravel_index(np.arange(n), plan.sizes) if n else ()
    cols = np.arange(n)
    rows_of: dict[int, np.ndarray] = {}
    for b, g in enumerate(plan.block_group):
        r = rows_of.get(g)
        if r is None:
            r = np.zeros(n, dtype=np.int64)
            for j in plan.groups[g]:
                r = r * plan.sizes[j] + coords[j]
            rows_of[g] = r
        out[offsets[b] + r, cols] = weights[b]
    return out
