"""Flow state as plain data: JSON, numpy arrays and torch tensors, no pickle.

:class:`Encoder` turns a value into JSON-ready data; numpy arrays and torch
tensors are set aside (the file format writes them as ``.npy`` files read
with ``allow_pickle=False`` and as a ``torch.save`` dict read with
``weights_only=True``).  An object is stored as its class's name and its
``__dict__`` (or ``__getstate__``); a torch module as its class's name, its
plain attributes, parameters, buffers and child modules.

:class:`Decoder` recreates a class only when it is allowed: labkit's nodes
and flows, torch's built-in layers, losses and optimizers, and classes or
functions the user allows (``allow=[...]`` or :func:`allow_in_checkpoints`).  Nothing else
is imported, so a file cannot name code to run; functions (which nodes call,
e.g. an optimizer factory) load only when allowed.

Examples
--------
>>> import numpy as np
>>> enc = Encoder()
>>> data = enc.encode({"w": np.arange(3), "n": (1, 2.5)}, "x")
>>> dec = Decoder(lambda i: enc.arrays[i], None, Allowed(()))
>>> out = dec.decode(data, "x")
>>> out["w"].tolist(), out["n"]
([0, 1, 2], (1, 2.5))
"""

from __future__ import annotations

import base64
import collections
import enum
import functools
import importlib
import sys
import types

import numpy as np

from ..errors import InputError
from .snapshot_torch import decode_torch, encode_torch

__all__ = [
    "Encoder",
    "Decoder",
    "Allowed",
    "UnsavableError",
    "allow_in_checkpoints",
    "LIBRARY_MODULES",
]

#: Modules whose classes may load without being allowed (prefixes); see ``_library_class``.
LIBRARY_MODULES = ("labkit.nodes", "labkit.flows", "torch.nn.modules", "torch.optim")

_REGISTERED: dict[tuple[str, str], object] = {}
_PLAIN = (type(None), bool, int, float, str)
_BUILTIN_CONTAINERS = (list, tuple, dict, set, frozenset, str, bytes, int, float, complex)


class UnsavableError(InputError, TypeError):
    """The flow holds a value the safe checkpoint format cannot store.

    Also a ``TypeError``, as pickle raises for values it cannot store.
    """


def _name(obj) -> tuple[str, str]:
    """``(module, qualname)`` of a class or function."""
    return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)


def allow_in_checkpoints(*objects):
    """Let every later load recreate these classes (or call-free refer to these functions).

    Returns the first object, so it works as a class decorator.
    """
    for obj in objects:
        module, qualname = _name(obj)
        if not (isinstance(module, str) and isinstance(qualname, str)):
            raise InputError(f"allow takes classes and functions, got {obj!r}")
        _REGISTERED[(module, qualname)] = obj
    return objects[0] if objects else None


class Allowed:
    """Which named classes and functions a load may recreate."""

    def __init__(self, allow, trusted: bool = False, flow: bool = True):
        # how a refusal says to allow a class: Flow.load's allow= too, for a flow's file
        self.flow = flow
        if allow is None:
            allow = ()
        if isinstance(allow, type) or callable(allow) or not hasattr(allow, "__iter__"):
            allow = [allow]
        self.names = dict(_REGISTERED)
        for obj in allow:
            module, qualname = _name(obj)
            if not (isinstance(module, str) and isinstance(qualname, str)):
                raise InputError(f"allow takes a list of classes and functions, got {obj!r}")
            self.names[(module, qualname)] = obj
        self.trusted = trusted

    def find(self, module: str, qualname: str):
        """The class or function ``module.qualname`` if a load may recreate it, else None."""
        found = self.names.get((module, qualname))
        if found is None and self.trusted:
            found = _import(module, qualname)
        elif found is None and _in_library(module):
            found = _import(module, qualname)
            found = found if found is not None and _library_class(found) else None
        return found

    def resolve(self, ref, where: str):
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


def _in_library(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in LIBRARY_MODULES)


