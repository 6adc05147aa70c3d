"""Reduction: replicas' gradients summed by weight, buffers joined back into the model.

Each replica computes the mean loss over its share of the batch, so the
gradient of the whole batch's mean loss is ``sum_i (n_i / n) * grad_i``; with
these weights one step over uneven shares equals one step on a single device
over the whole batch.

BatchNorm running statistics are joined exactly: every replica records the
mean, variance and element count of its batch-norm input (a forward pre-hook),
the pooled mean and variance of the whole batch are computed from them (the
parallel-variance formula), and the running statistics are updated from the
state before the step as a single device seeing the whole batch would.
Other floating buffers are averaged weighted by rows; integer ones keep the
model's value.
"""

from __future__ import annotations

import torch
from torch.nn.modules.batchnorm import _BatchNorm

__all__ = ["GradientReducer", "BatchNormJoin", "average_buffers"]


class GradientReducer:
    """Sums the replicas' gradients into the model's, weighted by each replica's share."""

    def __init__(self, model: torch.nn.Module, replicas: list[torch.nn.Module]):
        self.model = model
        self.params = list(model.parameters())
        self.replica_params = [list(r.parameters()) for r in replicas]
        self.is_model = [r is model for r in replicas]

    @torch.no_grad()
    def __call__(self, active: list[int], weights: list[float]) -> None:
        """Set each model gradient to ``sum(w_i * grad_i)`` over the active replicas."""
        for k, p in enumerate(self.params):
            total = None
            for i, w in zip(active, weights):
                g = self.replica_params[i][k].grad
                if g is None:  # a parameter this replica's forward did not use
                    continue
                if total is None:
                    # the model's own gradient may be scaled in place; a replica's is copied
                    total = g.mul_(w) if self.is_model[i] else g.to(p.device) * w
                else:
                    total.add_(g.to(p.device, non_blocking=True), alpha=w)
            p.grad = total


class BatchNormJoin:
    """Records each replica's batch-norm batch statistics; joins them into the model's."""

    def __init__(self, model: torch.nn.Module, replicas: list[torch.nn.Module]):
        self.model, self.replicas = model, replicas
        self.layers = [name for name, m in model.named_modules() if _tracks(m)]
        self._seen: dict[tuple[int, str], tuple] = {}
        self._before: dict[str, tuple] = {}
        self._handles = []
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
    mean = sum(c * m for c, m in zip(counts, means)) / n
    m2 = sum(
        c * (v.to(device, torch.float64) + (mu - mean) ** 2)
        for c, mu, (_, _, v) in zip(counts, means, seen)
    )
    return mean, m2 / n, n


@torch.no_grad()
def average_buffers(
    model: torch.nn.Module, replicas: list[torch.nn.Module], weights: list[float], skip: set[str]
) -> None:
    """Weighted average of the replicas' floating buffers not in ``skip``, into the model."""
    targets = {n: b for n, b in model.named_buffers() if b.is_floating_point() and n not in skip}
    if not targets:
        return
    per_replica = [dict(r.named_buffers()) for r in replicas]
    for name, target in targets.items():
        total = sum(
            w * b[name].to(target.device, torch.float64) for w, b in zip(weights, per_replica)
        )
        target.copy_(total.to(target.dtype))
