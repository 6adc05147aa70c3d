"""The element base: start/step state kept as plain data, tree editing, code printing."""

from __future__ import annotations

import numbers
import types

from ..errors import InputError
from .copying import check_picklable, copied
from .registers import Ref
from .status import INCOMPLETE, ProgramError

__all__ = ["Element"]


def _code(value, indent=0) -> str:
    """``value`` written as program code."""
    if isinstance(value, Element):
        return value._code(indent)
    if isinstance(value, types.MethodType):
        owner = value.__self__
        name = owner.__name__ if isinstance(owner, type) else type(owner).__name__.lower()
        return f"{name}.{value.__func__.__name__}"
    if isinstance(value, types.BuiltinMethodType) and not isinstance(
        value.__self__, types.ModuleType
    ):
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
        self.store_to = _target(store_to, f"{type(self).__name__} store_to")

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
            raise ProgramError(
                f"register name {target!r} in {type(self).__name__} needs a "
                f"Program's registers (or pass reg({target!r}))"
            )
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
            raise ProgramError(
                f"step() on a finished {type(self).__name__}; call start() to run it again"
            )
        status = self._step()
        if status is not INCOMPLETE:
            self.state["done"] = True
            if self.store_to is not None:
                self._ref(self.store_to).set(self.state["result"])
        return status

    def run(self, n_steps=float("inf")):
        """Step until done or ``n_steps`` were taken; returns the last status."""
        _check_steps(n_steps)
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
        if not callable(pattern):
            raise InputError(
                f"find needs an Element class, a function the elements call or a "
                f"predicate element -> bool, got {pattern!r}"
            )
        found = list(self.walk())
        if isinstance(pattern, type) and issubclass(pattern, Element):
            return [e for e in found if isinstance(e, pattern)]
        wrapping = [e for e in found if getattr(e, "fn", None) is not None and e.fn == pattern]
        return wrapping or [e for e in found if pattern(e)]

    def replace_with(self, new):
        """Put ``new`` where this element is (a running one is started in its place)."""
        if not isinstance(new, Element):
            raise InputError(f"replace_with needs a program element, got {new!r}")
        inside_new = set(map(id, new.walk()))
        parents = [p for p in self._parents if id(p) not in inside_new]
        if not parents:
            raise InputError(
                f"replace_with: {self._code()[:200]} is not in a program (no "
                "element holds it), so nothing would be replaced"
            )
        for parent in parents:
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

    def _where(self) -> dict:
        """Location keys naming this element in an error."""
        return {"element": self._code()[:200]}

    def _describe(self):
        """``(owner, where, root)`` for an error about copying or pickling this element."""
        root = self
        while getattr(root, "_parents", None):  # up to the Program (which has no parents)
            root = root._parents[0]
        return type(self).__name__, self._where(), root

    def _pickled(self) -> dict:
        """What pickling stores of this element (subclasses leave out what cannot go)."""
        return self.__dict__

    def __getstate__(self):
        state = self._pickled()
        # the tree is pickled by pickle itself; each element tries its own fields first
        check_picklable({k: v for k, v in state.items() if k not in _STRUCTURE}, self._describe)
        return state

    def __deepcopy__(self, memo):
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copied(self.__dict__, memo, self._describe))
        return new


# Fields that link elements into a tree; the elements and registers they hold check
# themselves when pickled.
_STRUCTURE = ("children", "_parents", "_registers")


def _target(target, what):
    """A register to write (``store_to``, ``counter``): None, a Ref or a register name."""
    if target is not None and not isinstance(target, (Ref, str)):
        raise InputError(f"{what} must be a register: reg('name') or a name, got {target!r}")
    return target


def _check_steps(n_steps) -> None:
    """An InputError unless ``n_steps`` is a number of steps >= 0 (inf: to the end)."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Real) or not n_steps >= 0:
        raise InputError(
            f"n_steps must be a number of steps >= 0 (inf: to the end), got {n_steps!r}"
        )


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
        return (
            self.children[self.state["i"]].current()
            if self.state and not self.done and self.children
            else self
        )


def _as_list(elements, owner):
    """``elements`` as a list (a clear error for a single non-list)."""
    if isinstance(elements, Element) or not hasattr(elements, "__iter__"):
        raise InputError(f"{owner} needs a list of elements, got {elements!r}")
    return list(elements)
