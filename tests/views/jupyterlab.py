"""A throw-away JupyterLab server for the browser tests.

``with jupyter_lab() as (url, token, root_dir):`` starts the virtual
environment's ``jupyter lab`` on 127.0.0.1 with a random token, serving a
temporary root folder.  The server binds port 0 itself and the port is read
from the server (its ``jpserver-<pid>.json``, and the process listening on it):
a port picked here and bound later could be taken in between (a Dask comm took
one once, and the HTTP check read Dask's handshake).  Jupyter's user config, data and runtime
folders and IPython's folder point into temporary folders, so nothing outside
is read or written; the environment's own ``share/jupyter`` stays on the data
path, so the lab extensions installed there (ipywidgets, jupyter_bokeh,
anywidget) load.  The repository root goes on ``PYTHONPATH`` of the server and
so of its kernels (``import tests.helpers`` works in a notebook).

On exit the server is terminated by its pid (killed if it does not stop), any
process it started that is still alive afterwards (a kernel, a kernel's Dask
workers) is ended by its pid too, and the temporary folders are removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JUPYTER = os.path.join(os.path.dirname(sys.executable), "jupyter")


def _needs_browser() -> list:
    """The marks of a test that drives JupyterLab in Chromium (see :mod:`tests.system`)."""
    import pytest
    return [pytest.mark.needs("chromium", "jupyter")]


#: ``pytestmark`` of the JupyterLab browser tests.
NEEDS_BROWSER = _needs_browser()


def isolated_env(scratch: str) -> dict:
    """The server's environment: Jupyter and IPython folders under ``scratch``."""
    env = dict(os.environ)
    for name, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                      ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")]:
        env[name] = os.path.join(scratch, sub)
        os.makedirs(env[name], exist_ok=True)
    env.pop("JUPYTER_PATH", None)          # the venv's share/jupyter comes from sys.prefix
    env.pop("JUPYTER_PLATFORM_DIRS", None)
    paths = [ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != ROOT]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    quiet_settings(env["JUPYTER_CONFIG_DIR"])
    return env


def quiet_settings(config_dir: str) -> None:
    """User settings in the temporary config folder: no "Jupyter news?" prompt, and every
    cell kept in the page (no windowing: a board scrolled out of view still draws)."""
    settings = os.path.join(config_dir, "lab", "user-settings", "@jupyterlab")
    for folder, name, values in [
            ("apputils-extension", "notification", {"fetchNews": "false",
                                                    "checkForUpdates": False}),
            ("notebook-extension", "tracker", {"windowingMode": "none"})]:
        os.makedirs(os.path.join(settings, folder), exist_ok=True)
        with open(os.path.join(settings, folder, f"{name}.jupyterlab-settings"), "w") as f:
            json.dump(values, f)


def save_widget_state(root_dir: str) -> None:
    """Have JupyterLab save the widgets' state with the notebook (its widget manager's
    ``saveState``), for pages opened from now on; ``root_dir`` as :func:`jupyter_lab` gave it."""
    folder = os.path.join(os.path.dirname(root_dir), "config", "lab", "user-settings",
                          "@jupyter-widgets", "jupyterlab-manager")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "plugin.jupyterlab-settings"), "w") as f:
        json.dump({"saveState": True}, f)


def server_command(port: int, token: str, root_dir: str) -> list[str]:
    """``jupyter lab`` on ``port`` (0: the server binds a port the system gives it)."""
    return [JUPYTER, "lab", "--no-browser", "--allow-root", "--ServerApp.open_browser=False",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root_dir}", f"--IdentityProvider.token={token}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly"]  # an offline machine: no PyPI, no news


