"""Optimised pure-DP strategies inside plans, and the rounding
spread that keeps the lattice's inflation to the coordinates neighbours can move.

Independent truths: the dense strategy's error recomputed here from R and A; the best b-ary
tree built here; the spread counted on the dense product; a re-plan from the recorded seed.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from factorize.kinds.factorization.build import build_plan
from factorize.kinds.factorization.codec import save_plan
from factorize.kinds.factorization.verify import verify_plan
from factorize.planner.strategies import OPTIMIZED_PREFIX, tree_strategy
from factorize.privacy import Neighbouring, kron_spread


def _laplace_rmse(R: np.ndarray, A: np.ndarray, eps: float = 1.0) -> float:
    """Per-query RMSE of W = R·A with continuous Laplace noise of scale ‖A‖₁→₁/ε."""
    delta = np.abs(A).sum(axis=0).max()
    return math.sqrt(2.0 * (delta / eps) ** 2 * np.sum(R ** 2) / R.shape[0])


@pytest.fixture(scope="module")
def prefix_plan():
    return build_plan("prefix:64", "epsilon=1", search_seed=3)


def test_prefix_plan_takes_the_optimised_strategy_and_beats_every_tree(prefix_plan):
    plan = prefix_plan
    choice = plan.provenance["strategy_choice"]
    assert choice["chosen"] == f"{OPTIMIZED_PREFIX}p-identity (seed 3)"
    fact = plan.factorization
    R, A = fact.R_factors[0], fact.A_factors[0]
    own = _laplace_rmse(R, A)
    # the plan's RMSE is the continuous one inflated only by the lattice (spread-limited)
    assert plan.expected_error["rmse"] == pytest.approx(own, rel=2e-4)
    assert plan.expected_error["rmse"] >= own
    W = np.tril(np.ones((64, 64)))
    for b in (2, 4, 8, 16):
        T = tree_strategy(64, b)
        Rt = np.linalg.lstsq(T.T, W.T, rcond=None)[0].T
        assert own < _laplace_rmse(Rt, T), b
    search = choice["optimized"][choice["chosen"]]
    assert search["seed"] == 3 and search["winner"] and search["seeds"]
    assert choice["search_seed"] == 3
    assert verify_plan(plan).passed


def test_plan_is_reproducible_from_its_recorded_seed(prefix_plan):
    seed = prefix_plan.provenance["strategy_choice"]["search_seed"]
    again = build_plan("prefix:64", "epsilon=1", search_seed=seed)
    a, b = prefix_plan.factorization, again.factorization
    assert all(np.array_equal(x, y) for x, y in zip(a.A_factors, b.A_factors, strict=True))
    assert all(np.array_equal(x, y) for x, y in zip(a.R_factors, b.R_factors, strict=True))
    other = build_plan("prefix:64", "epsilon=1", search_seed=seed + 100)
    rec = lambda p: p.provenance["strategy_choice"]["optimized"]  # noqa: E731
    name = lambda s: f"{OPTIMIZED_PREFIX}p-identity (seed {s})"  # noqa: E731
    assert rec(other)[name(seed + 100)]["seeds"] != rec(prefix_plan)[name(seed)]["seeds"]


def test_a_runner_up_claimed_better_than_the_chosen_is_refused(prefix_plan):
    choice = prefix_plan.provenance["strategy_choice"]
    chosen = choice["chosen"]
    forged = dict(choice["candidates"])
    forged["optimized marginal weights (seed 3)"] = 0.5 * forged[chosen]
    plan = dataclasses.replace(prefix_plan, provenance={
        **prefix_plan.provenance, "strategy_choice": dict(choice, candidates=forged)})
    failures = verify_plan(plan).failures
    assert any(f.startswith("strategy choice") and "beat the chosen" in f for f in failures)


def test_identity_is_optimal_for_the_identity_workload():
    plan = build_plan("identity:32", "epsilon=1")
    # √2 per query: the histogram; no candidate does better. The lattice's inflation is
    # γ·spread ≤ 10⁻³·Δ·spread/m with spread 1 (one coordinate per cell), m = 32
    rmse = plan.expected_error["rmse"]
    assert math.sqrt(2.0) <= rmse <= math.sqrt(2.0) * (1 + 1e-3 / 32)
    scores = plan.provenance["strategy_choice"]["candidates"]
    assert min(scores.values()) >= math.sqrt(2.0) * (1 - 1e-12)


def test_kronecker_plan_runs_end_to_end_on_records(tmp_path: Path):
    from factorize.executor.pipeline import run
    from factorize.privacy import TestRandom, sample_lattice
    from workloads import Domain

    spec = "kron(prefix:16,vstack(identity:3,total:3))"  # at 8 the identity is already optimal
    dom = Domain(["a", "b"], [16, 3])
    plan = build_plan(spec, "epsilon=1", domain=dom)
    assert plan.provenance["strategy_choice"]["chosen"].startswith(OPTIMIZED_PREFIX)
    assert plan.factorization.is_kron
    path = tmp_path / "k.plan"
    save_plan(plan, path)
    rng = np.random.default_rng(1)
    codes = np.column_stack([rng.integers(0, 16, 300), rng.integers(0, 3, 300)])
    data = tmp_path / "d.csv"
    data.write_text("a,b\n" + "\n".join(f"{a},{b}" for a, b in codes) + "\n")
    rel = run(str(path), str(data), str(tmp_path / "out.csv"), seed=5)
    h = np.bincount(codes[:, 0] * 3 + codes[:, 1], minlength=48).astype(float)
    from functools import reduce

    from factorize.privacy.lattice import measured_factors

    A = reduce(np.kron, measured_factors(plan.factorization.A_factors))
    R = reduce(np.kron, plan.factorization.R_factors)
    q = np.rint(A @ h / plan.noise.grid)
    Y = sample_lattice(np.zeros(q.size, dtype=np.int64), plan.noise, TestRandom(5))
    dense = R @ (plan.noise.grid * q + Y)
    assert np.abs(rel.estimate - dense).max() <= 1e-9 * max(1.0, np.abs(dense).max())
    W = np.kron(np.tril(np.ones((16, 16))), np.vstack([np.eye(3), np.ones((1, 3))]))
    assert np.abs(R @ A @ h - W @ h).max() < 1e-6


@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_spread_counts_the_coordinates_neighbours_move(relation):
    rng = np.random.default_rng(0)
    for _ in range(20):
        factors = [rng.random((rng.integers(2, 6), n)) * (rng.random((1, n)) < 2)
                   for n in rng.integers(2, 5, size=rng.integers(1, 4))]
        factors = [F * (rng.random(F.shape) < 0.5) for F in factors]
        A = factors[0]
        for F in factors[1:]:
            A = np.kron(A, F)
        supp = [set(np.flatnonzero(A[:, x])) for x in range(A.shape[1])]
        if relation == "add_remove":
            exact = max(len(s) for s in supp)
        else:
            exact = max(len(a | b) for i, a in enumerate(supp) for j, b in enumerate(supp) if i != j)
        got = kron_spread(factors, Neighbouring.parse(relation))
        assert exact <= got <= A.shape[0]
        if relation == "add_remove":
            assert got == max(exact, 1)


def test_a_forged_smaller_spread_is_refused_and_a_dropped_one_is_under_noised():
    import dataclasses

    plan = build_plan("prefix:16", "epsilon=1")
    assert plan.noise.spread is not None and plan.noise.spread < plan.factorization.strategy_rows
    forged = dataclasses.replace(plan, noise=dataclasses.replace(plan.noise, spread=1))
    failures = verify_plan(forged).failures
    assert any("neighbours move 1 coordinates" in f for f in failures), failures
    # without a spread the verifier inflates over all m coordinates: the plan's scale is short
    dropped = dataclasses.replace(plan, noise=dataclasses.replace(plan.noise, spread=None))
    assert any("UNDER-NOISED" in f for f in verify_plan(dropped).failures)


def test_marginal_weights_enter_as_a_rank_deficient_strategy():
    """Marginal weights measure fewer than N independent rows (A has no full column rank),
    but W's rows lie in A's row space: R = W·A⁺ is exact, the plan verifies, and its RMSE is
    the optimiser's (recomputed here from the dense R and A)."""
    plan = build_plan("marginals:2x2x2x2x2x2:2", "epsilon=1")
    choice = plan.provenance["strategy_choice"]
    name = f"{OPTIMIZED_PREFIX}marginal weights (seed 0)"
    assert name in choice["candidates"]
    if choice["chosen"] == name:
        R, A = plan.factorization.R_factors[0], plan.factorization.A_factors[0]
        assert np.linalg.matrix_rank(A) < A.shape[1]
        assert plan.expected_error["rmse"] == pytest.approx(_laplace_rmse(R, A), rel=1e-3)
    assert verify_plan(plan).passed


def test_a_plan_written_before_the_spread_still_verifies():
    """tests/data/pre_spread_prefix16_laplace.plan was written by commit 974d471 (before the
    spread): no noise.spread, inflation over all m, candidate scores at that inflation. It
    verifies, its scores recomputed the way it was planned."""
    from factorize.kinds.factorization.codec import load_plan

    plan = load_plan(Path(__file__).parent / "data" / "pre_spread_prefix16_laplace.plan")
    assert plan.noise.spread is None
    check = verify_plan(plan)
    assert check.passed, check.failures
