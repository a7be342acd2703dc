"""The privacy-budget ledger: an embedded SQLite database of every charge against a dataset's
privacy budget, with a hash chain and an anchor file (issue 8, items 3 and 5).

Files, for a ledger ``L.db``::

    L.db        the SQLite database (rollback journal, ``synchronous=FULL``)
    L.db.head   the anchor: JSON {ledger_id, count, head} of the last committed entry
    L.db.lock   an empty lock file (``flock``), created on first use

**Entries.** The database's ``events`` table is an append-only log; every change is one entry:
``genesis`` (the ledger's id and format), ``dataset`` (a name and its budget), ``charge``
(a release's guarantee and its cost), ``release`` (a charge's output is in place). Entry i
stores ``hash_i = SHA-256(hash_{i-1} ‖ i ‖ kind ‖ canonical JSON body)`` (``hash_0`` = 64
zeros). The ``datasets`` and ``charges`` tables are the log replayed (for reading with SQL);
:meth:`Ledger.verify` — run by every operation, :meth:`Ledger.open` included — recomputes the
chain, replays the log (costs re-derived, budgets re-checked) and compares both tables row by
row, so an edited, deleted, inserted or reordered row in any table is detected.

**Budgets and composition.** A dataset's budget is a guarantee dict (``pure_dp`` ε,
``approx_dp`` (ε, δ), ``zcdp`` ρ). Releases compose by basic composition (Σε, Σδ) for pure /
approximate DP and additively in ρ for zCDP; a pure ε release charged to a zCDP budget costs
ρ = ε²/2 (ε-DP implies (ε²/2)-zCDP, Bun & Steinke 2016, Prop. 1.4); a pure release charged to
an (ε, δ) budget costs (ε, 0). Refused: a zCDP release charged to a pure or (ε, δ) budget
(converting every charge to (ε, δ) and composing basically is loose — ρ composes additively
and should be converted once, at the end: give the dataset a zCDP budget), and an approximate
DP release charged to a pure or zCDP budget ((ε, δ)-DP implies neither). All releases of one
dataset must share one neighbouring relation (the budget's, or else the first charge's):
composition is stated per relation.

**Exact arithmetic.** A guarantee's numbers are taken as the decimal numbers they print as
(Python's shortest round-trip ``repr``: the float 0.1 is the decimal 0.1) and summed exactly as
rationals (:class:`fractions.Fraction`); a charge is accepted iff ``spent + cost ≤ budget``
holds exactly in every component. So ten charges of ε = 0.1 fit a budget ε = 1 exactly and an
eleventh does not, and no rounding can let a total exceed its budget. (The floats differ from
those decimals by less than one ulp, far inside the calibration's conservative rounding of
the noise.) Costs are stored as exact decimal strings.

**Transactions and concurrency.** Every change runs under an exclusive ``flock`` on
``L.db.lock`` and in one SQLite transaction started with ``BEGIN IMMEDIATE`` (the database's
write lock; ``busy_timeout`` for other SQLite clients): verify, read what is spent, check,
insert, ``COMMIT``, then rewrite the anchor, then unlock. Two processes charging at once are
therefore serialised, and the second sees the first one's charge: together they can never
exceed the budget. A charge is committed (and durable: ``synchronous=FULL``) before
:meth:`Ledger.charge` returns, i.e. before any noise is drawn; a crash after it loses that
budget but can never leave answers without a charge. :meth:`Ledger.mark_released` only records
that the output is in place; the budget stays spent either way.

**The anchor rule.** With ``n`` entries in the database and an anchor recording ``c`` entries
with head hash ``H`` (a missing anchor counts as ``c = 0``), the ledger is accepted iff the
chain is valid and either ``c = n`` and ``H = hash_n`` (current) or ``c = n − 1`` and
``H = hash_c`` (the anchor lags by exactly the last entry: a crash between the SQLite commit
and the anchor write — or during :meth:`Ledger.create`). A lagging anchor is rewritten by the
next exclusive access: :meth:`Ledger.open`, and every change *before* it adds its entry (if
that write fails, the change is rolled back). Because the anchor is written under the same
lock as the commit it follows, and readers read it under a shared lock, no honest history ever
lags by more than one entry, even when the anchor cannot be written at all. Everything else is refused as tampering: fewer entries than
anchored (rows deleted, or the database replaced by an older copy), an anchor more than one
entry behind, a different history or a different ledger id, a database missing while its
anchor is present, an anchor missing for a ledger with more than its genesis entry.

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
import fcntl
import hashlib
import json
import os
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from factorize.errors import InputError

FORMAT = "factorize-ledger/1"
HEAD_FORMAT = "factorize-ledger-head/1"
ZERO_HASH = "0" * 64
LOCK_TIMEOUT_S = 60.0
BUSY_TIMEOUT_MS = 60_000

_SCHEMA = """
CREATE TABLE events (
    seq       INTEGER PRIMARY KEY,
    kind      TEXT NOT NULL,
    body      TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE TABLE datasets (
    name      TEXT PRIMARY KEY,
    budget    TEXT NOT NULL,
    relation  TEXT,
    created   TEXT NOT NULL,
    event_seq INTEGER NOT NULL
);
CREATE TABLE charges (
    id            INTEGER PRIMARY KEY,
    dataset       TEXT NOT NULL,
    guarantee     TEXT NOT NULL,
    cost          TEXT NOT NULL,
    plan_sha256   TEXT NOT NULL,
    relation      TEXT NOT NULL,
    status        TEXT NOT NULL,
    output_sha256 TEXT,
    charged_at    TEXT NOT NULL,
    released_at   TEXT,
    event_seq     INTEGER NOT NULL,
    release_seq   INTEGER
);
"""
_TABLES = ("charges", "datasets", "events")
_DATASET_COLS = "name, budget, relation, created, event_seq"
_CHARGE_COLS = ("id, dataset, guarantee, cost, plan_sha256, relation, status, output_sha256, "
                "charged_at, released_at, event_seq, release_seq")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_COMPONENTS = {"pure_dp": ("epsilon",), "approx_dp": ("epsilon", "delta"), "zcdp": ("rho",)}


class LedgerError(InputError):
    """The ledger cannot be used as asked (missing, unknown dataset, refused guarantee type)."""


class BudgetExceeded(LedgerError):
    """The charge would take the dataset past its privacy budget (nothing was charged)."""


class LedgerTampered(LedgerError):
    """The ledger's database, chain or anchor is inconsistent: modified, rolled back, deleted."""

    cli_label = "ledger inconsistent (tampered?)"


# ----------------------------------------------------------------------------- exact numbers

def exact(x: Any) -> Fraction:
    """The decimal number a guarantee's float prints as, exactly (``0.1`` → 1/10)."""
    return Fraction(repr(float(x)))


def exact_str(q: Fraction) -> str:
    """``q`` as an exact decimal string when it has one (always, for sums of decimals and
    ε²/2), else ``p/q``."""
    q = Fraction(q)
    den, k2, k5 = q.denominator, 0, 0
    while den % 2 == 0:
        den //= 2
        k2 += 1
    while den % 5 == 0:
        den //= 5
        k5 += 1
    if den != 1:
        return f"{q.numerator}/{q.denominator}"
    k = max(k2, k5)
    scaled = q.numerator * 10 ** k // q.denominator
    sign, digits = ("-" if scaled < 0 else ""), str(abs(scaled))
    if k == 0:
        return sign + digits
    digits = digits.rjust(k + 1, "0")
    return f"{sign}{digits[:-k]}.{digits[-k:]}"


def _exact_dict(d: Mapping[str, Fraction]) -> dict[str, str]:
    return {k: exact_str(v) for k, v in d.items()}


def budget_components(budget: Mapping[str, Any]) -> dict[str, Fraction]:
    """A budget (guarantee dict) as exact components: {"epsilon": …, "delta": …} etc."""
    return {k: exact(budget[k]) for k in _COMPONENTS[budget["type"]]}


def charge_cost(budget_type: str, guarantee: Mapping[str, Any]) -> dict[str, Fraction]:
    """The cost of a release with ``guarantee`` against a budget of ``budget_type`` (exact),
    or :class:`LedgerError` when the guarantee cannot be charged to such a budget."""
    gt = guarantee["type"]
    if budget_type == "pure_dp":
        if gt == "pure_dp":
            return {"epsilon": exact(guarantee["epsilon"])}
        raise LedgerError(f"a {_kind_words(gt)} release cannot be charged to a pure ε-DP budget "
                          "(it does not satisfy pure DP); give the dataset an (ε, δ) "
                          + ("or zCDP budget" if gt == "zcdp" else "budget"))
    if budget_type == "approx_dp":
        if gt == "pure_dp":
            return {"epsilon": exact(guarantee["epsilon"]), "delta": Fraction(0)}
        if gt == "approx_dp":
            return {"epsilon": exact(guarantee["epsilon"]), "delta": exact(guarantee["delta"])}
        raise LedgerError("a zCDP release cannot be charged to an (ε, δ) budget: converting "
                          "each ρ to (ε, δ) at every charge and adding the ε's composes loosely "
                          "(ρ adds up exactly and should be converted once, at the end); give "
                          "the dataset a zCDP budget (--budget rho=…)")
    if budget_type == "zcdp":
        if gt == "zcdp":
            return {"rho": exact(guarantee["rho"])}
        if gt == "pure_dp":
            e = exact(guarantee["epsilon"])
            return {"rho": e * e / 2}  # ε-DP ⇒ (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)
        raise LedgerError("an approximate (ε, δ)-DP release cannot be charged to a zCDP budget "
                          "((ε, δ)-DP does not imply zCDP); give the dataset an (ε, δ) budget")
    raise LedgerError(f"unknown budget type {budget_type!r}")


def _kind_words(kind: str) -> str:
    return {"pure_dp": "pure ε-DP", "approx_dp": "(ε, δ)-DP", "zcdp": "zCDP"}.get(kind, kind)


def describe(components: Mapping[str, Fraction]) -> str:
    """``ε=0.5, δ=0.000001`` (exact)."""
    sym = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{sym.get(k, k)}={exact_str(v)}" for k, v in components.items())


# ----------------------------------------------------------------------------- records

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
                "cost": _exact_dict(self.cost), "plan_sha256": self.plan_sha256,
                "relation": self.relation, "status": self.status, "charged_at": self.charged_at,
                "output_sha256": self.output_sha256, "released_at": self.released_at}


