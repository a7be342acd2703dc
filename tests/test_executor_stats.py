"""Statistical checks of the executor: exact samplers vs their formulas, Monte Carlo variance
vs the plan's claim, post-processing, and an end-to-end run on Adult."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from factorize.executor.release import release_dense
from factorize.privacy import ZCDP, NoiseSpec, PureDP, TestRandom, sample_on_grid, sampled_variance
from tests.plan_fixtures import small_plan
from tests.raw_adult import ADULT_DIR as ADULT


def _chi2_pvalue(samples: np.ndarray, pmf) -> float:
    vals, counts = np.unique(samples, return_counts=True)
    support = np.arange(vals.min() - 2, vals.max() + 3)
    p = pmf(support)
    p = p / p.sum()
    n = samples.size
    obs = np.array([counts[vals == s].sum() if s in vals else 0 for s in support], dtype=float)
    exp = n * p
    # pool the tails into bins with expected count >= 5
    keep = exp >= 5
    o = np.append(obs[keep], obs[~keep].sum())
    e = np.append(exp[keep], exp[~keep].sum())
    if e[-1] < 5:
        o[-2] += o[-1]; e[-2] += e[-1]; o, e = o[:-1], e[:-1]
    return float(stats.chisquare(o, e).pvalue)


@pytest.mark.parametrize("family,scale", [("gaussian", 2.5), ("gaussian", 0.8), ("laplace", 1.7)])
def test_exact_sampler_matches_its_formula(family, scale):
    n = 200_000
    spec = NoiseSpec(family, scale, 1.0, "l2" if family == "gaussian" else "l1", "add_remove",
                     ZCDP(1.0) if family == "gaussian" else PureDP(1.0),
                     "discrete_gaussian" if family == "gaussian" else "discrete_laplace",
                     grid=1.0, dim=n)
    y = sample_on_grid(np.zeros(n), spec, TestRandom(11)).astype(np.int64)
    if family == "gaussian":
        from factorize.privacy import lattice_sigma2

        s2 = float(lattice_sigma2(scale, 1.0)[0])
        pmf = lambda x: np.exp(-x.astype(float) ** 2 / (2 * s2))  # noqa: E731
        var = s2
    else:
        from factorize.privacy import lattice_laplace_scale

        t = float(lattice_laplace_scale(scale, 1.0))
        pmf = lambda x: np.exp(-np.abs(x.astype(float)) / t)  # noqa: E731
        var = 2 * math.exp(-1 / t) / (1 - math.exp(-1 / t)) ** 2
    assert _chi2_pvalue(y, pmf) > 1e-3
    # the exact variance of the formula, within a 99.9% band
    assert abs(y.var() - var) < 3.3 * var * math.sqrt(2.0 / n) * 1.5


@pytest.mark.parametrize("privacy", ["epsilon=1,delta=1e-6", "epsilon=1"])
def test_monte_carlo_variance_matches_plan(privacy):
    """Empirical per-query variance over 1500 test-mode releases lies in the 99% band."""
    plan = small_plan("prefix:8", privacy)
    h = np.array([5, 0, 3, 9, 1, 0, 2, 7])
    truth = np.cumsum(h)
    reps = 1500
    rng = TestRandom(2024)
    est = np.empty((reps, 8))
    covered = np.zeros(8)
    from factorize.kinds.factorization.verify import verify_plan

    check = verify_plan(plan, raise_on_failure=True)  # once: every release below uses it
    for r in range(reps):
        rel = release_dense(plan, h, rng, check=check)
        est[r] = rel.estimate
        covered += (rel.ci_low <= truth) & (truth <= rel.ci_high)
        if r == 0:
            se = rel.std_error
            assert rel.metadata["test_mode"] is True
    claimed = se ** 2
    emp = est.var(axis=0, ddof=1)
    # Bonferroni over the 8 queries: family-wise 99%
    a = 0.01 / 8
    if privacy.startswith("epsilon=1,"):
        lo = stats.chi2.ppf(a / 2, reps - 1) / (reps - 1)
        hi = stats.chi2.ppf(1 - a / 2, reps - 1) / (reps - 1)
        assert np.all(emp / claimed > lo) and np.all(emp / claimed < hi), emp / claimed
    else:
        # Laplace sums are not chi-square: use the variance of the sample variance,
        # Var(s²) ≈ (μ4 − σ⁴)/n with kurtosis ≤ 6 (Laplace), a conservative normal band.
        z = stats.norm.ppf(1 - a / 2)
        band = z * np.sqrt((6 + 3 - 1) / reps)
        assert np.all(np.abs(emp / claimed - 1) < band), emp / claimed
    # unbiased: mean error within 99% band
    z = stats.norm.ppf(1 - 0.01 / 16)
    assert np.all(np.abs(est.mean(axis=0) - truth) < z * se / math.sqrt(reps) + 1e-6)
    # 95% intervals cover at least ~95% (normal: about 95%; Chebyshev: conservative)
    assert np.all(covered / reps >= 0.93), covered / reps
    assert sampled_variance(plan.noise) >= plan.noise.scale ** 2 * (2 if "laplace" in plan.noise.family else 1)


def test_postprocess_nonneg_consistent():
    from factorize.executor.postprocess import nonneg_consistent, project_simplex
    from workloads import parse_workload

    p = project_simplex(np.array([0.3, -1.0, 2.0, 0.1]), 1.0)
    assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
    W = parse_workload("kron(prefix:8,identity:4)")
    h = np.zeros(32); h[[1, 5, 17]] = [10, 4, 6]
    rng = np.random.default_rng(5)  # test-only noise for the fit
    y = W.matvec(h) + rng.normal(0, 2, 32)
    out = nonneg_consistent(W, y)
    assert out["converged"] and out["kkt_residual"] <= 1e-8
    ans, hh = out["answers"], out["histogram"]
    # consistent: the answers of some h >= 0 summing to n_hat
    assert hh.min() >= 0 and hh.sum() == pytest.approx(out["n_hat"]) and out["n_hat"] > 0
    np.testing.assert_allclose(ans, W.matvec(hh))
    # optimal: no feasible point does better (compare with the projected least-squares start)
    start = project_simplex(np.linalg.lstsq(W.dense(), y, rcond=None)[0], out["n_hat"])
    assert np.linalg.norm(ans - y) <= np.linalg.norm(W.matvec(start) - y) + 1e-9


def test_postprocess_in_release_is_consistent():
    plan = small_plan("prefix:8", "rho=0.5", postprocess="nonneg")
    rel = release_dense(plan, np.array([5, 0, 3, 9, 1, 0, 2, 7]), TestRandom(3))
    pp = rel.postprocessed
    assert pp is not None and np.all(np.diff(pp) >= -1e-6) and pp[0] >= -1e-6  # prefix sums of h ≥ 0
    assert rel.metadata["postprocess"]["kkt_residual"] <= 1e-6


@pytest.mark.skipif(not (ADULT / "adult.csv").is_file(),
                    reason=f"Adult data not found at {ADULT} (../shared/data/adult); end-to-end test skipped")
def test_adult_end_to_end(tmp_path, capsys):
    import json

    from factorize.cli.plan import main

    attrs = ["sex", "race", "relationship", "income>50K"]
    plan = tmp_path / "adult.plan"
    assert main(["plan", "--workload", "marginals:2x5x6x2:2", "--privacy", "epsilon=1,delta=1e-6",
                 "--domain", str(ADULT / "adult-domain.json"), "--attributes", ",".join(attrs),
                 "--postprocess", "nonneg", "--out", str(plan)]) == 0
    out = tmp_path / "answers.json"
    assert main(["run", str(plan), "--data", str(ADULT / "adult.csv"), "--out", str(out),
                 "--ignore-extra-columns", "--seed", "1"]) == 0
    capsys.readouterr()
    d = json.loads(out.read_text())
    # true counts, computed independently with numpy
    raw = np.loadtxt(ADULT / "adult.csv", delimiter=",", skiprows=1, dtype=np.int64)
    header = (ADULT / "adult.csv").read_text().splitlines()[0].split(",")
    cols = raw[:, [header.index(a) for a in attrs]]
    sizes = [2, 5, 6, 2]
    truth = []
    for i in range(4):
        for j in range(i + 1, 4):
            t = np.zeros((sizes[i], sizes[j]))
            np.add.at(t, (cols[:, i], cols[:, j]), 1)
            truth.extend(t.ravel())
    truth = np.array(truth)
    est = np.array([a["estimate"] for a in d["answers"]])
    se = np.array([a["std_error"] for a in d["answers"]])
    lo = np.array([a["ci_low"] for a in d["answers"]])
    hi = np.array([a["ci_high"] for a in d["answers"]])
    pp = np.array([a["estimate_postprocessed"] for a in d["answers"]])
    assert est.size == truth.size == 78
    assert np.all(np.abs(est - truth) <= 6 * se)
    assert np.mean((lo <= truth) & (truth <= hi)) >= 0.85
    assert np.sqrt(np.mean((pp - truth) ** 2)) <= 1.2 * np.sqrt(np.mean((est - truth) ** 2))
    assert d["metadata"]["test_mode"] is True
