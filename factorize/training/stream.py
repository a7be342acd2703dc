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
  Alg. 2).

**Secure sampling** (:class:`StreamRandom`). Production randomness is a ChaCha20 keystream
(Bernstein 2008; RFC 8439), keyed with 32 bytes from ``os.urandom`` — the construction of
Linux's own CSPRNG — computed by the ``cryptography`` package (OpenSSL, vectorised): step t
uses the nonce ``(t, 0)`` with its own block counter from 0, so every step has a fresh,
independent-looking stream of up to 256 GiB (d ≤ 2³² needs about 41 GiB: 16 bytes per pair
drawn, 4/π draws per accepted pair). Under the standard
assumption that ChaCha20 is a pseudorandom function, the words are indistinguishable from
independent uniform 64-bit words. Pairs of words make pairs of Gaussians by Marsaglia's polar
method (Marsaglia & Bray, "A Convenient Method for Generating Normal Variables", SIAM Review
1964), which needs no trigonometric function:

    u = ⌊w₁/2¹¹⌋·2⁻⁵² − 1,  v = ⌊w₂/2¹¹⌋·2⁻⁵² − 1  (uniform on a grid of [−1, 1), exact),
    s = u² + v²; reject unless 0 < s < 1;  z₁ = u·√(−2 ln s / s),  z₂ = v·√(−2 ln s / s).

