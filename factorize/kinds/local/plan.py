"""Local-model plans (Edmonds, Nikolov & Ullman 2020, Thm 10): an approximate factorization W ≈ R·A, a client
randomizer, and the error / sample-size bounds, with the dual certificate of γ₂(W; η).

Protocol: user j with record x_j sends one ε-LDP message Y_j with E[Y_j] = a_{x_j} (the column
of A for the record; ‖a_x‖₂ ≤ 1 for every x). The server releases the counts

    ŷ = R · Σ_j Y_j  ≈  W h,        h = histogram of the n records,

with bias |(R A − W) h|_i ≤ η·n (|W − RA| ≤ η entrywise, Σh = n) and noise R·Σ_j (Y_j − a_{x_j}):
per-query variance ≤ n·v·‖r_i‖² with v the per-coordinate variance bound of one message
(ℓ2 randomizer: E[Y Yᵀ] = B²·I/m — the hemisphere choice only flips Z's sign, so Z Zᵀ has the
uniform sphere's second moment I/m — hence v = B²/m; Gaussian: v = σ²).

Planning (:func:`build_local_plan`): for each η on a grid, the certified approximate γ₂
factorization (``planner.solve(W, "approx_gamma_2", eta)``, normalised so max_x ‖a_x‖ = 1 and
‖R‖_{2→∞} = γ₂(W; η)); with a target accuracy α the plan keeps the η that needs the fewest
users for it, otherwise the η minimising the predicted worst-query error at the planning size
n, in fractions of n:

    err(η) = η + ‖R‖_{2→∞} · √v · √(2 ln(2k) / n),

(a union bound over k subgaussian sums), and reports the n needed for a target error α,
n ≥ 2 ln(2k)·v·‖R‖²_{2→∞} / (α − η)², next to the lower bound every ε-LDP protocol needs
(Edmonds, Nikolov & Ullman 2020, Thm 23, ``kinds.local.lower_bound``). File: ``factorize.io.container`` format
``factorize-local-plan`` (arrays R, A, U, d).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from factorize.plan.errors import PlanError
from factorize.plan.files import LOCAL_FORMAT as FORMAT
from factorize.plan.files import PlanBytes
from factorize.plan.records import (
    LocalBounds,
    LocalDerivedBounds,
    LocalLowerBounds,
    PredictedErrors,
    Provenance,
    RandomizerRecord,
    WorkloadRecord,
)

if TYPE_CHECKING:  # typed values only; the privacy layer is imported where it computes
    from factorize.privacy import Guarantee
    from workloads import Domain

SCHEMA_VERSION = 1
RANDOMIZERS = ("l2", "gaussian")
#: η grid, as fractions of max|W|, searched by the planner.
ETA_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)
#: Normal quantile for the 95% intervals of the aggregator (CLT over n independent messages).
Z95 = 1.959963984540054


@dataclass(frozen=True)
class LocalPlan:
    """A local-model plan (module docstring). Frozen, like ``kinds.factorization.plan.Plan`` (a changed
    plan is a new one); only ``provenance`` has a default. The typed records
    (``plan.records``) are not read-only: ``verify_local_plan`` re-derives the randomizer and
    every bound from the arrays."""

    #: the plan kind (``factorize.kinds``) this class holds
    plan_kind: ClassVar[str] = "local"
    workload: WorkloadRecord
    domain: Domain
    guarantee: Guarantee            # pure_dp (l2 randomizer) or approx_dp (gaussian)
    randomizer: RandomizerRecord    # kind, epsilon, [delta], dim m, scale (B or σ), variance v
    eta: float
    R: np.ndarray
    A: np.ndarray
    U: np.ndarray
    d: np.ndarray
    bounds: LocalBounds             # gamma2 upper/lower, residual, planning n, errors, n needed
    embedded: dict[str, Any]        # fingerprint → custom matrix
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload["shape"]
        return int(k), int(N)

    def manifest(self) -> dict[str, Any]:
        """The JSON manifest (the only place typed values become JSON)."""
        from factorize.plan.embedded import embedded_listing
        from factorize.plan.manifest import domain_manifest

        return {"plan_kind": self.plan_kind,
                "workload": {**self.workload, "embedded": embedded_listing(self.embedded)},
                "domain": domain_manifest(self.domain),
                "guarantee": self.guarantee.to_dict(), "randomizer": dict(self.randomizer),
                "eta": float(self.eta), "bounds": dict(self.bounds),
                "provenance": dict(self.provenance)}

    def per_query_std(self, n: int) -> np.ndarray:
        """Standard deviation of each released count for n messages: √(n·v)·‖r_i‖."""
        return math.sqrt(n * float(self.randomizer["variance"])) * np.linalg.norm(self.R, axis=1)

    def summary_lines(self) -> list[str]:
        from factorize.plan.manifest import guarantee_text

        k, N = self.shape
        b, r = self.bounds, self.randomizer
        lines = [
            f"workload    {self.workload['spec']}  ({k} queries × {N} cells)",
            "mechanism   local (seed 003 Thm 10): each user sends one message; server R·ΣY",
            f"guarantee   {guarantee_text(self.guarantee)} for each user's message (local model)",
            f"randomizer  {r['kind']}: dim m={r['dim']}, scale {r['scale']:.6g}, per-coordinate "
            f"variance ≤ {r['variance']:.6g}",
            f"factorize   |W − R·A| ≤ η = {self.eta:.4g}; certified γ₂(W; η) ∈ [{b['gamma2_lower']:.6g}, "
            f"{b['gamma2_upper']:.6g}]",
            f"error       at n = {b['plan_n']}: worst query ≤ {b['predicted_max_error']:.4g}·n "
            f"(η bias {self.eta:.3g} + noise {b['predicted_noise']:.4g}), RMSE ≈ "
            f"{b['predicted_rmse']:.4g}·n",
        ]
        if b["target_alpha"] is not None:
            a = b["target_alpha"]
            lines.append(f"users       for error ≤ {a:g}·n on every query: this plan needs ≈ "
                         f"{b['n_needed_predicted']:.4g} (normal approximation), ≤ "
                         f"{b['n_needed_upper']:.4g} (proved, mgf union bound)")
            if b.get("n_needed_lower") is not None:
                lines.append(f"lower bound every pure ε-LDP protocol needs n ≥ {b['n_needed_lower']:.4g} "
                             f"(error on the sample) / ≥ {b['n_needed_lower_distributional']:.4g} "
                             "(error against the population) — seed 003 Thm 23, explicit constants")
            else:
                lines.append(f"lower bound {b.get('n_needed_lower_note', 'none')}")
        return lines


def randomizer_spec(kind: str, guarantee: Any, dim: int) -> RandomizerRecord:
    """Scale and per-coordinate variance bound of one message (module docstring)."""
    from factorize.kinds.local.randomizer import GaussianLocalRandomizer, L2Randomizer

    if kind == "l2":
        if guarantee.kind != "pure_dp":
            raise PlanError("the ℓ2 randomizer is the pure ε-LDP randomizer; use --randomizer "
                            "gaussian for (ε, δ)-LDP")
        ball = L2Randomizer(guarantee.epsilon, dim)
        return {"kind": "l2", "epsilon": guarantee.epsilon, "dim": dim, "scale": float(ball.scale),
                "variance": float(ball.scale) ** 2 / dim}
    if kind == "gaussian":
        if guarantee.kind != "approx_dp":
            raise PlanError("the Gaussian randomizer needs an (ε, δ) guarantee")
        gauss = GaussianLocalRandomizer(guarantee.epsilon, guarantee.delta, dim)
        return {"kind": "gaussian", "epsilon": guarantee.epsilon, "delta": guarantee.delta,
                "dim": dim, "scale": float(gauss.sigma), "variance": float(gauss.sigma) ** 2,
                "sensitivity": float(gauss.sensitivity)}
    raise PlanError(f"unknown randomizer {kind!r}; expected one of {RANDOMIZERS}")


def predicted_errors(R: np.ndarray, eta: float, variance: float, n: int) -> PredictedErrors:
    """Worst-query and RMS error (fractions of n) at n messages (module docstring)."""
    k = R.shape[0]
    rows = np.linalg.norm(R, axis=1)
    noise = float(rows.max()) * math.sqrt(variance * 2.0 * math.log(2.0 * k) / n)
    rmse = math.sqrt(variance * float(np.mean(rows ** 2)) / n)
    return {"predicted_noise": noise, "predicted_max_error": eta + noise,
            "predicted_rmse": math.sqrt(rmse ** 2 + eta ** 2)}


def n_needed(R: np.ndarray, eta: float, variance: float, alpha: float) -> float:
    """n with η + ‖R‖_{2→∞}√(2 v ln(2k)/n) ≤ α (∞ when α ≤ η)."""
    if alpha <= eta:
        return math.inf
    k = R.shape[0]
    g = float(np.linalg.norm(R, axis=1).max())
    return 2.0 * math.log(2.0 * k) * variance * g * g / (alpha - eta) ** 2


def compress(R: np.ndarray, A: np.ndarray, rtol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """The same mechanism with the shortest messages: A = U Σ Vᵀ, keep the r singular values
    above ``rtol·σ₁``, A' = U_rᵀ A (r×N), R' = R U_r. Then R'A' = R U_r U_rᵀ A = R A up to the
    dropped singular values, ‖a'_x‖ = ‖U_rᵀ a_x‖ ≤ ‖a_x‖ and ‖r'_i‖ ≤ ‖r_i‖: nothing the
    error depends on grows, and each user sends r ≤ min(m, N) numbers instead of m."""
    U, sv, _ = np.linalg.svd(A, full_matrices=False)
    r = int(np.sum(sv > rtol * sv[0])) if sv.size and sv[0] > 0 else 1
    Ur = U[:, :r]
    return R @ Ur, Ur.T @ A


def derived_bounds(R: np.ndarray, A: np.ndarray, Wd: np.ndarray, eta: float, g: Any,
                   spec: RandomizerRecord, n: int, alpha: float | None, cert: Any) -> LocalDerivedBounds:
    """The error and sample-size statements of a local plan, from its arrays (planner and
    verifier): predicted errors at the planning n; with a target α, the users needed (normal
    approximation and proved) and Edmonds, Nikolov & Ullman 2020, Thm 23's lower bounds."""
    predicted = predicted_errors(R, eta, spec["variance"], n)
    if alpha is None:
        return {**predicted}
    return {**predicted, "n_needed_predicted": n_needed(R, eta, spec["variance"], alpha),
            "n_needed_upper": _upper_n(R, A, Wd, eta, g, alpha, spec),
            **_lower_n(cert, Wd, eta, g, alpha)}


