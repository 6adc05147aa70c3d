"""The notebook board after real runs on Dask, seen through the messages its widgets send."""

import re
import time

import numpy as np
import pytest

import labkit as lk
from labkit.events import PhaseStarted
from labkit.views.bokeh import widget as bokeh_widget
from labkit.views.notebook import display
from labkit.views.notebook.board import Board, board
from labkit.views.words import phase_label
from labkit.views.trackers.progress import PhaseProgress
from tests import helpers

pytestmark = pytest.mark.usefixtures("no_thread_leak")

X = np.random.default_rng(1).normal(size=(1200, 5))


def _chunks(n, data=X):
    return np.array_split(data, n)


def _wait_stopped(b: Board, timeout=15.0):
    deadline = time.time() + timeout
    while b.writer.running and time.time() < deadline:
        time.sleep(0.02)
    assert not b.writer.running, "the board did not stop at the end of its run"


def _text(value: str) -> str:
    """A label's words without its markup (its title repeats them: drop it too)."""
    return re.sub(r"<[^>]+>", "", value)


def _row(b: Board, i=0):
    """The i-th phase row of the board's detail (its newest run's phases)."""
    return list(b.phases.rows.values())[i]


@pytest.fixture
def boards():
    """Boards made by a test, closed at its end."""
    made = []
    yield made
    for b in made:
        b.close()


def test_a_scheduler_board_reaches_100_percent(comms, dask_scheduler, boards):
    b = board(dask_scheduler)
    boards.append(b)
    without_lanes = board(dask_scheduler, lanes=False)   # then Bokeh draws the task stream
    boards.append(without_lanes)
    assert "labkit-board" in comms.state(b.widget)["_dom_classes"]
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3)])
    flow.train([_chunks(8)], scheduler=dask_scheduler)
    b.stop()                                   # one final draw
    without_lanes.stop()
    row = _row(b)
    bar, label = comms.state(row.done), comms.state(row.label)
    assert (bar["value"], bar["max"], bar["bar_style"]) == (8, 8, "success")
    assert _text(label["value"]).startswith("node 0 PCA phase 0 — 8/8 (100%) · ")
    assert "tasks/s" in label["value"] and comms.state(row.failed)["value"] == 0
    assert comms.state(row.failed.layout)["display"] == "none"   # no failure: not shown
    assert "labkit-phase" in comms.state(row.box)["_dom_classes"]
    assert "DaskScheduler" in comms.state(b.status)["value"]
    assert "idle" in comms.state(b.status)["value"] and comms.state(b.errors)["value"] == ""
    # the lanes got every span once; the tasks are not drawn a second time by Bokeh
    spans = [s for msg in comms.customs(b.lanes) for s in msg["spans"]]
    assert sorted(s["seq"] for s in spans) == list(range(8))
    if b.components is not None:
        assert b.components.task_stream is None
        assert b.bokeh_model in b.widget.children
    if without_lanes.components is not None:
        stream = without_lanes.components.task_stream.select_one(
            {"name": "labkit-task-stream-spans"})
        assert len(stream.data_source.data["start"]) == 8


def test_a_new_bokeh_view_is_sent_the_whole_document(comms, dask_scheduler, boards):
    b = board(dask_scheduler, lanes=False)
    boards.append(b)
    if b.bokeh_model is None:
        pytest.skip("no Bokeh components")
    lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([_chunks(4)], scheduler=dask_scheduler)
    mark = len(comms)
    # what the kernel does when a front-end says it displayed a view (patches before are lost)
    b.bokeh_model._handle_msg({"content": {"data": {
        "method": "update", "state": {"_view_count": 1}, "buffer_paths": []}}, "buffers": []})
    deadline = time.time() + 30   # the update comes at once; beside a second make test, 5 s was short
    while not comms.updates(b.bokeh_model, since=mark) and time.time() < deadline:
        time.sleep(0.02)
    (update,) = comms.updates(b.bokeh_model, since=mark)
    assert "labkit-task-stream-spans" in str(update["render_bundle"])
    b.stop()


