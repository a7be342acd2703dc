"""The exact lattice measurement ``round(Ã h / γ)`` (``privacy.lattice``), dense and from the
non-zero cells only, against exact rational arithmetic (``fractions``): random strategies,
ties (half-integers, so the multi-modular fallback decides), huge values, and the sparse
contraction in chunks (``kron.kron_matvec_sparse``) against the dense product."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from factorize.kron import kron_matvec, kron_matvec_sparse
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.lattice import lattice_image, lattice_image_sparse, quantize


def exact_image(factors, h, grid):
    """round_half_even(Ã h / γ) in rationals, Ã = ⊗ quantize(F)."""
    M = np.array([[1.0]])
    for F in factors:
        M = np.kron(M, quantize(F).measured)  # exact: products of dyadic rationals < 2^106 bits? checked below
    out = []
    for row in range(M.shape[0]):
        s = Fraction(0)
        for c in np.flatnonzero(h):
            s += Fraction(float(M[row, c])) * int(h[c])
        out.append(round(s / Fraction(grid)))
    return out


def exact_image_factors(factors, h, grid):
    """The same without forming Ã in floats: entries multiplied as rationals."""
    qs = [quantize(F).measured for F in factors]
    rows = [q.shape[0] for q in qs]
    cols = [q.shape[1] for q in qs]
    out = []
    nz = np.flatnonzero(h)
    for i in range(math.prod(rows)):
        ri = np.unravel_index(i, rows)
        s = Fraction(0)
        for c in nz:
            ci = np.unravel_index(c, cols)
            v = Fraction(1)
            for q, a, b in zip(qs, ri, ci, strict=True):
                v *= Fraction(float(q[a, b]))
            s += v * int(h[c])
        out.append(round(s / Fraction(grid)))
    return out


def sparse_form(h, cols):
    nz = np.flatnonzero(h)
    return np.stack(np.unravel_index(nz, cols), axis=1).astype(np.int64), h[nz].astype(np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_dense_and_sparse_equal_the_exact_rational_value(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    shapes = [(int(rng.integers(1, 4)), int(rng.integers(1, 5))) for _ in range(d)]
    scale = 2.0 ** float(rng.integers(-30, 30))
    factors = [rng.standard_normal(s) * scale for s in shapes]
    cols = [s[1] for s in shapes]
    N = math.prod(cols)
    h = np.zeros(N, dtype=np.int64)
    nz = rng.choice(N, size=int(rng.integers(1, N + 1)), replace=False)
    h[nz] = rng.integers(1, 10 ** int(rng.integers(1, 12)), size=nz.size)
    grid = 2.0 ** float(rng.integers(-20, 20))
    truth = exact_image_factors(factors, h, grid)
    dense = lattice_image(factors, h, grid)
    codes, counts = sparse_form(h, cols)
    sparse = lattice_image_sparse(factors, codes, counts, grid)
    assert [int(v) for v in dense] == truth
    assert [int(v) for v in sparse] == truth


@pytest.mark.parametrize("seed", range(10))
def test_ties_are_decided_exactly_half_to_even(seed):
    """Entries that are multiples of 1/2 with grid 1: many coordinates are exact ties, which
    the float path cannot decide; the multi-modular path rounds them half to even."""
    rng = np.random.default_rng(100 + seed)
    factors = [rng.integers(-3, 4, size=(3, 4)) * 0.5 + 0.0, rng.integers(-3, 4, size=(2, 3)) + 0.0]
    factors[0][0, 0] = 1.5  # the largest entry fixes the quantization exponent
    cols = [4, 3]
    h = rng.integers(0, 5, size=12).astype(np.int64)
    h[0] = max(h[0], 1)
    truth = exact_image(factors, h, 1.0)
    assert [int(v) for v in lattice_image(factors, h, 1.0)] == truth
    codes, counts = sparse_form(h, cols)
    assert [int(v) for v in lattice_image_sparse(factors, codes, counts, 1.0)] == truth


def test_huge_values_go_to_python_integers():
    factors = [np.array([[2.0 ** 60, 1.0]]), np.array([[3.0, 2.0 ** 40]])]
    h = np.array([0, 7, 5, 9], dtype=np.int64)
    truth = exact_image_factors(factors, h, 2.0 ** -10)
    codes, counts = sparse_form(h, [2, 2])
    got = lattice_image_sparse(factors, codes, counts, 2.0 ** -10)
    assert got.dtype == object and [int(v) for v in got] == truth
    assert [int(v) for v in lattice_image(factors, h, 2.0 ** -10)] == truth


@pytest.mark.parametrize("max_entries", [1, 7, 64, 10 ** 6])
def test_sparse_product_in_chunks_equals_the_dense_product(max_entries):
    rng = np.random.default_rng(7)
    cols = [5, 1, 7, 3]
    factors = [rng.standard_normal((r, n)) for r, n in zip([2, 3, 4, 2], cols, strict=True)]
    h = np.zeros(math.prod(cols))
    nz = rng.choice(h.size, 40, replace=False)
    h[nz] = rng.integers(1, 50, 40)
    codes, counts = sparse_form(h.astype(np.int64), cols)
    got = kron_matvec_sparse(factors, codes, counts.astype(float), max_entries=max_entries)
    assert np.allclose(got, kron_matvec(factors, h), rtol=1e-12, atol=1e-10)


def test_sparse_input_is_validated():
    F = [np.eye(2), np.eye(3)]
    with pytest.raises(PrivacyError, match="outside"):
        lattice_image_sparse(F, np.array([[0, 3]]), np.array([1]), 1.0)
    with pytest.raises(PrivacyError, match="negative"):
        lattice_image_sparse(F, np.array([[0, 1]]), np.array([-1]), 1.0)
    with pytest.raises(PrivacyError, match="one column per factor"):
        lattice_image_sparse(F, np.array([[0, 1, 0]]), np.array([1]), 1.0)
    with pytest.raises(PrivacyError, match="power of two"):
        lattice_image_sparse(F, np.array([[0, 1]]), np.array([1]), 3.0)
