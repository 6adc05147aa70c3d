"""Values back from plain data, recreating only allowed classes.

:class:`Decoder` reads what :class:`~.encoder.Encoder` wrote.  It recreates a
class only when it is allowed (:mod:`.allowed`): labkit's nodes and flows,
torch's built-in layers, losses and optimizers, and classes or functions the
user allows.  Nothing else is imported, so a file cannot name code to run;
functions (which nodes call, e.g. an optimizer factory) load only when allowed.

Examples
--------
>>> import numpy as np
>>> from labkit.checkpoints import Allowed, Encoder
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
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .allowed import Allowed, is_class
from .encoder import PLAIN
from .torch_values import decode_torch

__all__ = ["Decoder"]


class Decoder:
    """Values back from :class:`Encoder` data, recreating only allowed classes."""

    def __init__(
        self,
        array: Callable[[int], np.ndarray],
        tensors: Callable[[], dict[str, Any]] | None,
        allowed: Allowed,
    ):
        self.array = array  # file number -> ndarray
        self._tensors = tensors  # () -> dict of tensors, read once when first needed
        self._loaded: dict[str, Any] | None = None
        self.allowed = allowed
        self.memo: dict[int, object] = {}

    def tensor(self, key: str) -> Any:
        """A tensor of the file's torch part."""
        if self._loaded is None:
            if self._tensors is None:
                raise ValueError(f"tensor {key!r} named, but the file holds no tensors")
            self._loaded = self._tensors()
        return self._loaded[key]

    def decode(self, data: Any, where: str) -> Any:
        """The value ``data`` stands for."""
        if type(data) in PLAIN:
            return data
        if type(data) is list:
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(data)]
        tag = data["$"]
        if tag == "memo":
            return self.memo[data["id"]]
        handler = self._HANDLERS.get(tag)
        if handler is not None:
            return handler(self, data, where)
        found = decode_torch(self, data, where)
        if found is None:
            raise ValueError(f"unknown entry {tag!r} at {where}")
        return found

    def keep(self, data: dict, value: Any) -> Any:
        """Remember ``value`` under the entry's number; return it."""
        self.memo[data["id"]] = value
        return value

    def _sequence(self, data: dict, where: str) -> list:
        return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(data["v"])]

    def _dict(self, data: dict, where: str, attributes: bool = False) -> dict:
        kind: type[dict] = dict if data["$"] == "dict" else collections.OrderedDict
        keys = [self.decode(k, f"{where} key") for k, _ in data["items"]]
        inner = (lambda k: f"{where}.{k}") if attributes else (lambda k: f"{where}[{k!r}]")
        values = [self.decode(v, inner(k)) for k, (_, v) in zip(keys, data["items"], strict=True)]
        return kind(zip(keys, values, strict=True))

    def attributes(self, data: Any, where: str) -> Any:
        """A ``__dict__`` stored by :meth:`Encoder.object`; errors name ``where.attribute``."""
        if isinstance(data, dict) and data.get("$") == "dict":
            return self._dict(data, where, attributes=True)
        return self.decode(data, where)

    def _object(self, data: dict, where: str) -> Any:
        cls = self.allowed.resolve(data["class"], where)
        if not is_class(cls):
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

    def _partial(self, data: dict, where: str) -> functools.partial:
        return functools.partial(
            self.decode(data["func"], where),
            *self.decode(data["args"], where),
            **self.decode(data["keywords"], where),
        )

    def _enum(self, data: dict, where: str) -> Any:
        cls = self.allowed.resolve(data["class"], where)
        return cls[data["name"]]

    def _namedtuple(self, data: dict, where: str) -> tuple:
        cls = self.allowed.resolve(data["class"], where)
        if not is_class(cls, tuple):
            raise ValueError(f"{where}: {cls!r} is not a tuple class")
        return cls._make(self.decode(data["v"], where))

    def _tuple(self, data: dict, where: str) -> tuple:
        return tuple(self._sequence(data, where))

    def _set(self, data: dict, where: str) -> set:
        return set(self._sequence(data, where))

    def _frozenset(self, data: dict, where: str) -> frozenset:
        return frozenset(self._sequence(data, where))

    def _bytes(self, data: dict, where: str) -> bytes:
        return base64.b64decode(data["v"])

    def _complex(self, data: dict, where: str) -> complex:
        return complex(*data["v"])

    def _dtype(self, data: dict, where: str) -> np.dtype:
        return np.dtype(data["v"])

    def _scalar(self, data: dict, where: str) -> Any:
        return np.dtype(data["dtype"]).type(data["v"])

    def _scalar0d(self, data: dict, where: str) -> Any:
        return self.array(data["file"])[()]

    def _ndarray(self, data: dict, where: str) -> np.ndarray:
        return self.keep(data, self.array(data["file"]))

    def _ref(self, data: dict, where: str) -> Any:
        return self.allowed.resolve(data, where)

    #: Entry tag -> how to read it (torch entries: :func:`.torch_values.decode_torch`).
    _HANDLERS: dict[str, Callable[[Decoder, dict, str], Any]] = {
        "tuple": _tuple,
        "set": _set,
        "frozenset": _frozenset,
        "dict": _dict,
        "odict": _dict,
        "bytes": _bytes,
        "complex": _complex,
        "dtype": _dtype,
        "scalar": _scalar,
        "scalar0d": _scalar0d,
        "ndarray": _ndarray,
        "ref": _ref,
        "partial": _partial,
        "enum": _enum,
        "namedtuple": _namedtuple,
        "object": _object,
    }
