"""Monitors of the data-parallel trainer: a user's function called after each replica's backward.

A monitor runs in the replica's thread and sees a :class:`ReplicaStep`:
step, replica, device, rows, loss, outputs, seconds and the step's bucket
key, so one monitor can follow every bucket (MXNet refused monitors with
bucketing).  An exception in a monitor fails the step like one in the
replica, naming replica and device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["ReplicaStep", "Monitors"]


@dataclass(frozen=True)
class ReplicaStep:
    """What a monitor sees of one replica's step (in that replica's thread)."""

    step: int
    replica: int
    device: str
    rows: int
    loss: torch.Tensor
    outputs: torch.Tensor
    seconds: float
    bucket_key: Any = None


class Monitors:
    """The monitors of one trainer, each limited to some devices or to none."""

    def __init__(self):
        self._entries: list[tuple[Callable, set | None]] = []

    def __bool__(self) -> bool:
        return bool(self._entries)

    def add(self, fn: Callable[[ReplicaStep], Any], devices=None) -> Callable[[], None]:
        """Call ``fn(record)`` for replicas on ``devices`` (default all); returns a remover."""
        entry = (fn, None if devices is None else {str(d) for d in devices})
        self._entries.append(entry)

        def remove() -> None:
            if entry in self._entries:
                self._entries.remove(entry)

        return remove

    def __call__(self, record: ReplicaStep) -> None:
        """Give ``record`` to every monitor of its device."""
        for fn, devices in list(self._entries):  # a copy: a monitor may remove itself
            if devices is None or record.device in devices:
                fn(record)
