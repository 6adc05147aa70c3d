"""What a sweep board's frames cost: labkit's paint/delta messages beside Bokeh's stream/patch.

Run ``python benchmarks/bench_board_frames.py`` (1,000 and 10,000 synthetic
trials; about a minute on 2 cores) or ``--sizes 1000`` for one size.  It
prints a table; it never asserts on anything.

The sweep is synthetic (``tests/views/synthetic_sweep.py``: up to 30 reports a
trial, 8 at a time, stopped at rungs 2, 6 and 18 as ASHA with
``min_steps=2, reduction=3`` would); its events go straight into a
:class:`~labkit.views.trackers.sweep_tracker.SweepTracker`, no cluster.  Frames are
taken as the board's writer takes them, 4 a second through a sweep going at
the issue's pace (10,000 trials in 61 s): a frame every ``41`` trials' worth
of events, a quarter of a second on the encoder's clock (so the band is
recomputed every 8 frames, as at that pace).  For each size and front-end:

* **labkit**: the board protocol's messages (:class:`~labkit.views.sweep.frames.FrameEncoder`),
  serialised as a kernel does (``jupyter_client``'s ``json_packer``).  ms a
  frame = reading the changes from the tracker, encoding and serialising.
* **bokeh**: the same changes (each labkit frame's rows, new points, dropped
  lines, band, status) expressed as Bokeh document events: rows patched
  (``ColumnDataSource.patch``) or streamed (``.stream``), new points streamed
  into a points source, a dropped line's points patched to alpha 0, the band
  source's data replaced, the status ``Div``'s text set; each frame's events
  serialised as one ``PATCH-DOC`` message (``bokeh.protocol``), the first
  paint as a ``PULL-DOC-REPLY`` of the whole document.  ms a frame = applying
  the events to the document and serialising them (given the changes: the
  work of finding them is labkit's column).

"first paint" is the board made when the sweep starts (every trial pending);
"stored" is the board of the whole sweep once it ended (the paint of a
stored sweep); the line under each size times ``lk.board(result)`` of that
ended sweep, from the call to its first paint sent.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from jupyter_client.session import json_packer  # noqa: E402

from labkit.views.sweep.frames import FrameEncoder  # noqa: E402
from labkit.views.trackers.sweep_tracker import SweepTracker  # noqa: E402
from tests.views.synthetic_sweep import synthetic_sweep  # noqa: E402

TRIALS_A_FRAME = 41  # 10,000 trials in 61 s at 4 frames a second


class BokehSide:
    """A Bokeh document holding what the board shows; each labkit frame as Bokeh events."""

    def __init__(self, params: list[str]):
        from bokeh.document import Document
        from bokeh.layouts import column
        from bokeh.models import ColumnDataSource, Div
        from bokeh.plotting import figure

        self.columns = ["id", "status", "step", "latest", "best", "worker", "attempts", *params]
        self.rows = ColumnDataSource({c: [] for c in self.columns})
        self.points = ColumnDataSource({"trial": [], "step": [], "value": [], "alpha": []})
        self.band = ColumnDataSource({k: [] for k in ("steps", "q10", "q25", "q50", "q75", "q90")})
        self.status = Div(text="")
        curves = figure(height=200)
        curves.scatter("step", "value", alpha="alpha", source=self.points)
        curves.varea("steps", "q10", "q90", source=self.band)
        self.doc = Document()
        self.doc.add_root(column(self.status, curves))
        self.doc.add_root(self.rows)
        self.events: list = []
        self.doc.on_change(self.events.append)
        self.index: dict[int, int] = {}  # trial -> row of the rows source
        self.point_rows: dict[int, list[int]] = {}  # trial -> its rows in the points source

    def apply(self, frame: dict) -> None:
        """Apply one labkit frame's changes as Bokeh would get them."""
        rows = frame.get("rows")
        if rows:
            table = {c: rows[c] for c in self.columns[:7]} | rows["params"]
            table = {c: [_nan(v) for v in vs] for c, vs in table.items()}
            patches: dict[str, list] = {c: [] for c in self.columns}
            new: dict[str, list] = {c: [] for c in self.columns}
            for i, trial in enumerate(rows["id"]):
                at = self.index.get(trial)
                for c in self.columns:
                    (new[c].append(table[c][i]) if at is None else patches[c].append(
                        (at, table[c][i])))
                if at is None:
                    self.index[trial] = len(self.index)
            if new["id"]:
                self.rows.stream(new)
            if patches["id"]:
                self.rows.patch(patches)
        curves = frame.get("curves") or {}
        drop = [(i, 0.0) for t in curves.get("drop", ()) for i in self.point_rows.get(t, [])]
        if drop:
            self.points.patch({"alpha": drop})
        lines = curves.get("lines") or {}
        if lines:
            data: dict[str, list] = {"trial": [], "step": [], "value": [], "alpha": []}
            start = len(self.points.data["trial"])
            for trial, points in lines.items():
                rows_of = self.point_rows.setdefault(int(trial), [])
                for step, value in points:
                    rows_of.append(start + len(data["trial"]))
                    data["trial"].append(int(trial))
                    data["step"].append(_nan(step))
                    data["value"].append(_nan(value))
                    data["alpha"].append(1.0)
            self.points.stream(data)
        if "band" in curves:
            band = curves["band"] or {}
            self.band.data = {k: [_nan(v) for v in band.get(k, [])]
                              for k in ("steps", "q10", "q25", "q50", "q75", "q90")}
        top = {k: frame[k] for k in ("counts", "best", "total", "status", "ended", "load", "clock")
               if k in frame}
        self.status.text = json.dumps(top)

    def patch_doc(self) -> int:
        """Bytes of the events so far as one PATCH-DOC message; the events are then cleared."""
        from bokeh.protocol import Protocol

        message = Protocol().create("PATCH-DOC", self.events)
        self.events.clear()
        return _message_bytes(message)

    def pull_doc(self) -> int:
        """Bytes of the whole document as a PULL-DOC-REPLY."""
        from bokeh.protocol import Protocol

        self.events.clear()
        return _message_bytes(Protocol().create("PULL-DOC-REPLY", "0", self.doc))


