"""The sweep store's tables, their version (``PRAGMA user_version``), and opening a file.

:data:`SCHEMA_VERSION` counts the schema's changes: 0 is a store written
before it had a version (labkit before issue 36), 1 adds ``rule_states``
(what an early-stopping rule keeps, so a resumed sweep needs no replay), 2
keeps reports in ``report_packs``, a trial's reports packed in a row
(:mod:`.report_ops`), where 0 and 1 kept a row of JSON a report in
``reports`` (issue 37: a fifth of the bytes, read back ten times faster), 3 adds
``exploits`` (population-based training's, issue 35), 4 adds a checkpoint's
``key`` at the sweep's location, its ``digest`` and why it was ``dropped``
(issue 46: the store keeps references, never the bytes), 5 adds the sweep's
``objectives`` (its names and modes, when several) and each trial's final
``objectives`` and ``constraints`` values (issue 48; NULL for the trials of an
older store: it reads the same after its migration as before) and its ``moves``
(issue 47: executions ended as their worker left gracefully; 0 in an older
store).  A
writable store is migrated to the current version when opened, in one
transaction; a store opened to read only is read as its version wrote it; a
store of a newer version than this labkit knows is an InputError naming the file.

Two indexes find the trials a reader that follows the store asks about at
each look (:mod:`.store_changes`): the running ones, and those ended lately.
They need no version (an index changes no row): a writable open makes them
on a store that lacks them, and a store without them reads the same, scanned.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from urllib.parse import quote

from ...errors import InputError, StorageError
from .report_ops import pack_rows, paused_gc

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "READ_WAIT",
    "open_writable",
    "open_readonly",
    "schema_version",
    "read_failure",
]

#: The version of the schema this labkit writes.
SCHEMA_VERSION = 5

#: Seconds a read-only reader waits for a writer's lock before it says the store is locked.
#: A labkit store (WAL) never makes its readers wait; another writer's exclusive lock can.
READ_WAIT = 5.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    name TEXT PRIMARY KEY, space TEXT NOT NULL, metric TEXT NOT NULL, mode TEXT NOT NULL,
    seed INTEGER, settings TEXT, created REAL, updated REAL, objectives TEXT);
CREATE TABLE IF NOT EXISTS trials (
    sweep TEXT NOT NULL, id INTEGER NOT NULL, config TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', metrics TEXT, value REAL, best REAL, step INTEGER,
    error TEXT, traceback TEXT, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    worker TEXT, started REAL, ended REAL, objectives TEXT, constraints TEXT,
    moves INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (sweep, id));
CREATE INDEX IF NOT EXISTS trials_running ON trials (sweep, id) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS trials_by_end ON trials (ended);
CREATE TABLE IF NOT EXISTS report_packs (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, n INTEGER NOT NULL, last REAL,
    data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS report_packs_of_trial ON report_packs (sweep, trial);
CREATE TABLE IF NOT EXISTS checkpoints (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, seq INTEGER NOT NULL, step INTEGER,
    time REAL NOT NULL, size INTEGER NOT NULL, data BLOB, path TEXT,
    key TEXT, digest TEXT, dropped TEXT, PRIMARY KEY (sweep, trial));
CREATE TABLE IF NOT EXISTS owners (
    sweep TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT, pid INTEGER, since REAL);
CREATE TABLE IF NOT EXISTS rule_states (
    sweep TEXT PRIMARY KEY, state TEXT NOT NULL, time REAL NOT NULL);
CREATE TABLE IF NOT EXISTS exploits (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, step INTEGER, donor INTEGER NOT NULL,
    donor_step INTEGER, config_before TEXT NOT NULL, config_after TEXT NOT NULL,
    time REAL NOT NULL, ranked_at INTEGER);
CREATE INDEX IF NOT EXISTS exploits_of_sweep ON exploits (sweep);
"""


def schema_version(conn: sqlite3.Connection) -> int:
    """The store's ``PRAGMA user_version``.

    Read to the end (``fetchall``): a statement left open keeps its read
    snapshot, and a write after another connection's then fails at once
    ("database is locked") instead of waiting its turn.
    """
    return int(conn.execute("PRAGMA user_version").fetchall()[0][0])


def _check_version(conn: sqlite3.Connection, where: str) -> int:
    """The store's version; a newer one than this labkit knows is an InputError naming it."""
    version = schema_version(conn)
    if version > SCHEMA_VERSION:
        conn.close()
        raise InputError(
            f"the sweep store {where} has schema version {version}, newer than this "
            f"labkit reads (up to {SCHEMA_VERSION}): a newer labkit wrote it; open it with "
            "that labkit, or give another store",
            argument="store",
        )
    return version


def _connect(path: str | None, uri: str | None) -> sqlite3.Connection:
    """A new connection (autocommit off, WAL, waits up to 30 s for a lock)."""
    if uri is not None:
        return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=30)
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
    try:
        _wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        conn.close()  # now, not when a cycle is collected: the file stays open else
        raise
    return conn


def _wal(conn: sqlite3.Connection, tries: int = 100) -> None:
    """Switch to the WAL journal, again while another connection does it on a new file.

    SQLite's busy handler does not cover the switch: two connections opening a
    new file at once may see "database is locked" at once; the switch is tried
    again, for up to five seconds.
    """
    for attempt in range(tries):
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchall()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.05)


