"""The sweep board's widget: one anywidget that carries the frames and answers the page.

:class:`SweepBoardWidget` holds no big synced state while the sweep runs: the
board sends each frame as one custom message (``paint`` or ``delta``).  Once
the sweep ended the last frame is kept whole in the synced ``last`` (a saved
notebook holds it; a page draws it before its hello is answered, or when no
kernel answers).  No message of it is over 100 KB (``MOST_BYTES``): the kept
frame goes as state updates of its JSON text in parts (``kept_0``, ``kept_1``,
..., then ``kept``: their key and number), which a kernel's saved widget state
(nbclient's) and a page's keep alike; the page joins them (and sets ``last``
on its own model, which JupyterLab saves).  A paint of a board whose sweep
ended names the kept frame (``"kept": key``) instead of carrying it again.
The page's messages are answered here (the board protocol,
``BRIEF``):

- ``hello`` (a new view, or a seq gap): the board sends a ``paint``;
- ``brush`` with ``ranges``: ``curves`` over the trials inside them;
- ``stop`` with ``trials``: each one stopped through the live sweep, ``said``;
- ``cancel``: the run cancelled, ``said``;
- ``add`` with ``n``: ``n`` trials added to the live sweep, ``said``;
- ``show`` with ``trial``: its ``history`` (HTML: reports, error, reason).

Its comm goes to labkit's kernel subshell (:func:`~.busy_kernel.serve_while_busy`),
so the answers come while a cell waits in ``run.result()``.  A message that
cannot be acted on is answered with a ``said`` that says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import anywidget
import traitlets

from ...errors import InputError
from ..busy_kernel import serve_while_busy
from . import draw as sweep_draw
from .esm import asset, bundle

__all__ = ["SweepBoardWidget", "BoardFrames", "MOST_ADDED", "KINDS", "MOST_BYTES", "kept_parts"]

logger = logging.getLogger("labkit.views")

#: Most trials one "add" may ask for.
MOST_ADDED = 10_000

#: Most bytes of one message the board sends after its first paint (a ``kept`` part's too).
MOST_BYTES = 100_000
_ENVELOPE = 200  # the part's own keys and the comm message's, in bytes (about 120)


def _unsent(_value, _widget) -> dict:
    """``last`` as the kernel syncs it: empty (the page gets the frame in parts, and keeps it)."""
    return {}


def kept_parts(frame: dict, most: int = MOST_BYTES) -> list[str]:
    """``frame``'s JSON text in parts, each at most ``most`` bytes as a state update."""
    return _pieces(json.dumps(frame, separators=(",", ":")), most - _ENVELOPE)


