"""A sweep board's last frame, kept whole in its widget: what a saved notebook shows.

Once the sweep ends the board keeps a ``paint`` of its last state in the
widget's one synced trait, ``last`` (sent to the front-end as state, so a
notebook saved with its widgets holds it).  Kernel side: on real sweeps (a
live run, and a stored sweep read back), the kept frame shows exactly what
the frames sent left on a page, names no event on its clock, and is the one
state synced.  Page side (the front-end on the harness page in headless
Chromium, fed that very frame): with no kernel behind the model (its ``send``
throws) the board draws the kept frame, best highlighted, brushes still
filtering its table; with a kernel, the kept frame shows until the paint
answering the page's hello replaces it.
"""

from __future__ import annotations

import contextlib

import pytest

import labkit as lk
from labkit.views.board import board
from labkit.views.sweep_board import SweepBoard
from tests.browser import chromium
from tests.conftest import ROOT
from tests.experiments import functions as F
from tests.views.frames_page import Page, frames_of
from tests.views.sweep_page_harness import Board, Sweep, served_harness
from tests.views.test_sweep_board import assert_matches_result, tell, wait_stopped, wait_until

SPACE = {"q": lk.uniform(0.5, 1.0), "lr": lk.loguniform(1e-4, 1e-1),
         "width": lk.choice([64, 128, 256]), "pause": 0.02}


def drawn(page: Page) -> tuple:
    """What a page shows of the frames it applied (not their seq nor their clock)."""
    top = {k: v for k, v in page.top.items() if k not in ("seq", "clock", "base", "kind")}
    return page.rows, page.lines, page.band, page.meta, top


@pytest.fixture
def kept_run(comms, local_scheduler):
    """A real sweep's board after the sweep ended: ``(board, result)``; closed after."""
    run = lk.sweep(F.curve, SPACE, trials=5, metric="acc", mode="max", scheduler=local_scheduler,
                   seed=3, store=None, wait=False)
    b = SweepBoard(run)
    try:
        wait_until("the first frame", lambda: frames_of(comms, b.widget))
        assert comms.state(b.widget)["last"] == {} or run.done()   # nothing kept while it runs
        result = run.result(timeout=60)
        wait_stopped(b)
        yield b, result
    finally:
        b.close()


@pytest.mark.usefixtures("no_thread_leak")
def test_the_board_keeps_what_its_frames_left_on_a_page(comms, kept_run):
    b, result = kept_run
    kept = b.widget.last
    assert kept["kind"] == "paint" and kept["ended"] and kept["status"] == "finished"
    assert kept["seq"] <= frames_of(comms, b.widget)[-1]["seq"]
    assert drawn(Page.of([kept])) == drawn(Page.of(frames_of(comms, b.widget)))
    assert_matches_result(Page.of([kept]), result)
    assert kept["clock"]["events"] == 0 and kept["clock"]["oldest"] is None
    assert comms.state(b.widget)["last"] == kept                # synced: a saved notebook's
    seen = len(comms.messages)
    tell(b, {"kind": "hello"})                                  # a page after the end
    answer = frames_of(comms, b.widget, seen)
    assert [f["kind"] for f in answer] == ["paint"]
    assert drawn(Page.of(answer)) == drawn(Page.of([kept])) and b.widget.last == kept


@pytest.mark.usefixtures("no_thread_leak")
def test_the_board_of_a_stored_sweep_keeps_its_one_paint(comms, local_scheduler, tmp_path):
    store = str(tmp_path / "kept.db")
    result = lk.sweep(F.curve, SPACE, trials=4, metric="acc", mode="max",
                      scheduler=local_scheduler, seed=4, store=store, name="kept")
    b = board(lk.load_sweep(store, "kept"))
    try:
        wait_stopped(b)
        frames = frames_of(comms, b.widget)
        assert [f["kind"] for f in frames][:1] == ["paint"]
        assert drawn(Page.of([b.widget.last])) == drawn(Page.of(frames))
        assert_matches_result(Page.of([b.widget.last]), result)
    finally:
        b.close()


# -- the page ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site():
    """The repository served on 127.0.0.1; the harness page's URL."""
    with served_harness(ROOT, "sweep-kept-http") as url:
        yield url


@pytest.fixture
def open_page(site):
    """``open_page(stored, kernel)``: the harness with ``stored`` synced state before it
    loads, and a kernel behind its model or none."""
    with chromium() as browser, contextlib.ExitStack() as stack:
        boards: list[Board] = []

        def open_(stored: dict, kernel: bool) -> Board:
            ctx = browser.new_context(viewport={"width": 900, "height": 1200})
            stack.callback(ctx.close)
            ctx.add_init_script(f"window.lkStored = {_json(stored)};"
                                f"window.lkNoKernel = {'false' if kernel else 'true'};")
            page = Board(ctx.new_page())
            boards.append(page)
            page.page.goto(site)
            page.page.wait_for_function("window.lkTest && (lkTest.ready || lkTest.error)")
            assert page.page.evaluate("lkTest.error || null") is None
            return page

        yield open_
        assert [e for b in boards for e in b.errors] == []


def _json(value) -> str:
    import json
    return json.dumps(value)


@pytest.mark.needs("chromium")
def test_with_no_kernel_the_page_draws_the_kept_frame(kept_run, open_page):
    b, result = kept_run
    kept = b.widget.last
    page = open_page({"last": kept}, kernel=False)
    page.wait_seq(kept["seq"])
    assert page.data()["kept"] == "1" and page.data()["ended"] == "1"
    rows = page.rows()
    assert [r[0] for r in rows] == [t.id for t in result.trials]
    assert [r[1] for r in rows] == [str(t.status) for t in result.trials]
    assert [r[0] for r in rows if r[2]] == [result.best.id]             # the best highlighted
    assert page.text(".labkit-sweep-status").startswith(
        f"{kept['meta']['name']} · finished · {len(result.trials)} trials")
    assert page.page.locator(".labkit-clock").count() == 0              # no new event shown
    assert page.data(".labkit-sweep-curves")["lines"] == str(len(result.trials))
    page.drag_axis("q", 0.0, 0.5)                  # the brush filters the table in the page
    page.page.wait_for_function(
        "n => +document.querySelector('.labkit-sweep-board').dataset.rows < n",
        arg=len(result.trials))


@pytest.mark.needs("chromium")
def test_the_kept_frame_shows_until_a_paint_answers_the_pages_hello(kept_run, open_page):
    kept = kept_run[0].widget.last
    page = open_page({"last": kept}, kernel=True)
    page.wait_seq(kept["seq"])
    assert page.data()["kept"] == "1" and [m["kind"] for m in page.sent()] == ["hello"]
    answer = Sweep(3, seed=5).paint()                # the kernel's answer (another state)
    page.deliver(answer)
    assert page.data()["kept"] == "0" and [r[0] for r in page.rows()] == [0, 1, 2]
    page.page.evaluate("last => lkTest.change('last', last)", kept)     # answered: ignored
    page.page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
    assert page.data()["seq"] == str(answer["seq"]) and [r[0] for r in page.rows()] == [0, 1, 2]


@pytest.mark.needs("chromium")
def test_a_frame_kept_while_the_hello_waits_is_drawn(kept_run, open_page):
    kept = kept_run[0].widget.last
    page = open_page({"last": {}}, kernel=True)      # rendered while the sweep ran; kernel busy
    assert page.data()["seq"] == ""
    page.page.evaluate("last => lkTest.change('last', last)", kept)
    page.wait_seq(kept["seq"])
    assert page.data()["kept"] == "1" and len(page.rows()) == len(kept["rows"]["id"])
