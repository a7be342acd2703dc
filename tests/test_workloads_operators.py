"""Operators of ``workloads.operators`` against independent dense truth (np.kron, np.vstack)."""

from __future__ import annotations

import hashlib
import math
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workloads import (
    DEFAULT_MAX_DENSE_ENTRIES,
    DenseTooLargeError,
    DenseWorkload,
    GramWorkload,
    KronWorkload,
    SparseWorkload,
    SumWorkload,
    VStackWorkload,
    Workload,
    WorkloadError,
    identity,
    parse_workload,
    prefix,
)


def rand(rng: np.random.Generator, k: int, n: int) -> np.ndarray:
    return rng.standard_normal((k, n))


# --------------------------------------------------------------------------- Dense / Sparse


class TestDense:
    def test_basic_products(self):
        rng = np.random.default_rng(0)
        m = rand(rng, 3, 5)
        w = DenseWorkload(m)
        assert w.shape == (3, 5) and all(type(s) is int for s in w.shape)
        x = rng.standard_normal(5)
        np.testing.assert_allclose(w.matvec(x), m @ x)
        xm = rng.standard_normal((5, 4))
        np.testing.assert_allclose(w.matvec(xm), m @ xm)
        y = rng.standard_normal(3)
        np.testing.assert_allclose(w.rmatvec(y), m.T @ y)
        ym = rng.standard_normal((3, 2))
        np.testing.assert_allclose(w.rmatvec(ym), m.T @ ym)

    def test_copy_and_read_only(self):
        m = np.arange(6.0).reshape(2, 3)
        w = DenseWorkload(m)
        m[0, 0] = 100.0
        assert w.matrix[0, 0] == 0.0
        with pytest.raises(ValueError):
            w.matrix[0, 0] = 1.0
        d = w.dense()
        assert d.dtype == np.float64 and d.flags.c_contiguous and d.flags.writeable
        d[0, 0] = 7.0
        assert w.matrix[0, 0] == 0.0

    def test_fortran_and_int_input(self):
        m = np.asfortranarray(np.arange(12).reshape(3, 4))
        d = DenseWorkload(m).dense()
        assert d.flags.c_contiguous and d.dtype == np.float64
        np.testing.assert_array_equal(d, m)

    @pytest.mark.parametrize(
        "bad, fragment",
        [
            (np.array([[1.0, np.nan]]), "non-finite"),
            (np.array([[1.0, np.inf], [-np.inf, 0.0]]), "2 non-finite"),
            (np.ones(3), "2-D"),
            (np.ones((2, 2, 2)), "2-D"),
            (np.ones((0, 3)), "non-empty"),
            (np.ones((2, 2)) * 1j, "real"),
            (np.array([["a", "b"]]), "numeric"),
            (sp.identity(2), "SparseWorkload"),
        ],
    )
    def test_validation(self, bad, fragment):
        with pytest.raises(WorkloadError, match=fragment):
            DenseWorkload(bad)

    def test_errors_are_value_errors(self):
        with pytest.raises(ValueError):
            DenseWorkload(np.array([[np.nan]]))

    def test_operand_shape_checked(self):
        w = DenseWorkload(np.ones((2, 3)))
        with pytest.raises(WorkloadError, match="N=3"):
            w.matvec(np.ones(2))
        with pytest.raises(WorkloadError, match="k=2"):
            w.rmatvec(np.ones((3, 1)))
        with pytest.raises(WorkloadError):
            w.matvec(np.ones((3, 1, 1)))


class TestSparse:
    def test_products_and_csr(self):
        rng = np.random.default_rng(1)
        m = sp.random(6, 7, density=0.4, random_state=2, format="coo")
        w = SparseWorkload(m)
        assert isinstance(w.matrix, sp.csr_array)
        dense = m.toarray()
        x = rng.standard_normal((7, 3))
        np.testing.assert_allclose(w.matvec(x), dense @ x)
        np.testing.assert_allclose(w.matvec(x[:, 0]), dense @ x[:, 0])
        y = rng.standard_normal((6, 2))
        np.testing.assert_allclose(w.rmatvec(y), dense.T @ y)
        np.testing.assert_array_equal(w.dense(), dense)
        assert isinstance(w.matvec(x), np.ndarray)

    def test_duplicates_summed(self):
        m = sp.coo_matrix(([1.0, 2.0], ([0, 0], [1, 1])), shape=(2, 2))
        np.testing.assert_array_equal(SparseWorkload(m).dense(), [[0.0, 3.0], [0.0, 0.0]])

    @pytest.mark.parametrize(
        "bad, fragment",
        [
            (sp.csr_matrix(np.array([[np.nan, 1.0]])), "non-finite"),
            (sp.csr_matrix((0, 3)), "non-empty"),
            (np.eye(2), "scipy.sparse"),
            (sp.csr_matrix(np.eye(2) * 1j), "real"),
        ],
    )
    def test_validation(self, bad, fragment):
        with pytest.raises(WorkloadError, match=fragment):
            SparseWorkload(bad)


