"""``python -m benchmarks --suite hdmm_unions``: the pure parts, without HDMM.

Independent truths: the dense matrices of the spec atoms written out by hand (HDMM's
AllRange row order from ``itertools.combinations``), ``np.kron`` of the blocks against what
factorize's own spec parser builds from the exported spec (exactly), the error of a Kronecker
strategy against the dense formula ‖W A⁺‖_F² with ``np.linalg.pinv`` of the full product, and
the suite's refusal of a missing HDMM environment with the option to set.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np
import pytest

from benchmarks.external.hdmm_runner import (
    FactorStore,
    atom_spec,
    domain_string,
    kron_l1,
    kron_l2,
    kron_strategy_trace,
    scaled_atom_spec,
    union_spec,
)
from factorize.errors import EnvironmentProblem
from workloads.spec import parse_workload


def dense_union(blocks: list[tuple[float, list[list[np.ndarray]]]]) -> np.ndarray:
    """The dense matrix of the blocks: the stack of w · ⊗ (vstack of each factor's pieces)."""
    rows = []
    for w, factors in blocks:
        K = np.ones((1, 1))
        for pieces in factors:
            K = np.kron(K, np.vstack(pieces))
        rows.append(w * K)
    return np.vstack(rows)


def hdmm_allrange(n: int) -> np.ndarray:
    """HDMM's AllRange row order: [a, b) for (a, b) in combinations(range(n + 1), 2)."""
    rows = []
    for a, b in itertools.combinations(range(n + 1), 2):
        r = np.zeros(n)
        r[a:b] = 1.0
        rows.append(r)
    return np.array(rows)


def test_atoms_are_recognised_exactly():
    assert atom_spec(np.eye(5)) == "identity:5"
    assert atom_spec(np.ones((1, 7))) == "total:7"
    assert atom_spec(np.tril(np.ones((4, 4)))) == "prefix:4"
    assert atom_spec(hdmm_allrange(6)) == "allrange:6"  # another row order, the same rows
    assert atom_spec(np.ones((1, 1))) == "identity:1"
    # near misses are not atoms
    assert atom_spec(np.eye(5) * (1 + 1e-9)) is None
    assert atom_spec(np.triu(np.ones((4, 4)))) is None  # suffix sums
    assert atom_spec(hdmm_allrange(6)[:-1]) is None
    grouping = np.zeros((2, 4))
    grouping[0, :2] = grouping[1, 2:] = 1.0
    assert atom_spec(grouping) is None
    assert atom_spec(2.0 * np.eye(3)) is None
    assert scaled_atom_spec(2.0 * np.eye(3)) == "scale(2,identity:3)"
    assert scaled_atom_spec(0.5 * np.ones((1, 3))) == "scale(0.5,total:3)"
    assert scaled_atom_spec(np.ones((1, 3))) == "total:3"
    assert scaled_atom_spec(-np.eye(2)) is None


def test_exported_spec_is_the_hdmm_matrix(tmp_path):
    """The spec of a weighted union with atoms, stacked and explicit factors builds exactly
    the stack of w_b · ⊗ factors (np.kron), through factorize's own parser."""
    rng = np.random.default_rng(5)
    G = (rng.random((3, 4)) < 0.5).astype(float)
    G[0, 0] = 2.0  # not 0/1: an explicit factor
    idtotal = [np.eye(3), 1.0 * np.ones((1, 3))]    # HDMM's IdentityTotal(3): a stack of atoms
    odd_stack = [np.eye(3), np.array([[1.0, 2.0, 0.0]])]  # a stack with a non-atom piece
    blocks = [
        (1.0, [[np.tril(np.ones((2, 2)))], idtotal, [G]]),
        (2.5, [[np.ones((1, 2))], [np.eye(3)], [hdmm_allrange(4)]]),
        (0.75, [[np.eye(2)], odd_stack, [np.ones((1, 4))]]),
    ]
    store = FactorStore(tmp_path)
    spec = union_spec(blocks, store)
    assert spec.startswith("vstack(kron(prefix:2,vstack(identity:3,total:3),file:")
    assert "scale(2.5,kron(total:2,identity:3,allrange:4))" in spec
    assert len(store.written) == 2  # G and the odd stack, each once
    W = parse_workload(spec).dense()
    np.testing.assert_array_equal(W[: 2 * 4 * 3], dense_union(blocks)[: 2 * 4 * 3])
    # allrange rows come in factorize's order: compare the rows as sets, the rest exactly
    D = dense_union(blocks)
    np.testing.assert_array_equal(np.sort(W, axis=0), np.sort(D, axis=0))
    assert W.shape == D.shape == (2 * 4 * 3 + 3 * 10 + 2 * 4, 2 * 3 * 4)
    # single block and single factor: no vstack, no kron
    assert union_spec([(1.0, [[np.eye(3)]])], store) == "identity:3"
    assert domain_string(["a", "b"], [2, 3]) == "a=2,b=3"
    with pytest.raises(ValueError, match="finite and positive"):
        union_spec([(-1.0, [[np.eye(3)]])], store)


def test_kron_strategy_error_against_the_dense_formula():
    rng = np.random.default_rng(11)
    A1, A2 = rng.random((4, 3)) + 0.1, np.vstack([np.eye(2), np.ones((1, 2))])
    blocks = [(1.0, [np.tril(np.ones((3, 3))), np.eye(2)]), (3.0, [np.ones((1, 3)), rng.random((2, 2))])]
    tr, resid = kron_strategy_trace(blocks, [A1, A2])
    W = np.vstack([w * np.kron(*Ws) for w, Ws in blocks])
    A = np.kron(A1, A2)
    X = W @ np.linalg.pinv(A)
    assert resid < 1e-12
    assert tr == pytest.approx(float(np.sum(X * X)), rel=1e-12)
    assert kron_l1([A1, A2]) == pytest.approx(np.abs(A).sum(axis=0).max(), rel=1e-14)
    assert kron_l2([A1, A2]) == pytest.approx(np.sqrt((A * A).sum(axis=0).max()), rel=1e-14)
    # a strategy that does not support the workload is flagged
    _, resid = kron_strategy_trace(blocks, [np.ones((1, 3)), A2])
    assert resid > 0.1


def test_missing_hdmm_environment_is_a_clear_error(tmp_path):
    from benchmarks.suites.hdmm_unions import run_hdmm

    args = argparse.Namespace(cases=None, hdmm_python=None, hdmm_src=None, restarts=1, only=None)
    with pytest.raises(EnvironmentProblem, match="--hdmm-python"):
        run_hdmm(args, tmp_path)
    args.hdmm_python, args.hdmm_src = __import__("sys").executable, str(tmp_path)
    with pytest.raises(EnvironmentProblem, match="--hdmm-src"):
        run_hdmm(args, tmp_path)
    args.cases = str(tmp_path / "none.json")
    with pytest.raises(EnvironmentProblem, match="no such file"):
        run_hdmm(args, tmp_path)
