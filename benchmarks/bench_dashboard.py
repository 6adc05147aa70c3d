"""What one tick of the dashboard's sweep board costs, at 1,000 and at 10,000 trials.

Run ``python benchmarks/bench_dashboard.py`` (about half a minute on 2 cores)
or ``--quick``.  It prints timings and sizes side by side; it never asserts.

For each size, one sweep's events are folded into a
:class:`~labkit.views.trackers.sweep_tracker.SweepTracker` as the dashboard folds them
(``SweepStarted`` with every trial, then each trial started, 30 reports and
its end; the last ``slots`` trials still running), and a
:class:`~labkit.views.bokeh.sweep_plots.SweepPlots` draws it into a real Bokeh
document.  Then a steady sweep goes on: each tick, every running trial
reports one step and two of them end while two pending ones start (the
events of about a quarter of a second of a sweep of short trials), and the
board sends what changed.  A tick's time is the CPU the tick took plus
serialising its changes into the PATCH-DOC message a browser session would
get (Bokeh's protocol), whose size is the tick's bytes.  The first paint's
time and bytes are printed too, and, for contrast, what a tick would cost
if it painted the whole sweep again (what the old dashboard did).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bokeh.document import Document  # noqa: E402
from bokeh.protocol import Protocol  # noqa: E402

from labkit.events import SweepStarted, TrialFinished, TrialReported, TrialStarted  # noqa: E402
from labkit.experiments import TrialRecord  # noqa: E402
from labkit.views.bokeh.sweep_plots import SweepPlots  # noqa: E402
from labkit.views.trackers.sweep_tracker import SweepTracker  # noqa: E402

RUN = "sweep-bench"
SPACE = {"lr": {"type": "loguniform", "lo": 1e-4, "hi": 1e-1},
         "width": {"type": "randint", "lo": 16, "hi": 256}}
STEPS = 30


class _Shelf:
    """One tracker, as a dashboard's shelf hands it to the board."""

    def __init__(self, feed):
        self.feed = feed

    def refresh(self):
        pass

    def feeds(self):
        return [self.feed]


def _config(i: int) -> dict:
    return {"lr": 10 ** (-4 + 3 * ((i * 7919) % 1000) / 1000), "width": 16 + (i * 31) % 240}


def _loss(i: int, step: int) -> float:
    return 0.2 + ((i * 104729) % 1000) / 1000 + 1.0 / (step + 1)


def _run(feed, i: int, steps: range, end: bool) -> None:
    if steps.start == 0:
        feed(TrialStarted(RUN, i, _config(i), "inproc://10.0.0.1/1/2 #0", time=time.time()))
    for step in steps:
        loss = _loss(i, step)
        feed(TrialReported(RUN, i, (step,), ({"loss": loss},), loss, loss))
    if end:
        loss = _loss(i, steps.stop - 1)
        feed(TrialFinished(RUN, TrialRecord(id=i, config=_config(i), status="completed",
                                            value=loss, best=loss, step=steps.stop - 1,
                                            attempts=1, worker="inproc://10.0.0.1/1/2 #0")))


def _message_bytes(events) -> int:
    if not events:
        return 0
    msg = Protocol().create("PATCH-DOC", events)
    return len(msg.header_json) + len(msg.content_json) + sum(
        len(b.data) if hasattr(b, "data") else len(b) for b in msg.buffers)


def measure(n: int, slots: int, ticks: int) -> dict:
    feed = SweepTracker(RUN)
    feed(SweepStarted(RUN, "bench", "loss", "min", SPACE,
                      tuple({"id": i, "config": _config(i)} for i in range(n)), slots))
    done = n - slots - 2 * ticks
    for i in range(done):
        _run(feed, i, range(STEPS), True)
    running = {i: 1 for i in range(done, done + slots)}
    for i in running:
        _run(feed, i, range(1), False)
    doc, events = Document(), []
    plots = SweepPlots(_Shelf(feed))
    doc.add_root(plots.layout)
    doc.on_change(events.append)
    c0 = time.thread_time()
    plots.tick()
    paint_s = time.thread_time() - c0
    paint_bytes = _message_bytes(events)
    events.clear()
    next_trial = done + slots
    tick_s, tick_bytes = [], []
    for _ in range(ticks):
        for i in list(running):                       # a report each
            _run(feed, i, range(running[i], running[i] + 1), False)
            running[i] += 1
        for i in list(running)[:2]:                   # two end, two start
            _run(feed, i, range(running.pop(i), STEPS), True)
        for i in (next_trial, next_trial + 1):
            _run(feed, i, range(1), False)
            running[i] = 1
        next_trial += 2
        c0 = time.thread_time()
        plots.tick()
        size = _message_bytes(events)
        tick_s.append(time.thread_time() - c0)
        tick_bytes.append(size)
        events.clear()
    fresh, fresh_events = Document(), []
    again = SweepPlots(_Shelf(feed))
    fresh.add_root(again.layout)
    fresh.on_change(fresh_events.append)
    c0 = time.thread_time()
    again.tick()
    repaint_bytes = _message_bytes(fresh_events)
    repaint_s = time.thread_time() - c0
    return {"n": n, "paint_ms": 1000 * paint_s, "paint_kb": paint_bytes / 1024,
            "tick_ms": 1000 * statistics.median(tick_s), "tick_ms_max": 1000 * max(tick_s),
            "tick_kb": statistics.median(tick_bytes) / 1024, "tick_kb_max": max(tick_bytes) / 1024,
            "repaint_ms": 1000 * repaint_s, "repaint_kb": repaint_bytes / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: small sizes")
    args = parser.parse_args()
    sizes, ticks = ((200, 1000), 10) if args.quick else ((1000, 10000), 40)
    print(f"bench_dashboard: {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{STEPS} reports a trial, 8 running, {ticks} ticks of 8 reports + 2 ends + 2 starts")
    rows = [measure(n, 8, ticks) for n in sizes]
    print(f"{'trials':>8} {'paint ms':>9} {'paint KB':>9} {'tick ms (max)':>15} "
          f"{'tick KB (max)':>15} {'repaint ms':>11} {'repaint KB':>11}")
    for r in rows:
        print(f"{r['n']:>8,} {r['paint_ms']:>9.1f} {r['paint_kb']:>9.1f} "
              f"{r['tick_ms']:>7.2f} ({r['tick_ms_max']:>5.1f}) "
              f"{r['tick_kb']:>7.1f} ({r['tick_kb_max']:>5.1f}) "
              f"{r['repaint_ms']:>11.1f} {r['repaint_kb']:>11.1f}")
    small, big = rows
    print(f"  => a tick at {big['n']:,} / at {small['n']:,} trials: "
          f"{big['tick_ms'] / small['tick_ms']:.2f}x time, "
          f"{big['tick_kb'] / max(small['tick_kb'], 1e-9):.2f}x bytes "
          f"(a repaint: {big['repaint_ms'] / small['repaint_ms']:.1f}x)")


if __name__ == "__main__":
    main()
