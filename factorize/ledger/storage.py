"""The ledger's SQLite database ``L.db``: schema, connections, transactions, the rows each
change writes, and the check that the tables are the log replayed.

**Schema.** ``events`` is the append-only, hash-chained log (``seq, kind, body, prev_hash,
hash``: :mod:`factorize.ledger.chain`); ``datasets`` and ``charges`` are the log replayed
(:mod:`factorize.ledger.replay`), kept for reading with SQL. Verification compares both row by
row with a fresh replay (:func:`compare_tables`), so an edited, deleted, inserted or reordered
row in any table is detected; any other table is refused. Costs are stored as exact decimal
strings, guarantees and budgets as canonical JSON. (The column ``relation`` holds the
neighbouring relation; the schema is part of the file format ``factorize-ledger/1``.)

**Durability and transactions.** Rollback journal (``journal_mode=DELETE``) and
``synchronous=FULL``: a ``COMMIT`` that returned is on disk. A new database is built under a
temporary name with its genesis entry, fsync'd and renamed into place (:func:`create_database`),
so a ledger file is never half created. Connections open an existing file only
(``mode=rw``: never create a database). Changes run in one transaction started with
``BEGIN IMMEDIATE`` (:func:`write_transaction`: SQLite's write lock, with ``busy_timeout`` for
other SQLite clients), verifications in one read transaction (:func:`read_transaction`): each
sees one consistent snapshot. The file lock around them is :mod:`factorize.ledger.lock`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .chain import ZERO_HASH, canonical
from .composition import exact_dict
from .errors import LedgerError, LedgerTampered
from .replay import State

BUSY_TIMEOUT_MS = 60_000

SCHEMA = """
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
TABLES = ("charges", "datasets", "events")
DATASET_COLS = "name, budget, relation, created, event_seq"
CHARGE_COLS = ("id, dataset, guarantee, cost, plan_sha256, relation, status, output_sha256, "
               "charged_at, released_at, event_seq, release_seq")


# ----------------------------------------------------------------------------- the file

def not_a_ledger(db_path: Path, anchor_path: Path, why: str) -> LedgerError:
    """The error for a file that is no ledger database: :class:`LedgerTampered` when its
    anchor is present (the database was replaced or damaged), else :class:`LedgerError`."""
    if anchor_path.exists():
        return LedgerTampered(f"{db_path}: not a valid ledger database ({why}), but its "
                              "anchor is present: the database was replaced or damaged")
    return LedgerError(f"{db_path}: not a factorize ledger ({why})")


def create_database(path: Path, genesis_body: str, genesis_hash: str) -> None:
    """Write a new database at ``path`` holding the schema and the genesis entry: built under
    a temporary name beside it, fsync'd, given mode ``0666 & ~umask``, renamed over ``path``,
    folder fsync'd. The caller holds the exclusive lock."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=DELETE")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT INTO events VALUES (1, 'genesis', ?, ?, ?)",
                         (genesis_body, ZERO_HASH, genesis_hash))
            conn.execute("COMMIT")
        finally:
            conn.close()
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def connect(db_path: Path, anchor_path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the existing database (autocommit mode: transactions are explicit),
    closed after the block. SQLite errors become :class:`LedgerError` (locked, busy, I/O,
    read-only, full) or :func:`not_a_ledger` (anything else: not a database, malformed)."""
    uri = db_path.resolve().as_uri() + "?mode=rw"  # never creates a database
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None,
                               timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:
        raise LedgerError(f"{db_path}: cannot open the ledger database: {exc}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=FULL")
        yield conn
    except sqlite3.OperationalError as exc:
        msg = str(exc).lower()
        if any(w in msg for w in ("locked", "busy", "i/o", "readonly", "unable to open",
                                  "full")):
            raise LedgerError(f"{db_path}: SQLite: {exc}") from exc
        raise not_a_ledger(db_path, anchor_path, f"SQLite error: {exc}") from exc
    except sqlite3.DatabaseError as exc:  # "file is not a database", malformed, …
        raise not_a_ledger(db_path, anchor_path, f"SQLite error: {exc}") from exc
    finally:
        conn.close()


