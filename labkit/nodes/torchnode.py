"""A torch module as a flow node, trained by federated averaging.

Each training phase is one epoch.  Every chunk trains its own copy of the
module, starting from the parameters the phase began with, for one pass of
mini-batches with a fresh optimizer.  The copy's parameters and floating
buffers, multiplied by the chunk's row count, are added to running sums;
``stop_training`` sets the module to the sample-weighted average.  Sums
commute, so forks trained on workers and joined in any order give what
serial training gives, up to rounding.

Randomness inside a chunk's pass (``shuffle``, dropout) draws from a torch
generator seeded by ``seed``, the phase and the chunk's bytes, and the
caller's global torch random state is left untouched: a chunk trains the
same way on the client and on a worker.

This module imports torch; ``labkit`` itself does not import this module
until ``TorchNode`` is first used.
"""

from __future__ import annotations

import copy
import math
import threading
import zlib
from typing import Any

import numpy as np
import torch

from ..errors import InputError, TrainingError
from ..flows.checks import positive_int
from ..flows.node import Node

__all__ = ["TorchNode"]

_RNG_LOCK = threading.RLock()  # see TorchNode._train

#: torch dtypes numpy cannot hold; outputs in them come back as float32.
_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)


def _tensor(a: np.ndarray, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """``a`` as a tensor on ``like``'s device, in ``dtype`` (``like``'s by default)."""
    # Chunks deserialised on a Dask worker may be read-only; torch warns about
    # (and must not write through) such memory, so those are copied first.
    if not a.flags.writeable:
        a = a.copy()
    return torch.from_numpy(np.ascontiguousarray(a)).to(
        device=like.device, dtype=dtype or like.dtype
    )


def _to_numpy(out: torch.Tensor) -> np.ndarray:
    """Module output as a 2-D numpy array (one column for a 1-D output)."""
    out = out.detach().cpu()
    if out.is_floating_point() and out.dtype not in _NUMPY_FLOATS:
        out = out.float()  # bfloat16 and friends have no numpy dtype
    if out.ndim == 1:
        out = out[:, None]
    return out.numpy()


class TorchNode(Node):
    """Train a torch module in a flow, one epoch per phase, averaging chunk replicas.

    Parameters
    ----------
    module : torch.nn.Module
        The model; it maps a ``(rows, input_dim)`` tensor in its parameter
        dtype to ``(rows, output_dim)`` (or ``(rows,)``, taken as one column).
    loss_fn : callable
        ``loss_fn(output, target)`` returning a scalar tensor, e.g.
        ``torch.nn.MSELoss()`` or ``torch.nn.CrossEntropyLoss()``.
    optimizer_factory : callable
        ``optimizer_factory(parameters)`` returns a fresh optimizer, e.g.
        ``functools.partial(torch.optim.SGD, lr=0.1)``.  A lambda works on
        Dask (cloudpickle), but ``Flow.save`` and checkpoints need a factory
        that can be found by name, such as a ``partial``; lambdas are refused.
    epochs : int
        Training phases; each is one pass over the data.
    batch_size : int, optional
        Rows per optimizer step; a whole chunk by default.
    shuffle : bool
        Visit a chunk's rows in a random (seeded) order.
    seed : int
        Seeds shuffling and the module's own randomness (dropout) per chunk.
    **node_kwargs
        ``output_dim`` (checked against the module's output; found from it
        otherwise), ``input_dim``, ``dtype``, ``check_finite``, ``name``:
        see :class:`~labkit.flows.node.Node`.

    Attributes
    ----------
    module : torch.nn.Module
        The averaged model after each phase.
    losses : list of float
        Mean training loss (over samples, while training) of each finished phase.

    Notes
    -----
    Targets are required: chunks ``(x, y)`` in a flow, ``train(x, y)`` alone.
    Integer labels become int64 (as ``CrossEntropyLoss`` wants), float and
    bool targets the module's dtype; a 1-D float target meets a one-column
    output as a column.  Input is converted to the module's dtype, so a
    float32 module takes float64 chunks.  Optimizer state (momentum, Adam's
    moments) lives for one chunk's pass only.  Integer buffers (BatchNorm's
    batch count) take the largest value any replica reached.

    Examples
    --------
    >>> import functools, numpy as np, torch, labkit as lk
    >>> _ = torch.manual_seed(0)
    >>> x = np.random.default_rng(0).normal(size=(120, 4)) * [3.0, 2.0, 1.0, 0.1]
    >>> y = x @ [1.0, -1.0, 0.5, 0.0]
    >>> net = TorchNode(torch.nn.Linear(3, 1).double(), torch.nn.MSELoss(),
    ...                 functools.partial(torch.optim.SGD, lr=0.05), epochs=4, batch_size=10)
    >>> flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=3), net])
    >>> parts = np.array_split(np.arange(120), 3)
    >>> flow.train([[x[r] for r in parts], [(x[r], y[r]) for r in parts]],
    ...            scheduler=lk.LocalScheduler())
    >>> flow.execute(x).shape
    (120, 1)
    >>> bool(net.losses[-1] < net.losses[0] / 10)
    True
    """

    holds_gil = False  # numpy/BLAS (torch) work: runs on threads

    def __init__(
        self,
        module,
        loss_fn,
        optimizer_factory,
        epochs=1,
        batch_size=None,
        shuffle=False,
        seed=0,
        **node_kwargs,
    ):
        super().__init__(**node_kwargs)
        if not isinstance(module, torch.nn.Module):
            raise InputError(
                f"{self.name} needs a torch.nn.Module, got {type(module).__name__}",
                node_name=self.name,
            )
        if next(module.parameters(), None) is None:
            raise InputError(
                f"{self.name}: the module has no parameters to train", node_name=self.name
            )
        for what, fn in (("loss_fn", loss_fn), ("optimizer_factory", optimizer_factory)):
            if not callable(fn):
                raise InputError(
                    f"{self.name} {what} must be callable, got {fn!r}", node_name=self.name
                )
        self._output_dim = positive_int(self, self._output_dim, "output_dim", allow_none=True)
        self.module, self.loss_fn, self.optimizer_factory = module, loss_fn, optimizer_factory
        self.epochs = positive_int(self, epochs, "epochs")
        self.batch_size = positive_int(self, batch_size, "batch_size", allow_none=True)
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.losses: list[float] = []
        self._reset_sums()

    def _reset_sums(self) -> None:
        """Empty the phase accumulators."""
        self._sums: dict[str, Any] = {}  # state_dict key -> float64 sum of rows * value
        self._maxima: dict[str, Any] = {}  # non-floating state (batch counts) -> largest seen
        self._weight = 0  # rows behind the sums
        self._loss_sum = 0.0  # sum of rows * batch loss

    def n_phases(self) -> int:
        return self.epochs

    @property
    def _reference(self) -> torch.Tensor:
        """A parameter: the dtype and device inputs are converted to."""
        return next(self.module.parameters())

    # -- training ----------------------------------------------------------------

    def _train(self, x, y=None):
        if y is None:
            raise InputError(
                f"{self.name} needs targets: train(x, y), or (x, y) chunks in a flow",
                node_name=self.name,
                phase=self.phase,
            )
        target = self._targets(x, y)
        inputs = _tensor(x, self._reference)
        # A replica per chunk, so every chunk starts from the phase's parameters
        # whether it trains here or in a fork: serial == parallel.
        replica = copy.deepcopy(self.module)
        # torch's RNG is one per process: forks training on threads of one process
        # (the in-process cluster) take turns, so each chunk sees its own seed's draws.
        with _RNG_LOCK, torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._chunk_seed(x))
            self._loss_sum += self._one_pass(replica, inputs, target)
        self._accumulate(replica.state_dict(), x.shape[0])

    def _targets(self, x: np.ndarray, y) -> torch.Tensor:
        """Checked targets for chunk ``x`` as a tensor (int64 labels or module dtype)."""
        y = np.asarray(y)
        if y.ndim == 0 or y.shape[0] != x.shape[0]:
            got = "a scalar" if y.ndim == 0 else str(y.shape[0])
            raise InputError(
                f"{self.name} got {x.shape[0]} samples but {got} targets",
                node_name=self.name,
                phase=self.phase,
            )
        if y.dtype.kind in "iu":
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]  # a column of labels: class-index losses want 1-D
            return _tensor(y, self._reference, torch.int64)
        if y.dtype.kind in "fb":
            return _tensor(y, self._reference)
        raise InputError(
            f"{self.name} cannot train on targets of dtype {y.dtype}",
            node_name=self.name,
            phase=self.phase,
        )

    def _chunk_seed(self, x: np.ndarray) -> int:
        """A seed from ``seed``, the phase and the chunk's bytes (the same on any machine)."""
        data = np.ascontiguousarray(x).view(np.uint8).ravel()
        salt = zlib.crc32(data)  # type: ignore[arg-type]  # numpy's stubs: an array is a buffer
        return zlib.crc32(f"{self.seed}/{self.phase}".encode(), salt)

    def _one_pass(self, replica, inputs, target) -> float:
        """Train ``replica`` over one chunk in mini-batches; the sum of rows * loss."""
        replica.train()
        optimizer = self.optimizer_factory(replica.parameters())
        n = inputs.shape[0]
        order = torch.randperm(n) if self.shuffle else torch.arange(n)
        size = self.batch_size or n
        total = 0.0
        for start in range(0, n, size):
            rows = order[start : start + size]
            optimizer.zero_grad()
            loss = self._batch_loss(replica(inputs[rows]), target[rows])
            value = float(loss.detach())
            if not math.isfinite(value):
                raise TrainingError(
                    f"{self.name}: the training loss became {value} in phase "
                    f"{self.phase} (batch at row {start} of a chunk of {n})",
                    node_name=self.name,
                    phase=self.phase,
                )
            loss.backward()
            optimizer.step()
            total += value * len(rows)
        return total

    def _batch_loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        self._note_output_dim(out)
        if target.is_floating_point() and target.ndim == 1 and out.ndim == 2 and out.shape[1] == 1:
            target = target[:, None]  # MSELoss would broadcast (n,) against (n, 1) to (n, n)
        return self.loss_fn(out, target)

    def _note_output_dim(self, out: torch.Tensor) -> None:
        """Fix ``output_dim`` from the first output; check it afterwards."""
        dim = out.shape[1] if out.ndim == 2 else 1
        if self._output_dim is None:
            self._output_dim = dim
        elif dim != self._output_dim:
            raise InputError(
                f"{self.name} expects output dim {self._output_dim}, the module gave {dim}",
                node_name=self.name,
                phase=self.phase,
            )

    def _accumulate(self, state: dict, rows: int) -> None:
        """Add a replica's state, weighted by ``rows``, to the phase sums."""
        sums, maxima = {}, {}
        for key, value in state.items():
            if value.is_floating_point():
                sums[key] = value.detach().to(torch.float64) * rows
            else:
                maxima[key] = value.detach().clone()
        self._merge(sums, maxima, rows)

    def _merge(self, sums: dict, maxima: dict, weight: int) -> None:
        # New tensors, never in-place adds: a fork's tensors may be shared.
        for key, value in sums.items():
            self._sums[key] = value if key not in self._sums else self._sums[key] + value
        for key, value in maxima.items():
            mine = self._maxima.get(key)
            self._maxima[key] = value if mine is None else torch.maximum(mine, value)
        self._weight += weight

    # -- fork and join -----------------------------------------------------------

    def _fork(self):
        return type(self)(
            copy.deepcopy(self.module),
            self.loss_fn,
            self.optimizer_factory,
            epochs=self.epochs,
            batch_size=self.batch_size,
            shuffle=self.shuffle,
            seed=self.seed,
            output_dim=self._output_dim,
        )

    def _partial(self):
        return {
            "output_dim": self._output_dim,
            "sums": self._sums,
            "maxima": self._maxima,
            "weight": self._weight,
            "loss_sum": self._loss_sum,
        }

    def _join(self, partial):
        theirs = partial["output_dim"]
        if theirs is not None:
            if self._output_dim is None:
                self._output_dim = theirs
            elif theirs != self._output_dim:
                raise InputError(
                    f"{self.name} expects output dim {self._output_dim}, a fork had {theirs}",
                    node_name=self.name,
                    phase=self.phase,
                )
        self._merge(partial["sums"], partial["maxima"], partial["weight"])
        self._loss_sum += partial["loss_sum"]

    def _stop_training(self):
        averaged = {key: total / self._weight for key, total in self._sums.items()}
        if not all(bool(torch.isfinite(v).all()) for v in averaged.values()):
            raise TrainingError(
                f"{self.name}: parameters became NaN or inf in phase {self.phase}",
                node_name=self.name,
                phase=self.phase,
            )
        current = self.module.state_dict()
        new = {
            key: averaged[key].to(value.dtype) if key in averaged else self._maxima.get(key, value)
            for key, value in current.items()
        }
        self.module.load_state_dict(new)
        self.losses.append(self._loss_sum / self._weight)
        self._reset_sums()

    # -- execution and views -----------------------------------------------------

    def _execute(self, x):
        self.module.eval()
        with torch.no_grad():
            out = self.module(_tensor(x, self._reference))
        self._note_output_dim(out)
        return _to_numpy(out)

    def _plot_data(self):
        return {"loss": list(self.losses)}

    def __repr__(self) -> str:
        dims = f"input_dim={self._input_dim}, output_dim={self._output_dim}"
        return f"{type(self).__name__}({type(self.module).__name__}, {dims}, epochs={self.epochs})"