# --------------------------------------------------------------------------- Kron / VStack


def kron_dense(mats):
    out = mats[0]
    for m in mats[1:]:
        out = np.kron(out, m)
    return out


class TestKron:
    @pytest.mark.parametrize("dims", [[(2, 3), (4, 2)], [(3, 3), (1, 4), (2, 5)], [(5, 2)], [(1, 1), (3, 2)]])
    def test_against_np_kron(self, dims):
        rng = np.random.default_rng(3)
        mats = [rand(rng, k, n) for k, n in dims]
        w = KronWorkload([DenseWorkload(m) for m in mats])
        truth = kron_dense(mats)
        assert w.shape == truth.shape
        np.testing.assert_allclose(w.dense(), truth, rtol=1e-13, atol=1e-13)
        x = rng.standard_normal(truth.shape[1])
        np.testing.assert_allclose(w.matvec(x), truth @ x, rtol=1e-12, atol=1e-12)
        assert w.matvec(x).shape == (truth.shape[0],)
        xm = rng.standard_normal((truth.shape[1], 3))
        np.testing.assert_allclose(w.matvec(xm), truth @ xm, rtol=1e-12, atol=1e-12)
        y = rng.standard_normal(truth.shape[0])
        np.testing.assert_allclose(w.rmatvec(y), truth.T @ y, rtol=1e-12, atol=1e-12)
        ym = rng.standard_normal((truth.shape[0], 2))
        out = w.rmatvec(ym)
        assert out.shape == (truth.shape[1], 2) and out.flags.c_contiguous
        np.testing.assert_allclose(out, truth.T @ ym, rtol=1e-12, atol=1e-12)

    def test_mixed_nested_factors(self):
        rng = np.random.default_rng(4)
        a = rand(rng, 2, 3)
        b = sp.random(3, 2, density=0.7, random_state=5)
        c = rand(rng, 4, 2)
        inner = KronWorkload([SparseWorkload(b), DenseWorkload(c)])
        w = KronWorkload([DenseWorkload(a), inner])
        truth = np.kron(a, np.kron(b.toarray(), c))
        np.testing.assert_allclose(w.dense(), truth, atol=1e-13)
        x = rng.standard_normal((truth.shape[1], 2))
        np.testing.assert_allclose(w.matvec(x), truth @ x, atol=1e-12)
        y = rng.standard_normal((truth.shape[0], 3))
        np.testing.assert_allclose(w.rmatvec(y), truth.T @ y, atol=1e-12)
        np.testing.assert_allclose(w.gram().dense(), truth.T @ truth, atol=1e-12)

    def test_gram_is_kron_of_grams(self):
        rng = np.random.default_rng(6)
        mats = [rand(rng, 3, 2), rand(rng, 2, 3)]
        w = KronWorkload([DenseWorkload(m) for m in mats])
        g = w.gram()
        assert isinstance(g, KronWorkload) and g.shape == (6, 6)
        truth = kron_dense(mats)
        np.testing.assert_allclose(g.dense(), truth.T @ truth, atol=1e-12)

    def test_array_factors_are_wrapped(self):
        w = KronWorkload([np.eye(2), sp.identity(3)])
        assert isinstance(w.factors[0], DenseWorkload) and isinstance(w.factors[1], SparseWorkload)
        np.testing.assert_array_equal(w.dense(), np.eye(6))

    @pytest.mark.parametrize("bad", [[], "abc", np.eye(2), 3, [None]])
    def test_bad_factors(self, bad):
        with pytest.raises(WorkloadError):
            KronWorkload(bad)

    def test_huge_shape_python_ints(self):
        w = KronWorkload([identity(10)] * 19)
        assert w.shape == (10**19, 10**19)
        assert all(type(s) is int for s in w.shape)
        with pytest.raises(DenseTooLargeError):
            w.dense()
        assert len(w.fingerprint()) == 64


