"""The runner widget of a step-wise program: Step, Run, Pause, where it is, its registers.

``runner(program)`` starts stepping ``program`` on the kernel's event loop
(so the cell returns at once) and returns a small ipywidgets panel (class
``labkit-runner``).  The program only *pokes* the panel after each step; the
panel is a :class:`~labkit.views.live.LiveView`, whose one writer thread redraws it at most
:data:`~labkit.views.writer.MAX_RATE` times a second, so a program taking
thousands of steps a second costs a few widget messages.  UI libraries are imported here, never by the engine.
"""

from __future__ import annotations

import html

from ...errors import InputError
from ..live import LiveView
from ..trackers.program_tracker import ProgramSnapshot, ProgramTracker

__all__ = ["Runner", "runner"]


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
    if not all(
        callable(getattr(program, verb, None)) for verb in ("step", "start_background", "subscribe")
    ):
        raise InputError(
            f"lk.runner steps a labkit program (labkit.program.Program), got "
            f"{type(program).__name__} {program!r:.60}",
            argument="program",
        )


class Runner(LiveView):
    """The panel of one program; display it, or use :attr:`widget`.

    A :class:`~labkit.views.live.LiveView` of the program: its writer draws the
    steps, the current element and the registers, and ends once the program is
    finished or failed.
    """

    thread_name = "labkit-writer-runner"

    def __init__(self, program, interval: float = 0.0, max_rate: float | None = None):
        _check_program(program)
        import ipywidgets as W

        self.program, self.interval = program, interval
        self.buttons = {d: W.Button(description=d) for d in ("Step", "Run", "Pause")}
        self.buttons["Step"].on_click(lambda _: self.step())
        self.buttons["Run"].on_click(lambda _: self.run())
        self.buttons["Pause"].on_click(lambda _: self.pause())
        self.status, self.where, self.registers = W.HTML(), W.HTML(), W.HTML()
        self.status.add_class("labkit-runner-status")
        self.widget = W.VBox(
            [W.HBox(list(self.buttons.values())), self.status, self.where, self.registers]
        )
        self.widget.add_class("labkit-runner")
        self.program_tracker = ProgramTracker(program)
        super().__init__(program, max_rate, tracker=self.program_tracker)
        self.start()

    @property
    def _writer(self):
        return self.writer

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
        self.program_tracker.changed()
        if self.writer is not None:
            self.writer.poke()

    def close(self) -> None:
        """Stop following the program and close the widgets."""
        self.stop()
        self.widget.close()

    # -- drawing -------------------------------------------------------------------------

    def draw(self, view: ProgramSnapshot) -> None:
        """Redraw from one view; the last once the program is finished or failed."""
        self.status.value = (
            f"<b>{view.steps}</b> steps · "
            f'<span class="labkit-runner-state">{html.escape(view.status)}'
            f"</span>"
        )
        self.where.value = f"<pre>{html.escape(view.where)}</pre>"
        rows = "".join(
            f"<tr><td><code>{html.escape(k)}</code></td><td><code>{html.escape(v)}</code></td></tr>"
            for k, v in view.registers
        )
        error = (
            ""
            if view.error is None
            else f'<div class="labkit-runner-error" style="color:#d62728">'
            f"{html.escape(view.error)}</div>"
        )
        self.registers.value = f"<table>{rows}</table>{error}"
        with self.buttons["Step"].hold_sync():
            self.buttons["Step"].disabled = self.program.done or view.running
        self.buttons["Run"].disabled = self.program.done or view.running
        self.buttons["Pause"].disabled = not view.running
        if view.status in ("finished", "failed"):
            self._end()  # nothing more will change: this frame is the last

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
