"""What a dense / Kronecker factorization plan is built from (``KIND.build``): the workload
and guarantee, required, and every choice the builder takes (``kinds.factorization.build``),
each with the default stated here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from factorize.choices import Mechanism, Neighbouring, NoiseFamily, Norm

if TYPE_CHECKING:  # typed values only: options are pure data
    from factorize.planner.certificate import Certificate
    from factorize.privacy import Guarantee
    from workloads import Domain, Workload


@dataclass(frozen=True, kw_only=True)
class FactorizationOptions:
    """The inputs of a factorization plan.

    ``norm``: the objective (γ_F total variance, γ₂ worst query, or approximate γ₂ with
    radius ``eta``); ``mechanism``: ``factorization``, ``ellipsoid`` or ``least-squares``
    (Nikolov, Talwar & Zhang 2013, Alg. 1–3); ``certificate``: a factorization from any
    source, re-verified (else the planner solves); ``solver_options``: passed to the
    planner's SDP back-end; ``public_n``: the dataset size, public only under replace-one
    neighbours; ``search_seed``: the base seed of the pure-DP strategy search (recorded)."""

    workload: Workload | str
    guarantee: Guarantee | str
    norm: Norm = "gamma_f"
    eta: float | None = None
    relation: Neighbouring = "add_remove"
    domain: Domain | None = None
    noise_family: NoiseFamily | None = None
    exact: bool = True
    postprocess: str | None = None
    certificate: Certificate | None = None
    solver_options: Any = None
    gap_tol: float | None = None
    mechanism: Mechanism = "factorization"
    public_n: int | None = None
    allow_weak_guarantee: bool = False
    search_seed: int = 0
