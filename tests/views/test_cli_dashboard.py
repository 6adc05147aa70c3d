"""``labkit dashboard``: serves a cluster's dashboard until SIGTERM, then leaves nothing."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

from tests.conftest import ROOT
from tests.helpers import port_is_free

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "labkit", "dashboard", "--scheduler", cluster.scheduler_address,
         "--port", str(port), "--allow-websocket-origin", "tunnel.example:8443"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = _read_url(process)
        assert url == f"http://127.0.0.1:{port}/labkit"
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
