"""Mixed Kronecker blocks: a dense matrix applied jointly to a group of attributes.

A mixed strategy block (``blocks.KronBlock`` with ``mix``) is

    ``A_b = s · (⊗_{j∈P} F_j) ⊗ M (⊗_{j∈X} Z_j)``,

P the block's plain support attributes, X its mixed ones (``mix_attrs``), each ``Z_j`` a
*partition* of attribute j's values into classes (0/1, exactly one 1 per column: row c
sums the values of class c), and M a dense ``r × Π_{j∈X} m_j`` matrix over the class tuples.
Rows: P's rows in support order, then M's r rows. This is the form of an optimal strategy
that is invariant under permuting the values inside every class (the symmetric family,
``structured.symmetric``): on the class tuples of its free attributes a sector of the
commutant is a full matrix algebra, so its block couples the attributes and is no Kronecker
product (de Klerk, Pasechnik & Schrijver, Math. Program. 2007, §3).

Everything here is exact or certified the same way as the plain blocks:

* measurement: ``(⊗_X Z_j) m`` is an integer table (class sums of integer counts, exact), so
  ``round(Ã_b m / γ)`` is ``privacy.lattice.lattice_image`` of the Kronecker factors
  ``[s] ⊗ F_P ⊗ M`` on it;
* column norms: ``‖A_b e_c‖_p = |s| Π_{j∈P} ‖F_j e_{c_j}‖_p · ‖M e_{κ(c_X)}‖_p`` (a partition's
  columns are unit vectors), κ the class tuple of the cell's mixed values — a product over
  the plain attributes and one function of the mixed group (``structured.sensitivity`` merges
  the groups into one virtual attribute);
* a reconstruction term reading the block applies ``N`` (``Term.mix``) first, then its
  per-attribute factors: ``c · (⊗_P G_j) ⊗ ((⊗_X G_j) N)``, and ``R·A = W`` holds in the
  algebra when ``(⊗_X G_j) N M = ⊗_X G_j`` (checked densely with certified rounding,
  :func:`mixing_residual`), for then the term's product is the plain Kronecker product
  ``c s ⊗_j G_j F_j``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .blocks import KronBlock, StructureError, Term

if TYPE_CHECKING:
    from factorize.engines.marginal_tables import SparseTable

    from .reconstruction import StructuredReconstruction
    from .strategy import StructuredStrategy

#: Largest Π_X m_j (class tuples of one mixed group).
MAX_MIX_COLUMNS = 1 << 14


def check_partition(Z: np.ndarray, name: str) -> np.ndarray:
    """The class of every value (``argmax`` of each column) of a partition factor;
    :class:`StructureError` unless Z is 0/1 with exactly one 1 per column."""
    if not (np.all((Z == 0.0) | (Z == 1.0)) and np.all(Z.sum(axis=0) == 1.0)):
        raise StructureError(f"factor {name!r} of a mixed attribute must be a partition "
                             "(0/1, one 1 per column)")
    return np.argmax(Z, axis=0).astype(np.int64)


def check_block(blk: KronBlock, arrays: dict[str, np.ndarray], i: int) -> int:
    """The rows of mixed block i (``Π_P rows F_j · rows M``) after checking its partitions and
    M's columns."""
    if blk.mix is None:
        raise StructureError(f"block {i} is not mixed")
    M = arrays.get(blk.mix)
    if not (isinstance(M, np.ndarray) and M.ndim == 2 and M.dtype == np.float64):
        raise StructureError(f"block {i}: mixing matrix {blk.mix!r} must be a 2-D float64 array")
    cols = 1
    for j in blk.mix_attrs:
        name = blk.factor_name(j)
        check_partition(arrays[name], name)
        cols *= arrays[name].shape[0]
    if cols > MAX_MIX_COLUMNS or M.shape[1] != cols:
        raise StructureError(f"block {i}: mixing matrix of {M.shape[1]} columns over {cols} class "
                             f"tuples (at most {MAX_MIX_COLUMNS})")
    return math.prod(arrays[blk.factor_name(j)].shape[0] for j in blk.plain) * M.shape[0]


def _order(blk: KronBlock) -> list[int]:
    """Positions of the support's axes, plain ones first, then mixed (the block's row order)."""
    return [blk.support.index(j) for j in blk.plain] + [blk.support.index(j) for j in blk.mix_attrs]


