"""The closed-form optimum of the algebra of attribute subsets for any union of Kronecker
products (``structured.subset_algebra``): certified optimal when every factor is an identity
or a total; Gaussian noise, γ_F."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class SubsetAlgebra(StructuredFamilyBase):
    name = "subset_algebra"

    def fits(self, problem: PlanProblem) -> str | None:
        if problem.noise != "gaussian" or problem.norm != "gamma_f":
            return "the closed form minimises total variance (γ_F) under Gaussian noise"
        if problem.is_marginal_family():
            return "a family of marginals: the residual family is the same optimum (and has γ₂)"
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import subset_algebra_parts

        return subset_algebra_parts(inputs)
