"""The strategy-family protocol of the planner: what a family of strategies must say
about a workload, and the problem every family is handed.

A family answers two questions: :meth:`StrategyFamily.applies` — does its structure fit this
workload and guarantee (None), and if not, why not (a sentence the plan records) — and
:meth:`StrategyFamily.plan` — its optimised strategy as a complete, verifiable plan (dense
``kinds.factorization.plan.Plan`` or ``kinds.structured.plan.StructuredPlan``) under the problem's objective:
γ_F (total variance) or γ₂ (worst query), Laplace/L1 or Gaussian/L2 noise, add/remove or
replace neighbours, with its seeded restarts recorded in the plan. The search
(``families.search``) runs every family that applies and keeps the plan of least error under
the guarantee's own objective. The verifier never imports this package: what it needs of a
structured family is ``structured.families``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from workloads import Domain, Workload

Kind = Literal["dense", "structured"]


@dataclass
class PlanProblem:
    """One planning problem, shared by every family (parsed once; ``memo`` holds what one
    family computes and another reuses, e.g. the union plan's certificate)."""

    workload: Workload
    guarantee: Any                 # privacy.Guarantee
    relation: Any                  # privacy.Neighbouring
    domain: Domain
    noise: Literal["gaussian", "laplace"]
    norm: Literal["gamma_f", "gamma_2"]
    options: Any = None            # solver options (dense family)
    gap_tol: float | None = None
    seed: int = 0                  # base seed of every seeded search (recorded)
    allow_weak_guarantee: bool = False
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload.shape
        return int(k), int(N)

    def blocks(self) -> list | None:
        """The workload as Kronecker blocks over the domain (``structured.workload_blocks``),
        None when it has no such form (the reason in ``memo['blocks_why']``)."""
        if "blocks" not in self.memo:
            from factorize.structured.blocks import StructureError
            from factorize.structured.workload_blocks import workload_blocks

            try:
                self.memo["blocks"] = workload_blocks(self.workload, self.domain.sizes)
            except (StructureError, ValueError) as exc:
                self.memo["blocks"], self.memo["blocks_why"] = None, str(exc)
        return self.memo["blocks"]

    def marginal_structure(self) -> Any:
        """W as marginals (``pure_dp.structure.marginal_structure_of``) or None."""
        if "marginals" not in self.memo:
            from factorize.pure_dp.structure import marginal_structure_of

            fam = marginal_structure_of(self.workload)
            if fam is not None and tuple(fam.sizes) != tuple(int(n) for n in self.domain.sizes):
                fam = None
            self.memo["marginals"] = fam
        return self.memo["marginals"]

    def is_marginal_family(self) -> bool:
        """Every block a marginal of the domain's attributes (the residual family's home)."""
        if "is_marginal" not in self.memo:
            from factorize.planner.marginal_algebra import marginal_family

            blocks = self.blocks()
            fam = marginal_family(self.workload) if blocks else None
            self.memo["is_marginal"] = bool(
                blocks and all(b.marginal_support is not None for b in blocks) and fam is not None
                and tuple(fam.sizes) == tuple(int(n) for n in self.domain.sizes))
        return bool(self.memo["is_marginal"])


@runtime_checkable
class StrategyFamily(Protocol):
    """A family of strategies (module docstring). ``name`` is what plans and tables print.
    Both are read-only here, so a family may narrow them (a structured family's ``name`` is a
    ``choices.StructuredFamily``)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> Kind: ...

    def applies(self, problem: PlanProblem) -> str | None:
        """None when the family fits the problem, else the reason it does not."""

    def plan(self, problem: PlanProblem) -> Any:
        """The family's optimised strategy as a complete plan (``PlanError`` / ``ValueError``
        when it cannot plan this instance after all)."""
