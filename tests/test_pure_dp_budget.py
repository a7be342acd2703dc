"""The pure-DP search's work budget scales with the problem, and no search is run twice:
the default budget's rule, tiny problems searched with few random restarts, the deterministic
starts always run, a Kronecker strategy with one free factor found by one exact search (no
alternation), and a one-attribute workload not refined again as a "flat" strategy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import factorize.pure_dp.kron as kron_module
from factorize.pure_dp.api import plan_pure_dp
from factorize.pure_dp.kron import factor_trace, optimize_kron
from factorize.pure_dp.one_d import (
    DEFAULT_WORK_BUDGET,
    EVAL_OVERHEAD,
    default_p_max,
    default_work_budget,
    iteration_cost,
    optimize_p_identity,
)
from factorize.pure_dp.optimizer import Start, multistart
from factorize.pure_dp.p_identity import PIdentityObjective
from factorize.pure_dp.structure import product_structure
from workloads import parse_workload


def _gram(spec: str) -> tuple[np.ndarray, int]:
    W = np.asarray(parse_workload(spec).dense(), dtype=np.float64)
    return W.T @ W, W.shape[0]


def test_default_budget_rule() -> None:
    # independent arithmetic of the stated rule: max(40, (p·n)²/8) iterations of p·n² + 10⁵
    assert default_work_budget(5, 4) == 50 * (4 * 25 + 1e5)
    assert default_work_budget(3, 4) == 40 * (4 * 9 + 1e5)           # the floor
    assert default_work_budget(32, 4) == 2048 * (4 * 1024 + 1e5)
    assert default_work_budget(1024, 64) == DEFAULT_WORK_BUDGET      # the cap
    assert iteration_cost(0, 7) == 49 + EVAL_OVERHEAD                # p = 0 counts as one row
    sizes = [2, 3, 5, 8, 16, 32, 64, 128, 256, 512, 1024]
    budgets = [default_work_budget(n, default_p_max(n)) for n in sizes]
    assert budgets == sorted(budgets)


def test_tiny_problem_runs_few_random_starts_and_records_its_budget() -> None:
    G, k = _gram("prefix:5")
    r = optimize_p_identity(G, k, restarts=2)
    s = r.search
    assert s.work_budget == default_work_budget(5, default_p_max(5))
    assert s.summary()["work_budget"] == s.work_budget and s.work_spent > 0
    # the unbounded schedule runs all 2 × 3 random starts (p = 1, 2, 4) whatever n; the
    # budget (50 iterations' worth) stops the first stage after the deterministic starts
    labels = [o.label for o in s.outcomes]
    assert "identity" in labels and any(lb.startswith("tree") for lb in labels)
    assert sum(lb.startswith("random") for lb in labels) < 6
    # still the optimum the unbounded search finds (prefix:5: HDMM's p-Identity optimum)
    full = optimize_p_identity(G, k, work_budget=None, restarts=2)
    assert sum(o.label.startswith("random") for o in full.search.outcomes) == 6
    assert r.value == pytest.approx(full.value, rel=1e-9)


def test_deterministic_starts_always_run_and_prior_work_counts() -> None:
    obj = PIdentityObjective(*_gram("allrange:6"))
    x0s = [np.zeros(6), np.ones(6), np.full(12, 0.5), np.full(6, 2.0)]
    starts = [Start(f"s{i}", x, None, x.size // 6) for i, x in enumerate(x0s)]
    r = multistart(lambda st: obj.value_and_grad, starts, work_budget=10.0, spent=100.0,
                   min_starts=3, stage1_iters=5, polish_top=0)
    assert sorted(o.label for o in r.outcomes) == ["s0", "s1", "s2"]  # s3: budget spent
    assert r.work_spent >= 100.0 and r.work_budget == 10.0
    r1 = multistart(lambda st: obj.value_and_grad, starts, work_budget=10.0, spent=100.0,
                    stage1_iters=5, polish_top=0)
    assert [o.label for o in r1.outcomes] == ["s0"]  # min_starts defaults to one


def test_one_free_factor_is_one_exact_search(monkeypatch: pytest.MonkeyPatch) -> None:
    P = product_structure(parse_workload("vstack(total:5,prefix:5,allrange:5)"))
    calls: list[int] = []
    real = kron_module.optimize_p_identity

    def counted(G, k, **kw):
        calls.append(G.shape[0])
        return real(G, k, **kw)

    monkeypatch.setattr(kron_module, "optimize_p_identity", counted)
    ks = optimize_kron(P)
    # the blocks weighted alike (a warm start) and the exact problem: two searches, where
    # the alternation from two initialisations ran two full searches and four warm ones
    assert calls == [5, 5] and ks.sweeps == 1
    # its value is f = Σ_b w_b² tr(G_b (AᵀA)⁻¹) of the returned factor, recomputed
    A = ks.factors[0]
    f = sum(b.weight ** 2 * factor_trace(b.factors[0].T @ b.factors[0], A) for b in P.blocks)
    assert ks.value == pytest.approx(f, rel=1e-10)
    # and no worse than the alternation it replaces (both of its initialisations)
    calls.clear()
    d = len(P.sizes)
    grams = [[b.factors[i].T @ b.factors[i] for b in P.blocks] for i in range(d)]
    w2 = np.array([b.weight ** 2 for b in P.blocks])
    for init in ("identity", "normalised sum"):
        alt = kron_module._alternate(P, grams, w2, [None], init, sweeps=8, tol=1e-7, seed=0, opts={})
        assert ks.value <= alt.value * (1 + 1e-9)


def test_one_attribute_union_is_not_refined_flat_again() -> None:
    _, found = plan_pure_dp("vstack(prefix:8,scale(2,allrange:8))")
    families = [s.family for s in found]
    assert "kronecker" in families and not any(f.startswith("p-identity (flat") for f in families)
    best = min(found, key=lambda s: s.rmse)
    assert math.isfinite(best.rmse)


def test_no_flat_refinement_above_the_row_limit():
    # marginals:8x2x32:1 under pure DP: the flattened Kronecker strategy has 487 extra rows; its
    # refinement ran 312 L-BFGS-B iterations for 86 s (several evaluations per iteration) and
    # lost to the marginal weights by 2x. Above MAX_FLAT_ROWS it is not attempted.
    from factorize.pure_dp.api import plan_kron, plan_pure_dp
    from factorize.pure_dp.flat import MAX_FLAT_ROWS

    W = "marginals:8x2x32:1"
    best, candidates = plan_pure_dp(W)
    families = [c.family for c in candidates]
    assert not any("flat" in f for f in families), families
    thetas = [f["p"] for f in plan_kron(W).optimizer["factors"] if f is not None]
    rows = (8 + thetas[0]) * (2 + thetas[1]) * (32 + thetas[2]) - 512
    assert rows > MAX_FLAT_ROWS
    kron = next(c for c in candidates if c.family == "kronecker")
    assert best.error.rmse < kron.error.rmse
