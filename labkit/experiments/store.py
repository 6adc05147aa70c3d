"""The SQLite store of sweeps: every trial, report, final metric, error and checkpoint.

One file (standard library ``sqlite3``, WAL journal) holds any number of
sweeps by name: the sweep (its space, metric, mode, seed, settings), its
trials (configuration, status, final metrics, error and traceback, attempts,
worker), every report (step, metrics, time) and each trial's latest
checkpoint, inline up to :data:`~.checkpoints.INLINE_BYTES` and in a file of
the folder ``<store>-checkpoints`` beyond.

Writes never wait on the disk in a trial's path: they queue for one writer
thread, which comes by every :data:`COMMIT_EVERY` seconds (a queued write
wakes nobody) and commits what it finds in one transaction.  A killed kernel thus loses at most the
last fraction of a second of reports (WAL with ``synchronous=NORMAL``
survives a killed process; only a power cut can cost the last commits).
A notebook can read a sweep while another kernel writes it (WAL: readers
never wait for the writer); ``lk.load_sweep`` opens the file read-only, so an
archived store on a read-only disk reads too.  One sweep at a time owns a
name (:meth:`Store.claim`): a second one, in any thread or process sharing
the file, is refused before it writes anything.

Examples
--------
>>> store = Store(None)                      # in memory: nothing persists
>>> store.create_sweep("demo", '{"lr": {}}', "loss", "min", 0, {}, now=False)
>>> store.add_trials("demo", [(0, {"lr": 0.1})])
>>> store.trial_finished("demo", 0, "completed", {"loss": 0.5}, 0.5, 0.5, 3, ended=1.0)
>>> store.flush()
>>> [(t["id"], t["status"], t["metrics"]) for t in store.trials("demo")]
[(0, 'completed', {'loss': 0.5})]
>>> store.close()
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import math
import os
import re
import socket
import sqlite3
import threading
import time
import uuid

from ..errors import InputError, StorageError
from .checkpoints import INLINE_BYTES, read_bytes, write_bytes

__all__ = ["Store", "COMMIT_EVERY", "SCHEMA"]

logger = logging.getLogger("labkit.experiments")

#: Most seconds a queued write waits for its commit.
COMMIT_EVERY = 0.25

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    name TEXT PRIMARY KEY, space TEXT NOT NULL, metric TEXT NOT NULL, mode TEXT NOT NULL,
    seed INTEGER, settings TEXT, created REAL, updated REAL);
CREATE TABLE IF NOT EXISTS trials (
    sweep TEXT NOT NULL, id INTEGER NOT NULL, config TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', metrics TEXT, value REAL, best REAL, step INTEGER,
    error TEXT, traceback TEXT, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    worker TEXT, started REAL, ended REAL, PRIMARY KEY (sweep, id));
CREATE TABLE IF NOT EXISTS reports (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL,
    time REAL NOT NULL, attempt INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS reports_of_trial ON reports (sweep, trial, step);
CREATE TABLE IF NOT EXISTS checkpoints (
    sweep TEXT NOT NULL, trial INTEGER NOT NULL, seq INTEGER NOT NULL, step INTEGER,
    time REAL NOT NULL, size INTEGER NOT NULL, data BLOB, path TEXT,
    PRIMARY KEY (sweep, trial));
CREATE TABLE IF NOT EXISTS owners (
    sweep TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT, pid INTEGER, since REAL);
"""

#: Owner tokens of the sweeps this process runs now (a claim of this process that is not
#: among them was left by a sweep that ended without releasing it).
_OWNED: set = set()

_STOP = object()