def _upper_n(R: np.ndarray, A: np.ndarray, Wd: np.ndarray, eta: float, g: Any, alpha: float,
             spec: RandomizerRecord) -> float:
    """A sample size that provably suffices (``kinds.local.lower_bound.local_upper_bound_n``): the
    union bound with the messages' mgf constant — σ = B for the ℓ2 randomizer (‖Y‖ = B, so
    ⟨θ, Y − a⟩ is bounded), σ for the Gaussian one. Larger than the normal-approximation
    ``n_needed_predicted`` (by about m for the ℓ2 randomizer): both are reported."""
    from factorize.factorization import Factorization
    from factorize.kinds.local.lower_bound import local_upper_bound_n

    ub = local_upper_bound_n(Factorization.dense(R, A), Wd, eta, g.epsilon, alpha,
                             sigma=float(spec["scale"]))
    return float(ub.n_upper)


def _lower_n(cert: Any, Wd: np.ndarray, eta: float, g: Any, alpha: float) -> LocalLowerBounds:
    """Edmonds, Nikolov & Ullman 2020, Thm 23's sample-size lower bounds from the certificate (``kinds.local.lower_bound``):
    pure ε-LDP only (the bound does not cover (ε, δ)); the empirical model (error on the
    sample, the release's meaning) and the distributional one (error against the population)."""
    if g.kind != "pure_dp":
        return {"n_needed_lower": None,
                "n_needed_lower_note": "no lower bound: seed 003 Thm 23 binds pure ε-LDP protocols"}
    from factorize.kinds.local.lower_bound import local_sample_size_lower_bound

    emp = local_sample_size_lower_bound(cert, Wd, eta, g.epsilon, alpha, error_model="empirical")
    dist = local_sample_size_lower_bound(cert, Wd, eta, g.epsilon, alpha, error_model="distributional")
    return {"n_needed_lower": float(emp.n_lower), "n_needed_lower_distributional": float(dist.n_lower),
            "n_needed_lower_note": emp.binds}


