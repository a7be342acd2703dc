"""Weighted marginal families: detection (1×1 factors, ``marginal_structure()``) and the
algebra (``λ_T``, trace norm, row norms) against dense matrices.

Truth used: the dense matrix of the workload built from its Kronecker blocks, with numpy
products, eigenvalues and SVDs on small domains.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

import factorize.planner.marginal_algebra as ma
from factorize.planner.marginal_algebra import (
    MarginalFamily,
    closure,
    gram_eigenvalues,
    marginal_family,
    mask_of,
    projector_dense,
    row_norm_coefficients,
    subset_dim,
    trace_norm,
)
from workloads import DenseWorkload, KronWorkload, SparseWorkload, VStackWorkload, identity, total

SIZES = (2, 3, 4)
SUBSETS = [(0, 2), (), (1,), (0, 2), (0, 1, 2), (1, 2), (0, 2)]
WEIGHTS = [2.0, 0.5, 3.0, 1.0, 0.7, 1.3, 2.0]


def _block(sizes, S, w):
    factors = [identity(n) if j in S else total(n) for j, n in enumerate(sizes)]
    return KronWorkload(([DenseWorkload([[w]])] if w != 1.0 else []) + factors)


def weighted_workload(sizes=SIZES, subsets=SUBSETS, weights=WEIGHTS):
    return VStackWorkload([_block(sizes, S, w) for S, w in zip(subsets, weights, strict=True)])


class Described(VStackWorkload):
    """A stack that also describes itself (the duck-typed fast path)."""

    def __init__(self, blocks, structure):
        super().__init__(blocks)
        self._structure = structure

    def marginal_structure(self):
        return self._structure


# ------------------------------------------------------------------------------ the family
def test_family_weights_default_and_validation():
    fam = MarginalFamily(sizes=(2, 3), subsets=((0,), (1,)), rows=(2, 3))
    assert fam.weights == (1.0, 1.0) and fam.unit_weights
    assert fam == MarginalFamily(sizes=(2, 3), subsets=((0,), (1,)), rows=(2, 3), weights=(1, 1.0))
    w = MarginalFamily(sizes=(2, 3), subsets=((0,), (1,), (0,)), rows=(2, 3, 2), weights=(2, 0.5, 3.0))
    assert w.weights == (2.0, 0.5, 3.0) and not w.unit_weights
    assert w.unique() == [(1, 2), (2, 1)]  # unchanged semantics: (mask, multiplicity)
    blocks = w.distinct_blocks()
    assert blocks[0].gram_weight == 13.0 and blocks[0].max_weight == 3.0
    assert blocks[1].gram_weight == 0.25 and blocks[1].max_weight == 0.5
    for bad in [(1.0,), (1.0, 0.0), (1.0, -2.0), (1.0, math.nan), (1.0, math.inf), (1.0, True)]:
        with pytest.raises(ValueError):
            MarginalFamily(sizes=(2, 3), subsets=((0,), (1,)), rows=(2, 3), weights=bad)


# ------------------------------------------------------------------------------ detection
def test_detector_reads_one_by_one_factors_as_weights():
    W = weighted_workload()
    fam = marginal_family(W)
    assert fam.sizes == SIZES and fam.subsets == tuple(SUBSETS) and fam.weights == tuple(WEIGHTS)
    # several 1×1 factors multiply; a sparse [[w]] counts as well; [[1]] is an attribute of size 1
    W = VStackWorkload([
        KronWorkload([identity(2), DenseWorkload([[2.0]]), SparseWorkload(sp.csr_array([[1.5]])), total(3)]),
        KronWorkload([identity(2), identity(3)]),
    ])
    fam = marginal_family(W)
    assert fam.sizes == (2, 3) and fam.subsets == ((0,), (0, 1)) and fam.weights == (3.0, 1.0)
    fam = marginal_family(VStackWorkload([KronWorkload([identity(2), DenseWorkload([[1.0]]), total(3)])]))
    assert fam.sizes == (2, 1, 3) and fam.weights == (1.0,)
    # all blocks weighted: the weight factor is no attribute
    fam = marginal_family(VStackWorkload([_block((2, 3), (0,), 2.0), _block((2, 3), (1,), 5.0)]))
    assert fam.sizes == (2, 3) and fam.subsets == ((0,), (1,)) and fam.weights == (2.0, 5.0)
    np.testing.assert_array_equal(
        VStackWorkload([_block((2, 3), (0,), 2.0), _block((2, 3), (1,), 5.0)]).dense()[:2],
        2.0 * np.kron(np.eye(2), np.ones((1, 3))))


@pytest.mark.parametrize("w", [0.0, -1.0, -0.5])  # (workloads refuse NaN and inf themselves)
def test_detector_rejects_bad_scalars(w):
    W = VStackWorkload([KronWorkload([DenseWorkload([[w]]), identity(2), total(3)]),
                        KronWorkload([identity(2), identity(3)])])
    assert marginal_family(W) is None


def test_detector_still_rejects_scaled_identities():
    W = VStackWorkload([KronWorkload([DenseWorkload(2 * np.eye(2)), total(3)])])
    assert marginal_family(W) is None


def test_structure_fast_path_does_not_walk_blocks(monkeypatch):
    sizes = (2, 1, 3)
    subsets = ((0, 1, 2), (1,), (0,), (0, 2))
    weights = (2.0, 0.5, 1.0, 3.0)
    W = Described([_block(sizes, S, w) for S, w in zip(subsets, weights, strict=True)], (sizes, subsets, weights))

    def refuse(_):
        raise AssertionError("walked the blocks")

    monkeypatch.setattr(ma, "_flat_blocks", refuse)
    fam = marginal_family(W)
    assert fam.sizes == sizes and fam.weights == weights
    assert fam.subsets == ((0, 2), (), (0,), (0, 2))  # size-1 attributes dropped
    assert fam.shape == W.shape


def test_structure_fast_path_agrees_with_the_walk():
    sizes, subsets, weights = SIZES, tuple(SUBSETS), tuple(WEIGHTS)
    W = Described([_block(sizes, S, w) for S, w in zip(subsets, weights, strict=True)], (sizes, subsets, weights))
    assert marginal_family(W) == marginal_family(weighted_workload())
    # a description that contradicts the shape is not trusted: the blocks are walked instead
    lying = Described([_block(sizes, S, w) for S, w in zip(subsets, weights, strict=True)],
                      (sizes, subsets[:-1], weights[:-1]))
    assert marginal_family(lying) == marginal_family(weighted_workload())
    broken = Described([_block(sizes, S, w) for S, w in zip(subsets, weights, strict=True)], None)
    assert marginal_family(broken) == marginal_family(weighted_workload())


def test_marginal_workload_class_if_present():
    mw = pytest.importorskip("workloads.marginal_workload")
    MW = getattr(mw, "MarginalWorkload", None)
    if MW is None:
        pytest.skip("workloads.MarginalWorkload is not available")
    W = MW(SIZES, SUBSETS, WEIGHTS)
    assert marginal_family(W) == marginal_family(weighted_workload())
    np.testing.assert_allclose(W.dense(), weighted_workload().dense())


# ------------------------------------------------------------------------------ the algebra
def _dense_algebra(sizes, coeffs):
    return sum(c * projector_dense(sizes, t) for t, c in coeffs.items())


FAMILIES = [
    (SIZES, SUBSETS, WEIGHTS),
    ((3, 3), [(0,), (1,), (0, 1), (0,)], [0.25, 4.0, 1.0, 1.5]),
    ((2, 1, 3), [(0, 2), (), (0,)], [2.5, 0.1, 1.0]),
]


@pytest.mark.parametrize("sizes, subsets, weights", FAMILIES)
def test_weighted_gram_trace_and_row_norms_match_dense(sizes, subsets, weights):
    W = weighted_workload(sizes, subsets, weights)
    fam = marginal_family(W)
    assert fam is not None and fam.weights == tuple(weights)
    Wd = W.dense()
    G = Wd.T @ Wd
    lam = gram_eigenvalues(fam)
    assert set(lam) == set(closure(fam))
    np.testing.assert_allclose(_dense_algebra(fam.sizes, lam), G, atol=1e-10 * np.max(G))
    for t, v in lam.items():  # λ_T = Σ_{blocks S⊇T} w_S² N / rows_S
        expect = sum(w * w * fam.N / r for S, r, w in zip(fam.subsets, fam.rows, fam.weights, strict=True)
                     if t & ~mask_of(S) & fam._nontrivial == 0)
        assert v == pytest.approx(expect, rel=1e-14)
    sv = np.linalg.svd(Wd, compute_uv=False)
    assert trace_norm(fam) == pytest.approx(float(np.sum(sv)), rel=1e-12)
    # row norms: copies of S with the largest weight carry w_S² c_{S,T}
    c = row_norm_coefficients(fam)
    rng = np.random.default_rng(2)
    coeffs = {t: float(rng.uniform(0.3, 3.0)) for t in range(1 << fam.d) if subset_dim(fam.sizes, t)}
    R = Wd @ _dense_algebra(fam.sizes, {t: v ** -0.5 for t, v in coeffs.items()})
    norms2 = np.einsum("ij,ij->i", R, R)
    wmax = {b.mask: b.max_weight for b in fam.distinct_blocks()}
    offsets = np.cumsum((0,) + fam.rows)
    for b, (S, w) in enumerate(zip(fam.subsets, fam.weights, strict=True)):
        smask = mask_of(S)
        heaviest = sum(cv / coeffs[t] for (s, t), cv in c.items() if s == smask)
        np.testing.assert_allclose(norms2[offsets[b]:offsets[b + 1]], heaviest * (w / wmax[smask]) ** 2,
                                   rtol=1e-10)


def test_unit_weight_gram_is_still_exact_ints():
    fam = marginal_family(VStackWorkload([_block(SIZES, S, 1.0) for S in SUBSETS]))
    assert fam.unit_weights
    assert all(isinstance(v, int) for v in gram_eigenvalues(fam).values())
