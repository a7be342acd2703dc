"""The executor side of training with a long-horizon strategy: a verified Toeplitz strategy C
(``training.toeplitz``: banded or BLT) becomes a *noise stream* that yields, step after step,
the correlated noise ``σ·(C⁻¹z)_t ∈ R^d`` a training loop adds to its clipped, summed gradient
(DP-FTRL / DP-MF: Denisov et al., NeurIPS 2022, §2; Choquette-Choo et al., ICML 2023, Alg. 1),
in O(b·d) memory, charged once to the ledger for the whole run.

**The recurrence** (no n × n matrix, no history beyond the state). ``x = C⁻¹z`` solves
``C x = z`` forward, one step at a time:

* banded Toeplitz (``c_0 … c_{b−1}``): ``x_t = (z_t − Σ_{j=1}^{b−1} c_j x_{t−j})/c_0`` — a ring
  of the last b − 1 outputs, ``(b−1)·d`` floats;
* BLT (``c_0 = 1``, ``c_k = Σ_i ω_i θ_i^{k−1}``): with buffers ``S_i(t) = Σ_{k≥1} θ_i^{k−1}
  x_{t−k}`` (``S_i(0) = 0``, ``S_i(t+1) = θ_i S_i(t) + x_t``), ``(Cx)_t = x_t + Σ_i ω_i S_i(t)``,
  so ``x_t = z_t − Σ_i ω_i S_i(t)`` — b buffers, ``b·d`` floats (Dvijotham et al. 2024, §5,
  Alg. 2);
* banded inverse (C⁻¹ of bands ``r_0 … r_{p−1}``, ``training.toeplitz.BandedInverse``):
  ``x_t = Σ_{j=0}^{p−1} r_j z_{t−j}`` directly — a ring of the last p − 1 *draws*, ``(p−1)·d``
  floats (Kalinin, McKenna, Upadhyay & Lampert, ICLR 2026, §3).

**Secure sampling** (:class:`StreamRandom`). Production randomness is a ChaCha20 keystream
(Bernstein 2008; RFC 8439), keyed with 32 bytes from ``os.urandom`` — the construction of
Linux's own CSPRNG — computed by OpenSSL (``training.chacha``: libcrypto through ctypes, which
lets threads run at once, else the ``cryptography`` package; either is checked against a
transcription of RFC 8439's block function). *Layout:* step t's d coordinates are cut into
chunks of M = 2¹⁶ (the last one shorter); chunk j reads its own keystream, that of the IV
(block counter 0 ‖ nonce j as 4 little-endian bytes ‖ t as 8), as little-endian 64-bit words
w₀, w₁, …, pair i being (w_{2i}, w_{2i+1}). A chunk of m coordinates takes its first
h = ⌈m/2⌉ *accepted* pairs (below): their first Gaussians, in order, are its coordinates
0 … h − 1, their second ones its coordinates h … m − 1 (for odd m the last pair's second is
dropped). So step t's numbers are a function of (key, t, d) alone — not of the number of
threads filling the chunks, nor of how many pairs are read at a time (a read only continues
the chunk's keystream). Distinct (j, t) give distinct nonces, every block counter starts at 0,
and a chunk reading 2³⁰ pairs (2²⁸ blocks; it needs about 1.27·h ≤ 2¹⁵·1.3) is refused, so
no counter wraps and no keystream block is used twice. Under the standard assumption that
ChaCha20 is a pseudorandom function, the words are indistinguishable from independent uniform
64-bit words. Pairs of words make pairs of Gaussians by Marsaglia's polar method (Marsaglia &
Bray, "A Convenient Method for Generating Normal Variables", SIAM Review 1964), which needs no
trigonometric function:

    u = ⌊k₁/2¹¹⌋·2⁻⁵²,  v = ⌊k₂/2¹¹⌋·2⁻⁵²  (k the word read as a two's-complement int64:
        ⌊k/2¹¹⌋ is uniform on the integers of [−2⁵², 2⁵²), so u, v are uniform on the grid
        2⁻⁵² of [−1, 1), computed exactly: an arithmetic shift, an exact conversion, a
        power-of-two product),
    s = u² + v²; reject unless 0 < s < 1;  z₁ = u·√(c·ln s / s),  z₂ = v·√(c·ln s / s),
    c = −2σ².

For (u, v) uniform on the open unit disc, (z₁/σ, z₂/σ) is exactly N(0, I₂) (the accepted
point's angle is uniform and s is uniform on (0, 1), independent of it). σ = 1 (c = −2) gives
the standard normals of :meth:`StreamRandom.normals`; the stream passes its noise multiplier σ
here, with 2σ² rounded *up* to a float (so that rounding can only add noise), instead of
scaling ``x_t`` afterwards — the recurrence is linear, ``C⁻¹(σz) = σ·C⁻¹z``, and a pass over
the d-vector is saved. **The floating-point caveat, stated plainly:** this sampler is *not*
exact. (i) u, v lie on the grid 2⁻⁵², so s ≥ 2⁻¹⁰⁴ and |z| ≤ σ·√(s)·√(−2 ln s / s) =
σ·√(−2 ln s) ≤ σ·√(208 ln 2) ≈ 12.0σ: the tail beyond 12σ is missing, and the disc is a union
of grid cells, with s rounded (its boundary is decided to within an ulp); (ii) log, sqrt, the
product by c and the divisions carry libm's rounding (≈ 1 ulp), so the output's law is within a
small relative error of the Gaussian's on most of its range but is supported on floats, and the
recurrence adds its own rounding (x̂_t = (C⁻¹z)_t + e_t, |e_t| a few ulps times the sizes
summed); (iii) floating-point noise added to floating-point gradients is open to attacks that
read the low-order bits (Mironov, "On Significance of the Least Significant Bits for
Differential Privacy", CCS 2012). The privacy guarantee charged is that of the *ideal* Gaussian
mechanism with the certified sensitivity; the gap is not quantified here. Exact lattice
samplers (``privacy.sampling``) are far too slow for d = 10⁸ per step.

**Speed** (``reports/bench_noise_stream.md``). A coordinate costs 10.2 bytes of keystream (16
per pair drawn, 4/π pairs drawn per pair accepted) and a dozen vectorised passes over
cache-sized batches of at most 2¹⁶ pairs (preallocated buffers, ``out=`` everywhere; the
rejection is one index list of the pairs with s < 1 and gathers into the output, not boolean
masks; s = 0 is rare enough to be checked afterwards); ``threads=k`` fills the chunks on k threads (OpenSSL through
ctypes and NumPy's loops release the interpreter lock) and runs the recurrence's blocks on
them too. A :class:`NoiseStream` step of a banded or BLT strategy is *fused*: each thread runs
the recurrence on a chunk right after sampling it, while the chunk is in cache — the same
blocks and arithmetic as :meth:`StreamRandom.normals` followed by :meth:`CorrelatedNoise.push`,
so the same bits. The default is one thread, as everywhere in factorize (``factorize.threads``).
A step still reads and writes the b state vectors and writes its output, (2b + 1)·8·d bytes,
so its noise rate is at most the memory bandwidth / (2b + 1) however fast the sampler.

**Test mode** (:meth:`StreamRandom.seeded`): the same ChaCha20 path keyed by SHA-256 of the
seed — reproducible, and every :class:`NoiseStep` it yields says ``TEST MODE`` in its label;
such a stream cannot be charged to a ledger.

**Use from a training loop** (no framework dependency: NumPy arrays; a :class:`NoiseStep`
exposes ``__array__`` and ``__dlpack__``, so ``np.asarray(step)``, ``torch.from_dlpack(step)``
and ``jax.dlpack.from_dlpack(step)`` read it without a copy on the CPU)::

    run = open_private_stream(strategy, d, guarantee=ZCDP(0.5), participation=None,
                              ledger="L.db", dataset="users")      # one charge, before any noise
    for step, batch in zip(run.stream, batches):
        g = clipped_gradient_sum(batch)                              # (d,), each ≤ 1 in L2
        g += torch.from_dlpack(step)  # or: g = g + np.asarray(step) in NumPy / JAX
        ...

A loop that uses each step at once can pass one buffer, ``step = run.stream.next_into(buf)``,
instead of a fresh d-vector per step; ``noise_stream(..., threads=2)`` (or
``open_private_stream(..., threads=2)``) computes each step on two threads, with the same output.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.numerics import integer, positive_number
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .toeplitz import BLT, BandedInverse, BandedToeplitz, LongSensitivity, LongStrategy, certified_sensitivity

__all__ = ["CorrelatedNoise", "NoiseStep", "NoiseStream", "PrivateRun", "StreamRandom",
           "calibrate_sigma", "noise_stream", "open_private_stream", "run_record"]

#: Coordinates per chunk: a chunk's Gaussians come from its own keystream (nonce (j, t), module
#: docstring), so chunks are filled in any order, on any number of threads, with one result.
_CHUNK = 1 << 16
#: Pairs drawn per keystream read at most (1 MiB of keystream; a chunk's ≈ 4/π·2¹⁵ pairs in
#: one read): every NumPy call lets go of the interpreter lock, and with threads each hand-over
#: costs system time, so the calls are few and long (2¹⁴ measured at 0.3–0.6 s of system time
#: per wall second on 2 threads, 2¹⁶ at none: reports/bench_noise_stream.md).
_BATCH = 1 << 16
#: Pairs one chunk may draw: 2²⁸ of ChaCha20's 2³² blocks per nonce (never reached: a chunk
#: needs about 4/π·2¹⁵ pairs).
_MAX_DRAWS = 1 << 30
#: Acceptance probability of the polar method: the unit disc's share of the square.
_ACCEPT = np.pi / 4
#: Coordinates per block of the recurrence: the b + 1 vectors' blocks (512 KiB each) stay in
#: cache (L2/L3), so a step reads and writes the state once; few, long NumPy calls (see
#: :data:`_BATCH`). A divisor of :data:`_CHUNK`, so the fused step (:class:`NoiseStream`)
#: cuts the same blocks as :meth:`CorrelatedNoise.push`.
_BLOCK = 1 << 16
#: Largest model dimension (chunk indices stay far below the nonce's 2³²).
MAX_DIM = 1 << 32


class StreamRandom:
    """A ChaCha20 keystream turned into standard Gaussians (module docstring). Use
    :meth:`secure` (production, OS key) or :meth:`seeded` (test mode)."""

    def __init__(self, key: bytes, *, test_seed: int | None, _token: object = None) -> None:
        if _token is not _PRIVATE:
            raise PrivacyError("use StreamRandom.secure() or StreamRandom.seeded(seed)")
        self._key = bytes(key)
        self.test_seed = test_seed
        self._lock = threading.Lock()  # one fill at a time: the scratch buffers are shared
        self._scratch: list[_Scratch] = []
        self._pool = _Pool()  # threads started on the first fill with threads > 1

    @classmethod
    def secure(cls) -> StreamRandom:
        """Production: a fresh 256-bit key from ``os.urandom``."""
        return cls(os.urandom(32), test_seed=None, _token=_PRIVATE)

    @classmethod
    def seeded(cls, seed: int) -> StreamRandom:
        """Test mode: the key is SHA-256 of the seed. **Outputs are not private.**"""
        s = integer("seed", seed, 0, PrivacyError)
        key = hashlib.sha256(b"factorize.training.stream test key " + str(s).encode()).digest()
        return cls(key, test_seed=s, _token=_PRIVATE)

    @property
    def is_test_mode(self) -> bool:
        return self.test_seed is not None

    @property
    def label(self) -> str:
        if self.is_test_mode:
            return f"TEST MODE (seed={self.test_seed}): not private"
        return "private: ChaCha20 keyed from os.urandom"

    def __repr__(self) -> str:
        return f"StreamRandom.seeded({self.test_seed})" if self.is_test_mode else "StreamRandom.secure()"

    def __getstate__(self) -> dict[str, Any]:
        raise PrivacyError("a StreamRandom holds a secret key and is not pickled")

    def normals(self, step: int, out: np.ndarray, *, scale: float = 1.0, threads: int = 1) -> None:
        """Fill the contiguous float64 vector ``out`` with step ``step``'s Gaussians times
        ``scale`` (c = −2·scale² in the module docstring's formula): the same (key, step,
        size) always gives the same numbers, whatever ``threads`` (how many threads fill
        the chunks)."""
        t, c, workers = self._checked(step, out, scale, threads)
        self._fill(t, out, c, workers)

    def _checked(self, step: int, out: np.ndarray, scale: float, threads: int) -> tuple[int, float, int]:
        """(step, c = −2·scale², threads used) for :meth:`normals`'s arguments, or the refusal."""
        t = integer("step", step, 0, PrivacyError)
        if t >= 1 << 64:
            raise PrivacyError(f"step {t} does not fit the nonce's 64 bits")
        check_vector(out, None, "normals")
        d = out.size
        if d > MAX_DIM:
            raise PrivacyError(f"a noise step has at most 2^32 coordinates, got {d}")
        c = _log_factor(positive_number("scale", scale, PrivacyError))
        k = integer("threads", threads, 1, PrivacyError)
        return t, c, max(1, min(k, -(-d // _CHUNK)))

    def _fill(self, t: int, out: np.ndarray, c: float, workers: int,
              then: Callable[[int, int, int], None] | None = None) -> None:
        """The chunks of step t into ``out`` on ``workers`` threads, each chunk followed on its
        thread by ``then(worker, lo, hi)`` (the fused recurrence of :class:`NoiseStream`)."""
        def chunk(w: int, j: int) -> None:
            lo, hi = j * _CHUNK, min(out.size, (j + 1) * _CHUNK)
            _fill_chunk(self._scratch[w], t, j, out[lo:hi], c)
            if then is not None:
                then(w, lo, hi)

        with self._lock:
            while len(self._scratch) < workers:
                self._scratch.append(_Scratch(self._key))
            self._pool.each(chunk, -(-out.size // _CHUNK), workers)


_PRIVATE = object()


def check_vector(out: Any, d: int | None, what: str) -> None:
    """Refuse (PrivacyError) anything but a writable C-contiguous float64 vector (of length d
    unless d is None): what the sampler and the recurrence write into in place."""
    if not isinstance(out, np.ndarray) or out.dtype != np.float64 or out.ndim != 1 \
            or not out.flags.c_contiguous or not out.flags.writeable or (d is not None and out.size != d):
        size = "" if d is None else f" of length {d}"
        raise PrivacyError(f"{what}: needs a writable contiguous float64 vector{size}")


def _log_factor(scale: float) -> float:
    """c = −2σ² of the polar formula: exactly −2 for σ = 1, else with 2σ² rounded up (a
    larger factor only adds noise); refused where u·√(c·ln s/s) could overflow (s ≥ 2⁻¹⁰⁴)."""
    if scale == 1.0:
        return -2.0
    c = math.nextafter(2.0 * (scale * scale), math.inf)
    if not c * 73.0 * 2.0 ** 104 < sys.float_info.max:  # −ln s ≤ 104·ln 2 < 73
        raise PrivacyError(f"a noise scale of {scale} overflows the sampler")
    return -c


class _Scratch:
    """One thread's buffers for :func:`_fill_chunk` (a batch of at most :data:`_BATCH` pairs)
    and its keystream (``training.chacha``)."""

    def __init__(self, key: bytes) -> None:
        from .chacha import Keystream

        self.keystream = Keystream(key)
        self.words = np.empty(2 * _BATCH, dtype=np.dtype("<i8"))
        self.u, self.v, self.s, self.sel, self.f = (np.empty(_BATCH) for _ in range(5))
        self.ok = np.empty(_BATCH, dtype=bool)
        self.ok2 = np.empty(_BATCH, dtype=bool)


def _pairs_to_draw(need: int) -> int:
    """Pairs to draw for ``need`` accepted ones: the mean need/p plus five standard deviations
    of the negative binomial (p = π/4), in whole 64-byte blocks (4 pairs); a short draw is
    followed by another, so this only sets how often that happens."""
    mean = need / _ACCEPT
    sd = math.sqrt(need * (1.0 - _ACCEPT)) / _ACCEPT
    return 4 * math.ceil((mean + 5.0 * sd + 16.0) / 4.0)


def _fill_chunk(sc: _Scratch, step: int, j: int, seg: np.ndarray, c: float) -> None:
    """Chunk ``j`` of step ``step`` into ``seg`` (module docstring: the first h accepted pairs
    of the chunk's keystream, first Gaussians then second ones)."""
    m = seg.size
    h = (m + 1) // 2
    sc.keystream.start(struct.pack("<IIQ", 0, j, step))  # block counter 0 ‖ nonce (j, t)
    filled = drawn = 0
    while filled < h:
        need = h - filled
        b = min(_BATCH, _pairs_to_draw(need))
        drawn += b
        if drawn > _MAX_DRAWS:  # probability below 2⁻¹⁰⁰⁰: the block counter must not wrap
            raise PrivacyError("a noise chunk exhausted its keystream")
        k = sc.words[:2 * b]
        sc.keystream.fill(k)
        np.right_shift(k, 11, out=k)                    # ⌊k/2¹¹⌋ ∈ [−2⁵², 2⁵²), arithmetic
        u, v, s, f = sc.u[:b], sc.v[:b], sc.s[:b], sc.f[:b]
        np.multiply(k[0::2], 2.0 ** -52, out=u)         # exact: uniform on the grid of [−1, 1)
        np.multiply(k[1::2], 2.0 ** -52, out=v)
        np.multiply(u, u, out=s)
        np.multiply(v, v, out=f)
        np.add(s, f, out=s)
        ok = sc.ok[:b]
        np.less(s, 1.0, out=ok)
        idx = np.flatnonzero(ok)[:need]                 # s < 1, in keystream order
        g = idx.size
        sel, f = sc.sel[:g], sc.f[:g]
        # the indices come from a mask of the same length, so mode="clip" never clips: it only
        # skips take's bounds check (half its time)
        np.take(s, idx, out=sel, mode="clip")
        if not sel.all():                               # s = 0 (u = v = 0, p = 2⁻¹⁰⁶): rejected too
            np.greater(s, 0.0, out=sc.ok2[:b])
            np.logical_and(ok, sc.ok2[:b], out=ok)
            idx = np.flatnonzero(ok)[:need]
            g = idx.size
            sel, f = sc.sel[:g], sc.f[:g]
            np.take(s, idx, out=sel, mode="clip")
        np.log(sel, out=f)
        np.multiply(f, c, out=f)
        np.divide(f, sel, out=f)
        np.sqrt(f, out=f)                               # √(c·ln s / s) ≥ 0
        first = seg[filled:filled + g]
        np.take(u, idx, out=first, mode="clip")
        np.multiply(first, f, out=first)
        n2 = min(g, m - h - filled)
        second = seg[h + filled:h + filled + n2]
        np.take(v, idx[:n2], out=second, mode="clip")
        np.multiply(second, f[:n2], out=second)
        filled += g


class _Pool:
    """Worker threads for :meth:`StreamRandom.normals` and the recurrence: ``run(fn, k)`` calls
    ``fn(0)`` here and ``fn(1) … fn(k − 1)`` on k − 1 pooled threads (started on first need),
    and re-raises the first error; :meth:`each` hands numbered jobs to such workers."""

    def each(self, fn: Callable[[int, int], None], jobs: int, workers: int) -> None:
        """``fn(worker, job)`` for every job 0 … jobs − 1, each taken by the next free worker
        (so which worker runs a job varies; callers make a job's result independent of it)."""
        it = iter(range(jobs))
        take = threading.Lock()

        def work(w: int) -> None:
            while True:
                with take:
                    j = next(it, None)
                if j is None:
                    return
                fn(w, j)

        self.run(work, workers)

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._size = 0
        self._ex: ThreadPoolExecutor | None = None
        self._make: Callable[[int], ThreadPoolExecutor] = (
            lambda n: ThreadPoolExecutor(n, thread_name_prefix="factorize-noise"))

    def run(self, fn: Callable[[int], None], k: int) -> None:
        if k <= 1:
            fn(0)
            return
        if self._ex is None or self._size < k - 1:
            if self._ex is not None:
                self._ex.shutdown(wait=True)
            self._ex, self._size = self._make(k - 1), k - 1
        futures = [self._ex.submit(fn, w) for w in range(1, k)]
        try:
            fn(0)
        finally:
            errors = [f.exception() for f in futures]
        for e in errors:
            if e is not None:
                raise e


class CorrelatedNoise:
    """The recurrence ``x = C⁻¹z`` of a Toeplitz strategy, one step at a time (module
    docstring): :meth:`push` takes ``z_t`` and returns ``x_t``; the state is ``(b−1)·d``
    (banded) or ``b·d`` (BLT) floats and nothing else."""

    def __init__(self, strategy: LongStrategy, d: int, *, threads: int = 1) -> None:
        self.strategy = strategy
        self.d = integer("d", d, 1, PrivacyError)
        self.threads = integer("threads", threads, 1, PrivacyError)
        self._tmp: list[np.ndarray] = []
        self._pool = _Pool()
        self.t = 0
        if isinstance(strategy, BandedToeplitz):
            self._coef = np.array(strategy.coef[:min(strategy.bands, strategy.n)])
            self.state = np.zeros((self._coef.size - 1, self.d))
        elif isinstance(strategy, BLT):
            self.state = np.zeros((strategy.buffers, self.d))
        elif isinstance(strategy, BandedInverse):
            self._coef = np.array(strategy.coef[:min(strategy.bands, strategy.n)])
            self.state = np.zeros((self._coef.size - 1, self.d))
        else:
            raise PrivacyError(f"no noise recurrence for a {type(strategy).__name__}")

    @property
    def state_nbytes(self) -> int:
        return int(self.state.nbytes)

    def _push_banded_inverse(self, x: np.ndarray) -> np.ndarray:
        """A banded inverse's step (module docstring): ``x_t = Σ_{j<p} r_j z_{t−j}``, ``z_{t−j}``
        in row ``(t − j) mod (p − 1)`` of the ring; that row's oldest draw ``z_{t−p+1}`` is read
        first, then replaced by ``z_t`` — blockwise, on :meth:`_blocks`' threads."""
        r = self._coef
        S = self.state
        q = S.shape[0]
        t = self.t
        r0 = float(r[0])
        row_t = S[t % q] if q else None
        oldest = float(r[q]) if q and t >= q else None           # the term of z_{t−q}: row t mod q
        terms = [(S[(t - j) % q], float(r[j])) for j in range(1, min(t, q - 1) + 1)]

        def block(lo: int, hi: int, tmp: np.ndarray) -> None:
            xb = x[lo:hi]
            if row_t is not None:
                if oldest is not None:
                    np.multiply(row_t[lo:hi], oldest, out=tmp)
                row_t[lo:hi] = xb                                # z_t kept for the next p − 1 steps
            if r0 != 1.0:
                np.multiply(xb, r0, out=xb)
            if oldest is not None:
                np.add(xb, tmp, out=xb)
            for row, a in terms:
                np.multiply(row[lo:hi], a, out=tmp)
                np.add(xb, tmp, out=xb)

        self._blocks(block)
        self.t += 1
        return x

    def push(self, z: np.ndarray) -> np.ndarray:
        """``x_t`` from ``z_t`` (a float64 vector of length d, overwritten with x_t and
        returned); steps beyond n are refused. Banded and BLT: block by block in place (a
        block's b + 1 vectors stay in cache, so the state is read and written once per step):
        the weighted sum of the b state rows by one BLAS product, then in-place NumPy
        updates; a block's arithmetic does not depend on which thread runs it."""
        self._check(z)
        if isinstance(self.strategy, BandedInverse):
            return self._push_banded_inverse(z)
        self._blocks(self._kernel(z))
        self.t += 1
        return z

    def _blocks(self, block: Callable[[int, int, np.ndarray], None]) -> None:
        """``block(lo, hi, tmp)`` on every block of :data:`_BLOCK` coordinates (each touches
        only its own coordinates, so the result does not depend on the order), on
        ``self.threads`` threads; ``tmp`` a thread's scratch vector of the block's length."""
        nblocks = -(-self.d // _BLOCK)
        workers = max(1, min(self.threads, nblocks))
        self._ensure_tmp(workers)

        def one(w: int, b: int) -> None:
            self._advance(block, w, b * _BLOCK, min(self.d, (b + 1) * _BLOCK))

        self._pool.each(one, nblocks, workers)

    def _check(self, z: np.ndarray) -> None:
        if self.t >= self.strategy.n:
            raise PrivacyError(f"the strategy has {self.strategy.n} steps; step {self.t} is beyond it")
        check_vector(z, self.d, "z_t")

    def _ensure_tmp(self, workers: int) -> None:
        while len(self._tmp) < workers:
            self._tmp.append(np.empty(min(_BLOCK, self.d)))

    def _advance(self, block: Callable[[int, int, np.ndarray], None], w: int, lo: int, hi: int) -> None:
        """The kernel ``block`` on coordinates [lo, hi) in blocks of :data:`_BLOCK` (aligned
        to multiples of it, so any caller cuts the same blocks), with worker w's scratch."""
        tmp = self._tmp[w]
        for a in range(lo, hi, _BLOCK):
            b = min(hi, (a // _BLOCK + 1) * _BLOCK)
            block(a, b, tmp[:b - a])

    def _kernel(self, x: np.ndarray) -> Callable[[int, int, np.ndarray], None]:
        """Step t's arithmetic on one block [lo, hi) of ``x`` (z_t in, x_t out) and of the
        state (banded / BLT; each block touches only its own coordinates)."""
        S = self.state
        if isinstance(self.strategy, BandedToeplitz):
            c = self._coef
            q = S.shape[0]
            # x_{t−j} sits in row (t − j) mod q (rows not yet written are zeros, weight 0);
            # x_t then replaces x_{t−q} (row t mod q)
            weight = np.zeros(q)
            for j in range(1, min(self.t, q) + 1):
                weight[(self.t - j) % q] = c[j]
            c0 = float(c[0])
            row_t = S[self.t % q] if q else None

            def block(lo: int, hi: int, tmp: np.ndarray) -> None:
                xb = x[lo:hi]
                if row_t is not None:
                    np.dot(weight, S[:, lo:hi], out=tmp)    # Σ_j c_j x_{t−j}
                    np.subtract(xb, tmp, out=xb)
                if c0 != 1.0:
                    np.divide(xb, c0, out=xb)
                if row_t is not None:
                    row_t[lo:hi] = xb
        elif isinstance(self.strategy, BLT):
            om = np.array(self.strategy.omega, dtype=np.float64)
            th = [float(v) for v in self.strategy.theta]

            def block(lo: int, hi: int, tmp: np.ndarray) -> None:
                xb = x[lo:hi]
                np.dot(om, S[:, lo:hi], out=tmp)           # Σ_i ω_i S_i(t)
                np.subtract(xb, tmp, out=xb)                # x_t = z_t − Σ_i ω_i S_i(t)
                for i, a in enumerate(th):                  # S_i(t+1) = θ_i S_i(t) + x_t
                    Sb = S[i, lo:hi]
                    np.multiply(Sb, a, out=Sb)
                    np.add(Sb, xb, out=Sb)
        else:
            raise PrivacyError(f"no blockwise noise recurrence for a {type(self.strategy).__name__}")
        return block


@dataclass(frozen=True)
class NoiseStep:
    """Step ``t``'s noise ``σ·(C⁻¹z)_t`` and the label of its randomness (``TEST MODE …`` for a
    seeded stream). ``np.asarray(step)`` and ``from_dlpack(step)`` give the array."""

    t: int
    noise: np.ndarray
    label: str
    test_mode: bool

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.noise if dtype is None else self.noise.astype(dtype)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.noise.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.noise.__dlpack_device__()


class NoiseStream:
    """Iterator over the n steps' :class:`NoiseStep` of a strategy for a model of dimension d
    (module docstring); ``σ`` the noise multiplier per unit clipping norm, applied in the sampler
    (``C⁻¹(σz)``); ``threads`` for the sampler and the recurrence (the output does not depend on
    it)."""

    def __init__(self, strategy: LongStrategy, d: int, rng: StreamRandom, sigma: float, *,
                 threads: int = 1) -> None:
        if not isinstance(rng, StreamRandom):
            raise PrivacyError("rng must be a StreamRandom (StreamRandom.secure() or .seeded(seed))")
        self.sigma = positive_number("sigma", sigma, PrivacyError)
        _log_factor(self.sigma)  # refuses a σ that would overflow the sampler, before any step
        self.rng = rng
        self.threads = integer("threads", threads, 1, PrivacyError)
        self.noise = CorrelatedNoise(strategy, d, threads=self.threads)

    @property
    def state_nbytes(self) -> int:
        return self.noise.state_nbytes

    def __iter__(self) -> Iterator[NoiseStep]:
        return self

    def __next__(self) -> NoiseStep:
        if self.noise.t >= self.noise.strategy.n:
            raise StopIteration
        return self._step(np.empty(self.noise.d))

    def next_into(self, out: np.ndarray) -> NoiseStep:
        """The next step written into ``out`` (a writable contiguous float64 vector of length
        d), whose :class:`NoiseStep` holds ``out`` itself: a loop that does not keep its steps
        reuses one buffer and saves a fresh d-vector per step (at d = 10⁸, 800 MB of first
        touches: ``reports/bench_noise_stream.md``). Past the last step: PrivacyError."""
        noise = self.noise
        check_vector(out, noise.d, "next_into")
        if noise.t >= noise.strategy.n:
            raise PrivacyError(f"the strategy has {noise.strategy.n} steps; step {noise.t} is beyond it")
        return self._step(out)

    def _step(self, z: np.ndarray) -> NoiseStep:
        noise = self.noise
        t = noise.t
        if isinstance(noise.strategy, BandedInverse):
            self.rng.normals(t, z, scale=self.sigma, threads=self.threads)  # σz: no pass for σ later
            return NoiseStep(t, noise.push(z), self.rng.label, self.rng.is_test_mode)
        # fused: each thread runs the recurrence on a chunk right after sampling it, while the
        # chunk is in cache (the same blocks and arithmetic as sampling everything, then push)
        noise._check(z)
        step, c, workers = self.rng._checked(t, z, self.sigma, self.threads)
        block = noise._kernel(z)
        noise._ensure_tmp(workers)
        self.rng._fill(step, z, c, workers, lambda w, lo, hi: noise._advance(block, w, lo, hi))
        noise.t += 1
        return NoiseStep(t, z, self.rng.label, self.rng.is_test_mode)


def noise_stream(strategy: LongStrategy, d: int, rng: StreamRandom | None = None, *,
                 sigma: float = 1.0, threads: int = 1) -> NoiseStream:
    """The stream of ``σ·(C⁻¹z)_t``; ``rng`` None: production randomness (:meth:`StreamRandom.secure`);
    ``threads``: how many threads compute each step (same output for any number)."""
    return NoiseStream(strategy, d, rng if rng is not None else StreamRandom.secure(), sigma,
                       threads=threads)


def calibrate_sigma(guarantee: Any, sensitivity: float) -> float:
    """The Gaussian σ (per unit clipping norm) giving ``guarantee`` at L2 sensitivity Δ: zCDP
    ``σ = Δ/√(2ρ)`` rounded up; (ε, δ): the smallest σ passing the analytic Gaussian test
    (Balle & Wang 2018; ``privacy.gaussian.gaussian_sigma_threshold``)."""
    from factorize.privacy.gaussian import gaussian_sigma_threshold
    from factorize.privacy.guarantees import ZCDP, ApproxDP
    from factorize.privacy.zcdp import zcdp_gaussian_sigma

    if isinstance(guarantee, ZCDP):
        return zcdp_gaussian_sigma(guarantee.rho, sensitivity)
    if isinstance(guarantee, ApproxDP):
        return gaussian_sigma_threshold(guarantee.epsilon, guarantee.delta, sensitivity, discrete=False)
    raise PrivacyError(f"a Gaussian noise stream takes a zCDP or (ε, δ) guarantee, got {guarantee!r}")


@dataclass(frozen=True)
class PrivateRun:
    """A charged run: its stream, the certified sensitivity it was calibrated with, σ, the
    SHA-256 of its record (what the ledger charge names) and the charge id (None without a
    ledger)."""

    stream: NoiseStream
    sensitivity: LongSensitivity
    sigma: float
    record_sha256: str
    charge_id: int | None


def run_record(strategy: LongStrategy, d: int, participation: Participation | None,
               guarantee: Any, sigma: float) -> bytes:
    """The canonical JSON of what a run charges: the strategy's parameters, d, the
    participation, the guarantee and σ."""
    body = {"strategy": strategy.to_dict(), "d": d, "guarantee": guarantee.to_dict(),
            "participation": None if participation is None else participation.key, "sigma": sigma}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def open_private_stream(strategy: LongStrategy, d: int, *, guarantee: Any,
                        participation: Participation | None, ledger: str | os.PathLike[str] | None = None,
                        dataset: str | None = None, rng: StreamRandom | None = None,
                        threads: int = 1) -> PrivateRun:
    """A stream whose noise gives ``guarantee`` for the whole run: the sensitivity recomputed
    from the strategy's parameters under ``participation`` (``toeplitz.certified_sensitivity``),
    σ calibrated to it, and — with a ledger — **one** charge, committed before any noise is
    drawn, under the add/remove relation (one record's clipped contributions appear or not).
    A test-mode ``rng`` is refused with a ledger. ``threads``: as in :func:`noise_stream`
    (checked before the charge)."""
    from factorize.ledger import Ledger

    threads = integer("threads", threads, 1, PrivacyError)

    rng = rng if rng is not None else StreamRandom.secure()
    sens = certified_sensitivity(strategy, participation)
    sigma = calibrate_sigma(guarantee, sens.value)
    sha = hashlib.sha256(run_record(strategy, d, participation, guarantee, sigma)).hexdigest()
    stream = noise_stream(strategy, d, rng, sigma=sigma, threads=threads)  # refusals before the charge
    charge_id = None
    if ledger is not None:
        if rng.is_test_mode:
            raise PrivacyError("a test-mode stream (seeded, not private) cannot be charged to a ledger")
        if dataset is None:
            raise PrivacyError("a ledger charge needs the dataset's name")
        charge = Ledger.open(ledger).charge(dataset, guarantee.to_dict(), plan_sha256=sha,
                                            relation="add_remove")
        charge_id = charge.id
    return PrivateRun(stream, sens, sigma, sha, charge_id)
