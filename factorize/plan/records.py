"""The typed sections of a plan's manifest: one ``TypedDict`` per record a plan holds.

A plan (``kinds.factorization.plan.Plan``, ``kinds.structured.plan.StructuredPlan``,
``kinds.projection.plan.ProjectionPlan``, ``kinds.local.plan.LocalPlan``) keeps these sections as the JSON objects of its manifest — they
are written and read as they are — but typed: a required key is required, an optional one
(``NotRequired``) is one some writer of the same schema version did not write (a field added
later, or one that applies to some plans only). The readers check every section against its
record when a plan is read (``files.require_record``): a required key missing, or any key
of the wrong JSON type, is a :class:`~factorize.plan.files.PlanFormatError` naming it.

What the records do not promise: that the numbers are *true*. Every claim the release relies
on is re-derived by the plan's verifier (``checks``, ``claims``, ``structured_checks``,
``projection_checks``, ``kinds.local.plan.verify_local_plan``) and compared with what the record
states.

No ``from __future__ import annotations`` here: under Python 3.11 a string annotation hides
``NotRequired`` from ``TypedDict`` at run time, and the readers read the records' keys at run
time.
"""

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from .errors import PlanError

if TYPE_CHECKING:
    from workloads import Workload

# ---------------------------------------------------------------------------------------
# every plan kind


class WorkloadRecord(TypedDict):
    """``workload``: the spec the verifier rebuilds W from, W's fingerprint and shape [k, N]."""

    spec: str
    fingerprint: str
    shape: list[int]
    #: the listing of the custom matrices the file carries (``plan.embedded``); a plan holds
    #: the matrices themselves in its ``embedded`` field, and a built plan has no listing
    embedded: NotRequired[list[dict[str, Any]]]
    #: per-table weights or targets (``plan.table_targets``): W's spec and fingerprint, the
    #: request and each table's scale d_t; the spec above is then D·W's
    table_targets: NotRequired[dict[str, Any]]


def workload_record(W: "Workload") -> WorkloadRecord:
    """The ``workload`` record of a plan for ``W`` (every builder's); :class:`PlanError` when W
    has no spec — the verifier rebuilds W from it, never from the plan's numbers."""
    if not W.spec:
        raise PlanError("the workload needs a spec (the plan rebuilds W from it)")
    k, N = W.shape
    return {"spec": W.spec, "fingerprint": W.fingerprint(), "shape": [int(k), int(N)]}


class StrategyChoice(TypedDict, total=False):
    """``provenance.strategy_choice``: how the planner chose the plan's strategy (re-checked by
    ``claims._check_strategy_choice`` for dense plans, ``structured_checks._choice_problems``
    for structured ones). Dense plans state ``chosen``, ``objective`` and the ``candidates``'
    scores; a structured family with its own search states its Laplace (and Gaussian) score,
    seed, search record and runners-up."""

    chosen: str
    objective: str
    candidates: dict[str, float]
    reason: str
    rejected: str
    search_seed: int
    optimized: dict[str, dict[str, Any]]
    rmse_at_epsilon_1: float
    gaussian_rmse_per_sigma: float
    seconds: float
    search: dict[str, Any]
    runners_up: list[dict[str, Any]]


class SearchRecord(TypedDict):
    """``provenance.strategy_search``: the table of the strategy search over the families
    (``families.search``; re-checked by ``search_record.search_problems``)."""

    objective: str
    chosen: str
    seed: int
    tried: list[dict[str, Any]]
    not_applicable: list[dict[str, Any]]


class Provenance(TypedDict, total=False):
    """``provenance``: how and when the plan was made. Informational — a plan may record none,
    and nothing a release relies on is read from it without a re-check (the strategy choice
    and search are re-derived; ``mechanism`` must agree with the post-processing)."""

    versions: dict[str, str]
    mechanism: str
    strategy: str
    certificate_source: str
    solves: list[dict[str, Any]]
    solve_seconds: float
    plan_seconds: float
    sensitivity_exact: bool
    strategy_choice: StrategyChoice | None
    strategy_search: SearchRecord
    created: str


class SpectralWitness(TypedDict):
    """The column subset S (and anchor record, replace neighbours) of the spectral
    any-mechanism bound: the verifier re-evaluates the bound there (``plan.lower_bound``)."""

    subset: list[int]
    anchor: int | None


class AnyMechanismBound(TypedDict):
    """A lower bound on every mechanism's RMSE with the plan's guarantee (``plan.lower_bound``)."""

    value: float
    bound: str
    measure: str
    binds: str
    #: the spectral bound's witness (the packing bound has none)
    witness: NotRequired[SpectralWitness]


