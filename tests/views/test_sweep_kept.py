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
import json
import threading

import pytest

import labkit as lk
from labkit.events import Observable
from labkit.runs import start
from labkit.views.notebook.board import board
from labkit.views.sweep.board import SweepBoard
from labkit.views.sweep.widget import MOST_BYTES
from tests.conftest import ROOT
from tests.experiments import functions as F
from tests.views.frames_page import Page, frames_of, size
from tests.views.sweep_page_harness import Board, Sweep, served_harness
from tests.views.synthetic_sweep import synthetic_sweep
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
def open_page(site, browser):
    """``open_page(stored, kernel)``: the harness with ``stored`` synced state before it
    loads, and a kernel behind its model or none."""
    with contextlib.ExitStack() as stack:
        boards: list[Board] = []

        def open_(stored: dict, kernel: bool) -> Board:
            ctx = browser.new_context(viewport={"width": 900, "height": 1200})
            stack.callback(ctx.close)
            ctx.add_init_script(f"window.lkStored = {_json(stored)};"
                                f"window.lkNoKernel = {'false' if kernel else 'true'};")
            page = Board(ctx.new_page())
            boards.append(page)
            page.load(site)
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


# -- at 10,000 trials: no message over 100 KB after the first paint, one paint for an ended run ----


def _message_bytes(m: dict) -> int:
    """Bytes of one comm message's data, as a kernel serialises it."""
    return size(m["data"])


def _synthetic_run(n: int, boards: list | None = None):
    """A run that emits a synthetic sweep of ``n`` trials once ``go`` is set; with a board in
    ``boards``, 1/60 of it between two of its frames (each 1/60 in, its frame drawn at once,
    as a control's poke draws, and waited on)."""
    go = threading.Event()

    def job(scope):
        go.wait(60)
        events = list(synthetic_sweep(scope.id, n, end=False))
        every = len(events) // 60
        for i, event in enumerate(events):
            scope.emit(event)
            if boards and i % every == every - 1:
                seen = boards[0].sent
                boards[0].writer.poke(force=True)  # now, not after the pacing's 0.5 s
                wait_until("the board's next frame", lambda: boards[0].sent > seen, 30)  # noqa: B023

    return start("sweep", [Observable()], job, wait=False, detail={"name": "kept-10k"}), go


@pytest.mark.usefixtures("no_thread_leak")
def test_the_kept_frame_of_10000_trials_reaches_the_page_in_parts_of_at_most_100_kb(comms):
    boards: list = []
    run, go = _synthetic_run(10_000, boards)
    b = SweepBoard(run, max_rate=20)
    boards.append(b)
    go.set()
    try:
        run.result(timeout=300)
        wait_stopped(b)
        messages = comms.of(b.widget)
        kept = b.widget.last
        state = comms.state(b.widget)
    finally:
        b.close()
    sent = [m for m in messages if m["msg_type"] == "comm_msg"]
    big = next(i for i, m in enumerate(sent)
               if m["data"].get("content", {}).get("kind") == "paint"
               and m["data"]["content"]["total"] == 10_000)
    after = [_message_bytes(m) for m in sent[big + 1:]]
    assert after and max(after) <= MOST_BYTES, max(after)       # the kept frame's parts too
    updates = [m["data"]["state"] for m in sent if m["data"].get("method") == "update"]
    parts = [u for u in updates if any(k.startswith("kept_") for k in u)]
    assert len(parts) >= 2 and len(json.dumps(kept)) > MOST_BYTES    # in parts, not whole
    assert updates[-1] == {"kept": {"key": 1, "parts": len(parts)}}   # named once all came
    assert not [u for u in updates if u.get("last")]                  # never one update
    assert kept["total"] == 10_000 and state["last"] == kept           # the page joins them


@pytest.mark.usefixtures("no_thread_leak")
def test_the_board_of_an_ended_10000_trial_sweep_sends_its_paint_once_under_1_mb(comms):
    run, go = _synthetic_run(10_000)
    go.set()
    run.result(timeout=300)
    b = SweepBoard(run)                                  # as lk.board(lk.load_sweep(...)) does
    try:
        wait_stopped(b)
        messages = [m for m in comms.of(b.widget) if m["msg_type"] == "comm_msg"]
        kept = b.widget.last
        state = comms.state(b.widget)
        frames = frames_of(comms, b.widget)
    finally:
        b.close()
    contents = [m["data"]["content"] for m in messages if m["data"].get("method") == "custom"]
    paints = [c for c in contents if c.get("kind") == "paint"]
    assert len(paints) == 1 and paints[0]["kept"] == 1 and "rows" not in paints[0]  # by name
    total = sum(_message_bytes(m) for m in messages)
    assert total <= 1_000_000, total                     # was 1.30 MB: the paint, then it kept
    assert max(_message_bytes(m) for m in messages) <= MOST_BYTES
    assert state["last"] == kept and kept["seq"] == paints[0]["seq"] and kept["total"] == 10_000
    assert drawn(Page.of(frames)) == drawn(Page.of([kept]))          # the page draws it whole


@pytest.mark.needs("chromium")
@pytest.mark.parametrize("named_first", [False, True], ids=["parts-first", "paint-first"])
def test_the_page_joins_a_kept_frames_parts_and_draws_the_paint_that_names_it(
        kept_run, open_page, named_first):
    from labkit.views.sweep.widget import kept_parts
    kept = kept_run[0].widget.last
    page = open_page({"last": {}}, kernel=True)          # opened while the sweep ran
    pieces = kept_parts(kept, most=1_000)                # small parts: several of them
    assert len(pieces) >= 3 and all(size({f"kept_{i}": p}) <= 1_000 for i, p in enumerate(pieces))
    named = {"kind": "paint", "seq": kept["seq"], "kept": 4, "status": "finished",
             "ended": True, "clock": {"oldest": 1.0, "newest": 2.0, "events": 3, "sent": 4.0}}
    if named_first:                                      # the paint came before its parts
        page.page.evaluate("m => lkTest.deliver(m)", named)   # (drawn once they come)
    for i, piece in enumerate(pieces):
        page.page.evaluate("([k, v]) => lkTest.change(k, v)", [f"kept_{i}", piece])
    assert page.page.evaluate("() => lkStored.last") == {}   # not before the index
    page.page.evaluate("v => lkTest.change('kept', v)", {"key": 4, "parts": len(pieces)})
    assert page.page.evaluate("() => lkStored.last") == kept  # set in the page: a saved one's
    page.wait_seq(kept["seq"])
    assert page.data()["kept"] == ("0" if named_first else "1")
    if not named_first:
        page.deliver(named)
        page.page.wait_for_function("() => lkTest && document.querySelector("
                                    "'.labkit-sweep-board').dataset.kept === '0'")
    assert [r[0] for r in page.rows()] == sorted(kept["rows"]["id"])
