"""The optimal strategy of the workload's symmetry sectors (``structured.symmetric``): the
symmetry-reduced dual solved, its primal read off in closed form — certified optimal up to the
dual solver's gap on unions of identity, total and grouping factors (Gaussian noise, add/remove
neighbours). γ_F: the γ_F dual over cell orbits; γ₂: the γ₂ dual over row orbits and cell
orbits (``structured.symmetry_gamma_2``), its strategy the weighted γ_F optimum there."""

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

        if problem.noise != "gaussian" or problem.norm not in ("gamma_f", "gamma_2"):
            return "the sector optimum minimises total variance (γ_F) or the worst query's (γ₂) under Gaussian noise"
        if problem.relation.key != "add_remove":
            return ("its mixed blocks' sensitivity under replace neighbours is only bounded by "
                    "twice the add/remove one")
        if "symmetry_reduction" not in problem.memo:
            problem.memo["symmetry_reduction"] = reduce(problem.blocks() or [], problem.domain.sizes)
        red = problem.memo["symmetry_reduction"]
        if red is None:
            return ("the workload's symmetries do not shrink the γ_F dual enough (prefix or range "
                    "factors, or sectors too large)")
        if problem.norm == "gamma_f" and all(s.size == 1 for s in red.class_sizes):
            return ("every attribute has one twin class: the subset-algebra family is this optimum "
                    "in closed form")
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        """The sector strategy at the reduced dual's weights (``structured.symmetric``), solved
        once per workload (``kinds.structured.build_family.symmetry_solution``, and
        ``symmetry_gamma_2_solution`` for γ₂)."""
        from factorize.kinds.structured.build_family import (
            FamilyParts,
            symmetry_gamma_2_solution,
            symmetry_solution,
        )
        from factorize.plan.errors import PlanError
        from factorize.structured import symmetric

        if inputs.norm == "gamma_2":
            g2 = symmetry_gamma_2_solution(inputs.wblocks, inputs.dom.sizes, inputs.memo)
            if g2 is None:
                raise PlanError("the symmetric family's γ₂ plan needs a workload whose symmetries "
                                "reduce the γ₂ dual (structured.symmetry_gamma_2 found none)")
            v, d, lower = g2
            red_primal, d_primal = inputs.memo["symmetry_gamma_2_primal"]
            parts = symmetric.build(inputs.dom.sizes, inputs.wblocks, red_primal, d_primal, lower,
                                    "gamma_2", ranges=inputs.memo["symmetry"][0], bound=(v, d))
            return FamilyParts(*parts)
        found = symmetry_solution(inputs.wblocks, inputs.dom.sizes, inputs.memo)
        if found is None:
            raise PlanError("the symmetric family needs a workload whose symmetries reduce the "
                            "γ_F dual (structured.symmetry.reduce found none)")
        red, lower, weights = found
        strat, recon, enc, cert, arrays = symmetric.build(inputs.dom.sizes, inputs.wblocks, red,
                                                          weights, lower, inputs.norm)
        return FamilyParts(strat, recon, enc, cert, arrays)
