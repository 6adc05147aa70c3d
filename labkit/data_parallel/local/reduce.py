"""Reduce: the replicas' gradients summed by weight into the model's, buffers averaged.

Each replica computes the mean loss over its share of the batch, so the
gradient of the whole batch's mean loss is ``sum_i (n_i / n) * grad_i``; with
these weights one step over uneven shares equals one step on a single device
over the whole batch.

Batch-norm running statistics are joined exactly (:mod:`..batchnorm`).
Other floating buffers are averaged weighted by rows; integer ones keep the
model's value.
"""

from __future__ import annotations

import torch

__all__ = ["GradientReducer", "average_buffers"]


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
            for i, w in zip(active, weights, strict=True):
                g = self.replica_params[i][k].grad
                if g is None:  # a parameter this replica's forward did not use
                    continue
                if total is None:
                    # the model's own gradient may be scaled in place; a replica's is copied
                    total = g.mul_(w) if self.is_model[i] else g.to(p.device) * w
                else:
                    total.add_(g.to(p.device, non_blocking=True), alpha=w)
            p.grad = total


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
        total = torch.zeros_like(target, dtype=torch.float64)
        for w, b in zip(weights, per_replica, strict=True):
            total += w * b[name].to(target.device, torch.float64)
        target.copy_(total.to(target.dtype))
