"""Small seeded torch models and data shared by the data-parallel tests."""

from __future__ import annotations

import copy
import time

import torch


def mlp(dtype=torch.float64, seed=0, batchnorm=False, first_bn=False):
    """Linear-Tanh-Linear (optionally with batch norm), seeded."""
    torch.manual_seed(seed)
    layers = [torch.nn.BatchNorm1d(6)] if first_bn else []
    layers += [torch.nn.Linear(6, 16)]
    layers += [torch.nn.BatchNorm1d(16)] if batchnorm else []
    layers += [torch.nn.Tanh(), torch.nn.Linear(16, 3)]
    return torch.nn.Sequential(*layers).to(dtype)


def batch(n=24, dtype=torch.float64, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g, dtype=dtype) * 2 + 0.5
    y = torch.randn(n, 3, generator=g, dtype=dtype)
    return x, y


def sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def plain_steps(model, batches, optimizer_fn=sgd, loss_fn=torch.nn.functional.mse_loss):
    """Reference: a plain single-device training loop over full batches."""
    model = copy.deepcopy(model)
    opt = optimizer_fn(model)
    for x, y in batches:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    return model


def assert_same_parameters(a, b, atol=1e-6):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(p.double(), q.double(), atol=atol, rtol=0), name


class Slow(torch.nn.Module):
    """Wraps a module; sleeps ``per_row`` seconds a row first (a slower device on CPU)."""

    def __init__(self, inner, per_row=0.0):
        super().__init__()
        self.inner, self.per_row = inner, per_row

    def forward(self, x):
        time.sleep(self.per_row * len(x))
        return self.inner(x)


class HoldOn(torch.nn.Module):
    """Wraps a module; on a share holding a value above 100 it touches ``flag`` and sleeps.

    The test that kills this replica's worker waits for the flag, so the kill
    lands in the middle of the step however slow the machine is.
    """

    def __init__(self, inner, flag, seconds=120.0):
        super().__init__()
        self.inner, self.flag, self.seconds = inner, str(flag), seconds

    def forward(self, x):
        if (x > 100).any():
            open(self.flag, "w").close()
            time.sleep(self.seconds)
        return self.inner(x)
