"""The fast noise sampler (factorize.training.stream, factorize.training.chacha): the keystream
against RFC 8439's published vectors and a plain-Python block function; the sampler's output
recomputed from its definition (module docstring of training.stream: chunk layout, words,
polar method) in plain Python floats; the same output for any number of threads (sampler,
recurrence, whole stream); σ folded into the sampler; the law of the draws; refusals."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from scipy import stats

from factorize.privacy.guarantees import PrivacyError
from factorize.training import chacha
from factorize.training.stream import _BLOCK, _CHUNK, CorrelatedNoise, StreamRandom, noise_stream
from factorize.training.toeplitz import BLT, BandedToeplitz, dense_strategy

# RFC 8439, Appendix A.1 test vector #1 (key 0, nonce 0, block counter 0) and §2.3.2 (key
# 00 01 … 1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, block counter 1): published keystreams.
RFC_A1_1 = bytes.fromhex("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
                         "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586")
RFC_232 = bytes.fromhex("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
                        "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")
RFC_232_IV = struct.pack("<I", 1) + bytes.fromhex("000000090000004a00000000")


def _impls() -> list[bool]:
    return [True, False]  # libcrypto (where it loads and passes its check), cryptography


@pytest.mark.parametrize("prefer_libcrypto", _impls(), ids=["libcrypto", "cryptography"])
def test_keystream_matches_rfc_8439(prefer_libcrypto: bool) -> None:
    assert chacha.reference_block(bytes(32), bytes(16)) == RFC_A1_1
    assert chacha.reference_block(bytes(range(32)), RFC_232_IV) == RFC_232
    for key, iv, want in ((bytes(32), bytes(16), RFC_A1_1), (bytes(range(32)), RFC_232_IV, RFC_232)):
        ks = chacha.Keystream(key, prefer_libcrypto=prefer_libcrypto)
        ks.start(iv)
        out = np.empty(64, dtype=np.uint8)
        ks.fill(out)
        assert out.tobytes() == want


@pytest.mark.parametrize("prefer_libcrypto", _impls(), ids=["libcrypto", "cryptography"])
def test_keystream_continues_across_fills(prefer_libcrypto: bool) -> None:
    """Blocks 0…9 of a nonce, filled in uneven whole-block pieces, equal the reference block
    function at counters 0…9; a new IV restarts."""
    key = bytes(range(100, 132))
    nonce = bytes.fromhex("0102030405060708090a0b0c")
    ks = chacha.Keystream(key, prefer_libcrypto=prefer_libcrypto)
    ks.start(struct.pack("<I", 0) + nonce)
    out = np.empty(640, dtype=np.uint8)
    for lo, hi in ((0, 64), (64, 320), (320, 640)):
        ks.fill(out[lo:hi])
    want = b"".join(chacha.reference_block(key, struct.pack("<I", c) + nonce) for c in range(10))
    assert out.tobytes() == want
    ks.start(struct.pack("<I", 7) + nonce)
    ks.fill(out[:64])
    assert out[:64].tobytes() == want[7 * 64:8 * 64]


def test_keystream_refusals() -> None:
    ks = chacha.Keystream(bytes(32))
    with pytest.raises(ValueError):
        ks.fill(np.empty(64, dtype=np.uint8))  # not started
    ks.start(bytes(16))
    with pytest.raises(ValueError):
        ks.fill(np.empty(65, dtype=np.uint8))  # not whole blocks
    with pytest.raises(ValueError):
        ks.start(bytes(12))
    with pytest.raises(ValueError):
        chacha.Keystream(bytes(16))
    assert "libcrypto" in chacha.backend() or "cryptography" in chacha.backend()


def _reference_normals(key: bytes, step: int, d: int, scale: float = 1.0) -> np.ndarray:
    """The module docstring's definition in plain Python: chunks of _CHUNK coordinates, chunk
    j's keystream at IV (0 ‖ j ‖ step) from the ``cryptography`` package (checked against RFC
    8439 above; the sampler uses libcrypto where it loads), words as signed
    little-endian int64, polar method with math.log / math.sqrt, first Gaussians then second."""
    c = -2.0 if scale == 1.0 else -math.nextafter(2.0 * scale * scale, math.inf)
    out = np.empty(d)
    for j, lo in enumerate(range(0, d, _CHUNK)):
        m = min(_CHUNK, d - lo)
        h = (m + 1) // 2
        accepted: list[tuple[float, float]] = []
        ks = chacha.Keystream(key, prefer_libcrypto=False)  # the other implementation
        ks.start(struct.pack("<IIQ", 0, j, step))
        block = np.empty(64, dtype=np.uint8)
        while len(accepted) < h:
            ks.fill(block)
            words = struct.unpack("<8q", block.tobytes())
            for i in range(0, 8, 2):
                u = (words[i] >> 11) * 2.0 ** -52
                v = (words[i + 1] >> 11) * 2.0 ** -52
                s = u * u + v * v
                if 0.0 < s < 1.0 and len(accepted) < h:
                    f = math.sqrt(c * math.log(s) / s)
                    accepted.append((u * f, v * f))
        out[lo:lo + h] = [a for a, _ in accepted]
        out[lo + h:lo + m] = [b for _, b in accepted[:m - h]]
    return out


@pytest.mark.parametrize("d", [1, 2, 7, _CHUNK + 3])
def test_normals_follow_their_definition(d: int) -> None:
    """Every coordinate equals the plain-Python recomputation of the definition: the same
    accepted pairs (exact arithmetic up to s), log/sqrt within 4 ulp (NumPy's vectorised log
    against libm's)."""
    rng = StreamRandom.seeded(21)
    got = np.empty(d)
    rng.normals(5, got)
    want = _reference_normals(rng._key, 5, d)
    assert np.all(np.abs(got - want) <= 4 * np.spacing(np.abs(want)))


def test_scale_is_folded_into_the_sampler() -> None:
    """normals(scale=σ) is σ·normals() to a few ulp (c = −2σ² with 2σ² rounded up), and
    matches its plain-Python definition."""
    rng = StreamRandom.seeded(4)
    z = np.empty(5000)
    zs = np.empty(5000)
    rng.normals(2, z)
    rng.normals(2, zs, scale=3.7)
    assert np.all(np.abs(zs - 3.7 * z) <= 4 * np.spacing(np.abs(3.7 * z)))
    small = np.empty(9)
    rng.normals(2, small, scale=3.7)
    want = _reference_normals(rng._key, 2, 9, 3.7)
    assert np.all(np.abs(small - want) <= 4 * np.spacing(np.abs(want)))


SIZES = [1, 2, 3, 7, _CHUNK - 1, _CHUNK, _CHUNK + 1, 3 * _CHUNK + 17]


@pytest.mark.parametrize("d", SIZES)
def test_normals_do_not_depend_on_threads(d: int) -> None:
    rng = StreamRandom.seeded(8)
    outs = []
    for k in (1, 2, 3):
        z = np.full(d, np.nan)
        rng.normals(11, z, threads=k)
        outs.append(z)
    assert np.all(np.isfinite(outs[0]))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_full_chunks_do_not_depend_on_d() -> None:
    """The first ⌊d/M⌋ chunks of a step are the same for every d that contains them."""
    rng = StreamRandom.seeded(8)
    a = np.empty(2 * _CHUNK)
    b = np.empty(2 * _CHUNK + 5)
    rng.normals(0, a)
    rng.normals(0, b)
    assert np.array_equal(a, b[:2 * _CHUNK])


@pytest.mark.parametrize("strategy", [BLT(np.array([0.9, 0.5, -0.3]), np.array([0.3, 0.1, 0.2]), 6),
                                      BandedToeplitz(np.array([1.3, -0.3, 0.5, 0.1]), 6)],
                         ids=["blt", "banded"])
def test_stream_does_not_depend_on_threads(strategy) -> None:
    """Whole steps (sampler, σ, recurrence over several cache blocks) are bitwise the same on 1
    and 2 threads, and equal σ·C⁻¹Z for the dense C (abs 1e-12)."""
    d = 3 * _BLOCK + 5
    one = [np.asarray(x).copy() for x in noise_stream(strategy, d, StreamRandom.seeded(3), sigma=1.7)]
    two = [np.asarray(x).copy() for x in noise_stream(strategy, d, StreamRandom.seeded(3), sigma=1.7,
                                                      threads=2)]
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
    Z = np.empty((strategy.n, d))
    for t in range(strategy.n):
        StreamRandom.seeded(3).normals(t, Z[t])
    ref = 1.7 * np.linalg.solve(dense_strategy(strategy), Z)
    assert np.abs(np.array(one) - ref).max() <= 1e-12 * max(1.0, np.abs(ref).max())


def test_recurrence_threads_alone() -> None:
    s = BLT(np.array([0.99, 0.7]), np.array([0.2, 0.4]), 5)
    d = 2 * _BLOCK + 1
    a, b = CorrelatedNoise(s, d), CorrelatedNoise(s, d, threads=2)
    z = np.random.default_rng(0).standard_normal((5, d))
    for t in range(5):
        assert np.array_equal(a.push(z[t].copy()), b.push(z[t].copy()))
    assert np.array_equal(a.state, b.state)


def test_law_of_the_fast_sampler() -> None:
    """2·10⁶ draws over 31 chunks on 2 threads (fixed seed, deterministic): mean, variance,
    skewness and excess kurtosis within 5 standard errors (1/√m, √(2/m), √(6/m), √(24/m));
    P(|z| > 3) within 5 binomial standard errors of 2Φ(−3); Kolmogorov–Smirnov p > 1e-4;
    the first and second Gaussians of the same pairs (coordinates i and h + i of a chunk)
    uncorrelated within 5/√pairs; with scale σ = 2.5 the variance is σ² within 5 standard
    errors."""
    m = 2_000_000
    z = np.empty(m)
    StreamRandom.seeded(12).normals(0, z, threads=2)
    assert abs(z.mean()) <= 5 / math.sqrt(m)
    assert abs(z.var() - 1) <= 5 * math.sqrt(2 / m)
    assert abs(stats.skew(z)) <= 5 * math.sqrt(6 / m)
    assert abs(stats.kurtosis(z)) <= 5 * math.sqrt(24 / m)
    p3 = 2 * stats.norm.sf(3)
    assert abs(np.mean(np.abs(z) > 3) - p3) <= 5 * math.sqrt(p3 * (1 - p3) / m)
    assert stats.kstest(z, "norm").pvalue > 1e-4
    h = _CHUNK // 2
    full = z[:(m // _CHUNK) * _CHUNK].reshape(-1, _CHUNK)
    first, second = full[:, :h].ravel(), full[:, h:].ravel()
    assert abs(np.corrcoef(first, second)[0, 1]) <= 5 / math.sqrt(first.size)
    w = np.empty(m)
    StreamRandom.seeded(12).normals(1, w, scale=2.5)
    assert abs(w.var() / 6.25 - 1) <= 5 * math.sqrt(2 / m)


def test_refusals() -> None:
    rng = StreamRandom.seeded(0)
    with pytest.raises(PrivacyError):
        rng.normals(0, np.empty(10, dtype=np.float32))
    with pytest.raises(PrivacyError):
        rng.normals(0, np.empty(20)[::2])  # not contiguous
    with pytest.raises(PrivacyError):
        rng.normals(0, np.empty(4), threads=0)
    with pytest.raises(PrivacyError):
        rng.normals(-1, np.empty(4))
    with pytest.raises(PrivacyError):
        rng.normals(0, np.empty(4), scale=1e140)  # u·√(c·ln s / s) would overflow
    with pytest.raises(PrivacyError):
        noise_stream(BLT(np.array([0.5]), np.array([0.1]), 3), 4, rng, sigma=1e140)
    with pytest.raises(PrivacyError):
        noise_stream(BLT(np.array([0.5]), np.array([0.1]), 3), 4, rng, threads=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_fused_step_equals_sampler_then_recurrence(threads: int) -> None:
    """The stream's fused step (recurrence on each chunk right after it is sampled) is bitwise
    the sampler with scale σ followed by CorrelatedNoise.push, for BLT and banded strategies,
    across chunk and block boundaries."""
    assert _CHUNK % _BLOCK == 0
    d = _CHUNK + 2 * _BLOCK + 3
    for s in (BLT(np.array([0.9, 0.5]), np.array([0.3, 0.1]), 4),
              BandedToeplitz(np.array([1.2, -0.3, 0.5]), 4)):
        fused = [np.asarray(x).copy() for x in noise_stream(s, d, StreamRandom.seeded(6), sigma=0.8,
                                                            threads=threads)]
        rec = CorrelatedNoise(s, d)
        for t in range(s.n):
            z = np.empty(d)
            StreamRandom.seeded(6).normals(t, z, scale=0.8)
            assert np.array_equal(rec.push(z), fused[t])


class _Scripted:
    """A keystream stand-in replaying given 64-bit words (to reach the rare branches)."""

    def __init__(self, words: np.ndarray) -> None:
        self.data = words.astype("<i8").tobytes()
        self.pos = 0

    def start(self, iv: bytes) -> None:
        self.pos = 0

    def fill(self, out: np.ndarray) -> None:
        n = out.nbytes
        out.view(np.uint8)[:] = np.frombuffer(self.data[self.pos:self.pos + n], dtype=np.uint8)
        self.pos += n


def test_rejection_of_s_zero_and_the_boundary() -> None:
    """Pairs with u = v = 0 (s = 0), with u = −1 (s ≥ 1) and on the circle are rejected, the
    rest taken in order: the chunk equals the plain-Python polar method on the same words."""
    from factorize.training.stream import _fill_chunk, _Scratch

    gen = np.random.default_rng(3)
    words = gen.integers(-2 ** 63, 2 ** 63, size=4096, dtype=np.int64)
    words[0:2] = 0                                  # s = 0
    words[6:8] = 0
    words[2] = -2 ** 63                             # u = −1: s ≥ 1
    words[4], words[5] = 2 ** 62, -(2 ** 62)        # u = 0.5, v = −0.5: accepted
    sc = _Scratch(bytes(32))
    sc.keystream = _Scripted(words)  # type: ignore[assignment]
    seg = np.empty(101)
    _fill_chunk(sc, 0, 0, seg, -2.0)
    h = 51
    acc = []
    for i in range(0, words.size, 2):
        u, v = (int(words[i]) >> 11) * 2.0 ** -52, (int(words[i + 1]) >> 11) * 2.0 ** -52
        s = u * u + v * v
        if 0.0 < s < 1.0:
            f = math.sqrt(-2.0 * math.log(s) / s)
            acc.append((u * f, v * f))
        if len(acc) == h:
            break
    want = np.array([a for a, _ in acc] + [b for _, b in acc[:101 - h]])
    assert acc[0][0] == 0.5 * math.sqrt(-2.0 * math.log(0.5) / 0.5)
    assert np.all(np.abs(seg - want) <= 4 * np.spacing(np.abs(want)))


def test_libcrypto_is_used_only_after_its_known_answer() -> None:
    """The load-time check accepts RFC 8439's block function and refuses anything else (a
    library reading the IV differently gives other bytes)."""
    def right(key: bytes, iv: bytes, n: int) -> bytes:
        return b"".join(chacha.reference_block(key, struct.pack("<I", c) + iv[4:]) for c in (1, 2))

    def swapped_iv(key: bytes, iv: bytes, n: int) -> bytes:  # 64-bit counter ‖ 64-bit nonce reading
        return b"".join(chacha.reference_block(key, iv[8:] + iv[:8]) for _ in (1, 2))

    assert chacha._known_answer(right)
    assert not chacha._known_answer(swapped_iv)
    assert not chacha._known_answer(lambda key, iv, n: bytes(n))


def test_pool_reraises_a_worker_error() -> None:
    from factorize.training.stream import _Pool

    seen: list[int] = []

    def job(w: int, j: int) -> None:
        seen.append(j)
        if j == 3:
            raise ValueError("job 3")

    with pytest.raises(ValueError, match="job 3"):
        _Pool().each(job, 8, 2)
    assert 3 in seen


def test_next_into_reuses_the_callers_buffer() -> None:
    """next_into writes the same numbers as iterating, into the caller's vector (the step holds
    it), refuses a wrong buffer and steps past n."""
    s = BLT(np.array([0.9, 0.4]), np.array([0.2, 0.3]), 3)
    d = _BLOCK + 7
    want = [np.asarray(x).copy() for x in noise_stream(s, d, StreamRandom.seeded(2), sigma=1.5)]
    st = noise_stream(s, d, StreamRandom.seeded(2), sigma=1.5, threads=2)
    buf = np.empty(d)
    for t in range(3):
        step = st.next_into(buf)
        assert step.t == t and step.noise is buf and np.array_equal(buf, want[t])
    with pytest.raises(PrivacyError):
        st.next_into(buf)
    st2 = noise_stream(s, d, StreamRandom.seeded(2))
    for bad in (np.empty(d - 1), np.empty(d, dtype=np.float32), np.empty(2 * d)[::2]):
        with pytest.raises(PrivacyError):
            st2.next_into(bad)


def test_dense_stream_next_into() -> None:
    from factorize.kinds.training.dense import DenseStrategy
    from factorize.kinds.training.stream import DenseNoiseStream

    C = np.array([[1.0, 0.0, 0.0], [0.4, 1.2, 0.0], [-0.3, 0.2, 0.9]])
    strat = DenseStrategy(C, np.ones((3, 1)))
    want = [np.asarray(x).copy() for x in DenseNoiseStream(strat, 5, StreamRandom.seeded(1), 2.0)]
    st = DenseNoiseStream(strat, 5, StreamRandom.seeded(1), 2.0)
    buf = np.empty(5)
    for t in range(3):
        step = st.next_into(buf)
        assert step.noise is buf and np.array_equal(buf, want[t])
    with pytest.raises(PrivacyError):
        st.next_into(buf)
    with pytest.raises(PrivacyError):
        DenseNoiseStream(strat, 5, StreamRandom.seeded(1), 2.0).next_into(np.empty(4))


def test_private_run_threads_checked_before_the_charge(tmp_path) -> None:
    """A bad ``threads`` is refused before the ledger is charged; a good one gives the same noise
    as one thread."""
    from factorize.ledger import Ledger
    from factorize.privacy.guarantees import ZCDP
    from factorize.training.stream import open_private_stream

    L = tmp_path / "L.db"
    Ledger.create(L).create_dataset("u", {"type": "zcdp", "rho": 1.0})
    s = BLT(np.array([0.9]), np.array([0.2]), 4)
    with pytest.raises(PrivacyError):
        open_private_stream(s, 10, guarantee=ZCDP(0.25), participation=None, ledger=L, dataset="u",
                            threads=0)
    assert Ledger.open(L).history("u") == []
    a = open_private_stream(s, 10, guarantee=ZCDP(0.25), participation=None, rng=StreamRandom.seeded(1))
    b = open_private_stream(s, 10, guarantee=ZCDP(0.25), participation=None, rng=StreamRandom.seeded(1),
                            threads=2)
    assert all(np.array_equal(x.noise, y.noise) for x, y in zip(a.stream, b.stream, strict=True))
