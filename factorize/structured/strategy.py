"""A union of Kronecker blocks as a strategy: ``A = [s_b · ⊗_j F_{b,j}]_b`` (``structured``).

Operations never form an N-column object except :meth:`StructuredStrategy.dense` and
:meth:`~StructuredStrategy.matvec` (small domains, tests and the dense cross-checks):

* measurement from the records' marginal tables: block b needs only ``m_{support(b)}``,
  dense, or, for a table of more than ``engines.marginal_tables.DENSE_TABLE_CELLS`` cells, the
  records' distinct cells on the support and their counts (``engines.SparseTable``, measured
  by ``privacy.lattice.lattice_image_sparse``: N is never formed);
  :meth:`~StructuredStrategy.measure` computes ``round(Ã_b m / γ)`` exactly per block
  (``privacy.lattice.lattice_image``: certified float evaluation with an exact multi-modular
  fallback), the lattice release of docs/math.md §6.5;
* :meth:`~StructuredStrategy.measured`: the strategy the executor measures, every factor and
  scale truncated to 53 bits below its largest entry (``privacy.lattice.quantize``, idempotent:
  a plan stores measured factors, and the verifier quantizes again);
* the marginal of a dense histogram on a support (``h`` reshaped to the domain tensor,
  attribute 0 slowest, other axes summed out).

A block may be *mixed* (``structured.mixing``): a dense matrix over the class tuples of a group
of attributes after their partition factors; its products, exact measurement and dense form
are that module's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from factorize.kron import kron_matvec, kron_matvec_sparse

from .blocks import KronBlock, StructureError, check_arrays

if TYPE_CHECKING:
    from factorize.engines.marginal_tables import SparseTable

#: Largest N for the dense forms (tests, dense cross-checks, exact small-domain sensitivity).
MAX_DENSE_COLUMNS = 1 << 16


class StructuredStrategy:
    """``A = [s_b · ⊗_j F_{b,j}]_b`` over attribute sizes ``sizes`` (module docstring).

    ``family``: the structured family's name (``structured.families.CODECS``: how the plan
    encodes it; the algebra is the same). Rows of block b: ``Π_{j∈support} rows(F_{b,j})``, blocks stacked in order.
    """

    def __init__(self, sizes: Sequence[int], blocks: Sequence[KronBlock],
                 arrays: Mapping[str, np.ndarray], family: str) -> None:
        self.sizes = tuple(int(n) for n in sizes)
        self.blocks = tuple(blocks)
        self.arrays = dict(arrays)
        self.family = family
        self._measured: StructuredStrategy | None = None
        if not self.blocks:
            raise StructureError("a strategy needs at least one block")
        d = len(self.sizes)
        rows = []
        for i, b in enumerate(self.blocks):
            if b.support and not (b.support[0] >= 0 and b.support[-1] < d):
                raise StructureError(f"block {i} names an attribute outside the domain (d={d})")
            check_arrays(self.arrays, b.names, f"strategy block {i}")
            for j, name in zip(b.support, b.names, strict=True):
                if self.arrays[name].shape[1] != self.sizes[j]:
                    raise StructureError(f"factor {name!r} has {self.arrays[name].shape[1]} columns, "
                                         f"attribute {j} has {self.sizes[j]} values")
            if b.mix is not None:
                from .mixing import check_block

                rows.append(check_block(b, self.arrays, i))
                continue
            rows.append(math.prod(self.arrays[n].shape[0] for n in b.names))
        self.block_rows = tuple(rows)
        off = [0]
        for r in rows:
            off.append(off[-1] + r)
        self.offsets = tuple(off)

    # -- shape ------------------------------------------------------------------------------
    @property
    def m(self) -> int:
        """Number of measurements (rows)."""
        return self.offsets[-1]

    @property
    def N(self) -> int:
        return math.prod(self.sizes)

    @property
    def d(self) -> int:
        return len(self.sizes)

    def factors(self, b: int) -> list[np.ndarray]:
        """``[[s_b]]`` followed by the block's stored factors (Kronecker order) — a plain
        block's; a mixed block has no such form (``structured.mixing``)."""
        blk = self.blocks[b]
        if blk.mix is not None:
            raise StructureError(f"block {b} is mixed: it is not one Kronecker product")
        return [np.array([[blk.scale]])] + [self.arrays[n] for n in blk.names]

    def supports(self) -> list[tuple[int, ...]]:
        """The distinct supports, in order of first use: the marginal tables to measure."""
        seen: dict[tuple[int, ...], None] = {}
        for b in self.blocks:
            seen.setdefault(b.support, None)
        return list(seen)

    # -- the measured strategy --------------------------------------------------------------
    def measured(self) -> StructuredStrategy:
        """Every factor and scale quantized (``privacy.lattice.quantize``; computed once)."""
        if self._measured is None:
            from factorize.privacy.lattice import quantize

            arrays = {name: quantize(a).measured for name, a in self.arrays.items()}
            blocks = [KronBlock(measured_scale(b.scale), b.support, b.names, b.mix, b.mix_attrs)
                      for b in self.blocks]
            self._measured = StructuredStrategy(self.sizes, blocks, arrays, self.family)
            self._measured._measured = self._measured
        return self._measured

    # -- products ---------------------------------------------------------------------------
    def apply_tables(self, tables: Mapping[tuple[int, ...], np.ndarray | SparseTable]) -> np.ndarray:
        """``A h`` in floating point from the marginal tables of h (one per support)."""
        from . import mixing

        parts = []
        for b, blk in enumerate(self.blocks):
            t = _table(tables, blk.support, self)
            if blk.mix is not None:
                parts.append(mixing.apply_block(self, blk, t) if isinstance(t, np.ndarray)
                             else mixing.apply_block_sparse(self, blk, t))
            elif isinstance(t, np.ndarray):
                parts.append(kron_matvec(self.factors(b), t))
            else:
                parts.append(kron_matvec_sparse(self.factors(b), _with_scale_code(t.codes()),
                                                t.counts.astype(np.float64)))
        return np.concatenate(parts)

    def measure(self, tables: Mapping[tuple[int, ...], np.ndarray | SparseTable], grid: float) -> np.ndarray:
        """``round(Ã h / γ)`` exactly, block by block, from the integer marginal tables of h
        (``privacy.lattice.lattice_image``). int64, or an object array of Python ints when
        some value reaches 2⁶²."""
        from factorize.privacy.lattice import lattice_image, lattice_image_sparse

        from . import mixing

        parts = []
        for b, blk in enumerate(self.blocks):
            t = _table(tables, blk.support, self)
            if blk.mix is not None:
                parts.append(mixing.measure_block(self, blk, t, grid))
                continue
            if not isinstance(t, np.ndarray):
                parts.append(lattice_image_sparse(self.factors(b), _with_scale_code(t.codes()), t.counts, grid))
                continue
            counts = t
            if counts.dtype.kind not in "iu":
                raise StructureError("marginal tables must hold integer counts")
            parts.append(lattice_image(self.factors(b), counts.astype(np.int64), grid))
        if any(p.dtype == object for p in parts):
            return np.concatenate([p.astype(object) for p in parts])
        return np.concatenate(parts)

    def matvec(self, h: np.ndarray) -> np.ndarray:
        """``A h`` for a dense histogram h (length N, attribute 0 slowest)."""
        return self.apply_tables({s: marginal_of(h, self.sizes, s) for s in self.supports()})

    def dense(self) -> np.ndarray:
        """``A`` as an m×N array (N ≤ ``MAX_DENSE_COLUMNS``)."""
        if self.N > MAX_DENSE_COLUMNS:
            raise StructureError(f"dense form refused: N = {self.N} > {MAX_DENSE_COLUMNS}")
        from .mixing import dense_block

        out = []
        for blk in self.blocks:
            if blk.mix is not None:
                out.append(dense_block(self, blk))
                continue
            M = np.array([[blk.scale]])
            names = dict(zip(blk.support, blk.names, strict=True))
            for j, n in enumerate(self.sizes):
                M = np.kron(M, self.arrays[names[j]] if j in names else np.ones((1, n)))
            out.append(M)
        return np.vstack(out)