@dataclass
class _Dataset:
    name: str
    budget: dict[str, Any]
    relation: str | None
    created: str
    seq: int
    spent: dict[str, Fraction] = field(default_factory=dict)
    charges: list[int] = field(default_factory=list)

    def effective_relation(self, charges: Mapping[int, dict[str, Any]]) -> str | None:
        if self.relation is not None:
            return self.relation
        return charges[self.charges[0]]["relation"] if self.charges else None


@dataclass
class _State:
    """The log replayed."""

    ledger_id: str = ""
    created: str = ""
    hashes: list[str] = field(default_factory=list)     # hashes[i-1] = hash of entry i
    datasets: dict[str, _Dataset] = field(default_factory=dict)
    charges: dict[int, dict[str, Any]] = field(default_factory=dict)
    anchor: str = "current"

    @property
    def count(self) -> int:
        return len(self.hashes)

    @property
    def head(self) -> str:
        return self.hashes[-1] if self.hashes else ZERO_HASH


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)


def _entry_hash(prev: str, seq: int, kind: str, body: str) -> str:
    return hashlib.sha256(f"{prev}\n{seq}\n{kind}\n{body}".encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _normal_guarantee(g: Mapping[str, Any], what: str) -> dict[str, Any]:
    from factorize.privacy.guarantees import guarantee_from_dict

    if not isinstance(g, Mapping):
        raise LedgerError(f"{what} must be a guarantee dict, got {type(g).__name__}")
    return guarantee_from_dict(g).to_dict()  # PrivacyError (a ValueError) on bad values


def _normal_relation(relation: Any) -> str:
    from factorize.privacy.guarantees import Neighbouring

    return Neighbouring.parse(relation).key


def _check_sha(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise LedgerError(f"{what} must be 64 lowercase hex digits (a SHA-256), got {value!r}")
    return value


# ----------------------------------------------------------------------------- the ledger

def ledger_files(path: str | os.PathLike[str]) -> list[str]:
    """Every file of the ledger at ``path``: the database, its anchor, its lock and SQLite's
    journals (a release's answers must never be written over any of them)."""
    p = os.fspath(path)
    return [p, f"{p}.head", f"{p}.lock", f"{p}-journal", f"{p}-wal", f"{p}-shm"]


class Ledger:
    """A privacy-budget ledger at ``path`` (see the module docstring).

    Never created implicitly: :meth:`create` makes a new one, :meth:`open` refuses a missing,
    foreign or tampered one. Each operation opens its own SQLite connection, so a ``Ledger``
    holds no lock or file between calls.
    """

    def __init__(self, path: str | os.PathLike[str], _token: object = None) -> None:
        if _token is not _PRIVATE:
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
            body = _canonical({"format": FORMAT, "ledger_id": ledger_id, "created": _now()})
            h = _entry_hash(ZERO_HASH, 1, "genesis", body)
            fd, tmp = _mkstemp_beside(p)
            try:
                conn = sqlite3.connect(tmp, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode=DELETE")
                    conn.execute("PRAGMA synchronous=FULL")
                    conn.execute("BEGIN IMMEDIATE")
                    for stmt in _SCHEMA.split(";"):
                        if stmt.strip():
                            conn.execute(stmt)
                    conn.execute("INSERT INTO events VALUES (1, 'genesis', ?, ?, ?)",
                                 (body, ZERO_HASH, h))
                    conn.execute("COMMIT")
                finally:
                    conn.close()
                os.fsync(fd)
                os.close(fd)
                fd = -1
                os.chmod(tmp, 0o666 & ~_umask())
                os.replace(tmp, p)
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
            _fsync_dir(p.parent)
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
            with _read_transaction(conn):
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
        b = _normal_guarantee(budget, "budget")
        rel = None if relation is None else _normal_relation(relation)
        with self._transaction() as (conn, state):
            if name in state.datasets:
                raise LedgerError(f"dataset {name!r} already has a budget in {self.path} "
                                  "(budgets are never changed or replaced)")
            body = {"name": name, "budget": b, "relation": rel, "created": _now()}
            seq = self._append(conn, state, "dataset", body)
            conn.execute(f"INSERT INTO datasets ({_DATASET_COLS}) VALUES (?, ?, ?, ?, ?)",
                         (name, _canonical(b), rel, body["created"], seq))
        return {"name": name, "budget": b, "relation": rel, "created": body["created"]}

    def charge(self, dataset: str, guarantee: Mapping[str, Any], *, plan_sha256: str,
               relation: str) -> Charge:
        """Commit a release's ``guarantee`` against ``dataset``'s budget, durably, before the
        release happens. :class:`BudgetExceeded` (nothing charged) if it does not fit;
        :class:`LedgerError` for an unknown dataset, a guarantee type the budget cannot take,
        or a relation other than the dataset's."""
        g = _normal_guarantee(guarantee, "guarantee")
        rel = _normal_relation(relation)
        _check_sha(plan_sha256, "plan_sha256")
        with self._transaction() as (conn, state):
            ds = self._dataset(state, dataset)
            cost = charge_cost(ds.budget["type"], g)
            want = ds.effective_relation(state.charges)
            if want is not None and rel != want:
                raise LedgerError(f"dataset {dataset!r} is accounted under {want} neighbours; a "
                                  f"release under {rel} neighbours cannot be composed with its "
                                  "charges (refused; nothing charged)")
            budget = budget_components(ds.budget)
            total = {k: ds.spent[k] + cost[k] for k in budget}
            if any(total[k] > budget[k] for k in budget):
                remaining = {k: budget[k] - ds.spent[k] for k in budget}
                raise BudgetExceeded(
                    f"privacy budget of dataset {dataset!r} exceeded: this release costs "
                    f"{describe(cost)}; spent {describe(ds.spent)} of the budget "
                    f"{describe(budget)}, remaining {describe(remaining)} — refused, nothing "
                    "charged")
            cid = len(state.charges) + 1
            body = {"id": cid, "dataset": dataset, "guarantee": g, "cost": _exact_dict(cost),
                    "plan_sha256": plan_sha256, "relation": rel, "charged_at": _now()}
            seq = self._append(conn, state, "charge", body)
            conn.execute(f"INSERT INTO charges ({_CHARGE_COLS}) VALUES "
                         "(?, ?, ?, ?, ?, ?, 'charged', NULL, ?, NULL, ?, NULL)",
                         (cid, dataset, _canonical(g), _canonical(body["cost"]), plan_sha256,
                          rel, body["charged_at"], seq))
        return Charge(id=cid, dataset=dataset, guarantee=g, cost=cost, plan_sha256=plan_sha256,
                      relation=rel, status="charged", charged_at=body["charged_at"])

    def mark_released(self, charge_id: int, output_sha256: str | None) -> None:
        """Record that charge ``charge_id``'s answers are released (``output_sha256``: the
        SHA-256 of the written file, or None when nothing was written). Status only: the
        budget was spent by the charge."""
        if isinstance(charge_id, bool) or not isinstance(charge_id, int):
            raise LedgerError(f"charge id must be an integer, got {charge_id!r}")
        if output_sha256 is not None:
            _check_sha(output_sha256, "output_sha256")
        with self._transaction() as (conn, state):
            c = state.charges.get(charge_id)
            if c is None:
                raise LedgerError(f"no charge {charge_id} in {self.path}")
            if c["status"] != "charged":
                raise LedgerError(f"charge {charge_id} is already marked released")
            body = {"charge_id": charge_id, "output_sha256": output_sha256, "released_at": _now()}
            seq = self._append(conn, state, "release", body)
            conn.execute("UPDATE charges SET status='released', output_sha256=?, released_at=?, "
                         "release_seq=? WHERE id=?",
                         (output_sha256, body["released_at"], seq, charge_id))

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
        budget = budget_components(ds.budget)
        return {k: budget[k] - ds.spent[k] for k in budget}

    def history(self, dataset: str) -> list[dict[str, Any]]:
        """The dataset's charges in order (dicts as :meth:`Charge.to_dict`)."""
        s = self._snapshot()
        ds = self._dataset(s, dataset)
        return [dict(s.charges[i], guarantee=dict(s.charges[i]["guarantee"]),
                     cost=_exact_dict(s.charges[i]["cost"])) for i in ds.charges]

    def summary(self, dataset: str | None = None) -> dict[str, Any]:
        """JSON-ready: per dataset its budget, relation, spent, remaining (exact strings) and
        history; all datasets unless ``dataset``."""
        s = self._snapshot()
        names = [dataset] if dataset is not None else sorted(s.datasets)
        out = []
        for name in names:
            ds = self._dataset(s, name)
            budget = budget_components(ds.budget)
            out.append({
                "name": name, "budget": dict(ds.budget), "created": ds.created,
                "relation": ds.effective_relation(s.charges),
                "spent": _exact_dict(ds.spent),
                "remaining": _exact_dict({k: budget[k] - ds.spent[k] for k in budget}),
                "history": [dict(s.charges[i], cost=_exact_dict(s.charges[i]["cost"]))
                            for i in ds.charges]})
        return {"ledger": str(self.path), "ledger_id": s.ledger_id, "entries": s.count,
                "head": s.head, "anchor": s.anchor, "datasets": out}

    # -- internals ---------------------------------------------------------------------------

    def _dataset(self, state: _State, name: str) -> _Dataset:
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
            c = _read_anchor(self.anchor_path)
            raise LedgerTampered(f"{self.path}: the ledger database is missing but its anchor "
                                 f"{self.anchor_path.name} records {c.get('count', '?')} entries: "
                                 "the database was deleted or moved; refusing")
        raise LedgerError(f"{self.path}: no ledger there (a ledger is never created implicitly: "
                          f"`factorize budget create {self.path} --new …` makes one)")

    @contextlib.contextmanager
    def _lock(self, *, exclusive: bool) -> Iterator[None]:
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
            deadline = time.monotonic() + LOCK_TIMEOUT_S
            while True:
                try:
                    fcntl.flock(fd, mode)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LedgerError(f"{self.path}: the ledger stayed locked by another "
                                          f"process for {LOCK_TIMEOUT_S:g} s") from None
                    time.sleep(0.005)
            yield
        finally:
            os.close(fd)  # releases the lock

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        self._require_database()
        uri = self.path.resolve().as_uri() + "?mode=rw"  # never creates a database
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                                   timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger database: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA synchronous=FULL")
            yield conn
        except sqlite3.OperationalError as exc:
            msg = str(exc).lower()
            if any(w in msg for w in ("locked", "busy", "i/o", "readonly", "unable to open",
                                      "full")):
                raise LedgerError(f"{self.path}: SQLite: {exc}") from exc
            raise self._not_a_ledger(f"SQLite error: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database", malformed, …
            raise self._not_a_ledger(f"SQLite error: {exc}") from exc
        finally:
            conn.close()

    def _not_a_ledger(self, why: str) -> LedgerError:
        if self.anchor_path.exists():
            return LedgerTampered(f"{self.path}: not a valid ledger database ({why}), but its "
                                  "anchor is present: the database was replaced or damaged")
        return LedgerError(f"{self.path}: not a factorize ledger ({why})")

    def _snapshot(self) -> _State:
        with self._lock(exclusive=False), self._connect() as conn, _read_transaction(conn):
            return self._verify(conn)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[tuple[sqlite3.Connection, _State]]:
        """Exclusive lock + ``BEGIN IMMEDIATE`` + verified state; commit, then the anchor."""
        with self._lock(exclusive=True), self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                state = self._verify(conn)
                if state.anchor != "current":
                    # bring a lagging anchor up to the committed entries *before* adding one,
                    # so that even an anchor that cannot be written never lags by two
                    self._write_anchor(state.ledger_id, state.count, state.head)
                n0 = state.count
                yield conn, state
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            if state.count != n0:
                self._write_anchor(state.ledger_id, state.count, state.head)

    def _append(self, conn: sqlite3.Connection, state: _State, kind: str,
                body: dict[str, Any]) -> int:
        seq = state.count + 1
        text = _canonical(body)
        h = _entry_hash(state.head, seq, kind, text)
        conn.execute("INSERT INTO events (seq, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?)",
                     (seq, kind, text, state.head, h))
        state.hashes.append(h)
        return seq

    def _verify(self, conn: sqlite3.Connection) -> _State:
        """Chain, replay, tables, anchor (inside a read or write transaction)."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not set(_TABLES) <= tables:
            raise self._not_a_ledger(f"tables {sorted(set(_TABLES) - tables)} missing")
        if tables - set(_TABLES):
            raise LedgerTampered(f"{self.path}: unexpected tables {sorted(tables - set(_TABLES))}")
        ok = conn.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise LedgerTampered(f"{self.path}: SQLite integrity check failed: {ok}")
        state = _State()
        prev = ZERO_HASH
        expect_ds: list[tuple] = []
        for i, (seq, kind, body, prev_hash, h) in enumerate(
                conn.execute("SELECT seq, kind, body, prev_hash, hash FROM events ORDER BY seq"), 1):
            where = f"{self.path}: entry {i}"
            if seq != i:
                raise LedgerTampered(f"{where}: sequence number {seq} (entries deleted or "
                                     "inserted)")
            if not isinstance(body, str) or not isinstance(kind, str):
                raise LedgerTampered(f"{where}: malformed")
            if prev_hash != prev:
                raise LedgerTampered(f"{where}: does not link to the previous entry (entries "
                                     "deleted, inserted or reordered)")
            if h != _entry_hash(prev, seq, kind, body):
                raise LedgerTampered(f"{where} ({kind}): content does not match its hash "
                                     "(modified)")
            try:
                obj = json.loads(body)
            except ValueError:
                raise LedgerTampered(f"{where}: body is not JSON") from None
            if _canonical(obj) != body:
                raise LedgerTampered(f"{where}: body is not in canonical form")
            try:
                self._replay(state, seq, kind, obj, expect_ds)
            except LedgerTampered:
                raise
            except (LedgerError, ValueError, KeyError, TypeError) as exc:
                raise LedgerTampered(f"{where} ({kind}): invalid: {exc}") from None
            state.hashes.append(h)
            prev = h
        if not state.hashes:
            raise LedgerTampered(f"{self.path}: the ledger has no entries (its genesis entry "
                                 "was deleted)")
        self._compare_tables(conn, state, expect_ds)
        state.anchor = self._check_anchor(state)
        return state

    def _replay(self, state: _State, seq: int, kind: str, obj: dict[str, Any],
                expect_ds: list[tuple]) -> None:
        if seq == 1:
            if kind != "genesis" or obj.get("format") != FORMAT:
                raise LedgerError(f"first entry is not a {FORMAT} genesis entry")
            state.ledger_id, state.created = str(obj["ledger_id"]), str(obj["created"])
            return
        if kind == "dataset":
            name = obj["name"]
            if name in state.datasets or not isinstance(name, str):
                raise LedgerError(f"dataset {name!r} defined twice")
            b = _normal_guarantee(obj["budget"], "budget")
            if b != obj["budget"]:
                raise LedgerError("budget not in normal form")
            rel = obj["relation"]
            if rel is not None and _normal_relation(rel) != rel:
                raise LedgerError("relation not in normal form")
            state.datasets[name] = _Dataset(
                name, b, rel, str(obj["created"]), seq,
                spent={k: Fraction(0) for k in _COMPONENTS[b["type"]]})
            expect_ds.append((name, _canonical(b), rel, str(obj["created"]), seq))
        elif kind == "charge":
            cid = obj["id"]
            if cid != len(state.charges) + 1:
                raise LedgerError(f"charge id {cid} out of sequence")
            ds = state.datasets.get(obj["dataset"])
            if ds is None:
                raise LedgerError(f"charge to an undefined dataset {obj['dataset']!r}")
            g = _normal_guarantee(obj["guarantee"], "guarantee")
            if g != obj["guarantee"]:
                raise LedgerError("guarantee not in normal form")
            cost = charge_cost(ds.budget["type"], g)
            if obj["cost"] != _exact_dict(cost):
                raise LedgerError(f"recorded cost {obj['cost']} is not the guarantee's cost "
                                  f"{_exact_dict(cost)}")
            rel = obj["relation"]
            want = ds.effective_relation(state.charges)
            if _normal_relation(rel) != rel or (want is not None and rel != want):
                raise LedgerError(f"relation {rel!r} inconsistent with the dataset's")
            _check_sha(obj["plan_sha256"], "plan_sha256")
            budget = budget_components(ds.budget)
            for k in budget:
                ds.spent[k] += cost[k]
            if any(ds.spent[k] > budget[k] for k in budget):
                raise LedgerError(f"dataset {ds.name!r}'s charges exceed its budget")
            ds.charges.append(cid)
            state.charges[cid] = {
                "id": cid, "dataset": ds.name, "guarantee": g, "cost": cost,
                "plan_sha256": obj["plan_sha256"], "relation": rel, "status": "charged",
                "output_sha256": None, "charged_at": str(obj["charged_at"]), "released_at": None,
                "event_seq": seq, "release_seq": None}
        elif kind == "release":
            c = state.charges.get(obj["charge_id"])
            if c is None or c["status"] != "charged":
                raise LedgerError(f"release of charge {obj['charge_id']!r}, which is not an "
                                  "unreleased charge")
            if obj["output_sha256"] is not None:
                _check_sha(obj["output_sha256"], "output_sha256")
            c.update(status="released", output_sha256=obj["output_sha256"],
                     released_at=str(obj["released_at"]), release_seq=seq)
        else:
            raise LedgerError(f"unknown entry kind {kind!r}")

    def _compare_tables(self, conn: sqlite3.Connection, state: _State,
                        expect_ds: list[tuple]) -> None:
        got = [tuple(r) for r in conn.execute(f"SELECT {_DATASET_COLS} FROM datasets ORDER BY name")]
        if got != sorted(expect_ds):
            raise LedgerTampered(f"{self.path}: the datasets table does not match the hash-chained "
                                 f"log ({_diff(got, sorted(expect_ds))}): a budget was modified, "
                                 "added or deleted")
        expect = [(c["id"], c["dataset"], _canonical(c["guarantee"]),
                   _canonical(_exact_dict(c["cost"])), c["plan_sha256"], c["relation"],
                   c["status"], c["output_sha256"], c["charged_at"], c["released_at"],
                   c["event_seq"], c["release_seq"]) for c in state.charges.values()]
        got = [tuple(r) for r in conn.execute(f"SELECT {_CHARGE_COLS} FROM charges ORDER BY id")]
        if got != expect:
            raise LedgerTampered(f"{self.path}: the charges table does not match the hash-chained "
                                 f"log ({_diff(got, expect)}): a charge was modified, added or "
                                 "deleted")

    def _check_anchor(self, state: _State) -> str:
        """The anchor rule of the module docstring: "current", "behind by one" or raise."""
        n = state.count
        if not self.anchor_path.exists():
            if n == 1:
                return "missing (new ledger)"
            raise LedgerTampered(f"{self.path}: the anchor file {self.anchor_path.name} is "
                                 f"missing but the ledger has {n} entries (deleted?)")
        a = _read_anchor(self.anchor_path)
        try:
            c, head, lid = int(a["count"]), str(a["head"]), str(a["ledger_id"])
        except (KeyError, TypeError, ValueError):
            raise LedgerTampered(f"{self.anchor_path}: malformed anchor") from None
        if a.get("format") != HEAD_FORMAT:
            raise LedgerTampered(f"{self.anchor_path}: not a {HEAD_FORMAT} anchor")
        if lid != state.ledger_id:
            raise LedgerTampered(f"{self.path}: the database is ledger {state.ledger_id}, its "
                                 f"anchor belongs to ledger {lid}: one of them was replaced")
        if c > n:
            raise LedgerTampered(f"{self.path}: the database has {n} entries but the anchor "
                                 f"records {c}: entries were deleted or the database was "
                                 "replaced by an older copy")
        if c < n - 1:
            raise LedgerTampered(f"{self.path}: the anchor records {c} entries, the database has "
                                 f"{n}: the anchor is more than one commit behind (replaced by "
                                 "an older copy?)")
        if c >= 1 and state.hashes[c - 1] != head:
            raise LedgerTampered(f"{self.path}: the database's history differs from the "
                                 f"anchored one at entry {c} (rewritten or replaced)")
        if c == 0:
            raise LedgerTampered(f"{self.anchor_path}: anchor records no entries")
        return "current" if c == n else "behind by one (crash after a commit)"

    def _write_anchor(self, ledger_id: str, count: int, head: str) -> None:
        from factorize.io.atomic import atomic_target

        text = json.dumps({"format": HEAD_FORMAT, "ledger_id": ledger_id, "count": count,
                           "head": head, "written": _now()}, indent=1) + "\n"
        with atomic_target(self.anchor_path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(self.anchor_path.parent)


_PRIVATE = object()


@contextlib.contextmanager
def _read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One consistent snapshot for a verification (ended without masking an error)."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _read_anchor(path: Path) -> dict[str, Any]:
    try:
        a = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LedgerTampered(f"{path}: unreadable anchor ({exc})") from None
    if not isinstance(a, dict):
        raise LedgerTampered(f"{path}: malformed anchor")
    return a


def _diff(got: list[tuple], expect: list[tuple]) -> str:
    if len(got) != len(expect):
        return f"{len(got)} rows, the log implies {len(expect)}"
    for g, e in zip(got, expect):
        if g != e:
            return f"row {g[0]!r} differs"
    return "rows differ"


def _mkstemp_beside(p: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)


def _umask() -> int:
    u = os.umask(0)
    os.umask(u)
    return u


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
