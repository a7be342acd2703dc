"""Hostile input files for refusal tests, written without pickling anything."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_object_npy(path: Path, shape: tuple[int, ...], payload: bytes = b"\x80\x04N.") -> None:
    """A .npy whose header declares an object (pickled) dtype; its payload is never unpickled."""
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "|O", "fortran_order": False, "shape": shape})
        fh.write(payload * 8)
