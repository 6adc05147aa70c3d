"""Batch-norm running statistics joined exactly, as one device seeing the whole batch would.

Every replica records the mean, variance and element count of its batch-norm
input (a forward pre-hook); the pooled mean and variance of the whole batch
come from them (the parallel-variance formula), and the running statistics
are updated from the state before the step.  Shared by the replicas on
threads (:mod:`.local.thread_group`, joined in this process) and by a rank on
a Dask worker (:mod:`.worker.rank`, which sums the records with its peers).
"""

from __future__ import annotations

import torch
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ["BatchNormJoin"]


class BatchNormJoin:
    """Records each replica's batch-norm batch statistics; joins them into the model's."""

    def __init__(self, model: torch.nn.Module, replicas: list[torch.nn.Module]):
        self.model, self.replicas = model, replicas
        self.layers = [name for name, m in model.named_modules() if _tracks(m)]
        self._seen: dict[tuple[int, str], tuple] = {}
        self._before: dict[str, tuple] = {}
        self._handles: list = []
        for i, replica in enumerate(replicas):
            modules = dict(replica.named_modules())
            for name in self.layers:
                self._handles.append(
                    modules[name].register_forward_pre_hook(self._recorder(i, name))
                )

    def __bool__(self) -> bool:
        return bool(self.layers)

    def _recorder(self, i: int, name: str):
        def record(module, inputs):
            if not (module.training and _tracks(module)):
                return
            x = inputs[0].detach()
            dims = [d for d in range(x.dim()) if d != 1]
            count = x.numel() // x.shape[1]
            var, mean = torch.var_mean(x, dim=dims, correction=0)
            self._seen[(i, name)] = (count, mean, var)
            if i == 0:  # the state before this step's update, once
                self._before[name] = (
                    module.running_mean.clone(),
                    module.running_var.clone(),
                    int(module.num_batches_tracked),
                )

        return record

    def seen(self, replica: int, name: str) -> tuple | None:
        """``(count, mean, variance)`` of layer ``name``'s input on ``replica`` this step."""
        return self._seen.get((replica, name))

    def before(self, name: str) -> tuple | None:
        """``(running mean, running variance, batches tracked)`` of ``name`` before this step."""
        return self._before.get(name)

    def start(self) -> None:
        """Forget the last step's records."""
        self._seen.clear()
        self._before.clear()

    @torch.no_grad()
    def join(self, active: list[int]) -> None:
        """Set the model's running statistics as if one device had seen the whole batch."""
        modules = dict(self.model.named_modules())
        for name in self.layers:
            seen = [self._seen.get((i, name)) for i in active]
            if any(s is None for s in seen) or name not in self._before:
                continue  # the layer did not run in training mode this step
            module = modules[name]
            mean_b, var_b, n = _pooled(seen, module.running_mean.device)
            mean0, var0, tracked = self._before[name]
            m = module.momentum if module.momentum is not None else 1.0 / (tracked + 1)
            unbiased = var_b * n / max(n - 1, 1)
            module.running_mean.copy_((1 - m) * mean0 + m * mean_b.to(mean0.dtype))
            module.running_var.copy_((1 - m) * var0 + m * unbiased.to(var0.dtype))
            module.num_batches_tracked.fill_(tracked + 1)

    def remove(self) -> None:
        """Take the hooks off the replicas."""
        for handle in self._handles:
            handle.remove()


def _tracks(module) -> bool:
    """Whether ``module`` is a batch norm keeping running statistics."""
    return (
        isinstance(module, _BatchNorm)
        and module.track_running_stats
        and module.running_mean is not None
    )


def _pooled(seen, device):
    """Mean, biased variance and count of the union of the recorded batches."""
    counts = [c for c, _, _ in seen]
    n = sum(counts)
    means = [m.to(device, torch.float64) for _, m, _ in seen]
    mean = sum(c * m for c, m in zip(counts, means, strict=True)) / n
    m2 = sum(
        c * (v.to(device, torch.float64) + (mu - mean) ** 2)
        for c, mu, (_, _, v) in zip(counts, means, seen, strict=True)
    )
    return mean, m2 / n, n
