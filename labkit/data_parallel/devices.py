"""Devices: names as the user gave them, torch devices, and memory in use."""

from __future__ import annotations

import os

import torch

from ..errors import InputError

__all__ = ["as_devices", "default_devices", "memory"]


def default_devices() -> list[str]:
    """Every CUDA device, or ``["cpu"]`` when there is none."""
    if torch.cuda.is_available():
        return [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return ["cpu"]


def as_devices(devices) -> tuple[list[str], list[torch.device]]:
    """``(names, torch devices)`` of ``devices`` (strings, ``torch.device`` or CUDA indices).

    Several CPU "devices" (``"cpu:0"``, ``"cpu:1"``) are allowed: each gets its
    own replica and thread, which is how data parallelism is tested on CPU.
    """
    if devices is None:
        devices = default_devices()
    if isinstance(devices, (str, torch.device, int)):
        devices = [devices]
    names, parsed = [], []
    for d in devices:
        dev = _parse(d)
        name = str(d) if not isinstance(d, int) else str(dev)
        if name in names:
            raise InputError(f"device {name!r} is listed twice", device=name, argument="devices")
        names.append(name)
        parsed.append(dev)
    if not names:
        raise InputError(
            "devices is empty: give at least one, e.g. ['cpu'] or ['cuda:0']", argument="devices"
        )
    return names, parsed


def _parse(d) -> torch.device:
    """One entry of ``devices`` as a torch device that exists here, or a clear error."""
    if isinstance(d, bool) or not isinstance(d, (str, torch.device, int)):
        raise InputError(
            f"a device must be a string, torch.device or CUDA index, got {d!r}", argument="devices"
        )
    try:
        dev = torch.device(f"cuda:{d}" if isinstance(d, int) else d)
    except (RuntimeError, TypeError) as exc:
        raise InputError(
            f"not a torch device: {d!r} ({exc}); use e.g. 'cpu', 'cpu:1' or 'cuda:0'",
            device=d,
            argument="devices",
        ) from None
    if dev.type not in ("cpu", "cuda"):
        raise InputError(
            f"unsupported device type {dev.type!r}: use 'cpu' or 'cuda' devices",
            device=str(d),
            argument="devices",
        )
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError("CUDA is not available here", device=str(d), argument="devices")
        if dev.index is not None and not 0 <= dev.index < torch.cuda.device_count():
            raise InputError(
                f"there is no {dev}: this machine has {torch.cuda.device_count()} CUDA devices",
                device=str(d),
                argument="devices",
            )
    return dev


def memory(device: torch.device) -> tuple[int | None, int | None]:
    """``(bytes in use, bytes available)``: CUDA allocator figures, or the process RSS on CPU."""
    if device.type == "cuda":
        return (
            torch.cuda.memory_allocated(device),
            torch.cuda.get_device_properties(device).total_memory,
        )
    return _rss(), None


def _rss() -> int | None:
    """This process's resident set size in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
