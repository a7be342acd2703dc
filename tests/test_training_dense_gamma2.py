"""The dense training planner's worst-step objective (``training.multi_epoch``'s (P∞), γ₂-type:
``min_X max_t (W X⁻¹ Wᵀ)_tt`` under ``epochs=K``) against independent truth: a Clarabel SDP of the
exact program, γ₂ of the single-participation solvers (``solvers.dual_gamma_2`` and the
factorization planner's ``--norm gamma_2``), the certificate's refusal of tampered row weights
and witnesses, the plan file and its verifier, and the CLI end to end."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from factorize.privacy.participation import Participation, participation_sensitivity
from factorize.training.certificate import (
    EpochsWitness,
    check_training_certificate,
    epochs_lower_bound,
    solution_figures,
)
from factorize.training.multi_epoch import plan_multi_epoch


def _prefix(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n)))


def _sdp_worst_step(W: np.ndarray, K: int) -> float:
    """min t s.t. [[Y, W], [Wᵀ, X]] ⪰ 0, diag Y ≤ t, X_ππ ⪯ Diag(d_π), 𝟙ᵀd_π ≤ 1 (Clarabel):
    by the Schur complement, Y ⪰ W X⁻¹ Wᵀ, so t ≥ max_t (W X⁻¹ Wᵀ)_tt at the optimum."""
    cp = pytest.importorskip("cvxpy")
    k, n = W.shape
    b = n // K
    X = cp.Variable((n, n), PSD=True)
    Y = cp.Variable((k, k), symmetric=True)
    d = cp.Variable((b, K))
    t = cp.Variable()
    cons = [cp.bmat([[Y, W], [W.T, X]]) >> 0, cp.sum(d, axis=1) <= 1, cp.diag(Y) <= t]
    for i in range(b):
        S = np.zeros((n, K))
        S[np.arange(i, n, b), np.arange(K)] = 1.0
        cons.append(cp.diag(d[i]) - S.T @ X @ S >> 0)
    prob = cp.Problem(cp.Minimize(t), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert prob.status == "optimal"
    return float(prob.value)


#: Certified gaps reached where the dual optimum is degenerate (b = n/K ≤ 3 patterns: the
#: weight sits on the last steps, the Z blocks are nearly rank one and the primal read from
#: the dual is poor; ``training.multi_epoch``, module docstring) — the lower bound stays tight.
DEGENERATE_GAP = {(8, 4): 2e-2, (12, 4): 1e-5}


@pytest.mark.parametrize("n,K", [(8, 1), (8, 2), (8, 4), (12, 1), (12, 2), (12, 4), (16, 4)])
def test_prefix_optimum_equals_the_sdp(n, K):
    W = _prefix(n)
    sol = plan_multi_epoch(W, Participation("epochs", K), objective="max", target_gap=1e-9)
    ref = _sdp_worst_step(W, K)
    # the SDP's own accuracy (1e-10 requested) is far inside the tolerances below
    assert sol.lower <= ref * (1 + 1e-8)
    assert ref <= sol.objective * (1 + 1e-8)
    gap = DEGENERATE_GAP.get((n, K), 1e-6)
    assert sol.gap <= gap
    assert sol.objective == pytest.approx(ref, rel=gap)
    assert sol.lower == pytest.approx(ref, rel=1e-5)
    assert check_training_certificate(W, sol).passed


@pytest.mark.parametrize("K", [1, 2])
def test_general_workload_optimum_equals_the_sdp(K):
    """A non-square workload with mixed signs (k = 10 rows, 8 steps): the row weights are then
    not one per step."""
    W = np.random.default_rng(40 + K).normal(size=(10, 8))
    sol = plan_multi_epoch(W, Participation("epochs", K), objective="max", target_gap=1e-9)
    ref = _sdp_worst_step(W, K)
    assert sol.witness.weights.shape == (10,)
    assert sol.lower <= ref * (1 + 1e-8) and ref <= sol.objective * (1 + 1e-8)
    assert sol.objective == pytest.approx(ref, rel=1e-6)
    assert check_training_certificate(W, sol).passed


def test_the_stated_worst_step_is_the_strategy_s():
    """The objective is Δ² max_t ‖R_t‖² of the stored strategy (explicit inverse, brute-force
    pattern sums), the lower bound ≤ it, and the total objective's plan is worse at its worst
    step (it optimises another objective) while the worst-step plan is worse in total."""
    n, K = 32, 4
    W = _prefix(n)
    p = Participation("epochs", K)
    sol = plan_multi_epoch(W, p, objective="max")
    A = sol.strategy
    R = W @ np.linalg.inv(A)
    X = A.T @ A
    b = n // K
    delta2 = max(np.abs(X[np.ix_(np.arange(i, n, b), np.arange(i, n, b))]).sum() for i in range(b))
    worst = float(np.max(np.sum(R * R, axis=1)))
    assert sol.objective >= delta2 * worst
    assert sol.objective == pytest.approx(delta2 * worst, rel=1e-9)
    assert sol.sensitivity >= participation_sensitivity(A, p).value
    total = plan_multi_epoch(W, p)
    _, total_worst, _ = solution_figures(W, p, total.strategy, total.reconstruction, "max")
    _, max_total, _ = solution_figures(W, p, A, sol.reconstruction, "total")
    assert total_worst > sol.objective
    assert max_total > total.objective


def test_single_participation_is_gamma_2_squared():
    """K = 1: (P∞) = γ₂(W)², against ``solvers.dual_gamma_2`` (LSS's two-simplex dual, an
    independent algorithm) and the factorization planner's ``--norm gamma_2`` plan."""
    from factorize.kinds.factorization.build import build_plan
    from solvers.dual_gamma_2 import solve_gamma_2_dual

    n = 32
    W = _prefix(n)
    sol = plan_multi_epoch(W, Participation("epochs", 1), objective="max", target_gap=1e-10)
    assert sol.gap <= 1e-8
    ref = solve_gamma_2_dual(W, target_gap=1e-10)
    assert ref.lower_estimate ** 2 <= sol.objective * (1 + 1e-12)
    assert sol.lower <= ref.upper_estimate ** 2 * (1 + 1e-12)
    assert sol.objective == pytest.approx(ref.lower_estimate ** 2, rel=1e-6)
    plan = build_plan(f"prefix:{n}", "rho=0.5", norm="gamma_2")
    g2 = plan.bounds
    assert g2["lower"] ** 2 <= sol.objective * (1 + 1e-12)
    assert sol.lower <= g2["upper"] ** 2 * (1 + 1e-12)
    assert sol.objective == pytest.approx(g2["upper"] ** 2, rel=1e-6)


