"""Which answers of a workload of Kronecker blocks form which table (``postprocess``).

A workload of Kronecker blocks (``structured.workload_blocks``) is a stack of blocks
``w_o · ⊗_j F_{o,j}`` with, on each attribute, the identity, the all-ones row ``1ᵀ`` (the
attribute summed out) or a small explicit matrix (a prefix, range or parity factor). Block o
reads the records only through the marginal table ``m_{S_o}`` on its *support* ``S_o`` (the
attributes whose factor is not ``1ᵀ``):

    y_o = w_o · (⊗_{j∈S_o} F_{o,j}) m_{S_o}      (C order, attribute 0 slowest).

Where every factor has full column rank (identity, prefix, all ranges, Hadamard) the block's
answers determine that marginal, ``m_{S_o} = (⊗_j F_{o,j}⁺) y_o / w_o``, computed factor by
factor (one small pseudo-inverse per attribute, never an object over the domain). A factor
without full column rank (a *grouping* of values, ``G_{gv} = 1`` when value v is in group g, or
windows that tile the values) is served when the all-ones row lies in its row space,
``𝟙ᵀ = aᵀF`` (:func:`_factor`): the block then determines its table only up to F's null space,
but it determines the table's total, ``𝟙ᵀF⁺y = aᵀFF⁺y`` with mean ``aᵀFm = 𝟙ᵀm`` (FF⁺ the
projection onto F's range), so the release's total n̂ stays an unbiased least-squares figure;
the fit below uses the block exactly, through F, and its answers are read back through F from
the one fitted table. A factor whose row space misses 𝟙 (ranges of one width that do not tile
the values) leaves even the total undetermined and is refused. So
post-processing works on the distinct support tables (:class:`MarginalLayout`): each table's
estimate is the weighted mean of its blocks' estimates, and every answer is read back through
its block's factors — prefix sums and ranges of non-negative integer tables are non-negative
integers, and every block reads one table per support, so a cell requested twice has one value
and every table has the tables' total.

The answers' least squares. Fitting tables μ to the released answers y,

    f(μ) = Σ_o ‖w_o G_o μ_{S_o} − y_o‖²,   G_o = ⊗_{j∈S_o} F_{o,j}

(:meth:`MarginalLayout.gram` applies its Hessian's half ``Σ_o w_o² G_oᵀ G_o`` table by
table, :meth:`MarginalLayout.adjoint` gives ``Σ_o w_o G_oᵀ y_o``). Where every block is a
marginal (identity factors: :attr:`MarginalLayout.diagonal`) it is
``Σ_T c_T ‖μ_T − b_T‖² + const`` with

    c_T = Σ_{o: S_o = T} w_o²,   b_T = Σ_{o: S_o = T} w_o y_o / c_T;

otherwise those are its scalar approximation (:meth:`MarginalLayout.targets`): block o's
estimate ``m̂_o = G_o⁺ y_o / w_o`` of its table has mean per-cell variance
``v_o = Π_{j∈S_o} ‖F_{o,j}⁺‖_F² / n_j / w_o²`` for answers of unit variance (1 / w_o² for a
marginal block), and ``c_T = Σ_o 1 / v_o``, ``b_T = Σ_o m̂_o / v_o / c_T`` — the tables'
inverse-variance combination. Post-processing minimises f itself (``postprocess.nonneg``):
in the metric of the table alone a CDF's cells are fitted one by one, and the drift of their
prefix sums — each cell pushed up where it was clipped at zero — returns in every answer of
the CDF (on the six-attribute Adult job of ``benchmarks.suites.tables``, the table-metric fit
multiplied the CDF's squared error by 8 and the total by 2; the answers' fit lowers both).
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

#: Largest ``|M⁺M𝟙 − 𝟙|`` for which a rank-deficient factor counts as determining the total.
ROW_SPACE_TOL = 1e-9


@dataclass(frozen=True)
class Factor:
    """A block's explicit factor on one support attribute: the matrix F (k × n, of full column
    rank or with 𝟙ᵀ in its row space), its pseudo-inverse F⁺ and ``‖F⁺‖_F² / n`` (the variance
    factor of the module docstring; for a rank-deficient F, that of the estimate F⁺y of the
    table's projection onto F's row space)."""

    matrix: np.ndarray
    pinv: np.ndarray
    variance: float


@dataclass(frozen=True)
class MarginalLayout:
    """The distinct support tables of a workload and where each block's answers are.

    ``tables``: the distinct supports, in order of first use; ``block_table[o]``: block o's
    table; ``block_weight[o]``: its weight ``w_o``; ``block_factors[o]``: its factor per
    attribute of its table (None: the identity); ``offsets``: the answers' offsets per block
    (length blocks + 1)."""

    sizes: tuple[int, ...]
    tables: tuple[Attrs, ...]
    block_table: tuple[int, ...]
    block_weight: tuple[float, ...]
    block_factors: tuple[tuple[Factor | None, ...], ...]
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

    def block_shape(self, o: int) -> tuple[int, ...]:
        """Block o's answers as an array: one axis per attribute of its table."""
        T = self.tables[self.block_table[o]]
        return tuple(self.sizes[j] if f is None else int(f.matrix.shape[0])
                     for j, f in zip(T, self.block_factors[o], strict=True))

    def targets(self, y: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """``(b_T, c_T)`` of the module docstring: each table's inverse-variance mean of its
        blocks' estimates (shaped as the table) and its weight (exact for marginal blocks)."""
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.k,):
            raise PostprocessError(f"{y.size} released values for a workload of {self.k} answers")
        acc = [np.zeros(self.shape(T)) for T in self.tables]
        c = np.zeros(len(self.tables))
        for o, t in enumerate(self.block_table):
            w = self.block_weight[o]
            v = math.prod(f.variance for f in self.block_factors[o] if f is not None) / (w * w)
            est = _along_axes(y[self.offsets[o]:self.offsets[o + 1]].reshape(self.block_shape(o)),
                              [None if f is None else f.pinv for f in self.block_factors[o]]) / w
            acc[t] += est / v
            c[t] += 1.0 / v
        return [a / c[t] for t, a in enumerate(acc)], c

    @property
    def diagonal(self) -> bool:
        """Every block a marginal (identity factors): the answers' least squares is the tables'
        c-weighted one (module docstring)."""
        return all(f is None for fs in self.block_factors for f in fs)

    def adjoint(self, y: np.ndarray) -> list[np.ndarray]:
        """``Σ_o w_o G_oᵀ y_o`` per table (module docstring)."""
        out = [np.zeros(self.shape(T)) for T in self.tables]
        for o, t in enumerate(self.block_table):
            out[t] += self.block_weight[o] * _along_axes(
                np.asarray(y[self.offsets[o]:self.offsets[o + 1]], dtype=np.float64).reshape(self.block_shape(o)),
                [None if f is None else f.matrix.T for f in self.block_factors[o]])
        return out

    def gram(self, tables: Sequence[np.ndarray]) -> list[np.ndarray]:
        """``Σ_o w_o² G_oᵀ G_o μ_{S_o}`` per table (module docstring)."""
        out = [np.zeros(self.shape(T)) for T in self.tables]
        for o, t in enumerate(self.block_table):
            fs = self.block_factors[o]
            a = _along_axes(np.asarray(tables[t], dtype=np.float64), [None if f is None else f.matrix for f in fs])
            out[t] += self.block_weight[o] ** 2 * _along_axes(a, [None if f is None else f.matrix.T for f in fs])
        return out

    def answers(self, tables: Sequence[np.ndarray]) -> np.ndarray:
        """The workload's answers ``w_o (⊗_j F_{o,j}) μ_{S_o}`` read from the tables (integer
        tables through integer factors give integers, up to the weight)."""
        out = np.empty(self.k, dtype=np.result_type(*[t.dtype for t in tables], np.float64))
        for o, t in enumerate(self.block_table):
            mats = [None if f is None else f.matrix for f in self.block_factors[o]]
            x = np.asarray(tables[t])
            if any(m is not None for m in mats):
                x = _along_axes(x.astype(np.float64), mats)
            out[self.offsets[o]:self.offsets[o + 1]] = self.block_weight[o] * x.reshape(-1)
        return out


