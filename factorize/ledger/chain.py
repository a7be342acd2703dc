"""The hash chain over the ledger's log of entries: canonical bodies, entry hashes, and the
walk that checks a stored log link by link (no database access: rows in, entries out).

An entry is ``(seq, kind, body)``: ``seq`` = 1, 2, … in order, ``kind`` one of ``genesis``,
``dataset``, ``charge``, ``release`` (their meaning: :mod:`factorize.ledger.replay`), ``body``
the canonical JSON of a dict (sorted keys, no spaces, ASCII, no NaN). Entry i stores
``prev_hash`` = ``hash_{i-1}`` and ::

    hash_i = SHA-256(hash_{i-1} ‖ "\\n" ‖ i ‖ "\\n" ‖ kind ‖ "\\n" ‖ body)      (hash_0 = 64 zeros)

so changing, deleting, inserting or reordering any entry changes every later hash. The chain
has no secret key: it detects accidents and naive edits, not someone who recomputes it (the
anchor file, :mod:`factorize.ledger.anchor`, adds rollback and deletion detection).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from .errors import LedgerTampered

#: The format named by every ledger's genesis entry.
FORMAT = "factorize-ledger/1"
#: ``hash_0``: what the first entry links to.
ZERO_HASH = "0" * 64


def canonical(obj: Any) -> str:
    """The canonical JSON text of an entry's body (what is hashed and stored)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def entry_hash(prev: str, seq: int, kind: str, body: str) -> str:
    """``hash_seq`` of the entry ``(seq, kind, body)`` following an entry with hash ``prev``."""
    return hashlib.sha256(f"{prev}\n{seq}\n{kind}\n{body}".encode()).hexdigest()


def now() -> str:
    """The timestamp entries and anchors carry (UTC, ISO 8601, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def walk(rows: Iterable[tuple[Any, Any, Any, Any, Any]],
         where: str) -> Iterator[tuple[int, str, Any, str]]:
    """Check stored entries ``(seq, kind, body, prev_hash, hash)``, in ``seq`` order, link by
    link, yielding each as ``(seq, kind, parsed body, hash)`` once it is checked (so a caller
    replaying them sees the first inconsistency first). :class:`LedgerTampered` (``where``:
    the ledger, for the message) on a gap in the numbering, a broken link, a hash that does
    not match, or a body that is not canonical JSON."""
    prev = ZERO_HASH
    for i, (seq, kind, body, prev_hash, h) in enumerate(rows, 1):
        at = f"{where}: entry {i}"
        if seq != i:
            raise LedgerTampered(f"{at}: sequence number {seq} (entries deleted or "
                                 "inserted)")
        if not isinstance(body, str) or not isinstance(kind, str):
            raise LedgerTampered(f"{at}: malformed")
        if prev_hash != prev:
            raise LedgerTampered(f"{at}: does not link to the previous entry (entries "
                                 "deleted, inserted or reordered)")
        if h != entry_hash(prev, seq, kind, body):
            raise LedgerTampered(f"{at} ({kind}): content does not match its hash "
                                 "(modified)")
        try:
            obj = json.loads(body)
        except ValueError:
            raise LedgerTampered(f"{at}: body is not JSON") from None
        if canonical(obj) != body:
            raise LedgerTampered(f"{at}: body is not in canonical form")
        yield seq, kind, obj, h
        prev = h
