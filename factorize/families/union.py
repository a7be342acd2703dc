"""One Kronecker strategy per workload block with optimal block weights (``structured.union``):
per-factor optimal factorizations, the budget split across the blocks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class Union(StructuredFamilyBase):
    name = "union"

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import union_parts

        return union_parts(inputs)
