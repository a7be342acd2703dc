"""The one release pipeline: every plan kind runs through :func:`run`.

The privacy-critical order (``executor.session`` frames it: nothing is charged that is not
released, nothing released that is not charged):

1. the answers file is opened for an all-or-nothing write, ``--seed`` with ``--ledger``
   refused, the ledger opened and verified (``ReleaseSession.start``);
2. the plan is read by its kind (``plan.registry``: format, schema, digests) and verified from
   first principles — an under-noised, inconsistent or over-claiming plan is refused here;
3. a plan whose noise is not an exact sampler is refused unless ``allow_float_noise``;
4. the answers' labels built from the workload and the public schema
   (``executor.labels``); the data is read and the exact measurement taken (the kind's ``measure``: a histogram, the
   marginal tables or the messages), δ < 1/n checked for a central release — every
   deterministic check that can fail happens before the charge;
5. the charge (central kinds; a local aggregation releases already-randomized messages);
6. the kind's ``release``: noise drawn once from the OS (``SecureRandom``) — or
   ``TestRandom(seed)`` in test mode, whose every output says NOT PRIVATE — then the
   reconstruction / decoding / post-processing, bounded in wall-clock time;
7. the answers written whole, then the release recorded in the ledger.
"""

from __future__ import annotations

import time
from typing import Any

from .session import POSTPROCESS_SECONDS, ExecutionError, ReleaseSession, check_record_count


def run(plan_path: str, data_path: str, out_path: str | None = None, *, seed: int | None = None,
        allow_float_noise: bool = False, allow_extra_columns: bool = False,
        engine: str = "duckdb", ledger: str | None = None, dataset: str | None = None,
        allow_weak_guarantee: bool = False, postprocess_seconds: float = POSTPROCESS_SECONDS,
        expect: str | None = None, tables: str | None = None) -> Any:
    """Run any plan (module docstring); ``expect``: refuse a plan of another kind; ``tables``:
    a folder for one tidy CSV per marginal table (a stack-of-marginals workload), opened with
    the answers file before the charge."""
    from factorize.plan.registry import kind_of_file

    from .release import make_rng

    kind = kind_of_file(plan_path)
    if expect is not None and kind.name != expect:
        raise ExecutionError(f"{plan_path}: a {kind.name} plan, expected a {expect} plan")
    if not kind.central and (ledger is not None or seed is not None):
        raise ExecutionError(f"a {kind.name} plan aggregates already-randomized messages: it takes "
                             "neither --ledger (nothing is charged) nor --seed (no noise is drawn)")
    with ReleaseSession.start(plan_path, data_path, out_path, seed=seed, ledger=ledger,
                              dataset=dataset) as session:
        plan = kind.load(plan_path)
        check = kind.verify(plan, allow_weak_guarantee=allow_weak_guarantee)
        if not check.passed:
            from factorize.plan.checks import PlanRefused

            raise PlanRefused("plan refused: " + "; ".join(check.failures))
        if kind.sampler(plan) == "float" and not allow_float_noise:
            raise ExecutionError("the plan uses floating-point noise (sampler 'float'); refusing "
                                 "(pass --allow-float-noise to accept it)")
        labels, label_note = _labels(plan, check)  # public: from the workload and the schema
        opened = _open_tables(tables, plan, check, plan_path, data_path, ledger)
        try:
            measurement = kind.measure(plan, check, data_path, engine=engine,
                                       allow_extra_columns=allow_extra_columns)
            if kind.central:
                check_record_count(kind.guarantee(plan), measurement.n_records, allow_weak_guarantee)
                session.charge(kind.guarantee(plan), kind.relation(plan))
            else:
                session.record_plan()
            meta = dict(session.metadata)
            if allow_weak_guarantee:
                meta["guarantee_override"] = True
            rel = kind.release(plan, check, measurement, make_rng(seed) if kind.central else None,
                               allow_float_noise=allow_float_noise, metadata=meta,
                               deadline=time.monotonic() + postprocess_seconds)
            merged = {**rel.extra.get("labels", {}), **labels}
            rel.extra["labels"] = {k: merged[k] for k in sorted(merged, key=lambda c: c != "label")}
            if label_note:
                rel.metadata["labels"] = label_note
            session.write(rel.columns(), rel.metadata)
            if opened:
                from .output import write_marginal_tables

                rel.extra["tables"] = write_marginal_tables(opened, rel.columns(), rel.metadata)
        finally:
            for _, out in opened:  # tables not written (a failure above) leave nothing
                if not getattr(out, "committed", False):
                    out.abort()
        return rel


def _open_tables(tables: str | None, plan: Any, check: Any, plan_path: str, data_path: str,
                 ledger: str | None) -> list:
    if tables is None:
        return []
    from .labels import marginal_tables
    from .output import open_marginal_tables

    spec = marginal_tables(check.workload, plan.domain) if hasattr(plan, "domain") else []
    if not spec:
        raise ExecutionError("--tables writes one table per marginal: this plan's workload is "
                             "not a stack of marginals (use a marginals: spec)")
    return open_marginal_tables(tables, spec, protected={"--data": data_path, "the plan": plan_path,
                                                         "the ledger": ledger})


def _labels(plan: Any, check: Any) -> tuple[dict[str, Any], str | None]:
    """The answers' label columns (``executor.labels``), computed before the charge; a
    labelling failure never blocks a release: the answers go out with their query index and
    the metadata says why they carry no labels."""
    from .labels import answer_labels

    try:
        labels = answer_labels(plan, check)
        recon = getattr(plan, "reconstruction", None)
        if recon is not None and "marginal" in labels:  # the structured release reuses them
            recon._labels = (labels["marginal"], labels["cell"])
        return labels, None
    except Exception as exc:  # noqa: BLE001 — labels are a convenience, never a reason to fail
        return {}, f"labels unavailable ({type(exc).__name__})"
