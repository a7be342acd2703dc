"""One Kronecker strategy per workload block with optimal block weights (``structured.union``):
per-factor optimal factorizations, the budget split across the blocks."""

from __future__ import annotations

from .structured_family import StructuredFamilyBase


class Union(StructuredFamilyBase):
    name = "union"
