"""The dashboard's sweeps on real sweeps, without a browser: what a tick sends, and that it adds up.

Each test runs a real sweep on a real scheduler and draws it with the dashboard's sweep
section into a real Bokeh document, recording every change the document would send to a
browser.  After the first paint a tick must stream or patch, never replace the big sources,
and what the ticks sent must add up to what a fresh paint of the sweep shows.
"""

from __future__ import annotations

import math
import threading

import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent, ColumnsPatchedEvent, ColumnsStreamedEvent

import labkit as lk
from labkit.views.trackers.sweep_lines import LEADERS as BEST_LINES
from labkit.views.trackers.sweep_lines import LINES
from labkit.views.bokeh.sweep_plots import SweepPlots
from labkit.views.trackers.sweep_shelf import SweepShelf
from tests.experiments import functions as F

BIG = ("labkit-sweep-table-source", "labkit-sweep-lines", "labkit-sweep-parallel-lines")


class Recorder:
    """The data changes a document would send, by source name, tick by tick."""

    def __init__(self, doc: Document):
        self.ticks: list[list] = [[]]
        doc.on_change(self)

    def __call__(self, event) -> None:
        if isinstance(event, (ColumnDataChangedEvent, ColumnsStreamedEvent, ColumnsPatchedEvent)):
            self.ticks[-1].append((type(event).__name__, event.model.name, event))

    def next(self) -> None:
        self.ticks.append([])


def _plots(source):
    shelf = SweepShelf(source)
    unsubscribe = source.subscribe(shelf)
    doc = Document()
    plots = SweepPlots(shelf)
    doc.add_root(plots.layout)
    return shelf, plots, doc, unsubscribe


def _tick_while(run, plots, recorder) -> None:
    """Tick (as a session's callback would) until the run ended, then once more."""
    while not run.done():
        plots.tick()
        recorder.next()
        run.wait(0.05)
    plots.tick()


def _data(plots) -> dict:
    """What the section's sources hold, comparable (NaN as None)."""
    def plain(v):
        if isinstance(v, list):
            return [plain(x) for x in v]
        return None if isinstance(v, float) and math.isnan(v) else v
    return {
        name: {k: plain(list(v)) for k, v in plots.layout.document.get_model_by_name(name).data.items()}
        for name in BIG
    }


@pytest.mark.parametrize("trials", [40, LINES + 60])
def test_after_the_first_paint_ticks_stream_and_patch_and_add_up_to_a_fresh_paint(trials):
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        shelf, plots, doc, unsubscribe = _plots(s)
        recorder = Recorder(doc)
        try:
            run = lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=trials, metric="loss",
                           mode="min", scheduler=s, store=None, seed=1, wait=False)
            _tick_while(run, plots, recorder)
            result = run.result()
        finally:
            unsubscribe()
        painted = [i for i, t in enumerate(recorder.ticks)
                   if any(kind == "ColumnDataChangedEvent" and name == "labkit-sweep-table-source"
                          for kind, name, _ in t)]
        assert len(painted) == 1                               # painted once, then diffs only
        for tick in recorder.ticks[painted[0] + 1:]:
            replaced = {name for kind, name, _ in tick if kind == "ColumnDataChangedEvent"}
            assert not replaced & {"labkit-sweep-table-source", "labkit-sweep-lines"}, replaced
        assert plots.parallel.repaints <= 1 + 12               # an axis widens a few times at most
        ids = list(doc.get_model_by_name("labkit-sweep-table-source").data["id"])
        assert sorted(ids) == list(range(trials))              # every trial a row, once
        # what the ticks sent adds up to what a fresh paint of the same sweep shows
        fresh = SweepPlots(shelf)
        Document().add_root(fresh.layout)
        fresh.tick()
        assert _data(plots)["labkit-sweep-table-source"] == _data(fresh)["labkit-sweep-table-source"]
        drawn = {t: (xs, ys) for t, xs, ys in zip(*(
            _data(plots)["labkit-sweep-lines"][k] for k in ("trial", "xs", "ys")), strict=True)
            if t >= 0}
        again = {t: (xs, ys) for t, xs, ys in zip(*(
            _data(fresh)["labkit-sweep-lines"][k] for k in ("trial", "xs", "ys")), strict=True)}
        assert drawn == again
        table = doc.get_model_by_name("labkit-sweep-table-source").data
        assert list(table["status"]) == ["completed"] * trials
        best = table["id"][list(table["star"]).index("★")]
        assert best == result.best.id
        band = doc.get_model_by_name("labkit-sweep-band").data
        if trials > LINES:                                     # beyond: the best as lines, a band
            assert set(drawn) == {t.id for t in sorted(
                result.trials, key=lambda t: (t.value, t.id))[:BEST_LINES]}
            assert len(band["step"]) == 5 and all(
                lo <= mid <= hi for lo, mid, hi in zip(band["q10"], band["q50"], band["q90"],
                                                       strict=True))
        else:
            assert len(drawn) == trials and not band["step"]


