"""Atomic file output: a file appears whole or not at all, and no copy lingers elsewhere.

:class:`AtomicOutput` is opened *before* anything irreversible happens (so a folder that
cannot be written is found before a privacy budget is charged), written once, then
committed. Its data go to an unnamed file (Linux ``O_TMPFILE``) in the destination folder:
a process killed while writing leaves nothing behind. On commit the file is linked (or, where
the kernel refuses to link an unnamed file, copied) under a hidden name and renamed over the
destination (``os.replace``, atomic within one folder); a kill in that instant — or a file system without ``O_TMPFILE``, where the data are written
under the hidden name from the start — can leave a hidden ``.NAME.partial.PID.*.tmp`` file,
which the next output to the same destination removes (:func:`remove_stale`) when its
process is gone. Files are created with mode 0600 while partial and get the usual
``0666 & ~umask`` when committed.
"""

from __future__ import annotations

import errno
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from factorize.errors import EnvironmentProblem, InternalError

_PARTIAL = ".partial."


def hidden_name(target: Path) -> Path:
    return target.parent / f".{target.name}{_PARTIAL}{os.getpid()}.{secrets.token_hex(6)}.tmp"


def remove_stale(target: str | os.PathLike[str]) -> list[Path]:
    """Remove hidden partial files of ``target`` left by processes that no longer exist;
    returns what was removed."""
    target = Path(os.fspath(target))
    removed: list[Path] = []
    prefix = f".{target.name}{_PARTIAL}"
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in entries:
        name = p.name
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        try:
            pid = int(name[len(prefix):].split(".", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and _alive(pid):
            continue
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MissingFolderError(EnvironmentProblem, FileNotFoundError):
    """An output's folder does not exist: factorize never creates folders for its outputs (a
    mistyped ``--out`` must not scatter files)."""


def require_folder(target: Path) -> None:
    """:class:`MissingFolderError` unless ``target``'s folder exists."""
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise MissingFolderError(f"the folder {str(parent)!r} for {target.name!r} does not exist; "
                                 "create it first (factorize does not create folders)")


class AtomicOutput:
    """One output file, written whole or not at all (module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.target = Path(os.fspath(path))
        require_folder(self.target)
        remove_stale(self.target)
        self._named: Path | None = None
        self._fd: int | None = None
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        tmpfile = getattr(os, "O_TMPFILE", None)
        if tmpfile is not None:
            try:
                self._fd = os.open(self.target.parent, flags | tmpfile, 0o600)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                    raise
                self._fd = None
        if self._fd is None:
            self._named = hidden_name(self.target)
            self._fd = os.open(self._named, flags | os.O_CREAT | os.O_EXCL, 0o600)
        self.committed = False

    def write(self, writer: Callable[[IO[bytes]], None]) -> None:
        """``writer(file)`` writes the content to a binary file object (flushed and synced)."""
        if self._fd is None:
            raise InternalError("the output is closed (a write or commit after commit or abort)")
        fh = os.fdopen(os.dup(self._fd), "wb")
        try:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fh.close()

    def commit(self) -> None:
        """Move the written file into place (hidden link, then ``os.replace``)."""
        if self._fd is None:
            raise InternalError("the output is closed (a write or commit after commit or abort)")
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(self._fd, 0o666 & ~umask)
        if self._named is None:
            hidden = hidden_name(self.target)
            try:
                os.link(f"/proc/self/fd/{self._fd}", hidden, follow_symlinks=True)
            except OSError:
                # no linkat of an unnamed file here: copy it under the hidden name instead
                self._copy_to(self._fd, hidden)
            self._named = hidden
        os.close(self._fd)
        self._fd = None
        os.replace(self._named, self.target)
        self._named = None
        self.committed = True

    def _copy_to(self, fd: int, hidden: Path) -> None:
        """Copy the open unnamed file ``fd`` to the new file ``hidden`` (when it cannot be linked)."""
        out = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            offset = 0
            while True:
                block = os.pread(fd, 1 << 20, offset)
                if not block:
                    break
                os.write(out, block)
                offset += len(block)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(out, 0o666 & ~umask)
            os.fsync(out)
        except BaseException:
            os.close(out)
            hidden.unlink(missing_ok=True)
            raise
        os.close(out)

    def abort(self) -> None:
        """Discard the output (nothing appears at the destination)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._named is not None:
            with suppress(OSError):
                self._named.unlink()
            self._named = None

    def __enter__(self) -> AtomicOutput:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if not self.committed:
            self.abort()


@contextmanager
def atomic_target(path: str | os.PathLike[str]) -> Iterator[str]:
    """Yield a temporary *path* beside ``path`` (hidden, mode 0600); on success it replaces
    ``path``, on any exception it is removed. For writers that need a path (safetensors);
    prefer :class:`AtomicOutput`."""
    target = Path(os.fspath(path))
    require_folder(target)
    remove_stale(target)
    tmp = hidden_name(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    try:
        yield str(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
