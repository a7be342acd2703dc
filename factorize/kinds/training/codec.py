"""The training plan file (``format: "factorize-training-plan"``): the container and integrity
rules every plan shares (``plan.files``: digests, canonical header, atomic write), a manifest
stating ``plan_kind: "training"``, and the strategy's parameters as its arrays — ``theta`` and
``omega`` (BLT), ``coef`` (banded Toeplitz: C's bands; banded inverse: C⁻¹'s): kilobytes at any n — or, for a dense multi-epoch
strategy (``kinds.training.dense``), the n × n ``matrix`` and the n × K dual ``witness`` (and, for
the worst-step objective, the dual's n row ``weights``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from factorize.plan.files import (
    PlanBytes,
    PlanFormatError,
    check_finite,
    check_plan_kind,
    guarded_load,
    json_int,
    json_number,
    read_plan_container,
    write_plan_container,
)

from .plan import (
    REDUCTIONS,
    LowerBoundClaim,
    ObjectiveClaim,
    SensitivityClaim,
    TrainingPlan,
    momentum_beta,
)

if TYPE_CHECKING:
    from factorize.privacy.participation import Participation
    from factorize.training.toeplitz import LongStrategy

from .dense import DenseStrategy

TRAINING_FORMAT = "factorize-training-plan"
TRAINING_SCHEMA_VERSION = 1
#: The arrays of each strategy kind.
STRATEGY_ARRAYS = {"blt": {"theta", "omega"}, "banded_toeplitz": {"coef"},
                   "banded_inverse": {"coef"}, "dense": {"matrix", "witness"}}
#: A dense strategy planned for the worst step also holds the dual's row weights.
DENSE_MAX_ARRAYS = {"matrix", "witness", "weights"}


def save_training_plan(plan: TrainingPlan, path: str | Path) -> None:
    """Write a :class:`TrainingPlan` atomically."""
    write_plan_container(path, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION, plan.manifest(),
                         plan.arrays())


def load_training_plan(path: str | Path | PlanBytes) -> TrainingPlan:
    """Read and structurally check a training plan; :class:`PlanFormatError` on any problem."""
    plan: TrainingPlan = guarded_load(_load, path, "training plan")
    return plan


def _load(path: Path | PlanBytes) -> TrainingPlan:
    from factorize.plan.files import require_record
    from factorize.privacy import guarantee_from_dict
    from factorize.privacy.participation import Participation
    from factorize.training.toeplitz import BLT, strategy_from_dict

    m, arrays = read_plan_container(path, TRAINING_FORMAT, TRAINING_SCHEMA_VERSION)
    check_plan_kind(path, m, TrainingPlan.plan_kind)
    if m.get("plan_kind") != TrainingPlan.plan_kind:
        raise PlanFormatError(f"{path}: a training plan states plan_kind 'training'")
    check_finite(path, arrays)  # type: ignore[arg-type]
    n = json_int(m.get("n"))
    if n is None or n < 2:
        raise PlanFormatError(f"{path}: the number of steps n must be an integer ≥ 2")
    if not isinstance(m.get("workload"), str):
        raise PlanFormatError(f"{path}: the training workload must be 'prefix' or 'momentum=β'")
    momentum_beta(m["workload"])
    if m.get("neighbouring") != "add_remove":
        raise PlanFormatError(f"{path}: a training plan adds or removes one record's "
                              "contributions (neighbouring add_remove)")
    part = m.get("participation")
    participation = None if part is None else Participation.parse(str(part))
    if part is not None and participation is not None and participation.key != part:
        raise PlanFormatError(f"{path}: participation {part!r} is not in canonical form")
    head = m.get("strategy")
    if not isinstance(head, dict) or head.get("kind") not in STRATEGY_ARRAYS:
        raise PlanFormatError(f"{path}: the strategy must be one of {sorted(STRATEGY_ARRAYS)}")
    kind = head["kind"]
    if set(arrays) != STRATEGY_ARRAYS[kind] and not (kind == "dense" and set(arrays) == DENSE_MAX_ARRAYS):
        raise PlanFormatError(f"{path}: a {kind} strategy holds the arrays "
                              f"{sorted(STRATEGY_ARRAYS[kind])}, the file has {sorted(arrays)}")
    strategy: LongStrategy | DenseStrategy
    if kind == "dense":
        strategy = _dense(path, n, participation, head, arrays)
    else:
        if any(a.ndim != 1 for a in arrays.values()):
            raise PlanFormatError(f"{path}: the strategy's arrays must be vectors")
        record = {"kind": kind, "n": n, **{k: arrays[k] for k in arrays}}
        strategy = strategy_from_dict(record)
        size = strategy.buffers if isinstance(strategy, BLT) else strategy.bands
        if head.get("buffers" if kind == "blt" else "bands") != size:
            raise PlanFormatError(f"{path}: the strategy header's size does not match its arrays")
    noise = m.get("noise")
    if (not isinstance(noise, dict) or noise.get("family") != "gaussian"
            or noise.get("sampler") != "float" or json_number(noise.get("sigma")) is None
            or not noise["sigma"] > 0):
        raise PlanFormatError(f"{path}: the noise must be Gaussian (float sampler) with a "
                              "positive σ")
    objective = require_record(path, m, "objective", ObjectiveClaim)
    if objective["reduction"] not in REDUCTIONS:
        raise PlanFormatError(f"{path}: objective.reduction must be one of {REDUCTIONS}")
    provenance = m.get("provenance")
    return TrainingPlan(
        n=n, participation=participation, strategy=strategy,
        guarantee=guarantee_from_dict(m.get("guarantee") or {}), sigma=float(noise["sigma"]),
        sensitivity=require_record(path, m, "sensitivity", SensitivityClaim),
        objective=objective, lower_bound=require_record(path, m, "lower_bound", LowerBoundClaim),
        workload=str(m["workload"]), provenance=provenance if isinstance(provenance, dict) else {})


def _dense(path: Path | PlanBytes, n: int, participation: Participation | None,
           head: dict[str, Any], arrays: dict[str, np.ndarray]) -> DenseStrategy:
    """The dense strategy of a plan file: an n × n ``matrix`` and an n × K ``witness`` under
    ``epochs=K``, its header's ``lower_triangular`` true exactly when the matrix is."""
    if participation is None or participation.kind != "epochs":
        raise PlanFormatError(f"{path}: a dense training strategy is certified under epochs=K")
    C, F, p = arrays["matrix"], arrays["witness"], arrays.get("weights")
    if C.shape != (n, n) or F.shape != (n, participation.k):
        raise PlanFormatError(f"{path}: a dense strategy over n={n} steps under {participation.key} "
                              f"holds an {n} × {n} matrix and an {n} × {participation.k} witness, the "
                              f"file has {C.shape} and {F.shape}")
    if p is not None and (p.shape != (n,) or np.any(p < 0)):
        raise PlanFormatError(f"{path}: a dense strategy's row weights are {n} non-negative numbers, "
                              f"the file has shape {p.shape}")
    strategy = DenseStrategy(np.asarray(C, dtype=np.float64), np.asarray(F, dtype=np.float64),
                             None if p is None else np.asarray(p, dtype=np.float64))
    if head.get("lower_triangular") is not strategy.lower_triangular:
        raise PlanFormatError(f"{path}: the strategy header's lower_triangular does not match its "
                              "matrix")
    return strategy

