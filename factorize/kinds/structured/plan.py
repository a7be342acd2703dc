"""Structured plans: a union-of-Kronecker strategy and a sum-of-Kronecker reconstruction
(``factorize.structured``), measured per attribute subset — never over the N cells.

The mechanism is the factorization mechanism of ``kinds.factorization.plan``,

    M(h) = R · γ(round(Ã h / γ) + Y),      Y_j i.i.d. exact discrete Gaussian / Laplace,

with ``Ã h`` computed block by block from the records' marginal tables (block b needs only the
table of its support) and ``R`` applied term by term. Every answer has the exact variance
``v·‖r_i‖²`` (``structured.reconstruction``), v the per-coordinate variance of the noise
actually sampled; the 95% interval is ``estimate ± (c·se + (γ/2)‖r_i‖₁ + β·n⁺)`` as for dense
plans (``kinds.factorization.plan``), with n⁺ from the total's measurement when the strategy measures it.

File: ``factorize-plan`` **schema version 3** (the same container and integrity rules as every
plan, ``plan.files``): the manifest has ``plan_kind: "structured"`` and a ``strategy`` section
(family, counts); the arrays are the family's encoding (``structured.residual``:
``strategy.*``, ``recon.*``, ``U.n``/``V.n``/``mean.n``; ``structured.union`` and
``structured.marginal_weights``: ``A.*``, ``R.*`` and the term table) plus the certificate's (``cert.*``). A plan's size is proportional to its
parameters — Σ_T (blocks) + Σ_j n_j² (bases) — never to N or k·N.

Typed values: the plan holds a ``workloads.Domain``, a ``privacy.Guarantee``, a
``privacy.Neighbouring`` and a ``privacy.NoiseSpec``; they become JSON only in
:meth:`StructuredPlan.manifest` (the file boundary).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from factorize.plan.files import PlanBytes
from factorize.plan.manifest import domain_manifest, guarantee_text, noise_manifest
from factorize.plan.records import (
    BiasRecord,
    PostprocessRecord,
    Provenance,
    StructuredCertificate,
    StructuredExpectedError,
    WorkloadRecord,
)

if TYPE_CHECKING:  # typed values only; the structure and privacy layers are imported where used
    from factorize.privacy import Guarantee, Neighbouring, NoiseSpec
    from factorize.structured.reconstruction import StructuredReconstruction
    from factorize.structured.strategy import StructuredStrategy
    from workloads import Domain

FORMAT = "factorize-plan"
SCHEMA_VERSION = 3
PLAN_KIND = "structured"



@dataclass(frozen=True)
class StructuredPlan:
    """A structured mechanism plan (module docstring).

    Frozen, like ``kinds.factorization.plan.Plan`` (a changed plan is a new one); only ``provenance`` and
    ``postprocess`` (``postprocess.plan_option``: None, or the projection / rounding of the
    released tables that ``run`` adds) have defaults. The typed records (``plan.records``)
    are not read-only: the verifier re-derives what the release trusts of them."""

    #: the plan kind (``factorize.kinds``) this class holds
    plan_kind: ClassVar[str] = "structured"

    workload: WorkloadRecord          # spec, fingerprint, shape [k, N]
    domain: Domain
    relation: Neighbouring
    guarantee: Guarantee
    norm: str                         # the objective: gamma_f (total) / gamma_2 (worst query)
    strategy: StructuredStrategy      # the measured factors
    reconstruction: StructuredReconstruction
    #: the family's manifest fields: each family's own encoding (``family`` and what its codec,
    #: ``structured.families``, decodes and checks), so no one record types them
    structure: dict[str, Any]
    encoding: dict[str, np.ndarray]   # the family's arrays, as stored
    noise: NoiseSpec
    certificate: StructuredCertificate  # method, upper, lower, gap, achieved
    certificate_arrays: dict[str, np.ndarray]
    expected_error: StructuredExpectedError
    bias: BiasRecord
    n_weights: dict[str, np.ndarray]  # structured.records ({} without weights)
    embedded: dict[str, Any]          # fingerprint → custom matrix
    schema_version: int               # of the file it was read from (or written to)
    provenance: Provenance = field(default_factory=Provenance)
    postprocess: PostprocessRecord | None = None

    @property
    def shape(self) -> tuple[int, int]:
        k, N = self.workload["shape"]
        return int(k), int(N)

    @property
    def family(self) -> str:
        return str(self.structure["family"])

    def manifest(self) -> dict[str, Any]:
        """The JSON manifest (the only place typed values become JSON)."""
        from factorize.plan.embedded import embedded_listing

        return {
            "plan_kind": self.plan_kind,
            "workload": {**self.workload, "embedded": embedded_listing(self.embedded)},
            "domain": domain_manifest(self.domain),
            "neighbouring": self.relation.key,
            "guarantee": self.guarantee.to_dict(),
            "norm": self.norm,
            "strategy": dict(self.structure),
            "certificate": dict(self.certificate),
            "noise": noise_manifest(self.noise),
            "expected_error": dict(self.expected_error),
            "bias": dict(self.bias),
            "provenance": dict(self.provenance),
            **({} if self.postprocess is None else {"postprocess": dict(self.postprocess)}),
        }

    def arrays(self) -> dict[str, np.ndarray]:
        return {**self.encoding, **self.certificate_arrays, **self.n_weights}

    def summary_lines(self) -> list[str]:
        """Human-readable summary (``factorize inspect``)."""
        k, N = self.shape
        s, e, c, n = self.strategy, self.expected_error, self.certificate, self.noise
        obj = {"gamma_f": "total variance (γ_F)", "gamma_2": "worst-query variance (γ₂)"}[self.norm]
        grid = f", grid γ={n.grid:.6g}" if n.grid else ""
        from factorize.structured.families import codec, estimate_words

        fam = codec(self.family).summary
        lines = [
            f"workload    {self.workload['spec'][:120]}  ({k} queries × {N} cells)",
            f"fingerprint {self.workload['fingerprint']}",
            "domain      " + ", ".join(f"{a}={sz}" for a, sz in zip(self.domain.attributes,
                                                                 self.domain.sizes, strict=True)),
            f"guarantee   {guarantee_text(self.guarantee)} under "
            f"{self.relation.key.replace('_', '/')} neighbours",
            f"strategy    structured, {fam}: {len(s.blocks)} blocks, m={s.m} measurements "
            f"from {len(s.supports())} marginal tables; optimises {obj}",
            f"noise       {n.family} scale {n.scale:.6g} calibrated to {n.sensitivity_norm} "
            f"sensitivity {n.sensitivity:.6g} (base {n.base_sensitivity:.6g}); sampler "
            f"{n.sampler}{grid}",
            f"certificate lower {c['lower']:.10g} ≤ {self.norm} ≤ upper {c['upper']:.10g} "
            f"(gap {c['gap']:.3g}; {c['method']}"
            + (f"; lower bound from the {c['symmetry']['method']}" if isinstance(c.get("symmetry"), dict)
               else "")
            + (f"; lower bound from the {c['subspace']['method']}" if isinstance(c.get("subspace"), dict)
               else "") + f"); this plan achieves {c['achieved']:.10g}",
            f"estimates   {estimate_words(self.family)}",
            f"error       per-query std {e['per_query_std_min']:.6g} … {e['per_query_std_max']:.6g}; "
            f"RMSE {e['rmse']:.6g}; E[max] ≤ {e['expected_max_bound']:.6g}"
            + (f"; rounding bias ≤ {e['rounding_bias_max']:.3g}" if e["rounding_bias_max"] else "")
            + (f"; bias ≤ {e['bias_per_record']:.3g}·n" if e["bias_per_record"] else ""),
        ]
        post = self.postprocess
        lines.append("postprocess " + ("none" if post is None else
                                       f"{post['method']}: the released tables projected onto "
                                       "non-negative consistent tables"
                                       + (", then rounded to integers of one total"
                                          if post["method"] == "integer" else "")
                                       + f" (≤ {post.get('max_iter')} iterations, tolerance "
                                         f"{post.get('tol')})"))
        lines += choice_lines(self.provenance.get("strategy_choice"))
        from factorize.plan.search_record import search_lines

        lines += search_lines(self.provenance.get("strategy_search"))
        from factorize.plan.lower_bound import laplace_bound_line

        lap = laplace_bound_line(c.get("laplace_factorization"), e)
        if lap:
            lines.append(lap)
        prov = self.provenance
        if prov:
            lines.append(f"provenance  factorize {prov.get('versions', {}).get('factorize', '?')}, "
                         f"plan {prov.get('plan_seconds', 0.0):.2f}s")
        return lines


# ---------------------------------------------------------------------------------------
# accuracy claims (planner and verifier)


def expected_error(plan_noise: Any, recon: Any, beta: float, norm: str,
                   sampled_variance: float) -> StructuredExpectedError:
    """The plan's accuracy statements from the structure (``structured.reconstruction``):
    per-query std ``√v‖r_i‖``, RMSE, the largest and total variance, the expected maximum
    error (Gaussian: ``√v·max‖r_i‖·√(2 ln 2k)``, else Jensen ``√v‖R‖_F``) plus the lattice
    rounding bias ``(γ/2) max ‖r_i‖₁`` and the reconstruction bias β per record. ``v``: the
    variance of the noise the sampler draws (``sampled_variance``)."""
    from factorize.plan.manifest import ci_method, ci_multiplier

    sq = recon.row_sq_norms()
    k = sq.size
    sd = math.sqrt(sampled_variance)
    grid = plan_noise.grid
    bias_max = 0.5 * float(grid) * float(recon.row_l1_norms().max()) if grid else 0.0
    total_sq = recon.row_sq_norm_sum()
    if plan_noise.family == "gaussian":
        emax = sd * math.sqrt(float(sq.max())) * math.sqrt(2.0 * math.log(2.0 * k))
    else:
        emax = sd * math.sqrt(total_sq)
    return {
        "per_query_std_max": sd * math.sqrt(float(sq.max())),
        "per_query_std_min": sd * math.sqrt(float(sq.min())),
        "per_query_std_mean": sd * float(np.sqrt(sq).mean()),
        "rmse": sd * math.sqrt(total_sq / k),
        "max_variance": sampled_variance * float(sq.max()),
        "total_variance": sampled_variance * total_sq,
        "expected_max_bound": emax + bias_max,
        "rounding_bias_max": bias_max,
        "noise_variance": sampled_variance,
        "bias_per_record": float(beta),
        "objective": norm,
        "ci_method": ci_method(plan_noise),
        "ci_multiplier": ci_multiplier(plan_noise),
        "variance_note": "exact per-query variance v·‖r_i‖² of the noise the sampler draws "
                         "(independent coordinates); v = the lattice noise's variance bound",
    }


def achieved_norm(norm: str, sensitivity: float, recon: Any) -> float:
    """The plan's own value of its objective: ``Δ·max‖r_i‖`` (γ₂) or ``Δ·‖R‖_F/√k`` (γ_F),
    Δ the certified L2 add/remove sensitivity of the measured strategy — the quantity the
    certificate's lower bound applies to."""
    sq = recon.row_sq_norms()
    if norm == "gamma_2":
        return sensitivity * math.sqrt(float(sq.max()))
    return sensitivity * math.sqrt(recon.row_sq_norm_sum() / sq.size)


