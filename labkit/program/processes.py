"""Elements that run elsewhere: a subprocess (Popen) or a scheduler task (Spawn)."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from .element import Element, Target
from .registers import Ref, Registers
from .status import DONE, INCOMPLETE, ProgramError, Status

__all__ = ["Popen", "Spawn"]


def _is_command(args: Any) -> bool:
    """Whether ``args`` is what subprocess.Popen takes as a command."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return True
    return (
        isinstance(args, (list, tuple))
        and len(args) > 0
        and all(isinstance(a, (str, bytes, os.PathLike)) for a in args)
    )


class Popen(Element):
    """Start a subprocess; each step polls it once; completes with its exit status."""

    def __init__(self, args: Any, store_to: Target = None, **popen_kwargs: Any):
        super().__init__(store_to=store_to)
        if not _is_command(args):
            raise InputError(f"Popen needs a command: a string or a list of strings, got {args!r}")
        self.args, self.popen_kwargs = args, popen_kwargs
        self._proc: subprocess.Popen[Any] | None = None

    def _start(self) -> None:
        self.cancel()

    def _step(self) -> Status:
        if self._proc is None:
            self._proc = subprocess.Popen(self.args, **self.popen_kwargs)
        code = self._proc.poll()
        if code is None:
            return INCOMPLETE
        self._proc, self._live["result"] = None, code
        return DONE

    def cancel(self) -> None:
        """Kill the subprocess if it still runs."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def _check_idle(self) -> None:
        """A ProgramError while the subprocess runs: a process cannot be copied."""
        if self._proc is not None:
            raise ProgramError(
                f"a running Popen({self.args!r}) cannot be copied or pickled", **self.where()
            )

    def __getstate__(self) -> dict[str, Any]:
        self._check_idle()
        return super().__getstate__()

    def __deepcopy__(self, memo: dict[int, Any]) -> Element:
        self._check_idle()
        return super().__deepcopy__(memo)

    def _head(self, indent: int) -> list[str]:
        return [repr(self.args)]


def _run_spawned(payload: bytes) -> dict[str, Any]:
    """On a worker: run a pickled (element, registers) to the end; the registers it wrote."""
    element, registers = pickle.loads(payload)
    element.start()
    element.run()
    return {name: registers.values[name] for name in registers.written}


class Spawn(Element):
    """Run ``element`` as one scheduler task with a copy of some registers; merge changes.

    ``registers`` lists Refs (or names); the element's references to those
    registers see the copy.  The task is a batch of its own on the scheduler,
    so other work may share the scheduler meanwhile; the step that finds it
    finished merges the registers the task wrote.  Schedulers are not
    pickled: after unpickling set ``spawn.scheduler``; a copy made part-way
    submits its task again.
    """

    def __init__(
        self,
        registers: Sequence[Ref | str],
        element: Element,
        scheduler: Any = None,
        store_to: Target = None,
    ):
        if (
            isinstance(registers, (str, Ref))
            or not isinstance(registers, (list, tuple))
            or not all(isinstance(r, (str, Ref)) for r in registers)
        ):
            raise InputError(
                f"Spawn needs a list of registers (reg('name') or names) to copy "
                f"to the task, got {registers!r}"
            )
        super().__init__(store_to=store_to)
        self._adopt(element, "Spawn element (argument 2)")
        self.names, self.scheduler = list(registers), scheduler
        self._batch: Any = None

    def _start(self) -> None:
        self.cancel()
        self._live["payload"] = None

    def _step(self) -> Status:
        if self.scheduler is None:
            raise ProgramError(
                "Spawn has no scheduler (schedulers are not pickled; set spawn.scheduler)"
            )
        state = self._live
        if state["payload"] is None:
            state["payload"] = self._payload()
        if self._batch is None:
            self._batch = self.scheduler.batch()
            self._batch.add_task(state["payload"], _run_spawned)
        if self._batch.n_open_tasks:
            return INCOMPLETE
        batch, self._batch = self._batch, None
        try:
            [written] = batch.get_results()  # the task's error is raised here
        finally:
            batch.close()
        for name, value in written.items():
            target = state["targets"].get(name) or Ref(state["home"], name)
            target.set(value)
        state["result"] = written
        return DONE

    def _payload(self) -> bytes:
        """The element and a copy of the named registers, pickled; where results go."""
        state = self._live
        refs = [self._ref(n) for n in self.names]
        parents = {id(r.registers) for r in refs}
        regs = Registers({r.name: r.get() for r in refs})
        memo: dict[int, Any] = {p: regs for p in parents}
        memo[id(self)] = None
        body = copy.deepcopy(self.children[0], memo)
        body.parents = []
        state["targets"] = {r.name: r for r in refs}
        state["home"] = refs[0].registers if refs else self.registers
        return pickle.dumps((body, regs))

    def cancel(self) -> None:
        """Cancel the spawned task if it still runs."""
        batch, self._batch = self._batch, None
        if batch is not None:
            batch.close()
        super().cancel()

    def current(self) -> Element:
        return self

    def _head(self, indent: int) -> list[str]:
        return [repr(self.names), self.children[0].code(indent)]

    def _pickled(self) -> dict[str, Any]:
        return dict(self.__dict__, scheduler=None, _batch=None)

    def __deepcopy__(self, memo: dict[int, Any]) -> Element:
        memo[id(self.scheduler)] = self.scheduler
        memo[id(self._batch)] = None  # the copy submits its own task
        return super().__deepcopy__(memo)
