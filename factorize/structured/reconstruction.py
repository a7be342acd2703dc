"""A sum of Kronecker terms as a reconstruction: answers and their exact variances.

For workload block o, ``answers_o = Σ_{t: out(t)=o} c_t · (⊗_{j∈attrs(t)} G_{t,j}) ỹ_{in(t)}``
(:class:`~factorize.structured.blocks.Term`). Different strategy blocks have independent
noise, so the row of R for query i of block o has squared norm ``Σ_b ‖Σ_{t∈(o,b)} …‖²``; the
terms ``(o, b)`` reading one strategy block b (several only where a reconstruction is a sum of
Kronecker products per block, e.g. ``structured.marginal_weights``) must share their attributes
(and none reads a mixed block, ``structured.mixing``, whose term's row norms that module
gives), and then

    ‖r_i‖² = Σ_b Σ_{t,u∈(o,b)} c_t c_u · Π_{j} ⟨G_{t,j}[i_j, :], G_{u,j}[i_j, :]⟩,

a Kronecker product of per-attribute row inner products per pair (one term per pair:
``c_t² Π_j ‖G_{t,j}[i_j, :]‖²``). The ℓ1 bound ``‖r_i‖₁ ≤ Σ_t |c_t| Π_j ‖G_{t,j}[i_j,:]‖₁`` of
the lattice rounding bias is the triangle inequality. The per-query variance of the release
is ``v·‖r_i‖²`` with v the per-coordinate noise variance — exact, not a bound, for
independent noise coordinates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np

from factorize.kron import kron_matvec, kron_vector

from .blocks import StructureError, Term, check_arrays
from .strategy import StructuredStrategy

#: Terms with at most this many entries are applied as one dense matrix (cached).
SMALL_TERM_ENTRIES = 1 << 12
#: At most this many entries of small terms' dense matrices are kept between calls of
#: ``apply`` (64 MiB; all 3-way marginals over 100 attributes: 1.3·10⁶ terms, most small).
SMALL_CACHE_ENTRIES = 1 << 23
#: :meth:`StructuredReconstruction.row_sq_norm_sum` converts this many values at a time.
FSUM_CHUNK = 1 << 16


class StructuredReconstruction:
    """The terms of the module docstring over ``strategy``'s measurements; ``out_rows[o]`` is
    the number of queries of workload block o (blocks in the workload's row order)."""

    def __init__(self, out_rows: Sequence[int], terms: Sequence[Term],
                 arrays: Mapping[str, np.ndarray], strategy: StructuredStrategy) -> None:
        self.out_rows = tuple(int(r) for r in out_rows)
        self.terms = tuple(terms)
        self.arrays = dict(arrays)
        self.strategy = strategy
        self._sq: np.ndarray | None = None
        self._sq_sum: float | None = None
        self._small: dict[int, np.ndarray] | None = None
        off = [0]
        for r in self.out_rows:
            off.append(off[-1] + r)
        self.offsets = tuple(off)
        pairs: dict[tuple[int, int], list[int]] = {}
        self.by_block: list[list[int]] = [[] for _ in self.out_rows]
        checked: dict[tuple, None] = {}
        for i, t in enumerate(self.terms):
            if not (0 <= t.out_block < len(self.out_rows) and 0 <= t.in_block < len(strategy.blocks)):
                raise StructureError(f"term {i} refers to a block that does not exist")
            blk = strategy.blocks[t.in_block]
            # the checks depend only on the factors and which attributes the block measures
            key = (t.names, blk.names, blk.mix, blk.mix_attrs, t.mix, tuple(j in blk.support for j in t.attrs),
                   set(blk.support) <= set(t.attrs), self.out_rows[t.out_block],
                   t.attrs[0] if t.attrs else 0, t.attrs[-1] if t.attrs else 0)
            if key not in checked:
                self._check_term(i, t)
                checked[key] = None
            group = pairs.setdefault((t.out_block, t.in_block), [])
            if group and self.terms[group[0]].attrs != t.attrs:
                raise StructureError(f"terms {group[0]} and {i} map strategy block {t.in_block} "
                                     f"to workload block {t.out_block} over different attributes")
            if group and (t.mix is not None or self.terms[group[0]].mix is not None):
                raise StructureError(f"terms {group[0]} and {i} both read mixed strategy block "
                                     f"{t.in_block} for workload block {t.out_block}")
            group.append(i)
            self.by_block[t.out_block].append(i)
        #: terms that share their (output, strategy) block with another: their cross products
        self.shared = tuple(tuple(g) for g in pairs.values() if len(g) > 1)

    def _check_term(self, i: int, t: Term) -> None:
        s = self.strategy
        if not (0 <= t.out_block < len(self.out_rows) and 0 <= t.in_block < len(s.blocks)):
            raise StructureError(f"term {i} refers to a block that does not exist")
        if t.attrs and not (t.attrs[0] >= 0 and t.attrs[-1] < s.d):
            raise StructureError(f"term {i} names an attribute outside the domain")
        check_arrays(self.arrays, t.names, f"reconstruction term {i}")
        blk = s.blocks[t.in_block]
        inner = dict(zip(blk.support, blk.names, strict=True))
        if not set(inner) <= set(t.attrs):
            raise StructureError(f"term {i} does not map every measured attribute of strategy "
                                 f"block {t.in_block}")
        rows = 1
        for j, name in zip(t.attrs, t.names, strict=True):
            G = self.arrays[name]
            want = s.arrays[inner[j]].shape[0] if j in inner else 1
            if G.shape[1] != want:
                raise StructureError(f"term {i}: factor {name!r} has {G.shape[1]} columns, the "
                                     f"measurement has {want} on attribute {j}")
            rows *= G.shape[0]
        from .mixing import check_term

        check_term(self, t, blk, i)
        if rows != self.out_rows[t.out_block]:
            raise StructureError(f"term {i} yields {rows} answers, workload block {t.out_block} "
                                 f"has {self.out_rows[t.out_block]}")

    @property
    def k(self) -> int:
        return self.offsets[-1]

    def rebased(self, strategy: StructuredStrategy) -> StructuredReconstruction:
        """The same terms over ``strategy`` — the measured form of this one's strategy (same
        blocks, factors of the same shapes): no term needs checking again."""
        if strategy.block_rows != self.strategy.block_rows or len(strategy.blocks) != len(self.strategy.blocks):
            raise StructureError("rebased onto a strategy of another shape")
        out = object.__new__(StructuredReconstruction)
        out.__dict__.update(self.__dict__)
        out.strategy = strategy
        return out

    def _factors(self, t: Term) -> list[np.ndarray]:
        return [np.array([[t.scale]])] + [self.arrays[n] for n in t.names]

    def apply(self, y: np.ndarray) -> np.ndarray:
        """``R y`` for a measurement vector y (float; length m), term by term: a term of at most
        :data:`SMALL_TERM_ENTRIES` entries as one dense matrix (kept for later calls while all
        kept ones hold at most :data:`SMALL_CACHE_ENTRIES` entries, else formed, used and
        dropped: the same matrix either way), any other by its factors."""
        y = np.asarray(y, dtype=np.float64)
        s = self.strategy
        if y.shape != (s.m,):
            raise StructureError(f"measurement of shape {y.shape}, the strategy has m={s.m}")
        from . import mixing

        out = np.zeros(self.k)
        first = self._small is None
        small: dict[int, np.ndarray] = {} if self._small is None else self._small
        self._small = small
        kept = 0  # entries kept by this (first) call
        for i, t in enumerate(self.terms):
            part = y[s.offsets[t.in_block]:s.offsets[t.in_block + 1]]
            lo, hi = self.offsets[t.out_block], self.offsets[t.out_block + 1]
            M = small.get(i)
            if M is None and (hi - lo) * part.size <= SMALL_TERM_ENTRIES:
                M = self._dense_small(t)
                if first and kept + M.size <= SMALL_CACHE_ENTRIES:
                    small[i] = M
                    kept += M.size
            if M is not None:
                out[lo:hi] += M @ part
            elif t.mix is not None:
                out[lo:hi] += mixing.apply_term(self, t, part)
            else:
                out[lo:hi] += kron_matvec(self._factors(t), part)
        return out

    def _dense_small(self, t: Term) -> np.ndarray:
        """A small term as one dense (answers × block rows) matrix."""
        if t.mix is not None:
            from .mixing import dense_term

            return dense_term(self, t)
        M = np.ones((1, 1))
        for F in self._factors(t):
            M = np.kron(M, F)
        return M

    def _row_reduce(self, fn, scale_fn, p: int) -> np.ndarray:
        """``Σ_t scale_fn(c_t) ⊗_j fn(G_{t,j})`` per output block, terms in order; a mixed
        term's row norms (p = 2: squared, p = 1) are ``structured.mixing.row_norms``. The
        per-factor row vectors are computed once; each term's Kronecker product of them is
        formed, scaled in place and added, one term at a time — never all terms' products at
        once (Adult all ≤3-way marginals: 8 terms per 3-way marginal, 1.3 GiB held at once
        when they were cached)."""
        from .mixing import row_norms

        out = np.zeros(self.k)
        per_factor: dict[str, np.ndarray] = {}
        for t in self.terms:
            lo, hi = self.offsets[t.out_block], self.offsets[t.out_block + 1]
            if t.mix is not None:
                out[lo:hi] += scale_fn(t.scale) * row_norms(self, t, p)
                continue
            vec = kron_vector([per_factor.setdefault(n, fn(self.arrays[n])) for n in t.names])
            out[lo:hi] += np.multiply(vec, scale_fn(t.scale), out=vec)
        return out

    def row_sq_norms(self) -> np.ndarray:
        """``‖r_i‖²`` for every query (module docstring; floating point; computed once)."""
        if self._sq is None:
            sq = self._row_reduce(lambda G: np.einsum("ij,ij->i", G, G), lambda c: c * c, 2)
            inner: dict[tuple[str, str], np.ndarray] = {}
            for group in self.shared:  # 2 c_t c_u Π_j ⟨G_tj rows, G_uj rows⟩ for t < u
                for a, ti in enumerate(group):
                    t = self.terms[ti]
                    for ui in group[a + 1:]:
                        u = self.terms[ui]
                        vec = kron_vector([inner.setdefault(
                            (g, h), np.einsum("ij,ij->i", self.arrays[g], self.arrays[h]))
                            for g, h in zip(t.names, u.names, strict=True)])
                        lo, hi = self.offsets[t.out_block], self.offsets[t.out_block + 1]
                        sq[lo:hi] += (2.0 * t.scale * u.scale) * vec
            np.maximum(sq, 0.0, out=sq)
            self._sq = sq
            self._sq.setflags(write=False)
        return self._sq

    def row_sq_norm_sum(self) -> float:
        """``Σ_i ‖r_i‖²`` = ``‖R‖_F²`` correctly rounded (``math.fsum`` of :meth:`row_sq_norms`),
        computed once; the values are fed to ``fsum`` :data:`FSUM_CHUNK` at a time, so no Python
        float per query is held at once (21·10⁶ of them, 0.7 GiB, for Adult's ≤3-way
        marginals). The same number as ``math.fsum(row_sq_norms().tolist())``: fsum's result
        does not depend on how its input is chunked."""
        if self._sq_sum is None:
            sq = self.row_sq_norms()
            self._sq_sum = float(math.fsum(itertools.chain.from_iterable(
                sq[lo:lo + FSUM_CHUNK].tolist() for lo in range(0, sq.size, FSUM_CHUNK))))
        return self._sq_sum

    def row_l1_norms(self) -> np.ndarray:
        """An upper bound ``Σ_t |c_t| Π_j ‖G_{t,j}[i_j,:]‖₁ ≥ ‖r_i‖₁`` (floating point), a new
        array each call, not kept: the verifier needs its maximum, a release its values only
        when the intervals are written (``executor.linear_release.ErrorBars``) — kept between
        the two, it would be held through the noise and the reconstruction (Adult's ≤3-way
        marginals: 160 MiB of the run's peak) to save 0.3–0.6 CPU s."""
        return self._row_reduce(lambda G: np.abs(G).sum(axis=1), abs, 1)

    def dense(self) -> np.ndarray:
        """R as a k×m array (small plans: tests and dense cross-checks)."""
        s = self.strategy
        if self.k * s.m > 1 << 26:
            raise StructureError(f"dense form refused: {self.k}×{s.m}")
        from .mixing import dense_term

        R = np.zeros((self.k, s.m))
        for t in self.terms:
            M = np.ones((1, 1))
            if t.mix is not None:
                M = dense_term(self, t)
            else:
                for F in self._factors(t):
                    M = np.kron(M, F)
            R[self.offsets[t.out_block]:self.offsets[t.out_block + 1],
              s.offsets[t.in_block]:s.offsets[t.in_block + 1]] += M
        return R