def apply_block(s: StructuredStrategy, blk: KronBlock, table: np.ndarray) -> np.ndarray:
    """``A_b m`` in floating point from the dense marginal table of the block's support."""
    X = np.asarray(table, dtype=np.float64).reshape([s.sizes[j] for j in blk.support])
    for axis, name in enumerate(blk.names):
        X = np.moveaxis(np.tensordot(s.arrays[name], X, axes=([1], [axis])), 0, axis)
    X = np.transpose(X, _order(blk))
    M = s.arrays[str(blk.mix)]
    plain = math.prod(X.shape[:len(blk.plain)])
    return blk.scale * (X.reshape(plain, M.shape[1]) @ M.T).reshape(-1)


def class_table(s: StructuredStrategy, blk: KronBlock, table: np.ndarray) -> np.ndarray:
    """The integer table over (plain attributes' values …, class tuple) of the block's
    support table: class sums, exact in int64 (the counts of one table sum to n < 2⁶³)."""
    counts = np.asarray(table)
    if counts.dtype.kind not in "iu":
        raise StructureError("marginal tables must hold integer counts")
    X = counts.astype(np.int64).reshape([s.sizes[j] for j in blk.support])
    X = np.transpose(X, _order(blk))
    lead = len(blk.plain)
    for axis, j in enumerate(blk.mix_attrs):
        name = blk.factor_name(j)
        Z = s.arrays[name].astype(np.int64)
        X = np.moveaxis(np.tensordot(Z, X, axes=([1], [lead + axis])), 0, lead + axis)
    return X.reshape(-1)