def test_messages_follow_the_draw_rate_not_the_event_rate(comms, dask_scheduler, recorder,
                                                          boards):
    b = board(dask_scheduler)
    boards.append(b)
    dask_scheduler.subscribe(recorder)
    mark = len(comms)
    start = time.monotonic()
    lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([_chunks(200)], scheduler=dask_scheduler)
    elapsed = time.monotonic() - start
    b.stop()
    sent = [m for m in comms.messages[mark:] if m["msg_type"] == "comm_msg"]
    events, draws = len(recorder.events), b.writer.draws
    assert events >= 600 and draws <= elapsed * 10 + 3
    row = _row(b)
    def count(widget):
        return sum(m["msg_type"] == "comm_msg" for m in comms.of(widget, since=mark))

    for widget in (row.done, row.label, b.status):
        assert count(widget) <= draws                           # at most one message a draw
    assert len(comms.customs(b.lanes, since=mark)) <= draws     # new spans: one message a draw
    # a new lane each (a new kind's legend and the recent spans at the end are updates too)
    lanes = [u for u in comms.updates(b.lanes, since=mark) if "workers" in u]
    assert len(lanes) <= len(b.lanes.workers)
    if b.bokeh_model is not None:  # one batched patch a draw (header, metadata, content)
        assert count(b.bokeh_model) <= 3 * draws
    rate = len(sent) / elapsed
    size = sum(len(repr(m["data"])) for m in sent) / elapsed
    # Jupyter's server drops iopub output above 1000 messages/s (bytes count for streams only)
    assert rate < 100 and size < 250_000, (rate, size)
    assert len(sent) < events / 5
    # only what changed: progress updates never re-send the whole state
    for state in comms.updates(row.done, since=mark):
        assert set(state) <= {"value", "max", "bar_style"}
    assert not any("recent" in s for s in comms.updates(b.lanes, since=mark)[:-1])


def test_a_failed_task_is_listed_with_its_place(comms, dask_scheduler, boards):
    b = board(dask_scheduler, bokeh=False)
    boards.append(b)
    bad = [c.copy() for c in _chunks(6)]
    bad[3][0, 0] = 999
    with pytest.raises(lk.TaskError):
        lk.ParallelFlow([helpers.FussyPCA(output_dim=2)]).train([bad], scheduler=dask_scheduler)
    b.stop()
    errors = comms.state(b.errors)["value"]
    assert "999 is not a sample" in errors and "chunk 3" in errors
    assert "node 0 &#x27;FussyPCA&#x27;" in errors and "phase 0" in errors
    row = _row(b)
    assert comms.state(row.done)["bar_style"] == "danger"
    failed = comms.state(row.failed)
    assert failed["value"] == 1 and failed["bar_style"] == "danger"
    assert comms.state(row.failed.layout)["display"] != "none"   # shown, in its place
    assert "1 failed" in _text(comms.state(row.label)["value"])
    spans = [s for msg in comms.customs(b.lanes) for s in msg["spans"]]
    assert [s["color"] for s in spans if not s["ok"]] == ["#d62728"]


def test_cancel_button_cancels_the_run_and_restores_the_node(comms, dask_scheduler, boards):
    flow = lk.ParallelFlow([helpers.SlowPCA(delay=0.3, output_dim=3)])
    run = flow.train([_chunks(12)], scheduler=dask_scheduler, wait=False)
    b = board(run, bokeh=False)
    boards.append(b)
    button = b.cancel_button
    assert not comms.state(button)["disabled"]
    deadline = time.monotonic() + 60
    while not b.tracker.snapshot().devices:     # tasks under way on the board's devices
        assert time.monotonic() < deadline and not run.done(), "no task was seen starting"
        time.sleep(0.02)
    button.click()
    with pytest.raises(lk.CancelledError):
        run.result(timeout=30)
    assert run.cancelled()
    assert flow[0].is_training() and flow[0].samples_seen == 0
    _wait_stopped(b)                           # the board stops by itself at the run's end
    state = comms.state(button)
    assert state["disabled"] and state["description"] == "Cancelled"
    assert "cancelled" in comms.state(b.status)["value"]
    assert comms.state(b.errors)["value"] == ""   # a cancel is not an error
    label = comms.state(_row(b).label)["value"]   # the phase says so, not "failed" in red
    assert "cancelled" in label and "failed" not in label and "#d62728" not in label
    assert comms.state(_row(b).done)["bar_style"] == "warning"
    load = b.tracker.snapshot().devices           # no task of the run counted as running
    assert load and all(d.running == 0 for d in load)
    time.sleep(0.2)
    assert all(d.busy < 0.99 for d in b.tracker.snapshot().devices)


