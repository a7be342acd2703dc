"""``python -m benchmarks --suite training_long`` → reports/bench_training_long.md: the
long-horizon strategies of issue 30 (items 3 and 5) for the prefix-sum workload at n = 10⁴, 10⁵,
10⁶ — banded Toeplitz, BLT and the banded inverse square root (BISR) — objective, time, certified
sensitivity and certified lower bound, with jax_privacy's optimisers at the same n (its own
venv, in a child process). The noise stream's throughput is the ``noise_stream`` suite.

Objective: per unit noise, ``error · Δ²`` with Δ the certified single-participation sensitivity
recomputed from the stored record (``training.toeplitz.certified_sensitivity``); error
``‖L C⁻¹‖_F²`` (``total``) or the largest row norm² (``max``, jax_privacy's default for BLTs).
jax_privacy's strategy is read back as the same record and evaluated by the same code, so the
ratio compares strategies, not evaluators. Lower bound: ``training.long_bound`` (the SVD bound
``‖L_n‖_tr²/n``, closed-form singular values, certified; max: divided by n). Also the
certified sensitivity of the same strategy under ``k=4,min_sep=n/4`` (exact or an upper
bound, with its attained value), and a BLT optimised under that participation with its
certified value and the participation lower bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

#: jax_privacy's venv (built by the training suite's helper); rows without it say so.
JAXP_PYTHON = Path("/work/jaxp-venv/bin/python")
#: Wall limit of one jax_privacy optimisation (seconds).
JAXP_LIMIT = 900

_JAXP_SCRIPT = """
import json, sys, time
import jax
jax.config.update("jax_enable_x64", True)
from jax_privacy.matrix_factorization import toeplitz, buffered_toeplitz
kind, n, param = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
if kind == "banded":
    coef = toeplitz.optimize_banded_toeplitz(n, bands=param)
    out = {"coef": [float(v) for v in coef]}
else:
    blt = buffered_toeplitz.optimize(n=n, max_buffers=param, error="max")
    out = {"theta": [float(v) for v in blt.buf_decay], "omega": [float(v) for v in blt.output_scale]}
