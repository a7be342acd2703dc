"""Weighted marginal tables (HDMM's OPT_M; ``pure_dp.l1_marginal_weights`` weights,
``structured.marginal_weights`` plan) under Laplace noise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class MarginalWeights(StructuredFamilyBase):
    name = "marginal_weights"

    def fits(self, problem: PlanProblem) -> str | None:
        if problem.noise != "laplace":
            return "marginal weights are optimised for Laplace noise (L1)"
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        from factorize.kinds.structured.build_family import marginal_weights_parts

        return marginal_weights_parts(inputs)
