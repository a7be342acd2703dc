"""Builders of ``workloads`` against explicit loops and independent computations."""

from __future__ import annotations

from itertools import combinations, product

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from tests.hostile_files import write_object_npy
from workloads import (
    DenseWorkload,
    Domain,
    KronWorkload,
    SparseWorkload,
    VStackWorkload,
    WorkloadError,
    allrange,
    from_file,
    hadamard,
    identity,
    marginals,
    marginals_upto,
    parity,
    prefix,
    prefix_nd,
    random,
    range_nd,
    total,
    width,
)

# --------------------------------------------------------------------------- 1-D


@pytest.mark.parametrize("n", [1, 2, 7])
def test_identity_total_prefix(n):
    np.testing.assert_array_equal(identity(n).dense(), np.eye(n))
    assert total(n).shape == (1, n)
    np.testing.assert_array_equal(total(n).dense(), np.ones((1, n)))
    expected = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            expected[i, j] = 1.0 if j <= i else 0.0
    np.testing.assert_array_equal(prefix(n).dense(), expected)
    h = np.arange(1.0, n + 1)
    np.testing.assert_array_equal(prefix(n).matvec(h), np.cumsum(h))


@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_all_range_double_loop(n):
    rows = []
    for i in range(n):
        for j in range(i, n):
            rows.append([1.0 if i <= c <= j else 0.0 for c in range(n)])
    w = allrange(n)
    assert w.shape == (n * (n + 1) // 2, n)
    np.testing.assert_array_equal(w.dense(), np.array(rows))


@pytest.mark.parametrize("n, w", [(1, 1), (5, 1), (5, 3), (6, 6), (9, 4)])
def test_width_range_loop(n, w):
    rows = [[1.0 if i <= c < i + w else 0.0 for c in range(n)] for i in range(n - w + 1)]
    got = width(n, w)
    assert got.shape == (n - w + 1, n)
    np.testing.assert_array_equal(got.dense(), np.array(rows))


def test_width_range_bad():
    with pytest.raises(WorkloadError, match="exceeds"):
        width(4, 5)
    with pytest.raises(WorkloadError):
        width(4, 0)


@pytest.mark.parametrize("builder", [identity, total, prefix, allrange, hadamard])
@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "3", None])
def test_bad_sizes(builder, bad):
    with pytest.raises(WorkloadError):
        builder(bad)


def test_numpy_ints_accepted():
    assert prefix(np.int64(4)).shape == (4, 4)
    assert all(type(s) is int for s in prefix(np.int32(3)).shape)


def test_builders_refuse_huge_explicit_matrices():
    with pytest.raises(WorkloadError, match="entries"):
        prefix(100_000)
    with pytest.raises(WorkloadError, match="entries"):
        allrange(1000)
    with pytest.raises(WorkloadError, match="entries"):
        random(100_000, 100_000, seed=1)


# --------------------------------------------------------------------------- products


def test_prefix_nd_and_range_nd():
    w = prefix_nd([3, 4])
    assert isinstance(w, KronWorkload) and w.shape == (12, 12)
    np.testing.assert_array_equal(w.dense(), np.kron(prefix(3).dense(), prefix(4).dense()))
    # orthant semantics: query (i0, i1) counts cells with c0 <= i0 and c1 <= i1
    rng = np.random.default_rng(0)
    h = rng.integers(0, 5, size=(3, 4)).astype(float)
    np.testing.assert_array_equal(w.matvec(h.ravel()), np.cumsum(np.cumsum(h, 0), 1).ravel())
    r = range_nd(Domain(["a", "b"], [2, 3]))
    assert r.shape == (3 * 6, 6)
    np.testing.assert_array_equal(r.dense(), np.kron(allrange(2).dense(), allrange(3).dense()))
    assert isinstance(prefix_nd([5]), KronWorkload)
    with pytest.raises(WorkloadError):
        prefix_nd([])
    with pytest.raises(WorkloadError):
        range_nd([2, 0])


