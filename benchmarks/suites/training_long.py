"""Long-horizon rows of the training benchmark (issue 30 items 3–5): banded Toeplitz and BLT
strategies for the prefix-sum workload at n = 10⁴, 10⁵, 10⁶ — objective, time, certified
sensitivity, certified lower bound, and the same n with jax_privacy (its own venv, in a child
process) — and the noise stream's throughput at d = 10⁶ and 10⁸ beside this machine's measured
memory bandwidth. ``rows()`` returns the rows; the training suite (``benchmarks.suites.training``)
writes them into reports/bench_training.md.

Objective: per unit noise, ``error · Δ²`` with Δ the certified single-participation sensitivity
recomputed from the stored record (``training.toeplitz.certified_sensitivity``); error
``‖L C⁻¹‖_F²`` (``total``) or the largest row norm² (``max``, jax_privacy's default for BLTs).
jax_privacy's strategy is read back as the same record and evaluated by the same code, so the
ratio compares strategies, not evaluators. Lower bound: ``training.long_bound`` (the SVD bound
``‖L_n‖_tr²/n``, closed-form singular values, certified; max: divided by n). Also the
certified sensitivity of the same strategy under ``k=4,min_sep=n/4`` (exact or an upper
bound, with its attained value), and a BLT optimised under that participation with its
certified value and the participation lower bound.

Stream: seconds per step of (a) the whole step (ChaCha20 keystream, polar Gaussians, the BLT
recurrence), (b) the recurrence alone (given z), (c) the sampler alone; GB/s = 8·d bytes of
noise per second. Memory bandwidth: ``np.copyto`` of 10⁸ doubles (read + write bytes per
second), best of 3. Every row records the 1-minute load average before and after.
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


def memory_bandwidth(size: int = 10 ** 8) -> float:
    """Bytes read + written per second by ``np.copyto`` of ``size`` doubles, best of 3."""
    import numpy as np

    a = np.ones(size)
    b = np.zeros(size)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t0)
    return 2 * 8 * size / best


def stream_rows(dims: tuple[int, ...] = (10 ** 6, 10 ** 8), steps: int = 3) -> list[dict[str, Any]]:
    """Noise-stream throughput of a 4-buffer BLT (n = 10⁶) at each d (module docstring)."""
    import numpy as np

    from factorize.training.stream import CorrelatedNoise, StreamRandom, noise_stream
    from factorize.training.toeplitz import BLT

    strategy = BLT(np.array([0.99999, 0.9995, 0.98, 0.7]), np.array([0.01, 0.04, 0.12, 0.3]), 10 ** 6)
    bw = memory_bandwidth()
    out: list[dict[str, Any]] = []
    for d in dims:
        load0 = _load()
        rng = StreamRandom.secure()
        stream = noise_stream(strategy, d, rng)
        full = []
        for _ in range(steps):
            t0 = time.perf_counter()
            next(stream)
            full.append(time.perf_counter() - t0)
        del stream
        z = np.empty(d)
        sample = []
        for t in range(steps):
            t0 = time.perf_counter()
            rng.normals(t, z)
            sample.append(time.perf_counter() - t0)
        rec = CorrelatedNoise(strategy, d)
        recur = []
        for _ in range(steps):
            t0 = time.perf_counter()
            rec.push(z)
            recur.append(time.perf_counter() - t0)
        gb = 8 * d / 1e9
        out.append({"d": d, "buffers": strategy.buffers, "state_bytes": rec.state_nbytes,
                    "step_gbps": gb / min(full), "sampler_gbps": gb / min(sample),
                    "recurrence_gbps": gb / min(recur), "memory_bandwidth_gbps": bw / 1e9,
                    "step_seconds": min(full), "load": [load0, _load()]})
        del rec, z
    return out


def rows(*, jax: bool = True) -> list[dict[str, Any]]:
    """Every long-horizon row: strategies, under participation, then the stream."""
    return strategy_rows(jax=jax) + participation_rows() + stream_rows()
