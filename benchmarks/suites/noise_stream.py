"""``python -m benchmarks --suite noise_stream``: throughput of the training noise stream
(``factorize.training.stream``) beside this machine's measured memory bandwidth. Writes
reports/bench_noise_stream.md (+ .json).

    python -m benchmarks --suite noise_stream [--dims 1000000 10000000 100000000] [--workers 1 2]
                                              [--steps 5] [--bandwidth-size 100000000]

The stream of a 4-buffer BLT (n = 10⁶, the strategy of ``training_long``), production
randomness (``StreamRandom.secure()``), at each model dimension d and each number of threads
k (``threads=k``: the output does not depend on it). Seconds are the best of ``--steps`` timed
rounds; GB/s are bytes of noise output (8·d) per second unless a column says otherwise:

- **keystream**: ChaCha20 alone (``training.chacha.Keystream.fill``, k threads each filling
  4 MiB buffers), in GB/s *of keystream*, and the noise rate it alone allows (a coordinate
  needs 16·(4/π)/2 = 10.19 bytes of keystream): the ceiling of any exact polar sampler fed by it;
- **transform**: the Gaussian transform alone — the sampler with each thread's keystream
  replaced by words generated once (``normals`` otherwise unchanged: conversion, rejection,
  log, sqrt, products);
- **sampler**: ``StreamRandom.normals`` (keystream + transform);
- **recurrence**: ``CorrelatedNoise.push`` alone (given z);
- **step**: ``next(stream)`` — a fresh d-vector, the sampler (σ folded in) and the
  recurrence, fused per chunk; **step into**: ``stream.next_into(buf)``, the same into one
  reused vector (no first touch of fresh memory). Also as memory traffic: a b-buffer step must
  read and write b state vectors and write the output, (2b + 1)·8·d bytes, whatever the
  implementation — so the noise rate of any step is at most bandwidth / (2b + 1).

Memory bandwidth: ``np.copyto`` (16 bytes moved per double: read + write) and a triad
``a = b + 3·c`` in cache-sized blocks (24 bytes per double) over arrays of
``--bandwidth-size`` doubles, with 1 and 2 threads (halves of the arrays), best of 3 each.
A d whose step needs more memory than is available (``MemAvailable``) is skipped and says
so. The 1-minute load average is recorded around every row: on a shared machine the figures
move with it. A closing paragraph sets the best step against issue 30's target (noise within
2× of the memory bandwidth) and the bounds measured in the same run.
"""

from __future__ import annotations

import os
import time
from functools import partial
from typing import Any

NAME = "noise_stream"
SUMMARY = ("training noise stream throughput (ChaCha20 keystream, polar Gaussians, BLT recurrence; "
           "1 and 2 threads) at d = 10⁶…10⁸ beside the measured memory bandwidth")

#: Bytes of ChaCha20 keystream per coordinate: 16 per pair drawn, 4/π pairs per accepted pair,
#: two coordinates per accepted pair.
KEYSTREAM_PER_COORD = 16 * 4 / 3.141592653589793 / 2


def add_arguments(parser) -> None:
    parser.add_argument("--dims", type=int, nargs="*", default=[10 ** 6, 10 ** 7, 10 ** 8])
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2],
                        help="thread counts of the stream (threads=k); not the BLAS threads")
    parser.add_argument("--steps", type=int, default=5, help="timed rounds per case (best is reported)")
    parser.add_argument("--bandwidth-size", type=int, default=10 ** 8,
                        help="doubles per array of the bandwidth measurement")