For (u, v) uniform on the open unit disc, (z₁, z₂) is exactly N(0, I₂) (the accepted point's
angle is uniform and s is uniform on (0, 1), independent of it). The stream is consumed in a
fixed order, so a step's numbers are a function of (key, t) only. **The floating-point caveat,
stated plainly:** this sampler is *not* exact. (i) u, v lie on the grid 2⁻⁵², so s ≥ 2⁻¹⁰⁴ and
|z| ≤ √(s)·√(−2 ln s / s) = √(−2 ln s) ≤ √(208 ln 2) ≈ 12.0: the tail beyond 12σ is
missing, and the disc is a union of grid cells, with s rounded (its boundary is decided to
within an ulp); (ii) log, sqrt and the
divisions carry libm's rounding (≈ 1 ulp), so the output's law is within a small relative
error of the Gaussian's on most of its range but is supported on floats, and the recurrence
adds its own rounding (x̂_t = (C⁻¹z)_t + e_t, |e_t| a few ulps times the sizes summed); (iii)
floating-point noise added to floating-point gradients is open to attacks that read the
low-order bits (Mironov, "On Significance of the Least Significant Bits for Differential
Privacy", CCS 2012). The privacy guarantee charged is that of the *ideal* Gaussian mechanism
with the certified sensitivity; the gap is not quantified here. Exact lattice samplers
(``privacy.sampling``) are far too slow for d = 10⁸ per step.

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
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from factorize.numerics import integer, positive_number
from factorize.privacy.guarantees import PrivacyError
from factorize.privacy.participation import Participation

from .toeplitz import BLT, BandedToeplitz, LongSensitivity, LongStrategy, certified_sensitivity

__all__ = ["CorrelatedNoise", "NoiseStep", "NoiseStream", "PrivateRun", "StreamRandom",
           "calibrate_sigma", "noise_stream", "open_private_stream", "run_record"]

#: Normals per keystream chunk: bounds the sampler's temporaries to a few MiB.
_CHUNK = 1 << 18
#: Coordinates per block of the recurrence: the b + 1 vectors' blocks (128 KiB each) stay in
#: cache, so a step reads and writes the state once.
_BLOCK = 1 << 14
#: Largest model dimension: one step's keystream (8·d bytes) stays below ChaCha20's 2³²
#: blocks of 64 bytes per nonce.
MAX_DIM = 1 << 32


class StreamRandom:
    """A ChaCha20 keystream turned into standard Gaussians (module docstring). Use
    :meth:`secure` (production, OS key) or :meth:`seeded` (test mode)."""

    def __init__(self, key: bytes, *, test_seed: int | None, _token: object = None) -> None:
        if _token is not _PRIVATE:
            raise PrivacyError("use StreamRandom.secure() or StreamRandom.seeded(seed)")
        self._key = bytes(key)
        self.test_seed = test_seed

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

    def normals(self, step: int, out: np.ndarray) -> None:
        """Fill the float64 vector ``out`` with step ``step``'s standard Gaussians (the same
        step always gives the same numbers for one key)."""
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        d = out.size
        if d > MAX_DIM:
            raise PrivacyError(f"a noise step has at most 2^32 coordinates, got {d}")
        nonce = (0).to_bytes(4, "little") + int(step).to_bytes(8, "little") + bytes(4)
        enc = Cipher(algorithms.ChaCha20(self._key, nonce), mode=None).encryptor()
        m = min(_CHUNK, d + (d & 1))
        draw_max = m // 2 + m // 6 + 64
        zeros = bytes(16 * draw_max)
        raw = bytearray(16 * draw_max + 64)
        words = np.frombuffer(raw, dtype=np.uint64, count=2 * draw_max)
        uv = np.empty(2 * draw_max)
        for start in range(0, d, m):
            cnt = min(m, d - start)
            pairs = (cnt + 1) // 2
            seg = out[start:start + cnt]
            filled = 0
            while filled < pairs:
                k = pairs - filled
                draw = min(draw_max, k + k // 3 + 64)  # acceptance π/4: ≈ 1.27 draws per pair
                enc.update_into(zeros[:16 * draw], raw)
                w = uv[:2 * draw]
                np.multiply(np.right_shift(words[:2 * draw], np.uint64(11)), 2.0 ** -52, out=w)
                w -= 1.0                                       # uniform on the grid 2⁻⁵² of [−1, 1)
                u, v = w[:draw], w[draw:2 * draw]
                s2 = u * u
                s2 += v * v
                ok = (s2 < 1.0) & (s2 > 0.0)
                u, v, s2 = u[ok][:k], v[ok][:k], s2[ok][:k]
                f = np.log(s2)
                f *= -2.0
                f /= s2
                np.sqrt(f, out=f)
                got = f.size
                np.multiply(u, f, out=seg[filled:filled + got])
                hi = seg[pairs + filled:pairs + filled + got]
                np.multiply(v[:hi.size], f[:hi.size], out=hi)
                filled += got


_PRIVATE = object()


class CorrelatedNoise:
    """The recurrence ``x = C⁻¹z`` of a Toeplitz strategy, one step at a time (module
    docstring): :meth:`push` takes ``z_t`` and returns ``x_t``; the state is ``(b−1)·d``
    (banded) or ``b·d`` (BLT) floats and nothing else."""

    def __init__(self, strategy: LongStrategy, d: int) -> None:
        self.strategy = strategy
        self.d = integer("d", d, 1, PrivacyError)
        self.t = 0
        if isinstance(strategy, BandedToeplitz):
            self._coef = np.array(strategy.coef[:min(strategy.bands, strategy.n)])
            self.state = np.zeros((self._coef.size - 1, self.d))
        elif isinstance(strategy, BLT):
            self.state = np.zeros((strategy.buffers, self.d))
        else:
            raise PrivacyError(f"no noise recurrence for a {type(strategy).__name__}")

    @property
    def state_nbytes(self) -> int:
        return int(self.state.nbytes)

    def push(self, z: np.ndarray) -> np.ndarray:
        """``x_t`` from ``z_t`` (a float64 vector of length d, overwritten with x_t and
        returned); steps beyond n are refused."""
        from scipy.linalg.blas import daxpy, dscal

        if self.t >= self.strategy.n:
            raise PrivacyError(f"the strategy has {self.strategy.n} steps; step {self.t} is beyond it")
        x = z
        if x.dtype != np.float64 or x.shape != (self.d,) or not x.flags.c_contiguous:
            raise PrivacyError(f"z_t must be a contiguous float64 vector of length {self.d}")
        if isinstance(self.strategy, BandedToeplitz):
            c = self._coef
            q = self.state.shape[0]
            rows = [(self.state[(self.t - j) % q], -float(c[j])) for j in range(1, min(self.t, q) + 1)]
            for lo in range(0, self.d, _BLOCK):  # x_{t−j} sits in row (t − j) mod q
                xb = x[lo:lo + _BLOCK]
                for row, a in rows:
                    daxpy(row[lo:lo + _BLOCK], xb, a=a)
            if c[0] != 1.0:
                x /= c[0]
            if q:
                self.state[self.t % q] = x
        else:
            th = [float(v) for v in self.strategy.theta]
            om = [-float(v) for v in self.strategy.omega]
            S = self.state
            for lo in range(0, self.d, _BLOCK):  # one pass over memory: each block stays in cache
                xb = x[lo:lo + _BLOCK]
                blocks = [S[i, lo:lo + _BLOCK] for i in range(S.shape[0])]
                for Sb, a in zip(blocks, om, strict=True):
                    daxpy(Sb, xb, a=a)
                for Sb, a in zip(blocks, th, strict=True):
                    dscal(a, Sb)
                    daxpy(xb, Sb)
        self.t += 1
        return x


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
    (module docstring); ``σ`` the noise multiplier per unit clipping norm."""

    def __init__(self, strategy: LongStrategy, d: int, rng: StreamRandom, sigma: float) -> None:
        if not isinstance(rng, StreamRandom):
            raise PrivacyError("rng must be a StreamRandom (StreamRandom.secure() or .seeded(seed))")
        self.sigma = positive_number("sigma", sigma, PrivacyError)
        self.rng = rng
        self.noise = CorrelatedNoise(strategy, d)

    @property
    def state_nbytes(self) -> int:
        return self.noise.state_nbytes

    def __iter__(self) -> Iterator[NoiseStep]:
        return self

    def __next__(self) -> NoiseStep:
        t = self.noise.t
        if t >= self.noise.strategy.n:
            raise StopIteration
        z = np.empty(self.noise.d)
        self.rng.normals(t, z)
        x = self.noise.push(z)
        if self.sigma != 1.0:
            x *= self.sigma
        return NoiseStep(t, x, self.rng.label, self.rng.is_test_mode)


def noise_stream(strategy: LongStrategy, d: int, rng: StreamRandom | None = None, *,
                 sigma: float = 1.0) -> NoiseStream:
    """The stream of ``σ·(C⁻¹z)_t``; ``rng`` None: production randomness (:meth:`StreamRandom.secure`)."""
    return NoiseStream(strategy, d, rng if rng is not None else StreamRandom.secure(), sigma)


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
                        dataset: str | None = None, rng: StreamRandom | None = None) -> PrivateRun:
    """A stream whose noise gives ``guarantee`` for the whole run: the sensitivity recomputed
    from the strategy's parameters under ``participation`` (``toeplitz.certified_sensitivity``),
    σ calibrated to it, and — with a ledger — **one** charge, committed before any noise is
    drawn, under the add/remove relation (one record's clipped contributions appear or not).
    A test-mode ``rng`` is refused with a ledger."""
    from factorize.ledger import Ledger

    rng = rng if rng is not None else StreamRandom.secure()
    sens = certified_sensitivity(strategy, participation)
    sigma = calibrate_sigma(guarantee, sens.value)
    sha = hashlib.sha256(run_record(strategy, d, participation, guarantee, sigma)).hexdigest()
    charge_id = None
    if ledger is not None:
        if rng.is_test_mode:
            raise PrivacyError("a test-mode stream (seeded, not private) cannot be charged to a ledger")
        if dataset is None:
            raise PrivacyError("a ledger charge needs the dataset's name")
        charge = Ledger.open(ledger).charge(dataset, guarantee.to_dict(), plan_sha256=sha,
                                            relation="add_remove")
        charge_id = charge.id
    return PrivateRun(noise_stream(strategy, d, rng, sigma=sigma), sens, sigma, sha, charge_id)
