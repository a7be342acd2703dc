"""Kronecker strategies (OPT_⊗), unions (alternating per-factor optimisation, OPT_+) and the
flat refinement: the factorised objective against the dense strategy on small products."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.pure_dp.api import plan_kron, plan_kron_flat, plan_union_kron
from factorize.pure_dp.evaluate import dense_laplace_objective, evaluate_dense, evaluate_kron
from factorize.pure_dp.flat import flatten_kron_p_identity
from factorize.pure_dp.kron import factor_trace, optimize_kron
from factorize.pure_dp.p_identity import PIdentityObjective, p_identity_strategy
from factorize.pure_dp.structure import product_structure
from workloads import parse_workload

FAST = {"stage1_iters": 40, "polish_iters": 200}


def _dense(spec: str) -> np.ndarray:
    return np.asarray(parse_workload(spec).dense(), dtype=np.float64)


def _kron(mats) -> np.ndarray:
    out = np.ones((1, 1))
    for M in mats:
        out = np.kron(out, M)
    return out


def test_kronecker_objective_factorises_like_the_dense_product() -> None:
    # ‖⊗A_i‖₁ = Π‖A_i‖₁ and tr(WᵀW (AᵀA)⁻¹) = Π tr(W_iᵀW_i (A_iᵀA_i)⁻¹) for W = ⊗W_i
    rng = np.random.default_rng(3)
    W1, W2 = _dense("prefix:5"), _dense("allrange:4")
    T1, T2 = rng.random((2, 5)), rng.random((3, 4))
    A1, A2 = p_identity_strategy(T1, 5), p_identity_strategy(T2, 4)
    f1 = PIdentityObjective(W1.T @ W1, 5).value(T1.ravel())
    f2 = PIdentityObjective(W2.T @ W2, 10).value(T2.ravel())
    dense = dense_laplace_objective(np.kron(W1, W2), np.kron(A1, A2))
    assert dense == pytest.approx(f1 * f2, rel=1e-10)
    P = product_structure("kron(prefix:5,allrange:4)")
    e = evaluate_kron(P, (A1, A2))
    W, A = np.kron(W1, W2), np.kron(A1, A2)
    assert e.trace == pytest.approx(float(np.trace(W @ np.linalg.pinv(A.T @ A) @ W.T)), rel=1e-10)
    ed = evaluate_dense(np.kron(W1, W2), np.kron(A1, A2))
    assert e.rmse == pytest.approx(ed.rmse, rel=1e-10)
    assert e.rmse_replace == pytest.approx(ed.rmse_replace, rel=1e-10)  # N = 20: exact replace


def test_plan_kron_is_the_product_of_per_factor_optima() -> None:
    s = plan_kron("kron(prefix:16,prefix:16)", one_d=FAST)
    W = _dense("kron(prefix:16,prefix:16)")
    A = s.dense()
    assert s.rmse == pytest.approx(math.sqrt(2.0 * dense_laplace_objective(W, A) / 256), rel=1e-10)
    # one distinct factor, solved once: the two factors are the same matrix, not the identity
    assert np.array_equal(s.factors[0], s.factors[1]) and s.factors[0].shape[0] > 16
    one = optimize_kron(product_structure("prefix:16"), one_d=FAST)  # f of one factor
    assert s.rmse == pytest.approx(math.sqrt(2.0 * one.value ** 2 / 256), rel=1e-9)


def test_union_of_kronecker_products_alternates_downhill_and_matches_dense() -> None:
    spec = "vstack(kron(prefix:16,prefix:6),kron(allrange:16,total:6))"
    P = product_structure(spec)
    ks = optimize_kron(P, one_d=FAST, sweeps=4)
    assert ks.sweeps >= 2
    assert all(b <= a * (1 + 1e-12) for a, b in zip(ks.history, ks.history[1:], strict=False))
    assert ks.history[-1] < ks.history[0]
    W = _dense(spec)
    assert ks.value < 0.95 * dense_laplace_objective(W, np.eye(96))  # the identity strategy
    A = _kron(ks.factors)
    e = evaluate_kron(P, ks.factors)
    assert e.trace == pytest.approx(dense_laplace_objective(W, A) / e.add_remove.value ** 2, rel=1e-10)
    assert ks.value == pytest.approx(dense_laplace_objective(W, A), rel=1e-9)
    s = plan_kron(spec, one_d=FAST)
    assert s.rmse == pytest.approx(evaluate_dense(W, s.dense()).rmse, rel=1e-10)


def test_weighted_union_of_kronecker_strategies() -> None:
    spec = "vstack(kron(prefix:12,identity:4),kron(identity:12,prefix:4))"
    s = plan_union_kron(spec, one_d=FAST)
    weights = [a for a, _ in s.union]
    assert sum(weights) == pytest.approx(1.0)
    # block-by-block answering: recompute each block's variance from the dense terms
    W_blocks = [_dense("kron(prefix:12,identity:4)"), _dense("kron(identity:12,prefix:4)")]
    delta = sum(a * np.abs(_kron(fs)).sum(axis=0).max() for a, fs in s.union)
    total = 0.0
    for Wb, (a, fs) in zip(W_blocks, s.union, strict=True):
        Ab = a * _kron(fs)
        total += float(np.trace(Wb @ np.linalg.pinv(Ab.T @ Ab) @ Wb.T))
    assert s.rmse == pytest.approx(math.sqrt(2 * delta ** 2 * total / 96), rel=1e-9)
    # least squares over the whole stacked strategy can only do better
    assert evaluate_dense(_dense(spec), s.dense()).rmse <= s.rmse * (1 + 1e-9)


def test_flattened_kronecker_strategy_is_the_same_measurement() -> None:
    rng = np.random.default_rng(0)
    thetas = [rng.random((2, 3)), np.zeros((0, 2)), rng.random((1, 4))]
    A = _kron([p_identity_strategy(T, T.shape[1]) for T in thetas])
    F = p_identity_strategy(flatten_kron_p_identity(thetas), 24)
    assert np.allclose(A.T @ A, F.T @ F, rtol=1e-12, atol=1e-14)
    assert np.allclose(np.abs(F).sum(axis=0), 1.0)


def test_flat_refinement_never_worse_than_kronecker() -> None:
    spec = "kron(prefix:16,prefix:12)"
    k = plan_kron(spec, one_d=FAST)
    f = plan_kron_flat(spec, one_d=FAST, work_budget=2e8)
    assert f.rmse <= k.rmse * (1 + 1e-12)
    assert f.rmse == pytest.approx(evaluate_dense(_dense(spec), f.factors[0]).rmse, rel=1e-12)


def test_fixed_identity_and_total_factors() -> None:
    P = product_structure("kron(identity:5,total:3)")
    ks = optimize_kron(P, one_d=FAST)
    assert np.array_equal(ks.factors[0], np.eye(5)) and np.array_equal(ks.factors[1], np.ones((1, 3)))
    assert ks.value == pytest.approx(5.0)  # t = n for the identity, 1 for the total
    assert factor_trace(np.ones((3, 3)), np.ones((1, 3))) == pytest.approx(1.0)


def test_gram_trace_of_a_total_measured_by_itself():
    """A total (1ᵀ, n = 64) measured by itself: tr(J J⁺) = rank = 1, and the support check
    passes (a pinv of AᵀA at rcond 1e-15 once kept rounding-level eigenvalues and refused it)."""
    from factorize.pure_dp.evaluate import gram_trace

    for n in (2, 7, 64, 115):
        T = np.ones((1, n))
        assert abs(gram_trace(T.T @ T, T) - 1.0) < 1e-12