def measured_scale(s: float) -> float:
    """``quantize([[s]])`` without the array: a normal float has 53 significant bits, so the
    truncation to 53 bits below its own binade is the identity; scales outside the measurable
    range ``[2^-900, 2^900)`` are refused as by ``privacy.lattice.quantize``."""
    from factorize.privacy.guarantees import PrivacyError

    if not (math.isfinite(s) and 2.0 ** -900 <= abs(s) < 2.0 ** 900):
        raise PrivacyError(f"a strategy block's scale {s!r} is outside the range [2^-900, 2^900) "
                           "where it can be measured exactly")
    return float(s)


def marginal_of(h: np.ndarray, sizes: Sequence[int], support: Sequence[int]) -> np.ndarray:
    """The marginal table of a dense histogram on ``support`` (C order over the support)."""
    h = np.asarray(h)
    if h.shape != (math.prod(sizes),):
        raise StructureError(f"histogram of shape {h.shape}, the domain has {math.prod(sizes)} cells")
    others = tuple(j for j in range(len(sizes)) if j not in set(support))
    return h.reshape(tuple(sizes)).sum(axis=others).reshape(-1)


def _with_scale_code(codes: np.ndarray) -> np.ndarray:
    """Codes for ``[[s_b]] ⊗ factors``: the 1×1 scale factor's only column, 0, first."""
    return np.hstack([np.zeros((codes.shape[0], 1), dtype=np.int64), codes])


def _table(tables: Mapping[tuple[int, ...], np.ndarray | SparseTable], support: tuple[int, ...],
           strategy: StructuredStrategy) -> np.ndarray | SparseTable:
    """The table of ``support``: a dense count vector (as an array), or an
    ``engines.SparseTable`` (the records' distinct cells and counts, for tables too large to
    hold densely)."""
    from factorize.engines.marginal_tables import SparseTable  # lazily: engines loads duckdb

    if support not in tables:
        raise StructureError(f"no marginal table for attributes {support}")
    t = tables[support]
    if isinstance(t, SparseTable):
        if t.shape != tuple(strategy.sizes[j] for j in support):
            raise StructureError(f"the sparse table of {support} has shape {t.shape}")
        return t
    want = math.prod(strategy.sizes[j] for j in support)
    if np.shape(t) != (want,):
        raise StructureError(f"the marginal table of {support} has shape {np.shape(t)}, expected ({want},)")
    return np.asarray(t)
