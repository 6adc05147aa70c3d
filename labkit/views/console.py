"""Console renderer: one progress line per phase, for terminals and logs.

Draws :class:`ProgressTracker` snapshots from one :class:`~labkit.views.writer.Writer`
thread, at most :data:`~labkit.views.writer.MAX_RATE` times a second whatever
the event rate, and once more when closed.

Examples
--------
>>> import io, labkit as lk
>>> out = io.StringIO()
>>> with lk.LocalScheduler() as s:
...     progress = ConsoleProgress(s, stream=out)
...     flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=1)])
...     flow.train([[np.eye(3), np.ones((3, 3)) + np.eye(3)]], scheduler=s)
...     progress.close()
>>> "node 0 PCA phase 0" in out.getvalue() and "2/2" in out.getvalue()
True
"""

from __future__ import annotations

import sys
import time

import numpy as np  # noqa: F401  (used by the doctest)

from .progress import PhaseProgress, ProgressTracker
from .writer import Writer

__all__ = ["ConsoleProgress", "format_phase"]


def format_phase(p: PhaseProgress, now: float | None = None) -> str:
    """One line: what, a bar, counts, rate and ETA or the time taken."""
    what = "execute" if p.node is None else f"node {p.node} {p.node_name} phase {p.phase}"
    if p.local:
        state = "done" if p.finished else "training locally"
        return f"{what}: {state}"
    total = p.total if p.total is not None else "?"
    frac = p.fraction or 0.0
    bar = "#" * int(20 * frac) + "." * (20 - int(20 * frac))
    line = f"{what}: [{bar}] {p.done}/{total}"
    if p.failed:
        line += f" failed {p.failed}"
    line += f"  {p.rate(now):.1f} tasks/s"
    if p.finished is not None:
        line += f"  {p.finished - p.started:.2f} s" + ("" if p.ok else "  FAILED")
    elif p.eta(now) is not None:
        line += f"  ETA {p.eta(now):.1f} s"
    return line


class ConsoleProgress:
    """Prints progress lines for a scheduler's or run's events.

    Parameters
    ----------
    source : Scheduler or Run
        Anything with ``subscribe(fn)``.
    stream : file
        Where lines go (standard error by default).
    max_rate : float, optional
        Most redraws per second (:data:`~labkit.views.writer.MAX_RATE`).
    """

    def __init__(self, source, stream=None, max_rate: float | None = None):
        self.tracker = ProgressTracker()
        self.stream = stream or sys.stderr
        self._printed: set = set()
        # Lines are written by one writer thread, never by the engine's threads.
        self._writer = Writer(self.tracker, self._draw, max_rate, name="labkit-writer-console")
        self._unsubscribe = source.subscribe(self._on_event)

    def _on_event(self, event) -> None:
        self.tracker(event)
        self._writer.poke()

    def _draw(self, phases) -> None:
        """Print each finished phase once; on a terminal, redraw the running one."""
        now = time.time()
        interactive = getattr(self.stream, "isatty", lambda: False)()
        for p in phases:
            key = (p.run, p.node, p.phase)
            if key in self._printed:
                continue
            if p.finished is not None:
                self.stream.write(("\r" if interactive else "") + format_phase(p, now) + "\n")
                self._printed.add(key)
            elif interactive:
                self.stream.write("\r" + format_phase(p, now))
        self.stream.flush()

    def close(self) -> None:
        """Stop listening and print what is left."""
        self._unsubscribe()
        self._writer.stop()
