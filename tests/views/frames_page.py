"""What a page holds after a sweep board's messages: the board protocol applied, in Python.

:class:`Page` applies ``paint`` and ``delta`` frames as the protocol says a
page must (a paint replaces everything; a delta's rows replace rows by id,
its lines' points are appended, ``drop`` removes lines, absent keys leave
things as they are) and refuses a delta whose ``base`` is not the last seq
(the page would say hello).  Tests read the board's state from it, decoded:
a row's status and category cells as words.
"""

from __future__ import annotations

import json

from jupyter_client.session import json_packer


class Gap(AssertionError):
    """A delta whose base is not the seq the page drew last."""


def kept_frame(state: dict) -> dict:
    """A sweep board's kept frame, joined from its parts in ``state`` as the page joins them."""
    parts = state["kept"]["parts"]
    return json.loads("".join(state[f"kept_{i}"] for i in range(parts)))


def frames_of(comms, widget, since: int = 0) -> list[dict]:
    """The board's frames (paint and delta messages) as the comm sent them; a paint that
    names a kept frame (``"kept": key``, once the sweep ended) as the page reads it: that
    frame, joined from the state's parts sent before it, under the paint's seq and clock."""
    state: dict = {}
    frames = []
    every = comms.of(widget)
    first = len(every) - len(comms.of(widget, since=since))  # ``since`` counts every message
    for i, m in enumerate(every):
        data = m["data"]
        if data.get("method") == "update":
            state.update(data["state"])
        elif data.get("method") == "custom" and i >= first:
            msg = data["content"]
            if msg.get("kind") == "paint" and "kept" in msg:
                assert state.get("kept", {}).get("key") == msg["kept"], "named before its parts"
                rest = {k: v for k, v in msg.items() if k != "kept"}
                msg = {**kept_frame(state), **rest}
            if msg.get("kind") in ("paint", "delta"):
                frames.append(msg)
    return frames


def answers(comms, widget, kind: str, since: int = 0) -> list[dict]:
    """The widget's other messages of ``kind`` (said, curves, history)."""
    return [m for m in comms.customs(widget, since) if m.get("kind") == kind]


def size(message: dict) -> int:
    """Bytes of ``message`` as a kernel serialises it (NaN refused, as there)."""
    return len(json_packer(message))


class Page:
    """The state a page builds from a board's frames."""

    def __init__(self):
        self.seq: int | None = None
        self.meta: dict = {}
        self.rows: dict[int, dict] = {}
        self.lines: dict[int, list] = {}
        self.band = None
        self.top: dict = {}  # counts, best, total, status, ended, load, clock
        self.drawn = 0

    @classmethod
    def of(cls, messages) -> Page:
        page = cls()
        for m in messages:
            page.apply(m)
        return page

    def apply(self, msg: dict) -> None:
        json.dumps(msg, allow_nan=False)  # what a kernel could not send fails here
        if msg["kind"] == "paint":
            self.rows, self.lines, self.band = {}, {}, None
        elif msg["base"] != self.seq:
            raise Gap(f"delta {msg['seq']} on base {msg['base']}, page at {self.seq}")
        self.seq = msg["seq"]
        self.meta = msg.get("meta", self.meta)
        rows = msg.get("rows")
        if rows:
            names = [k for k in rows if k != "params"]
            for i, trial in enumerate(rows["id"]):
                row = {k: rows[k][i] for k in names}
                row["params"] = {p: v[i] for p, v in rows["params"].items()}
                self.rows[trial] = row
        curves = msg.get("curves") or {}
        for trial in curves.get("drop", ()):
            self.lines.pop(int(trial), None)
        for trial, points in curves.get("lines", {}).items():
            self.lines.setdefault(int(trial), []).extend(points)
        if "band" in curves:
            self.band = curves["band"]
        self.top.update({k: msg[k] for k in
                         ("counts", "best", "total", "status", "ended", "load", "clock") if k in msg})
        self.drawn += 1

    def status(self, trial: int) -> str:
        return self.meta["statuses"][self.rows[trial]["status"]]

    def param(self, trial: int, name: str):
        """A parameter's cell as shown: a category's label, else the number."""
        value = self.rows[trial]["params"][name]
        if self.meta["kinds"][name] == "category" and value is not None:
            return self.meta["categories"][name][value]
        return value

    def table(self) -> dict[int, tuple]:
        """Each trial's (status, step, latest, best)."""
        return {t: (self.status(t), r["step"], r["latest"], r["best"])
                for t, r in self.rows.items()}