def test_hadamard():
    for n in [1, 2, 4, 16]:
        w = hadamard(n)
        h = w.dense()
        assert h.shape == (n, n)
        np.testing.assert_array_equal(h @ h.T, n * np.eye(n))
        for r in range(n):
            for c in range(n):
                assert h[r, c] == (-1) ** bin(r & c).count("1")
    assert isinstance(hadamard(1), DenseWorkload)
    assert isinstance(hadamard(8), KronWorkload) and len(hadamard(8).factors) == 3
    with pytest.raises(WorkloadError, match="power of 2"):
        hadamard(12)


def test_random_pm1():
    a = random(5, 7, seed=3)
    b = random(5, 7, seed=3)
    c = random(5, 7, seed=4)
    assert a.shape == (5, 7)
    assert set(np.unique(a.dense())) <= {-1.0, 1.0}
    np.testing.assert_array_equal(a.dense(), b.dense())
    assert not np.array_equal(a.dense(), c.dense())
    expected = 2.0 * np.random.default_rng(3).integers(0, 2, size=(5, 7)) - 1.0
    np.testing.assert_array_equal(a.dense(), expected)
    with pytest.raises(TypeError):
        random(5, 7)  # seed is required
    with pytest.raises(WorkloadError):
        random(5, 7, seed=-1)
    with pytest.raises(WorkloadError):
        random(5, 7, seed=None)


# --------------------------------------------------------------------------- marginals, parity


def marginal_truth(hist: np.ndarray, subset: tuple[int, ...]) -> np.ndarray:
    others = tuple(j for j in range(hist.ndim) if j not in subset)
    return np.add.reduce(hist, axis=others).ravel() if others else hist.ravel()


@pytest.mark.parametrize("sizes, way", [([2, 3, 4], 2), ([2, 3, 4], 1), ([3, 2], 0), ([2, 2, 3], 3), ([5], 1)])
def test_marginals_counts(sizes, way):
    rng = np.random.default_rng(1)
    hist = rng.integers(0, 10, size=sizes).astype(float)
    w = marginals(sizes, way)
    subsets = list(combinations(range(len(sizes)), way))
    assert isinstance(w, VStackWorkload) and len(w.blocks) == len(subsets)
    assert all(isinstance(b, KronWorkload) for b in w.blocks)
    expected = np.concatenate([marginal_truth(hist, s) for s in subsets])
    assert w.shape == (expected.size, hist.size)
    np.testing.assert_allclose(w.matvec(hist.ravel()), expected)
    np.testing.assert_allclose(w.dense() @ hist.ravel(), expected)


def test_marginals_block_structure():
    w = marginals(Domain(["a", "b", "c"], [2, 3, 4]), 2)
    kinds = [[f.shape[0] > 1 and np.array_equal(f.dense(), np.eye(f.shape[0])) for f in b.factors]
             for b in w.blocks]  # identity factors where the block keeps the attribute
    assert kinds == [[True, True, False], [True, False, True], [False, True, True]]


def test_marginals_upto():
    sizes = [2, 3, 2]
    rng = np.random.default_rng(2)
    hist = rng.integers(0, 10, size=sizes).astype(float)
    w = marginals_upto(sizes, 2)
    subsets = [s for k in range(3) for s in combinations(range(3), k)]
    assert len(w.blocks) == len(subsets) == 7
    expected = np.concatenate([marginal_truth(hist, s) if s else [hist.sum()] for s in subsets])
    np.testing.assert_allclose(w.matvec(hist.ravel()), expected)
    assert w.shape[0] == 1 + (2 + 3 + 2) + (6 + 4 + 6)


def test_marginals_bad():
    with pytest.raises(WorkloadError, match="exceeds"):
        marginals([2, 2], 3)
    with pytest.raises(WorkloadError):
        marginals([2, 2], -1)
    with pytest.raises(WorkloadError):
        marginals_upto([2, 0], 1)
    with pytest.raises(WorkloadError):
        marginals("22", 1)


