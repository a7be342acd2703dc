"""The one release pipeline: every plan kind runs through :func:`run`.

The privacy-critical order (``executor.session`` frames it: nothing is charged that is not
released, nothing released that is not charged):

1. the plan file is read once, into memory (``plan.files.read_plan_bytes``: one ``open``, a
   size limit); its kind, the plan, its verification and the digest the ledger records all
   come from those bytes (a file replaced meanwhile changes nothing);
2. the answers file is opened for an all-or-nothing write, ``--seed`` with ``--ledger``
   refused, the ledger opened and verified (``ReleaseSession.start``);
3. the plan is loaded from the bytes by its kind (``factorize.kinds``: format, schema, digests);
   with ``tables``, the workload is rebuilt from the plan's spec and one file per table
   (``executor.tables``) opened — at once, before the verification;
4. the plan is verified from first principles (given that workload, whose fingerprint it
   checks) — an under-noised, inconsistent or over-claiming plan is refused here; a plan
   whose noise is not an exact sampler is refused unless ``allow_float_noise``;
5. the answers' labels built from the workload and the public schema (``executor.labels``);
   the data is read and the exact measurement taken (the kind's ``measure``: a histogram,
   the marginal tables or the messages), δ < 1/n checked for a central release;
6. the charge (central kinds; a local aggregation releases already-randomized messages) of
   the guarantee the verification established (``check.derived["guarantee"]``: the one the
   noise was shown to give, never the manifest's word alone), with the SHA-256 of the bytes
   of step 1;
7. the kind's ``release``: noise drawn once from the OS (``SecureRandom``) — or
   ``TestRandom(seed)`` in test mode, whose every output says NOT PRIVATE — then the
   reconstruction / decoding / post-processing, bounded in wall-clock time;
8. the answers (and tables) written whole, then the release recorded in the ledger.

Every check that can fail deterministically runs before the charge (step 6); the test
``tests/test_release_frame_security.py`` runs each with a ledger and finds nothing charged:

* step 1: the plan file missing, not a regular file, above the size limit, not a plan, of
  another kind than ``expect``; ``--ledger``/``--seed`` with a local plan;
* step 2: ``--ledger`` without ``--dataset`` (or the reverse); ``--seed`` with ``--ledger``;
  ``--out`` with an unknown suffix, in a missing or unwritable folder, that is a folder, that
  exists (without ``overwrite``), whose name is too long, that is the data, the plan or a
  ledger file; the ledger missing or failing its verification;
* step 3: the plan file corrupt, tampered (digests) or of an unknown version; ``--tables``:
  the folder missing, the workload not rebuildable, a table file that exists (without
  ``overwrite``), is a folder, is ``--out``, the data, the plan or a ledger file;
* step 4: the plan refused by its verification (weak guarantee, under-noised, inconsistent,
  over-claiming); float noise without ``allow_float_noise``;
* step 5: the data unreadable, with the wrong columns, a value outside its domain or schema,
  an engine the kind does not support, a projection plan's public n not the data's; δ ≥ 1/n
  without ``allow_weak_guarantee``;
* step 6 itself: an unknown dataset, a guarantee the budget cannot take, another
  neighbouring relation, a budget exceeded — refused by the ledger in the charge's own
  transaction, nothing charged.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .session import POSTPROCESS_SECONDS, ExecutionError, ReleaseSession, check_record_count

if TYPE_CHECKING:
    from factorize.plan.check_record import PlanCheck
    from factorize.privacy import Guarantee


def run(plan_path: str, data_path: str, out_path: str | None = None, *, seed: int | None = None,
        allow_float_noise: bool = False, allow_extra_columns: bool = False,
        engine: str = "duckdb", ledger: str | None = None, dataset: str | None = None,
        allow_weak_guarantee: bool = False, postprocess_seconds: float = POSTPROCESS_SECONDS,
        expect: str | None = None, tables: str | None = None, overwrite: bool = False,
        measurements: str | None = None) -> Any:
    """Run any plan (module docstring); ``expect``: refuse a plan of another kind; ``tables``:
    a folder for one tidy CSV per table of the workload (``executor.tables``), opened with
    the answers file before the verification; ``overwrite``: replace existing output files
    (refused otherwise, before anything else happens); ``measurements``: a folder for the
    release's measurement records (``executor.measurements``), written with the answers."""
    from factorize.kinds import kind_of_file
    from factorize.plan.files import read_plan_bytes

    from .linear_release import refuse_float_noise
    from .measurements import NO_EXPORT, measurements_export
    from .release import make_rng
    from .table_scales import release, verified_scales

    source = read_plan_bytes(plan_path)  # the one read of the plan file
    kind = kind_of_file(source)
    if expect is not None and kind.name != expect:
        raise ExecutionError(f"{plan_path}: a {kind.name} plan, expected a {expect} plan")
    if not kind.central and (ledger is not None or seed is not None):
        raise ExecutionError(f"a {kind.name} plan aggregates already-randomized messages: it takes "
                             "neither --ledger (nothing is charged) nor --seed (no noise is drawn)")
    with ReleaseSession.start(source, data_path, out_path, seed=seed, ledger=ledger,
                              dataset=dataset, overwrite=overwrite) as session:
        plan = kind.load(source)
        opened: list = []
        export = NO_EXPORT
        try:
            workload = layout = None
            export = measurements_export(measurements, {**session.protected, "--out": out_path},
                                         overwrite)  # checked now, staged and committed with the answers
            if tables is not None:
                protected = {**session.protected, "--out": out_path}
                workload, layout, opened = _open_tables(tables, plan, protected, overwrite)
            check = kind.verify(plan, allow_weak_guarantee=allow_weak_guarantee, workload=workload)
            if not check.passed:
                from factorize.plan.errors import PlanRefused

                raise PlanRefused("plan refused: " + "; ".join(check.failures))
            if kind.central:  # before the data is read and the budget charged
                refuse_float_noise(kind.sampler(plan), allow_float_noise)
            verified_scales(kind, plan, check)  # per-table targets: refused here, not after the charge
            export.prepare(kind, plan, check)  # a release with no measurement records: refused here
            labels, label_note = _labels(plan, check, layout)  # public: the workload and the schema
            measurement = kind.measure(plan, check, data_path, engine=engine,
                                       allow_extra_columns=allow_extra_columns)
            if kind.central:
                guarantee = _verified_guarantee(check)
                check_record_count(guarantee, measurement.n_records, allow_weak_guarantee)
                session.charge(guarantee, kind.relation(plan))
            else:
                session.record_plan()
            meta = dict(session.metadata)
            if allow_weak_guarantee:
                meta["guarantee_override"] = True
            rel = release(kind, plan, check, measurement, make_rng(seed) if kind.central else None,
                          allow_float_noise=allow_float_noise, metadata=meta,
                          deadline=time.monotonic() + postprocess_seconds)  # W's answers (table targets)
            del measurement  # the exact values are not needed past the release: free them before writing
            rel.extra["labels"] = labels
            if label_note:
                rel.metadata["labels"] = label_note
            export.stage(rel)
            session.write(rel.columns(), rel.metadata)
            export.commit()
            if opened:
                from .tables import write_tables

                rel.extra["tables"] = write_tables(opened, rel.columns(), rel.metadata)
        finally:
            export.abort()  # measurements not committed leave nothing
            for _, out in opened:  # tables not written (a failure above) leave nothing
                if not getattr(out, "committed", False):
                    out.abort()
        return rel


