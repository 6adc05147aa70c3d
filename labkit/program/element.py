"""The element base: start/step state kept as plain data, tree editing, code printing.

The contract between a parent and its children is public: a parent calls a
child's ``start``, ``step``, ``result``, ``done``, ``cancel``, ``current``,
``walk``, ``code``, ``where`` and ``bind``, and links itself into the child's
``parents``; a child asks of each of its :class:`Holder` parents only their
``children``.  A subclass implements the hooks ``_start`` and ``_step`` (and
``_head``/``_options`` for how it is written) on itself.
"""

from __future__ import annotations

import numbers
import types
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from ..errors import InputError
from .copying import SelfChecking, check_picklable, copied
from .registers import Ref, Registers
from .status import INCOMPLETE, ProgramError, Status

__all__ = [
    "Element",
    "ListElement",
    "Holder",
    "Target",
    "code_of",
    "as_list",
    "as_target",
    "check_steps",
]


#: A register to write (``store_to``, ``counter``): a Ref, a register name, or None.
Target = Ref | str | None


class Holder(Protocol):
    """What holds an element (an element, or the Program at the root): its children."""

    children: list[Element]


def code_of(value: Any, indent: int = 0) -> str:
    """``value`` written as program code."""
    if isinstance(value, Element):
        return value.code(indent)
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


