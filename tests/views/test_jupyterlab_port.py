"""The test JupyterLab's port is the one its own process bound, never one picked beforehand.

A test once picked a free port, started JupyterLab on it, and a Dask comm took the
port in between: the HTTP check read Dask's handshake (``BadStatusLine``).  Now the
server binds port 0 and the port is read from the server, counted only once that
very process listens on it; a server that lost its port is started again.
"""

from __future__ import annotations

import secrets
import socket
import threading

import psutil
import pytest

from tests.views.jupyterlab import (
    isolated_env,
    jupyter_lab,
    listening_ports,
    server_command,
    start_server,
)

pytestmark = pytest.mark.needs("jupyter")


class HandshakeListener:
    """A listener on 127.0.0.1 that greets each connection with non-HTTP bytes, as Dask's
    comms do; it holds its port until closed."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.greeted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        """Greet each connection until the socket is closed."""
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"\x00\x00\x00\x08dask-handshake\r\n")
                self.greeted += 1

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=10)


@pytest.mark.timeout(180)
def test_a_port_another_process_holds_is_never_taken_for_the_server(tmp_path):
    held = HandshakeListener()
    token = secrets.token_hex(16)
    root = tmp_path / "root"
    root.mkdir()
    try:
        with pytest.raises(RuntimeError, match="lost its port 1 times"):
            start_server(server_command(held.port, token, str(root)), str(root),
                         isolated_env(str(tmp_path)), str(tmp_path / "server.log"), attempts=1)
    finally:
        held.close()
    assert held.greeted == 0                  # nothing read the other process's bytes


@pytest.mark.timeout(180)
def test_jupyter_lab_serves_on_the_port_its_own_process_bound():
    with jupyter_lab() as (url, token, root_dir):
        port = int(url.rsplit(":", 1)[1])
        owners = [p for p in psutil.process_iter(["cmdline"])
                  if "lab" in " ".join(p.info["cmdline"] or []) and port in listening_ports(p.pid)]
        assert len(owners) == 1, url
    assert not listening_ports(owners[0].pid)
