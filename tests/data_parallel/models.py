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


class Recurrent(torch.nn.Module):
    """A small recurrent classifier of integer sequences; runs over any width.

    Embedding, an RNN cell unrolled over the steps, an optional batch norm
    and a linear head: the parameters every bucket's :class:`Unrolled` shares.
    """

    def __init__(self, vocab=8, hidden=6, classes=3, batchnorm=False, dtype=torch.float64,
                 seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.cell = torch.nn.RNNCell(hidden, hidden)
        self.norm = torch.nn.BatchNorm1d(hidden) if batchnorm else torch.nn.Identity()
        self.head = torch.nn.Linear(hidden, classes)
        self.to(dtype)

    def run(self, x, steps):
        """The logits after ``steps`` steps of ``x`` (batch, width)."""
        e = self.embed(x)
        h = e.new_zeros(len(x), self.cell.hidden_size)
        for t in range(steps):
            h = self.cell(e[:, t], h)
        return self.head(self.norm(h))

    def forward(self, x):
        return self.run(x, x.shape[1])


class Unrolled(torch.nn.Module):
    """The network of one bucket: ``model`` unrolled over exactly ``steps`` steps."""

    def __init__(self, model, steps):
        super().__init__()
        self.model, self.steps = model, steps

    def forward(self, x):
        if x.shape[1] != self.steps:
            raise ValueError(f"built for {self.steps} steps, got a batch of {x.shape[1]}")
        return self.model.run(x, self.steps)


def sequences(n=60, low=1, high=20, vocab=8, seed=0):
    """``n`` integer sequences of lengths in ``[low, high]`` and a class each (from their sum)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (n,), generator=g)
    seqs = [torch.randint(1, vocab, (int(k),), generator=g) for k in lengths]
    return seqs, torch.tensor([int(s.sum()) % 3 for s in seqs])


class Refuses(torch.nn.Module):
    """An MLP whose forward raises a ValueError of its own (a user's bug)."""

    def __init__(self):
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        raise ValueError("this replica refuses its rows")
