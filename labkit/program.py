"""Step-wise control-flow programs that can be copied and pickled part-way.

A program is a tree of elements (:class:`Call`, :class:`Seq`, :class:`Repeat`,
:class:`Loop`, :class:`Weave`, :class:`BufferRepeat`, :class:`Switch`,
:class:`Print`, :class:`Popen`, :class:`Spawn`).  Each element keeps its
execution state in plain data (``element.state``), never in a generator, so a
program stopped after any step can be deep-copied or pickled and resumed with
the same outcome.  Values flow through :class:`Registers`: ``reg("x")`` is a
reference resolved when a call runs, and ``store_to=reg("x")`` writes a result.

Examples
--------
>>> reg = Registers()
>>> total = []
>>> program = Program(Seq([Repeat(3, Call(total.append, reg("i")), counter=reg("i")),
...                        Call(sum, total, store_to=reg("s"))]), reg)
>>> program.run()
DONE
>>> reg["s"], program.steps
(3, 4)
>>> print(program)
Seq([
    Repeat(3, Call(list.append, reg('i')), counter=reg('i')),
    Call(sum, [0, 1, 2], store_to=reg('s')),
])
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import subprocess
import types
import uuid

from .errors import InputError, LabkitError

__all__ = [
    "ProgramError", "Break", "INCOMPLETE", "DONE", "BREAK", "Registers", "Ref", "Element",
    "Call", "Seq", "Repeat", "Loop", "Weave", "BufferRepeat", "Switch", "Print", "Popen",
    "Spawn", "Program",
]


class ProgramError(LabkitError, RuntimeError):
    """A program was misused or failed while running (missing register, no branch, ...)."""


class Break(Exception):
    """Raised by a called function to end the innermost Loop/Repeat (like returning BREAK)."""


class _Status:
    """A step status; pickles and copies as the same module-level object."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name

    def __reduce__(self):
        return self.name


INCOMPLETE = _Status("INCOMPLETE")
DONE = _Status("DONE")
BREAK = _Status("BREAK")


# -- registers -------------------------------------------------------------------

class Registers:
    """Named values shared by a program's elements; ``reg("x")`` makes a reference."""

    def __init__(self, values=None):
        self.values = dict(values or {})
        self.written = set()

    def __call__(self, name: str) -> "Ref":
        """A reference to register ``name``, resolved when it is used."""
        return Ref(self, name)

    def __getitem__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise ProgramError(f"register {name!r} is not set "
                               f"(set: {sorted(self.values) or 'none'})") from None

    def __setitem__(self, name, value):
        self.values[name] = value
        self.written.add(name)

    def __contains__(self, name):
        return name in self.values

    def __repr__(self):
        return f"Registers({self.values!r})"


class Ref:
    """A reference to one register, resolved when the element using it runs."""

    def __init__(self, registers: Registers, name: str):
        self.registers, self.name = registers, name

    def get(self):
        """The register's current value."""
        return self.registers[self.name]

    def set(self, value):
        """Write the register."""
        self.registers[self.name] = value

    def __repr__(self):
        return f"reg({self.name!r})"


def _resolve(value):
    """``value``, or the register value when it is a reference."""
    return value.get() if isinstance(value, Ref) else value


def _code(value, indent=0) -> str:
    """``value`` written as program code."""
    if isinstance(value, Element):
        return value._code(indent)
    if isinstance(value, types.MethodType):
        owner = value.__self__
        name = owner.__name__ if isinstance(owner, type) else type(owner).__name__.lower()
        return f"{name}.{value.__func__.__name__}"
    if isinstance(value, types.BuiltinMethodType) and not isinstance(value.__self__, types.ModuleType):
        return f"{type(value.__self__).__name__}.{value.__name__}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return value.__qualname__
    return repr(value)


# -- elements --------------------------------------------------------------------

