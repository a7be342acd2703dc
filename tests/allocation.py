"""A load-independent stand-in for "it returned at once": the peak of Python- and numpy-level
allocations while a call runs (``tracemalloc``; numpy reports its array buffers to it). A check
that refuses a multi-gigabyte declaration before reading it allocates kilobytes, under any
machine load, where a wall-clock limit fails on a busy machine."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

#: A refusal "before reading the data" allocates less than this.
SMALL = 64 << 20


def peak_allocation(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``(fn()'s value or the exception it raised, peak bytes allocated while it ran)``."""
    was = tracemalloc.is_tracing()
    if not was:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        try:
            out: Any = fn()
        except Exception as exc:  # noqa: BLE001 - returned for the caller to check
            out = exc
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was:
            tracemalloc.stop()
    return out, peak
