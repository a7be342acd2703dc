"""One self-contained file: a JSON manifest plus named float64 arrays, each with a SHA-256.

The file is a safetensors file (a length-prefixed JSON header and raw little-endian
buffers: nothing in it can execute on load). The manifest travels in the header's
``__metadata__`` under the key ``"manifest"``; it names its ``format`` and
``schema_version`` and lists every array with its SHA-256 digest, which ``read`` checks.

Compatibility policy: a reader refuses a format it does not know and any
``schema_version`` above the one it was written for; within a version, fields are only
added, never change meaning. Writes are atomic (a temporary file in the same folder,
then ``os.replace``), so a failed write leaves no partial file.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from factorize.io.atomic import atomic_target


class ContainerError(ValueError):
    """The file is missing, truncated, tampered with, or of an unknown format/version."""


def array_digest(a: np.ndarray) -> str:
    """SHA-256 of the array's dtype, shape and C-order bytes (hashed in place, no copy)."""
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def _digests(arrays: dict[str, np.ndarray]) -> dict[str, str]:
    """Every array's digest, largest first, in threads (hashlib releases the GIL)."""
    names = sorted(arrays, key=lambda k: -arrays[k].size)
    with ThreadPoolExecutor(max_workers=min(4, max(1, len(names)))) as pool:
        return dict(zip(names, pool.map(lambda k: array_digest(arrays[k]), names)))


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


def read(path: str | Path, fmt: str, max_version: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read and check a container: format, version, array list and every digest."""
    path = Path(path)
    if not path.is_file():
        raise ContainerError(f"{path}: no such file")
    try:
        arrays = load_file(str(path))
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or n > 100_000_000:
                raise ContainerError(f"{path}: corrupt header length")
            header = json.loads(fh.read(n))
    except (SafetensorError, ValueError, OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        if isinstance(exc, ContainerError):
            raise
        raise ContainerError(f"{path}: not a readable factorize file ({type(exc).__name__}: {exc})") from None
    try:
        manifest = json.loads(header["__metadata__"]["manifest"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ContainerError(f"{path}: the manifest is missing or not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        raise ContainerError(f"{path}: expected a {fmt!r} file, found format "
                             f"{manifest.get('format') if isinstance(manifest, dict) else None!r}")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= max_version:
        raise ContainerError(f"{path}: schema_version {version!r} is not one this reader knows "
                             f"(1..{max_version}); upgrade factorize to read it")
    listed = manifest.get("arrays")
    if not isinstance(listed, dict) or set(listed) != set(arrays):
        raise ContainerError(f"{path}: the manifest's array list does not match the file's arrays")
    for name, meta in listed.items():
        a = arrays[name]
        if not isinstance(meta, dict) or meta.get("shape") != list(a.shape):
            raise ContainerError(f"{path}: array {name!r} has shape {list(a.shape)}, "
                                 f"the manifest says {meta.get('shape') if isinstance(meta, dict) else meta}")
        if a.dtype != np.float64:
            raise ContainerError(f"{path}: array {name!r} has dtype {a.dtype}, expected float64")
    digests = _digests(arrays)
    for name, meta in listed.items():
        if meta.get("sha256") != digests[name]:
            raise ContainerError(f"{path}: array {name!r} fails its SHA-256 check (tampered or corrupt)")
    return manifest, arrays