def _pieces(text: str, most: int) -> list[str]:
    """``text`` cut so that each piece, written as a JSON string, is at most ``most`` bytes."""
    out, start = [], 0
    while start < len(text):
        n = min(len(text) - start, most)
        while n > 1 and (written := len(json.dumps(text[start : start + n]).encode())) > most:
            # quotes and backslashes escaped, non-ASCII as \uXXXX: fewer characters
            n = max(1, min(n - 1, n * most // written))
        out.append(text[start : start + n])
        start += n
    return out


class BoardFrames(Protocol):
    """What the widget asks of its board: a paint sent now, curves over a brush."""

    def paint(self) -> None:
        """Send the whole state as the next frame."""
        ...

    def curves(self, ranges: dict) -> dict:
        """``{"lines", "band"}`` over the trials inside ``ranges`` (``{}``: the frames' own)."""
        ...


class SweepBoardWidget(anywidget.AnyWidget):
    """The page of a sweep board (``assets/sweep_board.js`` and its modules), and its answers.

    Parameters
    ----------
    frames : BoardFrames
        The board: sends a paint, answers a brush.
    run : Run
        The sweep's run (``cancel``; a run that ended acts on nothing).
    sweep : SweepSource, optional
        The run's sweep (``stop``, ``add``).
    tracker : SweepTracker
        What ``show`` reads a trial's history from.
    on_change : callable, optional
        Called after a control acted (the board draws at once).
    """

    _esm = bundle("sweep_board.js")  # one text: JupyterLab runs it from a blob: URL
    _css = asset("sweep_board.css")

    #: The board's last frame (a ``paint``), set once its sweep ended; the one synced state
    #: of the widget, so a saved notebook shows the board with no kernel behind it.
    last = traitlets.Dict(default_value={}).tag(sync=True, to_json=_unsent)

    def __init__(self, frames: BoardFrames, run, sweep, tracker, on_change=None, **kwargs):
        super().__init__(**kwargs)
        self._frames, self._run, self._sweep, self._tracker = frames, run, sweep, tracker
        self._on_change = on_change or (lambda: None)
        self.on_msg(self._on_page)
        self.serves_while_busy = serve_while_busy(self)  # heard while a cell waits
        self._kept = 0  # kept frames sent in parts

    def _should_send_property(self, key, value) -> bool:
        """Never ``last`` as one state update: :meth:`keep` sends it in parts."""
        return key != "last" and super()._should_send_property(key, value)

    def keep(self, frame: dict) -> int:
        """Keep ``frame`` (a paint) as ``last``; the page gets it as state updates of at most
        MOST_BYTES (``kept_<i>``, then ``kept``); its key."""
        self.last = frame
        self._kept += 1
        pieces = kept_parts(frame)
        for i, piece in enumerate(pieces):
            self._send({"method": "update", "state": {f"kept_{i}": piece}, "buffer_paths": []})
        index = {"key": self._kept, "parts": len(pieces)}
        self._send({"method": "update", "state": {"kept": index}, "buffer_paths": []})
        return self._kept

    @property
    def kept_key(self) -> int:
        """The key of the frame kept last (0: none)."""
        return self._kept

    # -- the page's messages ------------------------------------------------------------------

    def _on_page(self, _widget, content, _buffers=None) -> None:
        """One message from the page: answer it (a failure is said, never raised)."""
        kind = content.get("kind") if isinstance(content, dict) else None
        answer = self._ANSWERS.get(kind) if isinstance(kind, str) else None
        if answer is None:
            self.say(f"the board does not know the message {kind!r}")
            return
        try:
            answer(self, content)
        except InputError as exc:
            self.say(str(exc))
        except Exception as exc:  # a control never breaks the kernel's comm
            logger.exception("labkit sweep board: %r failed", kind)
            self.say(f"{kind} failed: {type(exc).__name__}: {exc}")

    def say(self, text: str) -> None:
        """A line for the page's message area."""
        self.send({"kind": "said", "text": text})

    def _on_hello(self, _content: dict) -> None:
        self._frames.paint()

    def _on_brush(self, content: dict) -> None:
        ranges = content.get("ranges") or {}
        if not isinstance(ranges, dict):
            raise InputError(
                f"a brush's ranges are {{axis: [lo, hi]}}, got {ranges!r}", argument="ranges"
            )
        self.send({"kind": "curves", "brush": content.get("brush"), **self._frames.curves(ranges)})

    def _on_stop(self, content: dict) -> None:
        self.say(self.stop(_ids(content.get("trials"), "trials")))

    def _on_cancel(self, _content: dict) -> None:
        self.say(self.cancel())

    def _on_add(self, content: dict) -> None:
        self.say(self.add(content.get("n")))

    def _on_show(self, content: dict) -> None:
        (trial,) = _ids([content.get("trial")], "trial")
        self.send({"kind": "history", "trial": trial, "html": self.history(trial)})

    #: Each kind of message a page sends -> its answer (called with the widget and the message).
    _ANSWERS: ClassVar[dict[str, Callable[[Any, dict], None]]] = {
        "hello": _on_hello,
        "brush": _on_brush,
        "stop": _on_stop,
        "cancel": _on_cancel,
        "add": _on_add,
        "show": _on_show,
    }

    # -- the controls (also for a notebook's own code) ---------------------------------------------

    def stop(self, trials: list[int]) -> str:
        """Stop ``trials`` through the live sweep; what happened, in words."""
        if self._sweep is None or self._run.done():
            return "the sweep has ended: nothing to stop"
        stopped = [t for t in trials if self._sweep.stop(t)]
        ended = [t for t in trials if t not in stopped]
        if stopped:
            self._on_change()
        words = [f"{_named(stopped)}: stop requested"] if stopped else []
        words += [f"{_named(ended)} had ended"] if ended else []
        return "; ".join(words) or "no trial to stop"

    def cancel(self) -> str:
        """Cancel the sweep's run; what happened, in words."""
        if not self._run.cancel():
            return "the sweep had ended"
        self._on_change()
        return "cancelling the sweep"

    def add(self, n: Any) -> str:
        """Add ``n`` trials to the live sweep; what happened, in words."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MOST_ADDED:
            raise InputError(
                f"add takes a number of trials from 1 to {MOST_ADDED}, got {n!r}", argument="n"
            )
        if self._sweep is None or self._run.done():
            return "the sweep has ended; run more trials with result.extend(n, fn)"
        try:
            ids = self._sweep.add(n)
        except Exception as exc:  # a list of configurations has no more, say
            return f"could not add trials: {exc}"
        self._on_change()
        return f"added trials {ids[0]}–{ids[-1]}" if len(ids) > 1 else f"added trial {ids[0]}"

    def history(self, trial: int) -> str:
        """``trial``'s reports, error or reason as HTML (empty: no such trial)."""
        view = self._tracker.trial(trial)
        return sweep_draw.history(view, self._tracker.history(trial)) if view is not None else ""


#: The kinds of message a page sends; each is answered as the widget's ``_ANSWERS`` say.
KINDS = ("hello", "brush", "stop", "cancel", "add", "show")


def _ids(values, argument: str) -> list[int]:
    """Trial ids from a page's message (ints; JSON may send them as floats), else InputError."""
    if not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer()
        for v in values
    ):
        raise InputError(f"{argument} must be trial ids, got {values!r}", argument=argument)
    return [int(v) for v in values]


def _named(trials: list[int], most: int = 8) -> str:
    """``trial 3``, ``trials 3, 4``, or the first few and how many in all."""
    if len(trials) == 1:
        return f"trial {trials[0]}"
    shown = ", ".join(str(t) for t in trials[:most])
    return f"trials {shown}" + (f" … ({len(trials)} in all)" if len(trials) > most else "")
