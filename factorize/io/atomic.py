"""Atomic file replacement: a file appears whole or not at all."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def atomic_target(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``.

    The temporary file gets the permissions a normal ``open`` would (0666 less the umask)
    and is moved into place with ``os.replace`` (atomic on POSIX within one folder). On any
    exception it is removed, so a failed write leaves neither a partial nor a stale file.
    """
    target = Path(os.fspath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
