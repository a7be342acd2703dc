"""What a structured plan is built from (``KIND.build``): the workload and guarantee,
required, and every choice the builder takes (``kinds.structured.build``), each with the
default stated here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from factorize.choices import Neighbouring, NoiseFamily, Norm, StructuredFamily

if TYPE_CHECKING:  # typed values only: options are pure data
    from factorize.privacy import Guarantee
    from workloads import Domain, Workload


@dataclass(frozen=True, kw_only=True)
class StructuredOptions:
    """The inputs of a structured plan.

    ``strategy``: one structured family (``families``), or None for the search over every
    family (``families.search``: the best certified plan); ``norm``: γ_F or γ₂;
    ``solver_options``: passed to the families' solvers; ``search_seed``: the base seed of the
    families' random starts (recorded); ``memo``: results one family computes and another
    reuses (the union plan's certificate, the symmetry-reduced bound) — a cache the caller may
    share across builds of the same workload, never part of the plan."""

    workload: Workload | str
    guarantee: Guarantee | str
    norm: Norm = "gamma_f"
    relation: Neighbouring = "add_remove"
    domain: Domain | None = None
    noise_family: NoiseFamily | None = None
    strategy: StructuredFamily | None = None
    gap_tol: float = 1e-6
    allow_weak_guarantee: bool = False
    solver_options: Any = None
    search_seed: int = 0
    memo: dict[str, Any] | None = None