@contextlib.contextmanager
def read_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One consistent snapshot for a verification (ended without masking an error)."""
    conn.execute("BEGIN")
    try:
        yield
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


@contextlib.contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back on any exception, the commit's included."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


# ----------------------------------------------------------------------------- rows written

def insert_event(conn: sqlite3.Connection, seq: int, kind: str, body: str, prev_hash: str,
                 h: str) -> None:
    conn.execute("INSERT INTO events (seq, kind, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?)",
                 (seq, kind, body, prev_hash, h))


def insert_dataset(conn: sqlite3.Connection, name: str, budget: dict[str, Any],
                   relation: str | None, created: str, seq: int) -> None:
    conn.execute(f"INSERT INTO datasets ({DATASET_COLS}) VALUES (?, ?, ?, ?, ?)",
                 (name, canonical(budget), relation, created, seq))


def insert_charge(conn: sqlite3.Connection, cid: int, dataset: str, guarantee: dict[str, Any],
                  cost: dict[str, str], plan_sha256: str, relation: str, charged_at: str,
                  seq: int) -> None:
    """A new charge's row (status ``charged``; ``cost`` as exact decimal strings)."""
    conn.execute(f"INSERT INTO charges ({CHARGE_COLS}) VALUES "
                 "(?, ?, ?, ?, ?, ?, 'charged', NULL, ?, NULL, ?, NULL)",
                 (cid, dataset, canonical(guarantee), canonical(cost), plan_sha256,
                  relation, charged_at, seq))


def mark_released(conn: sqlite3.Connection, charge_id: int, output_sha256: str | None,
                  released_at: str, seq: int) -> None:
    conn.execute("UPDATE charges SET status='released', output_sha256=?, released_at=?, "
                 "release_seq=? WHERE id=?",
                 (output_sha256, released_at, seq, charge_id))


# ----------------------------------------------------------------------------- verification

def check_schema(conn: sqlite3.Connection, db_path: Path, anchor_path: Path) -> None:
    """The three tables, nothing else, and SQLite's own integrity check."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not set(TABLES) <= tables:
        raise not_a_ledger(db_path, anchor_path, f"tables {sorted(set(TABLES) - tables)} missing")
    if tables - set(TABLES):
        raise LedgerTampered(f"{db_path}: unexpected tables {sorted(tables - set(TABLES))}")
    ok = conn.execute("PRAGMA quick_check").fetchone()[0]
    if ok != "ok":
        raise LedgerTampered(f"{db_path}: SQLite integrity check failed: {ok}")


def events(conn: sqlite3.Connection) -> Iterable[tuple[Any, ...]]:
    """The log's rows ``(seq, kind, body, prev_hash, hash)`` in order."""
    return conn.execute("SELECT seq, kind, body, prev_hash, hash FROM events ORDER BY seq")


def compare_tables(conn: sqlite3.Connection, db_path: Path, state: State) -> None:
    """:class:`LedgerTampered` unless the ``datasets`` and ``charges`` tables hold exactly the
    rows that the replayed log ``state`` implies."""
    expect_ds = sorted((ds.name, canonical(ds.budget), ds.relation, ds.created, ds.seq)
                       for ds in state.datasets.values())
    got = [tuple(r) for r in conn.execute(f"SELECT {DATASET_COLS} FROM datasets ORDER BY name")]
    if got != expect_ds:
        raise LedgerTampered(f"{db_path}: the datasets table does not match the hash-chained "
                             f"log ({_diff(got, expect_ds)}): a budget was modified, "
                             "added or deleted")
    expect = [(c["id"], c["dataset"], canonical(c["guarantee"]),
               canonical(exact_dict(c["cost"])), c["plan_sha256"], c["relation"],
               c["status"], c["output_sha256"], c["charged_at"], c["released_at"],
               c["event_seq"], c["release_seq"]) for c in state.charges.values()]
    got = [tuple(r) for r in conn.execute(f"SELECT {CHARGE_COLS} FROM charges ORDER BY id")]
    if got != expect:
        raise LedgerTampered(f"{db_path}: the charges table does not match the hash-chained "
                             f"log ({_diff(got, expect)}): a charge was modified, added or "
                             "deleted")


def _diff(got: list[tuple], expect: list[tuple]) -> str:
    if len(got) != len(expect):
        return f"{len(got)} rows, the log implies {len(expect)}"
    for g, e in zip(got, expect, strict=True):
        if g != e:
            return f"row {g[0]!r} differs"
    return "rows differ"


# ----------------------------------------------------------------------------- durable files

def fsync_dir(d: Path) -> None:
    """fsync a folder (a rename in it is then durable); best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    u = os.umask(0)
    os.umask(u)
    return u