class LaplaceFactorizationBound(TypedDict):
    """The pure-DP factorization bound ``√2·L/ε`` (``lower_bound.laplace_factorization_bound``)."""

    value: float
    measure: str
    bound: str
    binds: str


class BiasRecord(TypedDict):
    """``bias``: the reconstruction bias ``|((W − R·Ã)h)_i| ≤ residual_bound·n`` and how n is
    bounded from the release (``plan.bias``, ``structured.records``): ``"weights"`` (the
    ``nbound.*`` arrays), ``"total"`` (the total's measurement, structured plans) or ``"cap"``."""

    residual_bound: float
    n_bound: str
    note: str
    #: the workload block whose weights bound n (structured plans with ``n_bound: "weights"``)
    n_block: NotRequired[int]


class NBoundRecord(TypedDict):
    """How a structured plan bounds n from its release (``structured.records.choose``): the
    :class:`BiasRecord` fields besides β and the note."""

    n_bound: str
    n_block: NotRequired[int]


# ---------------------------------------------------------------------------------------
# factorization (dense / Kronecker) plans: ``kinds.factorization.plan.Plan``


class CertificateRecord(TypedDict):
    """``certificate`` (``Plan.bounds``): the factorization's certified ``lower ≤ norm ≤
    upper``, their relative gap, the residual of W = R·A and its limit, and the bounds on other
    mechanisms (``plan.lower_bound``)."""

    norm: str
    upper: float
    lower: float
    gap: float
    residual: float
    residual_limit: float
    #: None where W is too large to densify; absent in plans written before the bound existed
    any_mechanism: NotRequired[AnyMechanismBound | None]
    #: None unless the noise is Laplace; absent in plans written before the bound existed
    laplace_factorization: NotRequired[LaplaceFactorizationBound | None]


class ExpectedError(TypedDict):
    """``expected_error`` of a factorization plan (``plan.expected_error``)."""

    per_query_std_max: float
    per_query_std_min: float
    per_query_std_mean: float
    rmse: float
    expected_max_bound: float
    expected_max_method: str
    rounding_bias_max: float
    noise_variance_bound: float
    variance_note: str
    ci_method: str
    ci_multiplier: float
    #: β (absent in a schema-1 file, which states no bias)
    bias_per_record: NotRequired[float]
    bias_note: NotRequired[str]


class PostprocessRecord(TypedDict):
    """``postprocess``: the post-processing the executor runs on released values —
    ``"nonneg"`` or ``"integer"`` (``tol``; dense plans and, in the algebra of marginals,
    structured plans: ``postprocess.plan_option``) or ``"least_squares"`` (dense plans only:
    ``body``, public ``n``, ``gap_tol``, the bound's coefficient and note)."""

    method: str
    max_iter: int
    tol: NotRequired[float]
    body: NotRequired[str]
    n: NotRequired[int | None]
    gap_tol: NotRequired[float]
    bound_coefficient: NotRequired[float | None]
    bound_note: NotRequired[str]


# ---------------------------------------------------------------------------------------
# structured plans: ``structured_plan.StructuredPlan``


class SymmetryBound(TypedDict):
    """``certificate.symmetry``: the symmetry-reduced dual bound (``structured.symmetry``)."""

    method: str
    lower: float
    #: "gamma_2" for the row-weighted γ₂ bound; absent for the γ_F one
    norm: NotRequired[str]


class SubspaceBound(TypedDict):
    """``certificate.subspace``: the subspace-split trace-norm bound (``structured.subspace_bound``)."""

    method: str
    lower: float


class FamilyCertificate(TypedDict):
    """What a structured family's builder certifies (``kinds.structured.build_family.FamilyParts``):
    its method, objective and lower bound — with its own upper bound and gap where its solver
    states them (the residual family). The plan's frame adds the rest
    (:class:`StructuredCertificate`)."""

    method: str
    norm: str
    lower: float
    upper: NotRequired[float]
    gap: NotRequired[float]
    achieved: NotRequired[float]
    symmetry: NotRequired[SymmetryBound]
    subspace: NotRequired[SubspaceBound]
    laplace_factorization: NotRequired[LaplaceFactorizationBound | None]


