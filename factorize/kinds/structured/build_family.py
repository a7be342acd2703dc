"""Building the structured plan of one family (needs the planner; the executor never imports
this module; the strategy search over the families is ``kinds.structured.build``).

``build_family_plan(workload, guarantee, strategy=..., parts=..., ...)``:

1. the strategy of one family, made by the family's builder ``parts`` (``factorize.families``:
   each family's ``parts``; the builders of the older families are the ``*_parts`` functions
   below, the symmetric family's is its own module's) from one :class:`FamilyInputs`:
   ``residual`` — the certified optimum of a marginal workload in the subset algebra
   (``planner.marginal_optimum.solve_marginals``) as residual blocks (``structured.residual``);
   ``subset_algebra`` — the algebra's closed-form γ_F optimum (``structured.subset_algebra``);
   ``union`` — one block per workload block (``structured.union``); ``marginal_weights`` —
   L1-optimised marginal weights (``pure_dp.l1_marginal_weights``, ``structured.marginal_weights``);
   ``kron`` — one shared Kronecker strategy (``structured.shared_kron``, HDMM's OPT_⊗);
   ``kron_groups`` — one per group of blocks (``structured.kron_groups``, HDMM's OPT_+);
   ``symmetric`` — the γ_F optimum of the workload's symmetry sectors (``structured.symmetric``,
   mixed blocks ``structured.mixing``). The strategy search over them is
   ``factorize.families.search``; this frame has no branch per family;
2. the certified sensitivity of the *measured* strategy (``structured.sensitivity``) under the
   chosen relation, L2 for Gaussian noise, L1 for Laplace;
3. the noise (``privacy.calibrate``) on the lattice γZ, γ the largest power of two with
   ``γ√m ≤ 10⁻³Δ₂`` (``rules.choose_grid``), its rounding inflation counted over the
   strategy's spread (``structured.sensitivity.strategy_spread``), not all m coordinates;
4. the reconstruction's bias β ≥ max|W − R·Ã| checked in the algebra (``structured.identity``);
5. the accuracy statements from the structure (``structured_plan.expected_error``) and the
   certificate (upper, lower, gap, and the value this plan achieves).
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from factorize.choices import Neighbouring, NoiseFamily, Norm, StructuredFamily
from factorize.io.provenance import versions
from factorize.kinds.structured.plan import SCHEMA_VERSION, StructuredPlan, achieved_norm, expected_error
from factorize.plan.errors import PlanError
from factorize.plan.records import (
    BiasRecord,
    FamilyCertificate,
    StrategyChoice,
    StructuredCertificate,
    workload_record,
)
from factorize.plan.rules import BIAS_NOTE
from workloads import Domain, Workload

#: A marginal-weights strategy measures every cell of each chosen table: at most this many.
MAX_WEIGHTED_TABLE = 1 << 24


@dataclass(frozen=True)
class FamilyInputs:
    """What one structured family's builder is handed (parsed once by :func:`build_family_plan`):
    the workload, its domain and Kronecker blocks, the objective, the noise ("gaussian" /
    "laplace") and its sensitivity norm, the relation, solver options, the search's base seed,
    the certificate's gap target and the search's shared results (``memo``)."""

    W: Workload
    dom: Domain
    wblocks: list
    norm: Norm
    noise: str
    snorm: str
    rel: Any
    options: Any
    seed: int
    gap_tol: float
    memo: dict[str, Any]


@dataclass(frozen=True)
class FamilyParts:
    """One family's strategy, reconstruction, encoding (structure, arrays), certificate and its
    arrays; ``choice``: the family's own search record (``provenance.strategy_choice``);
    ``own_upper``: the certificate states its own upper bound (the residual family's solver)
    instead of the value the plan achieves, and takes no symmetry bound."""

    strategy: Any
    reconstruction: Any
    encoding: tuple[dict[str, Any], dict[str, np.ndarray]]
    certificate: FamilyCertificate
    certificate_arrays: dict[str, np.ndarray]
    choice: StrategyChoice | None = None
    own_upper: bool = False


#: A family's builder (``factorize.families``: each structured family's ``parts``).
PartsBuilder = Callable[[FamilyInputs], FamilyParts]


def build_family_plan(workload: Workload | str, guarantee: Any, *, strategy: StructuredFamily,
                      parts: PartsBuilder, norm: Norm = "gamma_f",
                      relation: Neighbouring = "add_remove", domain: Domain | None = None,
                      noise_family: NoiseFamily | None = None, gap_tol: float = 1e-6,
                      allow_weak_guarantee: bool = False, options: Any = None,
                      search_seed: int = 0, memo: dict[str, Any] | None = None) -> StructuredPlan:
    """A verified structured plan of the family ``strategy``, whose builder ``parts`` makes its
    strategy, reconstruction and certificate (module docstring; the families and their
    builders are ``factorize.families``). ``search_seed``: the base seed of the families'
    random starts (recorded); ``memo``: the search's shared results (the union plan, reused by
    ``kron`` for its certificate; the symmetry-reduced dual)."""
    from factorize.plan.build_inputs import plan_inputs
    from factorize.structured.workload_blocks import workload_blocks
    from workloads.spec import embedded_files

    t0 = time.perf_counter()
    if norm not in ("gamma_f", "gamma_2"):
        raise PlanError(f"structured plans optimise gamma_f or gamma_2, not {norm!r}")
    W, g, rel, dom = plan_inputs(workload, guarantee, relation, domain, allow_weak_guarantee)
    family = noise_family or ("laplace" if g.kind == "pure_dp" else "gaussian")
    from factorize.structured.families import FAMILY_NAMES

    if strategy not in FAMILY_NAMES:
        raise PlanError(f"unknown structured strategy {strategy!r}; expected one of {FAMILY_NAMES}")
    memo = {} if memo is None else memo
    wblocks = memo.get("blocks") or workload_blocks(W, dom.sizes)
    snorm = "l1" if family == "laplace" else "l2"
    built = parts(FamilyInputs(W, dom, wblocks, norm, family, snorm, rel, options, search_seed,
                               gap_tol, memo))
    strat, recon = built.strategy, built.reconstruction
    (structure, encoding), cert, cert_arrays = built.encoding, built.certificate, built.certificate_arrays
    choice = built.choice
    if not built.own_upper:
        cert, cert_arrays = with_symmetry_bound(cert, cert_arrays, wblocks, dom.sizes, memo, norm)
    noise, sens = _noise(strat, g, rel, family)
    from factorize.privacy import sampled_variance
    from factorize.structured.identity import reconstruction_residual

    measured = strat.measured()
    recon_m = recon.rebased(measured)
    beta = reconstruction_residual(recon_m, wblocks)
    from factorize.planner.certificate import DEFAULT_RESIDUAL_TOL

    limit = DEFAULT_RESIDUAL_TOL * max(b.max_abs() for b in wblocks)
    if not beta <= limit:  # the verifier's own limit (kinds.structured.verify): never write a plan it refuses
        raise PlanError(f"the {strategy} strategy reconstructs W only to max|W − RÃ| ≤ {beta:.3g}, past "
                        f"the verifier's limit {limit:.3g} (an ill-conditioned strategy)")
    bias, n_weights = plan_bias(recon_m, wblocks, beta)
    cert["achieved"] = achieved_norm(norm, _l2_add_remove(measured), recon)
    if not built.own_upper:  # the plan's own value is the upper bound (structured.union)
        from factorize.numerics import relative_gap

        cert["upper"] = cert["achieved"]
        if relative_gap(cert["upper"], cert["lower"]) > SUBSPACE_MIN_GAP:
            cert, cert_arrays = with_subspace_bound(cert, cert_arrays, wblocks, dom.sizes, memo, norm, options)
        cert["gap"] = relative_gap(cert["upper"], cert["lower"])
    from factorize.plan.lower_bound import laplace_bound

    cert["laplace_factorization"] = laplace_bound(norm, cert["lower"], g, rel.key, family)
    plan = StructuredPlan(
        workload=workload_record(W),
        domain=dom, relation=rel, guarantee=g, norm=norm, strategy=strat, reconstruction=recon,
        structure=structure, encoding=encoding, noise=noise,
        certificate=cast(StructuredCertificate, cert),  # achieved, upper, gap and the Laplace bound set above
        certificate_arrays=cert_arrays,
        expected_error=expected_error(noise, recon, beta, norm, sampled_variance(noise)),
        bias=bias, n_weights=n_weights, embedded=embedded_files(W), schema_version=SCHEMA_VERSION,
        provenance={"versions": versions(), "mechanism": "factorization", "strategy": strategy,
                    "sensitivity_exact": sens.exact, "plan_seconds": time.perf_counter() - t0,
                    **({"strategy_choice": choice} if choice is not None else {}),
                    "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")})
    return plan


def with_symmetry_bound(cert: FamilyCertificate, cert_arrays: dict[str, np.ndarray], wblocks: list,
                        sizes: Any, memo: dict[str, Any], norm: str = "gamma_f"
                        ) -> tuple[FamilyCertificate, dict[str, np.ndarray]]:
    """The certificate with the symmetry-reduced γ_F dual bound (``structured.symmetry``)
    added where it is higher than the family's own: ``certificate.symmetry`` states it, arrays
    ``cert.sym.labels.<j>`` (each attribute's classes) and ``cert.sym.d`` (per-cell weights on
    the orbits) let the verifier re-derive it. Solved once per workload (``memo``); copies, so
    a certificate another family reuses from the memo is left as it was."""
    from factorize.structured import symmetry

    if norm == "gamma_2":
        g2 = symmetry_gamma_2_solution(wblocks, sizes, memo)
        if g2 is not None and g2[2] > float(cert["lower"]) * (1.0 + 1e-9):
            red, _, _ = memo["symmetry"]
            v, d, lower = g2
            cert = {**cert, "lower": lower,
                    "symmetry": {"method": symmetry.METHOD_GAMMA_2, "norm": "gamma_2", "lower": lower}}
            return cert, {**cert_arrays, "cert.sym.d": np.asarray(d, dtype=np.float64).reshape(1, -1),
                          "cert.sym.v": np.asarray(v, dtype=np.float64).reshape(1, -1),
                          **symmetry.label_arrays(red.labels)}
    found = symmetry_solution(wblocks, sizes, memo)
    if found is None or not found[1] > float(cert["lower"]) * (1.0 + 1e-9):
        return cert, cert_arrays
    red, lower, weights = found
    labels = red.labels
    cert = {**cert, "lower": lower, "symmetry": {"method": symmetry.METHOD, "lower": lower}}
    cert_arrays = {**cert_arrays, "cert.sym.d": np.asarray(weights, dtype=np.float64).reshape(1, -1),
                   **symmetry.label_arrays(labels)}
    return cert, cert_arrays


#: The subspace bound is sought where the plan's gap exceeds this (the symmetry-reduced dual
#: already certifies census unions within 1e-4).
SUBSPACE_MIN_GAP = 1e-4


def with_subspace_bound(cert: FamilyCertificate, cert_arrays: dict[str, np.ndarray], wblocks: list,
                        sizes: Any, memo: dict[str, Any], norm: str, options: Any
                        ) -> tuple[FamilyCertificate, dict[str, np.ndarray]]:
    """The certificate with the subspace-split trace-norm bound (``structured.subspace_bound``)
    where it is higher than the one stated: ``certificate.subspace`` states it, arrays
    ``cert.sub.*`` let the verifier re-derive it. Searched once per workload and norm
    (``memo``; the workload factors' own solves shared with the union family); copies."""
    from factorize.numerics import NumericRangeError
    from factorize.structured import subspace_bound, subspace_bound_build, union_build
    from factorize.structured.blocks import StructureError

    key = f"subspace:{norm}"
    if key not in memo and symmetry_reduction(wblocks, sizes, memo) is not None:
        memo[key] = None  # the symmetry-reduced dual is the bound for these (twin classes)
    if key not in memo:
        cache = memo.setdefault("factor_solutions", {})
        witnesses = {}
        for wb in wblocks:
            for f in wb.factors:
                if f.kind == "matrix" and f.key not in witnesses:
                    witnesses[f.key] = union_build.factor_solution(f, norm, options, cache)[2]
        try:
            memo[key] = subspace_bound_build.search(wblocks, sizes, norm, witnesses)
        except (StructureError, NumericRangeError, np.linalg.LinAlgError):
            memo[key] = None  # a bound, never a reason to refuse a plan: the family's own stands
    found = memo[key]
    if found is None or not found[0] > float(cert["lower"]) * (1.0 + 1e-9):
        return cert, cert_arrays
    lower, arrays = found
    cert = {**cert, "lower": lower, "subspace": {"method": subspace_bound.METHOD, "lower": lower}}
    return cert, {**cert_arrays, **arrays}


def symmetry_reduction(wblocks: list, sizes: Any, memo: dict[str, Any]) -> Any:
    """``structured.symmetry.reduce`` of the workload, once per search (``memo``)."""
    from factorize.structured import symmetry

    red = memo.get("symmetry_reduction", "unset")
    if isinstance(red, str):
        red = memo["symmetry_reduction"] = symmetry.reduce(wblocks, sizes)
    return red


def symmetry_solution(wblocks: list, sizes: Any, memo: dict[str, Any]) -> tuple[Any, float, np.ndarray] | None:
    """``(reduction, certified lower bound, per-cell orbit weights)`` of the symmetry-reduced
    γ_F dual (``structured.symmetry``, ``solvers.dual_gamma_f_symmetric``), or None where the
    reduction does not apply; solved once per workload (``memo``)."""
    from factorize.structured import symmetry

    if "symmetry" not in memo:
        memo["symmetry"] = None
        red = symmetry_reduction(wblocks, sizes, memo)
        if red is not None:
            from solvers.dual_gamma_f_symmetric import solve_symmetric_gamma_f

            res = solve_symmetric_gamma_f(red, max_iters=red.iteration_cap(200))
            memo["symmetry"] = (red, symmetry.certified_lower(red, res.weights), res.weights)
    found: tuple[Any, float, np.ndarray] | None = memo["symmetry"]
    return found


#: The γ₂ dual solver's target relative gap (its own primal estimate against its dual value;
#: the plan states the gap it achieves), and its work budget: Σ over iterations of one
#: evaluation's work (``Gamma2Problem.evaluation_work``, deterministic), the iteration cap
#: being this over one evaluation's work, between 20 and :data:`GAMMA_2_MAX_ITERS`. SF1 persons
#: (2.5·10⁸ per evaluation) reaches 10⁻³ in about 35 iterations from the γ_F dual's cell
#: weights, census-2 (6.4·10⁸) in about 76.
GAMMA_2_TARGET_GAP = 1e-3
GAMMA_2_SOLVE_WORK = 6e10
GAMMA_2_MAX_ITERS = 500
#: Row weights are raised to at least this fraction of the largest before they are used: a
#: weight the solver drove to its floor (e⁻⁶⁰) would leave a sector whose only rows it weights
#: with computed eigenvalues at rounding level, possibly negative, and the closed-form
#: strategy singular there. Any weights give a valid bound; this moves it by far less than
#: the gap.
GAMMA_2_ROW_FLOOR = 1e-12


def symmetry_gamma_2_solution(wblocks: list, sizes: Any, memo: dict[str, Any]
                              ) -> tuple[list[float], np.ndarray, float] | None:
    """``(row-orbit weights v, orbit weights d, certified γ₂ lower bound)`` of the
    symmetry-reduced γ₂ dual (``structured.symmetry_gamma_2``, ``METHOD_GAMMA_2``;
    ``solvers.dual_gamma_2_symmetric`` from the γ_F dual's orbit weights), or None where the
    reduction does not apply; solved once per workload (``memo``). The memo also keeps, under
    ``"symmetry_gamma_2_primal"``, the reduction of the workload re-weighted at the solver's
    best primal point and that point's cell weights: the symmetric family's γ₂ strategy."""
    from factorize.structured import symmetry, symmetry_gamma_2, symmetry_gamma_2_orbits

    if "symmetry_gamma_2" in memo:
        found: tuple[list[float], np.ndarray, float] | None = memo["symmetry_gamma_2"]
        return found
    memo["symmetry_gamma_2"] = None
    base = symmetry_solution(wblocks, sizes, memo)
    if base is None:
        return None
    from solvers.dual_gamma_2_symmetric import solve_symmetric_gamma_2

    red, _, d = base
    orbits = symmetry_gamma_2_orbits.expand(wblocks, red.labels)
    problem = None if orbits is None else symmetry_gamma_2.problem(orbits, red)
    if orbits is None or problem is None:
        return None
    cap = max(20, min(GAMMA_2_MAX_ITERS, int(GAMMA_2_SOLVE_WORK // max(problem.evaluation_work, 1.0))))
    res = solve_symmetric_gamma_2(problem, d, target_gap=GAMMA_2_TARGET_GAP, max_iters=cap)

    def weights(pi: np.ndarray) -> list[float]:
        return orbits.weights(np.maximum(pi, GAMMA_2_ROW_FLOOR * float(np.max(pi))))

    v, v_primal = weights(res.row_weights), weights(res.primal_row_weights)
    red_v = symmetry_gamma_2.reweighted_reduction(orbits, sizes, red.labels, v)
    red_primal = (red_v if v_primal == v else
                  symmetry_gamma_2.reweighted_reduction(orbits, sizes, red.labels, v_primal))
    if red_v is None or red_primal is None:
        return None
    lower = symmetry.gamma_2_lower_at(red_v, list(orbits.blocks), v, res.cell_weights)
    memo["symmetry_gamma_2"] = (v, res.cell_weights, lower)
    memo["symmetry_gamma_2_primal"] = (red_primal, res.primal_cell_weights)
    return memo["symmetry_gamma_2"]


def _l2_add_remove(measured: Any) -> float:
    from factorize.structured.sensitivity import strategy_sensitivity

    return strategy_sensitivity(measured, "l2", "add_remove").value


def _noise(strat: Any, g: Any, rel: Any, family: str) -> tuple[Any, Any]:
    """The calibrated lattice noise and the certified sensitivity it rests on."""
    from factorize.plan.rules import choose_grid
    from factorize.privacy import calibrate
    from factorize.structured.sensitivity import strategy_sensitivity, strategy_spread

    if family not in ("gaussian", "laplace"):
        raise PlanError(f"structured plans use exact Gaussian or Laplace noise, not {family!r}")
    snorm = "l1" if family == "laplace" else "l2"
    sens = strategy_sensitivity(strat.measured(), snorm, rel)
    if not sens.value > 0:
        raise PlanError("the strategy has zero sensitivity")
    m = strat.m
    grid = choose_grid(sens.value, m, snorm)
    spec = calibrate(g, sensitivity_l2=sens if snorm == "l2" else None,
                     sensitivity_l1=sens if snorm == "l1" else None, grid=grid, dim=m,
                     relation=rel, family=family, spread=strategy_spread(strat.measured(), rel, grid))
    return spec, sens




def plan_bias(recon: Any, wblocks: list, beta: float) -> tuple[BiasRecord, dict[str, np.ndarray]]:
    """The ``bias`` section and the n-bound weights (``structured.records``)."""
    from factorize.structured.records import choose

    fields, arrays = choose(recon, wblocks, beta)
    return {"residual_bound": float(beta), **fields, "note": BIAS_NOTE}, arrays


# ---------------------------------------------------------------------------------------
# the builders of the families (``factorize.families``: each family's ``parts`` calls one)


def _parts(five: tuple, choice: StrategyChoice | None = None, own_upper: bool = False) -> FamilyParts:
    strat, recon, enc, cert, arrays = five
    return FamilyParts(strat, recon, enc, cert, arrays, choice, own_upper)


def residual_parts(inp: FamilyInputs) -> FamilyParts:
    """The certified marginal optimum as residual blocks; its certificate states the marginal
    solver's own upper bound."""
    return _parts(_residual(inp.W, inp.dom, inp.wblocks, inp.norm, inp.gap_tol), own_upper=True)


def union_parts(inp: FamilyInputs) -> FamilyParts:
    """One Kronecker block per workload block (``structured.union_build``), once per search."""
    return _parts(_union(inp.dom, inp.wblocks, inp.norm, inp.options, inp.snorm, inp.memo))


def subset_algebra_parts(inp: FamilyInputs) -> FamilyParts:
    """The algebra's closed-form γ_F optimum, certified by the closed form or the union's bound."""
    from factorize.structured import subset_algebra

    _, _, _, ucert, ucert_arrays = _union(inp.dom, inp.wblocks, inp.norm, inp.options, inp.snorm, inp.memo)
    return _parts(subset_algebra.build(inp.dom.sizes, inp.wblocks, inp.norm, fallback=(ucert, ucert_arrays)))


def _choice(name: str, five: tuple, rel: Any, noise: str, seed: int, record: dict[str, Any],
            seconds: float | None) -> StrategyChoice:
    """``provenance.strategy_choice`` of a family with its own search (``kinds.structured.verify``
    re-derives its scores)."""
    from factorize.kinds.structured.plan import gaussian_rmse, laplace_rmse

    choice: StrategyChoice = {"chosen": name, "rmse_at_epsilon_1": laplace_rmse(five[0], five[1], rel)}
    if seconds is not None:
        choice["seconds"] = seconds
    choice.update({"search_seed": int(seed), "search": record, "runners_up": []})
    if noise == "gaussian" and name != "marginal_weights":
        choice["gaussian_rmse_per_sigma"] = gaussian_rmse(five[0], five[1], rel)
    return choice


def marginal_weights_parts(inp: FamilyInputs) -> FamilyParts:
    """HDMM's OPT_M weights (Laplace noise) with their least-squares reconstruction."""
    five, record = _marginal_weights(inp.W, inp.dom, inp.wblocks, inp.norm, inp.options, inp.seed,
                                     union_cert=inp.memo.get(f"union:{inp.norm}:{inp.snorm}"))
    return _parts(five, _choice("marginal_weights", five, inp.rel, inp.noise, inp.seed, record, None))


def kron_parts(inp: FamilyInputs) -> FamilyParts:
    """One shared Kronecker strategy (HDMM's OPT_⊗), certified by the union's bound."""
    t0 = time.perf_counter()
    five, record = _kron(inp.dom, inp.wblocks,
                         _union(inp.dom, inp.wblocks, inp.norm, inp.options, inp.snorm, inp.memo),
                         inp.seed, inp.noise)
    return _parts(five, _choice("kron", five, inp.rel, inp.noise, inp.seed, record,
                                time.perf_counter() - t0))


def kron_groups_parts(inp: FamilyInputs) -> FamilyParts:
    """One shared Kronecker strategy per group of blocks (HDMM's OPT_+)."""
    from factorize.structured import kron_groups

    t0 = time.perf_counter()
    _, _, _, ucert, ucert_arrays = _union(inp.dom, inp.wblocks, inp.norm, inp.options, inp.snorm, inp.memo)
    groups, record = kron_groups.optimise(inp.dom.sizes, inp.wblocks, inp.noise, inp.seed)
    five = kron_groups.build(inp.dom.sizes, inp.wblocks, groups, inp.noise, ucert, ucert_arrays)
    return _parts(five, _choice("kron_groups", five, inp.rel, inp.noise, inp.seed, record,
                                time.perf_counter() - t0))



def _residual(W: Workload, dom: Domain, wblocks: list, norm: Norm, gap_tol: float):
    """The certified marginal optimum as residual blocks (``structured.residual``)."""
    from factorize.planner.marginal_algebra import marginal_family
    from factorize.planner.marginal_optimum import solve_marginals
    from factorize.structured import residual

    family = marginal_family(W)
    if family is None or tuple(family.sizes) != tuple(int(s) for s in dom.sizes):
        raise PlanError("the residual strategy needs a marginal workload over the domain's "
                        "attributes")
    sol = solve_marginals(family, norm, gap_tol=gap_tol)
    x = {tuple(T): float(v) for T, v in zip(sol.x.subsets, sol.x.values, strict=True) if v > 0}
    closure = sorted(x, key=lambda T: (len(T), T))
    strat, recon, enc = residual.build(dom.sizes, closure, x, wblocks)
    cert = {"method": residual.CERTIFICATE, "norm": norm, "upper": float(sol.upper), "lower": float(sol.lower), "gap": float(sol.gap)}
    arrays = {"cert.x": np.array([x[T] for T in closure])}
    if sol.weights is not None:
        if sol.weight_subsets is None:
            raise PlanError("the marginal optimum states dual weights without their subsets")
        arrays["cert.omega"] = np.asarray(sol.weights, dtype=np.float64)
        arrays["cert.omega_support"] = residual._pad([tuple(S) for S in sol.weight_subsets])
    return strat, recon, enc, cert, arrays


def _union(dom: Domain, wblocks: list, norm: str, options: Any, sensitivity_norm: str,
           memo: dict[str, Any] | None = None):
    """The union family's build (``structured.union``), once per search (``memo``)."""
    from factorize.structured import union_build

    key = f"union:{norm}:{sensitivity_norm}"
    if memo is not None and key in memo:
        return memo[key]
    parts = union_build.build(dom.sizes, wblocks, norm, options=options, sensitivity_norm=sensitivity_norm,
                              cache=None if memo is None else memo.setdefault("factor_solutions", {}))
    if memo is not None:
        memo[key] = parts
    return parts


def _marginal_weights(W: Workload, dom: Domain, wblocks: list, norm: str, options: Any,
                      seed: int, fam: Any = None, union_cert: tuple | None = None
                      ) -> tuple[tuple, dict[str, Any]]:
    """OPT_M weights for Laplace noise (``pure_dp.l1_marginal_weights``) as a structured plan
    (``structured.marginal_weights``), and the search's record; ``fam``: W's marginal
    structure when the caller has it; ``union_cert``: the union family's build of the same
    workload (the search's memo), whose certificate is reused. A workload that is not made of marginals (any union of
    Kronecker products) is optimised through its averaged Gram
    (``structured.subset_algebra.subset_eigenvalues``: the error of a marginal strategy depends
    on W only through it — HDMM's Marginals template for any workload)."""
    from factorize.pure_dp.l1_marginal_weights import candidate_subsets, optimize_marginal_weights
    from factorize.pure_dp.structure import marginal_structure_of
    from factorize.structured import marginal_weights_build

    fam = marginal_structure_of(W) if fam is None else fam
    if fam is not None and tuple(fam.sizes) != tuple(int(n) for n in dom.sizes):
        fam = None
    lam, queries = None, None
    if fam is None:  # any union: the objective reads W through its averaged Gram alone
        from factorize.planner.marginal_algebra import MarginalFamily
        from factorize.structured.subset_algebra import subset_eigenvalues

        sizes = tuple(int(n) for n in dom.sizes)
        lam, _ = subset_eigenvalues(wblocks, sizes)
        tops = sorted({U for U in lam if not any(set(U) < set(V) for V in lam)})
        if not tops:
            raise PlanError("marginal weights: the workload is zero")
        fam = MarginalFamily(sizes, tuple(tops), tuple(math.prod(sizes[j] for j in U) for U in tops))
        queries = sum(wb.rows for wb in wblocks)
    # a chosen subset is measured cell by cell: only tables the executor can noise
    subsets = tuple(S for S in candidate_subsets(fam)
                    if math.prod(fam.sizes[j] for j in S) <= MAX_WEIGHTED_TABLE)
    have = set(subsets)
    too_big = [b.subset for b in fam.distinct_blocks()
               if tuple(j for j in b.subset if fam.sizes[j] > 1) not in have]
    if too_big:
        raise PlanError(f"marginal weights measure every cell of a table: the workload's table on "
                        f"attributes {list(too_big[0])} has more than {MAX_WEIGHTED_TABLE:,} cells")
    res = optimize_marginal_weights(fam, seed=seed, subsets=subsets, eigenvalues=lam,
                                    queries=queries)
    record = {"family": "marginal weights", "seed": int(seed), "winner": res.winner,
              "support": [[float(t), list(S)] for t, S in res.support()],
              "objective_rmse": res.rmse, "seconds": res.seconds,
              **{k: v for k, v in res.search.summary().items() if k != "winner"}}
    fallback = None if union_cert is None else (union_cert[3], union_cert[4])
    return marginal_weights_build.build(dom.sizes, wblocks, res.support(), norm, options=options,
                                  W=W, fallback=fallback), record


def _kron(dom: Domain, wblocks: list, union_parts: tuple, seed: int,
          noise: str = "laplace") -> tuple[tuple, dict[str, Any]]:
    """One shared Kronecker strategy ``⊗_j A_j`` for the whole union — p-Identity factors
    (``pure_dp.kron.optimize_kron``, HDMM's OPT_⊗) for Laplace noise, L2-optimal factors
    (``structured.shared_kron_gaussian``) for Gaussian noise — as a structured plan
    (``structured.shared_kron``), certified by the union plan's lower bound (it depends on W
    alone: ``union_parts``, the union family's build for the same workload); and the
    search's record."""
    from factorize.pure_dp.kron import optimize_kron
    from factorize.structured import shared_kron

    P = shared_kron.product_workload(dom.sizes, wblocks)  # the size checks, before any search
    _, _, _, cert, cert_arrays = union_parts
    if noise == "gaussian":
        from factorize.structured.shared_kron_gaussian import optimize_kron_l2

        kg = optimize_kron_l2(dom.sizes, wblocks)
        record = {"family": "shared kronecker (L2)", "sweeps": kg.sweeps, "objective": kg.value,
                  "objective_history": kg.history, "seconds": kg.seconds,
                  "factor_rows": [int(F.shape[0]) for F in kg.factors]}
        return shared_kron.build(dom.sizes, wblocks, kg.factors, cert, cert_arrays), record
    ks = optimize_kron(P, seed=seed)
    record = {"family": "shared kronecker", "seed": int(seed), "init": ks.init,
              "sweeps": ks.sweeps, "objective": ks.value,
              "objective_rmse": math.sqrt(2.0 * ks.value / P.k), "seconds": ks.seconds,
              "factor_rows": [int(F.shape[0]) for F in ks.factors]}
    return shared_kron.build(dom.sizes, wblocks, ks.factors, cert, cert_arrays), record
