"""Verification of a plan before any private data is read.

``verify_plan(plan)`` re-derives from the arrays and the public parameters everything the
release and its stated accuracy depend on, trusting none of the numbers in the manifest:

1. file integrity (digests, shapes, finite values, schema version) — ``plan_file.load_plan``;
2. the manifest agrees with itself (the noise's guarantee, relation and dimension are the
   plan's; the certificate's norm and η are the factorization's);
3. the guarantee is within the documented ceilings (``privacy.policy``) unless overridden;
4. the workload rebuilt from its spec — custom matrices from the plan's own arrays, never a
   path (``plan.embedded``) — has the recorded fingerprint and shape, and the domain's
   attributes line up with its axes;
5. an approximate-γ₂ plan's η is at most ``rules.ETA_MAX_FRACTION``·max|W|;
6. ``W ≈ R·A`` within ``tol·max|W| + η`` (relative tolerance, so a workload of tiny entries
   gets no absolute slack): exactly per factor with a rounding allowance for Kronecker plans
   and small dense ones; for a large dense plan (k·N·m above ``EXACT_RESIDUAL_FLOPS``) by 24
   random ±1 probes — a residual entry above the limit passes one probe with probability
   ≤ ½, so all with ≤ 2⁻²⁴; the bias bound β the plan states must cover the residual;
7. the sensitivity of the strategy the executor measures (``privacy.lattice``), a certified
   upper bound (``privacy.sensitivity``), must not exceed the one the noise was calibrated
   to; the noise scale re-derived from the guarantee (``privacy.calibrate``, grid inflation,
   a power-of-two grid) must not exceed the plan's: an under-noised plan is refused with both
   numbers. (ε, δ) Gaussian noise is decided by its condition, without a root finder: the
   calibration's own acceptance test (``privacy.gaussian_approx_dp_holds``: Balle & Wang's
   exact characterisation, or the CKS20 zCDP conversion at the best Rényi order found, with
   the log-δ margin) must hold at the stated σ and fail at σ·(1 − 1e-9);
8. every accuracy statement is recomputed (``plan.claims``): per-query std, RMSE, expected
   max, rounding and reconstruction bias, the n-bound weights, post-processing parameters
   (bounded iteration counts, non-negative tolerances, the least-squares bound coefficient),
   the strategy choice's candidate scores, and — with ``certificate=True``, the default, also
   for ``run`` — the certificate's upper and lower bounds and the any-mechanism bound.

Only numpy, scipy.linalg, the workloads package and ``factorize.privacy`` are used; no solver.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from factorize.numerics import U, is_number
from factorize.planner.certificate import DEFAULT_RESIDUAL_TOL

from .check_record import PlanCheck, guard, same_number
from .errors import PlanError
from .model import Plan
from .records import WorkloadRecord

#: Above this many multiply-adds (k·N·m) a dense residual is checked by random probes.
EXACT_RESIDUAL_FLOPS = 2e9
N_PROBES = 24


# ---------------------------------------------------------------------------------------
# shared by every plan kind


def check_guarantee_policy(out: PlanCheck, guarantee: Any, allow_weak: bool) -> Any:
    """Record the ``guarantee`` check: the plan's guarantee (a ``privacy.Guarantee``, valid
    by construction) within the documented ceilings (``privacy.policy``); returns it, or None
    when refused."""
    from factorize.privacy.policy import guarantee_problems

    def run() -> Any:
        g = guarantee
        problems = guarantee_problems(g)
        if problems and not allow_weak:
            out.record("guarantee", False, "protects too little: " + "; ".join(problems)
                       + " (pass --allow-weak-guarantee to run it anyway)")
        else:
            out.record("guarantee", True, f"{g}" + (" (above the documented ceilings: "
                                                    "allowed explicitly)" if problems else ""))
        return g

    return guard(out, "guarantee", run)


def rebuild_workload(stated: WorkloadRecord, workload: Any, record: Any,
                     embedded: dict[str, Any] | None = None, domain: Any = None) -> Any:
    """The workload rebuilt from the plan's spec (or the one given) if its fingerprint and
    shape match the plan's; custom matrices come from ``embedded`` (the plan's own arrays) and
    a spec naming a file path is refused — the executor never opens a path named in a plan.
    With ``domain`` (a ``workloads.Domain``), its attributes must line up with the workload's axes. Records the checks
    ``"workload"`` (and ``"domain"``); None when the workload cannot be used."""
    from workloads import parse_workload
    from workloads.domain import check_workload_axes

    try:
        k, N = stated["shape"]
        W = workload if workload is not None else parse_workload(
            stated["spec"], embedded=embedded or {}, read_files=False)
        same = W.fingerprint() == stated["fingerprint"] and tuple(W.shape) == (k, N)
        record("workload", same, f"{str(stated['spec'])[:200]!r} rebuilt: shape {tuple(W.shape)}, "
               f"fingerprint {'matches' if same else 'DIFFERS from the plan'}")
    except MemoryError:
        record("workload", False, "out of memory while rebuilding the workload")
        return None
    except RecursionError:
        record("workload", False, "the workload spec is nested too deeply")
        return None
    except Exception as exc:  # noqa: BLE001 - a bad spec is a refused plan
        record("workload", False, f"cannot rebuild {str(stated.get('spec'))[:200]!r}: {exc}")
        return None
    if domain is not None:
        try:
            check_workload_axes(W, domain)
            record("domain", True, "attributes line up with the workload's axes")
        except Exception as exc:  # noqa: BLE001
            record("domain", False, str(exc))
    return W


def check_sensitivity_exact(out: PlanCheck, stated: Any, exact: bool) -> None:
    """Record ``out.derived['sensitivity_exact']`` and the ``sensitivity exact`` check: a plan
    that states whether its sensitivity is exact (``True``) or a certified upper bound
    (``False``) states what the verifier re-derives; a plan that states nothing (``None``,
    older files) passes."""
    out.derived["sensitivity_exact"] = exact
    if stated is not None:
        out.record("sensitivity exact", stated is exact,
                   f"the plan states sensitivity_exact={stated!r}, the re-derived sensitivity is "
                   + ("exact" if exact else "a certified upper bound, not exact"))


def rederive_noise(out: PlanCheck, noise: Any, guarantee: Any, relation: Any,  # noqa: C901 (counted allow-list)
                   sensitivity: float, dim: int, spread: int | None = None) -> Any:
    """Record the ``noise`` check: the scale re-derived from the guarantee at the recomputed
    (certified) sensitivity, with the plan's sampler and grid; the plan's own statement of
    the sensitivity must be at least the recomputed one. ``noise`` is the plan's
    ``privacy.NoiseSpec`` (valid by construction: families, norms and samplers agree),
    ``relation`` a ``privacy.Neighbouring``. ``spread``: the recomputed number of coordinates
    neighbours can move (``privacy.kron_spread``) for kinds that use it; a spread the plan
    states must be at least that (a plan without one is inflated over all ``dim``
    coordinates). Returns the required NoiseSpec."""
    from factorize.numerics import is_power_of_two
    from factorize.privacy import ApproxDP, PrivacyError, calibrate, gaussian_approx_dp_holds

    def run() -> Any:
        if noise.relation is not relation:
            raise PrivacyError(f"the noise was calibrated for {noise.relation.key!r} neighbours, "
                               f"the plan states {relation.key!r}")
        family = noise.family
        snorm = noise.sensitivity_norm
        if noise.dim != dim:
            raise PrivacyError(f"the noise was calibrated for dim={noise.dim!r}, the release "
                               f"has {dim} coordinates")
        if noise.guarantee != guarantee:
            raise PrivacyError("the noise states a different guarantee from the plan's")
        grid = noise.grid
        if noise.is_exact and not (isinstance(grid, float) and is_power_of_two(grid)):
            raise PrivacyError(f"sampler {noise.sampler!r} needs a grid that is a power of two")
        stated = noise.spread
        if stated is not None:
            if spread is None:
                raise PrivacyError("the noise states a rounding spread, which this plan kind "
                                   "does not use")
            if stated < spread:
                raise PrivacyError(f"the noise states that neighbours move {stated} coordinates; "
                                   f"the measured strategy lets them move {spread}")
        req = calibrate(guarantee, sensitivity_l2=sensitivity if snorm == "l2" else None,
                        sensitivity_l1=sensitivity if snorm == "l1" else None,
                        grid=grid, dim=dim, relation=relation, family=family, spread=stated,
                        reference=noise.scale)
        out.required_scale = req.scale
        if req.sampler != noise.sampler:
            raise PrivacyError(f"the guarantee needs sampler {req.sampler!r}, the plan has "
                               f"{noise.sampler!r}")
        scale, base = noise.scale, noise.base_sensitivity
        for key, v in (("scale", scale), ("base_sensitivity", base), ("sensitivity", noise.sensitivity)):
            if not is_number(v) or not v > 0:
                raise PrivacyError(f"noise {key} must be a finite positive number")
        out.record("sensitivity", base >= sensitivity and same_number(base, sensitivity),
                   f"{snorm} sensitivity under {relation.key} recomputed (certified upper bound): "
                   f"{sensitivity:.12g}; the plan states {base:.12g}")
        # more noise than the calibration is safe, but not what a planner writes: a scale
        # other than the calibrated one is an inconsistent plan (and its claims are not its own)
        condition = isinstance(guarantee, ApproxDP) and family == "gaussian"
        if condition:
            # (ε, δ) Gaussian: the privacy condition itself, evaluated at the stated scale with
            # the calibration's own acceptance test (log-δ margin included), and refused at
            # scale·(1 − 1e-9): no root finder, and plans of any earlier calibration verify
            def holds(sigma: float) -> bool:
                return gaussian_approx_dp_holds(guarantee.epsilon, guarantee.delta, sigma,
                                                req.sensitivity, discrete=noise.is_exact)

            private, tight = holds(scale), not holds(scale * (1.0 - 1e-9))
        else:
            private, tight = scale >= req.scale, same_number(scale, req.scale)
        ok = private and tight
        if private:  # the guarantee the noise was shown to give: what a release is charged
            out.derived["guarantee"] = guarantee
        out.record("noise", ok,
                   f"{family} scale {scale:.12g} vs {req.scale:.12g} required by {guarantee} at "
                   f"{snorm} sensitivity {req.sensitivity:.12g}"
                   + (f" (grid γ={grid:.6g} inflates {sensitivity:.6g} → {req.sensitivity:.6g})"
                      if grid else "")
                   + (" — the (ε, δ) condition holds at the stated scale and fails 1e-9 below it"
                      if condition and ok else "")
                   + ("" if ok else f": UNDER-NOISED — the plan's scale {scale:.12g} is smaller "
                                    f"than the required {req.scale:.12g}" if not private else
                      "" if ok else f": the plan's scale {scale:.12g} is not the calibrated "
                                    f"{req.scale:.12g}"))
        if noise.sensitivity < req.sensitivity or not same_number(noise.sensitivity,
                                                                   req.sensitivity):
            out.record("noise sensitivity", False,
                       f"the plan states sensitivity {noise.sensitivity:.12g}, recomputed "
                       f"{req.sensitivity:.12g}")
        return req

    return guard(out, "noise", run)







def verify_any(plan: Any, *, certificate: bool = True, allow_weak_guarantee: bool = False) -> list[str]:
    """The failures of any plan kind's verification (empty: every check passed), dispatched
    through ``plan.registry``."""
    from .registry import kind_of_plan

    return kind_of_plan(plan).verify(plan, certificate=certificate,
                                     allow_weak_guarantee=allow_weak_guarantee).failures


# ---------------------------------------------------------------------------------------
# factorization plans


def verify_plan(plan: Plan, *, certificate: bool = True, raise_on_failure: bool = False,
                workload: Any = None, allow_weak_guarantee: bool = False) -> PlanCheck:
    """Run the checks of the module docstring; ``raise_on_failure`` raises :class:`PlanRefused`."""
    from factorize.privacy import kron_sensitivity, kron_spread
    from factorize.privacy.lattice import measured_factors

    from . import claims

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    record = out.record
    record("file", True, "schema version, array digests, manifest digest, shapes, finite values")
    fact = plan.factorization
    m = fact.strategy_rows

    guard(out, "manifest", lambda: record("manifest", *claims.manifest_consistency(plan)))
    g = check_guarantee_policy(out, plan.guarantee, allow_weak_guarantee)
    W = rebuild_workload(plan.workload, workload, record, plan.embedded, plan.domain)
    out.workload = W
    usable = W is not None and out.ok("workload")

    # 5–6. η and the residual
    if usable:
        if plan.norm == "approx_gamma_2":
            guard(out, "eta", lambda: _check_eta(out, plan, W))
        guard(out, "W = R·A", lambda: record("W = R·A", *_residual_check(W, plan, out)))

    # 7. sensitivity and noise
    relation = plan.relation
    if g is not None:
        snorm = plan.noise.sensitivity_norm
        measured = guard(out, "sensitivity", lambda: measured_factors(fact.A_factors))
        sens = None if measured is None else guard(
            out, "sensitivity", lambda: kron_sensitivity(measured, snorm, relation))
        if sens is not None:
            out.recomputed_sensitivity = sens.value
            check_sensitivity_exact(out, plan.sensitivity_exact, sens.exact)
            measured_spread = kron_spread(measured, relation, plan.noise.grid) if plan.noise.spread is not None \
                else None
            rederive_noise(out, plan.noise, g, relation, sens.value, m, measured_spread)

    # 8. claims
    if usable:
        guard(out, "claims", lambda: claims.check_factorization_claims(out, plan, W, g, certificate))
    return out.finish(t0, raise_on_failure)


def _check_eta(out: PlanCheck, plan: Plan, W: Any) -> None:
    from .rules import ETA_MAX_FRACTION, check_eta

    eta = plan.certificate.eta
    try:
        check_eta(eta, W)
        out.record("eta", True, f"η = {eta:g} ≤ {ETA_MAX_FRACTION:g}·max|W|")
    except PlanError as exc:
        out.record("eta", False, str(exc))


def _residual_check(W: Any, plan: Plan, out: PlanCheck) -> tuple[bool, str]:
    """W ≈ R·Ã (Ã the measured strategy) within ``tol·max|W| + η``; also sets
    ``out.derived['residual']``, the certified max residual (or the limit, for probes)."""
    from factorize.privacy.lattice import measured_factors
    from workloads.structured import kron_leaves

    from .bias import residual_bound
    from .rules import workload_max_abs

    fact = plan.factorization
    eta = plan.certificate.eta or 0.0
    measured = measured_factors(fact.A_factors)
    limit = DEFAULT_RESIDUAL_TOL * workload_max_abs(W) + eta
    out.derived["residual_limit"] = limit
    leaves = kron_leaves(W)
    if fact.is_kron:
        if len(leaves) != len(fact.R_factors):
            return False, (f"the plan has {len(fact.R_factors)} Kronecker factors, the workload "
                           f"{len(leaves)}")
        Wf = [leaf.dense() for leaf in leaves]
        if [w.shape for w in Wf] != [(R.shape[0], A.shape[1]) for R, A in zip(fact.R_factors, fact.A_factors, strict=True)]:
            return False, "factor shapes differ from the workload's Kronecker factors"
        res = residual_bound(Wf, fact.R_factors, measured)
        out.derived["residual"] = res
        return res <= limit, f"max|W − RÃ| ≤ {res:.3g} (limit {limit:.3g}, per factor, certified)"
    R, A = fact.R_factors[0], measured[0]
    k, m = R.shape
    N = A.shape[1]
    if k * N * m <= EXACT_RESIDUAL_FLOPS:
        res = residual_bound([W.dense()], [R], [A])
        out.derived["residual"] = res
        return res <= limit, f"max|W − RÃ| ≤ {res:.3g} (limit {limit:.3g}, certified)"
    # random ±1 probes (see module docstring)
    from factorize.privacy import SecureRandom

    bits = SecureRandom().words((N * N_PROBES + 63) // 64)
    signs = np.unpackbits(bits.view(np.uint8))[: N * N_PROBES].reshape(N, N_PROBES)
    X = signs.astype(np.float64) * 2.0 - 1.0
    WX = np.asarray(W.matvec(X), dtype=np.float64)
    D = np.abs(WX - R @ (A @ X))
    absW = W.dense() if k * N <= 5e7 else None
    rowW = np.abs(absW).sum(axis=1) if absW is not None else np.abs(WX).max(axis=1) * N
    allowance = 4.0 * (N + m + 2) * U * (rowW + np.abs(R) @ np.abs(A).sum(axis=1))
    worst = float(np.max(D - allowance[:, None]))
    out.derived["residual"] = limit
    return worst <= limit, (f"{N_PROBES} random ±1 probes: max|(W − RÃ)x| − rounding allowance = "
                            f"{worst:.3g} (limit {limit:.3g}; a residual above the limit escapes "
                            f"with probability ≤ 2^-{N_PROBES})")