# ---------------------------------------------------------------------------------------
# file


def save_local_plan(plan: LocalPlan, path: str | Path) -> None:
    from factorize.plan.files import save_with_embedded

    save_with_embedded(path, FORMAT, SCHEMA_VERSION, plan.manifest(),
                       {"R": plan.R, "A": plan.A, "U": plan.U, "d": plan.d}, plan.embedded)


def load_local_plan(path: str | Path | PlanBytes) -> LocalPlan:
    from factorize.plan.files import guarded_load

    return guarded_load(_load, path, "local plan")


def _load(path: Path) -> LocalPlan:
    from factorize.plan.files import (
        PlanFormatError,
        check_finite,
        check_plan_kind,
        embedded_from,
        optional_record,
        read_plan_container,
        require_record,
        typed_values,
        workload_and_domain,
    )

    m, arrays = read_plan_container(path, FORMAT, SCHEMA_VERSION)
    check_plan_kind(path, m, LocalPlan.plan_kind)
    check_finite(path, arrays)
    arrays, embedded = embedded_from(path, m, arrays)
    if set(arrays) != {"R", "A", "U", "d"}:
        raise PlanFormatError(f"{path}: a local plan holds arrays R, A, U, d")
    shape, _ = workload_and_domain(path, m)
    values = typed_values(path, m, relation=False, noise=False)
    R, A = arrays["R"], arrays["A"]
    if R.ndim != 2 or A.ndim != 2 or R.shape[1] != A.shape[0] or (R.shape[0], A.shape[1]) != tuple(shape):
        raise PlanFormatError(f"{path}: R and A do not factor a {shape[0]}×{shape[1]} workload")
    rz = require_record(path, m, "randomizer", RandomizerRecord)
    if rz["kind"] not in RANDOMIZERS or rz["dim"] != A.shape[0]:
        raise PlanFormatError(f"{path}: the randomizer does not match A")
    eta = m.get("eta")
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not math.isfinite(eta) or eta < 0:
        raise PlanFormatError(f"{path}: eta must be a finite number ≥ 0")
    return LocalPlan(workload=require_record(path, m, "workload", WorkloadRecord), domain=values.domain,
                     guarantee=values.guarantee, randomizer=rz, eta=float(eta), R=R, A=A, U=arrays["U"],
                     d=arrays["d"], bounds=require_record(path, m, "bounds", LocalBounds),
                     provenance=optional_record(path, m, "provenance", Provenance),
                     embedded=embedded)