def _along_axes(x: np.ndarray, mats: Sequence[np.ndarray | None]) -> np.ndarray:
    """``(⊗_i M_i) x`` for x shaped one axis per factor (None: the identity on that axis)."""
    for i, M in enumerate(mats):
        if M is not None:
            x = np.moveaxis(np.tensordot(M, x, axes=(1, i)), 0, i)
    return x


def _factor(M: np.ndarray, cache: dict[bytes, Factor]) -> Factor | None:
    """The :class:`Factor` of ``M`` (memoized by content): M of full column rank, or with the
    all-ones row in its row space (``‖M⁺M𝟙 − 𝟙‖_∞ ≤`` :data:`ROW_SPACE_TOL`; module docstring);
    else None."""
    key = np.ascontiguousarray(M).tobytes() + str(M.shape).encode()
    if key not in cache:
        k, n = M.shape
        if k == 0 or n == 0 or not np.any(M):
            return None
        pinv = np.linalg.pinv(M)
        s = np.linalg.svd(M, compute_uv=False)
        full = k >= n and s[-1] > max(k, n) * np.finfo(np.float64).eps * s[0]
        ones = np.ones(n)
        if not full and float(np.max(np.abs(pinv @ (M @ ones) - ones))) > ROW_SPACE_TOL:
            return None
        cache[key] = Factor(M, pinv, float(np.sum(pinv * pinv)) / n)
    return cache[key]


