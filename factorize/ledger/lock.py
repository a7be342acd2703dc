"""The ledger's lock: ``flock`` on the empty file ``L.db.lock`` (created on first use, never
removed), exclusive for every change and for opening, shared for reading.

Every change holds the exclusive lock from its verification through the SQLite commit to the
anchor write, so two processes charging at once are serialised and the anchor never lags by
more than the last commit; readers hold the shared lock so they never see a database and an
anchor from different commits. ``flock`` needs a local file system (not NFS) and a folder
where the lock file can be created (reading needs it too). A lock held by another process for
:data:`LOCK_TIMEOUT_S` seconds is a :class:`~factorize.ledger.errors.LedgerError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import LedgerError

LOCK_TIMEOUT_S = 60.0


@contextlib.contextmanager
def locked(lock_path: Path, *, exclusive: bool, ledger: Path) -> Iterator[None]:
    """Hold ``lock_path`` (exclusive or shared) for the ``with`` block; ``ledger`` names the
    ledger in the timeout message."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LedgerError(f"{ledger}: the ledger stayed locked by another "
                                      f"process for {LOCK_TIMEOUT_S:g} s") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # releases the lock
