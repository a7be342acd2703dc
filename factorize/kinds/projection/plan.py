"""Projection plans: measure, add noise, then project onto the feasible answers (not W = R·A).

Three of the geometric mechanisms release a noisy linear *measurement* of the data and decode it by a
projection — post-processing of released values only, run inside the executor:

* ``jl`` (Nikolov 2023, Alg. 1, pure ε-DP): measurement ``T W h`` with a random ``T ∈ R^{ℓ×k}``
  (±1/√ℓ, drawn at planning time from OS randomness and stored in the plan), ℓ2-ball K-norm
  noise with ``Δ = sensitivity of TW``, decode ``ŷ = W x*``, ``x* = argmin_{x ∈ n·Δ_N}
  ‖TWx − z̃‖`` (``geometry.jl``); ℓ minimises the explicit bound ``geometry.jl_error_bound``.
* ``covariance`` (Nikolov 2023, §6): records in {±1}^d, workload ``parity:d:2`` (the off-diagonal
  second moments Σ x_a x_b) or ``marginals:2x…x2:2`` (all 2-way marginals of d binary
  attributes, through the moments of (1, s) ∈ {±1}^{d+1}: :class:`MomentLayout`); the
  measurement is the upper triangle of the moment matrix with Gaussian (or Laplace /
  K-norm) noise; decode: ``n·I + offdiag(ṽ)`` projected onto ``{M ⪰ 0, tr M = n·m}`` by one
  eigendecomposition (``geometry.project_second_moment``), then the answers.
* ``relaxed-projection`` (Dwork, Nikolov & Talwar 2014, §4): the same release, projected onto the Grothendieck
  relaxation ``n·E_d = {M ⪰ 0, diag M = n}`` ⊇ n·conv{x xᵀ} by Frank–Wolfe whose linear step is
  a MAX-CUT-type SDP (``geometry.project_to_elliptope``) — d up to 100s of attributes; the
  data are read as records (the 2^d-cell histogram is never formed).

All three need the dataset size n for the projection; it is public only under replace-one
neighbours, so these plans require ``relation="replace"`` and a public ``n`` (the executor
refuses data of another size). The file is a ``factorize.io.container`` of format
``factorize-projection-plan`` (a factorization-plan reader refuses it by format).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from factorize.plan.errors import PlanError
from factorize.plan.records import (
    DecoderRecord,
    ProjectionBounds,
    ProjectionExpectedError,
    ProjectionLowerBound,
    Provenance,
    WorkloadRecord,
)

if TYPE_CHECKING:  # typed values only; the privacy layer is imported where it computes
    from factorize.privacy import Guarantee, Neighbouring, NoiseSpec
    from workloads import Domain

PROJECTION_KINDS = ("jl", "covariance", "relaxed-projection")
MOMENT_KINDS = ("covariance", "relaxed-projection")
#: Frank–Wolfe gap target, relative to the expected squared noise in the decode's space.
DECODE_GAP_FRACTION = 1e-3
DECODE_MAX_ITER = 20000


@dataclass(frozen=True)
class ProjectionPlan:
    """A measure-noise-project plan (module docstring); pure data, numpy arrays in ``arrays``.

    Frozen, like ``kinds.factorization.plan.Plan`` (a changed plan is a new one); only ``provenance`` has a
    default. The typed records (``plan.records``) are not read-only: the verifier re-derives
    the decoder, bounds and expected error the release uses (``PlanCheck.derived``)."""

    #: the plan kind (``factorize.kinds``) this class holds
    plan_kind: ClassVar[str] = "projection"

    kind: str
    workload: WorkloadRecord
    domain: Domain
    relation: Neighbouring            # always replace: n is public
    guarantee: Guarantee
    n: int
    noise: NoiseSpec
    decoder: DecoderRecord
    bounds: ProjectionBounds
    expected_error: ProjectionExpectedError
    arrays: dict[str, np.ndarray]     # T for jl, none for the moment mechanisms
    embedded: dict[str, Any]          # fingerprint → custom matrix
    schema_version: int               # of the file it was read from (or written to)
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload["shape"]
        return int(k), int(N)

    def manifest(self) -> dict[str, Any]:
        """The JSON manifest (the only place typed values become JSON)."""
        from factorize.plan.embedded import embedded_listing
        from factorize.plan.manifest import domain_manifest, noise_manifest

        return {"plan_kind": self.plan_kind, "kind": self.kind,
                "workload": {**self.workload, "embedded": embedded_listing(self.embedded)},
                "domain": domain_manifest(self.domain),
                "neighbouring": self.relation.key, "guarantee": self.guarantee.to_dict(),
                "n": int(self.n), "noise": noise_manifest(self.noise), "decoder": dict(self.decoder),
                "bounds": dict(self.bounds), "expected_error": dict(self.expected_error),
                "provenance": dict(self.provenance)}

    def summary_lines(self) -> list[str]:
        k, N = self.shape
        from factorize.plan.manifest import guarantee_text

        nz, b = self.noise, self.bounds
        gtxt = guarantee_text(self.guarantee)
        lines = [
            f"workload    {self.workload['spec']}  ({k} queries × {N} cells)",
            f"mechanism   {self.kind}: {self.decoder['description']}",
            f"fingerprint {self.workload['fingerprint']}",
            f"guarantee   {gtxt} under {self.relation.key.replace('_', '/')} neighbours, "
            f"public n = {self.n}",
            f"measure     m={nz.dim} noisy coordinates; {nz.family} scale {nz.scale:.6g} "
            f"calibrated to {nz.sensitivity_norm} sensitivity {nz.sensitivity:.6g}; "
            f"sampler {nz.sampler}",
            f"error       RMSE per query ≤ {b['upper_rmse']:.6g} ({b['upper_note']})",
        ]
        if b.get("lower_rmse") is not None:
            lines.append(f"lower bound RMSE per query ≥ {b['lower_rmse']:.6g} ({b['lower_note']})")
        if not nz.is_exact:
            from factorize.plan.manifest import FLOAT_NOISE_WARNING

            lines.append(f"warning     {FLOAT_NOISE_WARNING}")
        return lines


# ---------------------------------------------------------------------------------------
# the measurement and its sensitivity (shared by build, verification and the executor)


@dataclass(frozen=True)
class MomentLayout:
    """How a moment plan's workload maps to ±1 second moments of records s ∈ {±1}^d
    (s_a = 2·code_a − 1).

    * ``parity:d:2``: the answers are the pair products Σ s_a s_b (a < b); the measured
      matrix is d×d (``augmented`` False).
    * ``marginals:2x…x2:2`` (d binary attributes, all 2-way marginals): the measured matrix is
      that of the augmented records (1, s) ∈ {±1}^{d+1}: its first row holds Σ s_a, the rest
      Σ s_a s_b, and every 2-way marginal cell is affine in them with the public n
      (``geometry.moments_to_marginals``); ``augmented`` True.
    """

    d: int
    augmented: bool

    @property
    def m(self) -> int:
        """Side of the measured moment matrix."""
        return self.d + 1 if self.augmented else self.d

    @property
    def pairs(self) -> int:
        """Measured coordinates: the upper triangle of the m×m matrix."""
        return self.m * (self.m - 1) // 2

    def moments(self, codes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The exact measurement Σ_records (x_a x_b)_{a<b} from distinct 0/1 code rows and counts."""
        S = 2.0 * np.asarray(codes, dtype=np.float64) - 1.0
        if self.augmented:
            S = np.column_stack([np.ones(S.shape[0]), S])
        M = (S * np.asarray(counts, dtype=np.float64)[:, None]).T @ S  # exact: integers < 2^53
        return M[np.triu_indices(self.m, 1)]

    def answers(self, M: np.ndarray, n: float) -> np.ndarray:
        """The workload's answers from a (projected) m×m moment matrix."""
        if self.augmented:
            from factorize.geometry.moment_bodies import moments_to_marginals

            return moments_to_marginals(M, n=n).reshape(-1)
        return M[np.triu_indices(self.m, 1)]

    def answer_rmse_factor(self) -> float:
        """RMSE of the answers ≤ factor × RMSE of the measured pairs. parity: 1. marginals:
        a cell's error is (σ_i e_a + σ_j e_b + σ_iσ_j e_ab)/4, whose squares sum over a table's
        4 cells to (e_a² + e_b² + e_ab²)/4, so over all tables ((d−1)Σe_a² + Σe_ab²)/4 ≤
        (d−1)‖ē‖²/4; with 2d(d−1) cells and d(d+1)/2 pairs the factor is √((d+1)/16)."""
        return math.sqrt((self.d + 1) / 16.0) if self.augmented else 1.0

    def linear_answer_rmse(self, sigma: float) -> float:
        """RMSE of the answers of the unprojected release, i.i.d. noise of variance σ² per
        pair: σ (parity); marginals: E Σ_cells err² = ((d−1)·d + d(d−1)/2)σ²/4 over 2d(d−1)
        cells, i.e. RMSE = σ·√(3/16)."""
        return sigma * math.sqrt(3.0 / 16.0) if self.augmented else sigma

    def answer_rmse_bound(self, sigma: float, n: float, gap: float = 0.0) -> float:
        """RMSE bound of the projected answers: f × ``moment_rmse_bound`` (the measured pairs'
        bound, whose non-expansive branch is σ), f = :meth:`answer_rmse_factor`.

        Not min(unprojected answer RMSE, …): the projection is non-expansive for the matrix
        in Frobenius norm, not for the marginal cells, which weight the first moments d − 1
        times — a projection can move error from pairs to first moments and *raise* the
        cells' error above the unprojected σ·√(3/16) (measured in reports/geometric.md)."""
        return self.answer_rmse_factor() * moment_rmse_bound(sigma, self.m, n, sigma, gap)


