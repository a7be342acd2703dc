"""A family of (weighted) marginals over a product domain, held as one object.

:class:`MarginalWorkload` stores the attribute sizes ``n_0, ..., n_{d-1}``, the attribute
subsets ``S_0, S_1, ...`` (row order; repeats allowed) and positive weights ``w_S``. Its
matrix is the stack of the blocks

    ``B_S = w_S · ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}``   (``Π_{j∈S} n_j`` rows, ``N = Π_j n_j`` columns)

-- block ``S`` is the contingency table of the attributes in ``S`` (C order over ``S``)
times ``w_S``. It is the same matrix, with the same fingerprint, as the
``VStackWorkload`` of ``KronWorkload`` blocks (``[DenseWorkload([[w_S]]), I/1ᵀ factors]``
when ``w_S ≠ 1``), but costs ``O(#blocks · |S|)`` memory: the Kronecker blocks are built
only when :attr:`MarginalWorkload.blocks` is read.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from . import _marginal_hashing
from . import _marginal_kernels as kernels
from .base import DEFAULT_MAX_DENSE_ENTRIES, GramWorkload, Workload
from .builders import identity, sizes_of, total
from .errors import WorkloadError
from .explicit import DenseWorkload
from .structured import KronWorkload, VStackWorkload

__all__ = ["MarginalWorkload", "MarginalGram", "MarginalStructure", "MAX_MARGINAL_BLOCKS", "check_sizes"]

#: Most blocks one :class:`MarginalWorkload` may have. Each block costs a subset tuple, a
#: row offset and a weight (about 130 bytes for a 3-way subset), so 2^24 blocks stay near
#: 2 GB; its fingerprint hashes ``65·d`` bytes per block.
MAX_MARGINAL_BLOCKS: int = 1 << 24

#: What :meth:`MarginalWorkload.marginal_structure` returns: sizes, subsets, weights.
MarginalStructure = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[float, ...]]


def check_sizes(sizes: Any) -> tuple[int, ...]:
    """Attribute sizes as positive ints, each small enough for its ``I_n``/``1ᵀ_n`` leaf."""
    sizes_t = sizes_of(sizes)
    for j, n in enumerate(sizes_t):
        if n > DEFAULT_MAX_DENSE_ENTRIES:
            raise WorkloadError(f"attribute {j} has size {n}, above the limit "
                                f"{DEFAULT_MAX_DENSE_ENTRIES} of one identity/total factor")
    return sizes_t


def _check_weight(w: Any, where: str) -> float:
    if isinstance(w, bool) or not isinstance(w, numbers.Real):
        raise WorkloadError(f"{where} must be a real number, got {type(w).__name__}")
    value = float(w)
    if not math.isfinite(value) or value <= 0.0:
        raise WorkloadError(f"{where} must be finite and > 0, got {value!r}")
    return value


def _check_subset(s: Any, d: int, b: int) -> tuple[int, ...]:
    try:
        t = tuple(s)
    except TypeError:
        raise WorkloadError(f"subset {b} must be a sequence of attribute indices, got "
                            f"{type(s).__name__}") from None
    if any(isinstance(j, bool) or not isinstance(j, numbers.Integral) for j in t):
        raise WorkloadError(f"subset {b} must hold integer attribute indices, got {t!r}")
    t = tuple(int(j) for j in t)
    if any(not 0 <= j < d for j in t) or any(a >= c for a, c in zip(t, t[1:], strict=False)):
        raise WorkloadError(f"subset {b} = {t} must be strictly increasing attribute indices in "
                            f"0..{d - 1}")
    return t


class MarginalWorkload(VStackWorkload):
    """Stack of weighted marginal blocks ``B_S = w_S ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1ᵀ_{n_j}``.

    Shape ``(Σ_S Π_{j∈S} n_j, N = Π_j n_j)`` (Python ints; ``N`` may be huge -- nothing of
    size ``N`` is allocated except by ``matvec``/``rmatvec``/``dense``). ``W h`` restricted
    to block ``S`` is ``w_S · h.reshape(sizes).sum(axis=others)`` raveled in C order over
    ``S``; ``Wᵀ y`` broadcasts each block's ``w_S · y_S`` back along the other axes and sums.
    Same matrix and :meth:`fingerprint` as the ``VStackWorkload`` of :attr:`blocks`.

    Parameters
    ----------
    sizes:
        Attribute sizes (a :class:`Domain` or positive ints).
    subsets:
        Strictly increasing attribute-index tuples, in block (row) order; repeats allowed.
    weights:
        One finite weight > 0 per subset (default all ``1.0``).
    """

    def __init__(self, sizes: Any, subsets: Sequence[Sequence[int]],
                 weights: Sequence[float] | None = None, spec: str | None = None) -> None:
        sizes_t = check_sizes(sizes)
        d = len(sizes_t)
        if isinstance(subsets, (str, bytes)):
            raise WorkloadError("subsets must be a sequence of attribute-index tuples")
        try:
            count = len(subsets)
        except TypeError:
            raise WorkloadError(f"subsets must be a sequence, got {type(subsets).__name__}") from None
        self._check_count(count)
        subs = tuple(_check_subset(s, d, b) for b, s in enumerate(subsets))
        if weights is None:
            ws = (1.0,) * count
        else:
            if isinstance(weights, (str, bytes)) or len(weights) != count:
                raise WorkloadError(f"weights must be a sequence of {count} numbers (one per subset)")
            ws = tuple(_check_weight(w, f"weight {b}") for b, w in enumerate(weights))
        self._setup(sizes_t, subs, ws, spec)

    @staticmethod
    def _check_count(count: int) -> None:
        if count < 1:
            raise WorkloadError("a marginal workload needs at least one subset")
        if count > MAX_MARGINAL_BLOCKS:
            raise WorkloadError(f"{count} marginal blocks exceed the limit of {MAX_MARGINAL_BLOCKS} "
                                "blocks of one marginal workload")

    @classmethod
    def _trusted(cls, sizes: tuple[int, ...], subsets: tuple[tuple[int, ...], ...],
                 weights: tuple[float, ...], spec: str | None = None) -> MarginalWorkload:
        """Build from already validated parts (builders, stacking, scaling)."""
        cls._check_count(len(subsets))
        obj = cls.__new__(cls)
        obj._setup(sizes, subsets, weights, spec)
        return obj

    def _setup(self, sizes: tuple[int, ...], subsets: tuple[tuple[int, ...], ...],
               weights: tuple[float, ...], spec: str | None) -> None:
        Workload.__init__(self, spec)
        self._sizes = sizes
        self._subsets = subsets
        self._weights = weights
        rows_of: dict[tuple[int, ...], int] = {}
        rows = []
        for S in subsets:
            r = rows_of.get(S)
            if r is None:
                r = rows_of[S] = math.prod(sizes[j] for j in S)
            rows.append(r)
        self._offsets = (0, *itertools.accumulate(rows))
        self._shape = (self._offsets[-1], math.prod(sizes))
        self._lazy_blocks: tuple[Workload, ...] | None = None
        self._plan: kernels.MarginalPlan | None = None

    # -- structure ---------------------------------------------------------------
    @property
    def sizes(self) -> tuple[int, ...]:
        """Attribute sizes ``n_0, ..., n_{d-1}``."""
        return self._sizes

    @property
    def subsets(self) -> tuple[tuple[int, ...], ...]:
        """The subsets ``S`` in block (row) order."""
        return self._subsets

    @property
    def weights(self) -> tuple[float, ...]:
        """Block weights ``w_S`` (> 0), one per subset."""
        return self._weights

    @property
    def num_blocks(self) -> int:
        """Number of blocks (subsets)."""
        return len(self._subsets)

    def marginal_structure(self) -> MarginalStructure:
        """``(sizes, subsets, weights)``: the whole description of the matrix (a hook other
        packages call, duck-typed, to skip the Kronecker blocks)."""
        return self._sizes, self._subsets, self._weights

    def block_rows(self, b: int) -> int:
        """Rows of block ``b``: ``Π_{j∈S_b} n_j``."""
        return self._offsets[b + 1] - self._offsets[b]

    @property
    def blocks(self) -> tuple[Workload, ...]:
        """The Kronecker blocks (built on first access, then cached; costly for big families).

        Block ``S`` is ``KronWorkload(F_0, ..., F_{d-1})`` with ``F_j = I_{n_j}`` for ``j ∈ S``
        and ``1ᵀ_{n_j}`` otherwise (one shared leaf per size), preceded by the factor
        ``DenseWorkload([[w_S]])`` when ``w_S ≠ 1``.
        """
        if self._lazy_blocks is None:
            ident = {n: identity(n) for n in set(self._sizes)}
            tot = {n: total(n) for n in set(self._sizes)}
            all_totals = [tot[n] for n in self._sizes]
            scale: dict[float, Workload] = {}
            out: list[Workload] = []
            n = self._shape[1]
            for b, (S, w) in enumerate(zip(self._subsets, self._weights, strict=True)):
                factors: list[Workload] = list(all_totals)
                for j in S:
                    factors[j] = ident[self._sizes[j]]
                if w != 1.0:
                    if w not in scale:
                        scale[w] = DenseWorkload([[w]])
                    factors.insert(0, scale[w])
                out.append(KronWorkload._trusted(tuple(factors), (self.block_rows(b), n)))
            self._lazy_blocks = tuple(out)
        return self._lazy_blocks

    def _flat_blocks(self) -> list[Workload]:
        return list(self.blocks)

    def _repr_extra(self) -> str:
        ways = sorted({len(S) for S in self._subsets})
        weighted = any(w != 1.0 for w in self._weights)
        return (f"sizes={'x'.join(map(str, self._sizes))}, {self.num_blocks} blocks, "
                f"ways={ways}{', weighted' if weighted else ''}")

    # -- combination -------------------------------------------------------------
    def scaled(self, factor: float) -> MarginalWorkload:
        """This family with every weight multiplied by ``factor`` (finite, > 0)."""
        f = _check_weight(factor, "scale factor")
        ws = tuple(_check_weight(w * f, "a scaled weight") for w in self._weights)
        return MarginalWorkload._trusted(self._sizes, self._subsets, ws)

    @staticmethod
    def stack(families: Sequence[MarginalWorkload]) -> MarginalWorkload:
        """A new family with the blocks of ``families`` in order (same sizes required): the
        matrix and fingerprint of ``VStackWorkload(families)``."""
        fams = list(families)
        if not fams or not all(isinstance(f, MarginalWorkload) for f in fams):
            raise WorkloadError("stack() needs at least one MarginalWorkload, and only those")
        sizes = fams[0].sizes
        for f in fams[1:]:
            if f.sizes != sizes:
                raise WorkloadError(f"cannot stack marginal families over different sizes "
                                    f"{'x'.join(map(str, sizes))} and {'x'.join(map(str, f.sizes))}")
        subs = tuple(itertools.chain.from_iterable(f.subsets for f in fams))
        ws = tuple(itertools.chain.from_iterable(f.weights for f in fams))
        return MarginalWorkload._trusted(sizes, subs, ws)

    # -- products ------------------------------------------------------------------
    def _get_plan(self) -> kernels.MarginalPlan:
        if self._plan is None:
            self._plan = kernels.make_plan(self._sizes, self._subsets)
        return self._plan

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        return kernels.apply(self._get_plan(), self._weights, self._offsets, x)

    def _rmatvec(self, y: np.ndarray) -> np.ndarray:
        return kernels.apply_transpose(self._get_plan(), self._weights, self._offsets, y,
                                       self._shape[1])

    def gram(self) -> Workload:
        """``WᵀW = Σ_S w_S² ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1_{n_j}1ᵀ_{n_j}``: a lazy :class:`MarginalGram`."""
        return MarginalGram(self)

    def _dense(self, max_entries: int) -> np.ndarray:
        return kernels.dense(self._get_plan(), self._weights, self._offsets, self._shape[1])

    # -- fingerprint ---------------------------------------------------------------
    def _flat_block_fingerprints(self) -> list[str]:
        return list(self._iter_block_fingerprints())

    def _iter_block_fingerprints(self) -> Iterator[str]:
        """Each block's digest, as ``KronWorkload(block factors).fingerprint()`` gives it."""
        return _marginal_hashing.block_fingerprints(self._sizes, self._subsets, self._weights,
                                                   self._offsets, self._shape[1])

    def _compute_fingerprint(self) -> str:
        return _marginal_hashing.stack_fingerprint(self._shape, len(self._subsets),
                                                   self._iter_block_fingerprints())


class MarginalGram(GramWorkload):
    """``WᵀW = Σ_S w_S² ⊗_{j∈S} I_{n_j} ⊗_{j∉S} 1_{n_j}1ᵀ_{n_j}`` of a :class:`MarginalWorkload`.

    Lazy (shape ``(N, N)``, symmetric): ``matvec`` computes each distinct marginal of ``x``
    once, scales it by the summed squared weights of its blocks and broadcasts it back.
    Fingerprint and dense form as :class:`GramWorkload`.
    """

    def __init__(self, base: MarginalWorkload, spec: str | None = None) -> None:
        if not isinstance(base, MarginalWorkload):
            raise WorkloadError(f"MarginalGram expects a MarginalWorkload, got {type(base).__name__}")
        super().__init__(base, spec)
        self._family = base  # the same object as ``_base``, with its marginal type

    def _matvec(self, x: np.ndarray) -> np.ndarray:
        base = self._family
        return kernels.apply_gram(base._get_plan(), base.weights, x, self._shape[1])
