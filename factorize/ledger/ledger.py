"""The privacy-budget ledger: :class:`Ledger`, an embedded SQLite database of every charge
against a dataset's privacy budget, with a hash chain and an anchor file. This module is the
public face and the order of operations; each part lives in its own module:

=================  ===========================================================================
``composition``    the budget arithmetic: costs, exact sums, the comparison with the budget
                   (pure; the composition theorems it relies on are cited there)
``replay``         what each log entry means; the state (datasets, spent, charges) it implies
``chain``          canonical entry bodies, the SHA-256 chain, the walk that checks it
``storage``        SQLite: schema, connections, transactions, rows, tables vs. the log
``anchor``         the anchor file and the anchor rule (rollback / deletion detection)
``lock``           the ``flock`` that serialises changes
``errors``         ``LedgerError``, ``BudgetExceeded``, ``LedgerTampered``
=================  ===========================================================================

Files, for a ledger ``L.db`` (:func:`ledger_files` adds SQLite's journals)::

    L.db        the SQLite database (rollback journal, ``synchronous=FULL``)
    L.db.head   the anchor: JSON {ledger_id, count, head} of the last committed entry
    L.db.lock   an empty lock file (``flock``), created on first use

**Verification.** Every operation, :meth:`Ledger.open` included, re-verifies everything
(:meth:`Ledger._verify`): the tables present, the hash chain entry by entry, the log replayed
(costs re-derived, budgets re-checked, one neighbouring relation per dataset), the
``datasets`` and ``charges`` tables compared row by row with the replay, and the anchor rule.

**Transactions and concurrency.** Every change runs under the exclusive lock and in one
SQLite transaction started with ``BEGIN IMMEDIATE``: verify, read what is spent, check,
insert, ``COMMIT``, then rewrite the anchor, then unlock. Two processes charging at once are
therefore serialised, and the second sees the first one's charge: together they can never
exceed the budget. A charge is committed (and durable: ``synchronous=FULL``) before
:meth:`Ledger.charge` returns, i.e. before any noise is drawn; a crash after it loses that
budget but can never leave answers without a charge. :meth:`Ledger.mark_released` only records
that the output is in place; the budget stays spent either way. A lagging anchor (a crash
between a commit and the anchor write) is brought up to date before the next change adds its
entry, and by :meth:`Ledger.open`.

**What this cannot detect.** The chain is integrity against accidents and naive edits, not a
signature: there is no secret key, so someone who can write both files can rewrite the
database and recompute the chain and the anchor, or restore an older database *together with*
its older anchor, or delete both (the ledger is then missing: runs are refused, but
``factorize budget create --new`` would start from a full budget). Within the one-entry lag
window (after a crash, before the next open), the unanchored last entry can be deleted
unnoticed (it may be a charge: deleting it gives that budget back). The lock is ``flock``:
the ledger must live on a local file system (not NFS), in a folder where the lock file can be
created (reading needs it too).

**Cost.** Every operation re-verifies the whole log (about 0.1 ms per entry: a ledger of 10⁴
releases takes a second or two per operation) — releases are rare, and a check that is always
run is worth more than a fast one that is skipped.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from . import anchor, chain, composition, replay, storage
from .chain import FORMAT, ZERO_HASH, canonical, entry_hash, now
from .composition import budget_components, charge_cost, describe, exact_dict
from .errors import BudgetExceeded, LedgerError, LedgerTampered
from .lock import locked
from .replay import Dataset, State, check_sha, normal_guarantee, normal_relation

__all__ = ["BudgetExceeded", "Charge", "Ledger", "LedgerError", "LedgerTampered",
           "ledger_files"]


@dataclass(frozen=True)
class Charge:
    """One charge against a dataset's budget (what :meth:`Ledger.charge` returns)."""

    id: int
    dataset: str
    guarantee: dict[str, Any]
    cost: dict[str, Fraction]
    plan_sha256: str
    relation: str
    status: str
    charged_at: str
    output_sha256: str | None = None
    released_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "dataset": self.dataset, "guarantee": dict(self.guarantee),
                "cost": exact_dict(self.cost), "plan_sha256": self.plan_sha256,
                "relation": self.relation, "status": self.status, "charged_at": self.charged_at,
                "output_sha256": self.output_sha256, "released_at": self.released_at}


