"""One Kronecker strategy shared by every block of a union (HDMM's OPT_⊗;
``structured.shared_kron``): p-Identity factors for Laplace noise, L2-optimal factors by
alternating per-attribute solves for Gaussian noise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class SharedKron(StructuredFamilyBase):
    name = "kron"

    def fits(self, problem: PlanProblem) -> str | None:
        from factorize.pure_dp.api import MAX_KRON_BLOCKS_FOR_MARGINALS

        blocks = problem.blocks() or []
        if problem.noise == "laplace" and problem.marginal_structure() is not None \
                and len(blocks) > MAX_KRON_BLOCKS_FOR_MARGINALS:
            return (f"a family of {len(blocks)} marginals (> {MAX_KRON_BLOCKS_FOR_MARGINALS}): "
                    "the marginal weights' ground")
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import kron_parts

        return kron_parts(inputs)
