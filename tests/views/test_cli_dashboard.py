"""``labkit dashboard``: serves a cluster's dashboard until SIGTERM, then leaves nothing."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.conftest import ROOT
from tests.helpers import port_is_free


def _port_of(url: str) -> int:
    """The port in ``http://127.0.0.1:PORT/labkit``, as the command printed it."""
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/labkit", url)
    assert match, url
    return int(match.group(1))


def _read_url(process, timeout: float = 60.0) -> str:
    """The URL the command prints (its first line on standard output)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("labkit dashboard: http"):
            return line.split(": ", 1)[1].strip()
    raise AssertionError("the command printed no URL")


def test_cli_serves_the_dashboard_until_sigterm(cluster):
    # --port 0: the command binds a port the system gives it and prints it (a port picked
    # here and bound later could be taken in between)
    process = subprocess.Popen(
        [sys.executable, "-m", "labkit", "dashboard", "--scheduler", cluster.scheduler_address,
         "--port", "0", "--allow-websocket-origin", "tunnel.example:8443"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = _read_url(process)
        port = _port_of(url)
        with urllib.request.urlopen(url, timeout=20) as response:
            assert response.status == 200
            html = response.read().decode()
        assert "bokeh" in html.lower() and "/static/js/bokeh.min.js" in html
        process.send_signal(signal.SIGTERM)             # only this process, by its pid
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "stopping" in out
    assert port_is_free(port)


def test_cli_rejects_a_bad_port():
    from labkit.cli import main
    assert main(["dashboard", "--scheduler", "tcp://127.0.0.1:1", "--port", "70000"]) == 2


# -- labkit dashboard --store STORE ---------------------------------------------------------------

# A sweep that writes the store STORE from another process, a trial about every 0.3 s.
WRITER = ("import sys, labkit as lk\n"
          "from tests.experiments import functions as F\n"
          "lk.sweep(F.curve, {'q': lk.uniform(0.5, 1.0), 'pause': 0.05, 'steps': 6}, trials=30,\n"
          "         metric='acc', mode='max', store=sys.argv[1], name='written-elsewhere', seed=0)\n")

STATUS_JS = """() => {
    if (!window.Bokeh || !Bokeh.documents.length) return null;
    const doc = Bokeh.documents[0];
    const status = doc.get_model_by_name("labkit-sweep-status");
    const picker = doc.get_model_by_name("labkit-sweep-picker");
    if (!status || !picker) return null;
    const m = status.text.match(/data-status="completed">(\\d+) completed/);
    return {completed: m ? Number(m[1]) : 0, text: status.text,
            options: picker.options.map(o => o[1])};
}"""


def _serve_store(path: str, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "labkit", "dashboard", "--store", path, "--port", str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.needs("chromium")
def test_cli_serves_a_stores_sweeps_live_while_another_process_writes_them(tmp_path):
    import labkit as lk
    from tests.browser import chromium, screenshot
    from tests.experiments import functions as F
    path = str(tmp_path / "sweeps.db")
    lk.sweep(F.quadratic, {"x": lk.uniform(0, 1)}, trials=2, metric="loss", mode="min",
             store=path, name="earlier")                 # a store with a sweep in it
    server, writer = _serve_store(path, 0), None
    try:
        url = _read_url(server)
        port = _port_of(url)
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 1300})
            page.goto(url)
            page.wait_for_function(f"() => {{ const v = ({STATUS_JS})(); return v && "
                                   "v.options.some(o => o.includes('earlier')); }",
                                   timeout=60000)
            writer = subprocess.Popen([sys.executable, "-c", WRITER, path], cwd=ROOT,
                                      env={**os.environ, "PYTHONPATH": ROOT})
            # the new sweep comes into the picker, picked (the newest), and grows
            page.wait_for_function(f"() => {{ const v = ({STATUS_JS})(); return "
                                   "v.options[0].includes('written-elsewhere') && "
                                   "v.text.includes('sweep written-elsewhere'); }",
                                   timeout=60000)
            seen = []                                     # completed trials shown, over time
            while writer.poll() is None:
                seen.append(page.evaluate(STATUS_JS)["completed"])
                time.sleep(0.2)
            assert writer.returncode == 0
            page.wait_for_function(f"() => ({STATUS_JS})().completed == 30", timeout=60000)
            final = page.evaluate(STATUS_JS)
            assert "sweep written-elsewhere" in final["text"] and "ended" in final["text"]
            assert len(final["options"]) == 2 and "earlier" in final["options"][1]
            table = page.evaluate("""() => Bokeh.documents[0]
                .get_model_by_name("labkit-sweep-table-source").data.status.length""")
            assert table == 30
            screenshot(page, "dashboard-store")
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=60)
        assert server.returncode == 0, err
        assert "stopping" in out and "Traceback" not in err
    finally:
        for process in (writer, server):
            if process is not None and process.poll() is None:
                process.kill()
                process.communicate()
    assert len(set(seen)) >= 3 and seen == sorted(seen), seen  # it grew while the sweep wrote
    assert port_is_free(port)


@pytest.mark.parametrize("what", ["missing", "not a store"])
def test_cli_refuses_a_path_that_is_no_sweep_store_naming_it(tmp_path, what):
    path = tmp_path / "sweeps.db"
    if what == "not a store":
        path.write_text("not sqlite at all")
    process = _serve_store(str(path), 0)
    out, err = process.communicate(timeout=60)
    assert process.returncode != 0 and out == ""
    assert err.startswith("labkit dashboard: --store: ") and str(path) in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_takes_a_scheduler_or_a_store_not_both():
    from labkit.cli import main
    assert main(["dashboard"]) == 2
    assert main(["dashboard", "--scheduler", "tcp://127.0.0.1:1", "--store", "x.db"]) == 2