def test_a_tick_sends_the_trials_that_changed_since_the_last_not_the_sweep():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        shelf, plots, doc, unsubscribe = _plots(s)
        recorder = Recorder(doc)
        try:
            run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.002, "steps": 5},
                           trials=600, metric="acc", mode="max", scheduler=s, store=None, seed=2,
                           wait=False)
            ticks = []  # each tick: the trials changed since the tick before it began
            last = 0
            while not run.done():
                feeds = shelf.feeds()
                before = feeds[0].mark if feeds else 0
                plots.tick()
                ticks.append(set(feeds[0].changes(last)[1]) if feeds else set())
                last = before
                recorder.next()
                run.wait(0.02)
            run.result()
        finally:
            unsubscribe()
        ids = list(doc.get_model_by_name("labkit-sweep-table-source").data["id"])
        checked = 0
        for changed, tick in zip(ticks, recorder.ticks, strict=False):
            if any(kind == "ColumnDataChangedEvent" and name == "labkit-sweep-table-source"
                   for kind, name, _ in tick):
                continue                                        # the first paint
            rows = {r for kind, name, e in tick if name == "labkit-sweep-table-source"
                    and kind == "ColumnsPatchedEvent" for cells in e.patches.values()
                    for r, _ in cells}
            stars = {r for kind, name, e in tick if name == "labkit-sweep-table-source"
                     and kind == "ColumnsPatchedEvent" for r, _ in e.patches.get("star", [])}
            assert {ids[r] for r in rows - stars} <= changed    # only trials that changed
            lines = sum(len(e.patches.get("ys", [])) for kind, name, e in tick
                        if name == "labkit-sweep-lines" and kind == "ColumnsPatchedEvent")
            assert lines <= len(changed) + 2 * (1 + BEST_LINES)  # lines that changed, came, went
            checked += bool(tick)
        assert checked >= 10, len(recorder.ticks)


def test_a_sweep_begun_before_the_shelf_is_seeded_and_then_followed():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        started = threading.Event()
        unsub = s.subscribe(lambda e: started.set() if type(e).__name__ == "TrialReported" else None)
        run = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.05, "steps": 8},
                       trials=8, metric="acc", mode="max", scheduler=s, store=None, wait=False)
        assert started.wait(60)
        shelf, plots, doc, unsubscribe = _plots(s)             # opened mid-sweep
        try:
            _tick_while(run, plots, Recorder(doc))
            result = run.result()
        finally:
            unsubscribe()
            unsub()
        [feed] = shelf.feeds()
        assert feed.run == run.id and feed.status == "finished"
        views = {t.id: t for t in feed.trials()}
        for t in result.trials:                                 # every report, none twice
            assert views[t.id].curve == tuple((s_, m["acc"]) for s_, m, _ in t.history)
            assert views[t.id].status == str(t.status) and views[t.id].value == t.value
        assert feed.counts() == {"completed": 8}
