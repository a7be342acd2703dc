"""The research layer's error (experimental mechanisms outside the plan/run pipeline)."""

from __future__ import annotations

from factorize.errors import InputError

__all__ = ["ResearchError"]


class ResearchError(InputError):
    """Bad input to a research mechanism: a workload, histogram, plan, tolerance or random
    source it cannot use (the message names which, and the value it got)."""
