"""``python -m benchmarks --suite mee``: the minimum-enclosing-ellipsoid solver.
Writes reports/bench_mee.md (+ .json).

    python -m benchmarks --suite mee

Random Gaussian point sets (the columns of A, d×N, seeds 0–2) around its target
(4096 points in 64 dimensions ≤ 10 s), and the 64 columns of allrange:64 (linearly
independent in R^2080, so one iteration: a sanity row), to the optimality measure
C ≤ 1 + tol (Nikolov, Talwar & Zhang 2013, §3.4.1). Each run is timed in this process after a
warm-up (the table's seconds are the solver's own; the harness records the wall time and the
load around each run in the JSON).
"""

from __future__ import annotations

NAME = "mee"
SUMMARY = ("the minimum-enclosing-ellipsoid (D-optimal design) solver on 1024–16384 points in "
           "16–128 dimensions")

CASES = [("gaussian", 16, 1024), ("gaussian", 64, 4096), ("gaussian", 64, 16384),
         ("gaussian", 128, 4096), ("allrange:64 columns", 2080, 64)]


def points(kind: str, d: int, N: int, seed: int):
    import numpy as np

    from workloads import parse_workload

    if kind == "gaussian":
        return np.random.default_rng(seed).standard_normal((d, N))
    return parse_workload("allrange:64").dense()  # d = 2080 query coordinates, N = 64 columns


def add_arguments(parser) -> None:
    """No options of its own (``--out`` only)."""


def run(args, harness):
    import numpy as np

    from benchmarks.harness import Report
    from factorize.geometry import minimum_enclosing_ellipsoid

    minimum_enclosing_ellipsoid(np.random.default_rng(9).standard_normal((8, 64)))  # warm-up
    lines = ["- algorithm: Frank–Wolfe with away steps (Todd–Yıldırım), Sherman–Morrison updates, "
             "O(N·d) per iteration; C = max_j a_jᵀM⁻¹a_j / d (C-optimality, seed 002 §3.4.1); "
             "log-volume gap (d/2)·log C bounds log vol E(p) − log vol MEE",
             "- target: 4096 points in 64 dimensions in ≤ 10 s", "",
             "| points | d | N | seed | tol | iterations | support | C | log-volume gap | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for kind, d, N in CASES:
        seeds = (0, 1, 2) if kind == "gaussian" else (0,)
        for seed in seeds:
            A = points(kind, d, N, seed)
            for tol in (1e-3, 1e-6):
                t = harness.measure(lambda A=A, tol=tol: minimum_enclosing_ellipsoid(A, tol=tol))
                e = t.result
                rows.append({"points": kind, "d": A.shape[0], "N": A.shape[1], "seed": seed, "tol": tol,
                             "iterations": e.iterations, "support": int(np.sum(e.weights > 0)),
                             "optimality": e.optimality, "log_volume_gap": e.log_volume_gap,
                             "seconds": e.seconds, "timing": t.as_dict()})
                lines.append(f"| {kind} | {A.shape[0]} | {A.shape[1]} | {seed} | {tol:g} | {e.iterations} | "
                             f"{int(np.sum(e.weights > 0))} | {e.optimality:.9f} | {e.log_volume_gap:.2e} | "
                             f"{e.seconds:.2f} |")
                print(lines[-1], flush=True)
    return Report("Minimum enclosing ellipsoid (D-optimal design) benchmark", "\n".join(lines),
                  {"rows": rows})