def _message_bytes(message) -> int:
    return (len(message.header_json) + len(message.metadata_json) + len(message.content_json)
            + sum(len(b.data) for b in message.buffers))


def _nan(value):
    return float("nan") if value is None else value


def measure(n: int) -> dict:
    """Feed a synthetic sweep of ``n`` trials; both front-ends' bytes and milliseconds."""
    events = list(synthetic_sweep("r", n))
    every = max(1, round(len(events) * TRIALS_A_FRAME / n))
    tracker = SweepTracker("r")
    tracker(events[0])
    clock = [0.0]  # the sweep's time: a frame is a quarter of a second (the band's pace)
    frames = FrameEncoder(tracker, clock=lambda: clock[0])
    start = time.perf_counter()
    paint = frames.paint()
    ours = {"paint": len(json_packer(paint)), "paint_ms": 1e3 * (time.perf_counter() - start),
            "deltas": [], "ms": []}
    bokeh = BokehSide(paint["meta"]["params"])
    start = time.perf_counter()
    bokeh.apply(paint)
    theirs = {"paint": bokeh.pull_doc(), "paint_ms": 1e3 * (time.perf_counter() - start),
              "deltas": [], "ms": []}
    fold = 0.0
    for i, event in enumerate(events[1:], 1):
        start = time.perf_counter()
        tracker(event)
        fold += time.perf_counter() - start
        last = i == len(events) - 1
        if i % every and not last:
            continue
        clock[0] += 0.25
        start = time.perf_counter()
        delta = frames.delta(tracker.take(), final=last)
        ours["deltas"].append(len(json_packer(delta)))
        ours["ms"].append(1e3 * (time.perf_counter() - start))
        start = time.perf_counter()
        bokeh.apply(delta)
        theirs["deltas"].append(bokeh.patch_doc())
        theirs["ms"].append(1e3 * (time.perf_counter() - start))
    start = time.perf_counter()
    stored = frames.paint()
    ours["stored"] = len(json_packer(stored))
    ours["stored_ms"] = 1e3 * (time.perf_counter() - start)
    late = BokehSide(stored["meta"]["params"])
    start = time.perf_counter()
    late.apply(stored)
    theirs["stored"] = late.pull_doc()
    theirs["stored_ms"] = 1e3 * (time.perf_counter() - start)
    return {"events": len(events), "frames": len(ours["deltas"]), "fold_us": 1e6 * fold / len(events),
            "labkit": ours, "bokeh": theirs}


def stored_board(n: int) -> tuple[float, int]:
    """Seconds from ``lk.board(result)`` of an ended ``n``-trial sweep to its first frame sent,
    and that frame's bytes (the widget's comm is a stand-in that serialises as a kernel does)."""
    import threading

    import comm
    from comm.base_comm import BaseComm

    import labkit as lk
    from labkit.experiments import SweepResult

    tracker = SweepTracker("r")
    for event in synthetic_sweep("r", n):
        tracker(event)
    records = list(tracker.state(None).rows)
    result = SweepResult("synthetic", "acc", "max", 0, tracker.space, records, None, tracker.rule)
    sent: list[int] = []
    first = threading.Event()

    class Recording(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            content = (data or {}).get("content") or {}
            if content.get("kind") == "paint":
                sent.append(len(json_packer(data)))
                first.set()

    original = comm.create_comm
    comm.create_comm = lambda *a, **kw: Recording(*a, **kw)
    try:
        start = time.perf_counter()
        board = lk.board(result)
        first.wait(60)
        seconds = time.perf_counter() - start
        board.close()
    finally:
        comm.create_comm = original
    return seconds, sent[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    args = parser.parse_args()
    print(f"# {platform.node()} · {platform.processor() or platform.machine()} · "
          f"{os.cpu_count()} cores · Python {platform.python_version()}")
    print(f"# python benchmarks/bench_board_frames.py --sizes {' '.join(map(str, args.sizes))}")
    head = ("trials", "front-end", "first paint KB", "ms", "stored KB", "ms", "frames",
            "max delta KB", "mean delta KB", "ms/frame", "max ms")
    print(" | ".join(head))
    measure(50)  # warm up: imports and first calls are not a frame's cost
    for n in args.sizes:
        got = measure(n)
        for side in ("labkit", "bokeh"):
            r = got[side]
            print(" | ".join([
                f"{n}", side, f"{r['paint'] / 1e3:.1f}", f"{r['paint_ms']:.0f}",
                f"{r['stored'] / 1e3:.1f}", f"{r['stored_ms']:.0f}", f"{got['frames']}",
                f"{max(r['deltas']) / 1e3:.1f}", f"{statistics.mean(r['deltas']) / 1e3:.2f}",
                f"{statistics.mean(r['ms']):.2f}", f"{max(r['ms']):.1f}"]))
        print(f"# {n} trials: {got['events']} events, the tracker folds one in "
              f"{got['fold_us']:.1f} µs")
        seconds, size = stored_board(n)
        print(f"# lk.board(result) of the ended {n}-trial sweep: its first paint sent after "
              f"{seconds:.2f} s, {size / 1e3:.1f} KB")


if __name__ == "__main__":
    main()