@pytest.mark.parametrize("d, way", [(1, 1), (3, 2), (4, 0), (4, 4), (5, 3)])
def test_parity_rows_explicit(d, way):
    points = list(product([0, 1], repeat=d))  # C order, attribute 0 slowest
    rows = []
    for subset in combinations(range(d), way):
        rows.append([float(np.prod([1 - 2 * x[i] for i in subset])) for x in points])
    w = parity(d, way)
    assert w.shape == (len(rows), 2**d)
    np.testing.assert_array_equal(w.dense(), np.array(rows))


def test_parity_bad():
    with pytest.raises(WorkloadError):
        parity(0, 0)
    with pytest.raises(WorkloadError):
        parity(3, 4)


def test_block_count_guard():
    with pytest.raises(WorkloadError, match="blocks"):
        parity(1000, 3)
    # marginal families are one object (MarginalWorkload): up to MAX_MARGINAL_BLOCKS = 2^24 blocks
    with pytest.raises(WorkloadError, match="blocks"):
        marginals_upto([2] * 1000, 3)
    assert marginals_upto([2] * 200, 3).num_blocks == 1 + 200 + 19900 + 1313400
    assert len(parity(60, 2).blocks) == 60 * 59 // 2


# --------------------------------------------------------------------------- files


def test_from_file_npy_csv(tmp_path):
    m = np.arange(12.0).reshape(3, 4) - 5.5
    np.save(tmp_path / "w.npy", m)
    w = from_file(tmp_path / "w.npy")
    assert isinstance(w, DenseWorkload)
    np.testing.assert_array_equal(w.dense(), m)
    np.save(tmp_path / "v.npy", np.array([1.0, 2.0, 3.0]))
    assert from_file(str(tmp_path / "v.npy")).shape == (1, 3)
    np.savetxt(tmp_path / "w.csv", m, delimiter=",")
    np.testing.assert_array_equal(from_file(tmp_path / "w.csv").dense(), m)
    (tmp_path / "col.csv").write_text("1\n2\n3\n")
    assert from_file(tmp_path / "col.csv").shape == (3, 1)
    (tmp_path / "UP.NPY").write_bytes((tmp_path / "w.npy").read_bytes())
    assert from_file(tmp_path / "UP.NPY").shape == (3, 4)


def test_from_file_mtx(tmp_path):
    m = sp.random(5, 6, density=0.3, random_state=3, format="coo")
    scipy.io.mmwrite(tmp_path / "s.mtx", m)
    w = from_file(tmp_path / "s.mtx")
    assert isinstance(w, SparseWorkload)
    np.testing.assert_allclose(w.dense(), m.toarray())
    d = np.arange(6.0).reshape(2, 3)
    scipy.io.mmwrite(tmp_path / "d.mtx", d)
    wd = from_file(tmp_path / "d.mtx")
    assert isinstance(wd, DenseWorkload)
    np.testing.assert_array_equal(wd.dense(), d)


def test_from_file_errors(tmp_path):
    with pytest.raises(WorkloadError, match="does not exist"):
        from_file(tmp_path / "missing.npy")
    (tmp_path / "w.txt").write_text("1,2\n")
    with pytest.raises(WorkloadError, match="unsupported"):
        from_file(tmp_path / "w.txt")
    write_object_npy(tmp_path / "obj.npy", (1,))
    with pytest.raises(WorkloadError, match="pickle"):
        from_file(tmp_path / "obj.npy")
    (tmp_path / "h.csv").write_text("a,b\n1,2\n")
    with pytest.raises(WorkloadError, match="numeric"):
        from_file(tmp_path / "h.csv")
    (tmp_path / "nan.csv").write_text("1,nan\n")
    with pytest.raises(WorkloadError, match="non-finite"):
        from_file(tmp_path / "nan.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(WorkloadError, match="non-empty"):
        from_file(tmp_path / "empty.csv")
    (tmp_path / "bad.mtx").write_text("not a matrix market file\n")
    with pytest.raises(WorkloadError, match="Matrix Market"):
        from_file(tmp_path / "bad.mtx")
    np.save(tmp_path / "c.npy", np.ones((2, 2)) * 1j)
    with pytest.raises(WorkloadError, match="real"):
        from_file(tmp_path / "c.npy")
