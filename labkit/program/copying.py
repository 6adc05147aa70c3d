"""Copying and pickling programs part-way: what cannot go is named, not found deep in pickle.

``pickle.dumps(program)`` pickles each element as it reaches it; an element
(and the registers) first tries its own fields alone, so a lambda in a
``Call`` raises a :class:`ProgramError` naming that element and field, why,
and what to do, instead of pickle's bare ``Can't pickle <function <lambda>>``.
Picklers that store functions by value (cloudpickle, dill) are left to do so:
``cloudpickle.dumps(program)`` pickles a program holding lambdas.
``copy.deepcopy`` names the element (or register) it could not copy the same
way.  Neither changes the program: it can go on running after either failed.
"""

from __future__ import annotations

import copy
import pickle
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import LabkitError
from .status import ProgramError

__all__ = ["SelfChecking", "Describe", "check_picklable", "copied"]

#: ``describe()`` of :func:`check_picklable` and :func:`copied`: ``(owner, where, root)``.
Describe = Callable[[], "tuple[str, dict[str, Any], Any]"]


class SelfChecking:
    """Checks its own fields when pickled (elements, registers): a trial pickle stops at it.

    Elements and registers derive from it, so this module needs neither of them.
    """


_checking = threading.local()  # .on: a trial pickle runs; elements it meets do not try again

# How pickling reaches a __getstate__ of ours: its frames are not the pickler's.
_PASSING = ("__getstate__", "__reduce_ex__", "__reduce__")


class _Sink:
    """A file that forgets what is written: a trial pickle only needs to succeed."""

    def write(self, data: bytes) -> int:
        return len(data)


def _forget(buffer: pickle.PickleBuffer) -> None:
    """Take an out-of-band buffer (a NumPy array's data) without copying it."""


def _cut() -> None:
    """Stands in, in a trial pickle, for an element or registers: they try themselves."""


def _stand_in(obj: object) -> tuple[Callable[[], None], tuple[()]]:
    """How a trial pickle reduces a :class:`SelfChecking` object: to :func:`_cut`."""
    return _cut, ()


def _plain_pickler() -> bool:
    """Whether the pickle running now stores functions by name (``pickle.dumps``).

    A pickler that reaches us through Python code of its own (cloudpickle's
    ``Pickler.dump``, dill's ``save``) may store functions by value, so it
    decides for itself.  ``pickle.dumps`` is C: the first Python frame above
    our ``__getstate__`` is then whoever called it.  A copy (``copy.copy``)
    does not pickle at all.
    """
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and (
        frame.f_globals is globals()
        or frame.f_code.co_name in _PASSING
        or frame.f_globals.get("__name__") == "copyreg"
    ):
        frame = frame.f_back
    if frame is None or frame.f_globals.get("__name__") == "copy":
        return False
    return _plain(frame.f_locals.get("self"))


def _plain(owner: object) -> bool:
    """Whether ``owner`` (``self`` of the frame that called pickle) stores functions by name.

    pickle's own picklers (the C one and its Python twin) do; a pickler class of
    another module (cloudpickle's, dill's: a subclass of either) may not.
    Anything that is no pickler called ``pickle.dumps``.
    """
    kind = type(owner)
    if kind.__module__ in ("pickle", "_pickle"):
        return True
    return not (isinstance(owner, pickle.Pickler) or _pickler_like(owner))


def _pickler_like(owner: object) -> bool:
    """Whether ``owner`` looks like a pickler written in Python (dill's derives from pickle's)."""
    return all(callable(getattr(owner, name, None)) for name in ("dump", "save", "memoize"))


def _kinds(base: type) -> set[type]:
    """``base`` and every subclass of it (a trial pickle stops at all of them)."""
    found: set[type] = set()
    todo = [base]
    while todo:
        kind = todo.pop()
        if kind not in found:
            found.add(kind)
            todo.extend(kind.__subclasses__())
    return found