def test_tampered_weights_and_witnesses_are_refused():
    from factorize.planner.errors import PlannerError

    n = 32
    W = _prefix(n)
    sol = plan_multi_epoch(W, Participation("epochs", 2), objective="max")
    assert check_training_certificate(W, sol).passed
    w = sol.witness
    for p in (w.weights * np.linspace(0.5, 1.5, n),  # other row weights: a weaker bound
              np.roll(w.weights, 3), np.ones(n)):
        bad = dataclasses.replace(sol, witness=EpochsWitness(w.factor, p))
        assert not check_training_certificate(W, bad).passed
    F = w.factor.copy()
    F[3] *= 1.5
    assert not check_training_certificate(W, dataclasses.replace(sol, witness=EpochsWitness(F, w.weights))).passed
    assert not check_training_certificate(W, dataclasses.replace(sol, lower=sol.lower * 1.001)).passed
    assert not check_training_certificate(W, dataclasses.replace(sol, objective=sol.objective * 0.999)).passed
    # a witness without row weights bounds the total, not the worst step (and vice versa)
    with pytest.raises(PlannerError, match="row weights"):
        check_training_certificate(W, dataclasses.replace(sol, witness=EpochsWitness(w.factor)))
    with pytest.raises(PlannerError, match="row weights"):
        check_training_certificate(W, dataclasses.replace(sol, reduction="total"))
    with pytest.raises(PlannerError, match="row weights"):
        epochs_lower_bound(W, Participation("epochs", 2), w.factor, -w.weights)


def test_any_weighted_witness_bounds_any_feasible_strategy():
    """Weak duality, at random (F, p), including zero weights, against strategies that are not
    optimal for the worst step."""
    n, K = 24, 3
    W = _prefix(n)
    p = Participation("epochs", K)
    rng = np.random.default_rng(8)
    strategies = [np.eye(n), W, plan_multi_epoch(W, p).strategy]
    for _ in range(5):
        F = rng.normal(size=(n, K))
        weights = rng.exponential(size=n) * (rng.random(n) < 0.7)
        lower = epochs_lower_bound(W, p, F, weights)
        assert lower > 0
        for A in strategies:
            _, upper, _ = solution_figures(W, p, A, np.linalg.solve(A.T, W.T).T, "max")
            assert lower <= upper
    assert epochs_lower_bound(W, p, rng.normal(size=(n, K)), np.zeros(n)) == 0.0


