"""Projection plans: jl, covariance and relaxed-projection — plan,
file, verification, refusals, the records path, and Monte Carlo against the stated bounds."""

from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest

from factorize import kinds
from factorize.cli import main
from factorize.engines.errors import DataError
from factorize.executor.release import ExecutionError
from factorize.kinds.factorization.codec import load_plan
from factorize.kinds.projection.build import build_projection_plan
from factorize.kinds.projection.codec import load_projection_plan, save_projection_plan
from factorize.kinds.projection.plan import ProjectionPlan, moment_sensitivity
from factorize.kinds.projection.release import measure, release_projection, run_projection_plan
from factorize.kinds.projection.verify import verify_projection_plan
from factorize.plan.errors import PlanError
from factorize.plan.files import PlanFormatError
from factorize.privacy import TestRandom
from factorize.privacy.sensitivity import sensitivity
from workloads import Domain, parse_workload


def binary_domain(d: int) -> Domain:
    return Domain([f"a{i}" for i in range(d)], [2] * d)


def write_records(path, X: np.ndarray) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"a{i}" for i in range(X.shape[1])])
        w.writerows(X.tolist())


def sparse_records(d: int, n: int, types: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2, (types, d))
    return base[rng.integers(0, types, n)]


def histogram_of(X: np.ndarray) -> np.ndarray:
    d = X.shape[1]
    cells = X @ (2 ** np.arange(d - 1, -1, -1))  # attribute 0 slowest
    return np.bincount(cells, minlength=2 ** d).astype(np.int64)


@pytest.mark.parametrize("d", [2, 3, 4, 5, 7])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_moment_sensitivity_matches_the_columns(d, relation, norm):
    W = parse_workload(f"parity:{d}:2").dense()
    assert moment_sensitivity(d, norm, relation) == pytest.approx(
        float(sensitivity(W, norm, relation).value), rel=1e-9)


# ------------------------------------------------------------------------------------ jl

@pytest.fixture(scope="module")
def jl_plan():
    return build_projection_plan("allrange:40", "epsilon=1", "jl", n=1000, rng=TestRandom(5))


def test_jl_plan_file_and_verification(jl_plan, tmp_path):
    p = tmp_path / "jl.plan"
    save_projection_plan(jl_plan, p)
    plan = load_projection_plan(p)
    assert isinstance(kinds.load_plan(p), ProjectionPlan)
    with pytest.raises(PlanFormatError, match="factorize-plan"):
        load_plan(p)  # a factorization-plan reader refuses it by format
    np.testing.assert_array_equal(plan.arrays["T"], jl_plan.arrays["T"])
    check = verify_projection_plan(plan)
    assert check.passed, check.failures
    ell, k = plan.arrays["T"].shape
    assert k == 820 and 1 <= ell < k and plan.decoder["ell"] == ell
    assert plan.noise.family == "l2_knorm" and plan.noise.dim == ell
    # a T scaled up (its sensitivity doubles) is refused: ±1/√ℓ check and under-noising
    bad = ProjectionPlan(**{**plan.__dict__, "arrays": {"T": 2.0 * plan.arrays["T"]}})
    assert not verify_projection_plan(bad).passed
    # a smaller noise scale is refused
    weak = ProjectionPlan(**{**plan.__dict__,
                             "noise": dataclasses.replace(plan.noise, scale=plan.noise.scale * 0.99)})
    failures = verify_projection_plan(weak).failures
    assert any("UNDER-NOISED" in f for f in failures)


def test_jl_refusals(jl_plan):
    with pytest.raises(PlanError, match="pure"):
        build_projection_plan("allrange:8", "epsilon=1,delta=1e-6", "jl", n=10)
    with pytest.raises(PlanError, match="replace"):
        build_projection_plan("allrange:8", "epsilon=1", "jl", n=10, relation="add_remove")
    with pytest.raises(PlanError, match="positive integer"):
        build_projection_plan("allrange:8", "epsilon=1", "jl", n=0)
    W = parse_workload("allrange:40")
    h = np.zeros(40)
    h[3] = 1000
    vals = jl_plan.arrays["T"] @ W.matvec(h)
    with pytest.raises(ExecutionError, match="float"):
        release_projection(jl_plan, vals, 1000, TestRandom(0), workload=W)
    with pytest.raises(DataError, match="public dataset size"):
        release_projection(jl_plan, vals, 999, TestRandom(0), workload=W, allow_float_noise=True)


def test_jl_error_is_below_its_bound(jl_plan):
    """20 releases (test-mode K-norm noise) on a sparse dataset: the empirical RMSE per query
    lies below the plan's explicit bound, and the decode meets its gap target."""
    W = parse_workload("allrange:40")
    rng = np.random.default_rng(0)
    h = np.bincount(rng.choice(rng.choice(40, 4, replace=False), 1000), minlength=40).astype(float)
    y = W.matvec(h)
    vals = jl_plan.arrays["T"] @ y
    se = []
    for rep in range(20):
        rel = release_projection(jl_plan, vals, 1000, TestRandom(rep), workload=W,
                                 allow_float_noise=True)
        assert rel.metadata["decode"]["converged"]
        se.append(np.mean((rel.estimate - y) ** 2))
    assert np.sqrt(np.mean(se)) <= jl_plan.bounds["upper_rmse"]
    # the answers are those of a non-negative dataset of n records: y = W x, x ∈ n·Δ
    assert np.all(rel.estimate >= -1e-6) and rel.estimate.max() <= 1000 * (1 + 1e-9)