def laplace_rmse(strategy: Any, recon: Any, relation: Any) -> float:
    """``√2 · Δ₁ · √(Σ_i ‖r_i‖² / k)``: a structured candidate's RMSE under Laplace noise at
    ε = 1 (Δ₁ the certified L1 sensitivity of the measured strategy under ``relation``,
    before lattice rounding) — the score by which the planner chooses the family
    (``build_structured``) and the verifier re-checks the choice."""
    from factorize.structured.sensitivity import strategy_sensitivity

    sq = recon.row_sq_norms()  # the reconstruction's own rows (cached; the plan's claims reuse them)
    delta = strategy_sensitivity(strategy.measured(), "l1", relation).value
    return math.sqrt(2.0) * delta * math.sqrt(recon.row_sq_norm_sum() / sq.size)


def gaussian_rmse(strategy: Any, recon: Any, relation: Any) -> float:
    """``Δ₂ · √(Σ_i ‖r_i‖² / k)``: a structured candidate's RMSE per unit σ of Gaussian noise
    (Δ₂ the certified L2 sensitivity of the measured strategy under ``relation``, before
    lattice rounding) — the score by which the planner chooses the family under Gaussian
    noise (``build_structured``) and the verifier re-checks the choice."""
    from factorize.structured.sensitivity import strategy_sensitivity

    sq = recon.row_sq_norms()
    delta = strategy_sensitivity(strategy.measured(), "l2", relation).value
    return delta * math.sqrt(recon.row_sq_norm_sum() / sq.size)


