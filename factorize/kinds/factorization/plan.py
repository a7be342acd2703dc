"""The mechanism plan: what to release, how, with which noise, and what error to expect.

A :class:`Plan` is pure data plus a :class:`~factorize.planner.certificate.Certificate` (numpy
arrays); nothing here imports cvxpy, a solver or the privacy calibration (so the executor
can load a plan with numpy alone). The mechanism it describes is (docs/math.md §2 and §6)

    M(h) = R · ( γ·round(A h / γ) + γ·Y ),      Y_j i.i.d. exact integer noise,

for the exact lattice samplers ("discrete_gaussian" / "discrete_laplace" on ``γZ``), or
``R (A h + Z)`` with floating-point Z for a ``"float"`` sampler (only the ℓ2 K-norm, which has
no exact sampler here; the executor refuses it unless explicitly allowed).

Expected error (stored in the plan, recomputed by ``kinds.factorization.verify.verify_plan``): with ``v`` the
per-coordinate noise variance bound (Gaussian σ², also a bound for the discrete Gaussian by
CKS20 Cor. 9; Laplace 2b², also a bound for the discrete Laplace; K-norm E‖Z‖²/m, the noise
being isotropic) and ``r_i`` the rows of R:

* per-query standard deviation ``√v·‖r_i‖``; RMSE ``√v·‖R‖_F/√k``;
* expected max error: Gaussian ``≤ √v·‖R‖_{2→∞}·√(2 ln 2k)`` (the discrete Gaussian is
  σ-subgaussian, CKS20), otherwise ``≤ √v·‖R‖_F`` (Jensen: E max ≤ √(Σ E X_i²));
* plus, for lattice releases, the deterministic rounding bias ``|bias_i| ≤ (γ/2)‖r_i‖₁``,
  reported separately and added to the confidence intervals;
* plus the reconstruction bias ``|((W − RÃ)h)_i| ≤ β·n`` (``plan.bias``: β the certified
  residual, η for an approximate-γ₂ plan), reported per record and added to the intervals
  with a bound on n taken from the release.

95% intervals: ``estimate ± (c·se_i + (γ/2)‖r_i‖₁ + β·n⁺)`` where n⁺ bounds n except with
probability α₁ = 10⁻³ and c is the two-sided quantile at α₂ = 0.049 (normal for Gaussian
noise, Chebyshev otherwise): the union bound gives coverage ≥ 95%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from factorize.choices import SAMPLERS
from factorize.factorization import Factorization
from factorize.plan.manifest import ci_method, ci_multiplier, domain_manifest, guarantee_text, noise_manifest
from factorize.plan.records import (
    BiasRecord,
    CertificateRecord,
    ExpectedError,
    Provenance,
    WorkloadRecord,
)
from factorize.planner.certificate import Certificate

if TYPE_CHECKING:  # typed values only; the privacy layer is imported where it computes
    from factorize.privacy import Guarantee, Neighbouring, NoiseSpec
    from workloads import Domain


KNOWN_SAMPLERS = SAMPLERS




@dataclass(frozen=True)
class Plan:
    """Everything a release needs; see the module docstring and ``codec`` for the format.

    Typed values: the domain, neighbouring relation, guarantee and noise spec are a
    ``workloads.Domain``, a ``privacy.Neighbouring``, a ``privacy.Guarantee`` and a
    ``privacy.NoiseSpec``; they become JSON only in :meth:`manifest` (the file boundary) and
    are parsed back, or the file refused, in ``codec.load_plan``.

    Frozen: a plan is a value (a changed plan is a new one, ``dataclasses.replace``). Only
    ``provenance`` has a default: a plan may record none. The manifest's sections are typed
    records (``plan.records``, checked by the reader); they are not read-only (a mapping proxy
    is shallow: their nested records would stay mutable), and what the release trusts of them
    is re-derived by the verifier, never read from the plan.
    """

    #: the plan kind (``factorize.kinds``) this class holds
    plan_kind: ClassVar[str] = "factorization"

    workload: WorkloadRecord          # spec, fingerprint, shape [k, N]
    domain: Domain                    # attribute names and sizes (row-major, attr 0 slowest)
    relation: Neighbouring
    guarantee: Guarantee
    certificate: Certificate          # factorization (R, A) + dual witness
    bounds: CertificateRecord         # the manifest's "certificate": upper, lower, gap, residual, …
    noise: NoiseSpec
    #: a :class:`~factorize.plan.records.PostprocessRecord` (checked by the reader), or None;
    #: typed as a mapping while the executor reads it as ``plan.postprocess or {}``
    postprocess: Mapping[str, Any] | None
    expected_error: ExpectedError
    bias: BiasRecord | None           # residual_bound β, n_bound method (None: a schema-1 file)
    n_weights: tuple[np.ndarray, ...]  # b_j per Kronecker factor of W (() without weights)
    embedded: dict[str, Any]          # fingerprint → custom matrix
    schema_version: int               # of the file it was read from (or written to)
    #: whether the planner's sensitivity was exact (True) or a certified upper bound; None
    #: where the file does not say
    sensitivity_exact: bool | None
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def factorization(self) -> Factorization:
        return self.certificate.factorization

    @property
    def norm(self) -> str:
        return self.certificate.norm

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload["shape"]
        return int(k), int(N)

    @property
    def strategy_rows(self) -> int:
        return self.factorization.strategy_rows

    def manifest(self) -> dict[str, Any]:
        """The JSON manifest (without the container's format/version/arrays keys)."""
        from factorize.plan.embedded import embedded_listing

        fact = self.factorization
        return {
            "plan_kind": self.plan_kind,
            "workload": {**self.workload, "embedded": embedded_listing(self.embedded)},
            "domain": domain_manifest(self.domain),
            "neighbouring": self.relation.key,
            "guarantee": self.guarantee.to_dict(),
            "factorization": {
                "norm": self.certificate.norm, "eta": self.certificate.eta,
                "kron_factors": len(fact.R_factors), "strategy_rows": fact.strategy_rows,
                "R_shapes": [list(R.shape) for R in fact.R_factors],
                "A_shapes": [list(A.shape) for A in fact.A_factors],
            },
            "certificate": dict(self.bounds),
            "noise": noise_manifest(self.noise, sensitivity_exact=self.sensitivity_exact),
            "postprocess": None if self.postprocess is None else dict(self.postprocess),
            "expected_error": dict(self.expected_error),
            "bias": {} if self.bias is None else dict(self.bias),
            "provenance": dict(self.provenance),
        }

    def _postprocess_line(self) -> str:
        post = self.postprocess
        if not post:
            return "none"
        if post["method"] != "least_squares":
            return post["method"]
        n = post.get("n")
        c = post.get("bound_coefficient")
        k = self.shape[0]
        bound = (f"; RMSE ≤ min({self.expected_error['rmse']:.6g}, √({c:.6g}·n/{k}))"
                 if c is not None else "")
        return ("least_squares: Frank–Wolfe projection onto n·conv{w_j} of the released answers, "
                + (f"public n = {n}" if n is not None else "n estimated from the release")
                + f", gap ≤ {post['gap_tol']:.3g}" + bound)

    def summary_lines(self) -> list[str]:
        """Human-readable summary (``factorize inspect``)."""
        # the dense reconstruction is R = W·A⁺ (planner.recovery): one estimate
        from factorize.structured.families import ONE_ESTIMATE

        k, N = self.shape
        gtxt = guarantee_text(self.guarantee)
        n, b, e = self.noise, self.bounds, self.expected_error
        grid = f", grid γ={n.grid:.6g}" if n.grid else ""
        lines = [
            f"workload    {self.workload['spec']}  ({k} queries × {N} cells)",
            f"fingerprint {self.workload['fingerprint']}",
            "domain      " + ", ".join(f"{a}={s}" for a, s in zip(self.domain.attributes,
                                                                 self.domain.sizes, strict=True)),
            f"guarantee   {gtxt} under {self.relation.key.replace('_', '/')} neighbours",
            f"strategy    m={self.strategy_rows} noisy measurements, "
            f"{len(self.factorization.R_factors)} Kronecker factor(s), norm {self.norm}",
            f"noise       {n.family} scale {n.scale:.6g} calibrated to {n.sensitivity_norm} "
            f"sensitivity {n.sensitivity:.6g} (base {n.base_sensitivity:.6g}); "
            f"sampler {n.sampler}{grid}",
            f"accounting  {n.accounting}",
            f"certificate lower {b['lower']:.10g} ≤ {self.norm} ≤ upper {b['upper']:.10g} "
            f"(gap {b['gap']:.3g}, residual {b['residual']:.3g})",
            f"error       per-query std {e['per_query_std_min']:.6g} … {e['per_query_std_max']:.6g}; "
            f"RMSE {e['rmse']:.6g}; E[max] ≤ {e['expected_max_bound']:.6g}"
            + (f"; rounding bias ≤ {e['rounding_bias_max']:.3g}" if e["rounding_bias_max"] else "")
            + (f"; bias ≤ {e['bias_per_record']:.3g}·n" if e.get("bias_per_record") else ""),
            f"estimates   {ONE_ESTIMATE}",
            f"postprocess {self._postprocess_line()}",
        ]
        from factorize.plan.lower_bound import laplace_bound_line

        lap = laplace_bound_line(b.get("laplace_factorization"), e)
        if lap:
            lines.insert(-1, lap)
        anyb = b.get("any_mechanism")
        if anyb:
            lines.insert(-1, f"any mech.   RMSE ≥ {anyb['value']:.4g} for every mechanism with this "
                             f"guarantee ({anyb['bound']})")
        prov = self.provenance
        if prov and prov.get("mechanism", "factorization") != "factorization":
            lines.insert(1, f"mechanism   {prov['mechanism']} (the certificate's lower bound is the "
                            "optimal factorization's: the gap is this mechanism's distance to it)")
        choice = prov.get("strategy_choice") if prov else None
        if choice and choice.get("candidates"):
            lines.insert(5, f"chosen      {choice['chosen']}: the best {choice['objective']} of "
                            f"{len(choice['candidates'])} candidates under this noise ("
                            + ", ".join(f"{n} {v:.4g}" for n, v in choice["candidates"].items()) + ")")
            search = (choice.get("optimized") or {}).get(choice["chosen"])
            if search:
                lines.insert(6, "search      " + search_text(search))
        if prov and prov.get("strategy_search"):
            from factorize.plan.search_record import search_lines

            lines += search_lines(prov["strategy_search"])
        if prov:
            lines.append(f"provenance  factorize {prov.get('versions', {}).get('factorize', '?')}, "
                         f"certificate from {prov.get('certificate_source', '?')}, "
                         f"solve {prov.get('solve_seconds', 0.0):.2f}s")
        return lines


# ---------------------------------------------------------------------------------------
# numpy helpers shared by build, checks and the executor


def search_text(record: dict[str, Any]) -> str:
    """One line on how an optimised strategy was found (``pure_dp.candidates`` record)."""
    parts = [f"{record.get('family', '?')}, base seed {record.get('seed', '?')}"]
    if record.get("winner"):
        parts.append(f"winning start {record['winner']}")
    for i, f in enumerate(record.get("factors") or []):
        if f:
            parts.append(f"factor {i}: {f['winner']}")
    if record.get("runners_up"):
        parts.append("runners-up (objective) " + ", ".join(f"{v:.6g}" for v in record["runners_up"][:3]))
    if record.get("seeds"):
        parts.append(f"{len(record['seeds'])} seeded restarts")
    return "; ".join(parts)










def row_l1_norms_R(fact: Factorization) -> np.ndarray:
    """``‖r_i‖₁`` for every query (Kronecker product of the factors' row ℓ1 norms)."""
    out = np.ones(1)
    for R in fact.R_factors:
        out = np.kron(out, np.abs(R).sum(axis=1))
    return out






def expected_error(fact: Factorization, noise: NoiseSpec,
                   bias_per_record: float = 0.0) -> ExpectedError:
    """The expected-error summary of a plan (module docstring); ``bias_per_record`` is β.
    (A forged plan's huge R overflows to inf here: claims that verify then refuses.)"""
    with np.errstate(over="ignore", invalid="ignore"):
        return _expected_error(fact, noise, bias_per_record)


def _expected_error(fact: Factorization, noise: NoiseSpec, bias_per_record: float) -> ExpectedError:
    k, _ = fact.shape
    sd = math.sqrt(noise.variance_bound)
    rn = fact.row_norms_R()
    grid = noise.grid
    bias_max = 0.5 * float(grid) * float(row_l1_norms_R(fact).max()) if grid else 0.0
    if noise.family == "gaussian":
        emax = sd * fact.row_norm_max_R() * math.sqrt(2.0 * math.log(2.0 * k))
        emax_note = "sigma·‖R‖_{2→∞}·sqrt(2 ln 2k) (subgaussian noise)"
    else:
        emax = sd * fact.frobenius_R()
        emax_note = "sd·‖R‖_F (Jensen, any noise distribution)"
    return {
        "per_query_std_max": sd * float(rn.max()),
        "per_query_std_min": sd * float(rn.min()),
        "per_query_std_mean": sd * float(rn.mean()),
        "rmse": sd * fact.frobenius_R() / math.sqrt(k),
        "expected_max_bound": emax + bias_max,
        "expected_max_method": emax_note + (" + rounding bias" if grid else ""),
        "rounding_bias_max": bias_max,
        "noise_variance_bound": sd * sd,
        "variance_note": {
            "gaussian": "sigma^2 (the discrete Gaussian's variance is <= sigma^2, CKS20 Cor. 9)",
            "laplace": "2 b^2 (the discrete Laplace on the grid has a smaller variance)",
            "l2_knorm": "E||Z||^2/m = (m+1)(Delta/eps)^2 per coordinate, isotropic",
        }[noise.family],
        "ci_method": ci_method(noise),
        "ci_multiplier": ci_multiplier(noise),
        "bias_per_record": float(bias_per_record),
        "bias_note": "|bias_i| <= bias_per_record * n (W - R·A residual, eta included); the "
                     "intervals add it with n bounded from the release (probability 1e-3)",
    }


def least_squares_bound_coefficient(fact: Factorization, noise: NoiseSpec) -> float | None:
    """``c`` with ``E‖ŷ − Wh‖₂² ≤ c·n`` for the exact least-squares estimator (Nikolov, Talwar & Zhang 2013, Lemma 1).

    With y = Wh ∈ n·K, K = conv{w_j}, the noisy answers ỹ = y + z (z = R·Z) and p the exact
    projection of ỹ onto n·K: ‖p − y‖² ≤ ⟨z, p − y⟩ ≤ n·(max_j⟨z, w_j⟩ − min_j⟨z, w_j⟩)
    ≤ 2n·max_j |⟨Z, Rᵀw_j⟩|. For Gaussian noise (σ-subgaussian, also the discrete Gaussian,
    CKS20) each ⟨Z, Rᵀw_j⟩ is σ·s_j-subgaussian with s_j = ‖Rᵀw_j‖₂ = ‖RᵀR a_j‖₂, so
    E max over the 2N signed terms ≤ σ·max_j s_j·√(2 ln 2N): c = 2σ·max_j s_j·√(2 ln 2N).
    Projection is also non-expansive toward y, so ‖p − y‖ ≤ ‖z‖ as well. ``None`` for
    non-Gaussian noise (no bound stated).
    """
    if noise.family != "gaussian":
        return None
    N = fact.shape[1]
    s = np.ones(1)
    with np.errstate(over="ignore"):  # a forged plan's huge R: inf, a claim verify refuses
        for R, A in zip(fact.R_factors, fact.A_factors, strict=True):
            s = np.kron(s, np.linalg.norm(R.T @ (R @ A), axis=0))
    sigma = math.sqrt(noise.variance_bound)
    return 2.0 * sigma * float(s.max()) * math.sqrt(2.0 * math.log(2.0 * N))


def least_squares_rmse_bound(coefficient: float | None, linear_rmse: float, n: float, k: int,
                             gap: float = 0.0) -> float:
    """RMSE bound of the least-squares estimate with Frank–Wolfe gap ``gap``:
    ``min(linear RMSE, √(c·n/k)) + √(2·gap/k)`` (f = ½‖·−ỹ‖² is 1-strongly convex, so an
    iterate with suboptimality ≤ gap is within √(2·gap) of the exact projection)."""
    exact = linear_rmse if coefficient is None else min(linear_rmse, math.sqrt(coefficient * n / k))
    return exact + math.sqrt(2.0 * max(gap, 0.0) / k)