# ------------------------------------------------------------------------ moment kinds

@pytest.mark.parametrize("kind", ["covariance", "relaxed-projection"])
def test_moment_plans_records_and_histogram_agree(kind, tmp_path):
    d, n = 6, 200
    plan = build_projection_plan(f"parity:{d}:2", "epsilon=1,delta=1e-6", kind, n=n,
                                 domain=binary_domain(d))
    p = tmp_path / "m.plan"
    save_projection_plan(plan, p)
    assert verify_projection_plan(load_projection_plan(p)).passed
    X = sparse_records(d, n, 3, seed=1)
    write_records(tmp_path / "r.csv", X)
    np.save(tmp_path / "h.npy", histogram_of(X))
    W = parse_workload(f"parity:{d}:2")
    v1, n1 = measure(plan, str(tmp_path / "r.csv"), W)
    v2, n2 = measure(plan, str(tmp_path / "h.npy"), W)
    S = 1 - 2 * X
    direct = (S.T @ S)[np.triu_indices(d, 1)]
    np.testing.assert_array_equal(v1, direct)
    np.testing.assert_array_equal(v2, direct)
    assert n1 == n2 == n
    rel = run_projection_plan(str(p), str(tmp_path / "r.csv"), str(tmp_path / "out.csv"), seed=3)
    assert rel.metadata["test_mode"] and rel.estimate.shape == (d * (d - 1) // 2,)
    if kind == "relaxed-projection":
        # the decoded moments complete to a matrix of the body: PSD with diagonal n
        from factorize.kinds.projection.plan import moment_matrix

        M = moment_matrix(rel.estimate, d, n)
        assert np.linalg.eigvalsh(M).min() >= -1e-6 * n
        assert np.all(np.abs(rel.estimate) <= n * (1 + 1e-6))


@pytest.mark.parametrize("kind", ["covariance", "relaxed-projection"])
def test_moment_decoders_help_in_the_sparse_regime_and_respect_the_bound(kind):
    """d = 30 attributes, n = 60 records of 3 types: projected moments beat the raw noisy
    ones (20 draws) and stay below the plan's bound."""
    d, n = 30, 60
    plan = build_projection_plan(f"parity:{d}:2", "epsilon=1,delta=1e-6", kind, n=n,
                                 domain=binary_domain(d))
    W = parse_workload(f"parity:{d}:2")
    S = 1 - 2 * sparse_records(d, n, 3, seed=2)
    v = (S.T @ S)[np.triu_indices(d, 1)].astype(float)
    se, bounds = [], []
    for rep in range(20):
        rel = release_projection(plan, v, n, TestRandom(rep), workload=W)
        se.append(np.mean((rel.estimate - v) ** 2))
        bounds.append(rel.metadata["rmse_bound"])
    rmse = np.sqrt(np.mean(se))
    linear = plan.expected_error["linear_rmse"]
    assert rmse < 0.8 * linear
    assert rmse <= min(bounds)


def test_relaxed_projection_records_path_at_100_attributes(tmp_path):
    d, n = 100, 150
    plan = build_projection_plan(f"parity:{d}:2", "rho=0.5", "relaxed-projection", n=n,
                                 domain=binary_domain(d))
    p = tmp_path / "r.plan"
    save_projection_plan(plan, p)
    X = sparse_records(d, n, 4, seed=4)
    write_records(tmp_path / "r.csv", X)
    rel = run_projection_plan(str(p), str(tmp_path / "r.csv"), seed=1)
    S = 1 - 2 * X
    v = (S.T @ S)[np.triu_indices(d, 1)]
    assert rel.estimate.shape == (4950,)
    assert np.sqrt(np.mean((rel.estimate - v) ** 2)) <= rel.metadata["rmse_bound"]


def test_cli_projection_plan(tmp_path, capsys):
    d = 5
    dom = ",".join(f"a{i}=2" for i in range(d))
    out = tmp_path / "c.plan"
    args = ["plan", "--workload", f"parity:{d}:2", "--privacy", "epsilon=1,delta=1e-6",
            "--mechanism", "covariance", "--domain", dom, "--out", str(out)]
    assert main(args) == 2  # needs --public-n
    assert main(args + ["--public-n", "50"]) == 2  # needs replace neighbours
    assert main(args + ["--public-n", "50", "--neighbouring", "replace"]) == 0
    assert main(["verify", str(out)]) == 0
    assert main(["inspect", str(out)]) == 0
    write_records(tmp_path / "r.csv", sparse_records(d, 50, 2, seed=5))
    assert main(["run", str(out), "--data", str(tmp_path / "r.csv"), "--out",
                 str(tmp_path / "a.csv"), "--seed", "1"]) == 0
    write_records(tmp_path / "r49.csv", sparse_records(d, 49, 2, seed=5))
    assert main(["run", str(out), "--data", str(tmp_path / "r49.csv"), "--out",
                 str(tmp_path / "b.csv"), "--seed", "1"]) == 2
    assert not (tmp_path / "b.csv").exists()
    assert "public dataset size" in capsys.readouterr().err


# -------------------------------------------------- 2-way marginals through the moments of (1, s)

MARG = "marginals:2x2x2x2x2x2:2"


def test_marginal_layout_is_exact_and_verified(tmp_path):
    """The augmented moments of (1, s) determine every 2-way marginal cell exactly; the plan
    (default domain: d binary attributes) verifies, with the sensitivity cross-checked."""
    from factorize.kinds.projection.plan import moment_layout, moment_matrix

    W = parse_workload(MARG)
    lay = moment_layout(W)
    assert (lay.d, lay.augmented, lay.m, lay.pairs) == (6, True, 7, 21)
    X = sparse_records(6, 137, 5, seed=8)
    codes, counts = np.unique(X, axis=0, return_counts=True)
    v = lay.moments(codes, counts)
    np.testing.assert_array_equal(lay.answers(moment_matrix(v, 7, 137), 137),
                                  W.dense() @ histogram_of(X))
    plan = build_projection_plan(MARG, "epsilon=1,delta=1e-6", "relaxed-projection", n=137)
    assert list(plan.domain.sizes) == [2] * 6
    p = tmp_path / "m.plan"
    save_projection_plan(plan, p)
    check = verify_projection_plan(load_projection_plan(p))
    detail = next(c["detail"] for c in check.checks if c["name"] == "measurement")
    assert check.passed and "cross-checked" in detail
    np.save(tmp_path / "h.npy", histogram_of(X))
    # records path (attribute names x0..x5 in the default domain)
    with open(tmp_path / "r.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"x{i}" for i in range(6)])
        w.writerows(X.tolist())
    v1, n1 = measure(plan, str(tmp_path / "r.csv"), W)
    v2, n2 = measure(plan, str(tmp_path / "h.npy"), W)
    np.testing.assert_array_equal(v1, v)
    np.testing.assert_array_equal(v2, v)
    assert n1 == n2 == 137
    with pytest.raises(PlanError, match="binary"):
        build_projection_plan("marginals:2x3:2", "epsilon=1,delta=1e-6", "covariance", n=5)


@pytest.mark.parametrize("kind", ["covariance", "relaxed-projection"])
def test_marginals_through_moments_beat_the_unprojected_release_when_sparse(kind):
    """8 binary attributes, n = 30 records of 3 types, 20 draws: the projected marginals beat
    the unprojected moment release (whose RMSE is σ·√(3/16) exactly) and stay below the bound."""
    from factorize.kinds.projection.plan import moment_layout

    W = parse_workload("marginals:2x2x2x2x2x2x2x2:2")
    lay = moment_layout(W)
    n = 30
    X = sparse_records(8, n, 3, seed=9)
    codes, counts = np.unique(X, axis=0, return_counts=True)
    v = lay.moments(codes, counts)
    y = W.dense() @ histogram_of(X)
    plan = build_projection_plan(W, "epsilon=1,delta=1e-6", kind, n=n)
    se, bounds = [], []
    for rep in range(20):
        rel = release_projection(plan, v, n, TestRandom(300 + rep), workload=W)
        se.append(np.mean((rel.estimate - y) ** 2))
        bounds.append(rel.metadata["rmse_bound"])
    rmse = np.sqrt(np.mean(se))
    assert rmse < 0.6 * plan.expected_error["linear_rmse"]
    assert rmse <= min(bounds)


def test_marginal_cells_bound_survives_when_projection_moves_error_to_first_moments():
    """At large n the Frobenius projection can raise the cells' error above the unprojected
    σ·√(3/16) (first moments weigh d − 1 times in the cells); the stated bound f·σ must
    still hold (20 draws, n = 3000)."""
    from factorize.kinds.projection.plan import moment_layout

    W = parse_workload("marginals:2x2x2x2x2x2x2x2:2")
    lay = moment_layout(W)
    n = 3000
    X = sparse_records(8, n, 12, seed=10)
    codes, counts = np.unique(X, axis=0, return_counts=True)
    v = lay.moments(codes, counts)
    y = W.dense() @ histogram_of(X)
    plan = build_projection_plan(W, "epsilon=1,delta=1e-6", "covariance", n=n)
    se, bounds = [], []
    for rep in range(20):
        rel = release_projection(plan, v, n, TestRandom(500 + rep), workload=W)
        se.append(np.mean((rel.estimate - y) ** 2))
        bounds.append(rel.metadata["rmse_bound"])
    assert np.sqrt(np.mean(se)) <= min(bounds)