class TestVStack:
    def test_against_np_vstack(self):
        rng = np.random.default_rng(7)
        mats = [rand(rng, 2, 6), rand(rng, 1, 6), rand(rng, 4, 6)]
        w = VStackWorkload([DenseWorkload(mats[0]), SparseWorkload(sp.csr_matrix(mats[1])),
                            KronWorkload([DenseWorkload(mats[2][:2, :2]), DenseWorkload(np.ones((2, 3)))])])
        mats[2] = np.kron(mats[2][:2, :2], np.ones((2, 3)))
        truth = np.vstack(mats)
        assert w.shape == truth.shape
        assert w.row_offsets == (0, 2, 3, 7)
        np.testing.assert_allclose(w.dense(), truth)
        x = rng.standard_normal((6, 3))
        np.testing.assert_allclose(w.matvec(x), truth @ x, atol=1e-12)
        np.testing.assert_allclose(w.matvec(x[:, 0]), truth @ x[:, 0], atol=1e-12)
        y = rng.standard_normal((7, 2))
        np.testing.assert_allclose(w.rmatvec(y), truth.T @ y, atol=1e-12)
        np.testing.assert_allclose(w.rmatvec(y[:, 1]), truth.T @ y[:, 1], atol=1e-12)
        np.testing.assert_allclose(w.gram().dense(), truth.T @ truth, atol=1e-12)

    def test_mismatched_domain(self):
        with pytest.raises(WorkloadError, match="block 1 has N=4"):
            VStackWorkload([DenseWorkload(np.ones((2, 3))), DenseWorkload(np.ones((2, 4)))])

    def test_gram_structure(self):
        explicit = VStackWorkload([DenseWorkload(np.eye(3)), DenseWorkload(np.ones((1, 3)))])
        assert isinstance(explicit.gram(), DenseWorkload)
        np.testing.assert_allclose(explicit.gram().dense(), np.eye(3) + np.ones((3, 3)))
        structured = VStackWorkload([KronWorkload([np.eye(2), np.ones((1, 2))]),
                                     KronWorkload([np.ones((1, 2)), np.eye(2)])])
        g = structured.gram()
        assert isinstance(g, SumWorkload) and all(isinstance(t, KronWorkload) for t in g.terms)
        d = structured.dense()
        np.testing.assert_allclose(g.dense(), d.T @ d)

    def test_sparse_gram(self):
        eye = SparseWorkload(sp.identity(4, format="csr"))
        w = VStackWorkload([eye, eye])
        g = w.gram()
        assert isinstance(g, SparseWorkload)
        np.testing.assert_array_equal(g.dense(), 2 * np.eye(4))


class TestSumAndGram:
    def test_sum(self):
        rng = np.random.default_rng(8)
        a, b = rand(rng, 3, 4), rand(rng, 3, 4)
        s = SumWorkload([DenseWorkload(a), KronWorkload([DenseWorkload(b)])])
        np.testing.assert_allclose(s.dense(), a + b)
        x = rng.standard_normal((4, 2))
        np.testing.assert_allclose(s.matvec(x), (a + b) @ x)
        np.testing.assert_allclose(s.rmatvec(x[:3]), (a + b).T @ x[:3])
        with pytest.raises(WorkloadError, match="same shape"):
            SumWorkload([DenseWorkload(a), DenseWorkload(a.T)])

    def test_lazy_gram(self):
        rng = np.random.default_rng(9)
        a = rand(rng, 5, 3)
        g = GramWorkload(DenseWorkload(a))
        np.testing.assert_allclose(g.dense(), a.T @ a)
        np.testing.assert_allclose(g.dense(max_entries=9), a.T @ a)
        x = rng.standard_normal(3)
        np.testing.assert_allclose(g.matvec(x), a.T @ a @ x)
        np.testing.assert_allclose(g.rmatvec(x), a.T @ a @ x)
        # base too large to densify at this limit -> chunked identity columns
        np.testing.assert_allclose(g._dense(max_entries=4), a.T @ a)
        sg = SumWorkload([DenseWorkload(a), DenseWorkload(a)]).gram()
        assert isinstance(sg, GramWorkload)
        np.testing.assert_allclose(sg.dense(), 4 * a.T @ a)


# --------------------------------------------------------------------------- dense() limits


