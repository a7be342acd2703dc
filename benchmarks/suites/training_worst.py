"""``python -m benchmarks --suite training_worst``: dense training strategies of the worst step.
Writes reports/bench_training_worst.md (+ .json).

    python -m benchmarks --suite training_worst [--ns 256 512 1024] [--epochs 1 2 4]

For the prefix sums at n steps under ``epochs=K`` participation, the worst step's error
variance per unit noise, ``Δ² max_t ‖R_t‖²`` (the γ₂-type objective): the certified optimum
of ``training.multi_epoch.plan_multi_epoch(objective="max")`` (its upper bound, the stored
strategy's worst step at its certified sensitivity; its lower bound from the stored dual
witness, both re-derived by ``check_training_certificate``), time and gap — beside the
baseline a user has without it, the total-error optimum (``objective="gamma_f"``, the
multi-epoch program of Choquette-Choo et al. 2023 that jax_privacy's dense optimiser also
solves) evaluated on its worst step at its own certified sensitivity. One BLAS thread.
"""

from __future__ import annotations

from typing import Any

NAME = "training_worst"
SUMMARY = ("dense training strategies of the worst step (γ₂-type) under epochs=K: certified "
           "optimum and gap against the total-error optimum's worst step")


def add_arguments(parser: Any) -> None:
    parser.add_argument("--ns", type=int, nargs="+", default=[256, 512, 1024], help="steps n")
    parser.add_argument("--epochs", type=int, nargs="+", default=[1, 2, 4], help="epochs K")


def _row(n: int, K: int, harness: Any) -> dict[str, Any]:
    import numpy as np

    from benchmarks.harness import load1
    from factorize.privacy.participation import Participation
    from factorize.threads import limited
    from factorize.training.certificate import check_training_certificate, solution_figures
    from factorize.training.multi_epoch import plan_multi_epoch

    W = np.tril(np.ones((n, n)))
    p = Participation("epochs", K)
    load = [load1()]
    with limited(1):
        worst = harness.measure(lambda: plan_multi_epoch(W, p, objective="max"))
        total = harness.measure(lambda: plan_multi_epoch(W, p))
        check = check_training_certificate(W, worst.result)
        _, baseline, _ = solution_figures(W, p, total.result.strategy, total.result.reconstruction, "max")
    load.append(load1())
    return {"n": n, "K": K, "upper": check.upper, "lower": check.lower, "gap": check.gap,
            "verified": check.passed, "seconds": worst.best, "cpu_seconds": worst.median_cpu,
            "iterations": worst.result.iterations, "baseline_worst": baseline,
            "baseline_seconds": total.best, "ratio": check.upper / baseline, "load": load}


def run(args: Any, harness: Any) -> Any:
    from benchmarks.harness import Report

    rows = []
    for n in args.ns:
        for K in args.epochs:
            if n % K:
                continue
            rows.append(_row(n, K, harness))
            r = rows[-1]
            print(f"n={n} K={K}: worst step {r['upper']:.8g} (lower {r['lower']:.8g}, gap "
                  f"{r['gap']:.2g}) in {r['seconds']:.1f} s; total-error optimum's worst step "
                  f"{r['baseline_worst']:.8g}", flush=True)
    lines = ["Prefix sums, `epochs=K` participation (each record once per epoch of n/K steps), "
             "Gaussian noise; figures per unit noise multiplier. One BLAS thread; load = 1-minute "
             "load average before/after the row (2 cores, shared).", "",
             "| n | K | worst-step optimum (certified upper) | lower bound | gap | time s (CPU s) "
             "| total-error optimum's worst step | ratio | its time s | load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['K']} | {r['upper']:.8g} | {r['lower']:.8g} | {r['gap']:.2g} | "
                     f"{r['seconds']:.1f} ({r['cpu_seconds']:.1f}) | {r['baseline_worst']:.8g} | "
                     f"{r['ratio']:.4f} | {r['baseline_seconds']:.1f} | "
                     f"{r['load'][0]:.2f}/{r['load'][1]:.2f} |")
    lines += ["", f"Every plan's certificate re-checked: {all(r['verified'] for r in rows)}. "
              "ratio = the worst-step optimum over the total-error optimum's worst step (< 1: "
              "planning the worst step lowers it). Regenerate: `python -m benchmarks --suite "
              "training_worst`."]
    return Report("Dense training strategies of the worst step (γ₂-type) under epochs=K",
                  "\n".join(lines), {"rows": rows})
