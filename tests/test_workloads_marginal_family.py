"""MarginalWorkload against the VStack-of-Kron construction it replaces.

Truth: the old construction built explicitly here from ``identity``/``total``/``KronWorkload``
/``VStackWorkload`` (block ``S = [[w_S]] ⊗ ⊗_{j∈S} I ⊗_{j∉S} 1ᵀ``, the ``[[w_S]]`` factor only
when ``w_S ≠ 1``), its dense matrix, and its fingerprint (plans store it).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from workloads import (
    DenseWorkload,
    Domain,
    KronWorkload,
    MarginalGram,
    MarginalWorkload,
    VStackWorkload,
    WorkloadError,
    WorkloadSpecError,
    identity,
    marginals,
    marginals_upto,
    parse_workload,
    prefix,
    scale_workload,
    total,
    vstack_workloads,
)
from workloads.base import GramWorkload
from workloads.domain import check_workload_axes, workload_axes
from workloads.marginal_workload import MAX_MARGINAL_BLOCKS
from workloads.spec import MAX_SPEC_ENTRIES, embedded_files


def old_construction(sizes, subsets, weights=None) -> VStackWorkload:
    ident, tot, scal = {}, {}, {}
    blocks = []
    for b, S in enumerate(subsets):
        factors = [ident.setdefault(n, identity(n)) if j in S else tot.setdefault(n, total(n))
                   for j, n in enumerate(sizes)]
        w = 1.0 if weights is None else float(weights[b])
        if w != 1.0:
            factors.insert(0, scal.setdefault(w, DenseWorkload([[w]])))
        blocks.append(KronWorkload(factors))
    return VStackWorkload(blocks)


# (dyadic weights keep integer products exact, so matvec results compare bit for bit)
FAMILIES = [
    ((2, 3, 4), [(0,), (1, 2), (), (0, 1, 2), (1, 2)], None),             # repeats, way 0, full
    ((2, 1, 3), [(0, 1), (1,), (), (0, 2)], [2.0, 0.5, 1.0, 3.25]),       # size-1 attribute, weights
    ((1, 1, 2), [(0, 1), (), (2,), (0, 2), (1,)], [1.0, 1.0, 7.0, 1.0, 0.125]),
    ((5,), [(0,)], None),                                                 # one factor, one block
    ((5,), [()], None),
    ((5,), [(0,)], [2.0]),
    ((5,), [(0,), ()], [1.0, 3.0]),
    ((1,), [(0,)], None),
    ((1,), [(), (0,)], [2.0, 2.0]),
    ((3, 3), [(0,)], None),
    ((2, 3), [(0,)], [3.0]),
    ((3, 2, 2, 3), list(combinations(range(4), 2)), None),
    ((3, 2, 2, 3), [(0, 3), (0, 3), (1, 2), ()], [1.5, 1.5, 2.0 ** -10, 4.0]),
    ((4, 1, 2, 1, 3), [s for w in range(4) for s in combinations(range(5), w)], None),
]
IDS = [f"{'x'.join(map(str, s))}:{len(S)}{'w' if w else ''}:{i}" for i, (s, S, w) in enumerate(FAMILIES)]


@pytest.mark.parametrize("sizes, subsets, weights", FAMILIES, ids=IDS)
def test_operator_equals_old_construction(sizes, subsets, weights):
    M = MarginalWorkload(sizes, subsets, weights)
    O = old_construction(sizes, subsets, weights)
    assert M.shape == O.shape and isinstance(M.shape[1], int)
    D = O.dense()
    np.testing.assert_array_equal(M.dense(), D)
    rng = np.random.default_rng(7)
    k, n = M.shape
    for x in (rng.integers(0, 9, size=n).astype(float), rng.integers(0, 9, size=(n, 3)).astype(float)):
        np.testing.assert_array_equal(M.matvec(x), O.matvec(x))  # integer data: exact
        np.testing.assert_array_equal(M.matvec(x), D @ x)
    for y in (rng.integers(0, 9, size=k).astype(float), rng.integers(0, 9, size=(k, 2)).astype(float)):
        np.testing.assert_array_equal(M.rmatvec(y), O.rmatvec(y))
        np.testing.assert_array_equal(M.rmatvec(y), D.T @ y)
    x, y = rng.standard_normal((n, 4)), rng.standard_normal(k)
    np.testing.assert_allclose(M.matvec(x), D @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(M.rmatvec(y), D.T @ y, rtol=1e-12, atol=1e-12)
    G = M.gram()
    assert isinstance(G, MarginalGram) and G.shape == (n, n)
    np.testing.assert_allclose(G.dense(), D.T @ D, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(G.dense(), O.gram().dense(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(G.matvec(x), D.T @ (D @ x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(G.rmatvec(x[:, 0]), D.T @ (D @ x[:, 0]), rtol=1e-12, atol=1e-12)
    assert G.fingerprint() == GramWorkload(M).fingerprint()


@pytest.mark.parametrize("sizes, subsets, weights", FAMILIES, ids=IDS)
def test_fingerprint_equals_old_construction(sizes, subsets, weights):
    M = MarginalWorkload(sizes, subsets, weights)
    O = old_construction(sizes, subsets, weights)
    assert M.fingerprint() == O.fingerprint()
    assert M._lazy_blocks is None  # the fingerprint never builds the blocks
    assert [b.fingerprint() for b in M.blocks] == [b.fingerprint() for b in O.blocks]
    assert [b.shape for b in M.blocks] == [b.shape for b in O.blocks]
    # inside a generic stack: flattened like the old blocks, with or without neighbours
    assert VStackWorkload([M]).fingerprint() == O.fingerprint()
    P = prefix(M.shape[1])
    assert VStackWorkload([P, M]).fingerprint() == VStackWorkload([P, *O.blocks]).fingerprint()


def test_fingerprint_many_random_families():
    rng = np.random.default_rng(1)
    for _ in range(40):
        d = int(rng.integers(1, 6))
        sizes = tuple(int(s) for s in rng.integers(1, 5, size=d))
        count = int(rng.integers(1, 7))
        subsets = [tuple(sorted(rng.choice(d, size=int(rng.integers(0, d + 1)), replace=False).tolist()))
                   for _ in range(count)]
        weights = [float(rng.choice([1.0, 0.5, 2.0, 3.7])) for _ in range(count)]
        M = MarginalWorkload(sizes, subsets, weights)
        assert M.fingerprint() == old_construction(sizes, subsets, weights).fingerprint()


def test_builders_match_old_construction():
    for sizes in [(2, 3, 4), (3, 1, 2, 2), (7,), (2,) * 6]:
        d = len(sizes)
        for way in range(d + 1):
            M = marginals(sizes, way)
            subsets = list(combinations(range(d), way))
            assert isinstance(M, MarginalWorkload) and M.subsets == tuple(subsets)
            assert M.fingerprint() == old_construction(sizes, subsets).fingerprint()
            U = marginals_upto(sizes, way)
            up = [s for w in range(way + 1) for s in combinations(range(d), w)]
            assert U.subsets == tuple(up) and U.weights == (1.0,) * len(up)
            assert U.fingerprint() == old_construction(sizes, up).fingerprint()
    sizes = tuple(2 + (j % 9) for j in range(30))  # a mid-size family
    subsets = list(combinations(range(30), 2))
    assert marginals(sizes, 2).fingerprint() == old_construction(sizes, subsets).fingerprint()


def test_structure_and_lazy_blocks():
    sizes = (3, 1, 4)
    M = MarginalWorkload(Domain(["a", "b", "c"], sizes), [(0, 2), (1,), (0,)], [2.0, 1.0, 2.0])
    assert M.marginal_structure() == (sizes, ((0, 2), (1,), (0,)), (2.0, 1.0, 2.0))
    assert M.row_offsets == (0, 12, 13, 16) and [M.block_rows(b) for b in range(3)] == [12, 1, 3]
    assert M.num_blocks == 3 and M.shape == (16, 12)
    assert isinstance(M, VStackWorkload) and M._lazy_blocks is None
    blocks = M.blocks
    assert blocks is M.blocks and len(blocks) == 3
    assert all(isinstance(b, KronWorkload) for b in blocks)
    w0, i3, t1, i4 = blocks[0].factors
    assert isinstance(w0, DenseWorkload) and w0.matrix.tolist() == [[2.0]]
    assert blocks[2].factors[0] is w0 and blocks[2].factors[1] is i3  # shared leaves
    assert len(blocks[1].factors) == 3 and blocks[1].factors[2] is blocks[2].factors[3]
    assert "3 blocks" in repr(M) and "weighted" in repr(M)


def test_huge_domain_is_never_allocated():
    M = marginals([1000] * 40, 1)
    assert M.shape == (40 * 1000, 1000 ** 40)
    assert workload_axes(M) == {(1000,) * 40}
    assert M._lazy_blocks is None
    with pytest.raises(WorkloadError, match="densify"):
        M.dense()


def test_constructor_validation():
    with pytest.raises(WorkloadError, match="strictly increasing"):
        MarginalWorkload((2, 3), [(1, 0)])
    with pytest.raises(WorkloadError, match="strictly increasing"):
        MarginalWorkload((2, 3), [(0, 0)])
    with pytest.raises(WorkloadError, match="strictly increasing"):
        MarginalWorkload((2, 3), [(2,)])
    with pytest.raises(WorkloadError, match="integer"):
        MarginalWorkload((2, 3), [(0.5,)])
    with pytest.raises(WorkloadError, match="at least one"):
        MarginalWorkload((2, 3), [])
    with pytest.raises(WorkloadError, match="one per subset"):
        MarginalWorkload((2, 3), [(0,)], [1.0, 2.0])
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(WorkloadError, match="finite and > 0"):
            MarginalWorkload((2, 3), [(0,)], [bad])
    with pytest.raises(WorkloadError, match="positive"):
        MarginalWorkload((2, 0), [(0,)])
    with pytest.raises(WorkloadError, match="blocks"):
        marginals([2] * 1000, 3)
    with pytest.raises(WorkloadError, match="scaled weight"):
        MarginalWorkload((2,), [(0,)], [1e300]).scaled(1e300)


def test_domain_checks_and_embedded_files_do_not_build_blocks():
    M = marginals([2, 1, 3], 2)
    check_workload_axes(M, Domain(["a", "b", "c"], [2, 1, 3]))
    check_workload_axes(M, Domain(["a", "c"], [2, 3]))
    from workloads import DomainError
    with pytest.raises(DomainError):
        check_workload_axes(M, Domain(["a"], [6]))
    assert embedded_files(M) == {}
    assert M._lazy_blocks is None


# --------------------------------------------------------------------------- spec language
def test_spec_builds_one_object():
    W = parse_workload("marginals:2x3x4:2")
    assert isinstance(W, MarginalWorkload) and W.spec == "marginals:2x3x4:2"
    assert W.fingerprint() == old_construction((2, 3, 4), list(combinations(range(3), 2))).fingerprint()
    U = parse_workload("marginals_upto : 2x3x4 : 1")
    assert isinstance(U, MarginalWorkload) and U.spec == "marginals_upto:2x3x4:1"
    assert U.subsets == ((), (0,), (1,), (2,))


def test_scale_of_a_family():
    W = parse_workload("scale(2.5,marginals:2x3x4:1)")
    assert isinstance(W, MarginalWorkload) and W.weights == (2.5, 2.5, 2.5)
    assert W.spec == "scale(2.5,marginals:2x3x4:1)"
    np.testing.assert_array_equal(W.dense(), 2.5 * marginals([2, 3, 4], 1).dense())
    subsets = [(0,), (1,), (2,)]
    assert W.fingerprint() == old_construction((2, 3, 4), subsets, [2.5] * 3).fingerprint()
    # round trip of the normalized spec, spelling variants, nesting multiplies weights
    assert parse_workload(W.spec).fingerprint() == W.fingerprint()
    assert parse_workload("scale( 2.50 , marginals:2x3x4:1 )").spec == W.spec
    assert parse_workload("scale(25e-1,marginals:2x3x4:1)").fingerprint() == W.fingerprint()
    assert parse_workload("scale(2.0,marginals:2x3x4:1)").spec == "scale(2,marginals:2x3x4:1)"
    nested = parse_workload("scale(2,scale(.5,marginals:2x3x4:1))")
    assert nested.weights == (1.0, 1.0, 1.0)
    assert nested.fingerprint() == marginals([2, 3, 4], 1).fingerprint()
    one = parse_workload("scale(1,marginals:2x3x4:1)")
    assert one.spec == "marginals:2x3x4:1"


def test_scale_of_other_workloads():
    W = parse_workload("scale(3,prefix:4)")
    assert isinstance(W, KronWorkload) and W.spec == "scale(3,prefix:4)"
    assert W.fingerprint() == KronWorkload([DenseWorkload([[3.0]]), prefix(4)]).fingerprint()
    np.testing.assert_array_equal(W.dense(), 3 * prefix(4).dense())
    S = parse_workload("scale(3,vstack(prefix:4,identity:4))")
    expected = VStackWorkload([KronWorkload([DenseWorkload([[3.0]]), prefix(4)]),
                               KronWorkload([DenseWorkload([[3.0]]), identity(4)])])
    assert S.fingerprint() == expected.fingerprint()
    np.testing.assert_array_equal(S.dense(), expected.dense())
    assert parse_workload(S.spec).fingerprint() == S.fingerprint()
    # a stack holding a family: the family scales its weights
    mixed = parse_workload("scale(2,vstack(marginals:2x2:1,prefix:4))")
    assert isinstance(mixed, VStackWorkload) and not isinstance(mixed, MarginalWorkload)
    fam = mixed.blocks[0]
    assert isinstance(fam, MarginalWorkload) and fam.weights == (2.0, 2.0)
    np.testing.assert_array_equal(mixed.dense(), 2 * np.vstack([marginals([2, 2], 1).dense(), prefix(4).dense()]))
    assert mixed.fingerprint() == VStackWorkload(
        [*old_construction((2, 2), [(0,), (1,)], [2.0, 2.0]).blocks,
         KronWorkload([DenseWorkload([[2.0]]), prefix(4)])]).fingerprint()


def test_vstack_of_families_collapses():
    spec = "vstack(marginals:2x3x4:1,scale(2,marginals:2x3x4:2),marginals:2x3x4:1)"
    W = parse_workload(spec)
    assert isinstance(W, MarginalWorkload) and W.spec == spec
    ones, pairs = list(combinations(range(3), 1)), list(combinations(range(3), 2))
    assert W.subsets == tuple(ones + pairs + ones)
    assert W.weights == (1.0,) * 3 + (2.0,) * 3 + (1.0,) * 3
    generic = VStackWorkload([marginals([2, 3, 4], 1), marginals([2, 3, 4], 2).scaled(2.0),
                              marginals([2, 3, 4], 1)])
    assert not isinstance(generic, MarginalWorkload)
    assert W.fingerprint() == generic.fingerprint()
    assert W.fingerprint() == old_construction((2, 3, 4), ones + pairs + ones, W.weights).fingerprint()
    np.testing.assert_array_equal(W.dense(), generic.dense())
    assert parse_workload(W.spec).fingerprint() == W.fingerprint()
    # one part: still a new object with the part's matrix
    single = parse_workload("vstack(marginals:2x3:1)")
    assert isinstance(single, MarginalWorkload) and single.spec == "vstack(marginals:2x3:1)"
    assert single.fingerprint() == parse_workload("marginals:2x3:1").fingerprint()
    # different sizes (same N) or other parts: a plain stack
    other = parse_workload("vstack(marginals:2x3:1,marginals:6:1)")
    assert type(other) is VStackWorkload
    np.testing.assert_array_equal(other.dense(), np.vstack([marginals([2, 3], 1).dense(), np.eye(6)]))


def test_python_compose_api():
    M = marginals([2, 3], 1)
    assert scale_workload(1, M) is M
    assert scale_workload(4, M).weights == (4.0, 4.0)
    stacked = vstack_workloads([M, scale_workload(0.5, M)])
    assert isinstance(stacked, MarginalWorkload) and stacked.weights == (1.0, 1.0, 0.5, 0.5)
    assert type(vstack_workloads([M, prefix(6)])) is VStackWorkload
    with pytest.raises(WorkloadError):
        scale_workload(0, M)
    with pytest.raises(WorkloadError, match="outside"):
        scale_workload(1e6, scale_workload(1e7, M))


BAD_WEIGHTS = [
    ("scale(0,marginals:2x3:1)", 6, "> 0"),
    ("scale(0.0e5,marginals:2x3:1)", 6, "> 0"),
    ("scale(-1,marginals:2x3:1)", 6, "positive decimal weight"),
    ("scale(inf,marginals:2x3:1)", 6, "positive decimal weight"),
    ("scale(nan,marginals:2x3:1)", 6, "positive decimal weight"),
    ("scale(1e999,marginals:2x3:1)", 6, "finite"),
    ("scale(1e13,marginals:2x3:1)", 6, "outside"),
    ("scale(1e-13,prefix:3)", 6, "outside"),
    ("scale(" + "1" * 70 + ",prefix:3)", 6, "longer than"),
    ("scale(2 marginals:2x3:1)", 8, "','"),
    ("scale(2,)", 8, "argument 2"),
    ("scale(2,prefix:3,prefix:3)", 16, "')'"),
    ("scale(1e7,scale(1e7,marginals:2x3:1))", 0, "outside"),
]


@pytest.mark.parametrize("spec, position, fragment", BAD_WEIGHTS, ids=[b[0][:40] for b in BAD_WEIGHTS])
def test_bad_weights_refused(spec, position, fragment):
    with pytest.raises(WorkloadSpecError) as info:
        parse_workload(spec)
    assert fragment in str(info.value)
    assert info.value.position == position
    assert "scale(W,SPEC)" in str(info.value)  # the accepted forms list it


def test_large_families_build_fast_and_huge_ones_are_refused_quickly():
    W = parse_workload("marginals:" + "x".join(["2"] * 100) + ":3")
    assert isinstance(W, MarginalWorkload)
    assert W.num_blocks == math.comb(100, 3) == 161_700
    assert W.shape == (161_700 * 8, 2 ** 100)
    assert W._lazy_blocks is None
    U = parse_workload("marginals_upto:" + "x".join(["2"] * 100) + ":3")
    assert U.num_blocks == 1 + 100 + 4950 + 161_700
    adult = parse_workload("marginals:85x9x100x16x7x15x6x5x2x100x100x99x42x2:2")
    assert adult.num_blocks == 91 and adult.shape[1] == math.prod(
        [85, 9, 100, 16, 7, 15, 6, 5, 2, 100, 100, 99, 42, 2])
    # more than 2^24 blocks (here ~1.3e9): refused from the count, nothing enumerated
    with pytest.raises(WorkloadSpecError, match="blocks"):
        parse_workload("marginals:" + "x".join(["2"] * 2000) + ":3")
    with pytest.raises(WorkloadSpecError, match="blocks"):
        parse_workload("marginals_upto:" + "x".join(["2"] * 5000) + ":2500")
    # under the block limit but over the spec's memory budget (blocks · (way + 16) words)
    big = math.comb(350, 3)
    assert big <= MAX_MARGINAL_BLOCKS and big * 19 > MAX_SPEC_ENTRIES
    with pytest.raises(WorkloadSpecError, match="entries"):
        parse_workload("marginals:" + "x".join(["2"] * 350) + ":3")