# ---------------------------------------------------------------------------------------
# verification


def verify_local_plan(plan: LocalPlan, *, workload: Any = None,
                      allow_weak_guarantee: bool = False) -> list[str]:
    """Failures (empty = pass): :func:`_verify_local`, any unexpected error a failure (a forged
    plan may break any assumption; verification refuses it instead of crashing)."""
    try:
        return _verify_local(plan, workload=workload, allow_weak_guarantee=allow_weak_guarantee)
    except MemoryError:
        return ["out of memory while verifying"]
    except RecursionError:
        return ["the plan is nested too deeply"]
    except Exception as exc:  # noqa: BLE001
        return [f"cannot verify: {exc}"]


def _verify_local(plan: LocalPlan, *, workload: Any = None,
                  allow_weak_guarantee: bool = False) -> list[str]:
    """Failures (empty = pass). One verification for every reader — ``local verify``, the
    aggregator and the clients (``client``/``simulate``): a client randomizes with no plan the
    verifier refuses.

    Privacy: the guarantee is valid and within the documented ceilings (``privacy.policy``),
    the randomizer's kind, dimension and scale are re-derived from it, and every column
    ‖a_x‖ ≤ 1 (a certified upper bound, ``numerics.column_norms_upper``: the randomizer's
    privacy argument covers the unit ball). Claims: the workload rebuilt from the plan alone
    (fingerprint, domain axes), η ≤ ``rules.ETA_MAX_FRACTION``·max|W| and a certified
    |W − RA| ≤ η, the certificate re-checked, and every stated error and sample size recomputed.
    """
    from factorize.numerics import NumericRangeError, column_norms_upper
    from factorize.plan.check_record import same_number
    from factorize.plan.checks import rebuild_workload
    from factorize.privacy.policy import guarantee_problems

    failures: list[str] = []

    def record(name: str, ok: bool, detail: str) -> bool:
        if not ok:
            failures.append(f"{name}: {detail}")
        return ok

    try:
        g = plan.guarantee
        problems = guarantee_problems(g)
        record("guarantee", not problems or allow_weak_guarantee,
               "protects too little: " + "; ".join(problems))
        spec = randomizer_spec(plan.randomizer["kind"], g, plan.A.shape[0])
        stated: Mapping[str, Any] = plan.randomizer  # key by key against the re-derived one
        rederived: Mapping[str, Any] = spec
        record("randomizer", all(stated.get(k) == v for k, v in rederived.items()
                                 if isinstance(v, str)) and all(
            same_number(stated.get(k), v, rel=1e-12) for k, v in rederived.items()
            if not isinstance(v, str)),
            f"{plan.randomizer!r} differs from the one re-derived from the guarantee {spec!r}")
    except (ValueError, KeyError, TypeError) as exc:
        record("randomizer", False, f"cannot re-derive: {exc}")
        return failures
    try:
        from factorize.kinds.local.randomizer import NORM_TOLERANCE

        cn = float(np.max(column_norms_upper(plan.A, "l2", "the strategy A")))
        record("columns", cn <= 1.0 + NORM_TOLERANCE,
               f"max_x ‖a_x‖ ≤ {cn!r} > 1 + {NORM_TOLERANCE:g} (the randomizer needs the unit ball)")
    except NumericRangeError as exc:
        record("columns", False, str(exc))
    if failures:
        return failures
    W = rebuild_workload(plan.workload, workload, record, plan.embedded, plan.domain)
    if W is None or failures:
        return failures
    try:
        _check_claims(plan, W, g, spec, record)
    except MemoryError:
        record("claims", False, "out of memory while checking")
    except Exception as exc:  # noqa: BLE001 - a forged plan may break any assumption: refuse it
        record("claims", False, f"cannot check: {exc}")
    return failures