def _check_path(path: str | None) -> None:
    """A file path in a folder that exists; a StorageError naming it if not."""
    if path is None:
        return
    folder = os.path.dirname(path)
    if os.path.isdir(path):
        raise StorageError(
            "the store path is a folder; give a file path such as 'experiments.db'", path=path
        )
    if not os.path.isdir(folder):
        raise StorageError(f"cannot open the store: the folder {folder} does not exist", path=path)


def open_writable(path: str | None, uri: str | None) -> sqlite3.Connection:
    """The writer's connection: the schema made or migrated, a write tried; StorageError if not."""
    _check_path(path)
    conn = None
    try:
        conn = _connect(path, uri)
        version = _check_version(conn, path or "in memory")
        conn.executescript(SCHEMA)  # a new file is written here (a full disk fails)
        if version < SCHEMA_VERSION or _lacking(conn):
            _migrate(conn)
        conn.execute("BEGIN IMMEDIATE")  # the write lock: another writer would wait here
        conn.execute("DELETE FROM sweeps WHERE 0")  # a read-only file fails here
        conn.rollback()  # nothing written
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        raise StorageError(f"the store cannot be written: {exc}", path=path or "<memory>") from exc
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring an older store to :data:`SCHEMA_VERSION`, in one transaction (all or nothing).

    0 -> 1: ``rule_states``, made by the schema's script.  1 -> 2: every
    report of ``reports`` packed into ``report_packs``, then ``reports`` dropped.
    2 -> 3: ``exploits``, made by the schema's script.  3 -> 4: the
    checkpoints' ``key``, ``digest`` and ``dropped`` columns.  4 -> 5: the sweeps'
    ``objectives``, the trials' ``objectives``, ``constraints`` and ``moves``.
    """
    conn.execute("BEGIN IMMEDIATE")  # another process may be migrating it: one does
    try:
        if schema_version(conn) < 2 and _has_table(conn, "reports"):
            rows = conn.execute(
                "SELECT sweep, trial, step, metrics, time, attempt FROM reports "
                "ORDER BY sweep, trial, rowid"
            ).fetchall()
            with paused_gc():
                decoded = [(s, t, step, json.loads(m), w, a) for s, t, step, m, w, a in rows]
            conn.executemany(
                "INSERT INTO report_packs (sweep, trial, n, last, data) VALUES (?, ?, ?, ?, ?)",
                pack_rows(decoded),
            )
            conn.execute("DROP TABLE reports")
        for table, column, kind in _ADDED:
            columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
            if column not in columns:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


#: The columns versions 4 and 5 added to tables an older store has: ``(table, column, type)``.
_ADDED = (
    ("checkpoints", "key", "TEXT"),
    ("checkpoints", "digest", "TEXT"),
    ("checkpoints", "dropped", "TEXT"),
    ("sweeps", "objectives", "TEXT"),
    ("trials", "objectives", "TEXT"),
    ("trials", "constraints", "TEXT"),
    ("trials", "moves", "INTEGER NOT NULL DEFAULT 0"),
)


def _lacking(conn: sqlite3.Connection) -> bool:
    """Whether a store of this version lacks a column of :data:`_ADDED`: one written
    before ``moves`` joined version 5 (unreleased, so it kept its number): added then."""
    present = {
        (table, r[1])
        for table in {t for t, _, _ in _ADDED}
        for r in conn.execute(f"PRAGMA table_info({table})").fetchall()
    }
    return any((table, column) not in present for table, column, _ in _ADDED)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchall())


def _locked(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is another connection's lock (SQLITE_BUSY / SQLITE_LOCKED)."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def read_failure(exc: sqlite3.Error) -> str:
    """What a failed read of the store says: a writer's lock said as such, and what to do."""
    if _locked(exc):
        return (
            f"the sweep store is locked by a writer (waited {READ_WAIT:g} s: {exc}); another "
            "program holds an exclusive lock on it: read it again once that write ends"
        )
    return f"reading the store failed: {exc}"


def open_readonly(path: str) -> sqlite3.Connection:
    """A connection that reads only, so an archived store on a read-only disk opens.

    SQLite's ``mode=ro`` still needs the WAL's shared-memory file beside a
    WAL store; where that cannot be made (a read-only folder), the file is
    opened ``immutable`` (nobody may be writing it then anyway).  A file
    that is not a sweep store is a StorageError naming it; so is one another
    writer holds locked past :data:`READ_WAIT` (never read past its lock: what
    ``immutable`` would show then is partial).
    """
    base = "file:" + quote(path)
    last: sqlite3.Error | None = None
    for query in ("?mode=ro", "?mode=ro&immutable=1"):
        conn = sqlite3.connect(base + query, uri=True, check_same_thread=False, timeout=READ_WAIT)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.Error as exc:
            conn.close()
            last = exc
            if _locked(exc):  # immutable would read past the lock: a partial, stale store
                raise StorageError(read_failure(exc), path=path) from exc
            if isinstance(exc, sqlite3.OperationalError):
                continue  # cannot open it so (a read-only folder): try the next way
            break  # not a database at all
        if "sweeps" not in tables:
            conn.close()
            raise StorageError(
                "the file is an SQLite database but not a labkit sweep store "
                "(it has no table of sweeps)",
                path=path,
            )
        _check_version(conn, path)
        return conn
    raise StorageError(
        f"cannot read the sweep store: {last} (a corrupt file, or not a sweep store)", path=path
    ) from last