def ledger_files(path: str | os.PathLike[str]) -> list[str]:
    """Every file of the ledger at ``path``: the database, its anchor, its lock and SQLite's
    journals (a release's answers must never be written over any of them)."""
    p = os.fspath(path)
    return [p, f"{p}.head", f"{p}.lock", f"{p}-journal", f"{p}-wal", f"{p}-shm"]


_PRIVATE = object()


class Ledger:
    """A privacy-budget ledger at ``path`` (see the module docstring).

    Never created implicitly: :meth:`create` makes a new one, :meth:`open` refuses a missing,
    foreign or tampered one. Each operation opens its own SQLite connection, so a ``Ledger``
    holds no lock or file between calls.
    """

    def __init__(self, path: str | os.PathLike[str], _token: object = None) -> None:
        if _token is not _PRIVATE:
            # a call the class does not accept (like a wrong argument list): Python's TypeError,
            # not a ledger error — no ledger was named or read
            raise TypeError("use Ledger.open(path) or Ledger.create(path)")
        self.path = Path(os.fspath(path))
        self.anchor_path = Path(f"{self.path}.head")
        self.lock_path = Path(f"{self.path}.lock")

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, overwrite: bool = False) -> Ledger:
        """A new, empty ledger at ``path`` (refused if a database or an anchor is there,
        unless ``overwrite``: then both are replaced — the old history is lost)."""
        book = cls(path, _PRIVATE)
        p = book.path
        p.parent.mkdir(parents=True, exist_ok=True)
        with book._lock(exclusive=True):
            present = [str(x) for x in (p, book.anchor_path) if x.exists()]
            if present and not overwrite:
                raise LedgerError(f"a ledger already exists ({', '.join(present)}); refusing to "
                                  "overwrite it (its history would be lost)")
            for suffix in ("", "-journal", "-wal", "-shm", ".head"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{p}{suffix}")
            ledger_id = str(uuid.uuid4())
            body = canonical({"format": FORMAT, "ledger_id": ledger_id, "created": now()})
            h = entry_hash(ZERO_HASH, 1, "genesis", body)
            storage.create_database(p, body, h)
            # a crash here leaves a one-entry database without an anchor: accepted (lag rule)
            book._write_anchor(ledger_id, 1, h)
        return book

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Ledger:
        """The existing ledger at ``path``, verified (:class:`LedgerTampered` if its chain,
        tables or anchor disagree; :class:`LedgerError` if there is no ledger). A lagging
        anchor (a crash right after a commit) is brought up to date."""
        book = cls(path, _PRIVATE)
        book._require_database()
        with book._lock(exclusive=True), book._connect() as conn:
            with storage.read_transaction(conn):
                state = book._verify(conn)
            if state.anchor != "current":
                book._write_anchor(state.ledger_id, state.count, state.head)
        return book

    # -- changes -----------------------------------------------------------------------------

    def create_dataset(self, name: str, budget: Mapping[str, Any], *,
                       relation: str | None = None) -> dict[str, Any]:
        """Add dataset ``name`` with a privacy ``budget`` (a guarantee dict). ``relation``
        (``add_remove`` / ``replace``): the neighbouring relation its releases must use
        (default: the first charge's)."""
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise LedgerError(f"dataset name must be a non-empty string without surrounding "
                              f"spaces, got {name!r}")
        b = normal_guarantee(budget, "budget")
        rel = None if relation is None else normal_relation(relation)
        with self._transaction() as (conn, state):
            if name in state.datasets:
                raise LedgerError(f"dataset {name!r} already has a budget in {self.path} "
                                  "(budgets are never changed or replaced)")
            created = now()
            body = {"name": name, "budget": b, "relation": rel, "created": created}
            seq = self._append(conn, state, "dataset", body)
            storage.insert_dataset(conn, name, b, rel, created, seq)
        return {"name": name, "budget": b, "relation": rel, "created": created}

    def charge(self, dataset: str, guarantee: Mapping[str, Any], *, plan_sha256: str,
               relation: str) -> Charge:
        """Commit a release's ``guarantee`` against ``dataset``'s budget, durably, before the
        release happens. :class:`BudgetExceeded` (nothing charged) if it does not fit;
        :class:`LedgerError` for an unknown dataset, a guarantee type the budget cannot take,
        or a neighbouring relation other than the dataset's."""
        g = normal_guarantee(guarantee, "guarantee")
        rel = normal_relation(relation)
        check_sha(plan_sha256, "plan_sha256")
        with self._transaction() as (conn, state):
            ds = self._dataset(state, dataset)
            cost = charge_cost(ds.budget["type"], g)
            want = ds.effective_relation(state.charges)
            if want is not None and rel != want:
                raise LedgerError(f"dataset {dataset!r} is accounted under {want} neighbours; a "
                                  f"release under {rel} neighbours cannot be composed with its "
                                  "charges (refused; nothing charged)")
            budget = budget_components(ds.budget)
            if composition.exceeds(composition.add(ds.spent, cost), budget):
                raise BudgetExceeded(
                    f"privacy budget of dataset {dataset!r} exceeded: this release costs "
                    f"{describe(cost)}; spent {describe(ds.spent)} of the budget "
                    f"{describe(budget)}, remaining "
                    f"{describe(composition.remaining(budget, ds.spent))} — refused, nothing "
                    "charged")
            cid = len(state.charges) + 1
            exact_cost, charged_at = exact_dict(cost), now()
            body = {"id": cid, "dataset": dataset, "guarantee": g, "cost": exact_cost,
                    "plan_sha256": plan_sha256, "relation": rel, "charged_at": charged_at}
            seq = self._append(conn, state, "charge", body)
            storage.insert_charge(conn, cid, dataset, g, exact_cost, plan_sha256, rel,
                                  charged_at, seq)
        return Charge(id=cid, dataset=dataset, guarantee=g, cost=cost, plan_sha256=plan_sha256,
                      relation=rel, status="charged", charged_at=charged_at)

    def mark_released(self, charge_id: int, output_sha256: str | None) -> None:
        """Record that charge ``charge_id``'s answers are released (``output_sha256``: the
        SHA-256 of the written file, or None when nothing was written). Status only: the
        budget was spent by the charge."""
        if isinstance(charge_id, bool) or not isinstance(charge_id, int):
            raise LedgerError(f"charge id must be an integer, got {charge_id!r}")
        if output_sha256 is not None:
            check_sha(output_sha256, "output_sha256")
        with self._transaction() as (conn, state):
            c = state.charges.get(charge_id)
            if c is None:
                raise LedgerError(f"no charge {charge_id} in {self.path}")
            if c["status"] != "charged":
                raise LedgerError(f"charge {charge_id} is already marked released")
            released_at = now()
            body = {"charge_id": charge_id, "output_sha256": output_sha256,
                    "released_at": released_at}
            seq = self._append(conn, state, "release", body)
            storage.mark_released(conn, charge_id, output_sha256, released_at, seq)

    # -- reading -----------------------------------------------------------------------------

    def verify(self) -> dict[str, Any]:
        """Re-verify everything (chain, tables against the replayed log, budgets, anchor);
        :class:`LedgerTampered` on any inconsistency, else a summary."""
        s = self._snapshot()
        return {"ledger": str(self.path), "ledger_id": s.ledger_id, "created": s.created,
                "entries": s.count, "head": s.head, "anchor": s.anchor,
                "datasets": len(s.datasets), "charges": len(s.charges)}

    def datasets(self) -> list[str]:
        return sorted(self._snapshot().datasets)

    def budget(self, dataset: str) -> dict[str, Any]:
        return dict(self._dataset(self._snapshot(), dataset).budget)

    def spent(self, dataset: str) -> dict[str, Fraction]:
        return dict(self._dataset(self._snapshot(), dataset).spent)

    def remaining(self, dataset: str) -> dict[str, Fraction]:
        """What is left of the dataset's budget, exactly, per component."""
        ds = self._dataset(self._snapshot(), dataset)
        return composition.remaining(budget_components(ds.budget), ds.spent)

    def history(self, dataset: str) -> list[dict[str, Any]]:
        """The dataset's charges in order (dicts as :meth:`Charge.to_dict`)."""
        s = self._snapshot()
        ds = self._dataset(s, dataset)
        return [dict(s.charges[i], guarantee=dict(s.charges[i]["guarantee"]),
                     cost=exact_dict(s.charges[i]["cost"])) for i in ds.charges]

    def summary(self, dataset: str | None = None) -> dict[str, Any]:
        """JSON-ready: per dataset its budget, neighbouring relation (key ``relation``),
        spent, remaining (exact strings) and history; all datasets unless ``dataset``."""
        s = self._snapshot()
        names = [dataset] if dataset is not None else sorted(s.datasets)
        out = []
        for name in names:
            ds = self._dataset(s, name)
            budget = budget_components(ds.budget)
            out.append({
                "name": name, "budget": dict(ds.budget), "created": ds.created,
                "relation": ds.effective_relation(s.charges),
                "spent": exact_dict(ds.spent),
                "remaining": exact_dict(composition.remaining(budget, ds.spent)),
                "history": [dict(s.charges[i], cost=exact_dict(s.charges[i]["cost"]))
                            for i in ds.charges]})
        return {"ledger": str(self.path), "ledger_id": s.ledger_id, "entries": s.count,
                "head": s.head, "anchor": s.anchor, "datasets": out}

    # -- internals ---------------------------------------------------------------------------

    def _dataset(self, state: State, name: str) -> Dataset:
        ds = state.datasets.get(name)
        if ds is None:
            known = ", ".join(sorted(state.datasets)) or "none"
            raise LedgerError(f"unknown dataset {name!r} in {self.path} (datasets: {known}); "
                              "create its budget with `factorize budget create`")
        return ds

    def _require_database(self) -> None:
        if self.path.exists():
            return
        if self.anchor_path.exists():
            c = anchor.read(self.anchor_path)
            raise LedgerTampered(f"{self.path}: the ledger database is missing but its anchor "
                                 f"{self.anchor_path.name} records {c.get('count', '?')} entries: "
                                 "the database was deleted or moved; refusing")
        raise LedgerError(f"{self.path}: no ledger there (a ledger is never created implicitly: "
                          f"`factorize budget create {self.path} --new …` makes one)")

    def _lock(self, *, exclusive: bool) -> contextlib.AbstractContextManager[None]:
        return locked(self.lock_path, exclusive=exclusive, ledger=self.path)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self._require_database()
        with storage.connect(self.path, self.anchor_path) as conn:
            yield conn

    def _snapshot(self) -> State:
        with self._lock(exclusive=False), self._connect() as conn, storage.read_transaction(conn):
            return self._verify(conn)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[tuple[sqlite3.Connection, State]]:
        """Exclusive lock + ``BEGIN IMMEDIATE`` + verified state; commit, then the anchor."""
        with self._lock(exclusive=True), self._connect() as conn:
            with storage.write_transaction(conn):
                state = self._verify(conn)
                if state.anchor != "current":
                    # bring a lagging anchor up to the committed entries *before* adding one,
                    # so that even an anchor that cannot be written never lags by two
                    self._write_anchor(state.ledger_id, state.count, state.head)
                n0 = state.count
                yield conn, state
            if state.count != n0:
                self._write_anchor(state.ledger_id, state.count, state.head)

    def _append(self, conn: sqlite3.Connection, state: State, kind: str,
                body: dict[str, Any]) -> int:
        seq = state.count + 1
        text = canonical(body)
        h = entry_hash(state.head, seq, kind, text)
        storage.insert_event(conn, seq, kind, text, state.head, h)
        state.hashes.append(h)
        return seq

    def _verify(self, conn: sqlite3.Connection) -> State:
        """Tables, chain, replay, tables against the replay, anchor (inside a read or write
        transaction)."""
        storage.check_schema(conn, self.path, self.anchor_path)
        state = State()
        for seq, kind, obj, h in chain.walk(storage.events(conn), str(self.path)):
            try:
                replay.apply(state, seq, kind, obj)
            except LedgerTampered:
                raise
            except (LedgerError, ValueError, KeyError, TypeError) as exc:
                raise LedgerTampered(f"{self.path}: entry {seq} ({kind}): invalid: {exc}") from None
            state.hashes.append(h)
        if not state.hashes:
            raise LedgerTampered(f"{self.path}: the ledger has no entries (its genesis entry "
                                 "was deleted)")
        storage.compare_tables(conn, self.path, state)
        state.anchor = self._check_anchor(state)
        return state

    def _check_anchor(self, state: State) -> str:
        """The anchor rule (:mod:`factorize.ledger.anchor`): "current", "behind by one" or
        raise."""
        return anchor.check(self.path, self.anchor_path, state.ledger_id, state.hashes)

    def _write_anchor(self, ledger_id: str, count: int, head: str) -> None:
        anchor.write(self.anchor_path, ledger_id, count, head)
