"""The runner widget of a step-wise program: Step, Run, Pause, where it is, its registers.

``runner(program)`` starts stepping ``program`` on the kernel's event loop
(so the cell returns at once) and returns a small ipywidgets panel (class
``labkit-runner``).  The program only *pokes* the panel after each step; one
:class:`~labkit.views.writer.Writer` thread redraws it at most
:data:`~labkit.views.writer.MAX_RATE` times a second, so a program taking
thousands of steps a second costs a few widget messages.  UI libraries are imported here, never by the engine.
"""

from __future__ import annotations

import html
import threading
from dataclasses import dataclass

from ..errors import InputError
from .writer import Writer, check_rate

__all__ = ["Runner", "runner"]

#: Characters of a register's repr shown.
REPR_CHARS = 80


def runner(program, start: bool = True, interval: float = 0.0, max_rate: float | None = None):
    """A runner panel for ``program``; with ``start`` it also begins background stepping.

    Call it in a notebook cell: the cell returns at once while the program
    steps on the kernel's loop, and the panel shows its progress.
    """
    panel = Runner(program, interval=interval, max_rate=max_rate)
    if start:
        panel.run()
    return panel


def _check_program(program) -> None:
    """An InputError unless ``program`` can be stepped and watched (a labkit Program)."""
    if not all(callable(getattr(program, verb, None))
               for verb in ("step", "start_background", "subscribe")):
        raise InputError(f"lk.runner steps a labkit program (labkit.program.Program), got "
                         f"{type(program).__name__} {program!r:.60}", argument="program")


@dataclass(frozen=True)
class _View:
    """What the panel shows, taken at one moment."""

    version: int
    steps: int
    status: str
    running: bool
    where: str
    registers: tuple
    error: str | None


class _Watch:
    """Counts the program's changes and takes :class:`_View` snapshots (for the Writer)."""

    def __init__(self, program):
        self.program, self.version = program, 0
        self._lock = threading.Lock()

    def changed(self, _event=None) -> None:
        with self._lock:
            self.version += 1

    def snapshot(self) -> _View:
        p, version = self.program, self.version
        where = p.current()._code() if p.status is not None else str(p.element)
        values = dict(p.registers.values)  # a copy: the kernel thread may write meanwhile
        regs = tuple((k, repr(v)[:REPR_CHARS]) for k, v in values.items())
        error = p.error
        return _View(version, p.steps, repr(p.status or "NOT STARTED"), p.running, where, regs,
                     None if error is None else f"{type(error).__name__}: {error}")


class Runner:
    """The panel of one program; display it, or use :attr:`widget`."""

    def __init__(self, program, interval: float = 0.0, max_rate: float | None = None):
        _check_program(program)
        import ipywidgets as W
        self.program, self.interval, self.max_rate = program, interval, check_rate(max_rate)
        self._watch = _Watch(program)
        self._writer: Writer | None = None
        self.buttons = {d: W.Button(description=d) for d in ("Step", "Run", "Pause")}
        self.buttons["Step"].on_click(lambda _: self.step())
        self.buttons["Run"].on_click(lambda _: self.run())
        self.buttons["Pause"].on_click(lambda _: self.pause())
        self.status, self.where, self.registers = W.HTML(), W.HTML(), W.HTML()
        self.status.add_class("labkit-runner-status")
        self.widget = W.VBox([W.HBox(list(self.buttons.values())), self.status, self.where,
                              self.registers])
        self.widget.add_class("labkit-runner")
        self._unsubscribe = program.subscribe(self._poke)
        self._draw(self._watch.snapshot())

    # -- controls ----------------------------------------------------------------------

    def step(self) -> None:
        """One step (when not finished and not running in the background)."""
        if not self.program.done and not self.program.running:
            self.program.step()

    def run(self):
        """Step in the background on the kernel's loop; returns the asyncio task."""
        return self.program.start_background(self.interval)

    def pause(self) -> None:
        """Pause background stepping."""
        self.program.pause()
        self._poke()

    def close(self) -> None:
        """Stop following the program and close the widgets."""
        self._unsubscribe()
        if self._writer is not None:
            self._writer.stop()
        self.widget.close()

    # -- drawing -------------------------------------------------------------------------

    def _poke(self, _event=None) -> None:
        """The program changed: count it and wake (or start) the writer."""
        self._watch.changed()
        if self._writer is None or self._writer._stopping.is_set():  # a stopping one may miss it
            self._writer = Writer(self._watch, self._draw, max_rate=self.max_rate,
                                  name="labkit-writer-runner")
        self._writer.poke()

    def _draw(self, view: _View) -> None:
        """Redraw from one view; the writer ends once the program rests."""
        state = "running" if view.running else view.status
        self.status.value = (f"<b>{view.steps}</b> steps · "
                             f'<span class="labkit-runner-state">{html.escape(state)}</span>')
        self.where.value = f"<pre>{html.escape(view.where)}</pre>"
        rows = "".join(f"<tr><td><code>{html.escape(k)}</code></td>"
                       f"<td><code>{html.escape(v)}</code></td></tr>" for k, v in view.registers)
        error = ("" if view.error is None else
                 f'<div class="labkit-runner-error" style="color:#d62728">'
                 f"{html.escape(view.error)}</div>")
        self.registers.value = f"<table>{rows}</table>{error}"
        with self.buttons["Step"].hold_sync():
            self.buttons["Step"].disabled = self.program.done or view.running
        self.buttons["Run"].disabled = self.program.done or view.running
        self.buttons["Pause"].disabled = not view.running
        if not view.running and self._writer is not None and self._writer.running:
            self._writer.stop()  # from its own thread: no join; a later poke starts another

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.widget)