def _check_claims(plan: LocalPlan, W: Any, g: Any, spec: RandomizerRecord, record: Any) -> None:
    """η bounded, |W − RA| ≤ η certified, the certificate and every stated bound re-derived."""
    from factorize.factorization import Factorization
    from factorize.plan.bias import residual_bound
    from factorize.plan.check_record import same_number
    from factorize.plan.rules import check_eta
    from factorize.planner.certificate import ApproxGamma2Witness, Certificate, verify

    Wd = W.dense()
    try:
        check_eta(plan.eta, W)
    except PlanError as exc:
        record("eta", False, str(exc))
        return
    res = residual_bound([Wd], [plan.R], [plan.A])
    record("W ≈ R·A", res <= plan.eta * (1 + 1e-12) + 1e-9 * float(np.max(np.abs(Wd))),
           f"max|W − RA| ≤ {res:.3g} > η = {plan.eta:.3g}")
    cert = Certificate("approx_gamma_2", Factorization.dense(plan.R, plan.A),
                       ApproxGamma2Witness(U=plan.U, d=plan.d), eta=plan.eta)
    v = verify(cert, Wd)
    b = plan.bounds
    from factorize.numerics import relative_gap

    record("certificate", v.passed and same_number(b["gamma2_lower"], v.lower)
           and same_number(b["gamma2_upper"], v.upper)
           and same_number(b["gap"], relative_gap(v.upper, v.lower), absolute=1e-12),
           f"re-verified lower {v.lower!r}, upper {v.upper!r}, gap "
           f"{relative_gap(v.upper, v.lower)!r} vs stated {b['gamma2_lower']!r}, "
           f"{b['gamma2_upper']!r}, {b['gap']!r}; {v.summary()}")
    computed = float(np.max(np.abs(Wd - plan.R @ plan.A)))
    record("residual", same_number(b["residual"], computed,
                                   absolute=1e-12 * max(1.0, float(np.max(np.abs(Wd))))),
           f"max|W − RA| = {computed:.3g}, the plan states {b['residual']!r}")
    grid = b["eta_grid"]
    wmax = float(np.max(np.abs(Wd)))
    searched = [e * wmax for e in ETA_GRID]
    record("eta grid", isinstance(grid, list) and plan.eta in grid and (
        grid == [plan.eta] or (len(grid) == len(searched)
                               and all(same_number(a, b_, absolute=1e-300) for a, b_ in zip(grid, searched, strict=True)))),
        f"the η grid {grid!r} is neither [η] nor the searched grid {searched!r}")
    n, alpha = b["plan_n"], b["target_alpha"]
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 1):
        raise PlanError(f"plan_n must be a positive integer, got {n!r}")
    if alpha is not None and not same_number(alpha, alpha):
        raise PlanError("target_alpha must be a number")
    derived: Mapping[str, Any] = derived_bounds(plan.R, plan.A, Wd, plan.eta, g, spec, n, alpha, cert)
    stated: Mapping[str, Any] = b  # key by key against the re-derived statements
    bad = [k for k, val in derived.items()
           if (isinstance(val, str) and stated.get(k) != val) or (val is None and stated.get(k) is not None)
           or (not isinstance(val, str) and val is not None and not (
               same_number(stated.get(k), val) or (math.isinf(val) and stated.get(k) == val)))]
    record("bounds", not bad, "the plan states other values for " + ", ".join(bad))
