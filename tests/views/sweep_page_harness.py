"""The harness of tests/views/test_sweep_page.py: made-up sweeps as board protocol messages,
the repository served on 127.0.0.1, and a driver of the harness page (``sweep_page.html``).

:class:`Sweep` holds made-up trials (statuses, three params of the three kinds, a curve
each) and writes the kernel's messages about them: a ``paint`` of everything, a ``delta``
of the trials changed, with the lines and the band as the protocol splits them.

>>> sweep = Sweep(3, seed=1)
>>> paint = sweep.paint()
>>> paint["kind"], paint["seq"], paint["rows"]["id"], sorted(paint["curves"]["lines"])
('paint', 1, [0, 1, 2], ['0', '1', '2'])
>>> sweep.delta([], {})["base"]
1
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Sweep", "stamp", "r6", "Board", "QuietHandler", "served_harness", "STATUSES", "PARAMS", "KINDS",
           "CATEGORIES", "WORKERS", "LINES", "TOP_K"]

STATUSES = ["pending", "running", "completed", "stopped", "failed"]
PARAMS = ["lr", "width", "opt"]
KINDS = {"lr": "log", "width": "number", "opt": "category"}
CATEGORIES = {"opt": ["adam", "sgd", "rmsprop"]}
WORKERS = ["worker 0 (this process, 2 threads)", "tcp://127.0.0.1:40123"]
LINES, TOP_K = 300, 10


def r6(v):
    """A number as the protocol sends it: 6 significant digits; NaN and inf as None."""
    if v is None or v != v or v in (float("inf"), float("-inf")):
        return None
    return float(f"{v:.6g}")


def quantile(sorted_values: list[float], q: float) -> float:
    k = q * (len(sorted_values) - 1)
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


class Sweep:
    """A made-up sweep that speaks the board protocol: its trials, and frames of them."""

    def __init__(self, n: int, seed: int = 0, running: float = 0.1):
        rng = random.Random(seed)
        self.trials: list[dict] = []
        for i in range(n):
            status = rng.choices(range(5), weights=[0.05, running, 0.6, 0.2, 0.05])[0]
            lr, width, opt = 10 ** rng.uniform(-5, -1), rng.randint(8, 512), rng.randrange(3)
            steps = 0 if status == 0 else rng.randint(1, 30)
            scale = 1 + abs(rng.gauss(0, 0.5)) + (opt == 1) * 0.3
            curve = [[s, r6(scale / (1 + s * lr * 200) + rng.random() * 0.05)]
                     for s in range(steps)]
            self.trials.append({"id": i, "status": status, "lr": r6(lr), "width": width,
                                "opt": opt, "curve": curve, "worker": i % 2 if steps else None,
                                "attempts": 1 + (status == 4)})
        self.seq = 0

    @staticmethod
    def latest(t):
        return t["curve"][-1][1] if t["curve"] else None

    @staticmethod
    def best_of(t):
        values = [v for _, v in t["curve"] if v is not None]
        return min(values) if values else None

    def best(self):
        """The trial of the lowest value (its latest), as a "min" sweep ranks them."""
        scored = [t for t in self.trials if self.latest(t) is not None]
        return min(scored, key=lambda t: (self.latest(t), t["id"]))["id"] if scored else None

    def rows(self, trials) -> dict:
        return {"id": [t["id"] for t in trials], "status": [t["status"] for t in trials],
                "step": [len(t["curve"]) or None for t in trials],
                "latest": [self.latest(t) for t in trials],
                "best": [self.best_of(t) for t in trials],
                "worker": [t["worker"] for t in trials],
                "attempts": [t["attempts"] for t in trials],
                "params": {p: [t[p] for t in trials] for p in PARAMS}}

    def line_ids(self) -> list[int]:
        if len(self.trials) <= LINES:
            return [t["id"] for t in self.trials]
        running = [t["id"] for t in self.trials if t["status"] == 1]
        scored = sorted((t for t in self.trials if self.latest(t) is not None),
                        key=self.latest)
        return sorted(set(running) | {t["id"] for t in scored[:TOP_K]})

    def band(self, lines: set):
        by_step: dict[int, list[float]] = {}
        for t in self.trials:
            if t["id"] not in lines:
                for s, v in t["curve"]:
                    by_step.setdefault(s, []).append(v)
        if not by_step:
            return None
        steps = sorted(by_step)
        band = {"steps": steps, "n": len(self.trials) - len(lines)}
        for q in (10, 25, 50, 75, 90):
            band[f"q{q}"] = [r6(quantile(sorted(by_step[s]), q / 100)) for s in steps]
        return band

    def counts(self) -> dict:
        out = dict.fromkeys(STATUSES, 0)
        for t in self.trials:
            out[STATUSES[t["status"]]] += 1
        return out

    def body(self, clock: dict) -> dict:
        return {"counts": self.counts(), "best": self.best(), "total": len(self.trials),
                "status": "running", "ended": False, "clock": clock,
                "load": [{"name": w, "running": 1, "done": 10 * k, "per_s": 2.5}
                         for k, w in enumerate(WORKERS)]}

    def paint(self, clock: dict | None = None) -> dict:
        self.seq += 1
        lines = self.line_ids()
        meta = {"name": "demo", "metric": "loss", "mode": "min", "rule": "asha",
                "params": PARAMS, "kinds": KINDS, "categories": CATEGORIES,
                "statuses": STATUSES, "workers": WORKERS}
        by_id = {t["id"]: t for t in self.trials}
        curves = {"lines": {str(i): by_id[i]["curve"] for i in lines},
                  "band": self.band(set(lines))}
        return {"kind": "paint", "seq": self.seq, "meta": meta, "rows": self.rows(self.trials),
                "curves": curves, **self.body(clock or stamp(self.seq))}

    def delta(self, changed: list[dict], points: dict, clock: dict | None = None) -> dict:
        """A delta after ``changed`` trials moved; ``points``: id -> new points."""
        self.seq += 1
        return {"kind": "delta", "seq": self.seq, "base": self.seq - 1,
                "rows": self.rows(changed), "curves": {"lines": points},
                **self.body(clock or stamp(self.seq))}


def stamp(seq: int, events: int = 3) -> dict:
    return {"oldest": 1000.0 + seq, "newest": 1000.5 + seq, "events": events,
            "sent": 1001.0 + seq}


# -- the page ---------------------------------------------------------------------------

class QuietHandler(SimpleHTTPRequestHandler):
    """Serves files without a log line a request."""

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served_harness(root, name: str, handler: type = QuietHandler) -> Iterator[str]:
    """``root`` served on 127.0.0.1 (ESM imports need http) by ``handler`` while open; the
    harness page's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=root))
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/tests/views/sweep_page.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


