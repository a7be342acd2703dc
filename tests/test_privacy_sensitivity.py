"""Tests for factorize.privacy.sensitivity against brute force over all neighbours."""

import itertools
import json

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from factorize.privacy.guarantees import Neighbouring, PrivacyError
from factorize.privacy.sensitivity import (
    Sensitivity,
    add_remove_sensitivity,
    column_norms,
    kron_sensitivity,
    replace_sensitivity,
    replace_sensitivity_bound,
    sensitivity,
)

ORD = {"l1": 1, "l2": 2}


def brute_add_remove(A, norm):
    N = A.shape[1]
    return max(np.linalg.norm(A @ np.eye(N)[:, x], ORD[norm]) for x in range(N))


def brute_replace(A, norm):
    N = A.shape[1]
    best = 0.0
    for x, y in itertools.permutations(range(N), 2):
        d = np.zeros(N)
        d[x], d[y] = 1.0, -1.0
        best = max(best, np.linalg.norm(A @ d, ORD[norm]))
    return best


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("shape", [(1, 2), (3, 5), (7, 4), (5, 12)])
def test_exact_against_brute_force(norm, shape):
    rng = np.random.default_rng(100 * shape[0] + shape[1])
    for _ in range(3):
        A = rng.standard_normal(shape)
        ar = add_remove_sensitivity(A, norm)
        assert ar.relation is Neighbouring.ADD_REMOVE and ar.exact and ar.norm == norm
        assert ar.value == pytest.approx(brute_add_remove(A, norm), rel=1e-12)
        rp = replace_sensitivity(A, norm)
        assert rp.relation is Neighbouring.REPLACE and rp.exact
        assert rp.value == pytest.approx(brute_replace(A, norm), rel=1e-12)
        assert rp.value <= 2 * ar.value * (1 + 1e-12)


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_small_blocks_give_same_answer(norm):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 37))
    ref = brute_replace(A, norm)
    for block in [1, 5, 6 * 37, 10**9]:
        v = replace_sensitivity(A, norm, max_block_elements=block).value
        assert v == pytest.approx(ref, rel=1e-12)


def _tight_upper(value: float, exact: float, rel: float = 1e-14) -> bool:
    """A certified sensitivity: never below the exact value, at most ``rel`` above it."""
    return exact <= value <= exact * (1 + rel) + 1e-300


def test_known_values():
    """Closed forms; the certified values are upper bounds within 1e-14 of them."""
    N = 6
    I = np.eye(N)
    J = np.ones((3, N))
    assert _tight_upper(add_remove_sensitivity(I, "l2").value, 1.0)
    assert _tight_upper(replace_sensitivity(I, "l2").value, np.sqrt(2))
    assert _tight_upper(replace_sensitivity(I, "l1").value, 2.0)
    # all-ones: every column equal, replacing a record changes nothing
    assert _tight_upper(add_remove_sensitivity(J, "l2").value, np.sqrt(3))
    assert replace_sensitivity(J, "l2").value == 0.0
    assert replace_sensitivity(J, "l1").value == 0.0
    # prefix sums L_n: column j has n−j ones; replace max is ||a_0 − a_{n−1}|| = sqrt(n−1)
    L = np.tril(np.ones((N, N)))
    assert _tight_upper(add_remove_sensitivity(L, "l2").value, np.sqrt(N))
    assert _tight_upper(replace_sensitivity(L, "l2").value, np.sqrt(N - 1))
    assert _tight_upper(replace_sensitivity(L, "l1").value, N - 1)
    # single column: no pair x ≠ y
    assert replace_sensitivity(np.ones((4, 1)), "l2").value == 0.0


def test_replace_bound_and_dispatch():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((4, 9))
    b = replace_sensitivity_bound(A, "l2")
    assert not b.exact and b.relation is Neighbouring.REPLACE
    assert b.value == pytest.approx(2 * column_norms(A, "l2").max(), rel=1e-14)
    assert b.value >= 2 * brute_add_remove(A, "l2")
    assert replace_sensitivity(A, "l2", exact=False) == b
    assert sensitivity(A, "l1", "replace").value == pytest.approx(brute_replace(A, "l1"))
    assert sensitivity(A, "l2").value == pytest.approx(brute_add_remove(A, "l2"))
    assert sensitivity(A, "2", Neighbouring.REPLACE, exact=False).exact is False


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 5),
    N=st.integers(2, 7),
    seed=st.integers(0, 2**31),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
