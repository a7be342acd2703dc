"""Certified maximum of a sum of products over a product domain (``factorize.structured``).

The problem: for non-negative block weights ``w_b`` (b < B) and per-attribute tables
``c_j[v, b] ≥ 0`` (attribute j < d, value v < n_j), find

    M = max_{x ∈ Π_j [n_j]}  f(x),    f(x) = Σ_b w_b Π_j c_j[x_j, b].

It is the add/remove sensitivity of a union of Kronecker blocks (``structured.sensitivity``:
``c_j[v, b]`` a column norm of block b's factor on attribute j, 1 where the block sums j out).
The maximum of a sum of products is not separable, but f depends on ``x_j`` only through the
*tuple* ``c_j[x_j, :]``, and an attribute has few distinct tuples (identity, total and prefix
factors give 1 to n_j). The search, exact unless its work budget runs out:

1. **reduce**: per attribute, the distinct tuples, then only those no other tuple dominates
   componentwise (f is non-decreasing in every ``c``, so a dominated tuple never beats the
   one dominating it: dropping it keeps the maximum);
2. **incumbent**: coordinate ascent (f is linear in one attribute's tuple when the others are
   fixed) from the block-wise maximisers and the root's greedy choice — usually the optimum;
3. **branch and bound** over the attributes (fewest tuples first), depth-first in chunks:
   a partial assignment is bounded by ``Σ_b w_b Π_{assigned} c · Π_{unassigned} max_v c``
   and dropped when that bound does not exceed the incumbent;
4. **budget**: the search counts ``rows × B`` multiplications of its expansions; past
   ``WORK_BUDGET`` it stops, and the maximum of the incumbent and of the bounds of every
   partial assignment still open is a sound upper bound (at the root, the sum of per-block
   maxima). :attr:`ProductMax.exact` says which of the two the value is.

Floating point: every ``f`` and every bound is a sum of at most B products of at most d + 1
non-negative floats, evaluated in binary64 in some order; its exact value is at most
``computed·(1 + γ_{d+B+2}) + slack`` where the slack covers products that fall below the
normal range (an absolute error ≤ 2⁻¹⁰⁷⁵ per multiplication, carried through at most
d + 1 later factors, each ≤ ``max(1, max c)``). Pruning compares computed values only; the
returned value inflates the largest computed value kept (incumbent or open bound) that way,
so it is ≥ the exact maximum (a pruned assignment's leaves are ≤ its exact bound ≤ its
computed bound inflated ≤ the inflated incumbent). The inputs must themselves be certified
upper bounds of the quantities they stand for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from factorize.numerics import NumericRangeError, gamma, round_up

from .blocks import StructureError

#: Deterministic work budget of the exact search: Σ over expansions of (rows × B).
WORK_BUDGET = 1 << 26
#: Rows of one expansion (partial assignments × tuples), so memory stays ~CHUNK·B floats.
CHUNK_ELEMENTS = 1 << 20
#: Coordinate-ascent starts (block-wise maximisers beyond this many are skipped).
MAX_STARTS = 64
_HALF_SUBNORMAL = 2.0 ** -1075


@dataclass(frozen=True)
class ProductMax:
    """``value`` ≥ max_x f(x) (certified); ``exact``: the search completed, so ``value`` is the
    maximum up to the rounding allowance of the module docstring, attained at ``argmax`` (one
    value index per attribute); otherwise ``value`` is the open-bound fallback and ``argmax``
    the best cell found. ``work``: the multiplications counted against the budget."""

    value: float
    exact: bool
    argmax: tuple[int, ...]
    work: int


def _reduce(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(tuples, representative values)``: the distinct rows of ``table`` (n × B) that no other
    row dominates componentwise, each with the smallest value index carrying it."""
    cols, inverse = np.unique(table, axis=1, return_inverse=True)  # dominance on distinct columns
    rows, first = np.unique(cols, axis=0, return_index=True)
    keep = np.ones(rows.shape[0], dtype=bool)
    step = max(1, CHUNK_ELEMENTS // max(rows.shape[0] * rows.shape[1], 1))
    for lo in range(0, rows.shape[0], step):
        r = rows[lo:lo + step]
        ge = np.all(rows[None, :, :] >= r[:, None, :], axis=2)   # rows[t] ≥ r[i]
        gt = np.any(rows[None, :, :] > r[:, None, :], axis=2)
        keep[lo:lo + step] = ~np.any(ge & gt, axis=1)
    inverse = np.asarray(inverse).reshape(-1)
    return rows[keep][:, inverse], first[keep]


def _objective(weights: np.ndarray, tuples: list[np.ndarray], choice: Sequence[int]) -> float:
    p = weights.copy()
    for T, i in zip(tuples, choice, strict=True):
        p = p * T[i]
    return float(np.sum(p))


def _ascend(weights: np.ndarray, tuples: list[np.ndarray], choice: list[int]) -> list[int]:
    """Coordinate ascent: each attribute's best tuple given the others, until none moves."""
    d = len(tuples)
    for _ in range(4 * d + 4):
        moved = False
        for j in range(d):
            coef = weights.copy()
            for i in range(d):
                if i != j:
                    coef = coef * tuples[i][choice[i]]
            best = int(np.argmax(tuples[j] @ coef))
            if tuples[j][best] @ coef > tuples[j][choice[j]] @ coef:
                choice[j] = best
                moved = True
        if not moved:
            break
    return choice


def _starts(weights: np.ndarray, tuples: list[np.ndarray]) -> list[list[int]]:
    """The root's greedy choice and the block-wise maximisers of the heaviest blocks."""
    maxes = np.stack([T.max(axis=0) for T in tuples]) if tuples else np.ones((0, weights.size))
    root = weights * np.prod(maxes, axis=0)
    starts = []
    greedy = []
    for j, T in enumerate(tuples):
        rest = weights * np.prod(np.delete(maxes, j, axis=0), axis=0)
        greedy.append(int(np.argmax(T @ rest)))
    starts.append(greedy)
    for b in np.argsort(-root, kind="stable")[:MAX_STARTS]:
        s = [int(np.argmax(T[:, b])) for T in tuples]
        if s not in starts:
            starts.append(s)
    return starts


def product_max(weights: Sequence[float], tables: Sequence[np.ndarray], *,  # noqa: C901 (counted allow-list)
                budget: int = WORK_BUDGET) -> ProductMax:
    """The certified ``max_x Σ_b w_b Π_j tables[j][x_j, b]`` (module docstring). ``weights``:
    B finite non-negative floats; ``tables[j]``: an ``n_j × B`` array of finite non-negative
    floats (n_j ≥ 1)."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    B, d = w.size, len(tables)
    if B == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise NumericRangeError("product_max needs at least one finite non-negative weight")
    raw = [np.asarray(T, dtype=np.float64) for T in tables]
    for T in raw:
        if T.ndim != 2 or T.shape[1] != B or T.shape[0] < 1:
            raise StructureError(f"each table must be n_j × {B} with n_j ≥ 1, got {T.shape}")
        if not np.all(np.isfinite(T)) or np.any(T < 0):
            raise NumericRangeError("product_max needs finite non-negative tables")
    if d == 0:  # one cell: the sum of the weights (correctly rounded)
        return ProductMax(round_up(math.fsum(w.tolist()), 1), True, (), 0)
    reduced = [_reduce(T) for T in raw]
    reps = [r for _, r in reduced]
    # the rounding allowance (module docstring): absolute slack from the magnitudes
    big = [max(1.0, float(T.max())) for T, _ in reduced] + [max(1.0, float(w.max()))]
    slack = (d + 1) * B * _HALF_SUBNORMAL
    for x in big:
        slack *= x
    if not math.isfinite(slack):
        raise NumericRangeError("product_max: the tables' magnitudes overflow the rounding allowance")
    # attributes with one tuple folded into the weights, blocks then alike merged (fsum)
    multi = [j for j in range(d) if reduced[j][0].shape[0] > 1]
    folded = w.copy()
    for j in range(d):
        if j not in multi:
            folded = folded * reduced[j][0][0]
    key = np.concatenate([reduced[j][0] for j in multi], axis=0) if multi else np.zeros((1, B))
    _, first, inverse = np.unique(key, axis=1, return_index=True, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    w = np.array([math.fsum(folded[inverse == k].tolist()) for k in range(first.size)])
    tuples = [reduced[j][0][:, first] for j in multi]
    B, dm = w.size, len(multi)
    # a sum of B products of ≤ d + 1 factors, one merging sum: γ_{d+B+3} (module docstring)
    g = gamma(d + B + 3)

    def certified(x: float) -> float:
        return round_up(x * (1.0 + g) + slack * (1.0 + g), 3)

    if dm == 0:  # every cell alike
        return ProductMax(certified(math.fsum(w.tolist())), True, tuple(int(r[0]) for r in reps), 0)
    # 2. incumbent
    best_choice: list[int] = []
    best = -1.0
    for s in _starts(w, tuples):
        c = _ascend(w, tuples, list(s))
        v = _objective(w, tuples, c)
        if v > best:
            best, best_choice = v, c
    work = 0  # the budget counts the branch and bound (the ascent is bounded by construction)
    # 3. branch and bound, attributes with the fewest tuples first
    order = sorted(range(dm), key=lambda j: (tuples[j].shape[0], j))
    suffix = [np.ones(B) for _ in range(dm + 1)]  # suffix[k] = Π_{l ≥ k} max over order[l]
    for k in range(dm - 1, -1, -1):
        suffix[k] = suffix[k + 1] * tuples[order[k]].max(axis=0)
    stack: list[tuple[int, np.ndarray, np.ndarray]] = [(0, w[None, :], np.zeros((1, 0), dtype=np.int64))]
    exact = True
    while stack:
        level, P, idx = stack.pop()
        T = tuples[order[level]]
        u = T.shape[0]
        if work + P.shape[0] * u * B > budget:
            stack.append((level, P, idx))
            exact = False
            break
        work += P.shape[0] * u * B
        Q = (P[:, None, :] * T[None, :, :]).reshape(-1, B)
        ub = Q @ suffix[level + 1]
        keep = np.flatnonzero(ub > best)
        if keep.size == 0:
            continue
        new_idx = np.concatenate([np.repeat(idx, u, axis=0), np.tile(np.arange(u), P.shape[0])[:, None]],
                                 axis=1)[keep]
        Q, ub = Q[keep], ub[keep]
        if level + 1 == dm:
            i = int(np.argmax(ub))
            best = float(ub[i])
            best_choice = [0] * dm
            for k, j in enumerate(order):
                best_choice[j] = int(new_idx[i, k])
            continue
        rank = np.argsort(ub, kind="stable")  # ascending: the best chunk is pushed last
        Q, new_idx = Q[rank], new_idx[rank]
        step = max(1, CHUNK_ELEMENTS // max(tuples[order[level + 1]].shape[0] * B, 1))
        for lo in range(0, Q.shape[0], step):
            stack.append((level + 1, Q[lo:lo + step], new_idx[lo:lo + step]))
    top = best
    for level, P, _ in stack:  # the open assignments' bounds (fallback)
        top = max(top, float(np.max(P @ suffix[level])))
    cell = [int(r[0]) for r in reps]
    for i, j in enumerate(multi):
        cell[j] = int(reps[j][best_choice[i]])
    argmax = tuple(cell)
    return ProductMax(certified(top), exact and not stack, argmax, int(work))
