"""The anchor file ``L.db.head``: JSON ``{format, ledger_id, count, head, written}`` naming
the number of committed entries and the hash of the last one, rewritten (atomically, fsync'd)
after every commit. It is what lets a rollback or a deletion of the database be detected: the
hash chain alone (:mod:`factorize.ledger.chain`) only shows that the entries present are
consistent with each other.

**The anchor rule** (:func:`check`). With ``n`` entries in the database and an anchor
recording ``c`` entries with head hash ``H`` (a missing anchor counts as ``c = 0``), the ledger
is accepted iff the chain is valid and either ``c = n`` and ``H = hash_n`` (current) or
``c = n − 1`` and ``H = hash_c`` (the anchor lags by exactly the last entry: a crash between
the SQLite commit and the anchor write — or during ``Ledger.create``). A lagging anchor is
rewritten by the next exclusive access: ``Ledger.open``, and every change *before* it adds its
entry (if that write fails, the change is rolled back). Because the anchor is written under the
same lock as the commit it follows, and readers read it under a shared lock, no honest history
ever lags by more than one entry, even when the anchor cannot be written at all. Everything
else is refused as tampering: fewer entries than anchored (rows deleted, or the database
replaced by an older copy), an anchor more than one entry behind, a different history or a
different ledger id, a database missing while its anchor is present, an anchor missing for a
ledger with more than its genesis entry.

**What it cannot detect.** There is no secret key: someone who can write both files can
restore an older database *together with* its older anchor, or delete both. Within the
one-entry lag window (after a crash, before the next open), the unanchored last entry can be
deleted unnoticed (it may be a charge: deleting it gives that budget back).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .chain import now
from .errors import LedgerTampered
from .storage import fsync_dir

#: The format named by every anchor file.
HEAD_FORMAT = "factorize-ledger-head/1"


def read(path: Path) -> dict[str, Any]:
    """The anchor at ``path`` as a dict (:class:`LedgerTampered` if unreadable or no object)."""
    try:
        a = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LedgerTampered(f"{path}: unreadable anchor ({exc})") from None
    if not isinstance(a, dict):
        raise LedgerTampered(f"{path}: malformed anchor")
    return a


def check(db_path: Path, anchor_path: Path, ledger_id: str, hashes: Sequence[str]) -> str:
    """The anchor rule of the module docstring for a database whose verified chain has the
    entry hashes ``hashes`` (``hashes[i-1]`` = hash of entry i): "current", "behind by one"
    (or "missing (new ledger)" for a genesis-only ledger), or :class:`LedgerTampered`."""
    n = len(hashes)
    if not anchor_path.exists():
        if n == 1:
            return "missing (new ledger)"
        raise LedgerTampered(f"{db_path}: the anchor file {anchor_path.name} is "
                             f"missing but the ledger has {n} entries (deleted?)")
    a = read(anchor_path)
    try:
        c, head, lid = int(a["count"]), str(a["head"]), str(a["ledger_id"])
    except (KeyError, TypeError, ValueError):
        raise LedgerTampered(f"{anchor_path}: malformed anchor") from None
    if a.get("format") != HEAD_FORMAT:
        raise LedgerTampered(f"{anchor_path}: not a {HEAD_FORMAT} anchor")
    if lid != ledger_id:
        raise LedgerTampered(f"{db_path}: the database is ledger {ledger_id}, its "
                             f"anchor belongs to ledger {lid}: one of them was replaced")
    if c > n:
        raise LedgerTampered(f"{db_path}: the database has {n} entries but the anchor "
                             f"records {c}: entries were deleted or the database was "
                             "replaced by an older copy")
    if c < n - 1:
        raise LedgerTampered(f"{db_path}: the anchor records {c} entries, the database has "
                             f"{n}: the anchor is more than one commit behind (replaced by "
                             "an older copy?)")
    if c >= 1 and hashes[c - 1] != head:
        raise LedgerTampered(f"{db_path}: the database's history differs from the "
                             f"anchored one at entry {c} (rewritten or replaced)")
    if c == 0:
        raise LedgerTampered(f"{anchor_path}: anchor records no entries")
    return "current" if c == n else "behind by one (crash after a commit)"


def write(anchor_path: Path, ledger_id: str, count: int, head: str) -> None:
    """Replace the anchor atomically and durably (file and folder fsync'd)."""
    from factorize.io.atomic import atomic_target

    text = json.dumps({"format": HEAD_FORMAT, "ledger_id": ledger_id, "count": count,
                       "head": head, "written": now()}, indent=1) + "\n"
    with atomic_target(anchor_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    fsync_dir(anchor_path.parent)
