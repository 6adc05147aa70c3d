"""A user's words reach the pages as text, never as HTML (issue 44, the round-5 probe).

A parameter named ``<img src=x onerror=...>`` ran script on the dashboard's page:
SlickGrid, under Bokeh's ``DataTable``, writes a column's title as HTML.  Here a
sweep whose name and parameter's name are such a tag is shown by ``labkit dashboard
--store``'s page (:func:`~labkit.views.bokeh.store_dashboard.store_dashboard`), by
``lk.dashboard`` and by the notebook's board (the harness page, fed its real
frames) in headless Chromium: the script never runs (``window.__pwned`` stays
undefined, no ``<img>`` is made) and the words show as they are.
"""

from __future__ import annotations

import html

import pytest

import labkit as lk
from labkit.views.bokeh.dashboard import dashboard, stop_dashboard
from labkit.views.bokeh.store_dashboard import store_dashboard
from labkit.views.sweep.board import SweepBoard
from tests.browser import chromium
from tests.conftest import ROOT
from tests.views.frames_page import frames_of
from tests.views.sweep_page_harness import Board, served_harness
from tests.views.test_sweep_board import wait_stopped

TAG = "<img src=x onerror=window.__pwned=1>"
WORD = "<img src=y onerror=window.__pwned=2>"  # a parameter's value: a category's label

# The sweep's status line as the page's Bokeh document holds it (its Div's text).
STATUS_JS = """() => {
    if (!window.Bokeh || !Bokeh.documents.length) return '';
    const status = Bokeh.documents[0].get_model_by_name('labkit-sweep-status');
    return status ? status.text : '';
}"""


def tagged(config, trial):
    """Two reports of a value read from the tag-named parameter."""
    for step in range(2):
        trial.report(step, acc=config[TAG] * (step + 1) / 2)
    return {"acc": config[TAG]}


def _sweep(**where):
    return lk.sweep(tagged, {TAG: lk.uniform(0, 1), "word": lk.choice([WORD])}, trials=3, metric="acc", mode="max",
                    seed=0, name=TAG, **where)


def _assert_text_not_html(page) -> None:
    """Wait for the tag to show as a header's text (Bokeh draws in shadow roots: Playwright's
    locators reach into them); the script never ran, no image was made."""
    headers = page.locator(".labkit-sweep-table .slick-header-column", has_text=TAG)
    headers.first.wait_for(timeout=60000)
    assert headers.first.text_content().strip() == TAG
    escaped = f"<b>sweep {html.escape(TAG)}</b>"  # the status line's HTML: the name as text
    page.wait_for_function(f"() => ({STATUS_JS})().includes({escaped!r})", timeout=60000)
    assert page.locator(".labkit-sweep-status", has_text=f"sweep {TAG}").count() == 1
    cell = page.locator(".labkit-sweep-table .slick-cell", has_text=WORD)
    cell.first.wait_for(timeout=60000)                     # a value shows as its words
    assert page.evaluate("() => window.__pwned === undefined")
    assert page.locator('img[src="x"]').count() == page.locator('img[src="y"]').count() == 0


@pytest.mark.needs("chromium")
def test_the_stores_dashboard_shows_a_tag_named_parameter_and_sweep_as_text(tmp_path):
    path = str(tmp_path / "tags.db")
    _sweep(store=path)
    served = store_dashboard(path)
    try:
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 1200})
            page.goto(served.url)
            _assert_text_not_html(page)
    finally:
        served.stop()


@pytest.mark.needs("chromium")
def test_the_live_dashboard_shows_a_tag_named_parameter_and_sweep_as_text():
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        _sweep(scheduler=s, store=None)
        try:
            url = dashboard(s)
            with chromium() as browser:
                page = browser.new_page(viewport={"width": 1200, "height": 1200})
                page.goto(url)
                _assert_text_not_html(page)
        finally:
            stop_dashboard(s)


@pytest.mark.needs("chromium")
def test_the_notebook_board_shows_a_tag_named_parameter_and_sweep_as_text(
        comms, local_scheduler):
    run = _sweep(scheduler=local_scheduler, store=None, wait=False)
    b = SweepBoard(run)
    try:
        run.result(timeout=60)
        wait_stopped(b)
        frames = frames_of(comms, b.widget)
    finally:
        b.close()
    assert frames[0]["meta"]["params"] == [TAG, "word"] and frames[0]["meta"]["name"] == TAG
    with served_harness(ROOT, "escaping-http") as url, chromium() as browser:
        page = Board(browser.new_page(viewport={"width": 900, "height": 1200}))
        page.load(url)
        for frame in frames:
            page.deliver(frame)
        page.wait_seq(frames[-1]["seq"])
        text = page.page.evaluate("() => document.querySelector('.labkit-sweep-board').textContent")
        assert TAG in text and WORD[:12] in text           # a cell cut to its width...
        assert page.page.evaluate(                          # ...its whole words its title
            "w => [...document.querySelectorAll('td')].some(td => td.title === w)", WORD)
        assert page.page.evaluate("() => window.__pwned === undefined")
        assert page.page.locator('img[src="x"], img[src="y"]').count() == 0
        assert page.errors == []