class StructuredCertificate(TypedDict):
    """``certificate`` of a structured plan: ``lower ≤ norm ≤ upper`` with its gap, the value
    this plan ``achieved``, the method that certifies it, and the bounds that raised the lower
    one (``symmetry``, ``subspace``) or bound other mechanisms (``laplace_factorization``)."""

    method: str
    norm: str
    upper: float
    lower: float
    gap: float
    achieved: float
    symmetry: NotRequired[SymmetryBound]
    subspace: NotRequired[SubspaceBound]
    #: None unless the noise is Laplace; absent in plans written before the bound existed
    laplace_factorization: NotRequired[LaplaceFactorizationBound | None]


class StructuredExpectedError(TypedDict):
    """``expected_error`` of a structured plan (``structured_plan.expected_error``)."""

    per_query_std_max: float
    per_query_std_min: float
    per_query_std_mean: float
    rmse: float
    max_variance: float
    total_variance: float
    expected_max_bound: float
    rounding_bias_max: float
    noise_variance: float
    bias_per_record: float
    objective: str
    ci_method: str
    ci_multiplier: float
    variance_note: str


# ---------------------------------------------------------------------------------------
# projection plans: ``projection_plan.ProjectionPlan``


class DecoderRecord(TypedDict):
    """``decoder``: the projection the executor runs on the released measurement
    (``projection_plan.projection_claims``)."""

    method: str
    gap_tol: float
    max_iter: int
    description: str
    #: the rows ℓ of T (jl)
    ell: NotRequired[int]
    #: the spectraplex's trace n·m (covariance)
    trace: NotRequired[int]
    #: what the answers are (the moment mechanisms)
    answers: NotRequired[str]


class ProjectionBounds(TypedDict):
    """``bounds`` of a projection plan: the RMSE bound per query and, where one applies, the
    any-mechanism lower bound with its witness."""

    upper_rmse: float
    upper_note: str
    lower_rmse: float | None
    lower_note: str | None
    #: absent in a schema-1 file
    lower_witness: NotRequired[SpectralWitness | None]


class ProjectionExpectedError(TypedDict):
    """``expected_error`` of a projection plan."""

    rmse_bound: float
    linear_rmse: float | None
    measurement_rmse: float | None
    #: absent in a schema-1 file
    rmse_bound_95: NotRequired[float | None]
    rmse_bound_95_note: NotRequired[str]


class ProjectionLowerBound(TypedDict):
    """``projection_plan``'s any-mechanism bound: its value, note and witness."""

    value: float
    note: str
    witness: SpectralWitness | None


# ---------------------------------------------------------------------------------------
# local plans: ``kinds.local.plan.LocalPlan``


class RandomizerRecord(TypedDict):
    """``randomizer``: one user's message (``kinds.local.plan.randomizer_spec``): kind, ε, dimension
    m, scale (B or σ), the per-coordinate variance bound v; δ and the sensitivity for the
    Gaussian randomizer."""

    kind: str
    epsilon: float
    dim: int
    scale: float
    variance: float
    delta: NotRequired[float]
    sensitivity: NotRequired[float]


class PredictedErrors(TypedDict):
    """Worst-query and RMS error, in fractions of n, at n messages (``kinds.local.plan.predicted_errors``)."""

    predicted_noise: float
    predicted_max_error: float
    predicted_rmse: float


class LocalLowerBounds(TypedDict):
    """The sample size every pure ε-LDP protocol needs for the target α (Edmonds, Nikolov &
    Ullman 2020, Thm 23; ``kinds.local.plan``): None, with the reason, for an (ε, δ) guarantee."""

    n_needed_lower: float | None
    n_needed_lower_note: str
    n_needed_lower_distributional: NotRequired[float]


class LocalDerivedBounds(TypedDict):
    """The statements of :class:`LocalBounds` re-derived from a local plan's arrays
    (``kinds.local.plan.derived_bounds``): the predicted errors, and the users needed with a target α."""

    predicted_noise: float
    predicted_max_error: float
    predicted_rmse: float
    n_needed_predicted: NotRequired[float]
    n_needed_upper: NotRequired[float]
    n_needed_lower: NotRequired[float | None]
    n_needed_lower_distributional: NotRequired[float]
    n_needed_lower_note: NotRequired[str]


class LocalBounds(LocalDerivedBounds):
    """``bounds`` of a local plan: the certified γ₂(W; η), the residual, the planning n and
    target α, the η grid searched, and the statements of :class:`LocalDerivedBounds` (the
    predicted errors and — with a target α — the users needed, ``kinds.local.plan.derived_bounds``)."""

    gamma2_upper: float
    gamma2_lower: float
    gap: float
    residual: float
    plan_n: int
    target_alpha: float | None
    eta_grid: list[float]
