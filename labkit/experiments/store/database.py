"""The SQLite store of sweeps: every trial, report, final metric, error and checkpoint.

One file (standard library ``sqlite3``, WAL journal) holds any number of
sweeps by name: the sweep (its space, metric, mode, seed, settings), its
trials (configuration, status, final metrics, error and traceback, attempts,
worker), every report (step, metrics, time) and each trial's latest
checkpoint's reference (the trial wrote its bytes to the sweep's checkpoint
location itself: :mod:`.kept`).  A trial's reports are packed in a
row (:mod:`.report_ops`: about 19 bytes a report), so ten thousand trials read
back in a few tenths of a second (:mod:`.store_reads`).

Writes never wait on the disk in a trial's path: they queue for one writer
thread (:mod:`.write_queue`), which commits what it finds every
:data:`COMMIT_EVERY` seconds.  A killed kernel thus loses at most the
last fraction of a second of reports (WAL with ``synchronous=NORMAL``
survives a killed process; only a power cut can cost the last commits).
A notebook can read a sweep while another kernel writes it (WAL: readers
never wait for the writer); ``lk.load_sweep`` opens the file read-only, so an
archived store on a read-only disk reads too.  One sweep at a time owns a
name (:meth:`Store.claim`): a second one, in any thread or process sharing
the file, is refused before it writes anything (:mod:`.claims`).  The
schema carries a version (:mod:`.store_schema`); what an early-stopping rule
keeps is stored with its sweep, taken once a commit (:meth:`Store.keep_rule_state`);
so are population-based training's exploits (:mod:`.store_exploits`).

Examples
--------
>>> store = Store(None)                      # in memory: nothing persists
>>> store.create_sweep("demo", '{"lr": {}}', "loss", "min", 0, {}, now=False)
>>> store.add_trials("demo", [(0, {"lr": 0.1})])
>>> store.trial_finished("demo", 0, "completed", {"loss": 0.5}, 0.5, 0.5, 3, ended=1.0)
>>> store.flush()
>>> [(t["id"], t["status"], t["metrics"]) for t in store.trials("demo")]
[(0, 'completed', {'loss': 0.5})]
>>> store.records("demo")[0].value
0.5
>>> store.close()
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ...errors import InputError, StorageError
from ..trials.record import TrialRecord
from ..trials.status import Status
from . import claims, kept
from . import exploits as store_exploits
from . import workers as store_workers
from .reading import follow as store_follow
from .reading import reads as store_reads
from .report_ops import Compact, Drop, Reports, coalesce, paused_gc
from .row_updates import RowUpdate, merge_rows
from .schema import SCHEMA, SCHEMA_VERSION, open_readonly, open_writable, read_failure
from .values import real as _real
from .values import to_json as _json
from .write_queue import COMMIT_EVERY, WriteQueue

__all__ = ["Store", "COMMIT_EVERY", "SCHEMA", "SCHEMA_VERSION"]


class Store(WriteQueue):
    """A sweep store at ``path`` (``None``: in memory, for this process only).

    Opening checks that the file can be written; a store that cannot be is a
    :class:`~labkit.errors.StorageError` naming the path, raised here, before
    anything runs; one written by a newer labkit (a newer schema version) is
    an InputError naming it.  ``readonly`` opens an existing store to read it only.
    """

    def __init__(self, path: Any, readonly: bool = False):
        uri = None
        if path is None:
            uri = f"file:labkit-sweeps-{uuid.uuid4().hex}?mode=memory&cache=shared"
        elif not isinstance(path, (str, os.PathLike)):
            raise InputError(
                f"store must be a file path or None, got {type(path).__name__} {path!r:.60}",
                argument="store",
            )
        where = None if path is None else os.path.abspath(os.fspath(path))
        self.readonly = readonly and where is not None
        # in memory, this connection keeps the database alive (and is the writer's)
        conn = (
            open_readonly(where)
            if where is not None and self.readonly
            else open_writable(where, uri)
        )
        #: sweep -> where its checkpoints are and how many are kept (:mod:`.kept`)
        self._retained: dict[str, kept.Retained] = {}
        super().__init__(conn, where)

    # -- sweeps --------------------------------------------------------------------------

    def sweep(self, name: str) -> dict | None:
        """The sweep ``name`` as a dict (space, settings decoded), or None."""
        rows = self.read("SELECT * FROM sweeps WHERE name = ?", (name,))
        if not rows:
            return None
        row = rows[0]
        row["settings"] = json.loads(row["settings"] or "{}")
        pairs = json.loads(row.get("objectives") or "null")  # a version-4 store has none
        row["objectives"] = [tuple(p) for p in pairs] if pairs else [(row["metric"], row["mode"])]
        return row

    def claim(self, sweep: str, owner: str) -> dict | None:
        """Make ``owner`` the one sweep that runs ``sweep`` now; ``None``, or who holds it.

        One transaction (``BEGIN IMMEDIATE``: the write lock) reads and takes the
        claim, so of two sweeps starting with one name, in threads or processes
        sharing the file, exactly one gets it.  A claim whose process is gone
        (on this host) is taken over.
        """
        with self.connection() as conn:
            return claims.claim(conn, self.where, sweep, owner)

    def release(self, sweep: str, owner: str) -> None:
        """Give up ``owner``'s claim on ``sweep`` (queued: committed with the last writes)."""
        claims.disowned(owner)
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
        objectives: list | None = None,
    ) -> None:
        """Record a new sweep (committed before the call returns, unless ``now`` is False:
        then with the next commit, e.g. that of :meth:`add_trials`).  ``objectives``:
        ``[[name, mode], ...]`` of a sweep of several (``metric``, ``mode``: the first's)."""
        t = time.time()
        self.put(
            "INSERT INTO sweeps (name, space, metric, mode, seed, settings, created, updated, "
            "objectives) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (name, space, metric, mode, seed, json.dumps(settings), t, t,
             None if objectives is None else json.dumps(objectives)),
        )  # fmt: skip
        if now:
            self.flush()

    def update_sweep(self, name: str, settings: dict) -> None:
        """Replace the sweep's settings (queued); the names of its workers are kept."""
        self.call(store_workers.replaced(name, settings))

    def keep_worker_names(self, sweep: str, take: Callable[[], dict | None]) -> None:
        """Add ``take()`` (``{address: {"name", "nthreads"}}``, or None: none new) to the
        sweep's workers, asked once a commit on the writer (:mod:`.store_workers`)."""

        def keeper():
            identities = take()
            return store_workers.named(sweep, identities) if identities else None

        self.keep(keeper)

    def workers(self, sweep: str | None = None) -> dict[str, dict]:
        """The workers kept with ``sweep``: ``{address: {"name": ..., "nthreads": ...}}``;
        with no ``sweep``, ``{sweep: its workers}`` of every sweep that kept some."""
        if sweep is not None:
            row = self.sweep(sweep)
            return store_workers.workers_of(row["settings"]) if row else {}
        rows = self.read("SELECT name, settings FROM sweeps ORDER BY created")
        kept = {
            r["name"]: store_workers.workers_of(json.loads(r["settings"] or "{}")) for r in rows
        }
        return {name: workers for name, workers in kept.items() if workers}

    # -- trials --------------------------------------------------------------------------

    def add_trials(self, sweep: str, trials: list) -> None:
        """Pending trials ``[(id, config), ...]`` (queued: every later write of theirs
        follows them into the same or a later commit)."""
        rows = [(sweep, i, _json(config)) for i, config in trials]
        self.put(
            "INSERT OR IGNORE INTO trials (sweep, id, config) VALUES (?, ?, ?)", rows, many=True
        )

    def trial_config(self, sweep: str, trial: int, config: dict) -> None:
        """The configuration a search asked for ``trial`` as it starts (queued)."""
        self.call(RowUpdate(sweep, trial, {"config": _json(config)}))

    def trial_started(
        self, sweep: str, trial: int, attempts: int, worker: str, started: float, moves: int = 0
    ) -> None:
        """An execution of ``trial`` began (queued); ``moves``: those that ended as their
        worker left gracefully, so far."""
        values = {"status": "running", "attempts": attempts, "worker": worker, "moves": moves}
        values["ended"] = None
        self.call(RowUpdate(sweep, trial, values, first={"started": started}))

    def trial_reports(
        self, sweep: str, trial: int, attempt: int, reports: list, progress: tuple | None = None
    ) -> None:
        """Reports ``[(step, metrics, time), ...]`` of one trial; ``progress``: its
        ``(value, best, step)`` now.  Packed by the writer, not the caller: the
        reports of a trial that one commit carries become one row (:mod:`.report_ops`)."""
        self.call(Reports(sweep, trial, attempt, reports, progress))

    def drop_reports(self, sweep: str, trial: int, from_step: int) -> None:
        """Forget reports of ``trial`` from ``from_step`` on (a restart reports them again)."""
        self.call(Drop(sweep, trial, from_step))

    def trial_pending(self, sweep: str, trial: int) -> None:
        """An interrupted trial waits to run again (a resumed sweep)."""
        self.call(RowUpdate(sweep, trial, {"status": "pending", "ended": None}))

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
        objectives: dict | None = None,
        constraints: tuple | None = None,
        moves: int | None = None,
        reported: bool = True,
    ) -> None:
        """The end of ``trial`` (queued); ``moves`` None: its count as stored; ``reported``
        False: it never reported (no packs of its reports to make one)."""
        values = {
            "status": str(status),
            "metrics": None if metrics is None else _json(metrics),
            "value": _real(value),
            "best": _real(best),
            "step": _real(step),
            "error": error,
            "traceback": traceback,
            "reason": reason,
            "ended": ended,
            "objectives": None if objectives is None else _json(objectives),
            "constraints": None if constraints is None else _json(list(constraints)),
        }
        if moves is not None:
            values["moves"] = moves
        self.call(RowUpdate(sweep, trial, values))
        if reported and str(status) in _ENDED:  # its reports are read back as one pack from now on
            self.call(Compact(sweep, trial))

    def trial_ended(self, sweep: str, record: TrialRecord) -> None:
        """The end of a trial, as its record says (queued)."""
        self.trial_finished(
            sweep,
            record.id,
            record.status,
            record.metrics,
            record.value,
            record.best,
            record.step,
            record.error,
            record.traceback,
            record.reason,
            record.ended,
            record.objectives,
            record.constraints,
            record.moves,
            reported=bool(record.history),
        )
        if record.status.terminal:  # it runs no more: keep_best decides on its checkpoint
            self.retain(sweep)

    def records(self, sweep: str) -> list[TrialRecord]:
        """Every trial of ``sweep`` as a record with its history, in id order."""
        rows, reports = self._reading(store_reads.trials_and_reports, sweep)
        with paused_gc():
            return [
                TrialRecord(
                    history=reports.get(row[0], []), **dict(zip(_COLUMNS, row, strict=True))
                )
                for row in rows
            ]

    def trials(self, sweep: str) -> list[dict]:
        """Every trial of ``sweep`` in id order, configuration and metrics decoded."""
        rows = self._reading(store_reads.trial_rows, sweep)
        return [dict(zip(_COLUMNS, row, strict=True)) for row in rows]

    def reports(self, sweep: str) -> dict[int, list]:
        """``{trial: [(step, metrics, time), ...]}`` in the order they were reported."""
        return self._reading(store_reads.reports, sweep)

    def last_report_time(self, sweep: str) -> float | None:
        """When the newest stored report of ``sweep`` was made (None: none stored)."""
        return self._reading(store_reads.last_report_time, sweep)

    def reported_after(self, mark: tuple | None) -> tuple[tuple, set]:
        """The reports' mark now, and the trials ``(sweep, trial)`` with report rows written
        after ``mark`` (a hint: see :func:`.store_follow.reported_after`)."""
        return self._reading(store_follow.reported_after, mark)

    def reports_after(self, had: dict[tuple, tuple]) -> dict[tuple, tuple]:
        """``{(sweep, trial): (n, at, reports)}``: each trial's count, where its reports end,
        and those after the first ``had[key][0]`` (:func:`.store_follow.reports_after`)."""
        return self._reading(store_follow.reports_after, had)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside, in this thread, see the store as of one commit (the writer waits)."""
        with self.connection() as conn, store_reads.one_read(conn):
            yield

    def _reading(self, read: Callable[..., Any], *args: Any) -> Any:
        """``read(connection, *args)`` between the writer's commits; a StorageError if it fails."""
        with self.connection() as conn:
            try:
                return read(conn, *args)
            except sqlite3.Error as exc:
                raise StorageError(read_failure(exc), path=self.where) from exc
            except StorageError as exc:  # what was read is no store's (an unknown status)
                exc.locate(path=self.where)
                raise

    def _coalesce(self, batch: list) -> list:
        """A trial's reports that one commit carries are merged into one pack, and its row's
        changes into one UPDATE (:mod:`.row_updates`)."""
        return merge_rows(coalesce(batch))

    # -- early-stopping rules -------------------------------------------------------------

    def keep_rule_state(self, sweep: str, take: Callable[[], dict | None]) -> None:
        """Store ``take()`` as the sweep's rule state once a commit, when it gives one.

        ``take`` returns the state if it changed since it was last taken, else
        None; the writer asks it before each commit and when the store closes,
        so a state that grows with the sweep is built and encoded a few times a
        second at most, not at every decision.
        """

        def keeper():
            state = take()
            if state is None:
                return None
            return (
                "INSERT OR REPLACE INTO rule_states VALUES (?, ?, ?)",
                (sweep, _json(state), time.time()),
                False,
            )

        self.keep(keeper)

    def rule_state(self, sweep: str) -> dict | None:
        """What the sweep's rule kept, or None (none kept, or a store of schema version 0)."""
        tables = self.read("SELECT name FROM sqlite_master WHERE name = 'rule_states'")
        if not tables:  # a version 0 store opened to read only
            return None
        rows = self.read("SELECT state FROM rule_states WHERE sweep = ?", (sweep,))
        return json.loads(rows[0]["state"]) if rows else None

    # -- population-based training -------------------------------------------------------

    def exploit(self, sweep: str, record: Any) -> None:
        """An exploit of population-based training (queued; :mod:`.store_exploits`)."""
        self.put(store_exploits.INSERT, store_exploits.row_of(sweep, record))

    def exploits(self, sweep: str) -> list:
        """The exploits of ``sweep``, oldest first (:class:`~.exploits.ExploitRecord`)."""
        return store_exploits.read_exploits(self, sweep)

    # -- checkpoints ---------------------------------------------------------------------

    def keep_checkpoints(self, sweep: str, retained: kept.Retained) -> None:
        """Keep ``sweep``'s checkpoint references, its old ones deleted and
        ``keep_best`` applied at its place (:mod:`.kept`)."""
        self._retained[sweep] = retained

    def save_checkpoint(self, sweep: str, trial: int, seq: int, step, ref: Any) -> None:
        """Keep ``ref`` as the trial's latest checkpoint (queued); the one it replaces is deleted."""
        self.call(kept.save_op(sweep, trial, seq, step, ref, self._retained.get(sweep)))

    def retain(self, sweep: str) -> None:
        """Apply the sweep's ``keep_best`` to the trials that ended (queued)."""
        retained = self._retained.get(sweep)
        if retained is not None and retained.keep_best is not None:
            self.call(kept.retain_op(sweep, retained))

    def checkpoint(self, sweep: str, trial: int) -> tuple[Any, Any, int] | None:
        """``(ref, step, seq)`` of the trial's latest checkpoint, or None (none, or not kept).

        A checkpoint an older labkit kept here (inline or in a file) is written
        to the sweep's location first.
        """
        rows = self.checkpoint_rows(sweep, trial)
        for row in rows:
            row["read_data"] = lambda: bytes(
                self.read("SELECT data FROM checkpoints WHERE sweep = ? AND trial = ?",
                          (sweep, trial))[0]["data"]
            )  # fmt: skip

        def save(seq: int, step: Any, ref: Any) -> None:
            self.save_checkpoint(sweep, trial, seq, step, ref)

        return kept.latest(rows, trial, self._retained.get(sweep), save)

    def checkpoint_rows(self, sweep: str, trial: int | None = None) -> list[dict]:
        """The rows of ``sweep``'s checkpoints (one trial's), kept or dropped, without bytes."""
        names = {r["name"] for r in self.read("PRAGMA table_info(checkpoints)")}
        sql = f"SELECT {kept.selected(names)} FROM checkpoints WHERE sweep = ?"
        if trial is None:
            return self.read(sql, (sweep,))
        return self.read(sql + " AND trial = ?", (sweep, trial))

    def __repr__(self):
        return f"<labkit sweep store {self.path or 'in memory'}>"


_COLUMNS = store_reads.TRIAL_COLUMNS
_ENDED = frozenset(s.value for s in Status if s.ended)
