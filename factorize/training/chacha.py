"""The ChaCha20 keystream behind the noise stream's Gaussians (``training.stream``), written into
a caller's buffer by OpenSSL, with the Python interpreter's lock released so that several
threads generate keystream at once.

**The cipher.** ChaCha20 (Bernstein, "ChaCha, a variant of Salsa20", 2008), block function of
RFC 8439 §2.3: a 256-bit key, a 16-byte *IV* read the way OpenSSL reads it — a 32-bit
little-endian block counter followed by a 96-bit nonce — and the keystream the serialised
blocks for counter, counter + 1, …; successive :meth:`Keystream.fill` calls continue where
the previous one stopped (whole 64-byte blocks only, so no partial block is ever carried).

**Two implementations of the same function.**

* OpenSSL's ``libcrypto`` (the library Python's own ``ssl`` module links), called through
  ``ctypes`` (``EVP_chacha20``, ``EVP_EncryptUpdate`` on zero bytes). ``ctypes`` releases the
  interpreter lock for the duration of each call, so two threads fill two buffers in
  parallel. It is used only after a known-answer check at first load: its output for a
  fixed key, nonce and counter must equal :func:`reference_block`, a direct transcription of
  RFC 8439 §2.3 in Python — so a ``libcrypto`` that reads the IV differently (LibreSSL,
  an old build) or computes anything else is never used.
* The ``cryptography`` package (its own statically linked OpenSSL): the same keystream, but
  its ``update_into`` holds the interpreter lock (measured with cryptography 48: a Python
  thread waits out a whole call), so threads take turns. Used where ``libcrypto`` cannot be
  loaded or fails the check.

``tests/test_training_stream_fast.py`` checks both against :func:`reference_block` and each
other.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import threading
from typing import Any

import numpy as np

from factorize.errors import InternalError
from factorize.privacy.guarantees import PrivacyError

__all__ = ["Keystream", "backend", "reference_block"]

_MASK = 0xFFFFFFFF
#: "expand 32-byte k" as four little-endian words (RFC 8439 §2.3).
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)


def _rotl(v: int, c: int) -> int:
    return ((v << c) & _MASK) | (v >> (32 - c))


def _quarter(s: list[int], a: int, b: int, c: int, d: int) -> None:
    s[a] = (s[a] + s[b]) & _MASK
    s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & _MASK
    s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & _MASK
    s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & _MASK
    s[b] = _rotl(s[b] ^ s[c], 7)


def reference_block(key: bytes, iv: bytes) -> bytes:
    """One 64-byte ChaCha20 block, RFC 8439 §2.3, in plain Python: the state is the four
    constants, the key's eight little-endian words, and the IV's four words (block counter,
    then the nonce); 10 double rounds; the serialised sum of the final and initial states."""
    if len(key) != 32 or len(iv) != 16:
        raise PrivacyError("ChaCha20 takes a 32-byte key and a 16-byte IV (counter ‖ nonce)")
    init = list(_SIGMA) + list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", iv))
    s = list(init)
    for _ in range(10):
        _quarter(s, 0, 4, 8, 12)
        _quarter(s, 1, 5, 9, 13)
        _quarter(s, 2, 6, 10, 14)
        _quarter(s, 3, 7, 11, 15)
        _quarter(s, 0, 5, 10, 15)
        _quarter(s, 1, 6, 11, 12)
        _quarter(s, 2, 7, 8, 13)
        _quarter(s, 3, 4, 9, 14)
    return struct.pack("<16I", *[(a + b) & _MASK for a, b in zip(s, init, strict=True)])


#: Bytes of zeros the keystream is "encrypted" from; a fill of more is done in pieces.
_ZEROS_LEN = 1 << 20
_ZEROS = bytes(_ZEROS_LEN)
_LOCK = threading.Lock()
_LIB: list[Any] = []  # [] not loaded yet; [None] unavailable; [lib] checked


def _known_answer(fill: Any) -> bool:
    """Does ``fill(key, iv, n)`` return RFC 8439's keystream (two blocks from a counter of 1)?"""
    key = bytes(range(32))
    iv = struct.pack("<I", 1) + bytes.fromhex("000000090000004a00000000")
    want = reference_block(key, iv) + reference_block(key, struct.pack("<I", 2) + iv[4:])
    try:
        return bool(fill(key, iv, 128) == want)
    except (OSError, AttributeError, ValueError, RuntimeError, MemoryError):  # incl. ours
        return False


