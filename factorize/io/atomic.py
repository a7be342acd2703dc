"""Atomic file output: a file appears whole or not at all, and no copy lingers elsewhere.

:class:`AtomicOutput` is opened *before* anything irreversible happens (so a folder that
cannot be written is found before a privacy budget is charged), written once, then
committed. Its data go to an unnamed file (Linux ``O_TMPFILE``) in the destination folder:
a process killed while writing leaves nothing behind. On commit the file is given a hidden
name in that folder and renamed over the destination (``os.replace``, atomic within one
folder; the folder is then synced so the rename survives a crash). The hidden name is a
link to the unnamed file itself (:func:`link_unnamed`: ``linkat`` with ``AT_EMPTY_PATH``, as
``open(2)`` describes for ``O_TMPFILE``, else through ``/proc/self/fd``), so publishing costs
no copy of the data; only where the kernel refuses both links is the file copied in the
kernel (``copy_file_range``) under the hidden name. A kill in that instant — or a file system
without ``O_TMPFILE``, where the data are written under the hidden name from the start — can
leave a hidden ``.NAME.partial.PID.*.tmp`` file, which the next output to the same
destination removes (:func:`remove_stale`) when its process is gone. Files are created with
mode 0600 while partial and get the usual ``0666 & ~umask`` when committed.
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


#: ``linkat``'s flag: link the file ``olddirfd`` itself refers to (``<fcntl.h>``, Linux).
AT_EMPTY_PATH = 0x1000
AT_FDCWD = -100


def link_unnamed(fd: int, dest: Path) -> None:
    """Give the open unnamed file ``fd`` (``O_TMPFILE``, not ``O_EXCL``) the new name ``dest``
    in its file system: ``linkat(fd, "", AT_FDCWD, dest, AT_EMPTY_PATH)`` (allowed to the
    opener since Linux 6.10, and to a process with ``CAP_DAC_READ_SEARCH`` before), else
    ``linkat`` of ``/proc/self/fd/FD`` with ``AT_SYMLINK_FOLLOW`` (``open(2)``, ``O_TMPFILE``).
    ``OSError`` when the kernel refuses both (some refuse the second with ``EXDEV``)."""
    try:
        _linkat_empty_path(fd, dest)
        return
    except OSError:
        pass
    os.link(f"/proc/self/fd/{fd}", dest, follow_symlinks=True)


def _linkat_empty_path(fd: int, dest: Path) -> None:
    import ctypes

    try:
        linkat = ctypes.CDLL(None, use_errno=True).linkat
    except (OSError, AttributeError) as exc:  # no C library symbol here: not Linux
        raise OSError(errno.ENOSYS, "linkat is not available") from exc
    linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    linkat.restype = ctypes.c_int
    if linkat(fd, b"", AT_FDCWD, os.fsencode(dest), AT_EMPTY_PATH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(dest))


def copy_file(src: int, dst: int) -> None:
    """Copy the whole file ``src`` (from offset 0) to ``dst`` at its current offset, in the
    kernel where it can (``os.copy_file_range``), else through 1 MiB buffers."""
    offset = 0
    size = os.fstat(src).st_size
    copy_range = getattr(os, "copy_file_range", None)
    if copy_range is not None:
        try:
            while offset < size:
                n = copy_range(src, dst, size - offset, offset)
                if n == 0:
                    break
                offset += n
        except OSError as exc:
            if offset or exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
    while True:
        block = os.pread(src, 1 << 20, offset)
        if not block:
            return
        os.write(dst, block)
        offset += len(block)


def sync_folder(target: Path) -> None:
    """``fsync`` ``target``'s folder, so that a rename into it is durable (best effort: a
    file system that cannot sync a folder is left as it is)."""
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


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
                link_unnamed(self._fd, hidden)
            except OSError:
                # no link of an unnamed file here: copy it under the hidden name instead
                self._copy_to(self._fd, hidden)
            self._named = hidden
        os.close(self._fd)
        self._fd = None
        os.replace(self._named, self.target)
        self._named = None
        self.committed = True
        sync_folder(self.target)

    def _copy_to(self, fd: int, hidden: Path) -> None:
        """Copy the open unnamed file ``fd`` to the new file ``hidden`` (when it cannot be linked)."""
        out = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            copy_file(fd, out)
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
        sync_folder(target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
