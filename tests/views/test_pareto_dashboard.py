"""The dashboard's Pareto view (issue 48): a live two-objective sweep drawn into a real Bokeh
document tick by tick (after its paint, points streamed and front flags patched; what the
ticks sent adds up to a fresh paint and to ``result.pareto``), and a store's served by
``labkit dashboard --store``'s app, read in Chromium."""

from __future__ import annotations

import pytest
from bokeh.document import Document
from bokeh.document.events import ColumnDataChangedEvent

import labkit as lk
from labkit.views.bokeh.sweep_plots import SweepPlots
from labkit.views.trackers.sweep_shelf import SweepShelf
from tests.experiments import objective_functions as OF

XY = {"x": lk.uniform(0, 1), "y": lk.uniform(0, 1)}
POINTS = "labkit-sweep-pareto-points"
FRONT = "#e8590c"


def front_of(doc: Document) -> set:
    data = doc.get_model_by_name(POINTS).data
    return {t for t, c in zip(data["trial"], data["colour"], strict=True) if c == FRONT}


def test_the_dashboard_draws_the_front_as_the_sweep_runs_and_it_adds_up(local_scheduler):
    shelf = SweepShelf(local_scheduler)
    unsubscribe = local_scheduler.subscribe(shelf)
    doc = Document()
    plots = SweepPlots(shelf)
    doc.add_root(plots.layout)
    replaced: list = []
    doc.on_change(lambda e: isinstance(e, ColumnDataChangedEvent)
                  and e.model.name == POINTS and replaced.append(e))
    try:
        run = lk.sweep(OF.two_objectives, XY, trials=30, metric=("loss", "latency_ms"),
                       mode=("min", "min"), scheduler=local_scheduler, store=None, seed=4,
                       wait=False)
        while not run.done():
            plots.tick()
            run.wait(0.05)
        plots.tick()
        result = run.result()
    finally:
        unsubscribe()
    assert plots.pareto.layout.visible
    assert len(replaced) <= 1                                # painted once, streamed after
    data = doc.get_model_by_name(POINTS).data
    assert sorted(data["trial"]) == [t.id for t in result.trials]
    assert front_of(doc) == {t.id for t in result.pareto}
    stairs = doc.get_model_by_name("labkit-sweep-pareto-front").data
    assert len(stairs["x"]) == 2 * len(result.pareto) - 1   # a step between two front points
    assert len(doc.get_model_by_name("labkit-sweep-pareto-hv").data["hv"]) >= 1
    fresh = SweepPlots(shelf)
    fresh_doc = Document()
    fresh_doc.add_root(fresh.layout)
    fresh.tick()
    assert front_of(fresh_doc) == front_of(doc)
    assert sorted(fresh_doc.get_model_by_name(POINTS).data["trial"]) == sorted(data["trial"])
    # the y picker shows another objective: the points and the staircase drawn again
    plots.pareto.y.value = "loss"
    assert list(doc.get_model_by_name(POINTS).data["y"]) == list(data["x"])


def test_a_one_metric_sweep_shows_no_pareto_view(local_scheduler):
    shelf = SweepShelf(local_scheduler)
    plots = SweepPlots(shelf)
    Document().add_root(plots.layout)
    lk.sweep(OF.returns_one, XY, trials=3, metric="loss", mode="min",
             scheduler=local_scheduler, store=None)
    plots.tick()
    assert plots.sweep is not None and not plots.pareto.layout.visible


@pytest.mark.needs("chromium")
def test_the_store_dashboard_shows_the_front_in_chromium(tmp_path):
    from labkit.views.bokeh.store_dashboard import store_dashboard
    from tests.browser import chromium, screenshot

    path = str(tmp_path / "sweeps.db")
    result = lk.sweep(OF.two_objectives, XY, trials=24, metric=("loss", "latency_ms"),
                      mode=("min", "min"), store=path, name="two", seed=6)
    board = store_dashboard(path)
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 1800})
            page.goto(board.url)
            page.wait_for_function(
                """() => { const d = window.Bokeh && Bokeh.documents[0];
                           const m = d && d.get_model_by_name("labkit-sweep-pareto-points");
                           return m && m.data.trial.length === 24; }""", timeout=60000)
            drawn = page.evaluate(
                """() => { const d = Bokeh.documents[0].get_model_by_name(
                               "labkit-sweep-pareto-points").data;
                           return [...d.trial].filter((t, i) => d.colour[i] === "#e8590c"); }""")
            assert set(drawn) == {t.id for t in result.pareto}
            page.locator(".bk-Figure, .bk-figure, canvas").last.scroll_into_view_if_needed()
            screenshot(page, "dashboard-store-pareto")
    finally:
        board.stop()
