"""The in-process Bokeh dashboard: a real browser, origins, binding, clean stops."""

import asyncio
import concurrent.futures
import contextlib
import threading
import time
import urllib.request
from urllib.parse import urlparse

import numpy as np
import pytest

import labkit as lk
from labkit.views.bokeh.dashboard import dashboard, running_url, stop_dashboard
from tests.browser import screenshot
from tests.helpers import port_is_free
from tests.views.gated_nodes import GatedPCA, allow

# Reads the number of rows of a named model's data source in the page's Bokeh document.
ROWS_JS = """(name) => {
    if (!window.Bokeh || !Bokeh.documents.length) return -1;
    const model = Bokeh.documents[0].get_model_by_name(name);
    if (!model) return -1;
    const data = model.data_source ? model.data_source.data : model.data;
    const column = data instanceof Map ? data.get("start") ?? data.get("name")
                                       : (data.start ?? data.name);
    return column ? column.length : 0;
}"""

TRAINED_JS = """() => {
    const text = Bokeh.documents[0].get_model_by_name("labkit-node-table").text;
    return (text.match(/labkit-node-row/g) || []).length === 1 && text.includes(">trained<");
}"""


def _get(url: str) -> tuple[int, str]:
    """Status and text of a page (the connection closed again)."""
    with urllib.request.urlopen(url, timeout=60) as response:  # a first page under load
        return response.status, response.read().decode(errors="replace")


def _port(url: str) -> int:
    return urlparse(url).port


def _server_threads():
    return [t.name for t in threading.enumerate()
            if t.name.startswith("labkit-dashboard") or t.name.startswith("labkit-cluster")]


async def _open_websocket(port: int, origin: str):
    """Open the app's websocket with a session token, as BokehJS would, from ``origin``."""
    from bokeh.util.token import generate_jwt_token, generate_session_id
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    token = generate_jwt_token(generate_session_id())
    request = HTTPRequest(f"ws://127.0.0.1:{port}/labkit/ws", headers={"Origin": origin})
    conn = await websocket_connect(request, subprotocols=["bokeh", token])
    try:
        return await asyncio.wait_for(conn.read_message(), 10)   # the server's ACK
    finally:
        conn.close()


