"""Which answers of a marginal workload form which table (``postprocess``).

A marginal workload is a stack of blocks ``w_o · ⊗_{j∈S_o} I ⊗_{j∉S_o} 1ᵀ``
(``structured.workload_blocks``): block o answers the cells of the marginal table on the
attribute set ``S_o`` (C order, attribute 0 slowest), scaled by ``w_o``. Blocks with the same
attribute set answer the same table; post-processing works on the distinct tables
(:class:`MarginalLayout`), the answers are read back from them.

Fitting tables ``μ`` to the released answers ``y`` in least squares,

    Σ_o ‖w_o μ_{S_o} − y_o‖²  =  Σ_T c_T ‖μ_T − b_T‖² + const,
    c_T = Σ_{o: S_o = T} w_o²,   b_T = Σ_{o: S_o = T} w_o y_o / c_T,

so the answers' squared error is the tables' error weighted by ``c_T``
(:meth:`MarginalLayout.targets`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import PostprocessError

#: A table: its attribute set, strictly increasing attribute indices.
Attrs = tuple[int, ...]


@dataclass(frozen=True)
class MarginalLayout:
    """The distinct tables of a marginal workload and where each block's answers are.

    ``tables``: the distinct attribute sets, in order of first use; ``block_table[o]``: block
    o's table; ``block_weight[o]``: its weight ``w_o``; ``offsets``: the answers' offsets per
    block (length blocks + 1)."""

    sizes: tuple[int, ...]
    tables: tuple[Attrs, ...]
    block_table: tuple[int, ...]
    block_weight: tuple[float, ...]
    offsets: tuple[int, ...]

    @property
    def k(self) -> int:
        """The number of answers."""
        return self.offsets[-1]

    def shape(self, attrs: Sequence[int]) -> tuple[int, ...]:
        """The array shape of the table on ``attrs``."""
        return tuple(self.sizes[j] for j in attrs)

    def cells(self, attrs: Sequence[int]) -> int:
        return math.prod(self.shape(attrs))

    def targets(self, y: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """``(b_T, c_T)`` of the module docstring: each table's weighted mean of its blocks'
        answers (shaped as the table) and its weight."""
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.k,):
            raise PostprocessError(f"{y.size} released values for a workload of {self.k} answers")
        acc = [np.zeros(self.cells(T)) for T in self.tables]
        c = np.zeros(len(self.tables))
        for o, t in enumerate(self.block_table):
            w = self.block_weight[o]
            acc[t] += w * y[self.offsets[o]:self.offsets[o + 1]]
            c[t] += w * w
        return [(a / c[t]).reshape(self.shape(T)) for t, (T, a) in enumerate(zip(self.tables, acc,
                                                                                 strict=True))], c

    def answers(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        """The workload's answers ``w_o μ_{S_o}`` read from the tables."""
        out = np.empty(self.k, dtype=np.result_type(*[t.dtype for t in tables], np.float64))
        for o, t in enumerate(self.block_table):
            out[self.offsets[o]:self.offsets[o + 1]] = self.block_weight[o] * np.asarray(tables[t]).reshape(-1)
        return out


def marginal_layout(W: Any, sizes: Sequence[int]) -> MarginalLayout:
    """The layout of ``W`` over attribute sizes ``sizes``; :class:`PostprocessError` naming the
    first block that is not a marginal table (post-processing in the algebra of marginals
    serves marginal workloads only)."""
    from factorize.structured.blocks import StructureError
    from factorize.structured.workload_blocks import workload_blocks

    sizes = tuple(int(n) for n in sizes)
    try:
        blocks = workload_blocks(W, sizes)
    except StructureError as exc:
        raise PostprocessError(f"the workload is not a stack of Kronecker blocks over the domain's "
                               f"attributes ({exc})") from None
    index: dict[Attrs, int] = {}
    block_table, weights, offsets = [], [], [0]
    for o, b in enumerate(blocks):
        S = b.marginal_support
        if S is None:
            kinds = ", ".join(f.kind for f in b.factors)
            raise PostprocessError(f"workload block {o} is not a marginal table (its per-attribute "
                                   f"factors are {kinds}): post-processing in the algebra of "
                                   "marginals serves workloads whose every block is a marginal")
        block_table.append(index.setdefault(tuple(S), len(index)))
        weights.append(float(b.weight))
        offsets.append(offsets[-1] + math.prod(sizes[j] for j in S))
    return MarginalLayout(sizes, tuple(index), tuple(block_table), tuple(weights), tuple(offsets))


def marginal(table: np.ndarray, attrs: Attrs, onto: Attrs) -> np.ndarray:
    """The marginal of ``table`` (on ``attrs``) on the subset ``onto``, as an array over ``onto``."""
    axes = tuple(i for i, j in enumerate(attrs) if j not in onto)
    return table.sum(axis=axes) if axes else table
