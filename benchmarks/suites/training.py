"""``python -m benchmarks --suite training``: dense training strategies under multi-participation,
factorize against jax_privacy run in the same script (its own venv). Writes
reports/bench_training.md (+ .json).

    python -m benchmarks --suite training [--ns 256 512 …] [--epochs 1 2 4 8] [--big 2048 …] [--min-sep K B]
                                          [--jaxp-python PY] [--time-limit S] [--jax-max-n N]
                                          [--threads-from N]

**Dense rows** (prefix-sum workload, n steps, ``epochs=K``): factorize's
``training.multi_epoch.plan_multi_epoch`` — the exact multi-epoch program, its certified objective
(total squared error per unit noise multiplier, at the strategy's certified sensitivity), its
certified dual lower bound and the gap — timed in this process; jax_privacy's
``dense.optimize(n, epochs=K)`` in a child process of its own venv
(``benchmarks/external/jax_privacy_runner.py``), its strategy evaluated here by the same code
(``training.certificate.solution_figures``: the certified sensitivity of ``privacy.participation``,
the Frobenius norm of W C⁻¹), so the columns compare strategies, not evaluators. Baseline: the
square-root factorization of Fichtenberger, Henzinger & Upadhyay ("Constant Matters:
Fine-grained Error Bound on Differentially Private Continual Observation", ICML 2023, §3): the
lower-triangular Toeplitz C with ``c_k = binom(2k, k)/4^k`` (C² = prefix sums), at its certified
sensitivity under the same relation.

**Min-sep row** (``k=K,min_sep=B``): factorize's min-sep plan (``multi_epoch`` docstring: the
best of the single-participation optimum, the ``epochs=n/B`` optimum and the optimal banded
strategy with B bands; lower bound of ``planner.participation_bound``, a relaxation) against
``dense.optimize(n, bands=B, equal_norm=True)``.

**Long horizons** (banded, BLT and BISR at n = 10⁴…10⁶) are the ``training_long`` suite, the
noise stream the ``noise_stream`` suite.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

NAME = "training"
SUMMARY = ("dense multi-epoch / min-sep training strategies (certified objective, lower bound, gap) "
           "against jax_privacy's dense optimiser and the square-root factorization")
TITLE = "Matrix factorization for training: factorize against jax_privacy"

RUNNER = Path(__file__).resolve().parents[1] / "external" / "jax_privacy_runner.py"
#: jax_privacy's venv (``python -m venv /work/jaxp-venv && … pip install jax-privacy==2.0.0``)
JAXP_PYTHON = "/work/jaxp-venv/bin/python"


def add_arguments(parser) -> None:
    parser.add_argument("--ns", type=int, nargs="*", default=[256, 512, 1024])
    parser.add_argument("--epochs", type=int, nargs="*", default=[1, 2, 4, 8])
    parser.add_argument("--big", type=int, nargs="*", default=[2048, 4096],
                        help="larger n, planned for epochs=4 only")
    parser.add_argument("--min-sep", type=int, nargs=2, default=[4, 64], metavar=("K", "B"),
                        help="the min-sep row's k and min_sep (n = 256)")
    parser.add_argument("--jaxp-python", default=os.environ.get("FACTORIZE_JAXP_PYTHON", JAXP_PYTHON))
    parser.add_argument("--time-limit", type=float, default=600.0,
                        help="wall limit of one plan / one jax_privacy run (seconds)")
    parser.add_argument("--threads-from", type=int, default=1024,
                        help="factorize plans rows of n ≥ this with every usable core's BLAS thread "
                             "(smaller rows with one: at n ≤ 512 a second thread only contends)")
    parser.add_argument("--jax-max-n", type=int, default=None,
                        help="run jax_privacy only up to this n (its dense optimiser did not finish "
                             "n = 2048 in 400 s on this machine)")


def sqrt_factorization(n: int) -> Any:
    """The lower-triangular Toeplitz square root of the prefix-sum matrix (module docstring)."""
    import numpy as np

    c = np.ones(n)
    for k in range(1, n):
        c[k] = c[k - 1] * (2 * k - 1) / (2 * k)
    idx = np.subtract.outer(np.arange(n), np.arange(n))
    return np.where(idx >= 0, c[np.clip(idx, 0, None)], 0.0)


def _figures(W: Any, p: Any, A: Any) -> dict[str, float]:
    import numpy as np

    from factorize.training.certificate import solution_figures

    sens, upper, residual = solution_figures(W, p, A, np.linalg.solve(A.T, W.T).T)
    return {"objective": upper, "sensitivity": sens, "residual": residual}


def _jaxp(python: str, n: int, *, epochs: int = 1, bands: int | None = None,
          limit: float, harness) -> tuple[Any, float] | str:
    """jax_privacy's strategy and seconds, or why not."""
    import numpy as np

    if not Path(python).exists():
        return "not run (no jax_privacy venv)"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [python, str(RUNNER), "--n", str(n), "--epochs", str(epochs), "--out", tmp]
        if bands is not None:
            cmd += ["--bands", str(bands)]
        env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
        proc = harness.process(cmd, env=env, deadline=limit)
        if proc.killed:
            return f"killed at {limit:.0f} s"
        if proc.returncode != 0:
            return f"failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}"
        info = json.loads((Path(tmp) / "result.json").read_text())
        return np.load(Path(tmp) / "strategy.npy"), float(info["seconds"])