def _websocket(port: int, origin: str):
    """:func:`_open_websocket` run to its end on a thread of its own (this thread may hold
    the module's Playwright, whose event loop runs here)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _open_websocket(port, origin)).result()


def _rows_over_time(page, run, gate: str, total: int) -> list[tuple[int, bool]]:
    """The page's task-stream rows and whether ``run`` had finished, polled until all
    ``total`` show.  Chunks train in steps (4, 8, then all): each step once the page showed
    more rows than at the last, so the page must show the stream grow while the run runs."""
    steps, shown, seen = iter([8, total]), 0, []
    allow(gate, 4)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            seen.append((page.evaluate(ROWS_JS, "labkit-task-stream-spans"), run.done()))
            if seen[-1][0] >= total:
                break
            if seen[-1][0] > shown:
                shown = seen[-1][0]
                allow(gate, next(steps, total))
            time.sleep(0.15)
    finally:
        allow(gate, total)  # no chunk left waiting
    return seen


@pytest.mark.needs("chromium")
def test_browser_sees_the_plots_and_a_growing_task_stream(dask_scheduler, browser, tmp_path):
    url = dashboard(dask_scheduler)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/labkit")
    chunks = [np.random.default_rng(i).normal(size=(40, 5)) for i in range(16)]
    gate = str(tmp_path)            # the chunks train in steps, each once the page showed more
    flow = lk.ParallelFlow([GatedPCA(gate, delay=0.1, output_dim=2)])
    with contextlib.closing(browser.new_page(viewport={"width": 1100, "height": 900})) as page:
        page.goto(url)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=30000)
        # Playwright's CSS selectors pierce the shadow roots Bokeh renders into
        for name in ("labkit-device-load", "labkit-task-stream"):
            page.locator(f".{name}").first.wait_for(timeout=60000)
        assert not page.locator(".labkit-node-state").first.is_visible()  # no node yet: hidden
        page.locator(".labkit-task-stream canvas").first.wait_for(timeout=60000)
        page.locator(".labkit-device-load canvas").first.wait_for(timeout=60000)
        screenshot(page, "dashboard-loaded")
        run = flow.train([chunks], scheduler=dask_scheduler, wait=False,
                         join="client")               # a join a chunk: the table counts 16
        seen = _rows_over_time(page, run, gate, len(chunks))   # (rows, run finished)
        screenshot(page, "dashboard-task-stream")
        run.result(timeout=60)
        page.wait_for_function(TRAINED_JS, timeout=60000)   # the phase's end reached the page
        page.locator(".labkit-node-state").first.wait_for(timeout=60000)  # shown with a node
        header = ("() => Bokeh.documents[0].get_model_by_name('labkit-run-progress').text")
        deadline = time.time() + 60                   # the run's header and a bar per phase
        while "finished" not in page.evaluate(header) and time.time() < deadline:
            time.sleep(0.1)
        assert f"train {run.id}" in page.evaluate(header) and "finished" in page.evaluate(header)
        page.locator(".labkit-run-progress progress").first.wait_for(timeout=60000)
        assert page.locator(".labkit-run-progress progress").count() == 1
        cells = page.locator(".labkit-node-table td")
        deadline = time.time() + 60                   # ... and the table shows it, not only holds it
        while "trained" not in cells.all_inner_texts() and time.time() < deadline:
            time.sleep(0.1)
        texts = cells.all_inner_texts()
        assert "trained" in texts and f"{len(chunks)} joins" in texts, texts
        screenshot(page, "dashboard-after-run")
        dask_scheduler.shutdown()                     # with the page still connected
        assert running_url(dask_scheduler) is None and _server_threads() == []
        assert port_is_free(_port(url))
    rows_while_running = [rows for rows, done in seen if not done]
    assert seen[-1][0] == len(chunks)
    assert len(set(r for r in rows_while_running if r > 0)) >= 2, seen   # grew while running


def test_websocket_refuses_a_foreign_origin_and_accepts_its_own(local_scheduler):
    from tornado.httpclient import HTTPClientError
    port = _port(dashboard(local_scheduler))
    assert _websocket(port, f"http://127.0.0.1:{port}") is not None
    assert _websocket(port, f"http://localhost:{port}") is not None
    with pytest.raises(HTTPClientError) as refused:
        _websocket(port, "http://evil.example")
    assert refused.value.code == 403


def test_explicit_origins_are_allowed(local_scheduler):
    port = _port(dashboard(local_scheduler, allow_websocket_origin="tunnel.example:8443"))
    assert _websocket(port, "https://tunnel.example:8443") is not None


def test_listens_on_127_0_0_1_only(local_scheduler):
    import psutil
    port = _port(dashboard(local_scheduler))
    process = psutil.Process()
    connections = (process.net_connections(kind="inet") if hasattr(process, "net_connections")
                   else process.connections(kind="inet"))
    listening = [c for c in connections if c.laddr.port == port and c.status == psutil.CONN_LISTEN]
    assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}


def test_same_url_twice_and_running_url(local_scheduler):
    url = dashboard(local_scheduler)
    assert dashboard(local_scheduler) == url == running_url(local_scheduler)
    html = _get(url)[1]
    assert "/static/js/bokeh.min.js" in html and "cdn.bokeh.org" not in html
    assert stop_dashboard(local_scheduler) and running_url(local_scheduler) is None
    assert not stop_dashboard(local_scheduler)


def test_stops_cleanly_with_the_scheduler(cluster):
    before = {t.ident for t in threading.enumerate()}
    scheduler = lk.DaskScheduler(cluster.scheduler_address)
    url = dashboard(scheduler)
    port = _port(url)
    assert _get(url)[0] == 200
    assert _server_threads() and not port_is_free(port)
    scheduler.shutdown()
    assert running_url(scheduler) is None
    assert port_is_free(port)
    assert _server_threads() == []
    left = [t.name for t in threading.enumerate() if t.ident not in before]
    assert not [n for n in left if "bokeh" in n.lower() or "tornado" in n.lower()
                or n.startswith("labkit")], left


def test_sampler_shows_worker_memory(dask_scheduler, cluster):
    from labkit.views.bokeh.components import Components
    dashboard(dask_scheduler)
    from labkit.views.bokeh.dashboard import _running
    server = _running[id(dask_scheduler)]
    deadline = time.time() + 60
    while time.time() < deadline and len(server.tracker.snapshot().devices) < 2:
        time.sleep(0.1)
    devices = server.tracker.snapshot().devices
    assert {d.name for d in devices} == set(cluster.scheduler_info["workers"])
    assert all(d.memory and d.memory_limit for d in devices)
    c = Components(server.tracker, sampler=server.sampler)
    c.update()
    assert all("0/1 threads busy" in label for label in c.device_source.data["label"])


def test_jupyterhub_link_goes_through_the_server_proxy(local_scheduler, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    monkeypatch.setenv("JUPYTERHUB_PUBLIC_URL", "https://hub.example.org/user/alice/")
    url = dashboard(local_scheduler)
    port = int(url.split("/")[4])
    assert url == f"/user/alice/proxy/{port}/labkit"
    # what jupyter-server-proxy forwards (its prefix stripped) links BokehJS under the prefix
    html = _get(f"http://127.0.0.1:{port}/labkit")[1]
    script = f"/user/alice/proxy/{port}/static/js/bokeh.min.js"
    assert script in html
    assert _get(f"http://127.0.0.1:{port}{script}")[0] == 200
    assert _get(f"http://127.0.0.1:{port}/static/js/bokeh.min.js")[0] == 200
    assert _websocket(port, "https://hub.example.org") is not None


# -- sweeps on the dashboard ------------------------------------------------------------------

# A named model's property, or a source's data as plain arrays, from the page's Bokeh document.
MODEL_JS = """([name, key]) => {
    if (!window.Bokeh || !Bokeh.documents.length) return null;
    const m = Bokeh.documents[0].get_model_by_name(name);
    if (!m) return null;
    if (key !== "data") return m[key];
    const out = {};
    const entries = m.data instanceof Map ? m.data.entries() : Object.entries(m.data);
    for (const [k, column] of entries) out[k] = Array.from(column);
    return out;
}"""

# The values of one column of the grid's rows (in a shadow root: Playwright's CSS pierces it),
# top row first.
SHOWN_JS = """(rows, column) => rows
    .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
    .map(r => r.querySelector(`.slick-cell.l${column}`).textContent)"""


def _shown(page, column: int) -> list[str]:
    return page.locator(".labkit-sweep-table .slick-row").evaluate_all(SHOWN_JS, column)


def _wait(what: str, check, timeout: float = 60.0):
    """Poll ``check()`` until it is true (a page's state, read through Playwright)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _model(page, name: str, key: str):
    return page.evaluate(MODEL_JS, [name, key])


def _wait_model(page, name: str, key: str, test: str, timeout: int = 60000) -> None:
    """Wait until ``test`` (JS, of ``v``: the model's property or data) holds in the page."""
    page.wait_for_function(
        f"([name, key]) => {{ const v = ({MODEL_JS})([name, key]); return v != null && ({test}); }}",
        arg=[name, key], timeout=timeout)


def _first_report(scheduler):
    """An event set at a sweep's first report on ``scheduler``, and what unsubscribes it."""
    reported = threading.Event()
    unsubscribe = scheduler.subscribe(
        lambda e: reported.set() if type(e).__name__ == "TrialReported" else None)
    return reported, unsubscribe


@pytest.mark.needs("chromium")
def test_the_dashboard_lists_every_sweep_and_shows_the_picked_one(tmp_path, browser):
    from tests.experiments import functions as F
    gate = tmp_path / "gate"  # the second sweep runs until the page has shown it running
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        first = lk.sweep(F.curve, {"q": lk.uniform(0.5, 1.0), "steps": 4}, trials=12,
                         metric="acc", mode="max", scheduler=s, store=None, seed=0,
                         name="first-sweep")
        reported, unsubscribe = _first_report(s)
        second = lk.sweep(F.gated_curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.05, "steps": 8,
                                          "gate": str(gate)},
                          trials=8, metric="acc", mode="max", scheduler=s, store=None, seed=1,
                          name="second-sweep", wait=False)
        assert reported.wait(60)
        unsubscribe()
        url = dashboard(s)                                    # opened while the second one runs
        try:
            with contextlib.closing(
                    browser.new_page(viewport={"width": 1200, "height": 1500})) as page:
                page.goto(url)
                _wait_model(page, "labkit-sweep-picker", "options", "v.length == 2")
                options = _model(page, "labkit-sweep-picker", "options")
                first_id = next(iter(s.runs()))                  # the run the scheduler holds first
                assert [o[0] for o in options] == [second.id, first_id]
                assert "second-sweep" in options[0][1] and "first-sweep" in options[1][1]
                assert _model(page, "labkit-sweep-picker", "value") == second.id  # the newest
                # the running sweep is shown at once, with its run in the run panel (not "no run yet")
                _wait_model(page, "labkit-sweep-status", "text",
                            "v.includes('second-sweep') && v.includes('running')")
                _wait_model(page, "labkit-run-progress", "text",
                            "v.includes('second-sweep') && v.includes('running')")
                assert not second.done()
                screenshot(page, "dashboard-sweep-running")
                gate.touch()
                second.result(timeout=120)
                _wait_model(page, "labkit-sweep-status", "text",
                            "v.includes('8 completed') && v.includes('finished')")
                _wait_model(page, "labkit-sweep-table-source", "data",
                            "v.status.length == 8 && v.status.every(x => x == 'completed')")
                lines = _model(page, "labkit-sweep-lines", "data")
                assert sorted(t for t in lines["trial"] if t >= 0) == list(range(8))
                assert sum(map(len, lines["ys"])) == 8 * 8           # every report, once
                # a reader picks the ended one: its board, its trials
                page.locator(".labkit-sweep-picker select").select_option(label=options[1][1])
                _wait_model(page, "labkit-sweep-status", "text", "v.includes('first-sweep')")
                _wait_model(page, "labkit-sweep-table-source", "data", "v.id.length == 12")
                assert _shown(page, 1)[:3] == ["0", "1", "2"]
                # a click on a header sorts the table by it, a second click the other way
                header = page.locator(".labkit-sweep-table .slick-header-column", has_text="latest")
                values = lambda: [float(v) for v in _shown(page, 4)]  # noqa: E731
                header.click()
                _wait("sorted up", lambda: values() == sorted(values()) and len(values()) == 12)
                header.click()
                _wait("sorted down", lambda: values() == sorted(values(), reverse=True))
                assert values()[0] == pytest.approx(max(t.value for t in first.trials), rel=1e-3)
                screenshot(page, "dashboard-sweep-picked")
                assert _model(page, "labkit-sweep-picker", "value") == first_id
        finally:
            gate.touch()  # a failed check leaves no trial waiting


