"""The project's vocabulary: one ``Literal`` type per choice a user makes, and the tuple of
its values (what argparse offers, what validation accepts). Imports nothing but ``typing``.

Every spelling lives here once: the CLI's ``choices=``, the planner's and the plan's checks
read these tuples, and type checkers read the ``Literal`` types in signatures.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "Norm", "NORMS", "Method", "METHODS", "NoiseFamily", "NOISE_FAMILIES", "Sampler",
    "SAMPLERS", "Neighbouring", "NEIGHBOURING", "StructuredFamily",
    "Mechanism", "MECHANISMS", "TrainingStrategy", "TRAINING_STRATEGIES", "Backend", "BACKENDS",
]

#: The error measure a factorization minimises: γ_F (root-mean-square error), γ₂ (worst
#: query's error), γ₂(·; η) (approximate factorization within entrywise radius η).
Norm = Literal["gamma_f", "gamma_2", "approx_gamma_2"]
NORMS: tuple[Norm, ...] = get_args(Norm)

#: How the planner solves: ``auto`` chooses; ``dual`` = the specialised fixed-point dual
#: solvers; ``sdp`` = the generic SDP through cvxpy; ``algebra`` = the marginal subset
#: algebra; ``low-rank`` = Burer–Monteiro for approximate γ₂ (``factorize.planner.lowrank``).
Method = Literal["auto", "dual", "sdp", "algebra", "low-rank"]
METHODS: tuple[Method, ...] = get_args(Method)

#: The noise added to the measurements (the CLI spells ``l2_knorm`` as ``knorm``).
NoiseFamily = Literal["gaussian", "laplace", "l2_knorm"]
NOISE_FAMILIES: tuple[NoiseFamily, ...] = get_args(NoiseFamily)

#: How noise is drawn: exactly on the integer lattice, or in floating point (not exact;
#: refused by the executor unless ``--allow-float-noise``).
Sampler = Literal["discrete_gaussian", "discrete_laplace", "float"]
SAMPLERS: tuple[Sampler, ...] = get_args(Sampler)

#: The neighbouring relation of the guarantee: add/remove one record, or replace one.
Neighbouring = Literal["add_remove", "replace"]
NEIGHBOURING: tuple[Neighbouring, ...] = get_args(Neighbouring)

#: A strategy family of structured plans (never densified): a name registered in
#: ``structured.families.CODECS`` — the trusted registry, whose ``FAMILY_NAMES`` the CLI offers
#: and the builder checks — not a closed list here, so that a new family is its own modules
#: plus one line in each of the two registries (``families.registry``: the builder).
StructuredFamily = str

#: The mechanism of a plan (``factorize plan --mechanism``).
Mechanism = Literal["factorization", "ellipsoid", "least-squares", "jl", "covariance",
                    "relaxed-projection", "training"]
MECHANISMS: tuple[Mechanism, ...] = get_args(Mechanism)

#: Long-horizon strategies of a training plan (``factorize plan --mechanism training --strategy``).
TrainingStrategy = Literal["blt", "banded", "bisr", "dense"]
TRAINING_STRATEGIES: tuple[TrainingStrategy, ...] = get_args(TrainingStrategy)

#: SDP back-ends reached through cvxpy.
Backend = Literal["scs", "clarabel", "mosek"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
