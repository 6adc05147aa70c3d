"""The store's reports: written as packs of a trial's reports, merged, compacted and read back.

A report is not a row of its own: the writer merges the reports of a trial
that one commit carries into one row of ``report_packs`` (:func:`coalesce`;
a trial that reports from two threads' slots interleaved still gets one),
and when a trial ends its packs become one (:class:`Compact`), so a stored
sweep reads back with one blob a trial (:func:`read_reports`) in C, not a
JSON document a report.  The format of a pack is :mod:`.report_pack`'s.
"""

from __future__ import annotations

import gc
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .report_pack import pack, unpack
from .values import plain, real

__all__ = ["Reports", "Drop", "Compact", "coalesce", "read_reports", "pack_rows", "paused_gc"]

_INSERT = "INSERT INTO report_packs (sweep, trial, n, last, data) VALUES (?, ?, ?, ?, ?)"


class Reports:
    """Reports ``[(step, metrics, time), ...]`` of one attempt of a trial; its progress after them.

    ``progress`` is the trial's ``(value, best, step)`` (None: unchanged).
    """

    __slots__ = ("key", "attempt", "reports", "progress", "owned")

    def __init__(self, sweep: str, trial: int, attempt: int, reports: list, progress: Any):
        self.key = (sweep, trial)
        self.attempt, self.reports, self.progress = attempt, reports, progress
        self.owned = False  # whether ``reports`` is this write's own list (else the caller's)

    def merged(self, later: Reports) -> Reports:
        """These reports then ``later``'s, with the latest progress (appended in place once
        the list is this write's own: a trial's thousand reports in a commit cost linear time)."""
        merged = self
        if not self.owned:
            merged = Reports(*self.key, self.attempt, list(self.reports), self.progress)
            merged.owned = True
        merged.reports.extend(later.reports)
        if later.progress is not None:
            merged.progress = later.progress
        return merged

    def __call__(self, conn: sqlite3.Connection) -> None:
        sweep, trial = self.key
        if self.reports:
            conn.execute(
                _INSERT, _row(sweep, trial, self.reports, [self.attempt] * len(self.reports))
            )
        if self.progress is not None:
            conn.execute(
                "UPDATE trials SET value = ?, best = ?, step = ? WHERE sweep = ? AND id = ?",
                (*map(real, self.progress), sweep, trial),
            )


class Drop:
    """Forget a trial's reports from ``from_step`` on (a restart reports them again)."""

    __slots__ = ("key", "from_step")

    def __init__(self, sweep: str, trial: int, from_step: Any):
        self.key, self.from_step = (sweep, trial), from_step

    def __call__(self, conn: sqlite3.Connection) -> None:
        for rowid, data in _packs(conn, *self.key):
            reports, attempts = unpack(data, attempts=True)
            keep = [i for i, r in enumerate(reports) if not r[0] >= self.from_step]
            if len(keep) == len(reports):
                continue
            if not keep:
                conn.execute("DELETE FROM report_packs WHERE rowid = ?", (rowid,))
                continue
            reports, attempts = [reports[i] for i in keep], [attempts[i] for i in keep]
            conn.execute(
                "UPDATE report_packs SET n = ?, last = ?, data = ? WHERE rowid = ?",
                (*_row(*self.key, reports, attempts)[2:], rowid),
            )


class Compact:
    """Make a trial's packs one (it ended: it is read back as one blob from now on)."""

    __slots__ = ("key",)

    def __init__(self, sweep: str, trial: int):
        self.key = (sweep, trial)

    def __call__(self, conn: sqlite3.Connection) -> None:
        packs = _packs(conn, *self.key)
        if len(packs) < 2:
            return
        reports: list = []
        attempts: list = []
        for _, data in packs:
            more, more_attempts = unpack(data, attempts=True)
            reports += more
            attempts += more_attempts
        conn.execute("DELETE FROM report_packs WHERE sweep = ? AND trial = ?", self.key)
        conn.execute(_INSERT, _row(*self.key, reports, attempts))


def coalesce(batch: list) -> list:
    """``batch`` with each trial's consecutive :class:`Reports` of one attempt merged into one.

    A merged write takes the place of the last one it merges: a :class:`Drop`
    or :class:`Compact` of the trial (which come after reports they follow)
    ends the run of merging, so every write of a trial keeps its order.
    """
    out: list = []
    runs: dict[tuple, int] = {}  # trial -> where its merged reports are in ``out``
    for op in batch:
        if isinstance(op, Reports):
            at = runs.get(op.key)
            if at is not None and out[at].attempt == op.attempt:
                op, out[at] = out[at].merged(op), None
            runs[op.key] = len(out)
        elif isinstance(op, (Drop, Compact)):
            runs.pop(op.key, None)
        out.append(op)
    return [op for op in out if op is not None]


def read_reports(conn: sqlite3.Connection, sweep: str) -> dict[int, list]:
    """``{trial: [(step, metrics, time), ...]}`` of ``sweep``, each in report order."""
    rows = conn.execute(
        "SELECT trial, data FROM report_packs WHERE sweep = ? ORDER BY trial, rowid", (sweep,)
    ).fetchall()
    out: dict[int, list] = {}
    with paused_gc():
        for trial, data in rows:
            reports = unpack(data)
            if trial in out:
                out[trial].extend(reports)
            else:
                out[trial] = reports
    return out


def pack_rows(rows: list) -> Iterator[tuple]:
    """Rows for ``report_packs`` from rows ``(sweep, trial, step, metrics, time, attempt)``
    (decoded, in report order: a store of schema version 1 migrated)."""
    sweep, trial = None, None
    reports: list = []
    attempts: list = []
    for row_sweep, row_trial, step, metrics, t, attempt in rows:
        if (row_sweep, row_trial) != (sweep, trial):
            if reports:
                yield _row(sweep, trial, reports, attempts)
            sweep, trial, reports, attempts = row_sweep, row_trial, [], []
        reports.append((step, metrics, t))
        attempts.append(attempt)
    if reports:
        yield _row(sweep, trial, reports, attempts)


@contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection while many objects are made that hold no cycles.

    Reading a sweep makes a few objects a report; the collector, run every
    few hundred of them, would look at every one made before again and
    again (five times the reading itself at a hundred thousand reports).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _row(sweep: Any, trial: Any, reports: list, attempts: list) -> tuple:
    """A row of ``report_packs``: sweep, trial, how many, when the last was made, the pack."""
    return (sweep, trial, len(reports), _last_time(reports), pack(reports, attempts, plain))


def _last_time(reports: list) -> Any:
    last = reports[-1][2]
    return last if isinstance(last, (int, float)) else None


def _packs(conn: sqlite3.Connection, sweep: str, trial: int) -> list:
    return conn.execute(
        "SELECT rowid, data FROM report_packs WHERE sweep = ? AND trial = ? ORDER BY rowid",
        (sweep, trial),
    ).fetchall()
