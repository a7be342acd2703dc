"""In-process histograms with NumPy: from a records array, or from a saved histogram ``.npy``.

:func:`histogram_numpy` is the reference the DuckDB engine is tested against; it uses the
cell indexing of :meth:`workloads.Domain.index` (row-major, attribute 0 slowest).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from workloads.domain import Domain
from workloads.errors import DomainError

from ._common import check_counts, check_domain, format_problems
from .errors import DataError

__all__ = ["histogram_from_npy", "histogram_numpy"]

_INT64_MAX = int(np.iinfo(np.int64).max)


def _entries_error(where: str, count: int, what: str) -> DataError:
    """The refusal of ``count`` histogram entries that are ``what``: the count (data-dependent)
    only in the error's ``holder_message``."""
    counted = "1 entry is" if count == 1 else f"{count} entries are"
    return DataError(f"{where}: one or more entries are {what}", holder_message=f"{where}: {counted} {what}")


def _column_problems(col: np.ndarray, size: int) -> tuple[int, int, int]:
    """``(missing, non_integer, out_of_range)`` counts of one column; each value counted once."""
    if col.dtype.kind == "f":
        missing = np.isnan(col)
        finite = np.isfinite(col)
        nonint = ~missing & (~finite | (col != np.round(col)))
        ok = finite & ~nonint
        with np.errstate(invalid="ignore"):
            oor = ok & ((col < 0) | (col >= size))
        return int(missing.sum()), int(nonint.sum()), int(oor.sum())
    if col.size and col.min() >= 0 and col.max() < size:  # fast path: no temporaries
        return 0, 0, 0
    return 0, 0, int(np.count_nonzero((col < 0) | (col >= size)))


def histogram_numpy(records: Any, domain: Domain) -> np.ndarray:
    """Histogram (int64, length ``domain.size``) of ``records``, an ``(n, d)`` array.

    Column ``j`` holds attribute ``domain.attributes[j]``; values must be integers in
    ``0 .. sizes[j]-1`` (integer, boolean, or integral float dtype; NaN is missing).
    Raises :class:`DataError` (the columns and kinds of problem; no values, the counts only in
    its ``holder_message``) on invalid records or when there are no records.
    """
    domain = check_domain(domain)
    arr = np.asarray(records)
    d = len(domain)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise DataError(
            f"records must be a 2-D array (n records x {d} attributes {list(domain.attributes)}), "
            f"got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise DataError("there are no records: refusing to build an empty histogram")
    kind = arr.dtype.kind
    if kind == "b":
        arr = arr.astype(np.int64)
    elif kind not in "iuf":
        raise DataError(f"records must be a numeric (integer) array, got dtype {arr.dtype}")
    counts = [_column_problems(arr[:, j], s) for j, s in enumerate(domain.sizes)]
    problems = format_problems(list(domain.attributes), list(domain.sizes), counts, arr.shape[0])
    if problems:
        raise problems.error("records")
    try:
        cells = domain.index(arr)
    except DomainError as exc:  # not expected after the checks above; its messages hold no values
        raise DataError(str(exc)) from None
    return np.bincount(cells, minlength=domain.size).astype(np.int64, copy=False)


def histogram_from_npy(path: str | os.PathLike[str], domain: Domain | int) -> np.ndarray:  # noqa: C901 (counted allow-list)
    """Load a histogram saved with ``np.save`` and validate it; returns int64.

    ``domain`` is a :class:`~workloads.Domain` (the length must be ``domain.size``) or the
    expected length ``N`` itself. The file is read with ``allow_pickle=False``; the array
    must be 1-D, of a real numeric dtype, with finite, non-negative, integral entries, not
    all zero, every count and their total below 2**53 (:data:`._common.MAX_COUNT`). The
    ``.npy`` header (dtype, shape) is checked before any data is read, so a file declaring
    more entries than ``N`` costs nothing to refuse. Raises :class:`DataError`.
    """
    if isinstance(domain, Domain):
        n_cells = check_domain(domain).size
    elif isinstance(domain, (int, np.integer)) and not isinstance(domain, bool) and int(domain) >= 1:
        n_cells = int(domain)
    else:
        raise DataError(f"domain must be a workloads.Domain or a positive int N, got {type(domain).__name__}")
    p = Path(os.fspath(path))
    where = f"histogram in {str(p)!r}"
    invalid = f"histogram file {str(p)!r} is not a valid .npy file"
    try:
        fh = open(p, "rb")  # noqa: SIM115 - closed by the with-block below; open's errors mapped first
    except FileNotFoundError:
        raise DataError(f"histogram file {str(p)!r} does not exist") from None
    except OSError as exc:
        raise DataError(f"cannot read histogram file {str(p)!r} ({type(exc).__name__})") from None
    with fh:
        try:
            magic = fh.read(6)
        except OSError as exc:
            raise DataError(f"cannot read histogram file {str(p)!r} ({type(exc).__name__})") from None
        if magic.startswith(b"PK"):
            raise DataError(f"histogram file {str(p)!r} is an .npz archive; expected a single array (.npy)")
        if magic != b"\x93NUMPY":
            # np.load would treat any other file as pickled data (refused with allow_pickle=False)
            raise DataError(f"histogram file {str(p)!r} is not a valid .npy file")
        # The header first (bounded: NumPy refuses headers over 10 000 bytes): dtype and shape
        # are checked before the data are read, so nothing is allocated for a wrong shape.
        try:
            fh.seek(0)
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):  # 3.0 differs only in utf-8 field names
                shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            else:  # pragma: no cover - read_magic accepts only these
                raise DataError(invalid)
        except (ValueError, OSError, EOFError, SyntaxError, TypeError):
            raise DataError(invalid) from None
        if dtype.hasobject:
            raise DataError(f"histogram file {str(p)!r} holds Python objects (refused: never unpickled)")
        if len(shape) != 1:
            raise DataError(f"{where} must be 1-D, got shape {shape}")
        if shape[0] != n_cells:
            raise DataError(f"{where} has length {shape[0]}, expected N={n_cells}")
        if dtype.kind not in "iuf":
            raise DataError(f"{where} must have an integer or float dtype, got {dtype}")
        try:
            fh.seek(0)
            h = np.lib.format.read_array(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError):
            raise DataError(f"{invalid} (truncated or unreadable)") from None
    if not isinstance(h, np.ndarray) or h.shape != (n_cells,) or h.dtype != dtype:
        raise DataError(f"{invalid} (it changed while being read)")  # pragma: no cover
    kind = h.dtype.kind
    if kind == "f":
        bad = int(np.count_nonzero(~np.isfinite(h)))
        if bad:
            raise _entries_error(where, bad, "not finite (NaN or infinite)")
        bad = int(np.count_nonzero(h != np.round(h)))
        if bad:
            raise _entries_error(where, bad, "not integral")
        # 2**63 is exactly representable; anything >= it overflows int64
        bad = int(np.count_nonzero(h >= 2.0**63))
        if bad:
            raise _entries_error(where, bad, "too large for int64 counts")
    elif kind == "u":
        bad = int(np.count_nonzero(h > _INT64_MAX))
        if bad:
            raise _entries_error(where, bad, "too large for int64 counts")
    bad = int(np.count_nonzero(h < 0))
    if bad:
        raise _entries_error(where, bad, "negative (counts must be >= 0)")
    h = h.astype(np.int64)
    # every count and the total below 2**53, summed without int64 overflow: a wrapped sum
    # would otherwise reach the caller as "0 records" or a wrong n
    if check_counts(h, where) == 0:
        raise DataError(f"{where} is all zeros (an empty dataset)")
    return h