#: What Chromium says when a module of the page's graph did not arrive.
MODULE_NOT_FETCHED = "Failed to fetch dynamically imported module"


class Board:
    """One harness page: deliver messages, read what the board drew and sent."""

    def __init__(self, page):
        self.page = page
        self.errors: list[str] = []
        self.reloads: list[str] = []  # why the page was loaded again (a module not fetched)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def load(self, url: str, tries: int = 3) -> None:
        """Open the harness at ``url`` and wait until the board rendered or failed.

        A page one of whose modules did not arrive is loaded again, at most ``tries`` times
        in all: a CI run under load (the harness's server in a lowered test pass, Chromium
        at full weight) once read "Failed to fetch dynamically imported module" from a
        server that serves the same files in every other run.  The browser keeps a failed
        module for the document's life, so only a new load fetches it again.  Any other
        error is left for the test to see.
        """
        for attempt in range(tries):
            self.page.goto(url)
            self.page.wait_for_function("window.lkTest && (lkTest.ready || lkTest.error)")
            error = self.page.evaluate("lkTest.error || null")
            if error is None or MODULE_NOT_FETCHED not in error or attempt == tries - 1:
                return
            self.reloads.append(error)
            print(f"harness page loaded again: {error}")

    def deliver(self, *msgs) -> None:
        """Deliver the messages in one task; wait for the last frame's seq to be drawn."""
        self.page.evaluate("ms => ms.forEach(m => lkTest.deliver(m))", list(msgs))
        seq = [m["seq"] for m in msgs if m["kind"] in ("paint", "delta")]
        if seq:
            self.wait_seq(seq[-1])

    def wait_seq(self, seq) -> None:
        self.page.wait_for_function(
            "s => document.querySelector('.labkit-sweep-board').dataset.seq === s", arg=str(seq))

    def sent(self) -> list[dict]:
        return self.page.evaluate("lkTest.sent")

    def wait_sent(self, kind: str, count: int = 1) -> list[dict]:
        self.page.wait_for_function(
            "([k, n]) => lkTest.sent.filter(m => m.kind === k).length >= n", arg=[kind, count])
        return [m for m in self.sent() if m["kind"] == kind]

    def rows(self) -> list[tuple[int, str, bool]]:
        """The table rows in the DOM: (trial, status, highlighted as the best)."""
        return [tuple(r) for r in self.page.evaluate(
            """() => [...document.querySelectorAll('.labkit-sweep-table tr[data-trial]')]
                 .map(tr => [+tr.dataset.trial, tr.dataset.status,
                             tr.classList.contains('labkit-sweep-best')])""")]

    def data(self, selector: str = ".labkit-sweep-board") -> dict:
        return self.page.evaluate("s => ({...document.querySelector(s).dataset})", selector)

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def drag_axis(self, name: str, top: float, bottom: float) -> None:
        """Drag on the parallel coordinates' axis ``name`` from ``top`` to ``bottom`` (0..1)."""
        (x, y0), (_, y1) = self.axis_point(name, top), self.axis_point(name, bottom)
        self.page.mouse.move(x, y0)
        self.page.mouse.down()
        self.page.mouse.move(x, (y0 + y1) / 2, steps=3)
        self.page.mouse.move(x, y1, steps=3)
        self.page.mouse.up()

    def click_axis(self, name: str) -> None:
        self.page.mouse.click(*self.axis_point(name, 0.5))

    def axis_point(self, name: str, u: float) -> tuple[float, float]:
        canvas = self.page.locator(".labkit-sweep-parallel")
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        axes = {a["name"]: a["x"] for a in json.loads(self.data(".labkit-sweep-parallel")["axes"])}
        plot = json.loads(self.data(".labkit-sweep-parallel")["plot"])
        return box["x"] + axes[name], box["y"] + plot["top"] + u * (plot["bottom"] - plot["top"])
