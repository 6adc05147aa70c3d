"""What a checkpoint may recreate: the allow-list of classes and functions.

A load recreates a class (or refers to a function) only when it is allowed:
by the user (``allow=[...]`` or :func:`allow_in_checkpoints`), or as a
*library* class.  Library classes are declared by the packages that define
them with :func:`allow_library` (``labkit.flows`` declares its nodes and
flows, ``labkit.nodes`` its whole package); torch's built-in layers, losses
and optimizers are library classes too.  So this module needs no import of
the packages whose classes it recreates.

Examples
--------
>>> import collections
>>> Point = collections.namedtuple("Point", "x y")
>>> Allowed(()).find(Point.__module__, Point.__qualname__) is None
True
>>> Allowed([Point]).find(Point.__module__, Point.__qualname__) is Point
True
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from ..errors import InputError

__all__ = [
    "Allowed",
    "UnsavableError",
    "allow_in_checkpoints",
    "allow_library",
    "library_modules",
    "qualified_name",
    "is_class",
]

_REGISTERED: dict[tuple[str, str], object] = {}

#: Module prefix -> the base classes its classes must derive from (empty: any class).
_LIBRARY: dict[str, tuple[type, ...]] = {}

#: torch's own library: which bases a class of these modules needs (checked once torch is loaded).
_TORCH_LIBRARY = {"torch.nn.modules": "Module", "torch.optim": "Optimizer"}


class UnsavableError(InputError, TypeError):
    """The flow holds a value the safe checkpoint format cannot store.

    Also a ``TypeError``, as pickle raises for values it cannot store.
    """


def qualified_name(obj: object) -> tuple[Any, Any]:
    """``(module, qualname)`` of a class or function (``None`` where it has none)."""
    return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)


def is_class(obj: Any, base: Any = object) -> bool:
    """Whether ``obj`` is a class deriving from ``base`` (a check that leaves ``obj`` untyped)."""
    return isinstance(obj, type) and issubclass(obj, base)


def allow_in_checkpoints(*objects: Any) -> Any:
    """Let every later load recreate these classes (or call-free refer to these functions).

    Returns the first object, so it works as a class decorator.
    """
    for obj in objects:
        module, qualname = qualified_name(obj)
        if not (isinstance(module, str) and isinstance(qualname, str)):
            raise InputError(f"allow takes classes and functions, got {obj!r}")
        _REGISTERED[(module, qualname)] = obj
    return objects[0] if objects else None


def allow_library(prefix: str, *bases: type) -> None:
    """Declare the classes defined under the module ``prefix`` loadable without allowing.

    With ``bases``, only subclasses of them (``labkit.flows`` holds savers too,
    which write files: only its nodes and flows load).  Functions are never
    library objects: nodes call them, so only the user may allow them.
    """
    _LIBRARY[prefix] = tuple(bases)


def library_modules() -> tuple[str, ...]:
    """The module prefixes whose classes may load without being allowed."""
    return (*_LIBRARY, *_TORCH_LIBRARY)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _in_library(module: str) -> bool:
    return any(_under(module, prefix) for prefix in library_modules())


def _library_class(obj: object) -> bool:
    """Whether ``obj`` is a class a checkpoint may recreate without being allowed."""
    if not isinstance(obj, type):
        return False  # functions are called by nodes: only the user may allow them
    module = obj.__module__
    for prefix, bases in _LIBRARY.items():
        if _under(module, prefix):
            return not bases or issubclass(obj, bases)
    torch = sys.modules.get("torch")
    for prefix, base in _TORCH_LIBRARY.items():
        if torch is not None and _under(module, prefix):
            owner = torch.nn if base == "Module" else torch.optim
            return issubclass(obj, getattr(owner, base))
    return False


def _import(module: str, qualname: str) -> Any:
    """``module.qualname`` if it is a class or function defined there, else None."""
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    if not (isinstance(obj, type) or callable(obj)) or qualified_name(obj) != (module, qualname):
        return None  # a name imported into the module, not defined there
    return obj


class Allowed:
    """Which named classes and functions a load may recreate."""

    def __init__(self, allow: Any, trusted: bool = False, flow: bool = True):
        # how a refusal says to allow a class: Flow.load's allow= too, for a flow's file
        self.flow = flow
        if allow is None:
            allow = ()
        if isinstance(allow, type) or callable(allow) or not hasattr(allow, "__iter__"):
            allow = [allow]
        self.names = dict(_REGISTERED)
        for obj in allow:
            module, qualname = qualified_name(obj)
            if not (isinstance(module, str) and isinstance(qualname, str)):
                raise InputError(f"allow takes a list of classes and functions, got {obj!r}")
            self.names[(module, qualname)] = obj
        self.trusted = trusted

    def find(self, module: str, qualname: str) -> Any:
        """The class or function ``module.qualname`` if a load may recreate it, else None."""
        found = self.names.get((module, qualname))
        if found is None and self.trusted:
            found = _import(module, qualname)
        elif found is None and _in_library(module):
            found = _import(module, qualname)
            found = found if found is not None and _library_class(found) else None
        return found

    def resolve(self, ref: dict, where: str) -> Any:
        """The class or function ``ref`` names, or an InputError saying how to allow it."""
        module, qualname = ref["module"], ref["qualname"]
        if not (isinstance(module, str) and isinstance(qualname, str)):
            raise ValueError(f"bad class name {ref!r}")
        found = self.find(module, qualname)
        if found is None:
            short = qualname.rpartition(".")[2]
            raise InputError(
                f"{where} is a {module}.{qualname}, which checkpoints do not recreate unless "
                "allowed (only labkit's nodes and flows, torch's built-in layers and losses "
                "and torch optimizers are); if you trust the file, allow it: "
                + (f"lk.Flow.load(path, allow=[{short}]) or " if self.flow else "")
                + f"lk.allow_in_checkpoints({short})"
            )
        return found
