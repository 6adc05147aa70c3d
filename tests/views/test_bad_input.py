"""The views' and the command line's bad-input table.

Each case gives ``lk.board``, ``lk.dashboard``, a console progress, a runner or
``labkit dashboard`` one bad input and checks the labkit error (or, for the
command, one line on standard error and a non-zero status, no traceback), that
it names the argument, that the refused view left nothing subscribed, and that
the same scheduler is served right after.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest

import labkit as lk
from labkit.views import ConsoleProgress
from labkit.views.notebook.board import Board
from labkit.views.bokeh.dashboard import dashboard, stop_dashboard
from tests.conftest import ROOT


def _busy_port(sock):
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock.getsockname()[1]


VIEW_CASES = {
    "board of an int": (lambda s, _: lk.board(5), lk.InputError, ("lk.board", "int 5")),
    "board of a str": (lambda s, _: lk.board("tcp://127.0.0.1:8786"), lk.InputError,
                       ("lk.board", "lk.DaskScheduler('tcp://host:8786')")),
    "board of None": (lambda s, _: lk.board(None), lk.InputError, ("lk.board", "NoneType")),
    "dashboard of a str": (lambda s, _: dashboard("abc"), lk.InputError,
                           ("lk.dashboard", "'abc'")),
    "dashboard of a list": (lambda s, _: dashboard([s]), lk.InputError, ("lk.dashboard", "list")),
    "dashboard port -1": (lambda s, _: dashboard(s, port=-1), lk.InputError, ("port", "-1")),
    "dashboard port 70000": (lambda s, _: dashboard(s, port=70000), lk.InputError,
                             ("port", "70000")),
    "dashboard port a str": (lambda s, _: dashboard(s, port="8080"), lk.InputError,
                             ("port", "'8080'")),
    "dashboard port True": (lambda s, _: dashboard(s, port=True), lk.InputError, ("port",)),
    "dashboard port busy": (lambda s, sock: dashboard(s, port=_busy_port(sock)), lk.InputError,
                            ("port", "in use", "port=0")),
    "dashboard origins an int": (lambda s, _: dashboard(s, allow_websocket_origin=5),
                                 lk.InputError, ("allow_websocket_origin", "5")),
    "console progress of an int": (lambda s, _: ConsoleProgress(5), lk.InputError,
                                   ("ConsoleProgress", "int 5")),
    "console progress max_rate 0": (lambda s, _: ConsoleProgress(s, max_rate=0),
                                    lk.InputError, ("max_rate", "0")),
    "console progress stream an int": (lambda s, _: ConsoleProgress(s, stream=5),
                                       lk.InputError, ("stream", "int 5")),
    "board max_rate 0": (lambda s, _: Board(s, bokeh=False, lanes=False, max_rate=0),
                         lk.InputError, ("max_rate", "0")),
    "runner of an int": (lambda s, _: lk.runner(5), lk.InputError, ("lk.runner", "int 5")),
}


@pytest.mark.parametrize("name", list(VIEW_CASES))
def test_bad_view_input_is_a_located_labkit_error_and_the_scheduler_is_served_after(name):
    bad, error, words = VIEW_CASES[name]
    with lk.LocalScheduler() as s, socket.socket() as sock:
        with pytest.raises(error) as info:
            bad(s, sock)
        message = str(info.value)
        assert isinstance(info.value, lk.LabkitError)
        assert all(word in message for word in words), message
        assert not s.has_subscribers                         # a refused view listens to nothing
        url = dashboard(s)                                   # the same scheduler, right after
        with urllib.request.urlopen(url, timeout=20) as response:
            assert response.status == 200
        assert stop_dashboard(s)


def test_dashboard_of_a_shut_down_scheduler_says_so():
    s = lk.LocalScheduler()
    s.shutdown()
    with pytest.raises(lk.SchedulerError, match="shut down"):
        dashboard(s)


def test_dashboard_of_a_run_serves_it_and_stops_with_its_scheduler():
    """A run (``wait=False``) is followed like a scheduler; its server ends with the
    run's scheduler, and no port is left listening."""
    from tests.helpers import port_is_free
    s = lk.LocalScheduler()
    flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
    run = flow.train([[np.random.default_rng(k).normal(size=(20, 4)) for k in range(3)]],
                     scheduler=s, wait=False)
    url = dashboard(run)
    assert dashboard(run) == url
    port = int(url.split(":")[2].split("/")[0])
    run.result(30)
    with urllib.request.urlopen(url, timeout=20) as response:
        assert response.status == 200
    s.shutdown()
    assert port_is_free(port)
    assert not stop_dashboard(run)


def _get(url: str, host: str) -> int:
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_pages_only_for_the_hosts_it_was_told_about(local_scheduler):
    url = dashboard(local_scheduler, allow_websocket_origin="tunnel.example:8443")
    port = url.split(":")[2].split("/")[0]
    assert _get(url, f"127.0.0.1:{port}") == 200
    assert _get(url, f"localhost:{port}") == 200
    assert _get(url, "tunnel.example:8443") == 200            # told about it
    assert _get(url, "evil.example") == 403                   # DNS rebinding, say
    assert _get(url, f"evil.example:{port}") == 403
    assert _get(url.replace("/labkit", "/static/js/bokeh.min.js"), "evil.example") == 403


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "labkit", "dashboard", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


CLI_CASES = {
    "unreachable scheduler": (("--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "2"), 1,
                              ("tcp://127.0.0.1:1", "within 2 s")),
    "not an address": (("--scheduler", "not an address"), 2, ("'not an address'",)),
    "port out of range": (("--scheduler", "tcp://127.0.0.1:1", "--port", "70000"), 2,
                          ("--port",)),
    "connect timeout zero": (("--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "0"), 2,
                             ("connect_timeout",)),
    "connect timeout inf": (("--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "inf"),
                            2, ("connect_timeout", "finite")),
}


@pytest.mark.parametrize("name", list(CLI_CASES))
def test_the_command_prints_one_line_and_exits_non_zero(name):
    args, status, words = CLI_CASES[name]
    done = _cli(*args)
    assert done.returncode == status, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("labkit dashboard: "), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert all(word in lines[0] for word in words), lines[0]
