"""Marginal-weight strategies (OPT_M) in the subset algebra: the error against the dense
strategy, the closed-form sensitivities against the certified helpers, the search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from factorize.privacy.guarantees import Neighbouring
from factorize.privacy.sensitivity import sensitivity
from factorize.pure_dp.api import plan_marginals, plan_pure_dp
from factorize.pure_dp.evaluate import evaluate_dense, evaluate_marginal_weights, marginal_strategy_dense
from factorize.pure_dp.l1_marginal_weights import (
    MarginalWeightsObjective,
    candidate_subsets,
    optimize_marginal_weights,
)
from factorize.pure_dp.structure import marginal_structure_of
from workloads import parse_workload


def _dense(spec: str) -> np.ndarray:
    return np.asarray(parse_workload(spec).dense(), dtype=np.float64)


@pytest.mark.parametrize("spec", ["marginals:2x3x2:2", "marginals_upto:3x2x4:1"])
def test_algebra_error_matches_the_dense_strategy(spec: str) -> None:
    fam = marginal_structure_of(spec)
    rng = np.random.default_rng(1)
    subsets = [S for S in candidate_subsets(fam) if rng.random() < 0.6] + [(0, 1, 2)]
    weighted = [(float(w), S) for w, S in zip(0.1 + rng.random(len(subsets)), subsets, strict=True)]
    e = evaluate_marginal_weights(fam, weighted)
    A = marginal_strategy_dense(fam.sizes, weighted)
    d = evaluate_dense(_dense(spec), A)
    assert e.trace == pytest.approx(d.trace, rel=1e-10)
    assert e.add_remove.value == pytest.approx(sensitivity(A, "l1", Neighbouring.ADD_REMOVE).value, rel=1e-12)
    assert e.replace.value == pytest.approx(sensitivity(A, "l1", Neighbouring.REPLACE).value, rel=1e-12)
    assert e.rmse == pytest.approx(d.rmse, rel=1e-10)
    assert e.rmse_replace == pytest.approx(d.rmse_replace, rel=1e-10)


def test_unsupported_marginal_is_refused() -> None:
    fam = marginal_structure_of("marginals:2x3x2:2")
    with pytest.raises(ValueError):
        evaluate_marginal_weights(fam, [(1.0, (0, 1))])


def test_identity_total_product_is_recognised_as_all_marginals() -> None:
    spec = "kron(vstack(identity:3,total:3),vstack(identity:2,total:2),vstack(identity:4,total:4))"
    fam = marginal_structure_of(spec)
    assert fam is not None and fam.sizes == (3, 2, 4) and len(fam.subsets) == 8 and fam.k == 4 * 3 * 5
    ref = marginal_structure_of("marginals_upto:3x2x4:3")
    assert sorted(fam.subsets) == sorted(ref.subsets)


def test_optimised_weights_beat_the_identity_and_are_reproducible() -> None:
    spec = "marginals:2x2x2x2x2x2x2x2:2"
    fam = marginal_structure_of(spec)
    a = optimize_marginal_weights(fam, covers=8, randoms=1, seed=3)
    b = optimize_marginal_weights(fam, covers=8, randoms=1, seed=3)
    assert a.value == b.value and np.array_equal(a.theta, b.theta)
    assert a.search.seeds == tuple(range(3, 12))
    identity = math.sqrt(2.0 * 2 ** 6)  # each 2-way cell sums 64 cells, Laplace variance 2 each
    assert a.rmse < 0.97 * identity
    s = plan_marginals(spec, covers=8, randoms=1, seed=3)
    assert s.rmse == pytest.approx(a.rmse, rel=1e-9)
    assert abs(sum(w for w, _ in s.marginal) - 1.0) < 1e-12
    # the returned strategy, densified, has the reported error
    assert s.rmse == pytest.approx(evaluate_dense(_dense(spec), s.dense()).rmse, rel=1e-9)


def test_chord_step_never_increases_the_objective() -> None:
    fam = marginal_structure_of("marginals:2x3x2x2:2")
    obj = MarginalWeightsObjective(fam, candidate_subsets(fam))
    theta = np.zeros(obj.size)
    theta[-1] = 1.0  # the identity
    moved, val = obj.chord_step(theta)
    assert val <= obj.value(theta) * (1 + 1e-12)
    assert obj.value(moved) == pytest.approx(val, rel=1e-10)


def test_plan_pure_dp_keeps_the_best_family() -> None:
    best, cands = plan_pure_dp("marginals:2x3x4:1", one_d={"stage1_iters": 40, "polish_iters": 200})
    assert best.rmse == min(c.rmse for c in cands)
    assert {"marginal weights", "kronecker", "union of kronecker"} <= {c.family for c in cands}
    for c in cands:  # every candidate's error is its own dense strategy's
        ls = evaluate_dense(_dense("marginals:2x3x4:1"), c.dense()).rmse
        if c.family == "union of kronecker":  # answered term by term: least squares does better
            assert c.rmse >= ls * (1 - 1e-9)
        else:
            assert c.rmse == pytest.approx(ls, rel=1e-9)
