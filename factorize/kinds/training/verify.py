"""Verification of a training plan from its parameters alone (``kinds.training.plan``): the
guarantee within the documented ceilings; the L2 sensitivity under the plan's participation
re-certified from the stored strategy (``training.toeplitz.certified_sensitivity``; for a
banded inverse square root, C's column is the series reciprocal of the stored bands with a
certified entrywise error, ``training.series``); σ at
least what the guarantee needs at that sensitivity and no more than the calibration (an
inconsistent plan's claims are not its own); the error per unit σ² re-evaluated in
O(n·parameters) (``plan.training_claims``); the lower bound re-derived
(``training.long_bound``; for a dense multi-epoch strategy, from its stored dual witness,
``kinds.training.dense``). A plan that claims better than re-derived — a smaller sensitivity
or error, a larger lower bound, an attained sensitivity or exactness it does not have — is
refused, and so is one whose σ is below the guarantee's. Numpy only: no scipy.optimize (nor
scipy.signal, which loads it)."""

from __future__ import annotations

import time

from factorize.plan.check_record import PlanCheck, guard, same_number
from factorize.plan.errors import PlanError

from .dense import DenseStrategy
from .plan import TrainingClaims, TrainingPlan, sigma_suffices, training_claims

#: Relative agreement required of the floating-point error claims (the evaluation is
#: deterministic; this absorbs a different BLAS or LAPACK).
ERROR_RTOL = 1e-9


def verify_training_plan(plan: TrainingPlan, *, allow_weak_guarantee: bool = False,
                         raise_on_failure: bool = False) -> PlanCheck:
    """The checks of the module docstring; ``raise_on_failure`` raises ``PlanRefused``."""
    from factorize.plan.checks import check_guarantee_policy

    t0 = time.perf_counter()
    out = PlanCheck(passed=False, checks=[])
    out.record("file", True, "format, schema version, array digests, manifest digest, finite values")
    g = check_guarantee_policy(out, plan.guarantee, allow_weak_guarantee)
    claims = guard(out, "strategy", lambda: _claims(out, plan))
    if claims is not None:
        guard(out, "sensitivity", lambda: _check_sensitivity(out, plan, claims))
        if g is not None:
            guard(out, "noise", lambda: _check_noise(out, plan, claims))
        guard(out, "objective", lambda: _check_objective(out, plan, claims))
        guard(out, "lower bound", lambda: _check_lower_bound(out, plan, claims))
    return out.finish(t0, raise_on_failure)


def _claims(out: PlanCheck, plan: TrainingPlan) -> TrainingClaims:
    from factorize.training.toeplitz import BLT

    s = plan.strategy
    if s.n != plan.n:
        raise PlanError(f"the strategy has {s.n} steps, the plan {plan.n}")
    claims = training_claims(s, plan.participation, plan.guarantee, plan.reduction, plan.workload)
    if isinstance(s, DenseStrategy):
        what = (f"dense {s.n} × {s.n} strategy" + (", lower-triangular" if s.lower_triangular else "")
                + ": sensitivity from its Gram matrix, error from W C⁻¹ (residual within "
                "tolerance) and lower bound from the stored dual witness")
    else:
        size = f"{s.buffers} buffers" if isinstance(s, BLT) else f"{s.bands} bands"
        what = (f"{type(s).__name__} of {size} over n={s.n} steps: sensitivity, error and lower "
                "bound re-derived from its parameters")
    out.record("strategy", True, what)
    out.derived["claims"] = claims
    out.derived["sensitivity"] = claims.sensitivity
    out.recomputed_sensitivity = claims.sensitivity.value
    return claims


