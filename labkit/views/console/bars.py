"""Console renderer: tqdm progress bars, one per phase, for terminals and logs.

Bars are tqdm's (its layout, smoothed rates and ETA); when they are drawn is
labkit's one throttle: as a :class:`~labkit.views.live.LiveView` its writer
thread redraws from :class:`ProgressTracker` snapshots at most
:data:`~labkit.views.writer.MAX_RATE` times a second whatever the event rate,
so tqdm's own ``mininterval`` is not used.  On a terminal each running phase
is a live bar; in a log (a stream that is not a terminal) each phase is one
line, written when it ends.

Examples
--------
>>> import io, labkit as lk
>>> out = io.StringIO()
>>> with lk.LocalScheduler() as s:
...     progress = ConsoleProgress(s, stream=out)
...     flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=1)])
...     flow.train([[np.eye(3), np.ones((3, 3)) + np.eye(3)]], scheduler=s)
...     progress.close()
>>> line = out.getvalue().splitlines()[0]
>>> line.startswith("node 0 PCA phase 0: 100%|") and "| 2/2 [" in line
True
"""

from __future__ import annotations

import sys
import time

import numpy as np  # noqa: F401  (used by the doctest)
from tqdm import tqdm

from ...errors import InputError
from ..live import LiveView
from ..trackers.progress import PhaseProgress, ProgressTracker
from ..trackers.subjects import check_source

__all__ = ["ConsoleProgress", "format_phase"]

_BAR = dict(ascii=True, unit="task", ncols=100)


def _what(p: PhaseProgress) -> str:
    return "execute" if p.node is None else f"node {p.node} {p.node_name} phase {p.phase}"


def _ending(p: PhaseProgress) -> str | None:
    """What a bar's postfix says of failures and the end: ``2 failed, FAILED`` etc."""
    words = [f"{p.failed} failed"] if p.failed else []
    if p.cancelled:
        words.append("cancelled")
    elif p.finished is not None and not p.ok:
        words.append("FAILED")
    return ", ".join(words) or None


def format_phase(p: PhaseProgress, now: float | None = None) -> str:
    """One line for a phase, as tqdm draws a bar: what, percent, bar, counts, time, rate."""
    if p.local:
        state = (
            "done"
            if p.finished and p.ok
            else "training locally"
            if p.finished is None
            else "cancelled"
            if p.cancelled
            else "FAILED"
        )
        return f"{_what(p)}: {state}"
    now = time.time() if now is None else now
    elapsed = max((p.finished or now) - p.started, 0.0)
    return tqdm.format_meter(
        p.done,
        p.total,
        elapsed,
        prefix=_what(p),
        postfix=_ending(p),
        rate=p.rate(now) or None,
        **_BAR,
    )


class ConsoleProgress(LiveView):
    """Prints progress lines for a scheduler's or run's events.

    A :class:`~labkit.views.live.LiveView`: it follows its source until the run
    ends or the scheduler shuts down (or :meth:`close`), printing the end of
    every phase; on a terminal a live tqdm bar per running phase.

    Parameters
    ----------
    source : Scheduler or Run
        Anything with ``subscribe(fn)``.
    stream : file
        Where lines go (standard error by default).
    max_rate : float, optional
        Most redraws per second (:data:`~labkit.views.writer.MAX_RATE`).
    """

    thread_name = "labkit-writer-console"

    def __init__(self, source, stream=None, max_rate: float | None = None):
        check_source(source, "ConsoleProgress")
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise InputError(
                f"stream must be a file (anything with write()), got "
                f"{type(stream).__name__} {stream!r:.60}",
                argument="stream",
            )
        self.stream = stream or sys.stderr
        self._printed: set = set()
        self._bars: dict = {}
        super().__init__(source, max_rate, tracker=ProgressTracker())
        self.start()

    def draw(self, phases) -> None:
        """Log: one line per phase at its end.  Terminal: a live tqdm bar per running phase."""
        now = time.time()
        interactive = getattr(self.stream, "isatty", lambda: False)()
        for p in phases:
            key = (p.run, p.node, p.phase)
            if key in self._printed:
                continue
            if interactive and not p.local:
                self._draw_bar(key, p)
            if p.finished is not None:
                bar = self._bars.pop(key, None)
                if bar is not None:
                    bar.close()
                else:
                    self.stream.write(format_phase(p, now) + "\n")
                self._printed.add(key)
        self.stream.flush()

    def _draw_bar(self, key, p: PhaseProgress) -> None:
        """Move phase ``key``'s live bar to ``p`` (tqdm smooths the rate and ETA)."""
        bar = self._bars.get(key)
        if bar is None:
            bar = self._bars[key] = tqdm(
                total=p.total,
                desc=_what(p),
                file=self.stream,
                mininterval=0,
                leave=True,
                dynamic_ncols=True,
                **{k: v for k, v in _BAR.items() if k != "ncols"},
            )
        if p.total is not None and bar.total != p.total:
            bar.total = p.total
        if p.done > bar.n:
            bar.update(p.done - bar.n)
        ending = _ending(p)
        if ending:
            bar.set_postfix_str(ending, refresh=False)
        bar.refresh()

    def on_stopped(self) -> None:
        """Phases still running when the view stopped: their bars end where they are."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()

    def close(self) -> None:
        """Stop listening and print what is left."""
        self.stop()
        self.on_stopped()