class Element(SelfChecking):
    """Base of program elements: ``start()``, then ``step()`` until it is not INCOMPLETE.

    ``parents`` are what holds this element (usually one); ``registers`` are the
    Program's, used for register names (set by :meth:`bind`).
    """

    state: dict[str, Any] | None = None
    store_to: Target = None
    registers: Registers | None = None

    def __init__(self, children: Iterable[Any] = (), store_to: Target = None):
        self.children: list[Element] = []
        self.parents: list[Holder] = []
        for i, child in enumerate(children):
            self._adopt(child, f"{type(self).__name__} item {i}")
        self.store_to = as_target(store_to, f"{type(self).__name__} store_to")

    def _adopt(self, child: Any, where: str) -> None:
        """Append ``child`` to the children, checking that it is an element."""
        if not isinstance(child, Element):
            raise InputError(f"{where} is not a program element: {child!r}")
        self.children.append(child)
        child.parents.append(self)

    def _ref(self, target: Ref | str) -> Ref:
        """``target`` as a Ref; a name needs the registers of a Program."""
        if isinstance(target, Ref):
            return target
        if self.registers is None:
            raise ProgramError(
                f"register name {target!r} in {type(self).__name__} needs a "
                f"Program's registers (or pass reg({target!r}))"
            )
        return self.registers(target)

    @property
    def _live(self) -> dict[str, Any]:
        """The execution state of a started element (what ``_start``/``_step`` work on)."""
        if self.state is None:
            raise ProgramError(f"{type(self).__name__} has not started: call start() first")
        return self.state

    def start(self) -> Element:
        """Reset the execution state; the next step begins from the start."""
        self.state = {"done": False, "result": None}
        self._start()
        return self

    def _start(self) -> None:
        """Hook: set up this element's own state when it starts."""

    def _step(self) -> Status:
        """Hook: run one step of this element; INCOMPLETE, DONE or BREAK."""
        raise NotImplementedError

    def step(self) -> Status:
        """Run one step; returns INCOMPLETE, DONE or BREAK."""
        if self.state is None:
            self.start()
        state = self._live
        if state["done"]:
            raise ProgramError(
                f"step() on a finished {type(self).__name__}; call start() to run it again"
            )
        status = self._step()
        if status is not INCOMPLETE:
            self._live["done"] = True
            if self.store_to is not None:
                self._ref(self.store_to).set(self._live["result"])
        return status

    def run(self, n_steps: float = float("inf")) -> Status:
        """Step until done or ``n_steps`` were taken; returns the last status."""
        check_steps(n_steps)
        status, taken = INCOMPLETE, 0
        while taken < n_steps and status is INCOMPLETE:
            status, taken = self.step(), taken + 1
        return status

    @property
    def done(self) -> bool:
        """Whether the element has finished."""
        return bool(self.state and self.state["done"])

    @property
    def result(self) -> Any:
        """The value of the last completed run (Call: the return value)."""
        return self.state["result"] if self.state else None

    def cancel(self) -> None:
        """Stop what runs in the background (subprocesses); children included."""
        for child in self.children:
            child.cancel()

    def current(self) -> Element:
        """The innermost element being run."""
        return self

    def walk(self) -> Iterator[Element]:
        """This element and every element below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()

    def find(self, pattern: Any) -> list[Element]:
        """Elements below matching an Element class, a wrapped function or a predicate."""
        if not callable(pattern):
            raise InputError(
                f"find needs an Element class, a function the elements call or a "
                f"predicate element -> bool, got {pattern!r}"
            )
        found = list(self.walk())
        if isinstance(pattern, type) and issubclass(pattern, Element):
            return [e for e in found if isinstance(e, pattern)]
        wrapping = [
            e for e in found if (fn := getattr(e, "fn", None)) is not None and fn == pattern
        ]
        return wrapping or [e for e in found if pattern(e)]

    def replace_with(self, new: Element) -> Element:
        """Put ``new`` where this element is (a running one is started in its place)."""
        if not isinstance(new, Element):
            raise InputError(f"replace_with needs a program element, got {new!r}")
        inside_new = set(map(id, new.walk()))
        parents = [p for p in self.parents if id(p) not in inside_new]
        if not parents:
            raise InputError(
                f"replace_with: {self.code()[:200]} is not in a program (no "
                "element holds it), so nothing would be replaced"
            )
        for parent in parents:
            for i, child in enumerate(parent.children):
                if child is self:
                    parent.children[i] = new
                    new.parents.append(parent)
            self.parents.remove(parent)
        if self.state is not None and not self.done:
            new.start()
        return new

    def bind(self, registers: Registers) -> None:
        """Give every element below (that has none) the registers used for register names."""
        for element in self.walk():
            if element.registers is None:
                element.registers = registers

    def _options(self) -> dict[str, Any]:
        """Keyword options shown by ``str()``."""
        return {"store_to": self.store_to} if self.store_to is not None else {}

    def _head(self, indent: int) -> list[str]:
        """Positional arguments shown by ``str()``."""
        return [code_of(c, indent) for c in self.children]

    def code(self, indent: int = 0) -> str:
        """This element as program code (``indent``: the column it starts at)."""
        parts = self._head(indent) + [f"{k}={code_of(v)}" for k, v in self._options().items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __str__(self) -> str:
        return self.code()

    def where(self) -> dict[str, Any]:
        """Location keys naming this element in an error."""
        return {"element": self.code()[:200]}

    def _describe(self) -> tuple[str, dict[str, Any], Any]:
        """``(owner, where, root)`` for an error about copying or pickling this element."""
        root: Any = self
        while isinstance(root, Element) and root.parents:  # up to the Program, if any
            root = root.parents[0]
        return type(self).__name__, self.where(), root

    def _pickled(self) -> dict[str, Any]:
        """What pickling stores of this element (subclasses leave out what cannot go)."""
        return self.__dict__

    def __getstate__(self) -> dict[str, Any]:
        state = self._pickled()
        # the tree is pickled by pickle itself; each element tries its own fields first
        check_picklable({k: v for k, v in state.items() if k not in _STRUCTURE}, self._describe)
        return state

    def __deepcopy__(self, memo: dict[int, Any]) -> Element:
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__dict__.update(copied(self.__dict__, memo, self._describe))
        return new


# Fields that link elements into a tree; the elements and registers they hold check
# themselves when pickled.
_STRUCTURE = ("children", "parents", "registers")


def as_target(target: Any, what: str) -> Any:
    """A register to write (``store_to``, ``counter``): None, a Ref or a register name."""
    if target is not None and not isinstance(target, (Ref, str)):
        raise InputError(f"{what} must be a register: reg('name') or a name, got {target!r}")
    return target


def check_steps(n_steps: float) -> None:
    """An InputError unless ``n_steps`` is a number of steps >= 0 (inf: to the end)."""
    if isinstance(n_steps, bool) or not isinstance(n_steps, numbers.Real) or not n_steps >= 0:
        raise InputError(
            f"n_steps must be a number of steps >= 0 (inf: to the end), got {n_steps!r}"
        )


class ListElement(Element):
    """An element whose children are written as a list."""

    def code(self, indent: int = 0) -> str:
        pad = " " * indent
        items = "".join(f"{pad}    {c.code(indent + 4)},\n" for c in self.children)
        extra = "".join(f", {k}={code_of(v)}" for k, v in self._options().items())
        return f"{type(self).__name__}({self._prefix()}[\n{items}{pad}]{extra})"

    def _prefix(self) -> str:
        return ""

    def current(self) -> Element:
        if self.state and not self.done and self.children:
            return self.children[self.state["i"]].current()
        return self


def as_list(elements: Any, owner: str) -> list[Any]:
    """``elements`` as a list (a clear error for a single non-list)."""
    if isinstance(elements, Element) or not hasattr(elements, "__iter__"):
        raise InputError(f"{owner} needs a list of elements, got {elements!r}")
    return list(elements)