class Element:
    """Base of program elements: ``start()``, then ``step()`` until it is not INCOMPLETE."""

    state = None
    store_to = None
    _registers = None

    def __init__(self, children=(), store_to=None):
        self.children = []
        self._parents = []
        for i, child in enumerate(children):
            self._adopt(child, f"{type(self).__name__} item {i}")
        self.store_to = store_to

    def _adopt(self, child, where):
        """Append ``child`` to the children, checking that it is an element."""
        if not isinstance(child, Element):
            raise InputError(f"{where} is not a program element: {child!r}")
        self.children.append(child)
        child._parents.append(self)

    def _ref(self, target):
        """``target`` as a Ref; a name needs the registers of a Program."""
        if target is None or isinstance(target, Ref):
            return target
        if self._registers is None:
            raise ProgramError(f"register name {target!r} in {type(self).__name__} needs a "
                               f"Program's registers (or pass reg({target!r}))")
        return self._registers(target)

    def start(self):
        """Reset the execution state; the next step begins from the start."""
        self.state = {"done": False, "result": None}
        self._start()
        return self

    def _start(self):
        pass

    def step(self):
        """Run one step; returns INCOMPLETE, DONE or BREAK."""
        if self.state is None:
            self.start()
        if self.state["done"]:
            raise ProgramError(f"step() on a finished {type(self).__name__}; call start() "
                               "to run it again")
        status = self._step()
        if status is not INCOMPLETE:
            self.state["done"] = True
            if self.store_to is not None:
                self._ref(self.store_to).set(self.state["result"])
        return status

    def run(self, n_steps=float("inf")):
        """Step until done or ``n_steps`` were taken; returns the last status."""
        status, taken = INCOMPLETE, 0
        while taken < n_steps and status is INCOMPLETE:
            status, taken = self.step(), taken + 1
        return status

    @property
    def done(self) -> bool:
        """Whether the element has finished."""
        return bool(self.state and self.state["done"])

    @property
    def result(self):
        """The value of the last completed run (Call: the return value)."""
        return self.state["result"] if self.state else None

    def cancel(self):
        """Stop what runs in the background (subprocesses); children included."""
        for child in self.children:
            child.cancel()

    def current(self):
        """The innermost element being run."""
        return self

    def walk(self):
        """This element and every element below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, pattern):
        """Elements below matching an Element class, a wrapped function or a predicate."""
        found = list(self.walk())
        if isinstance(pattern, type) and issubclass(pattern, Element):
            return [e for e in found if isinstance(e, pattern)]
        wrapping = [e for e in found if isinstance(e, Call) and e.fn == pattern]
        return wrapping or [e for e in found if pattern(e)]

    def replace_with(self, new):
        """Put ``new`` where this element is (a running one is started in its place)."""
        if not isinstance(new, Element):
            raise InputError(f"replace_with needs a program element, got {new!r}")
        inside_new = set(map(id, new.walk()))
        for parent in [p for p in self._parents if id(p) not in inside_new]:
            for i, child in enumerate(parent.children):
                if child is self:
                    parent.children[i] = new
                    new._parents.append(parent)
            self._parents.remove(parent)
        if self.state is not None and not self.done:
            new.start()
        return new

    def _bind(self, registers):
        """Give every element below the registers used for register names."""
        for element in self.walk():
            if element._registers is None:
                element._registers = registers

    def _options(self):
        """Keyword options shown by ``str()``."""
        return {"store_to": self.store_to} if self.store_to is not None else {}

    def _head(self, indent):
        """Positional arguments shown by ``str()``."""
        return [_code(c, indent) for c in self.children]

    def _code(self, indent=0):
        """This element as program code."""
        parts = self._head(indent) + [f"{k}={_code(v)}" for k, v in self._options().items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __str__(self):
        return self._code()

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new


class _List(Element):
    """An element whose children are written as a list."""

    def _code(self, indent=0):
        pad = " " * indent
        items = "".join(f"{pad}    {c._code(indent + 4)},\n" for c in self.children)
        extra = "".join(f", {k}={_code(v)}" for k, v in self._options().items())
        return f"{type(self).__name__}({self._prefix()}[\n{items}{pad}]{extra})"

    def _prefix(self):
        return ""

    def current(self):
        return self.children[self.state["i"]].current() if self.state and not self.done \
            and self.children else self


class Call(Element):
    """Call ``fn(*args, **kwargs)`` in one step; Ref arguments are resolved first."""

    def __init__(self, fn, *args, store_to=None, **kwargs):
        if not callable(fn):
            raise InputError(f"Call needs a callable, got {fn!r}")
        super().__init__(store_to=store_to)
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def _step(self):
        args = [_resolve(a) for a in self.args]
        kwargs = {k: _resolve(v) for k, v in self.kwargs.items()}
        try:
            result = self.fn(*args, **kwargs)
        except Break:
            return BREAK
        if result is BREAK:
            return BREAK
        self.state["result"] = result
        return DONE

    def _head(self, indent):
        return [_code(self.fn)] + [_code(a) for a in self.args] + \
            [f"{k}={_code(v)}" for k, v in self.kwargs.items()]


class Print(Call):
    """Print ``obj`` (a Ref is resolved) in one step."""

    def __init__(self, obj):
        super().__init__(print, obj)

    def _head(self, indent):
        return [_code(self.args[0])]


class Seq(_List):
    """Run the elements one after the other."""

    def __init__(self, elements, store_to=None):
        super().__init__(_as_list(elements, "Seq"), store_to)

    def _start(self):
        self.state["i"] = 0
        if self.children:
            self.children[0].start()

    def _step(self):
        if not self.children:
            return DONE
        child = self.children[self.state["i"]]
        status = child.step()
        if status is INCOMPLETE:
            return INCOMPLETE
        self.state["result"] = child.result
        if status is BREAK:
            return BREAK
        self.state["i"] += 1
        if self.state["i"] == len(self.children):
            self.state["i"] -= 1
            return DONE
        self.children[self.state["i"]].start()
        return INCOMPLETE


def _as_list(elements, owner):
    """``elements`` as a list (a clear error for a single non-list)."""
    if isinstance(elements, Element) or not hasattr(elements, "__iter__"):
        raise InputError(f"{owner} needs a list of elements, got {elements!r}")
    return list(elements)


class Repeat(Element):
    """Run ``element`` ``n`` times; ``counter`` holds the iteration index; BREAK ends it."""

    def __init__(self, n, element, counter=None, store_to=None):
        if n is not None and (not isinstance(n, int) or n < 0):
            raise InputError(f"{type(self).__name__} count must be an int >= 0, got {n!r}")
        super().__init__(store_to=store_to)
        self._adopt(element, f"{type(self).__name__} element (argument 2)")
        self.n, self.counter = n, counter

    def _start(self):
        self.state["i"] = 0
        self._begin()

    def _begin(self):
        """Start the next iteration."""
        if self.counter is not None:
            self._ref(self.counter).set(self.state["i"])
        self.children[0].start()

    def _step(self):
        if self.n == 0:
            return DONE
        child = self.children[0]
        status = child.step()
        if status is INCOMPLETE:
            return INCOMPLETE
        self._collect(child.result)
        if status is BREAK:
            return DONE
        self.state["i"] += 1
        if self.n is not None and self.state["i"] >= self.n:
            return DONE
        self._begin()
        return INCOMPLETE

    def _collect(self, value):
        self.state["result"] = value

    def current(self):
        return self.children[0].current() if self.state and not self.done else self

    def _head(self, indent):
        return [repr(self.n), self.children[0]._code(indent)]

    def _options(self):
        return dict({"counter": self.counter} if self.counter is not None else {},
                    **super()._options())


class Loop(Repeat):
    """Run ``element`` again and again until it (or a Call in it) returns BREAK."""

    def __init__(self, element, counter=None, store_to=None):
        super().__init__(None, element, counter, store_to)

    def _head(self, indent):
        return [self.children[0]._code(indent)]


class BufferRepeat(Repeat):
    """Repeat ``n`` times, collecting the element's results into a list (``store_to``)."""

    def _start(self):
        self.state["result"] = []
        super()._start()

    def _collect(self, value):
        self.state["result"].append(value)