class TestDenseLimit:
    def test_refuses_without_allocating(self):
        w = parse_workload("kron(prefix:1024,prefix:1024,prefix:1024)")
        tracemalloc.start()
        try:
            with pytest.raises(DenseTooLargeError) as info:
                w.dense()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 1_000_000
        msg = str(info.value)
        n = 1024**3
        assert f"({n}, {n})" in msg and str(n * n) in msg and str(DEFAULT_MAX_DENSE_ENTRIES) in msg
        assert isinstance(info.value, ValueError)

    def test_custom_limit(self):
        w = DenseWorkload(np.ones((3, 4)))
        with pytest.raises(DenseTooLargeError, match="limit of 11"):
            w.dense(max_entries=11)
        assert w.dense(max_entries=12).shape == (3, 4)
        v = VStackWorkload([w, w])
        with pytest.raises(DenseTooLargeError, match=r"\(6, 4\)"):
            v.dense(max_entries=23)

    def test_bad_limit(self):
        with pytest.raises(WorkloadError):
            DenseWorkload(np.ones((1, 1))).dense(max_entries=-1)


# --------------------------------------------------------------------------- fingerprints


class TestFingerprint:
    def test_documented_dense_format(self):
        m = np.array([[1.0, -2.5], [0.0, 3.0], [4.0, 5.0]])
        h = hashlib.sha256()
        h.update(b"factorize.workloads.fingerprint.v1\x00dense\x003x2\x00")
        h.update(m.astype("<f8").tobytes())
        assert DenseWorkload(m).fingerprint() == h.hexdigest()

    @pytest.mark.parametrize("chunk", [1, 3, 5, 64])
    def test_chunked_hashing_matches_whole(self, monkeypatch, chunk):
        import workloads._hashing as ops

        rng = np.random.default_rng(11)
        m = rng.integers(-2, 3, size=(4, 7)).astype(float)
        m[0, 1] = -0.0
        whole = hashlib.sha256(b"factorize.workloads.fingerprint.v1\x00dense\x004x7\x00"
                               + (m + 0.0).astype("<f8").tobytes()).hexdigest()
        monkeypatch.setattr(ops, "_HASH_CHUNK_ENTRIES", chunk)
        assert DenseWorkload(m).fingerprint() == whole
        assert SparseWorkload(sp.csr_matrix(m)).fingerprint() == whole

    def test_pinned_value(self):
        # Pinned: must never change across runs, machines or releases of the format.
        assert identity(2).fingerprint() == DenseWorkload(np.eye(2)).fingerprint()
        assert identity(2).fingerprint() == (
            hashlib.sha256(b"factorize.workloads.fingerprint.v1\x00dense\x002x2\x00"
                           + np.eye(2).astype("<f8").tobytes()).hexdigest()
        )

    def test_equal_and_different(self):
        a = prefix(8)
        b = DenseWorkload(np.tril(np.ones((8, 8))))
        assert a.fingerprint() == b.fingerprint()
        assert SparseWorkload(sp.csr_matrix(np.tril(np.ones((8, 8))))).fingerprint() == a.fingerprint()
        c = np.tril(np.ones((8, 8)))
        c[7, 0] = 2.0
        assert DenseWorkload(c).fingerprint() != a.fingerprint()
        assert DenseWorkload(np.ones((2, 8))).fingerprint() != DenseWorkload(np.ones((4, 4))).fingerprint()
        assert DenseWorkload(np.array([[-0.0, 1.0]])).fingerprint() == DenseWorkload(np.array([[0.0, 1.0]])).fingerprint()
        assert a.fingerprint() != prefix(8).gram().fingerprint()

    def test_structured(self):
        p, q = prefix(3), identity(2)
        k1, k2 = KronWorkload([p, q]), KronWorkload([prefix(3), identity(2)])
        assert k1.fingerprint() == k2.fingerprint()
        assert k1.fingerprint() != KronWorkload([q, p]).fingerprint()
        assert KronWorkload([p, KronWorkload([q, p])]).fingerprint() == KronWorkload([p, q, p]).fingerprint()
        assert KronWorkload([p]).fingerprint() == p.fingerprint()
        v1, v2 = VStackWorkload([p, p]), VStackWorkload([prefix(3), prefix(3)])
        assert v1.fingerprint() == v2.fingerprint()
        assert v1.fingerprint() != VStackWorkload([p, DenseWorkload(np.eye(3))]).fingerprint()
        assert v1.fingerprint() != k1.fingerprint()
        assert all(len(f) == 64 and int(f, 16) >= 0 for f in (k1.fingerprint(), v1.fingerprint()))

    def test_independent_of_spec(self):
        a = parse_workload("prefix:8")
        assert a.fingerprint() == prefix(8).fingerprint()
        assert parse_workload("prefix:4x4").fingerprint() == KronWorkload([prefix(4), prefix(4)]).fingerprint()


