"""The worker side of :class:`~labkit.data_parallel.distributed.DaskReplicaGroup`.

Functions submitted to (or run on) the Dask workers: build a replica, join
the process group, take a step (forward, backward, a failure flag, scaled
gradient all-reduce, exact batch-norm pooling), evaluate, get and set state,
tear down.  Each worker keeps its replicas in the module-level ``_GROUPS``,
keyed by group id, so later tasks pinned to that worker find them.
"""

from __future__ import annotations

import math
import os
import socket
import time

import cloudpickle
import torch

from ..errors import LabkitError, located
from .bucketing import BucketModules
from .groups import open_group
from .guards import check_loss
from .interfaces import binding, bound
from .reduce import BatchNormJoin

__all__ = ["free_port", "build", "join", "step", "evaluate", "get_state", "set_state",
           "teardown", "to_cpu"]

_GROUPS: dict = {}  # group id -> _Replica


class _Replica:
    """What one worker keeps between tasks."""

    def __init__(self, name, device, model, loss_fn, optimizer, bucket_model=None):
        self.name, self.device, self.group = name, device, None
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.buckets = BucketModules(bucket_model, [model])  # this rank's module of each key
        self.params = list(model.parameters())
        named = list(model.named_buffers())
        self.buffers = [b for _, b in named]
        # batch-norm statistics are pooled exactly (see _pool_batchnorm), not averaged
        self.bn = BatchNormJoin(model, [model])
        pooled = {f"{layer}.{n}" if layer else n for layer in self.bn.layers
                  for n in ("running_mean", "running_var", "num_batches_tracked")}
        self.floating = [k for k, (n, b) in enumerate(named)
                         if b.is_floating_point() and n not in pooled]


def _located(exc, rank, name) -> LabkitError:
    """``exc`` as a labkit error naming the replica."""
    return located(exc, f"replica {rank}", replica=rank, device=name)


def free_port(host):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def build(gid, rank, name, payload, cuda_index):
    try:
        device = torch.device("cpu")
        if cuda_index is not None:  # launchers that set CUDA_VISIBLE_DEVICES put our GPU first
            index = 0 if os.environ.get("CUDA_VISIBLE_DEVICES") else cuda_index
            device = torch.device("cuda", index % torch.cuda.device_count())
            torch.cuda.set_device(device)
        parts = cloudpickle.loads(payload)
        model, loss_fn, bucket_model = parts["model"], parts["loss_fn"], parts["bucket_model"]
        opt_type, defaults, groups, opt_state = parts["optimizer"]
        params = list(model.to(device).parameters())
        optimizer = opt_type([{"params": [params[j] for j in g]} for g in groups], **defaults)
        optimizer.load_state_dict(opt_state)
        _GROUPS[gid] = _Replica(name, device, model, loss_fn, optimizer, bucket_model)
    except BaseException as exc:
        raise _located(exc, rank, name) from None


def join(gid, rank, world, init_method, backend, timeout, host):
    """Join the process group on the interface of the worker's ``host``; says which."""
    rep = _GROUPS[gid]
    try:
        choice = binding(backend, host)
        with bound(choice):   # the backend reads its interface from the environment
            group = open_group(init_method, rank, world, backend, timeout, gid)
    except BaseException as exc:
        raise _located(exc, rank, rep.name) from None
    rep.group = group
    if gid not in _GROUPS:  # closed while this rank waited for its peers
        group.close()
    return choice.describe()


def teardown(gid):
    """Run by ``client.run``, beside the task threads, so it never queues behind a task."""
    rep = _GROUPS.pop(gid, None)
    if rep is not None and rep.group is not None:
        rep.group.close()   # this group only: other trainers' groups on the worker live on


def _reduce_scaled(reducer, tensors, weight):
    """Set each tensor to the sum over ranks of ``weight * tensor``; one call per dtype."""
    groups: dict = {}
    for t in tensors:
        groups.setdefault((t.dtype, t.device), []).append(t)
    for group in groups.values():
        flat = torch.cat([t.reshape(-1) for t in group])
        if weight != 1.0:
            flat.mul_(weight)
        reducer.all_reduce(flat)
        offset = 0
        for t in group:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()


def _forward_backward(rep, rank, x, y, key):
    """``(loss, seconds, memory, error)`` of one share; an error is returned, not raised."""
    cuda = rep.device.type == "cuda"
    try:
        module = rep.buckets.get(0, key, replica=rank, device=rep.name)
        if cuda:
            torch.cuda.reset_peak_memory_stats(rep.device)
        start = time.perf_counter()
        loss = rep.loss_fn(module(x.to(rep.device)), None if y is None else y.to(rep.device))
        check_loss(loss)
        loss.backward()
        if cuda:
            torch.cuda.synchronize(rep.device)
        memory = torch.cuda.max_memory_allocated(rep.device) if cuda else None
        return float(loss.detach()), time.perf_counter() - start, memory, None
    except Exception as exc:
        return 0.0, 0.0, None, _located(exc, rank, rep.name)


