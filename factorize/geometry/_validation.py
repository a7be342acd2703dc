"""Input checks shared by the geometry modules (clear ValueErrors, no silent coercion)."""

from __future__ import annotations

import math
from typing import Any


def positive(name: str, x: Any) -> float:
    """``float(x)`` if it is a finite number > 0 (booleans refused), else ValueError."""
    if isinstance(x, bool):
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {x!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return v
