"""Control-flow elements: calls, sequences, repetition, weaving and switches."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

from ..constraints import Interval, check_argument
from ..errors import InputError, LabkitError
from .element import Element, ListElement, Target, as_list, as_target, code_of
from .registers import Ref, resolve
from .status import BREAK, DONE, INCOMPLETE, Break, ProgramError, Status

__all__ = ["Call", "Print", "Seq", "Repeat", "Loop", "BufferRepeat", "Weave", "Switch"]


def _int(value: Any, what: str, least: int, most: int | None = None) -> int:
    """``value`` as an int in ``least..most``; an InputError naming ``what`` otherwise."""
    span = f">= {least}" if most is None else f"in {least}..{most}"
    check_argument(what, value, [Interval(int, least, most, name=f"an int {span}")])
    return operator.index(value)


class Call(Element):
    """Call ``fn(*args, **kwargs)`` in one step; Ref arguments are resolved first."""

    def __init__(self, fn: Callable[..., Any], *args: Any, store_to: Target = None, **kwargs: Any):
        if not callable(fn):
            raise InputError(f"Call needs a callable, got {fn!r}")
        super().__init__(store_to=store_to)
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def _step(self) -> Status:
        args = [resolve(a) for a in self.args]
        kwargs = {k: resolve(v) for k, v in self.kwargs.items()}
        try:
            result = self.fn(*args, **kwargs)
        except Break:
            return BREAK
        if result is BREAK:
            return BREAK
        self._live["result"] = result
        return DONE

    def _head(self, indent: int) -> list[str]:
        return (
            [code_of(self.fn)]
            + [code_of(a) for a in self.args]
            + [f"{k}={code_of(v)}" for k, v in self.kwargs.items()]
        )


class Print(Call):
    """Print ``obj`` (a Ref is resolved) in one step."""

    def __init__(self, obj: Any):
        super().__init__(print, obj)

    def _head(self, indent: int) -> list[str]:
        return [code_of(self.args[0])]


class Seq(ListElement):
    """Run the elements one after the other."""

    def __init__(self, elements: Iterable[Element], store_to: Target = None):
        super().__init__(as_list(elements, "Seq"), store_to)

    def _start(self) -> None:
        self._live["i"] = 0
        if self.children:
            self.children[0].start()

    def _step(self) -> Status:
        state = self._live
        if not self.children:
            return DONE
        child = self.children[state["i"]]
        status = child.step()
        if status is INCOMPLETE:
            return INCOMPLETE
        state["result"] = child.result
        if status is BREAK:
            return BREAK
        state["i"] += 1
        if state["i"] == len(self.children):
            state["i"] -= 1
            return DONE
        self.children[state["i"]].start()
        return INCOMPLETE


class Repeat(Element):
    """Run ``element`` ``n`` times; ``counter`` holds the iteration index; BREAK ends it."""

    def __init__(
        self, n: int | None, element: Element, counter: Target = None, store_to: Target = None
    ):
        n = None if n is None else _int(n, f"{type(self).__name__} count", 0)
        super().__init__(store_to=store_to)
        self._adopt(element, f"{type(self).__name__} element (argument 2)")
        self.n, self.counter = n, as_target(counter, f"{type(self).__name__} counter")

    def _start(self) -> None:
        self._live["i"] = 0
        self._begin()

    def _begin(self) -> None:
        """Start the next iteration."""
        if self.counter is not None:
            self._ref(self.counter).set(self._live["i"])
        self.children[0].start()

    def _step(self) -> Status:
        state = self._live
        if self.n == 0:
            return DONE
        child = self.children[0]
        status = child.step()
        if status is INCOMPLETE:
            return INCOMPLETE
        self._collect(child.result)
        if status is BREAK:
            return DONE
        state["i"] += 1
        if self.n is not None and state["i"] >= self.n:
            return DONE
        self._begin()
        return INCOMPLETE

    def _collect(self, value: Any) -> None:
        self._live["result"] = value

    def current(self) -> Element:
        return self.children[0].current() if self.state and not self.done else self

    def _head(self, indent: int) -> list[str]:
        return [repr(self.n), self.children[0].code(indent)]

    def _options(self) -> dict[str, Any]:
        return dict(
            {"counter": self.counter} if self.counter is not None else {}, **super()._options()
        )


class Loop(Repeat):
    """Run ``element`` again and again until it (or a Call in it) returns BREAK."""

    def __init__(self, element: Element, counter: Target = None, store_to: Target = None):
        super().__init__(None, element, counter, store_to)

    def _head(self, indent: int) -> list[str]:
        return [self.children[0].code(indent)]


class BufferRepeat(Repeat):
    """Repeat ``n`` times, collecting the element's results into a list (``store_to``)."""

    def _start(self) -> None:
        self._live["result"] = []
        super()._start()

    def _collect(self, value: Any) -> None:
        self._live["result"].append(value)