def dense_row(n: int, p: Any, args, harness) -> dict[str, Any]:
    """factorize, jax_privacy and the square-root baseline on one (n, participation)."""
    import numpy as np

    from factorize.training.certificate import check_training_certificate
    from factorize.training.multi_epoch import plan_multi_epoch

    W = np.tril(np.ones((n, n)))
    row: dict[str, Any] = {"n": n, "participation": p.key}
    from benchmarks.harness import load1
    from factorize.threads import limited, usable_cores

    threads = usable_cores() if n >= args.threads_from else 1
    load0 = load1()
    with limited(threads):
        t = harness.measure(lambda: plan_multi_epoch(W, p, time_limit=args.time_limit))
    sol = t.result
    check = check_training_certificate(W, sol)
    row.update({"objective": sol.objective, "lower": sol.lower, "gap": sol.gap, "seconds": t.best,
                "threads": threads,
                "iterations": sol.iterations, "converged": bool(sol.details["converged"]),
                "verified": check.passed, "load_before": load0, "load_after": load1()})
    row["sqrt_objective"] = _figures(W, p, sqrt_factorization(n))["objective"]
    bands = p.min_sep if p.kind == "min_sep" else None
    if args.jax_max_n is not None and n > args.jax_max_n:
        jp: tuple[Any, float] | str = f"not run (--jax-max-n {args.jax_max_n})"
    else:
        jp = _jaxp(args.jaxp_python, n, epochs=p.k if p.kind == "epochs" else 1, bands=bands,
                   limit=args.time_limit, harness=harness)
    if isinstance(jp, str):
        row["jax"] = jp
    else:
        C, seconds = jp
        row.update({"jax_objective": _figures(W, p, C)["objective"], "jax_seconds": seconds})
        row["ratio_to_jax"] = row["objective"] / row["jax_objective"]
    print(json.dumps({k: v for k, v in row.items() if not isinstance(v, dict)}), flush=True)
    return row


def _num(x: Any, fmt: str) -> str:
    return format(x, fmt) if isinstance(x, (int, float)) and math.isfinite(x) else "—"


def run(args, harness):
    from benchmarks.harness import Report
    from factorize.privacy.participation import Participation

    rows = []
    for n in args.ns:
        for K in args.epochs:
            if n % K == 0:
                rows.append(dense_row(n, Participation("epochs", K), args, harness))
    for n in args.big:
        rows.append(dense_row(n, Participation("epochs", 4), args, harness))
    k, B = args.min_sep
    rows.append(dense_row(256, Participation("min_sep", k, B), args, harness))
    lines = [
        "Total squared error per unit noise multiplier on the prefix-sum workload (Δ² ‖W C⁻¹‖_F², "
        "Δ the certified sensitivity of the stored strategy under the participation relation, "
        "recomputed here for every library). factorize: `training.multi_epoch.plan_multi_epoch` "
        "(gap = objective / certified lower bound − 1, re-derived by `check_training_certificate`); "
        "jax_privacy 2.0: `dense.optimize` in its own venv, its strategy evaluated by the same code; "
        "√: the square-root factorization (Fichtenberger et al. 2023). For `epochs=K` both programs "
        "have the same optimum (`training.multi_epoch` docstring), so ratios near 1 are expected: "
        "what differs is the certificate and the time. Seconds: factorize in this process, "
        "jax_privacy's optimisation in its child (JIT included); 1-minute load before/after each row.",
        "",
        "| n | participation | factorize | lower bound | gap | s | BLAS threads | iters | jax_privacy | s | "
        "factorize / jax | √ baseline | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        jax = (_num(r.get("jax_objective"), ".6f") if "jax_objective" in r else r.get("jax", "—"))
        lines.append(
            f"| {r['n']} | {r['participation']} | {r['objective']:.6f} | {r['lower']:.6f} | {r['gap']:.2e} | "
            f"{r['seconds']:.1f} | {r['threads']} | {r['iterations']}{'' if r['converged'] else '*'} | {jax} | "
            f"{_num(r.get('jax_seconds'), '.1f')} | {_num(r.get('ratio_to_jax'), '.9f')} | "
            f"{r['sqrt_objective']:.2f} | {_num(r['load_before'], '.1f')}/{_num(r['load_after'], '.1f')} |")
    lines += ["", "\\* stopped by the iteration's own criteria (L-BFGS line search at machine precision "
              "or the time limit) before its estimated gap reached 1e-7; the printed gap is certified all "
              "the same.", ""]
    lines += ["Long horizons (banded, BLT, BISR at n = 10⁴…10⁶): `python -m benchmarks --suite "
              "training_long` → reports/bench_training_long.md; the noise stream: `--suite "
              "noise_stream` → reports/bench_noise_stream.md."]
    print(f"{len(rows)} dense rows", file=sys.stderr)
    return Report(TITLE, "\n".join(lines), {"dense": rows})