def test_replace_at_most_twice_add_remove(m, N, seed, scale):
    A = np.random.default_rng(seed).standard_normal((m, N)) * scale
    for norm in ("l1", "l2"):
        ar = add_remove_sensitivity(A, norm).value
        rp = replace_sensitivity(A, norm).value
        assert rp <= 2 * ar * (1 + 1e-12)
        assert rp == pytest.approx(brute_replace(A, norm), rel=1e-10)


def test_l2_replace_accurate_when_columns_nearly_equal():
    # Gram identity cancels badly here; the direct recomputation must rescue accuracy.
    rng = np.random.default_rng(11)
    base = rng.standard_normal((5, 1)) * 1e6
    A = base + 1e-3 * rng.standard_normal((5, 8))
    assert replace_sensitivity(A, "l2").value == pytest.approx(brute_replace(A, "l2"), rel=1e-6)


def test_sparse_input():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((6, 10)) * (rng.random((6, 10)) < 0.4)
    S = sp.csr_matrix(A)
    for norm in ("l1", "l2"):
        np.testing.assert_allclose(column_norms(S, norm), column_norms(A, norm), rtol=1e-14)
        assert add_remove_sensitivity(S, norm).value == pytest.approx(add_remove_sensitivity(A, norm).value)
        assert replace_sensitivity(S, norm).value == pytest.approx(brute_replace(A, norm))


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_kron_matches_dense(norm):
    rng = np.random.default_rng(17)
    factors = [rng.standard_normal((2, 3)), rng.standard_normal((3, 2)), np.tril(np.ones((4, 4)))]
    dense = factors[0]
    for F in factors[1:]:
        dense = np.kron(dense, F)
    ar = kron_sensitivity(factors, norm)
    assert ar.exact and ar.relation is Neighbouring.ADD_REMOVE
    assert ar.value == pytest.approx(add_remove_sensitivity(dense, norm).value, rel=1e-12)
    rp = kron_sensitivity(factors, norm, "replace")
    assert rp.exact
    assert rp.value == pytest.approx(replace_sensitivity(dense, norm).value, rel=1e-12)
    # too large for the dense routine: falls back to the (flagged) 2x bound
    big = kron_sensitivity(factors, norm, "replace", max_dense_columns=10)
    assert not big.exact and big.value == pytest.approx(2 * ar.value, rel=1e-12)
    assert big.value >= rp.value


def test_kron_large_add_remove_is_cheap():
    # N = 1000^3 = 1e9 columns: only the factors are touched.
    F = np.tril(np.ones((1000, 1000)))
    s = kron_sensitivity([F, F, F], "l2")
    assert s.value == pytest.approx(1000.0**1.5)
    r = kron_sensitivity([F, F, F], "l1", "replace")
    assert not r.exact and r.value == pytest.approx(2 * 1000.0**3)


def test_sensitivity_dataclass():
    s = Sensitivity(1.5, "l2", "replace", False)
    assert s.relation is Neighbouring.REPLACE
    assert float(s) == 1.5
    assert Sensitivity.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    for bad in [(-1, "l2", "replace", True), (np.inf, "l2", "replace", True), (1, "l3", "replace", True)]:
        with pytest.raises(PrivacyError):
            Sensitivity(*bad)
    with pytest.raises(PrivacyError):
        Sensitivity.from_dict({"value": 1})


def test_input_validation():
    with pytest.raises(PrivacyError):
        add_remove_sensitivity(np.ones(3))
    with pytest.raises(PrivacyError):
        add_remove_sensitivity(np.array([[np.nan, 1.0]]))
    with pytest.raises(PrivacyError):
        add_remove_sensitivity(np.ones((2, 2)), "linf")
    with pytest.raises(PrivacyError):
        kron_sensitivity([])