def marginal_layout(W: Any, sizes: Sequence[int]) -> MarginalLayout:
    """The layout of ``W`` over attribute sizes ``sizes``; :class:`PostprocessError` naming the
    first block whose answers determine neither the marginal table they are read from nor its
    total (a factor without full column rank whose row space misses 𝟙, e.g. ranges of one width
    that do not tile the values) or a workload
    that is not a stack of Kronecker blocks over the attributes."""
    from factorize.structured.blocks import StructureError
    from factorize.structured.workload_blocks import workload_blocks

    sizes = tuple(int(n) for n in sizes)
    try:
        blocks = workload_blocks(W, sizes)
    except StructureError as exc:
        raise PostprocessError(f"the workload is not a stack of Kronecker blocks over the domain's "
                               f"attributes ({exc})") from None
    index: dict[Attrs, int] = {}
    cache: dict[bytes, Factor] = {}
    block_table, weights, factors, offsets = [], [], [], [0]
    for o, b in enumerate(blocks):
        S = b.marginal_support
        if S is not None:
            ops: tuple[Factor | None, ...] = (None,) * len(S)
        else:
            support: list[int] = []
            fs: list[Factor | None] = []
            for j, f in enumerate(b.factors):
                if f.kind == "total" or (f.kind == "identity" and f.n == 1):
                    continue
                support.append(j)
                if f.kind == "identity":
                    fs.append(None)
                    continue
                op = _factor(f.explicit, cache)
                if op is None:
                    k, n = f.explicit.shape
                    raise PostprocessError(
                        f"workload block {o}'s factor on attribute {j} ({k}×{n}) does not have full "
                        "column rank and its rows do not sum to the all-ones row, so its answers "
                        "determine neither the marginal table they are read from nor its total: "
                        "post-processing fits marginal tables and serves blocks whose factors are "
                        "identities, totals, of full column rank (prefix, ranges) or groupings of "
                        "the values")
                fs.append(op)
            S, ops = tuple(support), tuple(fs)
        block_table.append(index.setdefault(tuple(S), len(index)))
        weights.append(float(b.weight))
        factors.append(ops)
        offsets.append(offsets[-1] + math.prod(sizes[j] if f is None else int(f.matrix.shape[0])
                                               for j, f in zip(S, ops, strict=True)))
    if offsets[-1] != int(W.shape[0]):
        raise PostprocessError(f"the workload's blocks have {offsets[-1]} answers, the workload "
                               f"{int(W.shape[0])}")
    return MarginalLayout(sizes, tuple(index), tuple(block_table), tuple(weights), tuple(factors),
                          tuple(offsets))


def marginal(table: np.ndarray, attrs: Attrs, onto: Attrs) -> np.ndarray:
    """The marginal of ``table`` (on ``attrs``) on the subset ``onto``, as an array over ``onto``."""
    axes = tuple(i for i, j in enumerate(attrs) if j not in onto)
    return table.sum(axis=axes) if axes else table


def broadcast(values: np.ndarray, onto: Attrs, attrs: Attrs) -> np.ndarray:
    """``values`` (a table on ``onto`` ⊆ ``attrs``) shaped to broadcast over a table on ``attrs``
    (the inverse direction of :func:`marginal`)."""
    return values.reshape(tuple(values.shape[onto.index(j)] if j in onto else 1 for j in attrs))
