"""Which of a sweep's trials are drawn as lines, and the quantile band of all the others.

Up to :data:`LINES` trials every curve is a line; beyond, the running trials
and the best :data:`LEADERS` are, and every other curve goes into a band (the
10th, 25th, 50th, 75th and 90th percentiles a step, :class:`~.sweep_grid.CurveGrid`).
:class:`LineSplit` settles both from a sweep's changes since it last looked
(:meth:`~.sweep_tracker.SweepTracker.changes`): the new points of the
changed trials only, and the band computed again when the trials it covers
changed, at most every ``band_every`` seconds while trials run (at once when
none does).  A view that redraws on a timer (the dashboard) reads the lines
and the band from it; the notebook board's frames split the same way.

Examples
--------
>>> from labkit.events import SweepStarted, TrialFinished, TrialReported
>>> from labkit.experiments import TrialRecord
>>> from labkit.views.trackers.sweep_tracker import SweepTracker
>>> tracker = SweepTracker("r")
>>> rows = tuple({"id": i, "config": {}, "status": "completed", "value": float(i),
...               "history": [(0, {"acc": float(i)}, 0.0)]} for i in range(5))
>>> tracker(SweepStarted("r", "demo", "acc", "max", {}, rows, 1))
>>> split = LineSplit(lines=3, leaders=1)
>>> split.settle(tracker)
>>> sorted(split.drawn), split.band["q50"], split.band["n"]
([4], [1.5], 4)
>>> tracker(TrialReported("r", 5, (0,), ({"acc": 9.0},), 9.0, 9.0))   # running: a line
>>> split.settle(tracker)
>>> sorted(split.drawn), split.band["n"]
([4, 5], 4)
>>> tracker(TrialFinished("r", TrialRecord(id=5, config={}, status="completed", value=9.0)))
>>> split.settle(tracker)                             # 4 is no longer the best: in the band
>>> sorted(split.drawn), split.band["q90"], split.band["n"]
([5], [3.6], 5)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .sweep_grid import CurveGrid

__all__ = ["LineSplit", "Changing", "LINES", "LEADERS", "BAND_EVERY"]

#: Up to this many trials every curve is a line; beyond, the running and the best ones.
LINES = 300
#: The best trials drawn as lines beyond :data:`LINES`.
LEADERS = 10
#: Fewest seconds between two bands computed while trials run.
BAND_EVERY = 2.0


class Changing(Protocol):
    """What a split reads of a sweep (a :class:`~.sweep_tracker.SweepTracker` is one)."""

    def changes(self, since: int) -> tuple[int, list[int]]:
        """``(mark now, ids of the trials changed after mark since)``."""
        ...

    def curves(self, known: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int, list]]:
        """``trial: (epoch, start, points from start)`` for each ``trial: (epoch, n)`` held."""
        ...

    def state(self, trials: Iterable[int] | None = (), now: float | None = None) -> Any:
        """The counts, running ids (``running``), best ids (``leaders``) and ``total``."""
        ...


class LineSplit:
    """The lines and the band of one sweep, settled by :meth:`settle` (not thread-safe)."""

    def __init__(
        self,
        lines: int = LINES,
        leaders: int = LEADERS,
        band_every: float = BAND_EVERY,
        clock=time.monotonic,
    ):
        self.lines, self.leaders, self.band_every, self.clock = lines, leaders, band_every, clock
        self.grid = CurveGrid()
        self.mark = 0  # the sweep's mark this split is settled up to
        self.drawn: frozenset[int] = frozenset()  # the trials drawn as lines
        self.band: dict | None = None  # the band's quantiles (None: no trial in it)
        self.version = 0  # grows whenever the band does change
        self._stale = False
        self._at = -math.inf

    def settle(self, sweep: Changing) -> None:
        """Take in the trials of ``sweep`` changed since the last settling."""
        self.mark, changed = sweep.changes(self.mark)
        known = sweep.curves({t: self.grid.known(t) for t in changed})
        for trial, (epoch, start, points) in known.items():
            if self.grid.put(trial, epoch, start, points) and trial not in self.drawn:
                self._stale = True
        state = sweep.state(())
        if state.total <= self.lines:
            drawn = frozenset(t for t in self.grid.trials().tolist() if self.grid.known(t)[1])
        else:
            drawn = frozenset(state.running) | frozenset(state.leaders[: self.leaders])
        if drawn != self.drawn:
            self.drawn, self._stale = drawn, True
        paced = self.clock() - self._at >= self.band_every
        if self._stale and (paced or not state.running):
            self._settle_band(state.total)

    def _settle_band(self, total: int) -> None:
        band = None
        if total > self.lines:
            rows = ~self.grid.mask(self.drawn)
            band = self.grid.band(rows) if rows.any() else None
        if band != self.band:
            self.band, self.version = band, self.version + 1
        self._stale, self._at = False, self.clock()
