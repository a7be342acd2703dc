"""The verifier's rules every plan kind shares (each kind's ``verify`` module applies them):
the guarantee within the documented ceilings (:func:`check_guarantee_policy`), the workload
rebuilt from its spec and fingerprint (:func:`rebuild_workload`), the stated sensitivity flag
(:func:`check_sensitivity_exact`), the noise re-derived from the guarantee and a certified
sensitivity (:func:`rederive_noise`), and the bounds of a marginal post-processing
(:func:`check_marginal_postprocess`). Nothing here imports a builder or a solver.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from factorize.numerics import is_number

from .check_record import PlanCheck, guard, same_number
from .errors import PlanError
from .files import json_int, json_number
from .records import WorkloadRecord

#: Largest iteration count a plan may ask the executor's post-processing for.
MAX_ITERATIONS = 100_000

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









# ---------------------------------------------------------------------------------------
# factorization plans








def max_iterations(post: Mapping[str, Any]) -> int:
    """``max_iter``: an integer in 1..MAX_ITERATIONS (PlanError otherwise)."""
    it = json_int(post.get("max_iter"))
    if it is None or not 1 <= it <= MAX_ITERATIONS:
        raise PlanError(f"max_iter must be an integer in 1..{MAX_ITERATIONS}, got {post.get('max_iter')!r}")
    return it


def iterations_and_tol(post: Mapping[str, Any]) -> tuple[int, float]:
    """A projection's bounds: :func:`max_iterations` and ``tol`` a finite number ≥ 0."""
    it = max_iterations(post)
    tol = json_number(post.get("tol"))
    if tol is None or tol < 0:
        raise PlanError(f"tol must be a finite number ≥ 0, got {post.get('tol')!r}")
    return it, tol


def check_marginal_postprocess(out: PlanCheck, post: Mapping[str, Any] | None, W: Any,
                               sizes: Any) -> None:
    """A structured plan's ``postprocess`` (``postprocess.plan_option``): a method the algebra
    of marginals serves (``nonneg``, ``integer``), bounded iterations and a tolerance, and a
    workload whose every block is a marginal table (``postprocess.tables``)."""
    from factorize.postprocess.plan_option import METHODS, serves_marginals

    if post is None:
        out.record("postprocess", True, "none")
        return
    if post.get("method") not in METHODS:
        raise PlanError(f"unknown post-processing of a structured plan {post.get('method')!r}; "
                        f"expected one of {METHODS}")
    it, tol = iterations_and_tol(post)
    why = serves_marginals(W, sizes)
    out.record("postprocess", why is None,
               f"{post['method']}: at most {it} iterations, tolerance {tol:g}"
               + ("" if why is None else f" — REFUSED: {why}"))
