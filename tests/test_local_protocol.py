"""The local model end to end: plan (η choice, certificate, file,
verification), clients, the streaming server, and Monte Carlo against the predicted error."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from factorize.cli import main
from factorize.kinds.local.build import build_local_plan
from factorize.kinds.local.plan import (
    LocalPlan,
    load_local_plan,
    n_needed,
    predicted_errors,
    save_local_plan,
    verify_local_plan,
)
from factorize.kinds.local.protocol import (
    aggregate_file,
    aggregate_sums,
    encode_codes,
    encode_record,
    write_messages,
)
from factorize.privacy import TestRandom
from workloads import parse_workload


@pytest.fixture(scope="module")
def plan():
    return build_local_plan("prefix:16", "epsilon=1", n=20000, eta=0.1, alpha=0.2)


def test_plan_records_eta_factorization_and_bounds(plan, tmp_path):
    W = parse_workload("prefix:16").dense()
    assert plan.eta == 0.1 and plan.randomizer["kind"] == "l2"
    assert np.max(np.abs(W - plan.R @ plan.A)) <= 0.1 + 1e-9
    assert np.linalg.norm(plan.A, axis=0).max() <= 1.0 + 1e-12
    b = plan.bounds
    assert b["gamma2_lower"] <= b["gamma2_upper"] * (1 + 1e-9)
    # ‖R‖_{2→∞} with max‖a_x‖ = 1 is the certified upper value
    assert np.linalg.norm(plan.R, axis=1).max() == pytest.approx(b["gamma2_upper"], rel=1e-6)
    assert b["n_needed_predicted"] == pytest.approx(n_needed(plan.R, 0.1, plan.randomizer["variance"], 0.2))
    # the proved sample size is larger than the normal approximation; the lower bound is below both
    assert b["n_needed_upper"] >= b["n_needed_predicted"]
    assert b["n_needed_lower"] <= b["n_needed_predicted"]
    assert b["n_needed_lower_distributional"] <= b["n_needed_upper"]
    p = tmp_path / "p.lplan"
    save_local_plan(plan, p)
    again = load_local_plan(p)
    assert verify_local_plan(again) == []
    np.testing.assert_array_equal(again.R, plan.R)
    # tampering is refused
    bad = LocalPlan(**{**plan.__dict__, "A": plan.A * 1.01})
    assert any("columns" in f or "R·A" in f for f in verify_local_plan(bad))
    louder = LocalPlan(**{**plan.__dict__, "randomizer": {**plan.randomizer, "scale": plan.randomizer["scale"] * 0.9}})
    assert any("randomizer" in f for f in verify_local_plan(louder))


def test_eta_search_prefers_bias_only_when_it_pays():
    small = build_local_plan("prefix:16", "epsilon=1", n=200)
    large = build_local_plan("prefix:16", "epsilon=1", n=10**8)
    assert small.eta >= large.eta
    assert large.eta == 0.0  # at huge n the bias would dominate the noise


def test_server_is_unbiased_up_to_eta_and_matches_the_predicted_spread(plan):
    """n = 20000 users on 3 cells, 12 releases: per-query mean within n·η + 5 standard errors
    of W h, and the empirical std within 15% of the stated per-query std."""
    W = parse_workload("prefix:16").dense()
    rng = np.random.default_rng(0)
    cells = rng.choice([2, 7, 11], 20000, p=[0.5, 0.3, 0.2])
    codes = cells[:, None]
    h = np.bincount(cells, minlength=16)
    y = W @ h
    ests = []
    for rep in range(12):
        Y = encode_codes(plan, codes, TestRandom(rep))
        ests.append(aggregate_sums(plan, Y.sum(axis=0), 20000)["estimate"])
    ests = np.array(ests)
    sd = plan.per_query_std(20000)
    assert np.all(np.abs(ests.mean(axis=0) - y) <= 20000 * plan.eta + 5 * sd / np.sqrt(12))
    emp = ests.std(axis=0, ddof=1)
    # 12 draws: the sample sd's relative error is about 1/√22; compare the average over queries
    assert np.mean(emp) == pytest.approx(np.mean(sd), rel=0.15)


def test_streaming_aggregate_equals_in_memory_sum_and_rejects_bad_files(plan, tmp_path):
    from factorize.engines import DataError

    codes = np.repeat(np.arange(16), 50)[:, None]
    Y = encode_codes(plan, codes, TestRandom(4))
    path = tmp_path / "m.parquet"
    write_messages(path, Y, "0" * 64, test_mode=True)
    got = aggregate_file(plan, path)
    want = aggregate_sums(plan, Y.sum(axis=0), Y.shape[0])
    np.testing.assert_allclose(got["estimate"], want["estimate"], rtol=1e-10, atol=1e-8)
    assert got["n"] == 800
    write_messages(tmp_path / "short.parquet", Y[:, :-1], "0" * 64, test_mode=True)
    with pytest.raises(DataError, match="columns"):
        aggregate_file(plan, tmp_path / "short.parquet")
    Y2 = Y.copy()
    Y2[3, 0] = np.nan
    write_messages(tmp_path / "nan.parquet", Y2, "0" * 64, test_mode=True)
    with pytest.raises(DataError, match="non-finite"):
        aggregate_file(plan, tmp_path / "nan.parquet")


def test_single_client(plan):
    y = encode_record(plan, {"x0": 5}, TestRandom(1))
    assert y.shape == (plan.A.shape[0],)
    assert np.linalg.norm(y) == pytest.approx(plan.randomizer["scale"], rel=1e-12)
    with pytest.raises(ValueError):
        encode_record(plan, {"x0": 16})
    with pytest.raises(ValueError):
        encode_record(plan, {"y": 1})


def test_predicted_errors_formula():
    R = np.array([[3.0, 4.0], [0.0, 1.0]])
    e = predicted_errors(R, 0.05, 2.0, 100)
    assert e["predicted_noise"] == pytest.approx(5.0 * np.sqrt(2.0 * 2.0 * np.log(4.0) / 100))
    assert e["predicted_max_error"] == pytest.approx(0.05 + e["predicted_noise"])


def test_cli_local_round_trip(tmp_path, capsys):
    lp = tmp_path / "c.lplan"
    assert main(["local", "plan", "--workload", "marginals:2x3:2", "--privacy", "epsilon=1",
                 "--n", "5000", "--alpha", "0.1", "--domain", "a=2,b=3", "--out", str(lp)]) == 0
    assert main(["local", "verify", str(lp)]) == 0
    assert main(["local", "inspect", str(lp)]) == 0
    with open(tmp_path / "r.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["a", "b"])
        w.writerows([[i % 2, i % 3] for i in range(3000)])
    msgs = tmp_path / "m.parquet"
    assert main(["local", "simulate", str(lp), "--data", str(tmp_path / "r.csv"), "--out", str(msgs),
                 "--seed", "3"]) == 0
    out = tmp_path / "a.csv"
    assert main(["local", "aggregate", str(lp), "--messages", str(msgs), "--out", str(out)]) == 0
    from factorize.executor.output import read_answers

    cols, meta = read_answers(out)
    assert meta["test_mode"] is True and meta["n"] == 3000 and cols["estimate"].size == 6
    assert main(["local", "client", str(lp), "--record", "a=1,b=2"]) == 0
    assert main(["local", "client", str(lp), "--record", "a=2,b=2"]) == 2
    assert main(["report", str(lp), "--out", str(tmp_path / "l.html")]) == 0
    text = (tmp_path / "l.html").read_text()
    assert "γ₂(W; η) lower (dual certificate)" in text and "every ε-LDP protocol" in text


def test_gaussian_randomizer_plan_has_no_pure_lower_bound():
    p = build_local_plan("prefix:8", "epsilon=1,delta=1e-6", n=1000, alpha=0.3)
    assert p.randomizer["kind"] == "gaussian" and verify_local_plan(p) == []
    assert p.bounds["n_needed_lower"] is None and "pure" in p.bounds["n_needed_lower_note"]
    with pytest.raises(ValueError, match="pure"):
        build_local_plan("prefix:8", "epsilon=1,delta=1e-6", n=1000, randomizer="l2")


def test_target_accuracy_chooses_the_eta_needing_fewest_users():
    """prefix:16, ε = 1, α = 0.3: the chosen η minimises the predicted n over the grid (each
    grid point re-planned with η fixed, independently)."""
    chosen = build_local_plan("prefix:16", "epsilon=1", n=1000, alpha=0.3)
    needs = {e: build_local_plan("prefix:16", "epsilon=1", n=1000, eta=e, alpha=0.3).bounds["n_needed_predicted"]
             for e in chosen.bounds["eta_grid"]}
    assert chosen.bounds["n_needed_predicted"] == pytest.approx(min(needs.values()), rel=1e-6)
    assert needs[max(needs)] == float("inf")  # η ≥ α can never reach the target