def _check_sensitivity(out: PlanCheck, plan: TrainingPlan, claims: TrainingClaims) -> None:
    re, st = claims.sensitivity, plan.sensitivity
    problems = []
    if st["value"] < re.value:
        problems.append(f"UNDERSTATED: the plan states Δ ≤ {st['value']:.12g}, certified {re.value:.12g}")
    elif not same_number(st["value"], re.value):
        problems.append(f"the plan states Δ ≤ {st['value']:.12g}, certified {re.value:.12g}")
    if st["lower"] > re.lower or not same_number(st["lower"], re.lower):
        problems.append(f"the plan states an attained {st['lower']:.12g}, re-derived {re.lower:.12g}")
    if st["exact"] is not re.exact:
        problems.append(f"the plan states exact={st['exact']}, re-derived {re.exact}")
    if st["method"] != re.method:
        problems.append("the plan states another method")
    part = "single participation" if plan.participation is None else plan.participation.key
    out.record("sensitivity", not problems,
               f"L2 sensitivity under {part} re-certified from the parameters: ≤ {re.value:.12g}"
               + (" (exact)" if re.exact else f", attained ≥ {re.lower:.12g}") + f"; {re.method}"
               + ("" if not problems else " — " + "; ".join(problems)))


def _check_noise(out: PlanCheck, plan: TrainingPlan, claims: TrainingClaims) -> None:
    g, sigma, delta = plan.guarantee, plan.sigma, claims.sensitivity.value
    private = sigma_suffices(g, sigma, delta)
    tight = not sigma_suffices(g, sigma * (1.0 - 1e-9), delta)
    out.required_scale = claims.sigma
    if private:  # the guarantee the noise was shown to give: what a run is charged
        out.derived["guarantee"] = g
    out.record("noise", private and tight,
               f"Gaussian σ {sigma:.12g} vs {claims.sigma:.12g} required by {g} at the certified "
               f"sensitivity {delta:.12g}"
               + ("" if private else f": UNDER-NOISED — σ {sigma:.12g} gives less than {g}")
               + ("" if not private or tight else f": σ {sigma:.12g} is not the calibrated "
                                                  f"{claims.sigma:.12g}"))


def _check_objective(out: PlanCheck, plan: TrainingPlan, claims: TrainingClaims) -> None:
    o = plan.objective
    problems = []
    for key, value in (("error", claims.error), ("normalised", claims.normalised)):
        stated = o[key]  # type: ignore[literal-required]
        if stated < value * (1.0 - ERROR_RTOL):
            problems.append(f"FALSE ACCURACY CLAIM: {key} {stated:.12g}, re-derived {value:.12g}")
        elif not same_number(stated, value, ERROR_RTOL):
            problems.append(f"{key} {stated:.12g}, re-derived {value:.12g}")
    out.record("objective", not problems,
               f"{o['reduction']} squared error per unit σ² re-evaluated from "
               + (("W C⁻¹ (certified Frobenius bound)" if plan.reduction == "total" else
                   "W C⁻¹ (certified row norms)") if isinstance(plan.strategy, DenseStrategy)
                  else "C⁻¹'s first column") + ": "
               f"{claims.error:.12g}; × Δ² = {claims.normalised:.12g}"
               + ("" if not problems else " — the plan states otherwise: " + "; ".join(problems)))


def _check_lower_bound(out: PlanCheck, plan: TrainingPlan, claims: TrainingClaims) -> None:
    re, st = claims.lower_bound, plan.lower_bound
    problems = []
    if st["value"] > re.value:
        problems.append(f"INFLATED: the plan states {st['value']:.12g}, certified {re.value:.12g}")
    elif not same_number(st["value"], re.value):
        problems.append(f"the plan states {st['value']:.12g}, certified {re.value:.12g}")
    if (st["participations"], st["period"], st["how"]) != (re.participations, re.period, re.how):
        problems.append("the plan states another derivation")
    ok = not problems and claims.normalised >= re.value
    if claims.normalised < re.value:  # a certified lower bound above an attained value: a bug
        problems.append(f"the strategy's error·Δ² {claims.normalised:.12g} is below the certified "
                        "lower bound (inconsistent evaluation)")
    out.record("lower bound", ok,
               f"every factorization of W (n={plan.n}) has error·Δ² ≥ {re.value:.12g} ({re.how}); "
               f"this strategy is within a factor {claims.normalised / re.value:.10g} (gap "
               f"{claims.normalised / re.value - 1.0:.3g})"
               + ("" if not problems else " — " + "; ".join(problems)))