class Weave(_List):
    """Step the elements round-robin, one step each; done when ``n_required`` are done."""

    def __init__(self, n_required, elements, store_to=None):
        elements = _as_list(elements, "Weave")
        n_required = len(elements) if n_required is None else n_required
        if not isinstance(n_required, int) or not 0 <= n_required <= len(elements):
            raise InputError(f"Weave n_required must be an int in 0..{len(elements)}, "
                             f"got {n_required!r}")
        super().__init__(elements, store_to)
        self.n_required = n_required

    def _start(self):
        self.state.update(i=0, finished=[False] * len(self.children))
        for child in self.children:
            child.start()

    def _step(self):
        finished, n = self.state["finished"], len(self.children)
        if sum(finished) >= self.n_required:
            return DONE
        i = self.state["i"]
        while finished[i]:
            i = (i + 1) % n
        status = self.children[i].step()
        self.state["i"] = (i + 1) % n
        if status is BREAK:
            self.cancel()
            return BREAK
        if status is DONE:
            finished[i] = True
            if sum(finished) >= self.n_required:
                self.cancel()
                self.state["result"] = [c.result for c in self.children]
                return DONE
        return INCOMPLETE

    def _prefix(self):
        return f"{self.n_required}, "


class Switch(Element):
    """Run the branch chosen by ``selector`` (a Ref, register name or callable)."""

    def __init__(self, selector, branches, store_to=None):
        if not isinstance(branches, dict):
            raise InputError(f"Switch needs a dict of branches, got {branches!r}")
        self.keys = list(branches)
        super().__init__(store_to=store_to)
        for key, branch in branches.items():
            self._adopt(branch, f"Switch branch {key!r}")
        self.selector = selector

    def _start(self):
        self.state["i"] = None

    def _step(self):
        if self.state["i"] is None:
            sel = self.selector
            key = sel() if callable(sel) else self._ref(sel).get()
            if key not in self.keys:
                raise ProgramError(f"Switch has no branch for key {key!r} "
                                   f"(branches: {self.keys!r})")
            self.state["i"] = self.keys.index(key)
            self.children[self.state["i"]].start()
        branch = self.children[self.state["i"]]
        status = branch.step()
        self.state["result"] = branch.result
        return status

    def current(self):
        i = self.state and self.state["i"]
        return self.children[i].current() if i is not None and not self.done else self

    def _head(self, indent):
        pad = " " * indent
        items = "".join(f"{pad}    {k!r}: {c._code(indent + 4)},\n"
                        for k, c in zip(self.keys, self.children))
        return [_code(self.selector), "{\n" + items + pad + "}"]


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