def test_streaming_has_the_same_gram_and_figures():
    n = 64
    W = _prefix(n)
    p = Participation("epochs", 4)
    dense = plan_multi_epoch(W, p, objective="max")
    stream = plan_multi_epoch(W, p, objective="max", streaming=True)
    C = stream.strategy
    assert stream.streaming and np.all(np.triu(C, 1) == 0)
    assert check_training_certificate(W, stream).passed
    A = dense.strategy
    np.testing.assert_allclose(C.T @ C, A.T @ A, rtol=0, atol=1e-12 * np.abs(A.T @ A).max())
    assert stream.objective == pytest.approx(dense.objective, rel=1e-9)
    assert stream.gap <= 1e-6 and dense.gap <= 1e-6


def test_worst_step_needs_epochs():
    from factorize.planner.errors import PlannerError

    with pytest.raises(PlannerError, match="epochs=K"):
        plan_multi_epoch(_prefix(48), Participation.parse("k=3,min_sep=12"), objective="max")


# ------------------------------------------------------------------ the plan file and the CLI


@pytest.fixture(scope="module")
def worst_plans(tmp_path_factory) -> dict[str, Path]:
    from factorize.kinds.training.kind import KIND
    from factorize.kinds.training.options import TrainingOptions

    out = tmp_path_factory.mktemp("dense-max")
    paths = {}
    for name, streaming in (("dense", False), ("streaming", True)):
        plan = KIND.build(TrainingOptions(n=48, guarantee="rho=0.5", participation="epochs=2",
                                          strategy="dense", objective="max", streaming=streaming))
        paths[name] = out / f"{name}.plan"
        KIND.save(plan, paths[name])
    return paths


def test_worst_step_plan_round_trip_and_claims(worst_plans):
    from factorize import kinds
    from factorize.kinds.training.dense import DenseStrategy

    for name, path in worst_plans.items():
        plan = kinds.load_plan(path)
        assert isinstance(plan.strategy, DenseStrategy) and plan.strategy.weights is not None
        assert plan.reduction == "max" and kinds.verify_plan(plan).passed
        C, n = plan.strategy.matrix, plan.n
        assert plan.strategy.lower_triangular is (name == "streaming")
        R = np.tril(np.ones((n, n))) @ np.linalg.inv(C)
        worst = float(np.max(np.sum(R * R, axis=1)))
        assert plan.objective["error"] >= worst
        assert plan.objective["error"] == pytest.approx(worst, rel=1e-9)
        gap = plan.objective["normalised"] / plan.lower_bound["value"] - 1.0
        assert 0.0 <= gap <= 1e-6


def _rewrite(src: Path, dst: Path, edit_manifest=None, edit_arrays=None) -> None:
    from factorize.kinds.training.codec import TRAINING_FORMAT, TRAINING_SCHEMA_VERSION
    from factorize.plan.files import read_plan_container, write_plan_container

    manifest, arrays = read_plan_container(src, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION)
    manifest = {k: v for k, v in manifest.items()
                if k not in ("format", "schema_version", "arrays", "content_sha256", "compatibility")}
    if edit_manifest:
        edit_manifest(manifest)
    arrays = {k: v.copy() for k, v in arrays.items()}
    if edit_arrays:
        edit_arrays(arrays)
    write_plan_container(dst, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION, manifest, arrays)


def _reweigh(arrays):
    arrays["weights"] = arrays["weights"] * np.linspace(0.5, 1.5, arrays["weights"].size)


def _drop_weights(arrays):
    del arrays["weights"]


def _as_total(m):
    m["objective"]["reduction"] = "total"


def _inflate(m):
    m["lower_bound"]["value"] *= 1.0 + 1e-4


FORGERIES = {
    "reweighed rows": (None, _reweigh, "lower bound"),
    "weights dropped": (None, _drop_weights, "row weights"),
    "stated as total": (_as_total, None, "row weights"),
    "inflated lower bound": (_inflate, None, "INFLATED"),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_forged_worst_step_plans_are_refused(worst_plans, tmp_path, forgery):
    from factorize import kinds

    edit_m, edit_a, words = FORGERIES[forgery]
    forged = tmp_path / "forged.plan"
    _rewrite(worst_plans["streaming"], forged, edit_m, edit_a)
    check = kinds.verify_plan(kinds.load_plan(forged))
    assert not check.passed
    assert words in "; ".join(check.failures), check.failures


def test_cli_plans_and_verifies_a_worst_step_dense_plan(tmp_path, capsys):
    from factorize.cli.plan import main

    out = tmp_path / "G2.plan"
    assert main(["plan", "--mechanism", "training", "--workload", "prefix:64", "--participation",
                 "epochs=2", "--strategy", "dense", "--norm", "gamma_2", "--streaming",
                 "--privacy", "rho=0.5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "at the worst step" in text and "row weights" in text
    gap = float(text.split("gap ")[1].split(")")[0])
    assert 0.0 <= gap <= 1e-6, text
    assert main(["verify", str(out)]) == 0
    assert "PASS" in capsys.readouterr().out