class Store:
    """A sweep store at ``path`` (``None``: in memory, for this process only).

    Opening checks that the file can be written; a store that cannot be is a
    :class:`~labkit.errors.StorageError` naming the path, raised here, before
    anything runs.  ``readonly`` opens an existing store to read it only.
    """

    def __init__(self, path, readonly: bool = False):
        if path is None:
            self.path = None
            self._uri = f"file:labkit-sweeps-{uuid.uuid4().hex}?mode=memory&cache=shared"
        else:
            if not isinstance(path, (str, os.PathLike)):
                raise InputError(
                    f"store must be a file path or None, got {type(path).__name__} {path!r:.60}",
                    argument="store",
                )
            self.path = os.path.abspath(os.fspath(path))
            self._uri = None
        self._ops: collections.deque = collections.deque()  # appends are thread-safe
        self._due = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._conn_lock = threading.Lock()  # the writer's connection, shared in memory
        self._closed = False
        self.readonly = readonly and path is not None
        # in memory, this connection keeps the database alive (and is the writer's)
        self._conn = self._open_readonly() if self.readonly else self._open_checked()

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """A new connection (autocommit off, WAL, waits up to 30 s for a lock)."""
        if self._uri is not None:
            conn = sqlite3.connect(self._uri, uri=True, check_same_thread=False, timeout=30)
        else:
            conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.Error:
                conn.close()  # now, not when a cycle is collected: the file stays open else
                raise
        return conn

    def _open_readonly(self) -> sqlite3.Connection:
        """A connection that reads only, so an archived store on a read-only disk opens.

        SQLite's ``mode=ro`` still needs the WAL's shared-memory file beside a
        WAL store; where that cannot be made (a read-only folder), the file is
        opened ``immutable`` (nobody may be writing it then anyway).  A file
        that is not a sweep store is a StorageError naming it.
        """
        from urllib.parse import quote

        base = "file:" + quote(self.path)
        last: sqlite3.Error | None = None
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            conn = sqlite3.connect(base + query, uri=True, check_same_thread=False, timeout=30)
            try:
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            except sqlite3.Error as exc:
                conn.close()
                last = exc
                if isinstance(exc, sqlite3.OperationalError):
                    continue  # cannot open it so: try the next way
                break  # not a database at all
            if "sweeps" not in tables:
                conn.close()
                raise StorageError(
                    "the file is an SQLite database but not a labkit sweep store "
                    "(it has no table of sweeps)",
                    path=self.path,
                )
            return conn
        raise StorageError(
            f"cannot read the sweep store: {last} (a corrupt file, or not a sweep store)",
            path=self.path,
        ) from last

    def _open_checked(self) -> sqlite3.Connection:
        """The writer's connection, the schema made and a write tried; StorageError if not."""
        if self.path is not None:
            folder = os.path.dirname(self.path)
            if os.path.isdir(self.path):
                raise StorageError(
                    "the store path is a folder; give a file path such as 'experiments.db'",
                    path=self.path,
                )
            if not os.path.isdir(folder):
                raise StorageError(
                    f"cannot open the store: the folder {folder} does not exist", path=self.path
                )
        conn = None
        try:
            conn = self._connect()
            conn.executescript(SCHEMA)  # a new file is written here (a full disk fails)
            conn.execute("BEGIN IMMEDIATE")  # the write lock: another writer would wait here
            conn.execute("DELETE FROM sweeps WHERE 0")  # a read-only file fails here
            conn.rollback()  # nothing written
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise StorageError(
                f"the store cannot be written: {exc}", path=self.path or "<memory>"
            ) from exc
        return conn

    def read(self, sql: str, params=()) -> list:
        """Rows of a query (any thread): on the writer's connection, between its commits.

        Another kernel reads the same file on a connection of its own (WAL lets it).
        """
        with self._conn_lock:
            return self._rows(self._conn, sql, params)

    def _rows(self, conn, sql: str, params) -> list:
        try:
            cursor = conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except sqlite3.Error as exc:
            raise StorageError(
                f"reading the store failed: {exc}", path=self.path or "<memory>"
            ) from exc

    # -- the writer ----------------------------------------------------------------------

    def put(self, sql: str, params=(), many: bool = False) -> None:
        """Queue one write (``many``: ``params`` is a list of rows)."""
        self._ops.append((sql, params, many))  # wakes nobody: the writer comes by on its own
        if self._thread is None:
            self._start()

    def call(self, fn) -> None:
        """Queue ``fn(connection)``, run by the writer inside its transaction."""
        self._ops.append(fn)
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._write_loop, daemon=True, name="labkit-store-writer"
                )
                self._thread.start()

    def _write_loop(self) -> None:
        """Every :data:`COMMIT_EVERY` seconds (at once when asked), commit what is queued."""
        while True:
            self._due.wait(COMMIT_EVERY)
            self._due.clear()
            batch = []
            while self._ops:
                batch.append(self._ops.popleft())
            if not batch:
                continue
            with self._conn_lock:
                self._commit(batch)
            for op in batch:
                if isinstance(op, threading.Event):
                    op.set()
            if any(op is _STOP for op in batch):
                return

    def _commit(self, batch: list) -> None:
        """Run the writes of ``batch`` in one transaction; a failure is kept for :meth:`check`."""
        after: list = []
        try:
            for op in batch:
                if isinstance(op, threading.Event) or op is _STOP:
                    continue
                if isinstance(op, tuple):
                    sql, params, many = op
                    (self._conn.executemany if many else self._conn.execute)(sql, params)
                elif callable(op):
                    done = op(self._conn)
                    if callable(done):
                        after.append(done)
            self._conn.commit()
        except Exception as exc:  # disk full, a removed folder: the sweep is told
            logger.error("labkit: writing the sweep store %s failed: %s", self.path, exc)
            try:
                self._conn.rollback()
            except sqlite3.Error:
                pass
            if self._error is None:
                self._error = exc
            return
        for fn in after:  # e.g. removing a checkpoint file the commit replaced
            try:
                fn()
            except OSError:
                pass

    def flush(self, timeout: float | None = 30.0) -> None:
        """Wait until every queued write is committed; raise the store's error, if any."""
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._ops.append(done)
            self._due.set()
            done.wait(timeout)
        self.check()

    def check(self) -> None:
        """Raise a write's failure as a StorageError naming the store."""
        error = self._error
        if error is not None:
            if isinstance(error, StorageError):
                raise error
            raise StorageError(
                f"writing the sweep store failed: {error}", path=self.path or "<memory>"
            ) from error

    def close(self) -> None:
        """Commit what is queued and stop the writer; idempotent (:meth:`check` says how it went)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is not None:
            self._ops.append(_STOP)
            self._due.set()
            thread.join(30)
        self._conn.close()

    # -- sweeps --------------------------------------------------------------------------

    def sweep(self, name: str) -> dict | None:
        """The sweep ``name`` as a dict (space, settings decoded), or None."""
        rows = self.read("SELECT * FROM sweeps WHERE name = ?", (name,))
        if not rows:
            return None
        row = rows[0]
        row["settings"] = json.loads(row["settings"] or "{}")
        return row

    def claim(self, sweep: str, owner: str) -> dict | None:
        """Make ``owner`` the one sweep that runs ``sweep`` now; ``None``, or who holds it.

        One transaction (``BEGIN IMMEDIATE``: the write lock) reads and takes the
        claim, so of two sweeps starting with one name, in threads or processes
        sharing the file, exactly one gets it.  A claim whose process is gone
        (on this host) is taken over.
        """
        with self._conn_lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                row = conn.execute(
                    "SELECT owner, host, pid, since FROM owners WHERE sweep = ?", (sweep,)
                ).fetchone()
                if row is not None and row[0] != owner and not _stale(*row):
                    conn.rollback()
                    return {"owner": row[0], "host": row[1], "pid": row[2], "since": row[3]}
                conn.execute(
                    "INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?)",
                    (sweep, owner, socket.gethostname(), os.getpid(), time.time()),
                )
                conn.commit()
            except sqlite3.Error as exc:
                try:
                    conn.rollback()
                except sqlite3.Error:
                    pass
                raise StorageError(
                    f"the store cannot be written: {exc}", path=self.path or "<memory>"
                ) from exc
        _OWNED.add(owner)
        return None

    def release(self, sweep: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``sweep`` (queued: committed with the last writes)."""
        _OWNED.discard(owner)
        self.put("DELETE FROM owners WHERE sweep = ? AND owner = ?", (sweep, owner))

    def sweep_names(self) -> list[str]:
        """Every sweep's name, oldest first."""
        return [r["name"] for r in self.read("SELECT name FROM sweeps ORDER BY created")]

    def create_sweep(
        self,
        name: str,
        space: str,
        metric: str,
        mode: str,
        seed: int,
        settings: dict,
        now: bool = True,
    ) -> None:
        """Record a new sweep (committed before the call returns, unless ``now`` is False:
        then with the next commit, e.g. that of :meth:`add_trials`)."""
        t = time.time()
        self.put(
            "INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (name, space, metric, mode, seed, json.dumps(settings), t, t),
        )
        if now:
            self.flush()

    def update_sweep(self, name: str, settings: dict) -> None:
        """Replace the sweep's settings (queued)."""
        self.put(
            "UPDATE sweeps SET settings = ?, updated = ? WHERE name = ?",
            (json.dumps(settings), time.time(), name),
        )

    # -- trials --------------------------------------------------------------------------

    def add_trials(self, sweep: str, trials: list) -> None:
        """Pending trials ``[(id, config), ...]`` (queued: every later write of theirs
        follows them into the same or a later commit)."""
        rows = [(sweep, i, _json(config)) for i, config in trials]
        self.put(
            "INSERT OR IGNORE INTO trials (sweep, id, config) VALUES (?, ?, ?)", rows, many=True
        )

    def trial_started(
        self, sweep: str, trial: int, attempts: int, worker: str, started: float
    ) -> None:
        self.put(
            "UPDATE trials SET status = 'running', attempts = ?, worker = ?, "
            "started = COALESCE(started, ?), ended = NULL WHERE sweep = ? AND id = ?",
            (attempts, worker, started, sweep, trial),
        )

    def trial_reports(
        self, sweep: str, trial: int, attempt: int, reports: list, progress: tuple | None = None
    ) -> None:
        """Reports ``[(step, metrics, time), ...]`` of one trial; ``progress``: its
        ``(value, best, step)`` now.  Encoded by the writer, not the caller."""

        def write(conn):
            conn.executemany(
                "INSERT INTO reports VALUES (?, ?, ?, ?, ?, ?)",
                [(sweep, trial, step, _json(m), t, attempt) for step, m, t in reports],
            )
            if progress is not None:
                conn.execute(
                    "UPDATE trials SET value = ?, best = ?, step = ? WHERE sweep = ? AND id = ?",
                    (*map(_real, progress), sweep, trial),
                )

        self.call(write)

    def drop_reports(self, sweep: str, trial: int, from_step: int) -> None:
        """Forget reports of ``trial`` from ``from_step`` on (a restart reports them again)."""
        self.put(
            "DELETE FROM reports WHERE sweep = ? AND trial = ? AND step >= ?",
            (sweep, trial, from_step),
        )

    def trial_pending(self, sweep: str, trial: int) -> None:
        """An interrupted trial waits to run again (a resumed sweep)."""
        self.put(
            "UPDATE trials SET status = 'pending', ended = NULL WHERE sweep = ? AND id = ?",
            (sweep, trial),
        )

    def trial_finished(
        self,
        sweep: str,
        trial: int,
        status: str,
        metrics: dict | None,
        value,
        best,
        step,
        error: str | None = None,
        traceback: str | None = None,
        reason: str | None = None,
        ended: float | None = None,
    ) -> None:
        self.put(
            "UPDATE trials SET status = ?, metrics = ?, value = ?, best = ?, step = ?, "
            "error = ?, traceback = ?, reason = ?, ended = ? WHERE sweep = ? AND id = ?",
            (
                status,
                None if metrics is None else _json(metrics),
                _real(value),
                _real(best),
                _real(step),
                error,
                traceback,
                reason,
                ended,
                sweep,
                trial,
            ),
        )

    def trials(self, sweep: str) -> list[dict]:
        """Every trial of ``sweep`` in id order, configuration and metrics decoded."""
        rows = self.read("SELECT * FROM trials WHERE sweep = ? ORDER BY id", (sweep,))
        for row in rows:
            row["config"] = json.loads(row["config"])
            row["metrics"] = json.loads(row["metrics"]) if row["metrics"] else None
            for key in ("value", "best", "step"):
                row[key] = _unreal(row[key])
        return rows

    def reports(self, sweep: str) -> dict[int, list]:
        """``{trial: [(step, metrics, time), ...]}`` in the order they were reported."""
        out: dict[int, list] = {}
        for r in self.read(
            "SELECT trial, step, metrics, time FROM reports WHERE sweep = ? ORDER BY rowid",
            (sweep,),
        ):
            out.setdefault(r["trial"], []).append((r["step"], json.loads(r["metrics"]), r["time"]))
        return out

    # -- checkpoints ---------------------------------------------------------------------

    def checkpoint_folder(self, sweep: str) -> str | None:
        """Where big checkpoints of ``sweep`` go (``None`` in memory: they stay inline)."""
        if self.path is None:
            return None
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", sweep)[:40]
        digest = hashlib.sha1(sweep.encode()).hexdigest()[:8]
        return os.path.join(f"{self.path}-checkpoints", f"{safe}-{digest}")

    def save_checkpoint(self, sweep: str, trial: int, seq: int, step, blob: bytes) -> None:
        """Keep ``blob`` as the trial's latest checkpoint (queued; a big one to a file)."""
        folder = self.checkpoint_folder(sweep)
        now = time.time()

        def write(conn):
            old = conn.execute(
                "SELECT path FROM checkpoints WHERE sweep = ? AND trial = ?", (sweep, trial)
            ).fetchone()
            path = None
            if folder is not None and len(blob) > INLINE_BYTES:
                path = os.path.join(folder, f"trial-{trial}-{seq}.lkc")
                write_bytes(path, blob)
            conn.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep,
                    trial,
                    seq,
                    step,
                    now,
                    len(blob),
                    None if path else sqlite3.Binary(blob),
                    path,
                ),
            )
            stale = old[0] if old and old[0] and old[0] != path else None
            return (lambda: os.unlink(stale)) if stale else None

        self.call(write)

    def checkpoint(self, sweep: str, trial: int) -> tuple[bytes, int, int] | None:
        """``(bytes, step, seq)`` of the trial's latest checkpoint, or None."""
        rows = self.read(
            "SELECT seq, step, data, path FROM checkpoints WHERE sweep = ? AND trial = ?",
            (sweep, trial),
        )
        if not rows:
            return None
        row = rows[0]
        blob = bytes(row["data"]) if row["data"] is not None else read_bytes(row["path"])
        return blob, row["step"], row["seq"]

    def __repr__(self):
        return f"<labkit sweep store {self.path or 'in memory'}>"


def _stale(owner: str, host: str | None, pid: int | None, since: float | None) -> bool:
    """Whether a claim's sweep has ended without releasing it (its process is gone)."""
    if host != socket.gethostname() or pid is None:
        return False  # another machine's process: it cannot be asked
    if pid == os.getpid():
        return owner not in _OWNED
    import psutil  # Dask's own dependency

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:  # ended, not yet reaped
            return True
        started = process.create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # alive, another user's
        return False
    # a process that began after the claim only got the claimer's pid again
    return since is not None and started > since + 1.0


def _real(value):
    """A number for a REAL column: NaN as the text 'NaN' (SQLite would store NULL, read as None)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _unreal(value):
    """A REAL column's value back: the text 'NaN' as NaN."""
    return float(value) if isinstance(value, str) else value


def _json(value) -> str:
    """``value`` as JSON; numpy scalars as their numbers, what else JSON cannot hold as its repr."""
    return json.dumps(value, default=_plain)


def _plain(value):
    """A value JSON holds for ``value``: a numpy scalar's number (reads back equal), else its repr."""
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        try:
            plain = item()
        except (TypeError, ValueError):  # an array of more than one value
            return repr(value)
        if isinstance(plain, (bool, int, float, str)):
            return plain
    return repr(value)
