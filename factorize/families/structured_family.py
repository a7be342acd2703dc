"""The shared shape of a structured family: ``plan`` is ``build_family_plan`` with the
family's name and its builder :meth:`StructuredFamilyBase.parts` (``kinds.structured.build_family``
calibrates, checks and certifies what the builder makes). A new structured family is one
module here with ``fits`` and ``parts``, and one line of ``registry``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from factorize.choices import StructuredFamily

from .base import Kind, PlanProblem

if TYPE_CHECKING:
    from factorize.kinds.structured.build_family import FamilyInputs, FamilyParts


class StructuredFamilyBase:
    """A structured family: ``applies`` checks the workload has Kronecker blocks over the
    domain, then the family's own condition (:meth:`fits`)."""

    name: StructuredFamily  # each family's own (``structured.families.FAMILY_NAMES``)
    kind: Kind = "structured"

    def applies(self, problem: PlanProblem) -> str | None:
        if problem.blocks() is None:
            return "the workload is not a union of Kronecker products over the domain's attributes: " \
                + str(problem.memo.get("blocks_why", ""))[:160]
        return self.fits(problem)

    def fits(self, problem: PlanProblem) -> str | None:
        return None

    def parts(self, inputs: FamilyInputs) -> FamilyParts:
        """The family's strategy, reconstruction and certificate (``FamilyParts``)."""
        raise NotImplementedError(f"the structured family {self.name!r} has no builder")

    def plan(self, problem: PlanProblem) -> Any:
        from factorize.kinds.structured.build_family import build_family_plan

        return build_family_plan(problem.workload, problem.guarantee, strategy=self.name,
                                 parts=self.parts,
                                 norm=problem.norm, relation=problem.relation.key,
                                 domain=problem.domain, noise_family=problem.noise,
                                 gap_tol=problem.gap_tol if problem.gap_tol is not None else 1e-6,
                                 allow_weak_guarantee=problem.allow_weak_guarantee,
                                 options=problem.options, search_seed=problem.seed,
                                 memo=problem.memo)
