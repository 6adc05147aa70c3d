"""A program: a root element with its registers, stepped directly or in the background.

A program is observable: it emits :class:`~labkit.events.ProgramStepped` after
every step (and when background stepping starts, pauses or stops), and
``run(wait=False)`` runs it to the end in a thread as a :class:`~labkit.Run`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import USER_EXITS, InputError, LabkitError, located
from ..events import Observable, ProgramStepped
from ..runs import start
from .copying import copied
from .element import Element, check_steps
from .registers import Registers
from .status import DONE, INCOMPLETE, ProgramError, Status

__all__ = ["Program"]


class Program(Observable):
    """An element with its registers, driven by ``start()``/``step()``/``run()``."""

    def __init__(self, element: Element, registers: Registers | None = None):
        if not isinstance(element, Element):
            raise InputError(f"Program needs a program element, got {element!r}")
        if registers is not None and not isinstance(registers, Registers):
            raise InputError(f"Program registers must be a Registers, got {registers!r}")
        self.registers = Registers() if registers is None else registers
        self.children: list[Element] = [element]
        self.steps = 0
        self.status: Status | None = None
        element.parents.append(self)
        element.bind(self.registers)
        self._ui: dict[str, Any] = {}

    @property
    def element(self) -> Element:
        """The root element."""
        return self.children[0]

    @property
    def done(self) -> bool:
        """Whether the program has finished."""
        return self.status is DONE

    @property
    def result(self):
        """The root element's result."""
        return self.element.result

    def start(self):
        """Reset the program to its beginning."""
        self.element.cancel()
        self.element.start()
        self.steps, self.status = 0, INCOMPLETE
        return self

    def step(self):
        """Run one step; returns INCOMPLETE until done, then DONE."""
        if self.status is None:
            self.start()
        if self.status is DONE:
            raise ProgramError(
                f"step() on a finished program (after {self.steps} steps); "
                "call start() to run it again"
            )
        try:
            status = self.element.step()
        except USER_EXITS as exc:  # sys.exit() in an element fails the step, not the kernel
            raise _located(exc, self.current(), self.steps) from exc
        self.steps += 1
        self.status = INCOMPLETE if status is INCOMPLETE else DONE
        self._notify()
        return self.status

    def run(self, n_steps=float("inf"), wait: bool = True):
        """Step until done or ``n_steps`` were taken; returns the last status.

        With ``wait=False`` the steps run in a thread and a :class:`~labkit.Run`
        is returned at once; ``run.cancel()`` stops it between two steps (and
        cancels what the program started: subprocesses, spawned tasks).
        """
        check_steps(n_steps)

        def job(scope):
            try:
                status, taken = INCOMPLETE, 0
                while taken < n_steps and status is INCOMPLETE:
                    scope.check()
                    status, taken = self.step(), taken + 1
                return status
            except BaseException:
                if scope.control.cancelled:
                    self.element.cancel()
                raise

        return start("program", [self], job, wait=wait)

    def find(self, pattern):
        """Matching elements (see :meth:`Element.find`)."""
        return self.element.find(pattern)

    def replace(self, old, new):
        """Put ``new`` where ``old`` is; returns ``new``."""
        if not isinstance(old, Element) or not any(e is old for e in self.element.walk()):
            what = old.code()[:200] if isinstance(old, Element) else repr(old)
            raise InputError(f"replace needs an element of this program to replace, got {what}")
        return old.replace_with(new)

    def current(self):
        """The innermost element being run."""
        return self.element.current()

    def cancel(self):
        """Stop background work (subprocesses, background stepping)."""
        task = self._ui.get("task")
        if task is not None:
            task.cancel()
        self.element.cancel()

    def __str__(self):
        return str(self.element)

    def __repr__(self):
        return f"<Program {self.status!r} after {self.steps} steps>"

    def __getstate__(self):
        state = dict(self.__dict__, _ui={})
        state.pop("_bus", None)  # subscribers belong to this process
        return state

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copied(self.__getstate__(), memo, lambda: ("Program", {}, self)))
        return new

    # -- background stepping ---------------------------------------------------------

    def start_background(self, interval: float = 0.0, loop=None):
        """Step on the running asyncio loop (a Jupyter kernel's) so the cell returns at once.

        Each step is followed by ``await asyncio.sleep(interval)``, so the kernel
        handles other cells and widget messages between steps.  An error raised
        by a step stops the stepping and is kept in :attr:`error`.  Returns the
        asyncio task; :meth:`pause` pauses it, calling this again resumes.
        """
        self._ui["paused"] = False
        if self.status is None or (self.done and self._ui.get("task") is None):
            self.start()
        task = self._ui.get("task")
        if task is None or task.done():
            loop = loop or asyncio.get_event_loop()
            task = self._ui["task"] = loop.create_task(self._drive(interval))
        self._notify()
        return task

    async def _drive(self, interval):
        """Background stepping until done, paused or failed."""
        self._ui["error"] = None
        try:
            while self.status is not DONE and not self._ui.get("paused"):
                self.step()
                await asyncio.sleep(interval)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # kept for the caller and the widget, not lost in the loop
            self._ui["error"] = exc
        finally:
            self._notify()

    @property
    def running(self) -> bool:
        """Whether background stepping is under way."""
        task = self._ui.get("task")
        return task is not None and not task.done()

    @property
    def error(self):
        """The exception that stopped background stepping, if any."""
        return self._ui.get("error")

    def pause(self):
        """Pause background stepping after the current step."""
        self._ui["paused"] = True

    def _notify(self):
        """Tell the subscribers that something changed."""
        if self.has_subscribers:
            status = "NOT STARTED" if self.status is None else str(self.status)
            self.emit(ProgramStepped(self.steps, status, self.running))


def _located(exc: BaseException, element: Element, step: int) -> LabkitError:
    """``exc`` as a labkit error naming the element and the step it failed in.

    The element keeps its state, so stepping again retries the failed call.
    """
    return located(exc, **element.where(), step=step)
