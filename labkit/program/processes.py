"""Elements that run elsewhere: a subprocess (Popen) or a scheduler task (Spawn)."""

from __future__ import annotations

import copy
import pickle
import subprocess
import uuid

from .element import Element
from .registers import Ref, Registers
from .status import DONE, INCOMPLETE, ProgramError

__all__ = ["Popen", "Spawn"]


class Popen(Element):
    """Start a subprocess; each step polls it once; completes with its exit status."""

    def __init__(self, args, store_to=None, **popen_kwargs):
        super().__init__(store_to=store_to)
        self.args, self.popen_kwargs = args, popen_kwargs
        self._proc = None

    def _start(self):
        self.cancel()

    def _step(self):
        if self._proc is None:
            self._proc = subprocess.Popen(self.args, **self.popen_kwargs)
        code = self._proc.poll()
        if code is None:
            return INCOMPLETE
        self._proc, self.state["result"] = None, code
        return DONE

    def cancel(self):
        """Kill the subprocess if it still runs."""
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def __getstate__(self):
        if self._proc is not None:
            raise ProgramError(f"a running Popen({self.args!r}) cannot be copied or pickled")
        return self.__dict__

    def __deepcopy__(self, memo):
        self.__getstate__()
        return super().__deepcopy__(memo)

    def _head(self, indent):
        return [repr(self.args)]


_SPAWNED = {}  # token -> registers written, for Spawn results collected by another Spawn


def _run_spawned(payload: bytes):
    """On a worker: run a pickled (element, registers, token) to the end."""
    element, registers, token = pickle.loads(payload)
    element.start()
    element.run()
    return token, {name: registers.values[name] for name in registers.written}


class Spawn(Element):
    """Run ``element`` as one scheduler task with a copy of some registers; merge changes.

    ``registers`` lists Refs (or names); the element's references to those
    registers see the copy.  The step that finds the task finished merges the
    registers the task wrote.  Waiting on the scheduler collects all its
    results, so give Spawns a scheduler not used for other tasks meanwhile.
    Schedulers are not pickled: after unpickling set ``spawn.scheduler``.
    """

    def __init__(self, registers, element, scheduler=None, store_to=None):
        super().__init__(store_to=store_to)
        self._adopt(element, "Spawn element (argument 2)")
        self.names, self.scheduler = list(registers), scheduler

    def _start(self):
        self.state["token"] = None

    def _step(self):
        if self.scheduler is None:
            raise ProgramError("Spawn has no scheduler (schedulers are not pickled; "
                               "set spawn.scheduler)")
        if self.state["token"] is None:
            refs = [self._ref(n) for n in self.names]
            parents = {id(r.registers) for r in refs}
            regs = Registers({r.name: r.get() for r in refs})
            memo = {p: regs for p in parents}
            memo[id(self)] = None
            body = copy.deepcopy(self.children[0], memo)
            body._parents = []
            self.state["token"] = uuid.uuid4().hex
            self.state["targets"] = {r.name: r for r in refs}
            self.state["home"] = refs[0].registers if refs else self._registers
            self.scheduler.add_task(pickle.dumps((body, regs, self.state["token"])),
                                    _run_spawned)
        token = self.state["token"]
        if token not in _SPAWNED and self.scheduler.n_open_tasks == 0:
            for item in self.scheduler.get_results():
                if isinstance(item, tuple) and len(item) == 2:
                    _SPAWNED[item[0]] = item[1]
        if token not in _SPAWNED:
            return INCOMPLETE
        written = _SPAWNED.pop(token)
        for name, value in written.items():
            target = self.state["targets"].get(name) or Ref(self.state["home"], name)
            target.set(value)
        self.state["result"] = written
        return DONE

    def current(self):
        return self

    def _head(self, indent):
        return [repr(self.names), self.children[0]._code(indent)]

    def __getstate__(self):
        return dict(self.__dict__, scheduler=None)

    def __deepcopy__(self, memo):
        memo[id(self.scheduler)] = self.scheduler
        return super().__deepcopy__(memo)


# -- programs --------------------------------------------------------------------