def test_repr():
    w = parse_workload("kron(prefix:2,identity:3)")
    r = repr(w)
    assert r.startswith("KronWorkload(shape=(6, 6)") and "spec='kron(prefix:2,identity:3)'" in r
    assert "DenseWorkload(shape=(2, 2)" in r and "DenseWorkload(shape=(3, 3), spec='identity:3')" in r
    assert "SparseWorkload(shape=(65, 65)" in repr(identity(65))  # above DENSE_IDENTITY_MAX
    assert "blocks" in repr(VStackWorkload([prefix(2)] * 5))


# --------------------------------------------------------------------------- hypothesis


def reference(w: Workload) -> np.ndarray:
    """Dense matrix by an independent route: np.kron / np.vstack over the leaves."""
    if isinstance(w, DenseWorkload):
        return np.array(w.matrix)
    if isinstance(w, SparseWorkload):
        return w.matrix.toarray()
    if isinstance(w, KronWorkload):
        return kron_dense([reference(f) for f in w.factors])
    if isinstance(w, VStackWorkload):
        return np.vstack([reference(b) for b in w.blocks])
    raise AssertionError(type(w))


@st.composite
def workload_tree(draw, n: int | None = None, depth: int = 2):
    if n is None:
        n = draw(st.integers(1, 12))
    options = ["dense", "sparse"]
    if depth > 0:
        options += ["vstack"]
        if any(n % a == 0 for a in range(2, n)):
            options += ["kron", "kron"]
    kind = draw(st.sampled_from(options))
    if kind in ("dense", "sparse"):
        k = draw(st.integers(1, 4))
        vals = draw(st.lists(st.integers(-3, 3), min_size=k * n, max_size=k * n))
        m = np.array(vals, dtype=float).reshape(k, n)
        return DenseWorkload(m) if kind == "dense" else SparseWorkload(sp.csr_matrix(m))
    if kind == "vstack":
        count = draw(st.integers(1, 3))
        return VStackWorkload([draw(workload_tree(n, depth - 1)) for _ in range(count)])
    a = draw(st.sampled_from([a for a in range(2, n) if n % a == 0]))
    return KronWorkload([draw(workload_tree(a, depth - 1)), draw(workload_tree(n // a, depth - 1))])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(w=workload_tree(), m=st.integers(1, 3), data=st.data())
def test_random_compositions(w, m, data):
    truth = reference(w)
    k, n = truth.shape
    assert w.shape == (k, n)
    np.testing.assert_allclose(w.dense(), truth, atol=1e-9)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((n, m))
    y = rng.standard_normal((k, m))
    np.testing.assert_allclose(w.matvec(x), truth @ x, atol=1e-9)
    np.testing.assert_allclose(w.matvec(x[:, 0]), truth @ x[:, 0], atol=1e-9)
    np.testing.assert_allclose(w.rmatvec(y), truth.T @ y, atol=1e-9)
    np.testing.assert_allclose(w.rmatvec(y[:, 0]), truth.T @ y[:, 0], atol=1e-9)
    np.testing.assert_allclose(w.gram().dense(), truth.T @ truth, atol=1e-8)
    assert w.fingerprint() == w.fingerprint()
    assert math.prod(w.shape) == truth.size


@pytest.mark.parametrize("n", [1, 2, 7, 1025, 2048, 7072])
def test_identity_fingerprint_without_building_the_identity(n):
    """The marginal fingerprint's identity digests are computed without scipy
    (``_hashing.identity_fingerprint``): equal to the sparse identity's own fingerprint, on
    both sides of the dense-streaming limit (7072² > DEFAULT_MAX_DENSE_ENTRIES)."""
    from workloads import _hashing, identity
    from workloads.base import DEFAULT_MAX_DENSE_ENTRIES

    assert (n * n > DEFAULT_MAX_DENSE_ENTRIES) == (n == 7072)
    assert _hashing.identity_fingerprint(n, DEFAULT_MAX_DENSE_ENTRIES) == identity(n).fingerprint()


def test_the_run_path_imports_no_scipy_for_dense_workloads():
    """Building, fingerprinting and applying a dense workload and a marginal stack load no
    scipy (about 0.1 s of a `run`'s start-up): a fresh interpreter."""
    import subprocess
    import sys

    code = ("import sys; from workloads.spec import parse_workload; import numpy as np\n"
            "for s in ('prefix:8', 'marginals:3x2x4x2:2', 'parity:5:2', 'kron(prefix:4,total:2)'):\n"
            "    W = parse_workload(s); W.fingerprint(); W.matvec(np.ones(W.shape[1]))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