def _pool_batchnorm(rep):
    """Running statistics of every batch norm as if one device had seen the whole batch.

    Each rank contributes the element count, sum and sum of squares of its
    batch-norm inputs (zeros when it had no rows); one all-reduce pools them
    and every rank updates from the statistics it had before the step.
    """
    if not rep.bn:
        return
    modules = dict(rep.model.named_modules())
    parts = []
    for name in rep.bn.layers:
        module, seen = modules[name], rep.bn._seen.get((0, name))
        part = torch.zeros(1 + 2 * module.num_features, dtype=torch.float64, device=rep.device)
        if seen is not None:
            count, mean, var = seen
            mean, var = mean.to(torch.float64), var.to(torch.float64)
            part[0] = count
            part[1:1 + module.num_features] = count * mean
            part[1 + module.num_features:] = count * (var + mean * mean)
        parts.append(part)
    flat = torch.cat(parts)
    rep.group.all_reduce(flat)
    offset = 0
    for name, part in zip(rep.bn.layers, parts):
        module = modules[name]
        c = module.num_features
        n, s1, s2 = flat[offset], flat[offset + 1:offset + 1 + c], flat[offset + 1 + c:offset + 1 + 2 * c]
        offset += 1 + 2 * c
        if n < 1:
            continue
        mean0, var0, tracked = rep.bn._before.get(name) or (
            module.running_mean.clone(), module.running_var.clone(), int(module.num_batches_tracked))
        m = module.momentum if module.momentum is not None else 1.0 / (tracked + 1)
        mean = s1 / n
        unbiased = (s2 / n - mean * mean).clamp_min(0) * n / max(float(n) - 1, 1.0)
        module.running_mean.copy_((1 - m) * mean0 + m * mean.to(mean0.dtype))
        module.running_var.copy_((1 - m) * var0 + m * unbiased.to(var0.dtype))
        module.num_batches_tracked.fill_(tracked + 1)


def step(gid, rank, x, y, weight, buffer_weight, key=None):
    """Forward and backward on this rank's rows (bucket ``key``), then the reduced step.

    The ranks first agree on a flag vector: any rank's error or non-finite
    loss makes every rank undo its forward (buffers, gradients) and skip the
    step, so the replicas stay equal and as before it.
    """
    rep = _GROUPS[gid]
    rep.bn.start()
    before = [b.detach().clone() for b in rep.buffers]
    rep.optimizer.zero_grad(set_to_none=True)
    loss, seconds, memory, error = 0.0, 0.0, None, None
    if len(x):
        loss, seconds, memory, error = _forward_backward(rep, rank, x, y, key)
    try:
        flags = _agree(rep, error, loss, before)
        if flags[0] or flags[1]:  # some rank failed: nobody updates
            _undo(rep, before)
            return {"failed": True, "error": error, "nonfinite": not math.isfinite(loss),
                    "loss": loss}
        _reduce_gradients(rep, flags[2:2 + len(rep.params)], weight)
    except BaseException as exc:  # a peer lost mid-collective: leave the state of the last step
        _undo(rep, before)
        raise _located(exc, rank, rep.name) from None
    with torch.no_grad():
        rep.optimizer.step()
        changed = [rep.buffers[k] for k, c in zip(rep.floating, flags[2 + len(rep.params):]) if c]
        _reduce_scaled(rep.group, changed, buffer_weight)
        _pool_batchnorm(rep)
    return {"failed": False, "loss": loss, "seconds": seconds, "memory": memory}


def _agree(rep, error, loss, before) -> list[float]:
    """Summed over ranks: failures, non-finite losses, gradients present, buffers changed."""
    flags = [error is not None, error is None and not math.isfinite(loss)] + [p.grad is not None for p in rep.params]
    flags += [not torch.equal(before[k], rep.buffers[k]) for k in rep.floating]
    flags = torch.tensor(flags, dtype=torch.float32, device=rep.device)
    rep.group.all_reduce(flags)
    return flags.tolist()


@torch.no_grad()
def _undo(rep, before) -> None:
    """Back to the state before the step: no gradients, the old buffers."""
    rep.optimizer.zero_grad(set_to_none=True)
    for b, old in zip(rep.buffers, before):
        b.copy_(old)


@torch.no_grad()
def _reduce_gradients(rep, present, weight) -> None:
    """Sum the weighted gradients over ranks; a gradient a peer has, we send as zeros."""
    for p, flag in zip(rep.params, present):
        if flag and p.grad is None:
            p.grad = torch.zeros_like(p)
    _reduce_scaled(rep.group, [p.grad for p in rep.params if p.grad is not None], weight)


def evaluate(gid, rank, x, y, metrics, key=None):
    rep = _GROUPS[gid]
    training = rep.model.training
    try:
        rep.model.eval()
        with torch.no_grad():
            out = rep.buckets.get(0, key, replica=rank, device=rep.name)(x.to(rep.device))
            y = None if y is None else y.to(rep.device)
            values = {"loss": rep.loss_fn(out, y), **{k: f(out, y) for k, f in metrics.items()}}
        return {k: float(v) for k, v in values.items()}
    except Exception as exc:
        raise _located(exc, rank, rep.name) from None
    finally:
        rep.model.train(training)


def to_cpu(obj):
    """``obj`` with every tensor in it copied to the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return type(obj)((k, to_cpu(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(v) for v in obj)
    return obj


def get_state(gid):
    rep = _GROUPS[gid]
    return {"model": to_cpu(rep.model.state_dict()), "optimizer": to_cpu(rep.optimizer.state_dict())}


def set_state(gid, rank, state):
    rep = _GROUPS[gid]
    try:
        rep.model.load_state_dict(state["model"])
        rep.optimizer.load_state_dict(state["optimizer"])
    except Exception as exc:
        raise _located(exc, rank, rep.name) from None
