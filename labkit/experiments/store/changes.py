"""What changed in a sweep store since the last look: new sweeps, changed trials, new reports.

A dashboard serving a store (``labkit dashboard --store STORE``) follows the
sweeps another process writes there.  :class:`StoreChanges` reads each
sweep whole once (:meth:`Store.records`), and after that only what changed,
as of one commit (:meth:`Store.snapshot`).  Trials are found by markers,
each an index of the store: their ``rowid`` (new ones), their status (the
running ones) and their end time (those that ended since the last look, with
a margin for commits that come late).  Reports are packed by the store
(several packs a running trial, one once it ended; rewritten when it ends or
restarts), so they are followed by count: a look keeps how many reports of
each trial it returned, and asks the store (:mod:`.store_follow`) which
trials have packs written since its last look (a hint: a compaction frees
row ids that a later pack takes again), and for the trials so named or read
above, the reports after those it returned; of a trial that ran all along,
only the packs after the last one read.  A trial that restarted (its
attempts grew, or it has fewer reports than returned) has its reports
returned again whole, as a restart drops the reports after its checkpoint.
So a look costs what changed since the last one, plus the running trials,
not the store's size nor a running trial's history.

Examples
--------
>>> from labkit.experiments.store.database import Store
>>> store = Store(None)
>>> store.create_sweep("demo", '{"space": {}}', "loss", "min", 0, {}, now=False)
>>> store.add_trials("demo", [(0, {"x": 1})]); store.flush()
>>> changes = StoreChanges(store)
>>> first = changes.look()
>>> [s["name"] for s in first.sweeps], [r["id"] for r in first.loaded["demo"]]
(['demo'], [0])
>>> store.trial_reports("demo", 0, 1, [(0, {"loss": 0.5}, 1.0)]); store.flush()
>>> changes.look().reports
[('demo', 0, 0, {'loss': 0.5})]
>>> store.close()
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from .report_ops import paused_gc

__all__ = ["StoreChanges", "StoreLook", "MARGIN"]

#: Seconds of trial ends read again at each look (a commit may land after a later one's).
MARGIN = 5.0

_SIGNATURE = (
    "status",
    "attempts",
    "moves",
    "value",
    "best",
    "step",
    "worker",
    "ended",
    "error",
    "reason",
)


@dataclass
class StoreLook:
    """One look at a store: what is new since the look before."""

    sweeps: list = field(default_factory=list)  # new sweeps: name, metric, mode, space, rule
    loaded: dict = field(default_factory=dict)  # a new sweep's name -> every trial, with history
    trials: list = field(default_factory=list)  # trials (rows, with "sweep") that changed
    reports: list = field(default_factory=list)  # new reports: (sweep, trial, step, metrics)
    replaced: dict = field(default_factory=dict)  # (sweep, trial) -> all its reports (restarted)
    running: dict = field(default_factory=dict)  # each sweep's name -> whether it runs now


class StoreChanges:
    """Looks at ``store`` (a :class:`~labkit.experiments.store.database.Store`, read-only is enough)."""

    def __init__(self, store: Any):
        self.store = store
        self._names: list[str] = []
        self._trial_mark = -1
        self._report_mark: tuple | None = None  # the store's, from Store.reported_after
        self._since: float | None = None
        self._seen: dict[tuple, tuple] = {}  # (sweep, trial) -> its signature, as last returned
        # (sweep, trial) -> how many of its reports were returned, and where they end
        self._had: dict[tuple, tuple[int, Any]] = {}
        self._running: set[tuple] = set()

    def look(self) -> StoreLook:
        """What changed since the last look (the first: every sweep whole)."""
        look = StoreLook()
        now = time.time()
        with self.store.snapshot():  # trials, reports and new sweeps as of one commit
            trial_mark = self.store.read("SELECT COALESCE(MAX(rowid), 0) AS t FROM trials")[0]["t"]
            report_mark, reported = self.store.reported_after(self._report_mark)
            if self._since is not None:
                read, restarted = self._changed_trials(look)
                self._new_reports(look, read | reported, restarted)
            for name in self.store.sweep_names():
                if name not in self._names:
                    self._load(name, look)
            look.running = self._claimed()
        self._trial_mark, self._report_mark = trial_mark, report_mark
        self._since = now
        return look

    # -- the first look at a sweep ---------------------------------------------------------------

    def _load(self, name: str, look: StoreLook) -> None:
        row = self.store.sweep(name)
        if row is None:
            return
        self._names.append(name)
        space = json.loads(row["space"] or "{}")
        look.sweeps.append(
            {
                "name": name,
                "metric": row["metric"],
                "mode": row["mode"],
                "space": space.get("space", {}) if isinstance(space, dict) else {},
                "rule": (row.get("settings") or {}).get("early_stop"),
                "created": row.get("created"),
                "objectives": row.get("objectives"),  # [(name, mode), ...]: the Pareto view's
            }
        )
        rows = []
        with paused_gc():  # many small objects, no cycles
            for record in self.store.records(name):
                r = record.row(history=False)
                r["history"] = list(record.history)  # read for this look: no copy of each report
                r["status"] = str(r["status"])
                rows.append(r)
                self._remember(name, r)
                self._had[(name, r["id"])] = (len(r["history"]), None)
        look.loaded[name] = rows

    # -- later looks ------------------------------------------------------------------------------

    def _changed_trials(self, look: StoreLook) -> tuple[set, set]:
        """Trials whose row changed, into ``look``; the trials read, and those that restarted."""
        since = (self._since or 0.0) - MARGIN
        rows = self.store.read(  # a union, not an OR: each part takes its index (the schema's)
            "SELECT * FROM trials WHERE rowid > ? "
            "UNION SELECT * FROM trials WHERE status = 'running' "
            "UNION SELECT * FROM trials WHERE ended >= ?",
            (self._trial_mark, since),
        )
        keys = {(r["sweep"], r["id"]) for r in rows}
        for sweep, trial in self._running - keys:  # ran at the last look, and neither now nor ended
            rows += self.store.read(
                "SELECT * FROM trials WHERE sweep = ? AND id = ?", (sweep, trial)
            )
        read, restarted = set(), set()
        for r in rows:
            key = (r["sweep"], r["id"])
            if r["sweep"] not in self._names:
                continue  # a sweep seen for the first time: loaded whole
            read.add(key)
            old = self._seen.get(key)
            for name in ("value", "best", "step"):
                r[name] = _unreal(r[name])
            if old is not None and old == _signature(r):
                continue
            r["config"] = json.loads(r["config"]) if r["config"] else {}
            r["metrics"] = json.loads(r["metrics"]) if r["metrics"] else None
            for name in ("objectives", "constraints"):  # version 5's (absent before)
                r[name] = json.loads(r[name]) if r.get(name) else None
            r["moves"] = r.get("moves") or 0  # a store read as an older labkit wrote it: none
            if old is not None and (old[1] or 0) > 0 and (r["attempts"] or 0) > old[1]:
                restarted.add(key)  # it ran before and runs again: a restart dropped reports
            self._remember(r["sweep"], r)
            look.trials.append(r)
        return read, restarted

    def _new_reports(self, look: StoreLook, keys: set, restarted: set) -> None:
        """The reports of ``keys`` not returned yet, into ``look`` (whole where restarted)."""
        had = {}
        for key in keys:
            if key[0] not in self._names:
                continue
            n, at = (0, None) if key in restarted else self._had.get(key, (0, None))
            # a trial that runs now, and did not restart, only grew since the last look
            had[key] = (n, at if key in self._running else None)
        got = self.store.reports_after(had)
        for key in sorted(got, key=lambda k: (self._names.index(k[0]), k[1])):
            n, at, reports = got[key]
            if key in restarted or n < had[key][0]:
                look.replaced[key] = [(step, metrics) for step, metrics, *_ in reports]
            else:
                look.reports += [(*key, step, metrics) for step, metrics, *_ in reports]
            self._had[key] = (n, at)

    def _remember(self, sweep: str, row: dict) -> None:
        key = (sweep, row["id"])
        self._seen[key] = _signature(row)
        if row["status"] == "running":
            self._running.add(key)
        else:
            self._running.discard(key)

    def _claimed(self) -> dict[str, bool]:
        """Each sweep's name -> whether a live process holds it (it runs now)."""
        held = {r["sweep"]: r for r in self.store.read("SELECT sweep, host, pid FROM owners")}
        return {name: name in held and _alive(held[name]) for name in self._names}


def _signature(row: dict) -> tuple:
    """What a look compares of a trial (NaN as a word: equal to itself)."""
    return tuple(
        str(v) if k == "status" or (isinstance(v, float) and v != v) else v
        for k, v in ((k, row.get(k)) for k in _SIGNATURE)
    )


def _unreal(value):
    """A REAL column's value back (the store keeps NaN as the text 'NaN')."""
    return float(value) if isinstance(value, str) else value


def _alive(owner: dict) -> bool:
    """Whether the process holding a claim lives (one on another host: taken as alive)."""
    if owner.get("host") != socket.gethostname() or owner.get("pid") is None:
        return True
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