def class_codes(s: StructuredStrategy, blk: KronBlock, codes: np.ndarray, counts: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Sparse form of :func:`class_table`: the distinct (plain values …, class tuple) codes and
    their summed counts, from the records' distinct support cells ``codes`` (support order)."""
    pos = {j: i for i, j in enumerate(blk.support)}
    plain = [codes[:, pos[j]] for j in blk.plain]
    classes = [check_partition(s.arrays[blk.factor_name(j)], blk.factor_name(j))[codes[:, pos[j]]]
               for j in blk.mix_attrs]
    dims = [s.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs]
    joint = np.ravel_multi_index(tuple(classes), tuple(dims)) if classes else np.zeros(len(codes), np.int64)
    new = np.column_stack(plain + [joint]).astype(np.int64)
    uniq, inverse = np.unique(new, axis=0, return_inverse=True)
    summed = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(summed, inverse.reshape(-1), np.asarray(counts, dtype=np.int64))
    return uniq, summed


def lattice_factors(s: StructuredStrategy, blk: KronBlock) -> list[np.ndarray]:
    """``[[s]], F_P …, M``: the Kronecker factors of the block on its class table."""
    return ([np.array([[blk.scale]])] + [s.arrays[blk.factor_name(j)] for j in blk.plain]
            + [s.arrays[str(blk.mix)]])


def measure_block(s: StructuredStrategy, blk: KronBlock, table: np.ndarray | SparseTable,
                  grid: float) -> np.ndarray:
    """``round(Ã_b m / γ)`` exactly (module docstring)."""
    from factorize.privacy.lattice import lattice_image, lattice_image_sparse

    factors = lattice_factors(s, blk)
    if isinstance(table, np.ndarray):
        return lattice_image(factors, class_table(s, blk, table), grid)
    codes, counts = class_codes(s, blk, table.codes(), table.counts)
    return lattice_image_sparse(factors, np.hstack([np.zeros((codes.shape[0], 1), np.int64), codes]),
                                counts, grid)


def apply_block_sparse(s: StructuredStrategy, blk: KronBlock, table: SparseTable) -> np.ndarray:
    """``A_b m`` in floating point from the records' distinct support cells."""
    from factorize.kron import kron_matvec_sparse

    codes, counts = class_codes(s, blk, table.codes(), table.counts)
    return kron_matvec_sparse(lattice_factors(s, blk),
                              np.hstack([np.zeros((codes.shape[0], 1), np.int64), codes]),
                              counts.astype(np.float64))


def dense_block(s: StructuredStrategy, blk: KronBlock) -> np.ndarray:
    """The block as a rows × N array (small domains): ``(⊗_P F_j) ⊗ M (⊗_X Z_j)`` over the
    support's cells in block order (plain attributes first), its columns put back in support
    order, then gathered to every cell of the domain (a cell reads its support's projection)."""
    plain = [s.arrays[blk.factor_name(j)] for j in blk.plain]
    mixed = [s.arrays[blk.factor_name(j)] for j in blk.mix_attrs]
    P: np.ndarray = np.array([[blk.scale]])
    for F in plain:
        P = np.kron(P, F)
    Z: np.ndarray = np.ones((1, 1))
    for F in mixed:
        Z = np.kron(Z, F)
    D = np.kron(P, s.arrays[str(blk.mix)] @ Z)
    order = _order(blk)  # block order of the support's axes
    sup = [s.sizes[j] for j in blk.support]
    D = D.reshape([D.shape[0]] + [sup[a] for a in order])
    D = np.transpose(D, [0] + [1 + order.index(a) for a in range(len(sup))]).reshape(D.shape[0], -1)
    grid = np.indices(s.sizes).reshape(len(s.sizes), -1)
    cols = np.ravel_multi_index(tuple(grid[j] for j in blk.support), sup) if blk.support else \
        np.zeros(grid.shape[1], dtype=np.int64)
    return D[:, cols]


# -- reconstruction terms --------------------------------------------------------------------

def check_term(recon: StructuredReconstruction, t: Term, blk: KronBlock, i: int) -> None:
    """A term reading a mixed block names N of shape ``(Π_X rows F_j) × rows M``; a term
    reading a plain block names none."""
    if (t.mix is None) != (blk.mix is None):
        raise StructureError(f"term {i}: a term names a mixing inverse exactly when its strategy "
                             "block is mixed")
    if t.mix is None:
        return
    N = recon.arrays.get(t.mix)
    s = recon.strategy
    want = (math.prod(s.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs),
            s.arrays[str(blk.mix)].shape[0])
    if not (isinstance(N, np.ndarray) and N.ndim == 2 and N.dtype == np.float64 and N.shape == want):
        raise StructureError(f"term {i}: mixing inverse {t.mix!r} must be a float64 array of shape {want}")


def _labels(t: Term, blk: KronBlock) -> list[int]:
    """Axis labels of a block's measurement tensor after N: plain attributes, then mixed."""
    return list(blk.plain) + list(blk.mix_attrs)


def _to_term_axes(X: np.ndarray, labels: list[int], t: Term) -> np.ndarray:
    """A tensor whose axes are the attributes ``labels`` as one over ``t.attrs`` (singleton
    axes added for attributes the block sums out), axes in ``t.attrs`` order."""
    for j in t.attrs:
        if j not in labels:
            X = X[..., None]
            labels = labels + [j]
    return np.transpose(X, [labels.index(j) for j in t.attrs])


def apply_term(recon: StructuredReconstruction, t: Term, part: np.ndarray) -> np.ndarray:
    """``c · (⊗_P G_j) ⊗ ((⊗_X G_j) N) ỹ_b`` (module docstring), answers in ``t.attrs`` order."""
    s = recon.strategy
    blk = s.blocks[t.in_block]
    N = recon.arrays[str(t.mix)]
    plain = [s.arrays[blk.factor_name(j)].shape[0] for j in blk.plain]
    mixed = [s.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs]
    Y = np.asarray(part, dtype=np.float64).reshape(math.prod(plain), N.shape[1]) @ N.T
    X = _to_term_axes(Y.reshape(plain + mixed), _labels(t, blk), t)
    for axis, name in enumerate(t.names):
        X = np.moveaxis(np.tensordot(recon.arrays[name], X, axes=([1], [axis])), 0, axis)
    return t.scale * X.reshape(-1)


def rmatvec_term(recon: StructuredReconstruction, t: Term, b: np.ndarray) -> np.ndarray:
    """``R_tᵀ b`` for a vector b over the term's answers (``t.attrs`` order)."""
    s = recon.strategy
    blk = s.blocks[t.in_block]
    N = recon.arrays[str(t.mix)]
    G = [recon.arrays[n] for n in t.names]
    X = np.asarray(b, dtype=np.float64).reshape([g.shape[0] for g in G])
    for axis, g in enumerate(G):
        X = np.moveaxis(np.tensordot(g.T, X, axes=([1], [axis])), 0, axis)
    labels = _labels(t, blk)
    X = np.transpose(X, [t.attrs.index(j) for j in labels]
                     + [t.attrs.index(j) for j in t.attrs if j not in labels])
    plain = math.prod(s.arrays[blk.factor_name(j)].shape[0] for j in blk.plain)
    return t.scale * (X.reshape(plain, N.shape[0]) @ N).reshape(-1)


def _mixed_rows(recon: StructuredReconstruction, t: Term, p: int) -> np.ndarray:
    """Per answer of the mixed group, ``Σ_r |[(⊗_X G_j) N]_{i r}|^p`` (p = 1, 2), as a
    tensor over the mixed attributes' rows."""
    s = recon.strategy
    blk = s.blocks[t.in_block]
    N = recon.arrays[str(t.mix)]
    mixed = [s.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs]
    X = N.reshape(mixed + [N.shape[1]])
    for axis, j in enumerate(blk.mix_attrs):
        g = recon.arrays[t.names[t.attrs.index(j)]]
        X = np.moveaxis(np.tensordot(g, X, axes=([1], [axis])), 0, axis)
    return np.sum(X * X, axis=-1) if p == 2 else np.sum(np.abs(X), axis=-1)


def row_norms(recon: StructuredReconstruction, t: Term, p: int) -> np.ndarray:
    """``‖row_i‖_p^p`` (p = 2) or ``‖row_i‖₁`` (p = 1) of the term for every answer, without
    the scale: a product of the plain attributes' row norms and the mixed group's."""
    blk = recon.strategy.blocks[t.in_block]
    vecs = {j: (np.einsum("ij,ij->i", g, g) if p == 2 else np.abs(g).sum(axis=1))
            for j, g in ((j, recon.arrays[n]) for j, n in zip(t.attrs, t.names, strict=True))
            if j not in blk.mix_attrs}
    X = _mixed_rows(recon, t, p)
    labels = list(blk.mix_attrs)
    for j in t.attrs:
        if j in vecs:
            X = np.multiply.outer(X, vecs[j])
            labels.append(j)
    return np.transpose(X, [labels.index(j) for j in t.attrs]).reshape(-1)


def dense_term(recon: StructuredReconstruction, t: Term) -> np.ndarray:
    """The term as an (answers × block rows) array (small plans)."""
    cols = recon.strategy.block_rows[t.in_block]
    return np.column_stack([apply_term(recon, t, np.eye(cols)[:, c]) for c in range(cols)])


def mixing_residual(recon: StructuredReconstruction, t: Term) -> float:
    """A certified bound on ``max|(⊗_X G_j)(N M − I)|`` (module docstring): with
    ``Q = fl(N M)`` within ``γ_r |N||M|`` of N M, the G's applied to ``Q − I`` in floating
    point within ``γ_g (⊗|G|)|Q − I|``, ``g = Σ_X m_j``."""
    from factorize.numerics import gamma, round_up

    s = recon.strategy
    blk = s.blocks[t.in_block]
    N = recon.arrays[str(t.mix)]
    M = s.arrays[str(blk.mix)]
    Q = N @ M
    errQ = gamma(max(M.shape[0], 1)) * (np.abs(N) @ np.abs(M))
    D = Q - np.eye(Q.shape[0])
    errD = errQ + gamma(1) * np.abs(D)
    mixed = [s.arrays[blk.factor_name(j)].shape[0] for j in blk.mix_attrs]
    X = D.reshape(mixed + [D.shape[1]])
    E = errD.reshape(X.shape)
    A = np.abs(X)
    for axis, j in enumerate(blk.mix_attrs):
        g = recon.arrays[t.names[t.attrs.index(j)]]
        X, E, A = (np.moveaxis(np.tensordot(h, Y, axes=([1], [axis])), 0, axis)
                   for h, Y in ((g, X), (np.abs(g), E), (np.abs(g), A)))
    if not X.size:
        return 0.0
    k = sum(mixed) + 2 * len(mixed) + 2
    # |X − E_exact| ≤ (⊗|G|)·errD (Q's and the subtraction's error, carried exactly up to
    # the γ_k of its own evaluation) + γ_k (⊗|G|)|D| (applying the G's in floating point)
    return round_up(float(np.max(np.abs(X) + (1.0 + gamma(k)) * E + gamma(k) * A)), 3)


def mixed_attrs_of(blocks: Sequence[KronBlock]) -> tuple[int, ...]:
    """Every attribute some block mixes (sorted)."""
    return tuple(sorted({j for b in blocks for j in b.mix_attrs}))