class Program:
    """An element with its registers, driven by ``start()``/``step()``/``run()``."""

    def __init__(self, element, registers=None):
        if not isinstance(element, Element):
            raise InputError(f"Program needs a program element, got {element!r}")
        self.registers = Registers() if registers is None else registers
        self.children, self.steps, self.status = [element], 0, None
        element._parents.append(self)
        element._bind(self.registers)
        self._ui = {}

    @property
    def element(self):
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
            raise ProgramError(f"step() on a finished program (after {self.steps} steps); "
                               "call start() to run it again")
        status = self.element.step()
        self.steps += 1
        self.status = INCOMPLETE if status is INCOMPLETE else DONE
        for listener in list(self._ui.get("listeners", ())):
            listener()
        return self.status

    run = Element.run

    def find(self, pattern):
        """Matching elements (see :meth:`Element.find`)."""
        return self.element.find(pattern)

    def replace(self, old, new):
        """Put ``new`` where ``old`` is; returns ``new``."""
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
        return dict(self.__dict__, _ui={})

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__getstate__(), memo))
        return new

    # -- notebook ---------------------------------------------------------------

    def start_background(self, interval=0.0):
        """Step on the running asyncio loop (a Jupyter kernel's) so the cell returns at once."""
        self._ui["paused"] = False
        if self.status is None:
            self.start()
        task = self._ui.get("task")
        if task is None or task.done():
            task = self._ui["task"] = asyncio.get_event_loop().create_task(self._drive(interval))
        return task

    async def _drive(self, interval):
        """Background stepping until done; sleeps while paused."""
        while self.status is not DONE:
            if self._ui.get("paused"):
                await asyncio.sleep(0.05)
                continue
            self.step()
            await asyncio.sleep(interval)

    def pause(self):
        """Pause background stepping."""
        self._ui["paused"] = True

    def widget(self):
        """An ipywidgets panel: Step, Run, Pause, current element, steps, registers."""
        import ipywidgets as w
        buttons = [w.Button(description=d) for d in ("Step", "Run", "Pause")]
        where, regs = w.HTML(), w.HTML()

        def refresh():
            where.value = (f"<b>{self.steps}</b> steps, {self.status!r}: "
                           f"<code>{_html(self.current()._code())}</code>")
            regs.value = "<br>".join(f"{k} = {_html(repr(v)[:80])}"
                                     for k, v in self.registers.values.items())

        buttons[0].on_click(lambda _: None if self.done else self.step())
        buttons[1].on_click(lambda _: self.start_background())
        buttons[2].on_click(lambda _: self.pause())
        self._ui.setdefault("listeners", []).append(refresh)
        refresh()
        return w.VBox([w.HBox(buttons), where, regs])


def _html(text: str) -> str:
    """``text`` escaped for HTML."""
    import html
    return html.escape(text)
