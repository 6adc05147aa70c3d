"""Task lanes: one horizontal lane per worker, a coloured block per finished task.

:class:`TaskLanes` is an `anywidget <https://anywidget.dev>`_ whose front-end
(plain ESM and CSS, no build step) lives in ``labkit/views/assets/`` and ships
as package data of ``labkit.views``.  The Python
side streams: :meth:`TaskLanes.update` pulls the spans finished since the
last call from a :class:`~labkit.views.trackers.tracker.Tracker` and sends only those,
as one custom message ``{"kind": "spans", "spans": [...]}``.  The synced
``recent`` trait holds at most :attr:`TaskLanes.max_recent` spans for a first
render; a view that appears later says ``{"kind": "hello"}`` and is sent the
recent spans again (views skip spans they already drew, by ``seq``).
"""

from __future__ import annotations

import math
import threading
from collections import deque

import anywidget
import traitlets

from ..sweep.esm import asset
from ..task_colours import node_color

__all__ = ["TaskLanes", "span_dict"]


def _label(span) -> str:
    """A short tooltip: what the task was (the view adds its duration and worker)."""
    what = span.node_name or "task"
    if span.node is not None:
        what = f"node {span.node} {span.node_name} phase {span.phase}"
    return f"{what} · chunk {span.chunk}"


def span_dict(span, t0: float, lane: int) -> dict:
    """A :class:`~labkit.views.trackers.tracker.TaskSpan` as compact JSON: times from ``t0``, a lane index.

    The worker's name is sent once, in ``workers``; a span only says which lane.
    """
    colour, alpha = node_color(span.node, span.phase, span.ok)
    return {
        "seq": span.seq,
        "lane": lane,
        "start": round(span.start - t0, 4),
        "end": round(max(span.end, span.start) - t0, 4),
        "ok": span.ok,
        "color": colour,
        "alpha": alpha,
        "label": _label(span),
    }


