"""Loading explicit workload matrices from files (never via pickle).

Supported formats, chosen by extension (case-insensitive):

* ``.npy`` -- a numeric 2-D array (``np.load(..., allow_pickle=False)``); a 1-D
  array is read as a single query (shape ``(1, N)``).
* ``.csv`` -- numeric, comma-separated, no header; one query per line.
* ``.mtx`` -- Matrix Market (``scipy.io.mmread``); a sparse (coordinate) file
  gives a :class:`SparseWorkload`, a dense (array) file a :class:`DenseWorkload`.

Error messages name the file and what is wrong with it, never its contents (the
underlying parsers quote offending cells; those messages are not passed on).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from .base import issparse
from .errors import WorkloadError
from .operators import DenseWorkload, SparseWorkload, Workload

__all__ = ["from_file", "SUPPORTED_EXTENSIONS"]

SUPPORTED_EXTENSIONS: tuple[str, ...] = (".npy", ".csv", ".mtx")
#: Most entries a custom workload matrix file may hold (checked from the .npy header before
#: any data is read; a CSV or Matrix Market file is refused above its byte-size equivalent).
MAX_FILE_ENTRIES = 1 << 27


def from_file(path: str | os.PathLike[str]) -> Workload:  # noqa: C901 (counted allow-list)
    """Read a workload matrix ``W`` (``k`` queries x ``N`` cells) from ``path``."""
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext not in SUPPORTED_EXTENSIONS:
        raise WorkloadError(
            f"unsupported workload file extension {ext or '(none)'!r} for {p!r}; "
            f"expected one of {', '.join(SUPPORTED_EXTENSIONS)}"
        )
    if not os.path.isfile(p):
        raise WorkloadError(f"workload file {p!r} does not exist or is not a regular file")
    if ext != ".npy" and os.path.getsize(p) > 64 * MAX_FILE_ENTRIES:
        raise WorkloadError(f"workload file {p!r} is larger than {64 * MAX_FILE_ENTRIES} bytes")
    if ext == ".npy":
        try:
            view = np.load(p, allow_pickle=False, mmap_mode="r")  # header only: shape first
            if not isinstance(view, np.ndarray):
                raise WorkloadError(f"{p!r} does not hold a single numpy array")
            if view.size > MAX_FILE_ENTRIES:
                raise WorkloadError(f"{p!r} holds {view.size} entries, above the limit of "
                                    f"{MAX_FILE_ENTRIES} for a custom workload matrix")
            arr = np.array(view)
        except ValueError as exc:
            if isinstance(exc, WorkloadError):
                raise
            raise WorkloadError(
                f"cannot load {p!r} as a numeric .npy array (pickled object arrays are refused; "
                f"{type(exc).__name__})"
            ) from None
        except OSError as exc:
            raise WorkloadError(f"cannot read {p!r} ({type(exc).__name__})") from None
        if not isinstance(arr, np.ndarray):
            raise WorkloadError(f"{p!r} does not hold a single numpy array")
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        return DenseWorkload(arr)
    if ext == ".csv":
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # empty-file warning; reported below
                arr = np.loadtxt(p, delimiter=",", dtype=np.float64, ndmin=2)
        except (ValueError, OSError) as exc:
            raise WorkloadError(
                f"cannot read {p!r} as a numeric comma-separated matrix without header "
                f"(a cell is not a number, or the rows differ in length; {type(exc).__name__})"
            ) from None
        return DenseWorkload(arr)
    import scipy.io  # deferred: only a .mtx file needs it

    try:
        mat = scipy.io.mmread(p)
    except (ValueError, OSError, RuntimeError, IndexError) as exc:
        raise WorkloadError(f"cannot read {p!r} as a Matrix Market file ({type(exc).__name__})") from None
    if issparse(mat):
        return SparseWorkload(mat)
    return DenseWorkload(np.asarray(mat))
