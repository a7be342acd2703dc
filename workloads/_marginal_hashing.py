"""Fingerprints of marginal families without building their Kronecker blocks.

A family is the ``VStackWorkload`` of blocks ``KronWorkload([[[w_S]]]?, F_0, ..., F_{d-1})``
(``F_j = I_{n_j}`` for ``j ∈ S``, else ``1ᵀ_{n_j}``; the 1×1 factor only when ``w_S ≠ 1``).
Following :func:`_hashing.hash_combine` and the flattening rules of the structured
workloads, block ``S`` hashes as

    ``hash_combine("kron", (Π_{j∈S} n_j, N), [fp(w_S)?, fp(F_0), ..., fp(F_{d-1})])``

(a product of one factor hashes as that factor), and the family as
``hash_combine("vstack", (k, N), [block digests])`` (one block hashes as that block). The
part digests are fed as one run of bytes, each 64 hex characters and ``b"\\x00"``: the
all-totals row with the identity digests of ``S`` spliced in, so a block costs ``65·d``
bytes of SHA-256 and ``O(|S|)`` Python steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from . import _hashing
from .base import DEFAULT_MAX_DENSE_ENTRIES
from .builders import total
from .explicit import DenseWorkload

__all__ = ["block_fingerprints", "stack_fingerprint"]

_WIDTH = 65  # a hex digest and its b"\x00" separator
_CHUNK = 4096  # block digests joined per update of the stack hash


def _part(digest: str) -> bytes:
    return digest.encode("ascii") + b"\x00"


def block_fingerprints(sizes: Sequence[int], subsets: Sequence[tuple[int, ...]],
                       weights: Sequence[float], offsets: Sequence[int], n: int) -> Iterator[str]:
    """The digest of every block, in order (block ``b`` has ``offsets[b+1] - offsets[b]`` rows)."""
    d = len(sizes)
    total_fp = {s: _part(total(s).fingerprint()) for s in set(sizes)}
    totals = memoryview(b"".join(total_fp[s] for s in sizes))
    ident_fp: dict[int, bytes] = {}  # only sizes some subset uses (an identity can be costly)
    idents = [b""] * d  # filled on first use

    def ident(j: int) -> bytes:
        s = sizes[j]
        if s not in ident_fp:
            ident_fp[s] = _part(_hashing.identity_fingerprint(s, DEFAULT_MAX_DENSE_ENTRIES))
        idents[j] = ident_fp[s]
        return idents[j]

    weight_fp: dict[float, bytes] = {}
    headers: dict[tuple[int, int], Any] = {}
    for b, (S, w) in enumerate(zip(subsets, weights, strict=True)):
        weighted = w != 1.0
        if d == 1 and not weighted:  # KronWorkload([F_0]) hashes as F_0
            yield (ident(0) if S else bytes(totals))[:-1].decode("ascii")
            continue
        rows = offsets[b + 1] - offsets[b]
        count = d + 1 if weighted else d
        base = headers.get((rows, count))
        if base is None:
            base = headers[(rows, count)] = _hashing.combine_hasher("kron", (rows, n), count)
        h = base.copy()
        if weighted:
            wfp = weight_fp.get(w)
            if wfp is None:
                wfp = weight_fp[w] = _part(DenseWorkload([[w]]).fingerprint())
            h.update(wfp)
        pos = 0
        for j in S:
            h.update(totals[pos * _WIDTH:j * _WIDTH])
            h.update(idents[j] or ident(j))
            pos = j + 1
        h.update(totals[pos * _WIDTH:])
        yield h.hexdigest()


def stack_fingerprint(shape: tuple[int, int], count: int, digests: Iterable[str]) -> str:
    """``VStackWorkload`` digest of ``count`` flat blocks with these ``digests``."""
    it = iter(digests)
    if count == 1:
        return next(it)
    h = _hashing.combine_hasher("vstack", shape, count)
    chunk: list[str] = []
    for fp in it:
        chunk.append(fp)
        if len(chunk) >= _CHUNK:
            h.update(("\x00".join(chunk) + "\x00").encode("ascii"))
            chunk.clear()
    if chunk:
        h.update(("\x00".join(chunk) + "\x00").encode("ascii"))
    return h.hexdigest()