def choice_lines(choice: Any) -> list[str]:
    """``inspect``'s lines for the planner's family choice (``provenance.strategy_choice``)."""
    if not isinstance(choice, dict):
        return []
    gaussian = choice.get("gaussian_rmse_per_sigma")
    score = choice.get("rmse_at_epsilon_1")
    line = f"chosen      {choice.get('chosen')}" + (
        f" (Gaussian RMSE per unit σ {gaussian:.6g}, re-checked)" if isinstance(gaussian, (int, float))
        else f" (Laplace RMSE at ε=1 {score:.6g}, re-checked)" if isinstance(score, (int, float)) else "")
    line += _seconds(choice)
    search = choice.get("search")
    if isinstance(search, dict) and "winner" in search:
        line += (f"; search seed {choice.get('search_seed')}, winning start "
                 f"{search.get('winner')}")
    lines = [line]
    for r in choice.get("runners_up") or []:
        if isinstance(r, dict):
            g = r.get("gaussian_rmse_per_sigma")
            v = r.get("rmse_at_epsilon_1")
            why = r.get("search", {}).get("refused") if isinstance(r.get("search"), dict) else None
            lines.append(f"runner-up   {r.get('family')}: "
                         + (f"RMSE per unit σ {g:.6g} (checked no better)" if isinstance(g, (int, float))
                            else f"RMSE at ε=1 {v:.6g} (checked no better)" if isinstance(v, (int, float))
                            else f"not applicable ({why})" if why else "not scored")
                         + _seconds(r))
    return lines


