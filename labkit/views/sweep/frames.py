"""A sweep board's frames: the whole state (``paint``), then only what changed (``delta``).

:class:`FrameEncoder` reads a :class:`~.sweep_tracker.SweepTracker` and writes
the bodies of the board protocol's frames (see ``BRIEF``: one message a frame):

- ``rows``: columnar (:class:`~.sweep_words.SweepWords`), every trial in a
  paint, in a delta only the trials changed since the last frame;
- ``curves``: lines and a band.  Up to ``lines`` (300) trials every trial is
  a line; beyond, the running trials and the best ``k`` (10) are lines and the
  others a quantile band (q10..q90 a step, :class:`~.sweep_grid.CurveGrid`),
  recomputed when the trials it covers change and at most every
  ``band_every`` seconds.  A delta carries the new points of lines the page
  has, the whole curve of a new line, ``drop`` for lines that went;
- ``counts``, ``best``, ``total``, ``load``, ``waiting`` (the sweep waits for
  workers: its cluster has none) and ``meta`` (when it changed);
- ``workers``: the sweep's usable workers over time (:class:`~.workers.WorkerSteps`,
  when the encoder has one and there are steps), a delta's new steps only.  A row's
  ``moves`` counts how often its trial's worker left under it (it moved).

A frame costs what changed: the tracker keeps counts, leaders and running
trials as events come, and each frame reads only the changed trials' rows and
their new points.  Numbers are rounded to 6 significant digits; NaN and
infinities are null.  :meth:`FrameEncoder.brush` answers a page's brush: the
lines and band over the trials whose parameters and latest value fall in the
given ranges (a category's range is over its labels' indexes).  No UI
library is imported here.

Examples
--------
>>> from labkit.events import SweepStarted, TrialReported
>>> tracker = SweepTracker("r")
>>> tracker(SweepStarted("r", "demo", "acc", "max", {"x": {"type": "uniform", "lo": 0, "hi": 1}},
...                      ({"id": 0, "config": {"x": 0.5}},), 1))
>>> frames = FrameEncoder(tracker)
>>> paint = frames.paint()
>>> paint["kind"], paint["seq"], paint["rows"]["id"], paint["meta"]["params"]
('paint', 1, [0], ['x'])
>>> tracker(TrialReported("r", 0, (0, 1), ({"acc": 0.5}, {"acc": float("inf")}), 0.7, 0.7))
>>> delta = frames.delta(tracker.take())
>>> delta["base"], delta["rows"]["latest"], delta["curves"]["lines"]
(1, [0.7], {'0': [[0, 0.5], [1, None]]})
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from ..trackers.sweep_grid import CurveGrid, r6
from ..trackers.sweep_lines import (  # one rule for the board and the dashboard
    BAND_EVERY,
    LEADERS,
    LINES,
)
from ..trackers.sweep_rows import ok
from ..trackers.sweep_tracker import SweepChanges, SweepState, SweepTracker
from .brush import TrialColumns, pick
from .pareto import ParetoFrames
from .words import SweepWords
from .workers import WorkerSteps

__all__ = ["FrameEncoder", "LINES", "LEADERS", "BAND_EVERY"]

#: Most points of one line sent at once (a longer curve is thinned, its last point kept).
MOST_POINTS = 400


class FrameEncoder:
    """Turns a tracker's state into the board's ``paint`` and ``delta`` frames, with their seq.

    Parameters
    ----------
    tracker : SweepTracker
        The sweep's tracker (its ``take`` is this encoder's alone).
    lines : int
        Most trials drawn each as a line.
    band_every : float
        Fewest seconds between two bands in deltas.
    clock : callable
        Seconds (``time.monotonic``), for the band's pace.
    names : callable
        A worker's name on the page from its address (a board's
        :class:`~.device_names.DeviceNames`: ``worker 0 (this process, 2 threads)``).
    """

    def __init__(
        self,
        tracker: SweepTracker,
        lines: int = LINES,
        band_every: float = BAND_EVERY,
        clock=time.monotonic,
        names=str,
    ):
        self.tracker, self.lines, self.band_every, self.clock = tracker, lines, band_every, clock
        self.names = names
        self.seq = 0
        self.words = SweepWords()
        self.grid = CurveGrid()
        self.columns = TrialColumns()
        self._lines: dict[int, tuple[int, int]] = {}  # on the page: trial -> (epoch, points)
        self._meta: dict | None = None  # as last sent
        self._total = 0
        self._band: dict | None = None  # as last computed
        self._band_stale = True
        self._band_at = -math.inf
        self._lock = threading.RLock()
        self.pareto: ParetoFrames | None = None  # a several-objective sweep's front (.pareto)
        self.workers: WorkerSteps | None = None  # the workers over time (a board's: .workers)

    # -- frames ---------------------------------------------------------------------------------

    def paint(self, kept: bool = False) -> dict:
        """The whole state, as the next frame (``kind: paint``).

        ``kept``: the paint a board keeps once its sweep ended (a saved notebook's);
        it shows what the last frame sent left on the page, under that frame's seq.
        """
        with self._lock:
            self.tracker.take()  # a paint reads everything: what changed is in it
            state = self.tracker.state(None)
            self._absorb(state, words=True)
            drawn = self._drawn(state)
            known = self.tracker.curves({t: (-1, 0) for t in drawn})
            self._lines = {
                t: (epoch, start + len(points)) for t, (epoch, start, points) in known.items()
            }
            lines = {str(t): _points(p) for t, (_, _, p) in known.items() if p}
            self._pace_band(drawn, state.total, now=True)
            self._meta = self._named_meta()
            self.seq += 0 if kept else 1
            parts = {"pareto": self.pareto.paint()} if self.pareto is not None else {}
            steps = self.workers.paint() if self.workers is not None else None
            if steps is not None:  # the workers over time: only a sweep told of its workers
                parts["workers"] = steps
            return {
                "kind": "paint",
                "seq": self.seq,
                "meta": self._meta,
                "rows": self.words.columns(state.rows),
                "curves": {"lines": lines, "band": self._band},
                **parts,
                **self._status(state),
            }

    def named(self) -> int:
        """The seq of a paint that names a frame the page holds (a kept one): the next."""
        with self._lock:
            self.seq += 1
            return self.seq

    def delta(self, changes: SweepChanges, final: bool = False) -> dict:
        """What changed since the last frame (``kind: delta``); a paint where a curve was cut
        back, or where the sweep's own words changed.

        ``changes`` is the tracker's :meth:`~.SweepTracker.take`; ``final``: the
        last frame (the band is brought up to date, whatever its pace).
        """
        with self._lock:
            if changes.sweep and self.seq:  # its parameters or its mode anew: every row again
                return self.paint()
            state = self.tracker.state(sorted(changes.trials))
            self._absorb(state, words=self.words.name is None)
            drawn = self._drawn(state)
            curves = self._line_changes(drawn, changes.trials)
            if curves is None:  # a line the page holds went back in steps (a restart)
                return self.paint()
            if self._pace_band(drawn, state.total, now=final):
                curves["band"] = self._band
            self.seq += 1
            frame = {"kind": "delta", "seq": self.seq, "base": self.seq - 1}
            meta = self._named_meta()
            if meta != self._meta:
                frame["meta"] = self._meta = meta
            if state.rows:
                frame["rows"] = self.words.columns(state.rows)
            if any(curves.values()) or "band" in curves:
                frame["curves"] = curves
            if self.pareto is not None and (pareto := self.pareto.delta()) is not None:
                frame["pareto"] = pareto
            if self.workers is not None and (steps := self.workers.delta()) is not None:
                frame["workers"] = steps
            return {**frame, **self._status(state)}

    def brush(self, ranges: dict) -> dict:
        """``{"lines", "band"}`` over the trials inside every range (none: the frames' own).

        An unknown axis or a range that is not two numbers is an InputError.
        """
        with self._lock:
            if not ranges:  # the frames' curves, as the page holds them
                known = self.tracker.curves({t: (-1, 0) for t in self._lines})
                lines = {
                    str(t): _points(p[: self._lines[t][1]])
                    for t, (epoch, _, p) in known.items()
                    if epoch == self._lines[t][0] and self._lines[t][1]
                }
                return {"lines": lines, "band": self._band}
            rows = self.columns.select(ranges)
            drawn, band = pick(self.columns, rows, self.lines, self.tracker.leaders)
            trials = self.grid.trials()
            known = self.tracker.curves({int(t): (-1, 0) for t in trials[drawn]})
            lines = {str(t): _points(p) for t, (_, _, p) in known.items() if p}
            return {"lines": lines, "band": self.grid.band(band) if band.any() else None}

    # -- the parts --------------------------------------------------------------------------------

    def _absorb(self, state: SweepState, words: bool) -> None:
        """Take the rows of ``state`` (the changed trials; all in a paint): their labels,
        columns and new points; ``words``: the sweep's own words too."""
        t = self.tracker
        if words:
            self.words.sweep(t.name, t.metric, t.mode, t.rule)
            self.words.describe(t.space)
        self.words.absorb(state.rows)
        if self.pareto is not None:
            self.pareto.fold(state.rows)
        for r in state.rows:
            row = self.grid.row(r.id)
            ranked = str(r.status) in ("completed", "stopped") and ok(r.value)
            values = {p: self.words.cell(p, r.config.get(p)) for p in self.words.params}
            values.update(
                value=r.value,  # larger ranks better: a "min" sweep's values negated
                rank=(r.value if t.mode == "max" else -r.value) if ranked else None,
                running=str(r.status) == "running",
            )
            self.columns.set(row, values)
        # the rows' curves: in a paint every trial's (what a delta that gave way to it took
        # is not lost), in a delta the changed ones'
        known = t.curves({r.id: self.grid.known(r.id) for r in state.rows})
        for trial, (epoch, start, points) in known.items():
            if self.grid.put(trial, epoch, start, points) and trial not in self._lines:
                self._band_stale = True

    def _drawn(self, state: SweepState) -> set[int]:
        """The trials drawn as lines now."""
        if state.total <= self.lines:
            return set(self.grid.trials().tolist())
        return set(state.running) | set(state.leaders)

    def _line_changes(self, drawn: set[int], changed: frozenset) -> dict | None:
        """``{"lines": new points, "drop": [...]}`` for the page (None: a line was cut back)."""
        held = self._lines
        asked = {t: held.get(t, (-1, 0)) for t in drawn if t not in held or t in changed}
        known = self.tracker.curves(asked)
        lines = {}
        for trial, (epoch, start, points) in known.items():
            if trial in held and start == 0 and held[trial][1] > 0:
                return None
            held[trial] = (epoch, start + len(points))
            if points:
                lines[str(trial)] = _points(points)
        gone = [t for t in held if t not in drawn]
        if gone:
            self._band_stale = True
        drop = [t for t in gone if held.pop(t)[1] > 0]
        return {"lines": lines, "drop": drop} if drop else {"lines": lines}

    def _pace_band(self, drawn: set[int], total: int, now: bool) -> bool:
        """Compute the band again if it is stale and it is time (or ``now``); whether it was."""
        if total != self._total:
            self._total, self._band_stale = total, True
        if not self._band_stale or (not now and self.clock() - self._band_at < self.band_every):
            return False
        band = None
        if total > self.lines:
            rows = ~self.grid.mask(drawn)
            band = self.grid.band(rows) if rows.any() else None
        self._band, self._band_stale, self._band_at = band, False, self.clock()
        return True

    def _named_meta(self) -> dict:
        """The frame's ``meta``, its workers by the names the page shows."""
        meta = self.words.meta()
        meta["workers"] = [self.names(w) for w in meta["workers"]]
        return meta

    def _status(self, state: SweepState) -> dict:
        """The frame's counts, best, total, whether it waits for workers, the workers' load."""
        return {
            "counts": dict(state.counts),
            "waiting": state.waiting,
            "best": state.best,
            "total": state.total,
            "load": [
                {
                    "name": self.names(w.name),
                    "running": w.running,
                    "done": w.done,
                    "per_s": r6(w.reports_per_s),
                }
                for w in state.workers
            ],
        }


def _points(points: list) -> list:
    """A curve as ``[[step, value], ...]``, at most MOST_POINTS (thinned evenly, the last kept)."""
    if len(points) > MOST_POINTS:
        keep = np.linspace(0, len(points) - 1, MOST_POINTS).round().astype(int)
        points = [points[i] for i in np.unique(keep)]
    return [[r6(s), r6(v)] for s, v in points]