def api(url: str, token: str, path: str, method: str = "GET", timeout: float = 10):
    """Call the server's REST API; returns the decoded JSON (``None`` when empty)."""
    request = urllib.request.Request(f"{url}{path}", method=method,
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return json.loads(body) if body else None


def _log_tail(log_path: str, n: int = 4000) -> str:
    with open(log_path, errors="replace") as f:
        return f.read()[-n:]


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` itself listens on."""
    import psutil
    try:
        found = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return set()
    return {c.laddr.port for c in found if c.status == psutil.CONN_LISTEN}


def served_port(proc, runtime_dir: str, log_path: str, timeout: float = 90) -> int | None:
    """The port the server ``proc`` listens on, read from the server itself.

    Jupyter writes ``jpserver-<pid>.json`` (its port) before it binds; the port counts
    once this very process listens on it, so a port another process holds (a Dask comm,
    whose bytes are no HTTP) is never taken for the server.  ``None``: the server exited
    because its port was taken before it bound it (start it again).
    """
    info = os.path.join(runtime_dir, f"jpserver-{proc.pid}.json")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = _log_tail(log_path)
            if "already in use" in log or "is not available" in log:
                return None
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log}")
        with contextlib.suppress(OSError, ValueError, KeyError):
            with open(info) as f:
                port = int(json.load(f)["port"])
            if port in listening_ports(proc.pid):
                return port
        time.sleep(0.1)
    raise TimeoutError(f"jupyter lab bound no port in {timeout:.0f} s:\n{_log_tail(log_path)}")


def start_server(command: list[str], cwd: str, env: dict, log_path: str,
                 attempts: int = 3, timeout: float = 90):
    """Start ``command`` (a ``jupyter lab`` on port 0); returns ``(proc, port)``.

    Jupyter itself picks a free port, closes it and binds it a moment later; another
    process can take it in between, and the server then exits.  It is started again,
    up to ``attempts`` times.
    """
    for _ in range(attempts):
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT)
        try:
            port = served_port(proc, env["JUPYTER_RUNTIME_DIR"], log_path, timeout)
        except BaseException:
            stop_server(proc)
            raise
        if port is not None:
            return proc, port
        stop_server(proc)
    raise RuntimeError(f"jupyter lab lost its port {attempts} times:\n{_log_tail(log_path)}")


def wait_until_up(proc, url: str, token: str, log_path: str, timeout: float = 90) -> None:
    """Poll ``/api/status`` until it answers; fail if the server exits or the deadline passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{_log_tail(log_path)}")
        try:
            api(url, token, "/api/status", timeout=2)
            return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.2)
    raise TimeoutError(f"jupyter lab did not answer in {timeout:.0f} s:\n{_log_tail(log_path)}")


def descendants(pid: int) -> list:
    """Live processes started by ``pid``, directly or not (psutil handles)."""
    import psutil
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def end_processes(procs, timeout: float = 10) -> None:
    """Terminate each process by its pid; kill those still alive after ``timeout``."""
    import psutil
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(alive, timeout=5)


def stop_server(proc, timeout: float = 20) -> None:
    """Stop the server by its pid (it shuts its kernels down), then whatever it left."""
    started = descendants(proc.pid)
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    end_processes([p for p in started if p.is_running()])


@contextlib.contextmanager
def jupyter_lab(startup_timeout: float = 90):
    """Yield ``(url, token, root_dir)`` of a running JupyterLab; stop and clean up on exit."""
    scratch = tempfile.mkdtemp(prefix="labkit-jupyterlab-")
    root_dir = os.path.join(scratch, "root")
    os.makedirs(root_dir)
    log_path = os.path.join(scratch, "server.log")
    token = secrets.token_hex(16)
    proc = None
    try:
        # port 0: the server binds what the system gives it, and says which (no port
        # picked here and bound later, which another process could take in between)
        proc, port = start_server(server_command(0, token, root_dir), root_dir,
                                  isolated_env(scratch), log_path, timeout=startup_timeout)
        url = f"http://127.0.0.1:{port}"
        wait_until_up(proc, url, token, log_path, startup_timeout)
        yield url, token, root_dir
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def lab_for_a_test(served):
    """The session's JupyterLab ``served`` (``(url, token, root_dir)``) for one test, as a
    fresh server would be: no kernel, no saved workspace, no saved widget state and an empty
    root folder, before the test and again after it.

    The JupyterLab tests share one server (the ``lab`` fixture, tests/conftest.py): a start
    and a stop are about 7 s of the serial pass's wall time each (issue 45).
    """
    url, token, root_dir = served
    _reset(url, token, root_dir)
    try:
        yield served
    finally:
        _reset(url, token, root_dir)


def shut_down_kernels(url: str, token: str) -> list[str]:
    """DELETE every kernel of the server; return their ids."""
    ids = [k["id"] for k in api(url, token, "/api/kernels")]
    for kernel_id in ids:
        api(url, token, f"/api/kernels/{kernel_id}", method="DELETE", timeout=60)
    return ids


def forget_workspaces(url: str, token: str) -> None:
    """Delete the server's saved workspaces: the next page opens its own notebook alone (a
    workspace would open the notebooks of the pages before it again, with kernels)."""
    found = api(url, token, "/lab/api/workspaces") or {}
    for ident in found.get("workspaces", {}).get("ids", []):
        api(url, token, f"/lab/api/workspaces/{ident}", method="DELETE")


def _reset(url: str, token: str, root_dir: str) -> None:
    """Sessions and kernels shut down, workspaces and widget-state settings forgotten, the
    root folder emptied: what a page opened next finds is what a new server would give."""
    for session in api(url, token, "/api/sessions") or []:
        api(url, token, f"/api/sessions/{session['id']}", method="DELETE", timeout=60)
    shut_down_kernels(url, token)
    forget_workspaces(url, token)
    shutil.rmtree(os.path.join(os.path.dirname(root_dir), "config", "lab", "user-settings",
                               "@jupyter-widgets"), ignore_errors=True)
    for name in os.listdir(root_dir):
        path = os.path.join(root_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

