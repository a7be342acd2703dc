"""What a local-model plan is built from (``KIND.build``): the workload, guarantee and
planning dataset size, required, and the builder's other choices (``kinds.local.build``),
each with the default stated here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typed values only: options are pure data
    from factorize.privacy import Guarantee
    from workloads import Domain, Workload


@dataclass(frozen=True, kw_only=True)
class LocalOptions:
    """The inputs of a local plan (``kinds.local.plan``, Edmonds, Nikolov & Ullman 2020).

    ``n``: the planning number of users; ``randomizer``: ``l2`` (pure ε-LDP) or ``gaussian``
    ((ε, δ)), None for the guarantee's own; ``eta``: a fixed approximation radius η, None to
    search the grid; ``alpha``: a target worst-query error in fractions of n (the plan then
    keeps the η needing the fewest users)."""

    workload: Workload | str
    guarantee: Guarantee | str
    n: int
    randomizer: str | None = None
    eta: float | None = None
    alpha: float | None = None
    domain: Domain | None = None
    allow_weak_guarantee: bool = False