def _items(fields: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``(label, value)`` of each field, a list's, tuple's or dict's items one by one."""
    for name, value in fields.items():
        if isinstance(value, (list, tuple)) and value:
            yield from ((f"{name}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, dict) and value:
            yield from ((f"{name}[{key!r}]", item) for key, item in value.items())
        else:
            yield name, value


def check_picklable(fields: dict[str, Any], describe: Describe) -> None:
    """Raise a ProgramError naming the first of ``fields`` that pickle cannot store.

    Only under a plain pickler and outside another check.  A trial does not
    follow elements and registers: they check their own fields when the
    real pickle reaches them.  ``describe()`` gives, once something failed,
    ``(owner, where, root)``: the owner as written in the message, its
    location keys, and what to try with cloudpickle (None: the field).
    """
    if getattr(_checking, "on", False) or not _plain_pickler():
        return
    table = {kind: _stand_in for kind in _kinds(SelfChecking)}
    _checking.on = True
    try:
        for label, value in _items(fields):
            pickler = pickle.Pickler(_Sink(), protocol=5, buffer_callback=_forget)
            pickler.dispatch_table = table
            try:
                pickler.dump(value)
            except LabkitError:
                raise  # already names its place (a running Popen, ...)
            except Exception as exc:
                owner, where, root = describe()
                raise ProgramError(_message(owner, label, value, exc, root), **where) from exc
    finally:
        _checking.on = False


def _message(owner: str, label: str, value: Any, exc: Exception, root: Any) -> str:
    """What cannot be pickled, why, and what to do instead."""
    if isinstance(value, (types.FunctionType, type)) and not _by_name(value):
        kind = "function" if isinstance(value, types.FunctionType) else "class"
        why = (
            "is a lambda"
            if value.__name__ == "<lambda>"
            else f"is {value.__qualname__}, a {kind} defined inside a function"
        )
        why += f", and pickle stores a {kind} by its module and name only"
        fix = f"Define the {kind} at module level"
    else:
        why = f"cannot be pickled ({type(exc).__name__}: {exc})"
        fix = (
            "Define its functions at module level"
            if "<lambda>" in str(exc) or "<locals>" in str(exc)
            else "Leave it out of the program, or make it picklable"
        )
    if root is None:
        tried, what = value, "it"
    else:
        tried, what = root, "element" if isinstance(root, SelfChecking) else "program"
    if _cloudpickles(tried):
        how = (
            f", or pickle with cloudpickle, which stores functions by value: "
            f"cloudpickle.dumps({what}) works for this {what}"
            if root is not None
            else ", or pickle with cloudpickle, which stores functions by value (it can pickle "
            "this value)"
        )
    else:
        how = " (cloudpickle cannot pickle it either)"
    return f"{owner} cannot be pickled: its {label} {why}. {fix}{how}"


def _by_name(obj: Any) -> bool:
    """Whether pickle finds function or class ``obj`` again by its module and name."""
    target: Any = sys.modules.get(getattr(obj, "__module__", None) or "")
    for part in obj.__qualname__.split("."):
        target = getattr(target, part, None)
    return target is obj


def _cloudpickles(obj: Any) -> bool:
    """Whether cloudpickle pickles ``obj`` (said in the hint; a cost paid only on failure)."""
    try:
        import cloudpickle

        cloudpickle.dumps(obj)
    except Exception:
        return False
    return True


def copied(fields: dict[str, Any], memo: dict[int, Any], describe: Describe) -> dict[str, Any]:
    """``fields`` deep-copied one by one; a ProgramError names the one that cannot be.

    ``describe()`` gives ``(owner, where, root)`` as for :func:`check_picklable`.
    """
    new: dict[str, Any] = {}
    for name, value in fields.items():
        try:
            new[name] = copy.deepcopy(value, memo)
        except LabkitError:
            raise  # an element inside named itself
        except Exception as exc:
            owner, where, _ = describe()
            raise ProgramError(
                f"{owner} cannot be copied: its {name} cannot be deep-copied "
                f"({type(exc).__name__}: {exc}). Leave it out of the program, "
                "or make it copyable (a __deepcopy__)",
                **where,
            ) from exc
    return new
