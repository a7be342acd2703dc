"""Residual bases (ResidualPlanner; ``structured.residual``): the certified optimum of a
marginal workload under Gaussian noise, γ_F or γ₂."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class Residual(StructuredFamilyBase):
    name = "residual"

    def fits(self, problem: PlanProblem) -> str | None:
        if problem.noise != "gaussian":
            return "residual bases are optimal for Gaussian noise (L2); under Laplace noise " \
                   "marginal weights are the marginal family"
        if not problem.is_marginal_family():
            return "the workload is not a family of marginals"
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import residual_parts

        return residual_parts(inputs)