def test_a_run_board_shows_that_run_and_stops_with_it(comms, dask_scheduler, boards):
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    flow.train([_chunks(4)], scheduler=dask_scheduler)
    run = flow.execute(_chunks(5), scheduler=dask_scheduler, wait=False)
    b = board(run, bokeh=False)
    boards.append(b)
    # another run's events on the same scheduler are not this board's
    dask_scheduler.emit(PhaseStarted("train-other", 0, "PCA", 0, local=False, n_tasks=3))
    assert run.result(timeout=60).shape == (1200, 2)
    _wait_stopped(b)
    assert "finished" in comms.state(b.status)["value"]
    assert comms.state(b.cancel_button)["disabled"]
    labels = [_text(comms.state(r.label)["value"]) for r in b.phases.rows.values()]
    assert len(labels) == 1 and labels[0].startswith("execute — 5/5 (100%)")


def test_the_board_displays_its_widget_and_links_the_dashboard(comms, boards):
    with lk.LocalScheduler() as s:
        b = board(s, dashboard_url="http://127.0.0.1:8790/labkit", bokeh=False, lanes=False)
        boards.append(b)
        bundle = b._repr_mimebundle_()
        view = bundle["application/vnd.jupyter.widget-view+json"]
        assert view["model_id"] == b.widget.model_id
        assert 'href="http://127.0.0.1:8790/labkit"' in comms.state(b.link)["value"]
        assert b.link in b.widget.children and b.lanes is None and b.bokeh_model is None
        assert b.writer.running
    assert not b.writer.running                # the scheduler's shutdown stopped the board
    assert "shut down" in comms.state(b.status)["value"]


def test_closing_a_board_closes_its_widgets(comms):
    with lk.LocalScheduler() as s:
        b = board(s)
        s.add_task(1, lambda x: x)
        s.get_results()
        b.close()
        b.close()                                # idempotent
        assert not b.writer.running
        assert all(w.comm is None for w in b._all_widgets())
        closed = {m["comm_id"] for m in comms.messages if m["msg_type"] == "comm_close"}
        assert len(closed) >= len(b._all_widgets())


def test_phase_label_formats():
    p = PhaseProgress("r", 0, "PCA", 0, done=3, total=8, started=100.0)
    label = phase_label(p, now=101.0)
    assert label == "node 0 PCA phase 0 — 3/8 (37%) · 3.0 tasks/s · ETA 1.7 s"
    p = PhaseProgress("r", None, "execute", None, done=8, total=8, started=100.0, finished=102.0)
    assert phase_label(p) == "execute — 8/8 (100%) · 4.0 tasks/s · 2.00 s"
    p = PhaseProgress("r", 1, "PCA", 0, local=True)
    assert phase_label(p) == "node 1 PCA phase 0 — training locally"


def test_register_is_a_no_op_without_ipython():
    from IPython import get_ipython
    assert get_ipython() is None
    assert display.register() is False and display.register() is False
    assert bokeh_widget.load_bokehjs_once() is False


def test_register_shows_a_run_as_its_board_in_ipython(comms, dask_scheduler):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        assert display.register() is True and display.register() is True   # idempotent
        formatter = shell.display_formatter.ipython_display_formatter
        assert formatter.lookup_by_type(lk.Run) is display.display_run
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        run = flow.train([_chunks(4)], scheduler=dask_scheduler, wait=False)
        mark = len(comms)
        shell.display_formatter.format(run)
        run.result(timeout=60)
        boxes = {m["comm_id"] for m in comms.messages[mark:]
                 if "labkit-board" in m["data"].get("state", {}).get("_dom_classes", ())}
        assert len(boxes) == 1                  # one board was made and displayed
    finally:  # leave no shell, no formatter and no notebook output mode behind
        from bokeh.io import reset_output
        display._registered_in.discard(id(shell))
        bokeh_widget._bokehjs_loaded = False
        InteractiveShell.clear_instance()
        reset_output()


def test_pipeline_stage_stats_appear_on_the_scheduler_board(comms, local_scheduler, boards):
    b = board(local_scheduler, bokeh=False, lanes=False)
    boards.append(b)
    q = lk.pipe(range(1000), name="tokenise", processor=str, on_event=local_scheduler)
    assert len(list(q)) == 1000
    b.stop()  # the final draw
    table = comms.state(b.stages)["value"]
    assert "tokenise" in table and re.search(r"<td class='num'[^>]*>1,000</td>", table) and "done" in table


