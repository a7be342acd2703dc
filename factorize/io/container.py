"""One self-contained file: a JSON manifest plus named float64 arrays, each with a SHA-256.

The file is a safetensors file (a length-prefixed JSON header and raw little-endian
buffers: nothing in it can execute on load). The manifest travels in the header's
``__metadata__`` under the key ``"manifest"``; it names its ``format`` and
``schema_version`` and lists every array with its SHA-256 digest, which ``read`` checks.

Compatibility policy: a reader refuses a format it does not know and any
``schema_version`` above the one it was written for; within a version, fields are only
added, never change meaning. Writes are atomic (a temporary file in the same folder,
then ``os.replace``), so a failed write leaves no partial file.

Bounded reading: ``read`` validates the whole header before it reads or allocates any array
data — a header length of at most :data:`MAX_HEADER_BYTES`, JSON (header and manifest)
nested at most :data:`MAX_JSON_DEPTH` deep, every tensor ``F64`` with a valid shape and
contiguous ``data_offsets`` covering exactly the data section, a file size that matches,
the tensor list equal to the manifest's ``arrays``, and at most ``max_total_bytes``
(:data:`MAX_TOTAL_BYTES`) of data — so a forged or corrupt file costs a few kilobytes of
reading to refuse, whatever it declares. The arrays are then read from the same open file.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

import numpy as np
from safetensors.numpy import save_file

from factorize.errors import InputError
from factorize.io.atomic import atomic_target

#: Largest JSON header ``read`` accepts (the 8-byte length field is checked before reading).
MAX_HEADER_BYTES = 16 * 2**20
#: Default cap on the array data a file may declare (``read(..., max_total_bytes=...)``).
MAX_TOTAL_BYTES = 4 * 2**30
#: Deepest nesting of ``[``/``{`` accepted in the header and in the manifest.
MAX_JSON_DEPTH = 64
#: Most dimensions an array may have (NumPy's own limit).
MAX_NDIM = 64

_ITEMSIZE = 8  # float64, the only dtype a container holds
_TENSOR_KEYS = frozenset(("dtype", "shape", "data_offsets"))
_BIG = 2**63  # no dimension or offset of a real file reaches it


class ContainerError(InputError):
    """The file is missing, truncated, tampered with, or of an unknown format/version."""


def array_digest(a: np.ndarray) -> str:
    """SHA-256 of the array's dtype, shape and C-order bytes (hashed in place, no copy)."""
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    # 1-D view of the contiguous bytes (memoryview.cast refuses shapes such as (0, 5))
    h.update(np.ascontiguousarray(a).reshape(-1).data.cast("B"))
    return h.hexdigest()


def _digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Every array's digest, largest first, in threads (hashlib releases the GIL)."""
    names = sorted(arrays, key=lambda k: -arrays[k].size)
    with ThreadPoolExecutor(max_workers=min(4, max(1, len(names)))) as pool:
        return dict(zip(names, pool.map(lambda k: array_digest(arrays[k]), names), strict=True))


def write(path: str | Path, fmt: str, version: int, manifest: dict[str, Any],
          arrays: dict[str, np.ndarray]) -> None:
    """Write ``manifest`` and ``arrays`` to ``path`` atomically."""
    path = Path(path)
    clean = {name: np.ascontiguousarray(np.asarray(a, dtype=np.float64)) for name, a in arrays.items()}
    full = dict(manifest)
    full["format"] = fmt
    full["schema_version"] = version
    full["arrays"] = {name: {"shape": list(a.shape), "sha256": array_digest(a)} for name, a in clean.items()}
    header = {"manifest": json.dumps(full, sort_keys=True, allow_nan=False)}
    with atomic_target(path) as tmp:
        save_file(clean, tmp, metadata=header)


# ---------------------------------------------------------------------------------------
# bounded JSON


_DEPTH_CHUNK = 1 << 20


