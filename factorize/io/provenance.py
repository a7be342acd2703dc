"""Provenance: versions of the numerical stack and a description of the machine.

Used by result files, plans and every benchmark report, so they describe runs alike.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import platform
from pathlib import Path

import numpy as np

import factorize

_STACK = ("scipy", "cvxpy", "safetensors")


def versions(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """factorize, Python, numpy and each importable module of ``_STACK + extra``."""
    out = {"factorize": factorize.__version__, "python": platform.python_version(),
           "numpy": np.__version__}
    for name in (*_STACK, *extra):
        try:  # the installed distribution's version: no import (cvxpy alone takes seconds)
            out[name] = importlib.metadata.version(name)
        except Exception:  # noqa: BLE001 - provenance only: a missing module is just not listed
            with contextlib.suppress(Exception):
                out[name] = str(importlib.import_module(name).__version__)
    return out


def _proc_field(path: str, prefix: str) -> str | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_info() -> dict[str, str]:
    """CPU model, cores (logical and usable), RAM and OS of this machine."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mem_kb = _proc_field("/proc/meminfo", "MemTotal")
    return {
        "CPU": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cores": f"{os.cpu_count()} logical ({usable} usable by this process)",
        "RAM": f"{int(mem_kb.split()[0]) / 2**20:.1f} GiB" if mem_kb else "unknown",
        "OS": platform.platform(),
    }
