"""Values as plain data: JSON, numpy arrays and torch tensors, no pickle.

:class:`Encoder` turns a value into JSON-ready data; numpy arrays and torch
tensors are set aside (the file format writes them as ``.npy`` files read
with ``allow_pickle=False`` and as a ``torch.save`` dict read with
``weights_only=True``).  An object is stored as its class's name and its
``__dict__`` (or ``__getstate__``); a torch module as its class's name, its
plain attributes, parameters, buffers and child modules
(:mod:`.torch_values`).  :class:`~.decoder.Decoder` reads the data back.

Examples
--------
>>> import numpy as np
>>> enc = Encoder()
>>> enc.encode({"w": np.arange(3), "n": (1, 2.5)}, "x")["items"][1]
['n', {'$': 'tuple', 'v': [1, 2.5]}]
>>> len(enc.arrays)
1
"""

from __future__ import annotations

import base64
import collections
import enum
import functools
import sys
import types
from typing import Any

import numpy as np

from .allowed import Allowed, UnsavableError, qualified_name
from .torch_values import encode_torch

__all__ = ["Encoder", "PLAIN"]

#: Types stored as themselves in JSON.
PLAIN = (type(None), bool, int, float, str)
_BUILTIN_CONTAINERS = (list, tuple, dict, set, frozenset, str, bytes, int, float, complex)


class Encoder:
    """Plain data for a value; arrays and tensors collected on the side.

    ``loadable`` (an :class:`Allowed`): refuse, while encoding, a class or
    function that a load with it would not recreate (so a trial's checkpoint
    fails where it is taken, not when a restart restores it); ``advice`` then
    says what to do instead, in the caller's words.
    """

    def __init__(self, loadable: Allowed | None = None, advice: str | None = None):
        self.loadable, self.advice = loadable, advice
        self.arrays: list[np.ndarray] = []
        self.tensors: dict[str, Any] = {}
        self._memo: dict[int, tuple[int, object]] = {}  # id -> (number, value kept alive)
        self._open: set[int] = set()  # containers being encoded: a cycle through them

    def encode(self, value: Any, where: str) -> Any:
        """JSON-ready data for ``value``; ``where`` names it in errors (``flow.nodes[0]``)."""
        kind = type(value)
        if kind in PLAIN:
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

    def remember(self, value: object) -> int:
        """Give ``value`` a number; later references to it become ``memo`` entries."""
        number = len(self._memo)
        self._memo[id(value)] = (number, value)
        return number

    def attributes(self, value: dict, where: str) -> Any:
        """An object's attributes: errors name ``where.attribute`` (not ``where['attribute']``)."""
        return self._container(value, where, attributes=True)

    def _container(self, value: Any, where: str, attributes: bool = False) -> Any:
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

    def _numpy(self, value: Any, where: str) -> Any:
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

    def _other(self, value: Any, where: str) -> Any:
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

    def object(self, value: Any, where: str) -> dict[str, Any]:
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
            self.attributes(state, where) if type(state) is dict else self.encode(state, where)
        )
        return {"$": "object", "id": number, "class": name, "state": encoded}

    def name_of(self, obj: Any, where: str) -> dict[str, Any]:
        """``{"module", "qualname"}`` of a class or function importable by that name."""
        module, qualname = qualified_name(obj)
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


def _state(value: Any, where: str) -> Any:
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