def _seconds(entry: Mapping[str, Any]) -> str:
    """``", planned in 1.2 s"`` where the choice states a family's planning time."""
    s = entry.get("seconds")
    return f", planned in {s:.3g} s" if isinstance(s, (int, float)) and not isinstance(s, bool) else ""


# ---------------------------------------------------------------------------------------
# file


def save_structured_plan(plan: StructuredPlan, path: str | Path) -> None:
    """Write a structured plan atomically (``plan.files``)."""
    from factorize.plan.files import save_with_embedded

    save_with_embedded(path, FORMAT, SCHEMA_VERSION, plan.manifest(), plan.arrays(), plan.embedded)


def load_structured_plan(path: str | Path | PlanBytes) -> StructuredPlan:
    """Read and structurally check a structured plan (``PlanFormatError`` on any problem)."""
    from factorize.plan.files import guarded_load

    return guarded_load(_load, path, "structured plan")


def _load(path: Path) -> StructuredPlan:
    from factorize.plan.files import (
        PlanFormatError,
        check_finite,
        embedded_from,
        optional_record,
        read_plan_container,
        require_dict,
        require_record,
        typed_values,
        workload_and_domain,
    )
    from factorize.structured.blocks import StructureError
    from factorize.structured.families import CODECS, codec

    m, arrays = read_plan_container(path, FORMAT, SCHEMA_VERSION)
    if m.get("plan_kind") != PLAN_KIND:
        raise PlanFormatError(f"{path}: not a structured plan")
    from factorize.plan.files import plan_version

    if int(m["schema_version"]) != plan_version(SCHEMA_VERSION, m):
        raise PlanFormatError(f"{path}: a structured plan must be at schema version {SCHEMA_VERSION}, "
                              f"this one states {m['schema_version']}")
    check_finite(path, arrays)
    arrays, embedded = embedded_from(path, m, arrays)
    shape, dom = workload_and_domain(path, m)
    st = require_dict(m, "strategy")
    family = st.get("family")
    if family not in CODECS:
        raise PlanFormatError(f"{path}: unknown strategy family {family!r}")
    cert_arrays = {k: v for k, v in arrays.items() if k.startswith("cert.")}
    n_weights = {k: v for k, v in arrays.items() if k.startswith("nbound.")}
    encoding = {k: v for k, v in arrays.items() if k not in cert_arrays and k not in n_weights}
    try:
        strategy, recon = codec(family).decode(dom["sizes"], st, encoding)
    except (StructureError, ValueError, TypeError, KeyError) as exc:
        raise PlanFormatError(f"{path}: inconsistent structured strategy ({exc})") from None
    if recon.k != shape[0]:
        raise PlanFormatError(f"{path}: the reconstruction yields {recon.k} answers, the workload "
                              f"has k={shape[0]}")
    norm = m.get("norm")
    if norm not in ("gamma_f", "gamma_2"):
        raise PlanFormatError(f"{path}: unknown objective {norm!r}")
    domain, relation, guarantee, noise = typed_values(path, m)
    if noise.dim != strategy.m:
        raise PlanFormatError(f"{path}: the noise is calibrated for dim={noise.dim}, the strategy "
                              f"has m={strategy.m} measurements")
    return StructuredPlan(
        workload=require_record(path, m, "workload", WorkloadRecord), domain=domain, relation=relation,
        guarantee=guarantee, norm=norm, strategy=strategy, reconstruction=recon,
        structure=st, encoding=encoding, noise=noise,
        certificate=require_record(path, m, "certificate", StructuredCertificate),
        certificate_arrays=cert_arrays,
        expected_error=require_record(path, m, "expected_error", StructuredExpectedError),
        bias=require_record(path, m, "bias", BiasRecord), n_weights=n_weights,
        provenance=optional_record(path, m, "provenance", Provenance),
        postprocess=(None if m.get("postprocess") is None
                     else require_record(path, m, "postprocess", PostprocessRecord)),
        embedded=embedded, schema_version=int(m["schema_version"]))