def _load_libcrypto() -> Any:
    """OpenSSL's libcrypto with the functions declared, or None (absent, or it fails the
    known-answer check)."""
    names = [ctypes.util.find_library("crypto"), "libcrypto.so.3", "libcrypto.so"]
    for name in dict.fromkeys(n for n in names if n):
        try:
            lib = ctypes.CDLL(name)
            lib.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
            lib.EVP_CIPHER_CTX_new.argtypes = []
            lib.EVP_CIPHER_CTX_free.restype = None
            lib.EVP_CIPHER_CTX_free.argtypes = [ctypes.c_void_p]
            lib.EVP_chacha20.restype = ctypes.c_void_p
            lib.EVP_chacha20.argtypes = []
            lib.EVP_EncryptInit_ex.restype = ctypes.c_int
            lib.EVP_EncryptInit_ex.argtypes = [ctypes.c_void_p] * 5
            lib.EVP_EncryptUpdate.restype = ctypes.c_int
            lib.EVP_EncryptUpdate.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                              ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int]
        except (OSError, AttributeError):
            continue

        def fill(key: bytes, iv: bytes, n: int, lib: Any = lib) -> bytes:
            ks = _LibcryptoKeystream(lib, key)
            ks.start(iv)
            out = np.empty(n, dtype=np.uint8)
            ks.fill(out)
            return out.tobytes()

        if _known_answer(fill):
            return lib
    return None


def _libcrypto() -> Any:
    with _LOCK:
        if not _LIB:
            _LIB.append(_load_libcrypto())
        return _LIB[0]


def backend() -> str:
    """Which implementation :class:`Keystream` uses here."""
    return ("OpenSSL libcrypto via ctypes (interpreter lock released)" if _libcrypto() is not None
            else "cryptography package (interpreter lock held)")


class _LibcryptoKeystream:
    def __init__(self, lib: Any, key: bytes) -> None:
        self._lib = lib
        self._ctx = lib.EVP_CIPHER_CTX_new()
        if not self._ctx:
            raise MemoryError("EVP_CIPHER_CTX_new failed")
        self._key = bytes(key)
        self._keyed = False
        self._outl = ctypes.c_int()

    def start(self, iv: bytes) -> None:
        if self._keyed:  # new IV, same key: no key schedule to redo
            ok = self._lib.EVP_EncryptInit_ex(self._ctx, None, None, None, iv)
        else:
            ok = self._lib.EVP_EncryptInit_ex(self._ctx, self._lib.EVP_chacha20(), None, self._key, iv)
            self._keyed = True
        if ok != 1:
            raise InternalError("EVP_EncryptInit_ex failed for ChaCha20")

    def fill(self, out: np.ndarray) -> None:
        base, n = out.ctypes.data, out.nbytes
        for lo in range(0, n, _ZEROS_LEN):
            m = min(_ZEROS_LEN, n - lo)
            if self._lib.EVP_EncryptUpdate(self._ctx, base + lo, ctypes.byref(self._outl), _ZEROS, m) != 1 \
                    or self._outl.value != m:
                raise InternalError("EVP_EncryptUpdate failed for ChaCha20")

    def __del__(self) -> None:  # EVP_CIPHER_CTX_free cleanses the key schedule
        ctx, self._ctx = getattr(self, "_ctx", None), None
        if ctx:
            self._lib.EVP_CIPHER_CTX_free(ctx)


class _CryptographyKeystream:
    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)
        self._enc: Any = None

    def start(self, iv: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        self._enc = Cipher(algorithms.ChaCha20(self._key, iv), mode=None).encryptor()

    def fill(self, out: np.ndarray) -> None:
        n = out.nbytes
        for lo in range(0, n, _ZEROS_LEN):
            m = min(_ZEROS_LEN, n - lo)
            self._enc.update_into(_ZEROS[:m], out[lo:lo + m])


class Keystream:
    """ChaCha20 keystream under one key (module docstring): :meth:`start` at a 16-byte IV
    (block counter ‖ nonce), then :meth:`fill` byte buffers in order. One object per thread;
    ``prefer_libcrypto=False`` forces the ``cryptography`` implementation (tests compare the two)."""

    def __init__(self, key: bytes, *, prefer_libcrypto: bool = True) -> None:
        if len(key) != 32:
            raise PrivacyError("ChaCha20 takes a 32-byte key")
        lib = _libcrypto() if prefer_libcrypto else None
        self.releases_gil = lib is not None
        self._impl: _LibcryptoKeystream | _CryptographyKeystream = (
            _LibcryptoKeystream(lib, key) if lib is not None else _CryptographyKeystream(key))
        self._started = False

    def start(self, iv: bytes) -> None:
        if len(iv) != 16:
            raise PrivacyError("a ChaCha20 IV is 16 bytes: the block counter, then the 12-byte nonce")
        self._impl.start(iv)
        self._started = True

    def fill(self, out: np.ndarray) -> None:
        """Write the next ``out.nbytes`` keystream bytes into ``out`` (a C-contiguous writable
        array; a multiple of 64 bytes, so the position stays on a block boundary)."""
        if not self._started:
            raise PrivacyError("Keystream.start(iv) first")
        if not out.flags.c_contiguous or not out.flags.writeable or out.nbytes % 64:
            raise PrivacyError("keystream goes into a writable C-contiguous buffer of whole 64-byte blocks")
        self._impl.fill(out.reshape(-1).view(np.uint8))
