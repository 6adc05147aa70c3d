"""Replicas: one persistent copy of the model a device, kept equal by broadcasting."""

from __future__ import annotations

import copy

import torch

__all__ = ["replicate", "broadcast", "same_device"]


def _key(device: torch.device) -> tuple:
    """What identifies a device: CPU indices are labels only, CUDA ones are real."""
    if device.type == "cuda":
        return "cuda", device.index if device.index is not None else torch.cuda.current_device()
    return device.type, None


def same_device(module: torch.nn.Module, device: torch.device) -> bool:
    """Whether every parameter and buffer of ``module`` lives on ``device``."""
    tensors = list(module.parameters()) + list(module.buffers())
    return all(_key(t.device) == _key(device) for t in tensors)


def replicate(model: torch.nn.Module, devices: list[torch.device]) -> list[torch.nn.Module]:
    """One replica a device, made once; the model itself serves the first device when it is there.

    Reusing the model for device 0 means a single-device trainer copies
    nothing, and the optimizer (built over the model's parameters) steps the
    parameters that device 0 computes with.
    """
    replicas = []
    for i, device in enumerate(devices):
        if i == 0 and same_device(model, device):
            replicas.append(model)
        else:
            replicas.append(copy.deepcopy(model).to(device))
    return replicas


@torch.no_grad()
def broadcast(
    model: torch.nn.Module, replicas: list[torch.nn.Module], buffers: bool = True
) -> None:
    """Copy the model's parameters (and buffers) into every other replica, in place."""
    source = list(model.parameters())
    source_buffers = list(model.buffers()) if buffers else []
    for replica in replicas:
        if replica is model:
            continue
        for dst, src in zip(replica.parameters(), source, strict=True):
            dst.copy_(src, non_blocking=True)
        if buffers:
            for dst_buffer, src_buffer in zip(replica.buffers(), source_buffers, strict=True):
                dst_buffer.copy_(src_buffer, non_blocking=True)
