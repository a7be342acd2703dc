"""Weighting and stacking workloads, keeping marginal families in one object.

* :func:`scale_workload` -- ``w·W`` (``w`` finite, in ``[WEIGHT_MIN, WEIGHT_MAX]``):
  ``1·W = W``; a :class:`MarginalWorkload` scales its weights; a stack scales each of its
  blocks (``w·[A; B] = [w·A; w·B]``); any other ``W`` becomes
  ``KronWorkload([DenseWorkload([[w]]), W])``.
* :func:`vstack_workloads` -- ``[A; B; ...]``: marginal families over the same sizes
  collapse into one :class:`MarginalWorkload` (blocks and weights in order), anything else
  is a :class:`VStackWorkload`. Both forms have the same matrix and fingerprint.

These are the ``scale(W,SPEC)`` and ``vstack(SPEC,...)`` calls of the spec language.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

from .errors import WorkloadError
from .marginal_workload import MarginalWorkload
from .operators import DenseWorkload, KronWorkload, VStackWorkload, Workload, as_operator

__all__ = ["scale_workload", "vstack_workloads", "check_scale", "WEIGHT_MIN", "WEIGHT_MAX"]

#: Smallest and largest weight (also of a product of nested weights on a marginal family).
#: Far outside this range a weight only hides a mistake: it rescales a block's queries by
#: more than 10^12 against the others (whose noise then dominates or vanishes).
WEIGHT_MIN: float = 1e-12
WEIGHT_MAX: float = 1e12


def check_scale(weight: Any, what: str = "a workload weight") -> float:
    """``weight`` as a float if it is a real number in ``[WEIGHT_MIN, WEIGHT_MAX]``."""
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
        raise WorkloadError(f"{what} must be a real number, got {type(weight).__name__}")
    w = float(weight)
    if not math.isfinite(w) or w <= 0.0:
        raise WorkloadError(f"{what} must be finite and > 0, got {w!r}")
    if not WEIGHT_MIN <= w <= WEIGHT_MAX:
        raise WorkloadError(f"{what} {w!r} is outside [{WEIGHT_MIN:g}, {WEIGHT_MAX:g}]")
    return w


def scale_workload(weight: Any, workload: Any) -> Workload:
    """``weight · workload`` (module docstring); ``weight`` as :func:`check_scale` accepts."""
    w = check_scale(weight)
    W = as_operator(workload)
    if w == 1.0:
        return W
    if isinstance(W, MarginalWorkload):
        out = W.scaled(w)
        lo, hi = min(out.weights), max(out.weights)
        if lo < WEIGHT_MIN or hi > WEIGHT_MAX:
            raise WorkloadError(f"scaling by {w!r} gives marginal weights in [{lo!r}, {hi!r}], outside "
                                f"[{WEIGHT_MIN:g}, {WEIGHT_MAX:g}]")
        return out
    if isinstance(W, VStackWorkload):
        return vstack_workloads([scale_workload(w, b) for b in W.blocks])
    return KronWorkload([DenseWorkload([[w]]), W])


def vstack_workloads(workloads: Sequence[Any]) -> Workload:
    """``[A; B; ...]``: one :class:`MarginalWorkload` when every part is a marginal family
    over the same sizes, else a :class:`VStackWorkload` (always a new object)."""
    parts = [as_operator(p, f"workloads[{i}]") for i, p in enumerate(workloads)]
    families = [p for p in parts if isinstance(p, MarginalWorkload)]
    if families and len(families) == len(parts) and all(f.sizes == families[0].sizes for f in families):
        return MarginalWorkload.stack(families)
    return VStackWorkload(parts)
