"""What a page saw of labkit's boards while a notebook ran in JupyterLab.

:func:`watch` installs, before a notebook runs, a ``MutationObserver`` that
records in the page

* each frame a board drew: the hidden ``.labkit-clock`` stamp of its status
  line (the oldest and newest event the frame was the first to show, when the
  kernel drew it) and the page's clock when that frame reached the DOM, so
  ``seen - oldest`` is how long an event took from the engine to the page
  (kernel and browser share this machine's clock);
* each distinct text of every board, so a test can count the states it went
  through.

:func:`lags`, :func:`states` and :func:`clipped` read them back;
:func:`narrow_outputs` makes every output area 700 px wide.
"""

from __future__ import annotations

import json
import os
import statistics

from tests.browser import ARTIFACTS

__all__ = ["watch", "lags", "states", "clipped", "narrow_outputs", "record_lags", "frames",
           "OUTPUT_WIDTH", "LAG_BOUND", "UNEVEN_SOURCES"]

#: The output width the layout must fit (px).
OUTPUT_WIDTH = 700

#: What a test asserts of the median lag (s): the board trails by a few frames at most.
#: The figure itself (0.5 s the goal) is recorded, not asserted: on two cores that the
#: notebook's own work keeps busy it depends on the machine's load, and labkit's rule is
#: that speed goes to benchmarks/RESULTS.md, not into timed assertions.  `make coverage`
#: runs under coverage, whose tracer slows the test process that drives the browser:
#: notebook 03's median went from 0.9-1.5 s to 2.1 s there, hence 3 s.
LAG_BOUND = 3.0

_WATCH = """() => {
  if (window.__lk) return;
  const lk = window.__lk = {frames: [], states: {}, stamps: new WeakSet()};
  const record = () => {
    const now = Date.now() / 1000;
    for (const el of document.querySelectorAll('.labkit-clock')) {
      if (lk.stamps.has(el)) continue;
      lk.stamps.add(el);
      const d = el.dataset;
      lk.frames.push({oldest: d.oldest ? +d.oldest : null, newest: d.newest ? +d.newest : null,
                      events: +d.events, drawn: +d.drawn, sent: +d.sent, seen: now});
    }
    document.querySelectorAll('.labkit-board').forEach((board, i) => {
      const text = board.textContent;
      const seen = lk.states[i] || (lk.states[i] = []);
      if (seen[seen.length - 1] !== text && seen.length < 5000) seen.push(text);
    });
  };
  new MutationObserver(record).observe(document.body,
    {subtree: true, childList: true, characterData: true});
}"""

_READ = "() => ({frames: window.__lk.frames, states: window.__lk.states})"

_CLIPPED = """(width) => {
  // Text in a board that is wider than its box (cut off, or scrolled), at this width.
  const out = [];
  const sel = '.labkit-board .widget-html-content, .labkit-board .widget-label, ' +
              '.labkit-board td, .labkit-board th, .labkit-board .labkit-phase-label div';
  for (const el of document.querySelectorAll(sel)) {
    if (!el.offsetParent || !el.textContent.trim()) continue;
    if (el.scrollWidth > el.clientWidth + 1) out.push(el.textContent.trim().slice(0, 120));
  }
  const boards = [...document.querySelectorAll('.labkit-board')];
  for (const b of boards) if (b.scrollWidth > b.clientWidth + 1) out.push('board: ' +
      b.scrollWidth + ' > ' + b.clientWidth);
  return out;
}"""

#: JS: every data source BokehJS holds whose columns differ in length (name, lengths).
UNEVEN_SOURCES = """() => {
  // Every data source BokehJS holds whose columns differ in length: its name, its lengths.
  const out = [];
  for (const doc of (window.Bokeh && window.Bokeh.documents) || []) {
    for (const m of doc.all_models) {
      if (!m.data || typeof m.data !== "object") continue;
      const cols = m.data instanceof Map ? [...m.data.entries()] : Object.entries(m.data);
      const lengths = Object.fromEntries(cols.map(([k, v]) => [k, v ? v.length : -1]));
      if (new Set(Object.values(lengths)).size > 1) out.push({name: m.name, id: m.id, lengths});
    }
  }
  return out;
}"""

_NARROW = f"""
.jp-OutputArea-output {{ max-width: {OUTPUT_WIDTH}px !important;
                         width: {OUTPUT_WIDTH}px !important; flex: 0 0 {OUTPUT_WIDTH}px !important; }}
"""


def watch(page) -> None:
    """Start recording the boards' frames and states (call before running the cells)."""
    page.evaluate(_WATCH)


def narrow_outputs(page) -> None:
    """Make every output area :data:`OUTPUT_WIDTH` px wide, as a narrow notebook would."""
    page.add_style_tag(content=_NARROW)


def _read(page) -> dict:
    return page.evaluate(_READ)


def lags(page, part: str = "page") -> list[float]:
    """Seconds from each frame's oldest new event to the page showing it, in order.

    ``part="kernel"``: to the start of the kernel's draw only; ``"draw"``: the draw
    itself; ``"wire"``: from the end of the draw to the page.
    """
    start, end = {"page": ("oldest", "seen"), "kernel": ("oldest", "drawn"),
                  "draw": ("drawn", "sent"), "wire": ("sent", "seen")}[part]
    return [f[end] - f[start] for f in _read(page)["frames"]
            if f["oldest"] is not None and f["events"] > 0]


def states(page) -> list[list[str]]:
    """Every distinct text each board went through, board by board."""
    found = _read(page)["states"]
    return [found[k] for k in sorted(found, key=int)]


def clipped(page) -> list[str]:
    """The board texts that do not fit their box."""
    return page.evaluate(_CLIPPED, OUTPUT_WIDTH)


def frames(page) -> list[dict]:
    """Every frame the page saw: ``oldest``, ``newest``, ``events``, ``drawn``, ``seen``."""
    return _read(page)["frames"]


def record_lags(name: str, values: list[float], seen: list[dict] | None = None, **parts) -> dict:
    """Write the lags' summary to ``test-artifacts/lag-<name>.json``; returns it.

    ``parts``: other lists (the kernel's part, the wire's) whose medians go with it;
    ``seen``: the frames as :func:`frames` gives them, kept in the file (not returned)
    to read where a long lag came from.
    """
    summary = {"notebook": name, "frames": len(values),
               **{f"{k}_median_s": round(statistics.median(v), 3) if v else None
                  for k, v in parts.items()},
               "median_s": round(statistics.median(values), 3) if values else None,
               "p90_s": round(sorted(values)[int(0.9 * (len(values) - 1))], 3)
               if values else None,
               "max_s": round(max(values), 3) if values else None}
    os.makedirs(ARTIFACTS, exist_ok=True)
    with open(os.path.join(ARTIFACTS, f"lag-{name}.json"), "w") as f:
        json.dump({**summary, "seen": seen} if seen is not None else summary, f, indent=1)
    return summary