class TaskLanes(anywidget.AnyWidget):
    """Compact per-worker task lanes, fed incrementally from a tracker.

    Parameters
    ----------
    tracker : Tracker, optional
        When given, the spans it already holds are the first render's ``recent``.
    **kwargs
        Trait values (``lane_height``, ``title`` ...).
    """

    _esm = asset("lanes.js")
    _css = asset("lanes.css")

    workers = traitlets.List(traitlets.Unicode(), default_value=[]).tag(sync=True)
    labels = traitlets.List(traitlets.Unicode(), default_value=[]).tag(sync=True)  # shown names
    legend = traitlets.List(traitlets.Dict(), default_value=[]).tag(sync=True)  # colour: what
    t0 = traitlets.Float(0.0).tag(sync=True)  # epoch seconds of time 0
    recent = traitlets.List(traitlets.Dict(), default_value=[]).tag(sync=True)
    lane_height = traitlets.Int(14).tag(sync=True)  # pixels per lane
    title = traitlets.Unicode("tasks per worker").tag(sync=True)

    max_recent = 500  # spans kept for a first render or a resend
    max_batch = 2000  # spans per message, so one message stays small

    def __init__(self, tracker=None, names=None, **kwargs):
        names = names or (lambda worker: str(worker).split("://", 1)[-1])
        # a lane shows a worker's name alone (where it runs is on the device-load plot)
        self._names = getattr(names, "short", names)
        self._legend: dict[tuple, dict] = {}
        self._last_seq = -1
        self._recent: deque[dict] = deque(maxlen=self.max_recent)
        self._lock = threading.Lock()  # the writer appends while the kernel's thread resends
        self.sent = 0  # spans sent as messages so far
        if tracker is not None:  # the first render shows what happened already
            spans = tracker.spans_since(-1)
            if spans:
                kwargs.setdefault("t0", spans[0].start)
                kwargs["workers"] = _ordered(
                    [*kwargs.get("workers", ()), *(s.worker for s in spans)]
                )
                kwargs["labels"] = [self._names(w) for w in kwargs["workers"]]
                self._take(spans, kwargs["t0"], kwargs["workers"])
                kwargs["legend"] = list(self._legend.values())
                kwargs.setdefault("recent", list(self._recent))
        super().__init__(**kwargs)
        self.on_msg(self._handle_custom_msg)

    # -- validators ----------------------------------------------------------------

    @traitlets.validate("recent")
    def _valid_recent(self, proposal):
        """At most ``max_recent`` spans, each with a seq, a lane and times."""
        spans = list(proposal["value"])[-self.max_recent :]
        for s in spans:
            if not {"seq", "lane", "start", "end"} <= s.keys():
                raise traitlets.TraitError(f"a span needs seq, lane, start and end: {s!r}")
        return spans

    @traitlets.validate("workers")
    def _valid_workers(self, proposal):
        """Worker names, each once, in the order first seen."""
        return _ordered(proposal["value"])

    @traitlets.validate("t0")
    def _valid_t0(self, proposal):
        """A finite, non-negative time."""
        value = float(proposal["value"])
        if not math.isfinite(value) or value < 0:
            raise traitlets.TraitError(f"t0 must be a finite time >= 0, got {value}")
        return value

    @traitlets.validate("lane_height")
    def _valid_lane_height(self, proposal):
        """Between 4 and 60 pixels."""
        return min(max(int(proposal["value"]), 4), 60)

    # -- streaming -------------------------------------------------------------------

    def update(self, tracker) -> int:
        """Send the spans the tracker finished since the last update; returns how many."""
        spans = tracker.spans_since(self._last_seq)
        if not spans:
            return 0
        new_workers = [s.worker for s in spans if s.worker not in self.workers]
        kinds = len(self._legend)
        batch = self._take(
            spans, self.t0 or min(s.start for s in spans), _ordered([*self.workers, *new_workers])
        )
        with self.hold_sync():  # t0, new lanes and the legend in one message, before the spans
            if not self.t0:
                self.t0 = min(s.start for s in spans)
            if new_workers:
                self.workers = [*self.workers, *new_workers]
            labels = [self._names(w) for w in self.workers]  # names may come later
            if labels != list(self.labels):
                self.labels = labels
            if len(self._legend) != kinds:
                self.legend = list(self._legend.values())
        for i in range(0, len(batch), self.max_batch):
            self.send({"kind": "spans", "spans": batch[i : i + self.max_batch]})
        self.sent += len(batch)
        return len(batch)

    def sync_recent(self) -> None:
        """Put the recent spans in the synced state, once at the end (saved notebooks show them)."""
        with self._lock:
            latest = list(self._recent)
        if latest != self.recent:
            self.recent = latest

    def _take(self, spans, t0: float, workers: list[str]) -> list[dict]:
        """Spans as dicts; remembers the last seq and the recent ones."""
        lanes = {w: i for i, w in enumerate(workers)}
        batch = [span_dict(s, t0, lanes[s.worker]) for s in spans]
        for s, d in zip(
            spans, batch, strict=True
        ):  # a colour a kind of task: the legend says which
            key = (d["color"], d["alpha"] > 0.7) if d["ok"] else ("failed",)
            if key not in self._legend:
                what = (
                    "failed"
                    if not d["ok"]
                    else (
                        f"node {s.node} {s.node_name}"
                        if s.node is not None
                        else (s.node_name or "tasks")
                    )
                )
                self._legend[key] = {"color": d["color"], "alpha": d["alpha"], "label": what}
        with self._lock:
            self._recent.extend(batch)
        self._last_seq = spans[-1].seq
        return batch

    def _handle_custom_msg(self, widget, content, buffers=None) -> None:
        """A new view says hello: send it the recent spans (it skips those it has)."""
        if isinstance(content, dict) and content.get("kind") == "hello":
            with self._lock:
                recent = list(self._recent)
            self.send({"kind": "spans", "spans": recent, "resend": True})


def _ordered(names) -> list[str]:
    """Distinct names as strings, first occurrence first."""
    return list(dict.fromkeys(str(n) for n in names))
