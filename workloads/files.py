"""Loading explicit workload matrices from files (never via pickle).

Supported formats, chosen by extension (case-insensitive):

* ``.npy`` -- a numeric 2-D array (``np.load(..., allow_pickle=False)``); a 1-D
  array is read as a single query (shape ``(1, N)``).
* ``.csv`` -- numeric, comma-separated, no header; one query per line.
* ``.mtx`` -- Matrix Market (``scipy.io.mmread``); a sparse (coordinate) file
  gives a :class:`SparseWorkload`, a dense (array) file a :class:`DenseWorkload`.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import scipy.io
import scipy.sparse as sp

from .errors import WorkloadError
from .operators import DenseWorkload, SparseWorkload, Workload

__all__ = ["from_file", "SUPPORTED_EXTENSIONS"]

SUPPORTED_EXTENSIONS: tuple[str, ...] = (".npy", ".csv", ".mtx")


def from_file(path: str | os.PathLike[str]) -> Workload:
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
    if ext == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except ValueError as exc:
            raise WorkloadError(
                f"cannot load {p!r} as a numeric .npy array (pickled object arrays are refused): {exc}"
            ) from None
        except OSError as exc:
            raise WorkloadError(f"cannot read {p!r}: {exc}") from None
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
                f"cannot read {p!r} as a numeric comma-separated matrix without header: {exc}"
            ) from None
        return DenseWorkload(arr)
    try:
        mat = scipy.io.mmread(p)
    except (ValueError, OSError, RuntimeError) as exc:
        raise WorkloadError(f"cannot read {p!r} as a Matrix Market file: {exc}") from None
    if sp.issparse(mat):
        return SparseWorkload(mat)
    return DenseWorkload(np.asarray(mat))