def test_a_trainer_board_shows_device_load_epochs_and_the_loss(comms, boards):
    torch = pytest.importorskip("torch")
    from labkit.data_parallel import DataParallelTrainer
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    data = [(torch.randn(32, 5), torch.randn(32, 1)) for _ in range(6)]
    trainer = DataParallelTrainer(model, torch.nn.functional.mse_loss,
                                  torch.optim.SGD(model.parameters(), lr=0.05),
                                  devices=["cpu:0", "cpu:1"], work_load="auto")
    b = board(trainer, lanes=False)
    boards.append(b)
    history = trainer.fit(data, epochs=3)
    trainer.close()  # the board stops with it, after a final draw
    assert not b.writer.running
    # a fit's words: the whole fit's bar and the epoch's, then the epochs as fit returned them
    outer = _text(comms.state(b.fit.outer.label)["value"])
    inner = _text(comms.state(b.fit.inner.label)["value"])
    assert outer.startswith("epoch 3/3 · ") and outer.endswith("finished"), outer
    assert inner.startswith("batch 6/6 (100%)") and "samples/s" in inner, inner
    assert comms.state(b.fit.outer.done)["value"] == 3 == comms.state(b.fit.outer.done)["max"]
    table = comms.state(b.fit.epochs)["value"]
    assert table.count("<tr>") == 4                       # a header and three epochs
    # the page holds every epoch's row by the time its bar reads "finished": the table's
    # last change is sent before the bar's first "finished" (a page read in between showed
    # three rows of four, issue 44)
    sent = [(i, m) for i, m in enumerate(comms.messages) if m["data"].get("method") == "update"]
    ids = {b.fit.epochs.comm.comm_id: "epochs", b.fit.outer.label.comm.comm_id: "outer"}
    finished = min(i for i, m in sent if ids.get(m["comm_id"]) == "outer"
                   and "finished" in m["data"]["state"].get("value", ""))
    last_table = max(i for i, m in sent if ids.get(m["comm_id"]) == "epochs")
    assert last_table < finished, (last_table, finished)
    for record in history:
        loss = re.escape(f"{record['loss']:.4g}")
        assert re.search(rf"<td class='num'[^>]*>{loss}</td>", table), (loss, table)
    assert not any(w in outer + inner for w in ("node", "tasks/s", "phase"))
    node = b.tracker.snapshot().nodes[-1]
    assert not node.training                    # trained, after the fit (not "training")
    assert "DataParallelTrainer" in comms.state(b.status)["value"]
    if b.components is not None:
        devices = b.components.device_source.data
        assert list(devices["name"]) == ["cpu:0", "cpu:1"]
        assert set(devices["kind"]) == {"device"} and all("share" in s for s in devices["label"])
        # the fit ended: its last frame shows no load left on any device
        assert all(v == 0 for v in devices["samples_per_s"]) and all(v == 0 for v in devices["busy"])


def test_an_ensemble_board_speaks_of_layers_and_fits_and_hides_the_node_panel(comms, boards):
    from sklearn.linear_model import LinearRegression, Ridge
    from labkit.ensemble import FoldIndex, Layer, ParallelProcessing
    y = X @ np.arange(1.0, 6.0)
    layers = [Layer([("ridge", Ridge()), ("ols", LinearRegression())], FoldIndex(3),
                    name="base"),
              Layer([("meta", Ridge())], FoldIndex(2), name="meta")]
    with lk.LocalScheduler() as s:
        run = ParallelProcessing(s).stack(layers, X, y, wait=False)
        b = board(run, lanes=False)
        boards.append(b)
        run.result(timeout=60)
        _wait_stopped(b)
    labels = [_text(comms.state(r.label)["value"]) for r in b.phases.rows.values()]
    assert [t.split(" — ")[0] for t in labels] == ["layer base", "layer meta"], labels
    assert "8/8 fits (100%)" in labels[0] and "2 estimators × 3 folds (+ 2 final fits)" \
        in labels[0], labels
    assert "3/3 fits (100%)" in labels[1] and "1 estimator × 2 folds" in labels[1], labels
    assert not any("node" in t or "tasks/s" in t for t in labels), labels
    if b.components is not None:                  # no node to show: no empty node panel
        assert not b.components.node_state.visible


def test_finished_phases_fold_into_one_line_past_the_row_limit(comms, boards):
    with lk.LocalScheduler() as s:
        b = Board(s, bokeh=False, lanes=False, max_phase_rows=3)
        boards.append(b)
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=X.shape[1]) for _ in range(10)])
        flow.train([_chunks(2)] * 10, scheduler=s)
        b.stop()
    labels = [_text(comms.state(r.label)["value"]) for r in b.phases.rows.values()]
    assert [t.split(" — ")[0] for t in labels] == \
        ["node 7 PCA phase 0", "node 8 PCA phase 0", "node 9 PCA phase 0"], labels
    assert _text(comms.state(b.phases.folded)["value"]) == "7 earlier rows (7 finished)"
    children = comms.state(b.phases.widget)["children"]
    assert len(children) == 4 and children[0].endswith(b.phases.folded.model_id)


