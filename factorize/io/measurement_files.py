"""Measurement records on disk: a folder of ``measurements.json`` and ``arrays.npz``, version 1.

A release's measurement records (``structured.measurement_records``: per clique,
``y = Q·m_clique + noise``, noise independent with standard deviation ``stddev``) as plain data
that any program can read — private-pgm's ``LinearMeasurement`` among them (``io.mbi_export``):

``measurements.json`` (UTF-8)::

    {"format": "factorize.measurements", "version": 1,
     "attributes": [{"name": "age", "size": 10}, ...],      # the plan's schema order
     "records": [{"clique": ["age", "sex"], "attributes": [0, 3], "rows": 9,
                  "values": "y0", "stddev": 1.0, "scale": 0.7,
                  "factors": ["F0", "F1"], "rounding_bias": 6.1e-05}, ...],
     "total": 32561.2,            # an estimate of n from the release (for a model's total)
     "noise": {...}, "form": "...", "family": "...", "plan_sha256": "...",
     "test_mode": false, ...}    # the release's public metadata

``arrays.npz`` (``numpy.savez``, numeric arrays only, read with ``allow_pickle=False``): the
record's values ``y`` (float64, length ``rows``) and the query factors, each distinct factor
stored once. A record's query is ``Q = scale · F_1 ⊗ … ⊗ F_k`` over its clique's attributes in
schema order (F_i of shape ``r_i × size_i``, ``Π r_i = rows``), applied to the clique's
marginal table flattened in C order (first attribute slowest): ``y = Q·vec(m) + e``, e of
mean 0 and covariance ``stddev²·I`` over all records together (independent Gaussian for a
continuous sampler; for the exact discrete Gaussian of a lattice release, variance ≤ stddev²
and uncorrelated — ``structured.measurement_records``), plus a deterministic bias of
at most ``rounding_bias`` per coordinate. The empty clique ``[]`` is the total (``Q = [[scale]]``).

The folder is written whole or not at all (:class:`MeasurementsOutput`): into a hidden folder
``.NAME.partial.PID.*.tmp`` beside the destination, every file synced, then renamed into place
(a kill before that leaves the hidden folder, which the next export to the same destination
removes when its process is gone). ``--overwrite`` replaces only a folder that holds exactly
these two files.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from factorize.errors import InputError

FORMAT = "factorize.measurements"
VERSION = 1
JSON_NAME = "measurements.json"
ARRAYS_NAME = "arrays.npz"


class MeasurementFileError(InputError):
    """A measurements folder that cannot be written there, or a file set that is not one."""


@dataclass(frozen=True)
class MeasurementSet:
    """A release's measurement records (``structured.measurement_records.MeasurementRecord``)
    over the attributes ``names`` of sizes ``sizes``; ``total`` an estimate of n from the
    release; ``meta`` the release's public description."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    records: tuple[Any, ...]
    total: float
    meta: dict[str, Any] = field(default_factory=dict)