def _load() -> float:
    return os.getloadavg()[0]


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _parallel(fn, k: int) -> None:
    """``fn(lo_fraction_index)`` on k threads, 0 … k − 1."""
    import threading

    if k == 1:
        fn(0)
        return
    ts = [threading.Thread(target=fn, args=(w,)) for w in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _best(fn, rounds: int, *args: Any) -> float:
    """The least wall seconds of ``rounds`` calls ``fn(*args)``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def _copy_and_triad(a: Any, b: Any, c: Any, k: int) -> tuple[float, float]:
    """Seconds (best of 3) of ``a ← b`` and of ``a ← b + 3·c`` on k threads (contiguous parts)."""
    import numpy as np

    size = a.size
    edges = [size * w // k for w in range(k + 1)]

    def copy(w: int) -> None:
        np.copyto(a[edges[w]:edges[w + 1]], b[edges[w]:edges[w + 1]])

    def triad(w: int) -> None:
        blk = 1 << 15
        tmp = np.empty(blk)
        for lo in range(edges[w], edges[w + 1], blk):
            hi = min(edges[w + 1], lo + blk)
            np.multiply(c[lo:hi], 3.0, out=tmp[:hi - lo])
            np.add(b[lo:hi], tmp[:hi - lo], out=a[lo:hi])

    return _best(_parallel, 3, copy, k), _best(_parallel, 3, triad, k)


def memory_bandwidth(size: int = 10 ** 8, workers: tuple[int, ...] = (1, 2)) -> dict[str, float]:
    """GB/s of ``np.copyto`` (read + write) and of a blocked triad, per thread count (module
    docstring), best of 3; ``best`` the largest."""
    import numpy as np

    a = np.ones(size)
    b = np.full(size, 2.0)
    c = np.full(size, 0.5)
    out: dict[str, float] = {}
    for k in workers:
        t_copy, t_triad = _copy_and_triad(a, b, c, k)
        out[f"copy_{k}t"] = 16 * size / t_copy / 1e9
        out[f"triad_{k}t"] = 24 * size / t_triad / 1e9
    out["best"] = max(out.values())
    return out


def keystream_rate(k: int, rounds: int = 5, nbytes: int = 64 << 20) -> float:
    """GB/s of ChaCha20 keystream from k threads, each filling ``nbytes / k`` bytes in 4 MiB
    buffers (its own key and nonce)."""
    import numpy as np

    from factorize.training.chacha import Keystream

    per = nbytes // k
    streams = [Keystream(os.urandom(32)) for _ in range(k)]
    bufs = [np.empty(4 << 20, dtype=np.uint8) for _ in range(k)]

    def work(w: int) -> None:
        ks, buf = streams[w], bufs[w]
        ks.start(bytes(16))
        for _ in range(per // buf.nbytes):
            ks.fill(buf)

    return nbytes / _best(_parallel, rounds, work, k) / 1e9


class _Replay:
    """A keystream stand-in for the transform-only figure: ``fill`` leaves the buffer's words
    (real keystream, generated once) as they are."""

    def start(self, iv: bytes) -> None:
        pass

    def fill(self, out: Any) -> None:
        pass


def transform_rate(d: int, k: int, rounds: int) -> float:
    """GB/s of noise from ``normals`` with every thread's keystream replaced by :class:`_Replay`."""
    import numpy as np

    from factorize.training.stream import StreamRandom, _Scratch

    rng = StreamRandom.seeded(0)
    for _ in range(k):
        sc = _Scratch(os.urandom(32))
        sc.keystream.start(bytes(16))
        sc.keystream.fill(sc.words)
        sc.keystream = _Replay()  # type: ignore[assignment]
        rng._scratch.append(sc)
    z = np.empty(d)
    return 8 * d / _best(partial(rng.normals, threads=k), rounds, 0, z) / 1e9


def strategy():
    import numpy as np

    from factorize.training.toeplitz import BLT

    return BLT(np.array([0.99999, 0.9995, 0.98, 0.7]), np.array([0.01, 0.04, 0.12, 0.3]), 10 ** 6)


def _next(stream: Any) -> None:
    next(stream)


def _row(s: Any, d: int, k: int, steps: int, ks: float, bw: float) -> dict[str, Any]:
    """The figures of one (d, threads) (module docstring)."""
    import gc

    import numpy as np

    from factorize.training.stream import CorrelatedNoise, StreamRandom, noise_stream

    load0 = _load()
    rng = StreamRandom.secure()
    z = np.empty(d)
    t_sampler = _best(partial(rng.normals, threads=k), steps, 0, z)
    rec = CorrelatedNoise(s, d, threads=k)
    t_rec = _best(rec.push, steps, z)
    del rec
    gc.collect()
    t_transform = 8 * d / transform_rate(d, k, steps) / 1e9
    del z
    stream = noise_stream(s, d, rng, threads=k)
    t_step = _best(_next, steps, stream)
    buf = np.empty(d)
    t_into = _best(stream.next_into, steps, buf)
    del stream, buf
    gc.collect()
    gb = 8 * d / 1e9
    traffic = (2 * s.buffers + 1) * gb
    return {"d": d, "threads": k, "buffers": s.buffers,
            "keystream_gbps": ks, "keystream_ceiling_gbps": ks * 8 / KEYSTREAM_PER_COORD,
            "transform_gbps": gb / t_transform, "sampler_gbps": gb / t_sampler,
            "recurrence_gbps": gb / t_rec, "step_gbps": gb / t_step, "step_seconds": t_step,
            "step_into_gbps": gb / t_into, "step_into_seconds": t_into,
            "step_traffic_gbps": traffic / t_step, "memory_bandwidth_gbps": bw,
            "step_fraction_of_bandwidth": gb / t_step / bw, "ceiling_gbps": bw / (2 * s.buffers + 1),
            "step_into_traffic_gbps": traffic / t_into,
            "load": [load0, _load()]}


def stream_rows(dims: tuple[int, ...] = (10 ** 6, 10 ** 8), workers: tuple[int, ...] = (1, 2),
                steps: int = 3, bandwidth: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """One row per (d, threads): the module docstring's figures; a d whose step would need
    more than 80% of the available memory is skipped (a row that says so)."""
    s = strategy()
    bw = bandwidth if bandwidth is not None else memory_bandwidth()
    ks = {k: keystream_rate(k) for k in workers}
    rows: list[dict[str, Any]] = []
    for d in dims:
        need = (s.buffers + 3) * 8 * d
        avail = _available_bytes()
        if avail is not None and need > 0.8 * avail:
            rows.append({"d": d, "skipped": f"needs {need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available"})
            continue
        rows.extend(_row(s, d, k, steps, ks[k], bw["best"]) for k in workers)
    return rows


def run(args, harness):
    from benchmarks.harness import Report
    from factorize.training.chacha import backend

    load0 = _load()
    bw = memory_bandwidth(args.bandwidth_size, tuple(sorted(set(args.workers) | {1, 2})))
    bw_load = [load0, _load()]
    rows = stream_rows(tuple(args.dims), tuple(args.workers), args.steps, bw)
    lines = [
        f"Keystream: {backend()}. Strategy: BLT with 4 buffers (n = 10⁶). Best of {args.steps} rounds; "
        "GB/s = bytes of noise output (8·d) per second unless stated; load = 1-minute load average "
        "before/after the row (2 cores, shared).",
        "",
        "**Memory bandwidth** (arrays of "
        f"{args.bandwidth_size:.0e} doubles; load {bw_load[0]:.2f}/{bw_load[1]:.2f}): "
        + ", ".join(f"{k.replace('_', ' ')} {v:.2f} GB/s" for k, v in bw.items() if k != "best")
        + f"; the best, {bw['best']:.2f} GB/s, is the reference below.",
        "",
        "| d | threads | keystream GB/s (of keystream) | noise ceiling of the keystream | transform | sampler | "
        "recurrence | step | step into | step into s | step into traffic GB/s ((2b+1)·8d) | step into / bandwidth "
        "| ceiling bw/(2b+1) | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['d']:.0e} | — | skipped: {r['skipped']} |" + " |" * 11)
            continue
        lines.append(
            f"| {r['d']:.0e} | {r['threads']} | {r['keystream_gbps']:.2f} | {r['keystream_ceiling_gbps']:.2f} | "
            f"{r['transform_gbps']:.3f} | {r['sampler_gbps']:.3f} | {r['recurrence_gbps']:.3f} | "
            f"{r['step_gbps']:.3f} | {r['step_into_gbps']:.3f} | {r['step_into_seconds']:.4f} | "
            f"{r['step_into_traffic_gbps']:.2f} | {r['step_into_gbps'] / r['memory_bandwidth_gbps']:.3f} | "
            f"{r['ceiling_gbps']:.2f} | "
            f"{r['load'][0]:.2f}/{r['load'][1]:.2f} |")
    done = [r for r in rows if "skipped" not in r]
    if done:
        best = max(done, key=lambda r: r["step_into_gbps"])
        ks_best = max(r["keystream_ceiling_gbps"] for r in done)
        tr_best = max(r["transform_gbps"] for r in done)
        lines += [
            "",
            f"**Against the target** (noise within 2× of memory bandwidth: ≥ {bw['best'] / 2:.2f} GB/s here): "
            f"the best step measured is {best['step_into_gbps']:.3f} GB/s (d = {best['d']:.0e}, "
            f"{best['threads']} thread(s)), {best['step_into_gbps'] / bw['best']:.1%} of the bandwidth. "
            f"Bounds measured in the same run: the keystream alone allows at most {ks_best:.2f} GB/s of "
            f"noise ({ks_best / bw['best']:.1%} of the bandwidth), the Gaussian transform alone ran at "
            f"{tr_best:.3f} GB/s, and any {best['buffers']}-buffer step moves (2b + 1)·8·d bytes, so even "
            f"with a free sampler it is at most bandwidth / {2 * best['buffers'] + 1} = "
            f"{bw['best'] / (2 * best['buffers'] + 1):.2f} GB/s.",
        ]
    return Report("Training noise stream: throughput against memory bandwidth", "\n".join(lines),
                  {"bandwidth": bw, "bandwidth_load": bw_load, "rows": rows, "keystream_backend": backend()})