def _library_class(obj) -> bool:
    """Whether ``obj`` is a class a checkpoint may recreate without being allowed.

    Nodes (and the helper classes of ``labkit.nodes``), flows, torch layers and
    losses, torch optimizers (as factories).  Not every labkit class: a
    ``CheckpointSaver`` put where a node calls a function would write files.
    """
    if not isinstance(obj, type):
        return False  # functions are called by nodes: only the user may allow them
    module = obj.__module__
    if module.startswith("labkit.nodes."):
        return True
    if module.startswith("labkit.flows."):
        from .flow import Flow
        from .node import Node

        return issubclass(obj, (Node, Flow))
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if module.startswith("torch.nn.modules."):
        return issubclass(obj, torch.nn.Module)
    return module.startswith("torch.optim.") and issubclass(obj, torch.optim.Optimizer)


def _import(module: str, qualname: str):
    """``module.qualname`` if it is a class or function defined there, else None."""
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    if not (isinstance(obj, type) or callable(obj)) or _name(obj) != (module, qualname):
        return None  # a name imported into the module, not defined there
    return obj


class Encoder:
    """Plain data for a value; arrays and tensors collected on the side.

    ``loadable`` (an :class:`Allowed`): refuse, while encoding, a class or
    function that a load with it would not recreate (so a trial's checkpoint
    fails where it is taken, not when a restart restores it); ``advice`` then
    says what to do instead, in the caller's words.
    """

    def __init__(self, loadable: "Allowed | None" = None, advice: str | None = None):
        self.loadable, self.advice = loadable, advice
        self.arrays: list[np.ndarray] = []
        self.tensors: dict = {}
        self._memo: dict[int, tuple[int, object]] = {}  # id -> (number, value kept alive)
        self._open: set[int] = set()  # containers being encoded: a cycle through them

    def encode(self, value, where: str):
        """JSON-ready data for ``value``; ``where`` names it in errors (``flow.nodes[0]``)."""
        kind = type(value)
        if kind in _PLAIN:
            return value
        if id(value) in self._memo:
            return {"$": "memo", "id": self._memo[id(value)][0]}
        if kind in (list, tuple, set, frozenset, dict, collections.OrderedDict):
            return self._container(value, where)
        if kind is bytes:
            return {"$": "bytes", "v": base64.b64encode(value).decode("ascii")}
        if kind is complex:
            return {"$": "complex", "v": [value.real, value.imag]}
        if isinstance(value, (np.ndarray, np.generic, np.dtype)):
            return self._numpy(value, where)
        torch = sys.modules.get("torch")
        found = encode_torch(self, value, where, torch) if torch is not None else None
        if found is not None:
            return found
        return self._other(value, where)

    def remember(self, value) -> int:
        """Give ``value`` a number; later references to it become ``memo`` entries."""
        number = len(self._memo)
        self._memo[id(value)] = (number, value)
        return number

    def _container(self, value, where: str, attributes: bool = False):
        if id(value) in self._open:
            raise UnsavableError(
                f"{where} contains itself; checkpoints store no cyclic "
                "lists or dicts (objects may refer to each other)"
            )
        self._open.add(id(value))
        try:
            if isinstance(value, dict):
                inner = (lambda k: f"{where}.{k}") if attributes else (lambda k: f"{where}[{k!r}]")
                items = [
                    [self.encode(k, f"{where} key"), self.encode(v, inner(k))]
                    for k, v in value.items()
                ]
                return {"$": "odict" if type(value) is not dict else "dict", "items": items}
            values = [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
            return values if type(value) is list else {"$": type(value).__name__, "v": values}
        finally:
            self._open.discard(id(value))

    def _numpy(self, value, where: str):
        if isinstance(value, np.dtype):
            if value.hasobject or value.fields is not None:
                raise UnsavableError(
                    f"{where} is the numpy dtype {value}; checkpoints store "
                    "plain (not object or structured) dtypes"
                )
            return {"$": "dtype", "v": value.str}
        if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
            raise UnsavableError(
                f"{where} is a {type(value).__qualname__}, a subclass of the "
                "numpy array; checkpoints store plain arrays: convert it with "
                "np.asarray before saving"
            )
        if value.dtype.hasobject:
            raise UnsavableError(
                f"{where} is a numpy array of Python objects; checkpoints "
                "store arrays without pickle: convert it to a numeric or "
                "string dtype (or a list) before saving"
            )
        if isinstance(value, np.generic):
            if value.dtype.kind in "biuf":
                return {"$": "scalar", "dtype": value.dtype.str, "v": value.item()}
            value = np.asarray(value)
            self.arrays.append(value)
            return {"$": "scalar0d", "file": len(self.arrays) - 1}
        self.arrays.append(value)
        return {"$": "ndarray", "id": self.remember(value), "file": len(self.arrays) - 1}

    def _other(self, value, where: str):
        """Functions and classes by name; partials, enums, namedtuples; objects by state."""
        if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
            return {"$": "ref", **self.name_of(value, where)}
        if type(value) is functools.partial:
            return {
                "$": "partial",
                "func": self.encode(value.func, f"{where}.func"),
                "args": self.encode(list(value.args), f"{where}.args"),
                "keywords": self.encode(dict(value.keywords), f"{where}.keywords"),
            }
        if isinstance(value, enum.Enum):
            return {"$": "enum", "class": self.name_of(type(value), where), "name": value.name}
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            return {
                "$": "namedtuple",
                "class": self.name_of(type(value), where),
                "v": self.encode(list(value), where),
            }
        return self.object(value, where)

    def object(self, value, where: str):
        """An instance as its class's name and its state."""
        cls = type(value)
        name = self.name_of(cls, where)
        if isinstance(value, _BUILTIN_CONTAINERS):
            raise UnsavableError(
                f"{where} is a {cls.__qualname__}, a subclass of a built-in "
                "type; checkpoints store the built-in types themselves: "
                "convert it before saving"
            )
        state = _state(value, where)
        number = self.remember(value)  # before the state: objects may refer back to it
        encoded = (
            self._container(state, where, attributes=True)
            if type(state) is dict
            else self.encode(state, where)
        )
        return {"$": "object", "id": number, "class": name, "state": encoded}

    def name_of(self, obj, where: str) -> dict:
        """``{"module", "qualname"}`` of a class or function importable by that name."""
        module, qualname = _name(obj)
        target = sys.modules.get(module) if isinstance(module, str) else None
        try:
            for part in (qualname or "").split("."):
                target = getattr(target, part)
        except AttributeError:
            target = None
        if target is not obj:
            what = "a lambda" if str(qualname).endswith("<lambda>") else f"{module}.{qualname}"
            raise UnsavableError(
                f"{where} is {what}, which cannot be found again by its name "
                "(a lambda or a class or function defined inside a function); "
                + (
                    self.advice
                    or "define it at module level (for an optimizer factory use "
                    "functools.partial(torch.optim.SGD, lr=...))"
                )
            )
        if self.loadable is not None and self.loadable.find(module, qualname) is None:
            short = qualname.rpartition(".")[2]
            raise UnsavableError(
                f"{where} is a {module}.{qualname}, which a checkpoint loads back only "
                f"when allowed (lk.allow_in_checkpoints({short}) where it is defined); "
                + (self.advice or "")
            )
        return {"module": module, "qualname": qualname}


def _state(value, where: str):
    """What ``pickle`` would store for ``value``'s attributes; refuses C-level state."""
    cls = type(value)
    custom = cls.__getstate__ is not object.__getstate__
    slots = any("__slots__" in vars(c) for c in cls.__mro__[:-1])
    if not (custom or slots or hasattr(value, "__dict__")):
        raise UnsavableError(
            f"{where} is a {cls.__module__}.{cls.__qualname__}, which keeps "
            "its state outside Python attributes (a lock, a file, a C object); "
            "checkpoints cannot store it: remove it before saving"
        )
    try:
        return value.__getstate__()
    except Exception as exc:
        raise UnsavableError(
            f"{where} ({cls.__qualname__}) cannot give its state: {type(exc).__name__}: {exc}"
        ) from exc


class Decoder:
    """Values back from :class:`Encoder` data, recreating only allowed classes."""

    def __init__(self, array, tensors, allowed: Allowed):
        self.array = array  # file number -> ndarray
        self._tensors = tensors  # () -> dict of tensors, read once when first needed
        self._loaded = None
        self.allowed = allowed
        self.memo: dict[int, object] = {}

    def tensor(self, key: str):
        """A tensor of the file's torch part."""
        if self._loaded is None:
            self._loaded = self._tensors()
        return self._loaded[key]

    def decode(self, data, where: str):
        """The value ``data`` stands for."""
        if type(data) in _PLAIN:
            return data
        if type(data) is list:
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(data)]
        tag = data["$"]
        if tag == "memo":
            return self.memo[data["id"]]
        handler = _HANDLERS.get(tag)
        if handler is not None:
            return handler(self, data, where)
        found = decode_torch(self, data, where)
        if found is None:
            raise ValueError(f"unknown entry {tag!r} at {where}")
        return found

    def keep(self, data, value):
        """Remember ``value`` under the entry's number; return it."""
        self.memo[data["id"]] = value
        return value

    def _sequence(self, data, where):
        return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(data["v"])]

    def _dict(self, data, where, attributes: bool = False):
        kind = dict if data["$"] == "dict" else collections.OrderedDict
        keys = [self.decode(k, f"{where} key") for k, _ in data["items"]]
        inner = (lambda k: f"{where}.{k}") if attributes else (lambda k: f"{where}[{k!r}]")
        return kind((k, self.decode(v, inner(k))) for k, (_, v) in zip(keys, data["items"]))

    def attributes(self, data, where):
        """A ``__dict__`` stored by :meth:`Encoder.object`; errors name ``where.attribute``."""
        if isinstance(data, dict) and data.get("$") == "dict":
            return self._dict(data, where, attributes=True)
        return self.decode(data, where)

    def _object(self, data, where):
        cls = self.allowed.resolve(data["class"], where)
        if not isinstance(cls, type):
            raise ValueError(f"{where}: {cls!r} is not a class")
        value = self.keep(data, cls.__new__(cls))
        state = self.attributes(data["state"], where)
        if hasattr(value, "__setstate__"):
            value.__setstate__(state)
        elif isinstance(state, tuple):  # (__dict__ or None, slots) from the default __getstate__
            value.__dict__.update(state[0] or {})
            for key, item in state[1].items():
                object.__setattr__(value, key, item)
        elif state is not None:
            value.__dict__.update(state)
        return value

    def _partial(self, data, where):
        return functools.partial(
            self.decode(data["func"], where),
            *self.decode(data["args"], where),
            **self.decode(data["keywords"], where),
        )

    def _enum(self, data, where):
        cls = self.allowed.resolve(data["class"], where)
        return cls[data["name"]]

    def _namedtuple(self, data, where):
        cls = self.allowed.resolve(data["class"], where)
        if not (isinstance(cls, type) and issubclass(cls, tuple)):
            raise ValueError(f"{where}: {cls!r} is not a tuple class")
        return cls._make(self.decode(data["v"], where))


_HANDLERS = {
    "tuple": lambda d, data, where: tuple(d._sequence(data, where)),
    "set": lambda d, data, where: set(d._sequence(data, where)),
    "frozenset": lambda d, data, where: frozenset(d._sequence(data, where)),
    "dict": Decoder._dict,
    "odict": Decoder._dict,
    "bytes": lambda d, data, where: base64.b64decode(data["v"]),
    "complex": lambda d, data, where: complex(*data["v"]),
    "dtype": lambda d, data, where: np.dtype(data["v"]),
    "scalar": lambda d, data, where: np.dtype(data["dtype"]).type(data["v"]),
    "scalar0d": lambda d, data, where: d.array(data["file"])[()],
    "ndarray": lambda d, data, where: d.keep(data, d.array(data["file"])),
    "ref": lambda d, data, where: d.allowed.resolve(data, where),
    "partial": Decoder._partial,
    "enum": Decoder._enum,
    "namedtuple": Decoder._namedtuple,
    "object": Decoder._object,
}
