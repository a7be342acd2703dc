"""What a projection plan is built from (``KIND.build``): the workload, guarantee, mechanism
and public dataset size, required, and the builder's other choices
(``kinds.projection.build``), each with the default stated here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typed values only: options are pure data
    from factorize.privacy import Guarantee
    from workloads import Domain, Workload


@dataclass(frozen=True, kw_only=True)
class ProjectionOptions:
    """The inputs of a projection plan.

    ``mechanism``: ``jl`` (Nikolov 2023: a random projection T, ℓ2-ball K-norm noise, pure
    ε-DP), ``covariance`` or ``relaxed-projection`` (the second-moment mechanisms of
    ``kinds.projection.plan``); ``n``: the public dataset size (replace-one neighbours);
    ``rng``: the randomness of T (``jl``), None for the OS (``privacy.SecureRandom``) — a
    seeded source only in tests."""

    workload: Workload | str
    guarantee: Guarantee | str
    mechanism: str
    n: int
    relation: str = "replace"
    domain: Domain | None = None
    noise_family: str | None = None
    exact: bool = True
    rng: Any = None
    allow_weak_guarantee: bool = False
