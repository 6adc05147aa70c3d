"""Fixtures for widget tests: a recording comm in place of a kernel, and a thread check.

ipywidgets 8 opens its comms with ``comm.create_comm``; the ``comms`` fixture
replaces it with one that records every message, so widgets work outside a
kernel and a test can count the messages and rebuild the state a front-end
would hold.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.views.frames_page import kept_frame


class CommLog:
    """Every comm message widgets sent, in order (thread-safe)."""

    def __init__(self):
        self.messages: list[dict] = []
        self._lock = threading.Lock()

    def add(self, comm_id, msg_type, data, buffers):
        with self._lock:
            self.messages.append({"comm_id": comm_id, "msg_type": msg_type, "data": data or {},
                                  "buffers": buffers, "time": time.monotonic()})

    def of(self, widget=None, method=None, since: int = 0) -> list[dict]:
        """Messages (from index ``since``), of one widget and/or one method."""
        comm_id = widget.comm.comm_id if widget is not None else None
        with self._lock:
            found = self.messages[since:]
        return [m for m in found
                if (comm_id is None or m["comm_id"] == comm_id)
                and (method is None or m["data"].get("method") == method)]

    def updates(self, widget=None, since: int = 0) -> list[dict]:
        """State updates (``method: update``), as their ``state`` dicts."""
        return [m["data"]["state"] for m in self.of(widget, "update", since)]

    def customs(self, widget=None, since: int = 0) -> list[dict]:
        """Custom messages' contents."""
        return [m["data"]["content"] for m in self.of(widget, "custom", since)]

    def state(self, widget) -> dict:
        """The state a front-end holds for ``widget``: the open state plus every update; a
        sweep board's page joins its kept frame's parts (``kept``, ``kept_<i>``) into ``last``
        (``assets/sweep_board.js``)."""
        state: dict = {}
        for m in self.of(widget):
            if m["msg_type"] == "comm_open":
                state.update(m["data"].get("state", {}))
            elif m["data"].get("method") == "update":
                state.update(m["data"]["state"])
        if state.get("kept"):
            state["last"] = kept_frame(state)
        return state

    def __len__(self):
        with self._lock:
            return len(self.messages)


@pytest.fixture
def comms(monkeypatch):
    """Widgets open recording comms; yields the :class:`CommLog`."""
    import comm
    from comm.base_comm import BaseComm

    log = CommLog()

    class RecordingComm(BaseComm):
        def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
            log.add(self.comm_id, msg_type, data, buffers)

    monkeypatch.setattr(comm, "create_comm", lambda *a, **kw: RecordingComm(*a, **kw))
    yield log


def labkit_threads() -> set[str]:
    """Names of the live threads labkit started, except the Dask scheduler's collector."""
    return {t.name for t in threading.enumerate()
            if t.name.startswith("labkit") and t.name != "labkit-dask-collector"}


@pytest.fixture
def no_thread_leak():
    """Fail if the test leaves a labkit thread (a writer, a run) running."""
    before = labkit_threads()
    yield
    deadline = time.time() + 5
    while labkit_threads() - before and time.time() < deadline:
        time.sleep(0.05)
    left = labkit_threads() - before
    assert not left, f"threads left running: {sorted(left)}"
