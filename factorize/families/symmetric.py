"""The γ_F-optimal strategy of the workload's symmetry sectors (``structured.symmetric``): the
symmetry-reduced dual solved, its primal read off in closed form — certified optimal up to the
dual solver's gap on unions of identity, total and grouping factors (Gaussian noise, γ_F,
add/remove neighbours)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import PlanProblem
from .structured_family import StructuredFamilyBase

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class Symmetric(StructuredFamilyBase):
    name = "symmetric"

    def fits(self, problem: PlanProblem) -> str | None:
        from factorize.structured.symmetry import reduce

        if problem.noise != "gaussian" or problem.norm != "gamma_f":
            return "the sector optimum minimises total variance (γ_F) under Gaussian noise"
        if problem.relation.key != "add_remove":
            return ("its mixed blocks' sensitivity under replace neighbours is only bounded by "
                    "twice the add/remove one")
        if "symmetry_reduction" not in problem.memo:
            problem.memo["symmetry_reduction"] = reduce(problem.blocks() or [], problem.domain.sizes)
        red = problem.memo["symmetry_reduction"]
        if red is None:
            return ("the workload's symmetries do not shrink the γ_F dual enough (prefix or range "
                    "factors, or sectors too large)")
        if all(s.size == 1 for s in red.class_sizes):
            return ("every attribute has one twin class: the subset-algebra family is this optimum "
                    "in closed form")
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        """The sector strategy at the reduced dual's weights (``structured.symmetric``), solved
        once per workload (``kinds.structured.build_family.symmetry_solution``)."""
        from factorize.kinds.structured.build_family import FamilyParts, symmetry_solution
        from factorize.plan.errors import PlanError
        from factorize.structured import symmetric

        found = symmetry_solution(inputs.wblocks, inputs.dom.sizes, inputs.memo)
        if found is None:
            raise PlanError("the symmetric family needs a workload whose symmetries reduce the "
                            "γ_F dual (structured.symmetry.reduce found none)")
        red, lower, weights = found
        strat, recon, enc, cert, arrays = symmetric.build(inputs.dom.sizes, inputs.wblocks, red,
                                                          weights, lower, inputs.norm)
        return FamilyParts(strat, recon, enc, cert, arrays)