@pytest.mark.needs("chromium")
def test_opened_before_a_sweep_its_trials_are_busy_slots_of_the_worker_named_as_the_board_does(
        tmp_path, browser):
    from tests.experiments import functions as F
    gate = tmp_path / "gate"  # the trials run until the page has shown them busy
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        url = dashboard(s)                                    # opened before the sweep
        try:
            _busy_slots_seen(browser, s, url, F, gate)
        finally:
            gate.touch()  # a failed check leaves no trial waiting


def _busy_slots_seen(browser, s, url: str, F, gate) -> None:
    """The page of ``url`` shows a gated sweep's two trials busy on the one worker, then
    its end."""
    with contextlib.closing(browser.new_page(viewport={"width": 1200, "height": 1200})) as page:
        page.goto(url)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0",
                               timeout=30000)
        run = lk.sweep(F.gated_curve, {"q": lk.uniform(0.5, 1.0), "pause": 0.02,
                                       "steps": 10, "gate": str(gate)},
                       trials=6, metric="acc", mode="max", scheduler=s, store=None,
                       name="slow-sweep", wait=False)
        source = "labkit-device-load-source"
        _wait_model(page, source, "data", "v.label.length == 1 && "
                    "v.label[0].includes('2/2 threads busy') && v.running[0] == 2")
        lanes = _model(page, source, "data")["lane"]
        assert lanes == ["worker 0 (this process, 2 threads)"]
        _wait_model(page, "labkit-run-progress", "text",
                    "v.includes('sweep') && v.includes('2 running')")
        _wait_model(page, "labkit-sweep-status", "text", "v.includes('2 running')")
        _wait_model(page, "labkit-sweep-table-source", "data",
                    "v.worker.filter(w => w == 'worker 0').length == 2")
        assert not run.done()                              # all of it while trials ran
        screenshot(page, "dashboard-sweep-busy")
        gate.touch()
        run.result(timeout=120)
        _wait_model(page, "labkit-run-progress", "text", "v.includes('6 trials done')")
        _wait_model(page, source, "data", "v.label[0].includes('0/2 threads busy')")
