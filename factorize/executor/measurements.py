"""``factorize run --measurements-out FOLDER``: the release's measurement records beside its answers.

Post-processing of the release, with its privacy: the records (``structured.measurement_records``)
are computed from the released estimates and the public plan only — never from the data or the
exact measurement — and carry the release's public metadata (plan digest, guarantee,
``test_mode`` and its NOT PRIVATE warning). Order, as for the answers (``executor.pipeline``):

1. before the verification: the folder is checked and a hidden staging folder made
   (``io.measurement_files.MeasurementsOutput``: an existing folder refused unless
   ``--overwrite``; the data, the plan, a ledger file or ``--out`` refused);
2. after the verification, before the data is read and anything charged: the plan's records
   are fixed (:meth:`MeasurementsExport.prepare`) — a plan kind or family whose release has no
   such statement is refused here (``MeasurementExportError``);
3. after the release: the records' values read from the estimates and staged; the answers
   written; then the folder renamed into place (:meth:`MeasurementsExport.commit`). A failure
   before that leaves no folder.
"""

from __future__ import annotations

from typing import Any

#: The release metadata copied into the measurements file (public, and what a reader needs).
META_KEYS = ("plan_sha256", "test_mode", "warning", "mechanism", "workload", "workload_fingerprint",
             "guarantee", "neighbouring", "noise", "ledger", "guarantee_override")


class NoExport:
    """No ``--measurements-out``: every step does nothing (:data:`NO_EXPORT`)."""

    def prepare(self, kind: Any, plan: Any, check: Any) -> None:
        return None

    def stage(self, rel: Any) -> None:
        return None

    def commit(self) -> None:
        return None

    def abort(self) -> None:
        return None


#: The export of a release without ``--measurements-out``.
NO_EXPORT = NoExport()


def measurements_export(path: str | None, protected: dict[str, Any], overwrite: bool) -> NoExport:
    """Step 1 of the module docstring for ``path`` (:data:`NO_EXPORT` for None)."""
    return NO_EXPORT if path is None else MeasurementsExport(path, protected, overwrite)


class MeasurementsExport(NoExport):
    """One release's measurements folder (module docstring)."""

    def __init__(self, path: str, protected: dict[str, Any], overwrite: bool) -> None:
        from factorize.io.measurement_files import MeasurementsOutput

        self.output = MeasurementsOutput(path, protected=protected, overwrite=overwrite)
        self.exporter: Any = None
        self.names: tuple[str, ...] = ()
        self.family = ""

    def prepare(self, kind: Any, plan: Any, check: Any) -> None:
        """Step 2: the records of a verified structured plan (refused for any other)."""
        from factorize.structured.measurement_records import MeasurementExportError, exporter

        if kind.name != "structured":
            raise MeasurementExportError(
                f"--measurements-out exports the measurements of structured plans (marginal "
                f"tables per clique); this is a {kind.name} plan")
        from .table_scales import states_targets

        if states_targets(plan):
            raise MeasurementExportError("--measurements-out of a plan with per-table targets (it "
                                         "measures D·W, releases W) is not implemented")
        W = getattr(check, "workload", None)
        if W is None:
            raise MeasurementExportError("the verification returned no workload to read the tables of")
        self.exporter = exporter(plan, W)
        self.names = tuple(str(a) for a in plan.domain.attributes)
        self.family = str(plan.family)

    def stage(self, rel: Any) -> None:
        """Step 3: the records' values from the released estimates, staged."""
        from factorize.io.measurement_files import MeasurementSet

        ex = self.exporter
        if ex is None:
            from factorize.errors import InternalError

            raise InternalError("measurements staged before the plan's records were prepared")
        from .output import json_safe

        meta = json_safe({k: rel.metadata[k] for k in META_KEYS if k in rel.metadata})
        meta.update(form=ex.form, family=self.family,
                    note="post-processing of the release: computed from its estimates and the "
                         "public plan (factorize.structured.measurement_records)")
        self.output.stage(MeasurementSet(self.names, ex.sizes, tuple(ex.records(rel.estimate)),
                                         ex.total(rel.estimate), meta))

    def commit(self) -> None:
        self.output.commit()

    def abort(self) -> None:
        self.output.abort()

