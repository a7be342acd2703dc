"""The fast paths the randomized end-to-end test relies on, against the
slow reference computations they replace and against exact arithmetic.

* ``privacy.sensitivity._replace_l1_rows``: the replace-one L1 sensitivity row by row over
  each row's support (O(N² + Σ nnz²)) instead of explicit differences of every column pair
  (O(N²·m), ``_replace_direct``). It must state the same number as the reference (so plans
  keep their calibration and old plans still verify) and never less than the exact maximum.
* ``pure_dp.candidates._dense_factorization``: ``R = W A⁺`` from one SVD of A instead of a
  least-squares solve with k right-hand sides; the same minimum-norm solution as ``lstsq``.
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest

S = importlib.import_module("factorize.privacy.sensitivity")


def _matrices(rng: np.random.Generator):
    """Strategies of every shape the planner measures: 0/1 trees and ranges, scaled ranges,
    sparse and dense positive, signed, identity (all pairs tie), near-duplicate columns."""
    for t in range(120):
        m, N = int(rng.integers(1, 30)), int(rng.integers(2, 40))
        kind = t % 6
        if kind == 0:
            A = (rng.random((m, N)) < 0.3) * 1.0
        elif kind == 1:
            A = rng.random((m, N)) * (rng.random((m, N)) < 0.3)
        elif kind == 2:
            A = rng.standard_normal((m, N)) * (rng.random((m, N)) < 0.5)
        elif kind == 3:
            A = np.vstack([np.eye(N), np.ones((1, N))]) / rng.choice([1.0, 3.0])
        elif kind == 4:
            A = np.zeros((m, N))
            for i in range(m):
                a, b = sorted(rng.integers(0, N, 2))
                A[i, a:b + 1] = rng.choice([1.0, 0.5, 3.0])
        else:
            A = np.tile(rng.random((m, 1)), (1, N))
            A[:, 0] += 1e-3
        yield A


def _exact_max_l1(S_: np.ndarray) -> Fraction:
    """``max_{x≠y} Σ|s_x − s_y|`` in exact rational arithmetic."""
    cols = [[Fraction(float(v)) for v in S_[:, j]] for j in range(S_.shape[1])]
    return max(sum((abs(a - b) for a, b in zip(cols[x], cols[y], strict=True)), Fraction(0))
               for x in range(len(cols)) for y in range(x + 1, len(cols)))


def test_l1_replace_rows_states_the_reference_value_and_bounds_the_exact_maximum() -> None:
    rng = np.random.default_rng(20261127)
    for A in _matrices(rng):
        Su, _ = S.unit_scaled(A)
        if not np.any(Su):
            continue
        reference = S._replace_direct(Su, "l1", S._DEFAULT_BLOCK_ELEMENTS)
        for block in (1 << 22, 7):  # one block, and many blocks of 7 columns' rows
            fast = S._replace_l1_rows(Su, block)
            assert fast == reference, (A.shape, fast, reference)
        exact = _exact_max_l1(Su)
        assert Fraction(reference) >= exact
        # and tight: within the reference's own rounding allowance (~2γ_{m+2} relative)
        assert float(reference) <= float(exact) * (1 + 1e-12) + 1e-300


def test_l1_replace_bound_is_certified_when_ties_defeat_the_recheck(monkeypatch) -> None:
    """With the re-check disabled (every pair a candidate) the bound itself is returned: still
    ≥ the exact maximum, and above the reference by at most its allowance λ·(c_x + c_y),
    λ ≈ 3·m·u relative to the largest column ℓ1 norms."""
    monkeypatch.setattr(S, "_L1_RECHECK_PAIRS", -1)
    monkeypatch.setattr(S, "_L1_RECHECK_MIN", -1)
    rng = np.random.default_rng(7)
    for A in _matrices(rng):
        Su, _ = S.unit_scaled(A)
        if not np.any(Su):
            continue
        fast = S._replace_l1_rows(Su, 1 << 22)
        assert Fraction(fast) >= _exact_max_l1(Su)
        reference = S._replace_direct(Su, "l1", S._DEFAULT_BLOCK_ELEMENTS)
        cmax = float(np.abs(Su).sum(axis=0).max())
        assert fast <= reference + 8 * (Su.shape[0] + 4) * 2.0 ** -52 * 2 * cmax


def test_replace_l1_sensitivity_takes_the_row_path(monkeypatch) -> None:
    """``replace_sensitivity`` and ``kron_sensitivity`` (L1) no longer form every column pair's
    difference (the O(N²·m) search that took seconds per plan command at N = 1024)."""
    def boom(*_a, **_k):
        raise AssertionError("explicit differences of every column pair")

    monkeypatch.setattr(S, "_replace_direct", boom)
    tree = np.vstack([np.eye(8), np.kron(np.eye(4), np.ones((1, 2))),
                      np.kron(np.eye(2), np.ones((1, 4))), np.ones((1, 8))])
    # leaves in different halves share only the root: 3 + 3 rows differ
    assert S.replace_sensitivity(tree, "l1").value == pytest.approx(6.0, rel=1e-12)
    # ⊗ I₃: columns with different second index have disjoint supports, 4 + 4
    value = S.kron_sensitivity([tree, np.eye(3)], "l1", "replace").value
    assert value == pytest.approx(8.0, rel=1e-12)


def test_dense_factorization_is_lstsqs_minimum_norm_solution(monkeypatch) -> None:
    cand = importlib.import_module("factorize.pure_dp.candidates")
    rng = np.random.default_rng(3)
    N = 12
    A = np.vstack([np.eye(N), rng.random((4, N))])
    W = rng.random((300, N)) @ np.diag(rng.random(N) + 0.5)
    expected = np.linalg.lstsq(A.T, W.T, rcond=None)[0].T
    monkeypatch.setattr(np.linalg, "lstsq", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("a least-squares solve with k right-hand sides")))
    fact = cand._dense_factorization(W, A)
    assert fact is not None
    R = fact.R_factors[0]
    assert np.max(np.abs(R - expected)) <= 1e-12 * np.max(np.abs(expected))
    assert np.max(np.abs(R @ A - W)) <= 1e-12 * np.max(np.abs(W))
    # rank-deficient A: rows of W outside its row space are refused, inside them kept
    B = np.vstack([np.ones((1, N)), np.eye(N)[:3], np.eye(N)[:3]])
    assert cand._dense_factorization(W, B) is None
    W_in = rng.random((50, 4)) @ B[:4]
    fact = cand._dense_factorization(W_in, B)
    assert fact is not None
    R = fact.R_factors[0]
    assert np.max(np.abs(R @ B - W_in)) <= 1e-12 * np.max(np.abs(W_in))
    # minimum norm: the two copies of each duplicated row share its weight equally
    assert np.allclose(R[:, 1:4], R[:, 4:7], rtol=0, atol=1e-12)