out["seconds"] = time.perf_counter() - t
print(json.dumps(out))
"""


def _load() -> float:
    return os.getloadavg()[0]


def _jaxp(kind: str, n: int, param: int) -> dict[str, Any] | None:
    """jax_privacy's optimum (its parameters and seconds, JIT included), or None."""
    if not JAXP_PYTHON.exists():
        return None
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
    try:
        out = subprocess.run([str(JAXP_PYTHON), "-c", _JAXP_SCRIPT, kind, str(n), str(param)],
                             capture_output=True, text=True, timeout=JAXP_LIMIT, env=env, check=True)
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
        return {"error": type(exc).__name__}
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _evaluate(strategy: Any, reduction: str) -> dict[str, Any]:
    from factorize.privacy.participation import Participation
    from factorize.training.toeplitz import certified_sensitivity, strategy_error

    n = strategy.n
    sens = certified_sensitivity(strategy)
    multi = certified_sensitivity(strategy, Participation("min_sep", 4, n // 4))
    return {"objective": strategy_error(strategy, None, reduction) * sens.value ** 2,  # type: ignore[arg-type]
            "sensitivity": sens.value, "sensitivity_exact": sens.exact,
            "minsep4_sensitivity": multi.value, "minsep4_attained": multi.lower,
            "minsep4_exact": multi.exact}


def strategy_rows(ns: tuple[int, ...] = (10 ** 4, 10 ** 5, 10 ** 6), *, jax: bool = True,
                  buffers: int = 4, bands: int = 64,
                  kinds: tuple[str, ...] = ("blt", "banded")) -> list[dict[str, Any]]:
    """BLT (max error, ``buffers``) and banded Toeplitz (total error, ``bands``) at each n;
    jax_privacy's record is kept in the row (``jax_record``)."""
    from factorize.training.banded import optimize_banded
    from factorize.training.blt import optimize_blt
    from factorize.training.long_bound import prefix_lower_bound
    from factorize.training.toeplitz import BLT, BandedToeplitz

    out: list[dict[str, Any]] = []
    for n in ns:
        for kind, reduction, param in (("blt", "max", buffers), ("banded", "total", bands)):
            if kind not in kinds:
                continue
            load0 = _load()
            t0 = time.perf_counter()
            opt = (optimize_blt(n, param, reduction="max") if kind == "blt"
                   else optimize_banded(n, param, reduction="total"))
            seconds = time.perf_counter() - t0
            row: dict[str, Any] = {"n": n, "kind": kind, "param": param, "reduction": reduction,
                                   "seconds": seconds, "record_bytes": len(json.dumps(opt.strategy.to_dict()))}
            row.update(_evaluate(opt.strategy, reduction))
            lb = prefix_lower_bound(n, None, reduction).value
            row["lower_bound"] = lb
            row["ratio_to_bound"] = row["objective"] / lb
            jp = _jaxp(kind, n, param) if jax else None
            if jp is not None and "error" not in jp:
                theirs = (BLT(jp["theta"], jp["omega"], n) if kind == "blt"
                          else BandedToeplitz(jp["coef"], n))
                ev = _evaluate(theirs, reduction)
                row.update({"jax_objective": ev["objective"], "jax_seconds": jp["seconds"],
                            "jax_record": theirs.to_dict(),
                            "ratio_to_jax": row["objective"] / ev["objective"],
                            "jax_minsep4_sensitivity": ev["minsep4_sensitivity"]})
            else:
                row["jax"] = "not run" if jp is None else f"failed: {jp['error']}"
            row["load"] = [load0, _load()]
            out.append(row)
    return out


def participation_rows(ns: tuple[int, ...] = (10 ** 4, 10 ** 5, 10 ** 6), *, k: int = 4,
                       buffers: int = 4) -> list[dict[str, Any]]:
    """A BLT optimised under ``k=K,min_sep=n/K`` (total error): its certified error·Δ² under
    that participation and the certified participation lower bound (``training.long_bound``)."""
    from factorize.privacy.participation import Participation
    from factorize.training.blt import optimize_blt
    from factorize.training.long_bound import prefix_lower_bound
    from factorize.training.toeplitz import certified_sensitivity, strategy_error

    out: list[dict[str, Any]] = []
    for n in ns:
        p = Participation("min_sep", k, n // k)
        load0 = _load()
        t0 = time.perf_counter()
        opt = optimize_blt(n, buffers, participation=p)
        seconds = time.perf_counter() - t0
        sens = certified_sensitivity(opt.strategy, p)
        value = strategy_error(opt.strategy) * sens.value ** 2
        lb = prefix_lower_bound(n, p).value
        out.append({"n": n, "kind": "blt", "participation": p.key, "reduction": "total",
                    "seconds": seconds, "objective": value, "sensitivity": sens.value,
                    "sensitivity_attained": sens.lower, "sensitivity_exact": sens.exact,
                    "lower_bound": lb, "ratio_to_bound": value / lb, "load": [load0, _load()]})
    return out


def bisr_rows(ns: tuple[int, ...] = (10 ** 4, 10 ** 5, 10 ** 6), *, bands: int = 64,
              buffers: int = 4, participations: tuple[str | None, ...] = (None, "epochs=4"),
              compare: bool = True) -> list[dict[str, Any]]:
    """Banded inverse square root (``training.bisr``) at each n, total error: the closed-form
    truncation and the optimised bands (seconds, certified ``error·Δ²`` under the
    participation, the noise state in floats per model coordinate), beside the banded Toeplitz
    of the same number of bands and the BLT of ``buffers`` buffers optimised for the same
    objective (``compare``), and the certified lower bound — every objective from the stored
    record by the same evaluator (``toeplitz.strategy_error``, ``toeplitz.certified_sensitivity``)."""
    from factorize.privacy.participation import Participation
    from factorize.training.banded import optimize_banded
    from factorize.training.bisr import certified_objective, closed_form_bisr, optimize_bisr
    from factorize.training.blt import optimize_blt
    from factorize.training.long_bound import prefix_lower_bound
    from factorize.training.toeplitz import ToeplitzWorkload

    w = ToeplitzWorkload.prefix()
    certified_objective(closed_form_bisr(64, 4), w, "total", None)  # imports, outside the timings
    optimize_bisr(64, 4)
    out: list[dict[str, Any]] = []
    for n in ns:
        for key in participations:
            part = None if key is None else Participation.parse(key)
            load0 = _load()
            row: dict[str, Any] = {"n": n, "kind": "bisr", "bands": bands, "reduction": "total",
                                   "participation": key or "once"}
            t0 = time.perf_counter()
            closed = closed_form_bisr(n, bands)
            row["closed_objective"] = certified_objective(closed, w, "total", part)[0]
            row["closed_seconds"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            opt = optimize_bisr(n, bands, participation=part)
            row.update({"bisr_seconds": time.perf_counter() - t0, "bisr_objective": opt.objective,
                        "bisr_iterations": opt.iterations, "bisr_message": opt.message,
                        "record_bytes": len(json.dumps(opt.strategy.to_dict())),
                        "state_floats_per_coordinate": bands - 1})
            lb = prefix_lower_bound(n, part).value
            row["lower_bound"] = lb
            row["bisr_ratio_to_bound"] = opt.objective / lb
            if compare:
                for name in ("banded", "blt"):
                    t0 = time.perf_counter()
                    other = (optimize_banded(n, bands, participation=part) if name == "banded"
                             else optimize_blt(n, buffers, participation=part))
                    row[f"{name}_seconds"] = time.perf_counter() - t0
                    row[f"{name}_objective"] = certified_objective_any(other.strategy, part)
                row["blt_buffers"] = buffers
            row["load"] = [load0, _load()]
            out.append(row)
    return out


def certified_objective_any(strategy: Any, participation: Any) -> float:
    """``‖L C⁻¹‖_F²·Δ̄²`` of any long-horizon record (Δ̄ certified under the participation)."""
    from factorize.training.toeplitz import certified_sensitivity, strategy_error

    return strategy_error(strategy) * certified_sensitivity(strategy, participation).value ** 2


NAME = "training_long"
SUMMARY = ("long-horizon training strategies (banded Toeplitz, BLT, banded inverse square root) at "
           "n = 10⁴…10⁶: certified objective, sensitivity, lower bound, against jax_privacy")
TITLE = "Matrix factorization at long horizons: banded, BLT and BISR against jax_privacy"


def add_arguments(parser) -> None:
    parser.add_argument("--ns", type=int, nargs="*", default=[10 ** 4, 10 ** 5, 10 ** 6])
    parser.add_argument("--parts", nargs="*", default=["strategies", "participation", "bisr"],
                        choices=["strategies", "participation", "bisr"],
                        help="which tables to measure (the noise stream is the noise_stream suite)")
    parser.add_argument("--no-jax", action="store_true", help="leave out jax_privacy's optimisers")
    parser.add_argument("--bands", type=int, default=64, help="bands of banded Toeplitz and BISR")
    parser.add_argument("--buffers", type=int, default=4, help="buffers of the BLTs")


def _cell(x: Any) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.6g}"
    if isinstance(x, list):
        return "/".join(_cell(v) for v in x)
    return "—" if x is None else str(x)


def _table(rows: list[dict[str, Any]], cols: list[tuple[str, str]]) -> list[str]:
    lines = ["| " + " | ".join(h for h, _ in cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for _, k in cols) + " |" for r in rows]
    return lines


def run(args, harness):
    from benchmarks.harness import Report

    ns = tuple(args.ns)
    data: dict[str, Any] = {}
    lines: list[str] = []
    if "strategies" in args.parts:
        rows = strategy_rows(ns, jax=not args.no_jax, buffers=args.buffers, bands=args.bands)
        data["strategies"] = rows
        lines += ["## Single participation: BLT (worst step) and banded Toeplitz (total)", "",
                  "Per unit noise: error × certified Δ², from the stored record, for factorize's "
                  "optimum and jax_privacy's (`toeplitz.optimize_banded_toeplitz`, "
                  "`buffered_toeplitz.optimize(error='max')`, its own venv, JIT included), "
                  "evaluated by the same code; lower bound: `training.long_bound` (the SVD bound; "
                  "worst step: divided by n). Also Δ under `k=4,min_sep=n/4` of the same record.",
                  ""]
        lines += _table(rows, [("n", "n"), ("kind", "kind"), ("param", "param"),
                               ("error", "reduction"), ("factorize", "objective"),
                               ("s", "seconds"), ("jax_privacy", "jax_objective"),
                               ("jax s", "jax_seconds"), ("factorize / jax", "ratio_to_jax"),
                               ("lower bound", "lower_bound"), ("/ bound", "ratio_to_bound"),
                               ("Δ exact", "sensitivity_exact"),
                               ("Δ k=4 (bound)", "minsep4_sensitivity"),
                               ("record bytes", "record_bytes"), ("jax", "jax"), ("load", "load")])
        lines.append("")
    if "participation" in args.parts:
        rows = participation_rows(ns, buffers=args.buffers)
        data["participation"] = rows
        lines += ["## Under participation: a BLT optimised for `k=4,min_sep=n/4` (total error)", "",
                  "Certified error × Δ² under that participation (Δ exact or a certified upper "
                  "bound, its attained value beside it) and the participation lower bound "
                  "(`training.long_bound`).", ""]
        lines += _table(rows, [("n", "n"), ("participation", "participation"),
                               ("objective", "objective"), ("s", "seconds"),
                               ("Δ", "sensitivity"), ("Δ attained", "sensitivity_attained"),
                               ("Δ exact", "sensitivity_exact"), ("lower bound", "lower_bound"),
                               ("/ bound", "ratio_to_bound"), ("load", "load")])
        lines.append("")
    if "bisr" in args.parts:
        rows = bisr_rows(ns, bands=args.bands, buffers=args.buffers)
        data["bisr"] = rows
        lines += ["## Banded inverse square root (BISR) against banded Toeplitz and BLT", "",
                  f"Total error × certified Δ²; BISR and banded: {args.bands} bands, BLT: "
                  f"{args.buffers} buffers, each optimised for the same objective and participation; "
                  "closed form: the square root's inverse truncated to the bands.", ""]
        lines += _table(rows, [("n", "n"), ("participation", "participation"),
                               ("closed form", "closed_objective"), ("BISR", "bisr_objective"),
                               ("s", "bisr_seconds"), ("iters", "bisr_iterations"),
                               ("banded", "banded_objective"), ("s ", "banded_seconds"),
                               ("BLT", "blt_objective"), ("s  ", "blt_seconds"),
                               ("lower bound", "lower_bound"), ("BISR / bound", "bisr_ratio_to_bound"),
                               ("record bytes", "record_bytes"), ("load", "load")])
        lines.append("")
    lines.append("Load: the 1-minute load average before/after each row (2 shared cores).")
    return Report(TITLE, "\n".join(lines), data)
