"""One shared Kronecker strategy per group of workload blocks, the budget split across the
groups (HDMM's OPT_+; ``structured.kron_groups``): between the union family (a group per
block) and ``kron`` (one group)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class KronGroups(StructuredFamilyBase):
    name = "kron_groups"

    def fits(self, problem: PlanProblem) -> str | None:
        from factorize.structured.kron_groups import candidate_groupings

        if not candidate_groupings(problem.blocks() or []):
            return ("no grouping of the blocks lies strictly between one Kronecker strategy per "
                    "block (union) and one for all (kron)")
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import kron_groups_parts

        return kron_groups_parts(inputs)
