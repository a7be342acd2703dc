"""Building a training plan (``KIND.build``): the optimisers of ``training.blt`` (BLT,
Dvijotham et al. 2024, §5) and ``training.banded`` (banded Toeplitz, McKenna 2024, §3) or ``training.bisr`` (banded inverse
square root, Kalinin, McKenna, Upadhyay & Lampert, ICLR 2026, §3) — L-BFGS
on ``error·sensitivity²`` in O(n·parameters), scipy — or the dense multi-epoch program of
``training.multi_epoch`` (Choquette-Choo et al. 2023, §4; its certified dual witness stored) — then every claim derived from the stored
parameters and the plan verified (``kinds.training.verify``) before it is returned. Verifying,
inspecting or streaming a training plan never imports this module."""

from __future__ import annotations

import datetime as _dt
import time
from typing import TYPE_CHECKING

from factorize.numerics import integer
from factorize.plan.errors import PlanError

from .dense import DenseStrategy, prefix_matrix
from .options import TrainingOptions
from .plan import REDUCTIONS, TrainingPlan

if TYPE_CHECKING:
    from factorize.privacy.participation import Participation


def build(options: TrainingOptions) -> TrainingPlan:
    """A verified training plan from ``options`` (:class:`TrainingOptions`)."""
    from factorize.io.provenance import versions
    from factorize.privacy import ZCDP, ApproxDP, parse_guarantee
    from factorize.privacy.participation import Participation
    from factorize.privacy.policy import check_guarantee
    from factorize.training.banded import optimize_banded
    from factorize.training.blt import optimize_blt
    from factorize.training.toeplitz import ToeplitzWorkload

    from .verify import verify_training_plan

    t0 = time.perf_counter()
    o = options
    n = integer("n", o.n, 2, PlanError)
    g = parse_guarantee(o.guarantee) if isinstance(o.guarantee, str) else o.guarantee
    if not isinstance(g, (ZCDP, ApproxDP)):
        raise PlanError(f"a training plan's noise is Gaussian: it gives zCDP or (ε, δ)-DP, not {g}")
    check_guarantee(g, n=None, allow_weak=o.allow_weak_guarantee)
    part = Participation.parse(o.participation) if isinstance(o.participation, str) else o.participation
    if part is not None and part.kind == "epochs" and n % part.k:
        raise PlanError(f"epochs={part.k} needs a number of steps divisible by {part.k}, got n={n}")
    if o.objective not in REDUCTIONS:
        raise PlanError(f"unknown objective {o.objective!r}; expected one of {REDUCTIONS}")
    if o.strategy == "dense":
        strategy, optimiser = _dense(o, n, part)
        provenance = {"versions": versions(), "mechanism": "training", "strategy": o.strategy,
                      "optimiser": optimiser, "plan_seconds": time.perf_counter() - t0,
                      "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        plan = TrainingPlan.from_strategy(strategy, part, g, o.objective, "prefix", provenance)
        verify_training_plan(plan, allow_weak_guarantee=o.allow_weak_guarantee, raise_on_failure=True)
        return plan
    if o.streaming:
        raise PlanError("streaming applies to --strategy dense (a Toeplitz strategy is "
                        "lower-triangular already)")
    workload = ToeplitzWorkload.prefix() if o.momentum is None else ToeplitzWorkload.momentum(o.momentum)
    if o.strategy == "blt":
        opt = optimize_blt(n, o.buffers, workload=workload, reduction=o.objective,
                           participation=part, max_iter=o.max_iter)
    elif o.strategy == "banded":
        opt = optimize_banded(n, o.bands, workload=workload, reduction=o.objective,
                              participation=part, max_iter=o.max_iter)
    elif o.strategy == "bisr":
        from factorize.training.bisr import optimize_bisr

        opt = optimize_bisr(n, o.bands, workload=workload, reduction=o.objective,
                            participation=part, max_iter=o.max_iter)
    else:
        raise PlanError(f"unknown training strategy {o.strategy!r}; expected 'blt', 'banded', "
                        "'bisr' or 'dense'")
    provenance = {"versions": versions(), "mechanism": "training", "strategy": o.strategy,
                  "optimiser": f"L-BFGS-B, {opt.iterations} iterations: {opt.message}",
                  "plan_seconds": time.perf_counter() - t0,
                  "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    plan = TrainingPlan.from_strategy(opt.strategy, part, g, o.objective, workload.name, provenance)
    verify_training_plan(plan, allow_weak_guarantee=o.allow_weak_guarantee, raise_on_failure=True)
    return plan


def _dense(o: TrainingOptions, n: int, part: Participation | None) -> tuple[DenseStrategy, str]:
    """The dense multi-epoch strategy of ``training.multi_epoch`` (its dual solved by L-BFGS,
    the primal read from it; lower-triangular with ``streaming``) and its witness: for the
    total squared error (γ_F-type, (P)) or the worst step's (γ₂-type, (P∞); the witness then
    carries the dual's row weights)."""
    from factorize.training.certificate import EpochsWitness
    from factorize.training.multi_epoch import plan_multi_epoch

    if part is None or part.kind != "epochs":
        raise PlanError("--strategy dense plans under --participation epochs=K (K = 1: each "
                        "record once)")
    if o.momentum is not None:
        raise PlanError("--strategy dense plans the prefix sums (no --momentum)")
    objective = "gamma_f" if o.objective == "total" else "max"
    sol = plan_multi_epoch(prefix_matrix(n), part, objective=objective, streaming=o.streaming,
                           max_iter=o.max_iter, time_limit=o.time_limit)
    if not isinstance(sol.witness, EpochsWitness):
        raise PlanError("the dense planner returned no epochs witness")
    converged = "converged" if sol.details.get("converged") else "stopped before the target gap"
    dual = "multi-epoch dual" if objective == "gamma_f" else "multi-epoch worst-step dual, rows balanced"
    return (DenseStrategy(sol.strategy, sol.witness.factor, sol.witness.weights),
            f"L-BFGS-B on the {dual}, {sol.iterations} iterations ({converged}); "
            f"certified gap {sol.gap:.3g}")