def write_files(folder: str | os.PathLike[str], mset: MeasurementSet) -> None:
    """Write ``measurements.json`` and ``arrays.npz`` into an existing folder (synced)."""
    arrays: dict[str, np.ndarray] = {}
    seen: dict[bytes, str] = {}
    recs = []
    for i, r in enumerate(mset.records):
        names = []
        for F in r.factors:
            a = np.ascontiguousarray(F, dtype=np.float64)
            key = str(a.shape).encode() + a.tobytes()
            if key not in seen:
                seen[key] = f"F{len(seen)}"
                arrays[seen[key]] = a
            names.append(seen[key])
        arrays[f"y{i}"] = np.asarray(r.values, dtype=np.float64)
        recs.append({"clique": [mset.names[j] for j in r.attrs], "attributes": list(r.attrs),
                     "rows": int(r.values.size), "values": f"y{i}", "stddev": float(r.stddev),
                     "scale": float(r.scale), "factors": names,
                     "rounding_bias": float(r.rounding_bias)})
    doc = {"format": FORMAT, "version": VERSION,
           "attributes": [{"name": n, "size": int(s)} for n, s in zip(mset.names, mset.sizes, strict=True)],
           "records": recs, "total": float(mset.total), **mset.meta}
    buf = io.BytesIO()
    np.savez(buf, allow_pickle=False, **arrays)
    _write_synced(Path(folder) / ARRAYS_NAME, buf.getvalue())
    _write_synced(Path(folder) / JSON_NAME,
                  json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False).encode("utf-8"))


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "xb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def read_measurements(folder: str | os.PathLike[str]) -> MeasurementSet:
    """The measurement set of a folder written by :func:`write_files`, checked:
    :class:`MeasurementFileError` for another format or version, a missing array, or shapes,
    values or standard deviations that do not make the records of the module docstring."""
    from factorize.structured.measurement_records import MeasurementRecord

    root = Path(os.fspath(folder))
    try:
        doc = json.loads((root / JSON_NAME).read_text(encoding="utf-8"))
        with np.load(root / ARRAYS_NAME, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except (OSError, ValueError) as exc:
        raise MeasurementFileError(f"{os.fspath(folder)!r}: not a measurements folder ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise MeasurementFileError(f"{os.fspath(folder)!r}: not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise MeasurementFileError(f"{os.fspath(folder)!r}: version {doc.get('version')!r}, this "
                                   f"factorize reads version {VERSION}")
    try:
        names = tuple(str(a["name"]) for a in doc["attributes"])
        sizes = tuple(int(a["size"]) for a in doc["attributes"])
        records = tuple(_record(r, names, sizes, arrays, MeasurementRecord) for r in doc["records"])
        total = float(doc["total"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasurementFileError(f"{os.fspath(folder)!r}: malformed record ({exc})") from None
    meta = {k: v for k, v in doc.items()
            if k not in ("format", "version", "attributes", "records", "total")}
    return MeasurementSet(names, sizes, records, total, meta)


def _record(r: dict[str, Any], names: Sequence[str], sizes: Sequence[int],
            arrays: dict[str, np.ndarray], cls: Any) -> Any:
    attrs = tuple(int(j) for j in r["attributes"])
    if any(b <= a for a, b in zip(attrs, attrs[1:], strict=False)) or \
            any(not 0 <= j < len(sizes) for j in attrs):
        raise MeasurementFileError(f"clique attributes {attrs} are not increasing schema indices")
    if [names[j] for j in attrs] != list(r["clique"]):
        raise MeasurementFileError(f"clique {r['clique']} does not name attributes {attrs}")
    factors = tuple(np.asarray(arrays[n], dtype=np.float64) for n in r["factors"])
    values = np.asarray(arrays[r["values"]], dtype=np.float64)
    if len(factors) != len(attrs):
        raise MeasurementFileError(f"clique {r['clique']} has {len(factors)} query factors")
    for F, j in zip(factors, attrs, strict=True):
        if F.ndim != 2 or F.shape[1] != sizes[j]:
            raise MeasurementFileError(f"a query factor of shape {F.shape} on attribute {names[j]!r} of size {sizes[j]}")
    rows = math.prod(F.shape[0] for F in factors)
    if values.shape != (rows,) or int(r["rows"]) != rows:
        raise MeasurementFileError(f"values of shape {values.shape}, the query has {rows} rows")
    stddev, scale, bias = float(r["stddev"]), float(r["scale"]), float(r["rounding_bias"])
    if not (math.isfinite(stddev) and stddev > 0 and math.isfinite(scale) and math.isfinite(bias)
            and bias >= 0 and np.all(np.isfinite(values))
            and all(np.all(np.isfinite(F)) for F in factors)):
        raise MeasurementFileError("non-finite values, or a standard deviation that is not positive")
    return cls(attrs, scale, factors, values, stddev, bias)


class MeasurementsOutput:
    """The measurements folder of one release, written whole or not at all: opened (checked)
    before anything irreversible, :meth:`stage` d into a hidden folder beside it, then
    :meth:`commit` ted by one rename (with ``overwrite``, an existing folder is moved aside
    first and removed after)."""

    def __init__(self, path: str | os.PathLike[str], *, protected: dict[str, Any] | None = None,
                 overwrite: bool = False, option: str = "--measurements-out") -> None:
        from factorize.io.atomic import require_folder

        self.target = Path(os.fspath(path))
        shown = f"{option} {os.fspath(path)!r}"
        for role, other in (protected or {}).items():
            for p in (other if isinstance(other, (list, tuple)) else [other]):
                if p is not None and _same(self.target, Path(os.fspath(p))):
                    raise MeasurementFileError(f"{shown} is {role}: refusing to write there")
        if os.path.lexists(self.target):
            if not self.target.is_dir() or self.target.is_symlink():
                raise MeasurementFileError(f"{shown} exists and is not a folder")
            if not overwrite:
                raise MeasurementFileError(f"{shown} exists (a previous release?): refusing to replace "
                                           "it; pass --overwrite to replace it, or choose another name")
            if sorted(p.name for p in self.target.iterdir()) != sorted((ARRAYS_NAME, JSON_NAME)):
                raise MeasurementFileError(f"{shown} is a folder that does not hold measurements "
                                           f"alone ({JSON_NAME} and {ARRAYS_NAME}): not replaced, "
                                           "even with --overwrite")
        try:
            require_folder(self.target)
        except FileNotFoundError as exc:
            raise MeasurementFileError(f"{shown}: {exc}") from None
        _remove_stale(self.target)
        self.staging = self.target.parent / f".{self.target.name}.partial.{os.getpid()}.{secrets.token_hex(6)}.tmp"
        try:
            os.mkdir(self.staging, 0o700)
        except OSError as exc:
            raise MeasurementFileError(f"{shown}: cannot write there ({exc.strerror or type(exc).__name__})") from None
        self.committed = False
        self.staged = False

    def stage(self, mset: MeasurementSet) -> None:
        """Write the files into the hidden folder."""
        write_files(self.staging, mset)
        self.staged = True

    def commit(self) -> None:
        """Rename the staged folder into place (the folder above synced)."""
        if not self.staged or self.committed:
            raise MeasurementFileError("measurements committed before they were staged, or twice")
        old = None
        if os.path.lexists(self.target):
            old = self.target.parent / f".{self.target.name}.old.{os.getpid()}.{secrets.token_hex(6)}.tmp"
            os.rename(self.target, old)
        os.chmod(self.staging, 0o777 & ~_umask())
        os.rename(self.staging, self.target)
        self.committed = True
        fd = os.open(self.target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def abort(self) -> None:
        """Remove the hidden folder (nothing appears)."""
        if not self.committed:
            shutil.rmtree(self.staging, ignore_errors=True)


def _remove_stale(target: Path) -> None:
    """Remove the hidden staging folders of ``target`` left by processes that no longer exist
    (a kill between staging and commit)."""
    prefix = f".{target.name}.partial."
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return
    for p in entries:
        if not (p.name.startswith(prefix) and p.name.endswith(".tmp") and p.is_dir()):
            continue
        try:
            pid = int(p.name[len(prefix):].split(".", 1)[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except (ValueError, OSError):
            continue


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False