def json_depth(text: bytes, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of the JSON ``text``: the most ``[``/``{`` open at once outside strings,
    found without parsing (so without recursion), stopping once above ``limit``.

    Exact for valid JSON (a ``"`` ends a string unless an odd run of backslashes precedes
    it; brackets inside strings do not count); for invalid JSON some number (the parser
    refuses such text anyway). Vectorised over 1 MiB chunks: linear time, bounded memory.
    """
    data = np.frombuffer(text, dtype=np.uint8)
    depth = worst = 0
    in_string = 0  # parity of the real quotes seen so far
    backslashes = 0  # parity of the backslash run that ends the text seen so far
    for lo in range(0, data.size, _DEPTH_CHUNK):
        c = data[lo:lo + _DEPTH_CHUNK]
        is_bs = c == 0x5C
        if backslashes or is_bs.any():
            idx = np.arange(c.size, dtype=np.int64)
            last_other = np.maximum.accumulate(np.where(is_bs, -1, idx))
            run = idx - last_other  # backslashes ending at i (0 where c[i] is not one)
            run[last_other < 0] += backslashes  # a run continued from the previous chunk
            escaped = np.empty(c.size, dtype=bool)
            escaped[0] = backslashes & 1
            escaped[1:] = (run[:-1] & 1).astype(bool)
            quote = (c == 0x22) & ~escaped
            backslashes = int(run[-1]) & 1
        else:
            quote = c == 0x22
        quotes = np.cumsum(quote, dtype=np.int64) + in_string
        outside = (quotes & 1) == 0
        opens = ((c == 0x5B) | (c == 0x7B)) & outside
        closes = ((c == 0x5D) | (c == 0x7D)) & outside
        level = np.cumsum(opens.astype(np.int8) - closes.astype(np.int8), dtype=np.int64) + depth
        worst = max(worst, int(level.max()))
        depth, in_string = int(level[-1]), int(quotes[-1]) & 1
        if worst > limit:
            break
    return worst


def _no_constant(name: str) -> Any:
    raise ContainerError(f"non-standard JSON constant {name}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ContainerError(f"duplicate key {key[:80]!r}")
            seen.add(key)
    return out


def _loads(path: Path, text: str, what: str, invalid: str) -> Any:
    """Strict, bounded ``json.loads``: depth at most MAX_JSON_DEPTH, no NaN/Infinity, no
    duplicate keys; every failure a ContainerError (``invalid`` names a parse failure)."""
    if json_depth(text.encode("utf-8", "surrogatepass")) > MAX_JSON_DEPTH:
        raise ContainerError(f"{path}: the {what} is nested too deeply (more than "
                             f"{MAX_JSON_DEPTH} levels of arrays/objects)")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except RecursionError:  # not reachable after the depth scan; kept as a guard
        raise ContainerError(f"{path}: the {what} is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, duplicate keys, NaN, too many digits
        raise ContainerError(f"{path}: {invalid} ({type(exc).__name__}: {str(exc)[:200]})") from None


# ---------------------------------------------------------------------------------------
# bounded header


@dataclass(frozen=True)
class TensorInfo:
    """One array as the header declares it (offsets relative to the data section)."""
    name: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class Header:
    """A validated header: ``raw`` (the header bytes, padding included), ``header`` (parsed),
    ``tensors`` (in offset order), ``data_start`` (8 + header length) and ``file_size``."""
    raw: bytes
    header: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_start: int
    file_size: int


def _cap(max_total_bytes: int | None) -> int:
    cap = MAX_TOTAL_BYTES if max_total_bytes is None else max_total_bytes
    if not isinstance(cap, int) or isinstance(cap, bool) or cap < 0:
        raise ContainerError(f"max_total_bytes must be a non-negative int or None, got {max_total_bytes!r}")
    return cap


def _is_int(x: Any) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool`` (JSON integers only)."""
    return isinstance(x, int) and not isinstance(x, bool)


def _tensor(path: Path, name: str, entry: Any) -> TensorInfo:
    """One header entry, checked: exactly dtype/shape/data_offsets, F64, a shape of
    non-negative ints, ``end - begin == 8·Π shape``."""
    bad = f"{path}: not a readable factorize file (header entry {name[:80]!r}"
    if not isinstance(entry, dict) or set(entry) != _TENSOR_KEYS:
        raise ContainerError(f"{bad} must have exactly the keys dtype, shape, data_offsets)")
    if entry["dtype"] != "F64":
        dtype = entry["dtype"]
        shown = repr(dtype[:16]) if isinstance(dtype, str) else type(dtype).__name__
        raise ContainerError(f"{path}: array {name[:80]!r} has dtype {shown}, expected float64 ('F64')")
    shape = entry["shape"]
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM
            and all(_is_int(s) and 0 <= s < _BIG for s in shape)):
        raise ContainerError(f"{bad}: the shape must be a list of at most {MAX_NDIM} non-negative "
                             f"integers below 2**63)")
    offsets = entry["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)
            and 0 <= offsets[0] <= offsets[1] < _BIG):
        raise ContainerError(f"{bad}: data_offsets must be two integers 0 <= begin <= end < 2**63)")
    begin, end = offsets
    nbytes = _ITEMSIZE * math.prod(shape)
    if end - begin != nbytes:
        raise ContainerError(f"{bad}: data_offsets [{begin}, {end}] span {end - begin} bytes, "
                             f"its shape needs {nbytes})")
    return TensorInfo(name, tuple(shape), begin, end)


def _read_header(fh: io.BufferedIOBase, path: Path, cap: int) -> Header:
    """Read and validate the header from the open file ``fh`` (positioned at 0); reads at
    most 8 + MAX_HEADER_BYTES bytes and no array data."""
    if isinstance(fh, io.BytesIO):  # the file's bytes, read once by the caller (``data=``)
        with fh.getbuffer() as view:
            size = view.nbytes
    else:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ContainerError(f"{path}: not a regular file")
        size = st.st_size
    prefix = fh.read(8)
    if len(prefix) != 8:
        raise ContainerError(f"{path}: not a readable factorize file (shorter than the 8-byte "
                             f"header length; truncated)")
    n = int.from_bytes(prefix, "little")
    if n > MAX_HEADER_BYTES:
        raise ContainerError(f"{path}: corrupt header length: {n} bytes, more than the limit of "
                             f"{MAX_HEADER_BYTES}")
    if n < 2 or 8 + n > size:
        raise ContainerError(f"{path}: corrupt header length: {n} bytes in a file of {size} "
                             f"bytes (truncated or not a factorize file)")
    raw = fh.read(n)
    if len(raw) != n:
        raise ContainerError(f"{path}: not a readable factorize file (the header is truncated)")
    if raw[:1] != b"{":
        raise ContainerError(f"{path}: not a readable factorize file (the header is not a JSON object)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ContainerError(f"{path}: not a readable factorize file (the header is not UTF-8)") from None
    header = _loads(path, text, "header", "not a readable factorize file (the header is not valid JSON)")
    if not isinstance(header, dict):  # pragma: no cover - excluded by the "{" check
        raise ContainerError(f"{path}: not a readable factorize file (the header is not a JSON object)")
    meta = header.get("__metadata__")
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise ContainerError(f"{path}: not a readable factorize file (__metadata__ must map "
                             f"names to strings)")
    tensors = [_tensor(path, name, entry) for name, entry in header.items() if name != "__metadata__"]
    total = sum(t.end - t.begin for t in tensors)
    if total > cap:
        raise ContainerError(f"{path}: the arrays declare {total} bytes of data, more than the limit "
                             f"of {cap} bytes (max_total_bytes); refused before reading any of it")
    tensors.sort(key=lambda t: (t.begin, t.end))
    pos = 0
    for t in tensors:
        if t.begin != pos:
            how = "overlaps the previous array" if t.begin < pos else f"leaves a gap of {t.begin - pos} bytes"
            raise ContainerError(f"{path}: not a readable factorize file (array {t.name[:80]!r} at "
                                 f"data_offsets [{t.begin}, {t.end}] {how})")
        pos = t.end
    if size != 8 + n + pos:
        raise ContainerError(f"{path}: the file has {size} bytes, its header describes "
                             f"{8 + n + pos} (truncated or data appended)")
    return Header(raw=raw, header=header, tensors=tuple(tensors), data_start=8 + n, file_size=size)


def read_header(path: str | Path, *, max_total_bytes: int | None = None,
                data: bytes | None = None) -> Header:
    """The validated header of a container (see the module docstring); reads no array data.
    Raises :class:`ContainerError` for any malformed file. ``data``: the file's bytes, already
    read (``path`` then only names them in messages; nothing is opened)."""
    path = Path(path)
    cap = _cap(max_total_bytes)
    return _guard(path, lambda: _open_and(path, lambda fh: _read_header(fh, path, cap), data))


def parse_manifest(path: str | Path, header: dict[str, Any]) -> Any:
    """The manifest JSON stored in ``header["__metadata__"]["manifest"]``, parsed with the
    same bounds as the header (any JSON value; callers check it is an object)."""
    path = Path(path)
    meta = header.get("__metadata__")
    text = meta.get("manifest") if isinstance(meta, dict) else None
    if not isinstance(text, str):
        raise ContainerError(f"{path}: the manifest is missing or not JSON ('manifest' is not in "
                             f"the header's __metadata__)")
    return _loads(path, text, "manifest", "the manifest is missing or not JSON")


# ---------------------------------------------------------------------------------------
# read


_T = TypeVar("_T")


def _open_and(path: Path, fn: Callable[[io.BufferedIOBase], _T], data: bytes | None = None) -> _T:
    """``fn`` applied to the open file ``path`` (or to ``data``, the file's bytes, when given)."""
    if data is not None:
        return fn(io.BytesIO(data))
    if not path.is_file():
        raise ContainerError(f"{path}: no such file")
    with open(path, "rb") as fh:
        return fn(fh)


def _guard(path: Path, fn: Callable[[], _T]) -> _T:
    """``fn()``, any failure but ContainerError / MemoryError / KeyboardInterrupt turned into
    a ContainerError."""
    try:
        return fn()
    except ContainerError:
        raise
    except (MemoryError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 — OSError, ValueError, …: a malformed file
        raise ContainerError(f"{path}: not a readable factorize file ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None


def _check_manifest(path: Path, manifest: Any, head: Header, fmt: str, max_version: int) -> dict[str, Any]:
    """Format, version and the array listing (names, shapes) against the header."""
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ContainerError(f"{path}: expected a {fmt!r} file, found format "
                             f"{found if not isinstance(found, str) else found[:80]!r}")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= max_version:
        shown = repr(version) if _is_int(version) and abs(version) < 10**12 else repr(version)[:40]
        raise ContainerError(f"{path}: schema_version {shown} is not one this reader knows "
                             f"(1..{max_version}); upgrade factorize to read it")
    listed = manifest.get("arrays")
    declared = {t.name: t for t in head.tensors}
    if not isinstance(listed, dict) or set(listed) != set(declared):
        raise ContainerError(f"{path}: the manifest's array list does not match the file's arrays")
    for name, meta in listed.items():
        shape = list(declared[name].shape)
        if not isinstance(meta, dict) or meta.get("shape") != shape:
            said = meta.get("shape") if isinstance(meta, dict) else meta
            raise ContainerError(f"{path}: array {name!r} has shape {shape}, "
                                 f"the manifest says {str(said)[:200]}")
    return manifest


def _read_arrays(fh: io.BufferedIOBase, path: Path, head: Header) -> dict[str, np.ndarray]:
    """The validated byte ranges as float64 C-contiguous arrays, read from the same file."""
    arrays: dict[str, np.ndarray] = {}
    for t in head.tensors:
        a = np.empty(t.shape, dtype=np.float64)
        want = t.end - t.begin
        if want:
            fh.seek(head.data_start + t.begin)
            view = a.data.cast("B")
            got = 0
            while got < want:
                k = fh.readinto(view[got:])
                if not k:
                    raise ContainerError(f"{path}: the file ended inside array {t.name!r} "
                                         f"(truncated while being read)")
                got += k
            if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
                a.byteswap(inplace=True)
        arrays[t.name] = a
    return arrays


def read(path: str | Path, fmt: str, max_version: int, *,
         max_total_bytes: int | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and check a container: format, version, array list and every digest.

    The header, the manifest and the array listing are validated before any array data is
    read (see the module docstring); ``max_total_bytes`` caps the declared data (default
    :data:`MAX_TOTAL_BYTES`). Raises :class:`ContainerError` for any missing or malformed
    file (``MemoryError`` and ``KeyboardInterrupt`` propagate).
    """
    manifest, arrays, _ = read_with_header(path, fmt, max_version, max_total_bytes=max_total_bytes)
    return manifest, arrays


def read_with_header(path: str | Path, fmt: str, max_version: int, *,
                     max_total_bytes: int | None = None, data: bytes | None = None
                     ) -> tuple[dict[str, Any], dict[str, np.ndarray], Header]:
    """:func:`read`, also returning the validated :class:`Header` the arrays were read with
    (one open file, one read: checks on the header bytes see the bytes that were loaded).
    ``data``: the file's bytes, already read (``path`` only names them; nothing is opened)."""
    path = Path(path)
    cap = _cap(max_total_bytes)

    def run(fh: io.BufferedIOBase) -> tuple[dict[str, Any], dict[str, np.ndarray], Header]:
        head = _read_header(fh, path, cap)
        manifest = _check_manifest(path, parse_manifest(path, head.header), head, fmt, max_version)
        arrays = _read_arrays(fh, path, head)
        digests = _digests(arrays)
        for name, meta in manifest["arrays"].items():
            if meta.get("sha256") != digests[name]:
                raise ContainerError(f"{path}: array {name!r} fails its SHA-256 check (tampered or corrupt)")
        return manifest, arrays, head

    return _guard(path, lambda: _open_and(path, run, data))