class Weave(ListElement):
    """Step the elements round-robin, one step each; done when ``n_required`` are done."""

    def __init__(
        self, n_required: int | None, elements: Iterable[Element], store_to: Target = None
    ):
        elements = as_list(elements, "Weave")
        n_required = len(elements) if n_required is None else n_required
        n_required = _int(n_required, "Weave n_required", 0, len(elements))
        _shared_between(elements, InputError)  # when the program is made
        super().__init__(elements, store_to)
        self.n_required = n_required

    def _start(self) -> None:
        _shared_between(self.children, ProgramError)  # replace_with may have shared one since
        self._live.update(i=0, finished=[False] * len(self.children))
        for child in self.children:
            child.start()

    def _step(self) -> Status:
        state = self._live
        finished, n = state["finished"], len(self.children)
        if sum(finished) >= self.n_required:
            return DONE
        i = state["i"]
        while finished[i]:
            i = (i + 1) % n
        status = self.children[i].step()
        state["i"] = (i + 1) % n
        if status is BREAK:
            self.cancel()
            return BREAK
        if status is DONE:
            finished[i] = True
            if sum(finished) >= self.n_required:
                self.cancel()
                state["result"] = [c.result for c in self.children]
                return DONE
        return INCOMPLETE

    def _prefix(self) -> str:
        return f"{self.n_required}, "


def _shared_between(elements: list[Any], kind: type[LabkitError]) -> None:
    """A ``kind`` error when one element object is in two of ``elements`` (or twice in one).

    An element keeps its own state while it runs: woven with itself it would be
    stepped as two at once, and fail mid-run ("step() on a finished Call").
    """
    owner: dict[int, int] = {}
    for i, element in enumerate(elements):
        if not isinstance(element, Element):
            continue  # Element's own check names it
        for inner in element.walk():
            j = owner.setdefault(id(inner), i)
            if j != i:
                raise kind(
                    f"Weave items {j} and {i} both hold the same element {inner.code()[:120]}: "
                    "woven, it would run as two at once; give each item its own "
                    "(copy.deepcopy(element), or make it twice)",
                    argument="elements",
                )


class Switch(Element):
    """Run the branch chosen by ``selector`` (a Ref, register name or callable)."""

    def __init__(
        self,
        selector: Ref | str | Callable[[], Any],
        branches: dict[Any, Element],
        store_to: Target = None,
    ):
        if not isinstance(branches, dict):
            raise InputError(f"Switch needs a dict of branches, got {branches!r}")
        if not (callable(selector) or isinstance(selector, (Ref, str))):
            raise InputError(
                f"Switch selector must be a register (reg('name') or a name) or "
                f"a callable returning a branch key, got {selector!r}"
            )
        self.keys = list(branches)
        super().__init__(store_to=store_to)
        for key, branch in branches.items():
            self._adopt(branch, f"Switch branch {key!r}")
        self.selector = selector

    def _start(self) -> None:
        self._live["i"] = None

    def _step(self) -> Status:
        state = self._live
        if state["i"] is None:
            sel = self.selector
            key = sel() if callable(sel) else self._ref(sel).get()
            if key not in self.keys:
                raise ProgramError(
                    f"Switch has no branch for key {key!r} (branches: {self.keys!r})"
                )
            i = state["i"] = self.keys.index(key)
            self.children[i].start()
        branch = self.children[state["i"]]
        status = branch.step()
        state["result"] = branch.result
        return status

    def current(self) -> Element:
        i = self.state["i"] if self.state else None
        return self.children[i].current() if i is not None and not self.done else self

    def _head(self, indent: int) -> list[str]:
        pad = " " * indent
        items = "".join(
            f"{pad}    {k!r}: {c.code(indent + 4)},\n"
            for k, c in zip(self.keys, self.children, strict=True)
        )
        return [code_of(self.selector), "{\n" + items + pad + "}"]
