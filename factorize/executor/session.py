"""The privacy-critical frame of a release: nothing charged that is not released, nothing
released that is not charged.

Order (``ReleaseSession``), shared by every runner:

1. **before anything irreversible** — the answers file is opened for an all-or-nothing write
   (a destination that cannot be written, has an unknown suffix, is a folder, exists without
   ``overwrite`` or is the data, the plan or a ledger file is refused here: ``output.open_output``);
   ``--seed`` with ``--ledger`` is refused (seeded noise is invertible: a search over seeds
   recovers the exact data, so a seeded release may never be charged as if it were private);
   the ledger is opened and verified. The plan arrives as the bytes read once
   (``plan.files.PlanBytes``): the digest recorded and charged is theirs;
2. the runner verifies the plan, reads the data and computes the exact measurement — every
   deterministic check that can fail happens here, before the charge;
3. ``charge()`` commits the guarantee the verification established (the runner passes it) to
   the dataset's budget, with the SHA-256 of the plan bytes that were verified (fault
   checkpoints ``before_charge`` / ``after_charge``);
4. the runner draws the noise once and post-processes the released values (bounded in
   iterations and wall-clock time, so it cannot hang after the charge);
5. ``write()`` writes the answers and moves them into place (``during_write``,
   ``after_write``), then the ledger records the release. A crash after the charge loses that
   budget, never leaves answers without a charge; a crash while writing leaves no answers
   file (``io.atomic``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from factorize.plan.errors import PlanError


class ExecutionError(PlanError):
    """The plan cannot be run (refused sampler, inconsistent state, bad invocation)."""


#: Wall-clock budget of the post-processing that runs after the charge (seconds).
POSTPROCESS_SECONDS = 600.0


@dataclass
class ReleaseSession:
    """One release (module docstring)."""

    plan_path: str
    out_path: str | None
    seed: int | None
    dataset: str | None
    book: Any = None
    output: Any = None
    plan_sha: str | None = None
    charge_id: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: role → paths no output of this release may replace (data, plan, ledger files)
    protected: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(cls, plan: Any, data_path: str | None, out_path: str | None, *,
              seed: int | None, ledger: str | None, dataset: str | None,
              overwrite: bool = False) -> ReleaseSession:
        """Step 1 of the module docstring. ``plan``: the plan file's bytes, read once
        (``plan.files.PlanBytes``); ``overwrite``: replace an existing answers file."""
        if (ledger is None) != (dataset is None):
            raise ExecutionError("--ledger and --dataset go together")
        if seed is not None and ledger is not None:
            raise ExecutionError("--seed (test mode: reproducible, NOT PRIVATE noise) cannot be "
                                 "combined with --ledger: a seeded release is invertible and is "
                                 "never charged as a private one")
        session = cls(plan_path=plan.name, out_path=out_path, seed=seed, dataset=dataset,
                      plan_sha=plan.sha256)
        protected: dict[str, Any] = {"--data": data_path, "the plan": plan.name}
        if ledger is not None:
            from factorize.ledger.ledger import ledger_files

            protected["a ledger file"] = ledger_files(ledger)
        session.protected = protected
        if out_path is not None:
            from .output import open_output

            session.output = open_output(out_path, protected=protected, overwrite=overwrite)
        try:
            if ledger is not None:
                from factorize.ledger import Ledger

                session.book = Ledger.open(ledger)  # a missing or tampered ledger: refused now
        except BaseException:
            session.abort()
            raise
        return session

    def record_plan(self) -> None:
        """The digest of the plan bytes that were read (once) and verified, in the answers'
        metadata."""
        self.metadata["plan_sha256"] = self.plan_sha

    def charge(self, guarantee: Any, relation: str) -> None:
        """Step 3: commit ``guarantee`` — the one the verification established (a
        ``privacy.Guarantee``; the ledger stores its JSON form) — under its neighbouring
        relation, with the digest of the verified plan bytes (nothing in test mode or without
        a ledger)."""
        from factorize.ledger.faults import checkpoint

        self.record_plan()
        checkpoint("before_charge")
        if self.book is None:
            return
        charge = self.book.charge(self.dataset, guarantee.to_dict(), plan_sha256=self.plan_sha,
                                  relation=relation)
        self.charge_id = charge.id
        self.metadata["ledger"] = {"dataset": self.dataset, "charge_id": charge.id}
        checkpoint("after_charge")

    def write(self, columns: dict[str, np.ndarray], metadata: dict[str, Any]) -> None:
        """Step 5: the answers in place, then the release recorded."""
        from factorize.ledger.faults import checkpoint
        from factorize.plan.files import file_sha256

        from .output import write_prepared

        if self.output is not None:
            write_prepared(self.output, columns, metadata, on_partial=lambda: checkpoint("during_write"))
            checkpoint("after_write")
        if self.charge_id is not None:
            self.book.mark_released(self.charge_id,
                                    file_sha256(self.out_path) if self.out_path is not None else None)

    def abort(self) -> None:
        """Discard the opened output (nothing appears)."""
        if self.output is not None and not self.output.committed:
            self.output.abort()

    def __enter__(self) -> ReleaseSession:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        self.abort()


def check_record_count(guarantee: Any, n: int, allow_weak: bool) -> None:
    """The run-time half of ``privacy.policy``: δ < 1/n for the data at hand (checked after
    reading the data and before the charge; the refusal reveals only that n ≥ 1/δ).
    ``guarantee``: a ``privacy.Guarantee``."""
    from factorize.privacy.policy import check_guarantee

    check_guarantee(guarantee, n=int(n), allow_weak=allow_weak)

