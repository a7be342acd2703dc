"""``python -m benchmarks --suite local``: local-model simulation benchmark: 10⁶
simulated users on the Adult domain, all 2-way marginals over sex, race, relationship and
income>50K; measured error against the plan's prediction; messages per second per core for
the client and the server.

    python -m benchmarks --suite local [--users 1000000] [--reps 3]

writes ``reports/bench_local.md`` and ``.json``. BLAS is pinned to one thread whatever
``--threads`` says (the client's randomizer is numpy, the server is DuckDB with
``threads=1``) so the rates are per core.
Users are drawn with replacement from Adult's 48,842 records; clients run in test mode
(``TestRandom``: reproducible, not private) — an evaluation, not a release.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from benchmarks.harness import ADULT_DIR

NAME = "local"
SUMMARY = ("the local model: 10⁶ simulated Adult users, measured against predicted error, messages "
           "per second per core (client and server)")

ADULT = ADULT_DIR
ATTRS = ["sex", "race", "relationship", "income>50K"]
SPEC = "marginals:2x5x6x2:2"
CHUNK = 100_000


def add_arguments(parser) -> None:
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)


def run(args, harness):
    from factorize.threads import limited

    with limited(1):  # per-core rates: one BLAS thread whatever --threads says
        return _run(args, harness)


def _run(args, harness):
    import numpy as np

    from benchmarks.harness import Report
    from factorize.engines import distinct_records_duckdb
    from factorize.kinds.local.build import build_local_plan
    from factorize.kinds.local.protocol import aggregate_file, encode_codes, write_messages
    from factorize.privacy import TestRandom
    from workloads import Domain, parse_workload

    n = args.users
    dom = Domain.from_json(str(ADULT / "adult-domain.json")).project(ATTRS)
    codes, counts = distinct_records_duckdb(str(ADULT / "adult.csv"), dom, allow_extra_columns=True)
    # DuckDB returns the distinct tuples in no set order: sorted, the seeded draws below pick
    # the same users in every run (and so the same errors)
    order = np.lexsort(codes.T[::-1])
    pool = np.repeat(codes[order], counts[order], axis=0)
    W = parse_workload(SPEC)
    Wd = W.dense()
    rows = []
    for privacy in ("epsilon=1", "epsilon=1,delta=1e-6"):
        tp = harness.measure(lambda privacy=privacy: build_local_plan(W, privacy, n=n, alpha=0.02, domain=dom))
        plan, t_plan = tp.result, tp.best
        m = plan.A.shape[0]
        pred_rmse = plan.bounds["predicted_rmse"] * n
        pred_max = plan.bounds["predicted_max_error"] * n
        for rep in range(args.reps):
            rng = np.random.default_rng(100 + rep)
            users = pool[rng.integers(0, pool.shape[0], n)]
            h = np.bincount(users @ np.array([60, 12, 2, 1]), minlength=120)
            truth = Wd @ h
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "messages.parquet"

                def clients(plan=plan, users=users, m=m, rep=rep):
                    Y = np.empty((n, m))
                    trng = TestRandom(1000 + rep)
                    for s in range(0, n, CHUNK):
                        Y[s:s + CHUNK] = encode_codes(plan, users[s:s + CHUNK], trng)
                    return Y

                tc = harness.measure(clients)
                Y, t_client = tc.result, tc.best
                write_messages(path, Y, "bench", test_mode=True)
                size = path.stat().st_size
                del Y
                tc.result = None
                ts = harness.measure(lambda plan=plan, path=path: aggregate_file(plan, path, threads=1))
                rel, t_server = ts.result, ts.best
            err = rel["estimate"] - truth
            rows.append({
                "privacy": privacy, "randomizer": plan.randomizer["kind"], "rep": rep, "users": n,
                "m": m, "eta": plan.eta, "plan_s": t_plan,
                "client_s": t_client, "client_msgs_per_s": n / t_client,
                "server_s": t_server, "server_msgs_per_s": n / t_server, "messages_mb": size / 2**20,
                "rmse": float(np.sqrt(np.mean(err ** 2))), "max_error": float(np.max(np.abs(err))),
                "predicted_rmse": pred_rmse, "predicted_max_error": pred_max,
                "stated_sd_mean": float(np.mean(rel["std_error"])),
                "within_95ci": float(np.mean((truth >= rel["ci_low"]) & (truth <= rel["ci_high"]))),
                "gamma2_upper": plan.bounds["gamma2_upper"], "gamma2_lower": plan.bounds["gamma2_lower"],
                "n_needed_predicted": plan.bounds.get("n_needed_predicted"),
                "n_needed_upper": plan.bounds.get("n_needed_upper"),
                "n_needed_lower": plan.bounds.get("n_needed_lower"),
                "n_needed_lower_distributional": plan.bounds.get("n_needed_lower_distributional"),
                "timing": {"plan": tp.as_dict(), "client": tc.as_dict(), "server": ts.as_dict()},
            })
            print(json.dumps(rows[-1]))
    lines = ["BLAS and DuckDB pinned to one thread (rates per core).", "",
             f"Workload `{SPEC}` (all 2-way marginals over {', '.join(ATTRS)}; 78 counts), users "
             "drawn with replacement from Adult. Error in counts; predicted RMSE = n·√(v·mean‖r_i‖² / n + η²), "
             "predicted worst query = n·(η + ‖R‖_(2→∞)√(2 v ln 2k / n)). Test-mode randomness.", "",
             "| guarantee | randomizer | m | rep | RMSE measured / predicted | max error measured / predicted "
             "| in 95% CI | client msg/s/core | server msg/s/core | messages MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['privacy']} | {r['randomizer']} | {r['m']} | {r['rep']} | "
                     f"{r['rmse']:.4g} / {r['predicted_rmse']:.4g} | {r['max_error']:.4g} / "
                     f"{r['predicted_max_error']:.4g} | {100 * r['within_95ci']:.0f}% | "
                     f"{r['client_msgs_per_s']:.3g} | {r['server_msgs_per_s']:.3g} | {r['messages_mb']:.0f} |")
    first = {p: next(r for r in rows if r["privacy"] == p) for p in ("epsilon=1", "epsilon=1,delta=1e-6")}
    lines += ["", "Certificate and sample sizes (target error 0.02·n on every query):", ""]
    for p, r in first.items():
        lo, lod = r["n_needed_lower"], r["n_needed_lower_distributional"]
        lines.append(f"- {p}: γ₂(W; η={r['eta']:.3g}) ∈ [{r['gamma2_lower']:.6g}, {r['gamma2_upper']:.6g}]; "
                     f"this plan needs ≈ {r['n_needed_predicted']:.4g} users (normal approximation), "
                     f"≤ {r['n_needed_upper']:.4g} (proved)"
                     + (f"; every pure ε-LDP protocol needs n ≥ {lo:.4g} (error on the sample) and "
                        f"≥ {lod:.4g} (error against the population)" if lo is not None else
                        "; no lower bound for (ε, δ)-LDP")
                     + f"; planning took {r['plan_s']:.1f} s.")
    lines += ["", "The lower bounds (seed 003 Thm 23 with every constant explicit) are valid but far "
              "from the upper ones at ε = 1: on the sample only the one-user bound survives. The proved "
              "upper bound uses the messages' mgf constant σ = B (‖Y‖ = B), about m times the "
              "variance the normal approximation uses; the measured errors follow the approximation."
              " One release's RMSE over 78 correlated answers is a weighted χ² with few effective "
              "degrees of freedom, whose median lies below its mean, so single releases mostly land "
              "under the predicted (expected) RMSE."]
    print("\n".join(lines))
    return Report("Local model: 10⁶ simulated users", "\n".join(lines),
                  {"users": n, "reps": args.reps, "threads": 1, "rows": rows})