def moment_layout(W: Any) -> MomentLayout:
    """The :class:`MomentLayout` of a moment plan's workload; PlanError for other workloads."""
    spec = getattr(W, "spec", "") or ""
    parts = spec.split(":")
    if len(parts) == 3 and parts[0] == "parity" and parts[2] == "2" and parts[1].isdigit():
        d = int(parts[1])
        expected = (d * (d - 1) // 2, 2 ** d)
        layout = MomentLayout(d, False)
    elif (len(parts) == 3 and parts[0] == "marginals" and parts[2] == "2"
          and all(p == "2" for p in parts[1].split("x")) and parts[1].count("x") >= 1):
        d = parts[1].count("x") + 1
        expected = (2 * d * (d - 1), 2 ** d)
        layout = MomentLayout(d, True)
    else:
        raise PlanError(f"the {'/'.join(MOMENT_KINDS)} mechanisms release second moments of "
                        "binary records: workload parity:d:2 or marginals:2x…x2:2, got "
                        f"{spec!r}")
    if tuple(W.shape) != expected:
        raise PlanError(f"workload {spec!r} has shape {tuple(W.shape)}, expected {expected}")
    return layout


def moment_sensitivity(d: int, norm: str, relation: str) -> float:
    """Sensitivity of v(x) = (x_a x_b)_{a<b}, x ∈ {±1}^d (exact, by the flip-set argument).

    add/remove: ‖v(x)‖₂ = √(d(d−1)/2), ‖v(x)‖₁ = d(d−1)/2. replace: x' = x flipped on a set S
    changes exactly the |S|(d−|S|) pairs with one end in S, each by 2, so
    Δ₂ = 2√(⌊d/2⌋⌈d/2⌉) and Δ₁ = 2⌊d/2⌋⌈d/2⌉ (maximised at |S| = ⌊d/2⌋).
    """
    from factorize.numerics import round_up

    pairs = d * (d - 1) // 2
    cut = (d // 2) * ((d + 1) // 2)
    # integers are exact in float64 (< 2^53); a square root is rounded up (certified)
    if relation == "add_remove":
        return round_up(math.sqrt(pairs), 1) if norm == "l2" else float(pairs)
    return round_up(2.0 * math.sqrt(cut), 1) if norm == "l2" else 2.0 * cut


def moment_matrix(v: np.ndarray, d: int, n: float) -> np.ndarray:
    """The symmetric ±1 second-moment matrix n·I + offdiag(v), v in the parity:d:2 row order
    (pairs (a, b), a < b, lexicographic — the order of ``workloads`` ``parity:d:2``)."""
    M = np.zeros((d, d))
    iu = np.triu_indices(d, 1)
    M[iu] = v
    M = M + M.T
    M[np.diag_indices(d)] = n
    return M


def moment_rmse_bound(sigma: float, d: int, n: float, linear_rmse: float, gap: float = 0.0) -> float:
    """RMSE bound per pair for both moment decoders (Gaussian noise of scale σ per pair).

    Let Z be the symmetric noise matrix (zero diagonal, σ-subgaussian entries above it), M the
    true moments and P the exact projection of M + Z onto a convex body B ∋ M contained in
    n·{X ⪰ 0, tr X = n·d}/n (both bodies are). Then ‖P − M‖_F² ≤ ⟨Z, P − M⟩ ≤
    n·d·(λ_max(Z) − λ_min(Z)) ≤ 2nd‖Z‖₂, and by the matrix Gaussian series bound (Tropp 2015,
    Thm 4.1.1, variance ‖Σ A_i²‖ = σ²(d−1)): E‖Z‖₂ ≤ σ√(2(d−1) ln(2d)). The released pairs
    are half the off-diagonal entries, so per pair E‖v̂ − v‖²/k ≤ n·d·σ√(2(d−1)ln 2d)/k; the
    projection is non-expansive toward M, so also ≤ the linear RMSE. A Frank–Wolfe iterate
    with gap g adds √(g/k) (½‖·‖_F² is 1-strongly convex: ‖X − P‖_F ≤ √(2g), half of it on
    the released pairs in squared norm).
    """
    k = d * (d - 1) // 2
    proj = n * d * sigma * math.sqrt(2.0 * (d - 1) * math.log(2.0 * d)) / k
    return min(linear_rmse, math.sqrt(proj)) + math.sqrt(max(gap, 0.0) / k)


# ---------------------------------------------------------------------------------------
# building


def projection_claims(kind: str, W: Any, g: Any, n: int, noise: Any,
                      ell: int | None, lower_witness: Any = None
                      ) -> tuple[DecoderRecord, ProjectionBounds, ProjectionExpectedError]:
    """The decoder parameters, error bounds and expected error a projection plan states,
    computed from the workload, the guarantee, n and the (verified) noise — by the planner
    and again by the verifier, which refuses a plan stating anything else. ``lower_witness``:
    the stated witness of the any-mechanism bound (the verifier evaluates it there). ``noise``:
    the plan's ``privacy.NoiseSpec``."""
    k = W.shape[0]
    decoder: DecoderRecord
    if kind == "jl":
        from factorize.geometry.jl import jl_error_bound, workload_diameter

        if ell is None:
            raise PlanError("a jl plan's claims need its projection dimension ℓ (the rows of T)")
        Wd = W.dense()
        norms = np.linalg.norm(Wd, axis=0)
        diam = workload_diameter(Wd)
        energy = ell * (ell + 1) * float(noise.scale) ** 2  # E‖Z‖² of the ℓ2-ball K-norm
        gap_tol = DECODE_GAP_FRACTION * energy
        bound = jl_error_bound(ell, n, g.epsilon, k, norms, diameter=diam, relation="replace",
                               fw_gap=gap_tol)
        decoder = {"method": "jl", "gap_tol": gap_tol, "max_iter": DECODE_MAX_ITER, "ell": ell,
                   "description": f"ŷ = W·argmin_(x ∈ n·Δ) ‖TWx − z̃‖ with T ∈ R^({ell}×{k}) ±1/√ℓ "
                                  "(seed 000 Alg. 1; ℓ minimises the explicit error bound)"}
        upper = min(bound.total, bound.trivial) / math.sqrt(k)
        upper_note = ("explicit JL bound (geometry.jl_error_bound), expectation over T and Z"
                      if bound.useful else "the diameter bound n·max‖w_i − w_j‖ (the JL bound is "
                      "larger at this n·ε)")
        sigma_lin = sigma_meas = None
    else:
        lay = moment_layout(W)
        m_dim, pairs = lay.m, lay.pairs
        var = noise.variance_bound  # calibrated for dim = pairs
        sigma_meas = math.sqrt(var)
        factor = lay.answer_rmse_factor()
        gap_tol = DECODE_GAP_FRACTION * pairs * var
        what = ("moments n·I + offdiag(ṽ)" if not lay.augmented else
                "the augmented moments of (1, s) (first moments and pair products)")
        if kind == "covariance":
            decoder = {"method": "spectraplex", "trace": n * m_dim, "gap_tol": 0.0, "max_iter": 0,
                       "description": f"{what} projected onto {{M ⪰ 0, tr M = n·{m_dim}}} by one "
                                      "eigendecomposition (seed 000 §6)"}
            gap_tol = 0.0
        else:
            decoder = {"method": "elliptope", "gap_tol": gap_tol, "max_iter": 2000,
                       "description": f"{what} projected onto the Grothendieck relaxation "
                                      "{M ⪰ 0, diag M = n} by Frank–Wolfe with a MAX-CUT-type "
                                      "SDP step (seed 001 §4)"}
        decoder["answers"] = "marginal cells (moments_to_marginals)" if lay.augmented else "pair products"
        sigma_lin = lay.linear_answer_rmse(sigma_meas)
        if noise.family == "gaussian":
            upper = lay.answer_rmse_bound(sigma_meas, n, gap_tol)
            upper_note = ("f·(min(σ, √(n·m·σ·√(2(m−1) ln 2m)/pairs)) + √(gap/pairs)), "
                          f"f = {factor:.4g} (MomentLayout.answer_rmse_bound)")
        else:
            upper = factor * (sigma_meas + math.sqrt(gap_tol / pairs))
            upper_note = f"f·(σ + √(gap/pairs)) (non-expansive for the matrix), f = {factor:.4g}"
    lower = _lower_bound(W, g, n, kind, lower_witness)
    bounds: ProjectionBounds = {"upper_rmse": upper, "upper_note": upper_note,
                                "lower_rmse": None if lower is None else lower["value"],
                                "lower_note": None if lower is None else lower["note"],
                                "lower_witness": None if lower is None else lower["witness"]}
    expected: ProjectionExpectedError = {
        "rmse_bound": upper, "linear_rmse": sigma_lin, "measurement_rmse": sigma_meas,
        "rmse_bound_95": None if upper is None else math.sqrt(20.0) * upper,
        "rmse_bound_95_note": "the realised RMSE exceeds √20 × rmse_bound with probability "
                              "≤ 5% (Markov on the mean squared error)"}
    return decoder, bounds, expected


def _lower_bound(W: Any, g: Any, n: int, kind: str, witness: Any = None) -> ProjectionLowerBound | None:
    """A lower bound on any mechanism's RMSE (``plan.lower_bound``), with a note and its
    witness; or None. With ``witness`` (a stated one), evaluated there without a search."""
    from factorize.plan.lower_bound import any_mechanism_lower_bound

    b = any_mechanism_lower_bound(W, g, "replace", n, witness=witness)
    return None if b is None else {"value": b["value"], "note": f"{b['bound']}; {b['binds']}",
                                   "witness": b.get("witness")}