def test_the_stage_table_shows_quick_stages_in_ms_not_zero_seconds():
    from labkit.pipeline import StageStats
    from labkit.views.words import stage_table
    table = stage_table([StageStats("decode", 100, 5000.0, 0.0042, 0.5, True),
                         StageStats("slow", 10, 2.0, 3.5, None, False)])
    # a cell holds exactly the time (the one stage table styles its cells: "<td class=..>")
    assert ">4.2 ms</td>" in table and ">3.50 s</td>" in table and "0.00 s" not in table


def test_a_failed_phase_counts_its_failed_and_its_cancelled_tasks():
    p = PhaseProgress("r", 0, "PCA", 0, submitted=6, failed=1, total=None, started=0.0,
                      finished=1.0, ok=False)
    label = phase_label(p, now=1.0)
    assert "1 failed" in label and "5 cancelled" in label and label.endswith("failed")


def test_a_scheduler_board_lays_out_a_row_per_run(comms, boards):
    """Two runs: a row each, in the board's widget tree (not only in the comm's state)."""
    with lk.LocalScheduler() as s:
        b = Board(s, bokeh=False, lanes=False)
        boards.append(b)
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=X.shape[1])])
        flow.train([_chunks(2)], scheduler=s)
        flow.execute(_chunks(3), scheduler=s)
        b.stop()
    rows = list(b.runs.rows.values())
    assert len(rows) == 2
    children = comms.state(b.runs.widget)["children"]
    assert [c.split("IPY_MODEL_")[-1] for c in children] == \
        [w.model_id for row, table in rows for w in (row.box, table)]
    labels = [_text(comms.state(row.label)["value"]) for row, _ in rows]
    assert labels[0].startswith("train ") and labels[1].startswith("execute "), labels


def test_a_boards_first_draw_sends_its_words_and_its_node_plots_come_in_the_next(
        comms, local_scheduler, boards, monkeypatch):
    """A board shown while its run goes: the first draw makes no Bokeh figure (the page is
    making every widget's view then), and the writer draws again at once to make them."""
    from labkit.events import NodeJoined
    from labkit.views.bokeh.components import Components
    calls = []
    update = Components.update

    def recorded(self, snap=None, new_plots=None):
        later = update(self, snap, new_plots)
        calls.append((new_plots, later))
        return later

    start = Board.start

    def start_after_two_joins(self):  # the run's nodes joined before the first draw
        for node in (0, 1):
            self.tracker(NodeJoined("r", node, "PCA", 0, 1, {
                "phase": 0, "phases": 1, "training": True, "samples": 10,
                "plots": {"eigenvalues": [2.0, 1.0]}}))
        start(self)

    monkeypatch.setattr(Components, "update", recorded)
    monkeypatch.setattr(Board, "start", start_after_two_joins)
    b = board(local_scheduler, lanes=False)
    boards.append(b)
    deadline = time.monotonic() + 60
    while len(calls) < 2 and time.monotonic() < deadline:   # the draw the first one asked for
        time.sleep(0.01)
    assert calls[:2] == [(0, True), (None, False)], calls
    names = [f.name for f in b.components.node_plots.children]
    assert names == ["labkit-node-plot-r-0", "labkit-node-plot-r-1"]
    b.stop()
    assert all(n is None for n, _ in calls[1:])


def test_a_board_whose_first_draw_is_its_last_makes_every_node_plot(local_scheduler, boards,
                                                                    monkeypatch):
    from labkit.events import NodeJoined
    from labkit.views.bokeh.components import Components
    calls = []
    update = Components.update
    monkeypatch.setattr(Components, "update", lambda self, snap=None, new_plots=None: (
        calls.append(new_plots), update(self, snap, new_plots))[1])
    start = Board.start

    def stopped_at_start(self):  # stopped before its writer drew anything
        self.tracker(NodeJoined("r", 0, "PCA", 0, 1, {
            "phase": 0, "phases": 1, "training": True, "samples": 10,
            "plots": {"eigenvalues": [2.0, 1.0]}}))
        start(self)
        self.stop()

    monkeypatch.setattr(Board, "start", stopped_at_start)
    b = board(local_scheduler, lanes=False)
    boards.append(b)
    assert not b.writer.running
    assert [f.name for f in b.components.node_plots.children] == ["labkit-node-plot-r-0"]
    assert calls[-1] is None