def _verified_guarantee(check: PlanCheck) -> Guarantee:
    """The guarantee the verification established for the plan's noise (``plan.checks.
    rederive_noise``): what a central release is charged. A passed check without one is a
    verifier that did not look at the noise (``PlanCheck.established``: InternalError), and
    nothing is charged."""
    guarantee: Guarantee = check.established("guarantee")
    return guarantee


def _open_tables(tables: str, plan: Any, protected: dict[str, Any], overwrite: bool
                 ) -> tuple[Any, Any, list]:
    """``--tables``: the workload rebuilt from the plan's spec (public; the verification then
    checks its fingerprint), its tables (``labels.TableLabels``) and one output per table
    opened in ``tables`` (``tables.open_tables``) — before the verification, so a destination
    the option cannot write is refused at once. Returns the workload, the tables and the opened
    outputs."""
    from factorize.plan.checks import rebuild_workload
    from factorize.plan.errors import PlanRefused

    from .labels import TableLabels, workload_tables
    from .tables import check_tables_folder, open_tables

    check_tables_folder(tables)
    problems: list[str] = []
    W = rebuild_workload(plan.workload, None,
                         lambda name, ok, detail: problems.append(f"{name}: {detail}") if not ok else None,
                         getattr(plan, "embedded", None))
    if W is None:
        raise PlanRefused("plan refused: " + "; ".join(problems))
    layout = TableLabels(workload_tables(W, plan.domain), W.shape[0])
    return W, layout, open_tables(tables, layout.tables, protected=protected, overwrite=overwrite)


def _labels(plan: Any, check: Any, layout: Any) -> tuple[dict[str, Any], str | None]:
    """The answers' label columns (``executor.labels``: ``table``, the tables' attribute
    columns and ``label``) from the verified workload — or, for a kind whose check carries
    none, the one rebuilt from the plan's spec — and the plan's domain, computed before the
    charge; a labelling failure never blocks a release: the answers go out with their query
    index and the metadata says why they carry no labels."""
    from .labels import answer_labels

    try:
        W = getattr(check, "workload", None)
        if W is None:
            from workloads.spec import parse_workload

            W = parse_workload(plan.workload["spec"], embedded=getattr(plan, "embedded", None) or {},
                               read_files=False)
        return answer_labels(W, plan.domain, layout), None
    except Exception as exc:  # noqa: BLE001 — labels are a convenience, never a reason to fail
        return {}, f"labels unavailable ({type(exc).__name__})"


def run_plan(plan_path: str, data_path: str, out_path: str | None = None, **options: Any) -> Any:
    """Run a factorization plan through the one pipeline (``executor.pipeline.run``: load,
    verify, read the data, measure exactly, charge, release, write all or nothing).

    ``engine``: where the histogram is computed (``executor.data.load_histogram``).
    ``ledger`` / ``dataset``: charge the plan's guarantee to the dataset's privacy budget
    (``factorize.ledger``) — committed before any noise is drawn or answer written, after every
    check that can fail. A test-mode run (``seed``) is never charged (its output is marked NOT
    PRIVATE) and may not name a ledger. ``allow_weak_guarantee``: run a guarantee beyond the
    documented ceilings (``privacy.policy``).
    """
    return run(plan_path, data_path, out_path, expect="factorization", **options)
