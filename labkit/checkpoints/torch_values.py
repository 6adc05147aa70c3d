"""Torch values in safe checkpoints: modules, tensors, dtypes, devices.

A module is stored as its class's name, its plain attributes, its
parameters and buffers (tensors, written with ``torch.save`` and read with
``weights_only=True``) and its child modules; loading makes the instance
with ``cls.__new__`` and ``torch.nn.Module.__init__``, so no constructor
arguments are needed and no code named by the file runs.  This module never
imports torch itself: it handles torch values only where torch is loaded.
"""

from __future__ import annotations

from typing import Any

from .allowed import UnsavableError, is_class

__all__ = ["encode_torch", "decode_torch"]

#: Module internals kept apart from the plain attributes.
_STRUCTURE = ("training", "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")


def _internals(torch: Any) -> frozenset[str]:
    """Attribute names ``torch.nn.Module.__init__`` creates."""
    return frozenset(torch.nn.Module().__dict__)


def encode_torch(encoder: Any, value: Any, where: str, torch: Any) -> dict[str, Any] | None:
    """Data for a torch value, or None when ``value`` is not one."""
    if isinstance(value, torch.nn.Module):
        return _encode_module(encoder, value, where, torch)
    if isinstance(value, torch.Tensor):
        return _encode_tensor(encoder, value, where, torch)
    if isinstance(value, torch.dtype):
        return {"$": "torch_dtype", "v": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"$": "torch_device", "v": str(value)}
    if isinstance(value, torch.Size):
        return {"$": "torch_size", "v": list(value)}
    return None


def _encode_tensor(encoder: Any, value: Any, where: str, torch: Any) -> dict[str, Any]:
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        raise UnsavableError(
            f"{where} is a {type(value).__qualname__}, a tensor subclass; "
            "checkpoints store plain tensors and parameters"
        )
    number = encoder.remember(value)
    key = f"t{number}"
    encoder.tensors[key] = value.detach()
    return {
        "$": "tensor",
        "id": number,
        "key": key,
        "parameter": isinstance(value, torch.nn.Parameter),
        "requires_grad": bool(value.requires_grad),
    }


def _encode_module(encoder: Any, module: Any, where: str, torch: Any) -> dict[str, Any]:
    name = encoder.name_of(type(module), where)
    state = module.__dict__
    internals = _internals(torch)
    for key in sorted(internals.difference(_STRUCTURE)):
        if state.get(key):
            raise UnsavableError(
                f"{where} ({type(module).__qualname__}) has torch hooks "
                f"({key}); checkpoints store no hooks: remove them before "
                "saving and add them again after loading"
            )
    number = encoder.remember(module)
    attrs = {k: v for k, v in state.items() if k not in internals}
    return {
        "$": "module",
        "id": number,
        "class": name,
        "training": bool(module.training),
        "attrs": encoder.attributes(attrs, where),
        "parameters": _named(encoder, state["_parameters"], where),
        "buffers": _named(encoder, state["_buffers"], where),
        "non_persistent": sorted(state["_non_persistent_buffers_set"]),
        "children": _named(encoder, state["_modules"], where),
    }


def _named(encoder: Any, entries: dict, where: str) -> list:
    """``[[name, data or None], ...]`` for a module's parameters, buffers or children."""
    return [
        [key, None if value is None else encoder.encode(value, f"{where}.{key}")]
        for key, value in entries.items()
    ]


def decode_torch(decoder: Any, data: dict, where: str) -> Any:
    """The torch value ``data`` stands for, or None when the entry is not a torch one."""
    tag = data["$"]
    if tag not in ("module", "tensor", "torch_dtype", "torch_device", "torch_size"):
        return None
    import torch

    if tag == "module":
        return _decode_module(decoder, data, where, torch)
    if tag == "tensor":
        return _decode_tensor(decoder, data, torch)
    if tag == "torch_dtype":
        dtype = getattr(torch, data["v"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{where}: {data['v']!r} is not a torch dtype")
        return dtype
    if tag == "torch_device":
        return torch.device(data["v"])
    return torch.Size(data["v"])


def _decode_tensor(decoder: Any, data: dict, torch: Any) -> Any:
    tensor = decoder.tensor(data["key"])
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"entry {data['key']!r} of the tensors is not a tensor")
    if data["parameter"]:
        tensor = torch.nn.Parameter(tensor, requires_grad=bool(data["requires_grad"]))
    elif data["requires_grad"] and tensor.is_leaf:
        tensor.requires_grad_(True)
    return decoder.keep(data, tensor)


def _decode_module(decoder: Any, data: dict, where: str, torch: Any) -> Any:
    cls = decoder.allowed.resolve(data["class"], where)
    if not is_class(cls, torch.nn.Module):
        raise ValueError(f"{where}: {cls!r} is not a torch module class")
    module = decoder.keep(data, cls.__new__(cls))
    torch.nn.Module.__init__(module)
    module.__dict__.update(decoder.attributes(data["attrs"], where))
    module.training = bool(data["training"])
    for slot, kind in (
        ("parameters", torch.nn.Parameter),
        ("buffers", torch.Tensor),
        ("children", torch.nn.Module),
    ):
        target = module.__dict__["_modules" if slot == "children" else f"_{slot}"]
        for key, entry in data[slot]:
            value = None if entry is None else decoder.decode(entry, f"{where}.{key}")
            if value is not None and not isinstance(value, kind):
                raise ValueError(f"{where}.{key} is not a {kind.__name__}")
            target[key] = value
    module.__dict__["_non_persistent_buffers_set"] = set(data["non_persistent"])
    return module
