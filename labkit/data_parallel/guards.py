"""Guards of the data-parallel trainer: argument checks and the non-finite loss policy.

Every check raises an :class:`~labkit.errors.InputError` naming the argument
(and the step) before anything reaches a replica, so a bad call leaves the
trainer as it was.  A step whose loss is NaN or infinite raises
:class:`NonFiniteLossError` after the trainer has put every replica back as it
was before the step; ``on_nonfinite="skip"`` turns that into a warning.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable

import torch

from ..constraints import POSITIVE_INT, Options, check_argument
from ..errors import InputError, TrainingError
from .bucketing import BucketBatch
from .reports import batch_number

__all__ = [
    "NonFiniteLossError",
    "NonFiniteLossWarning",
    "POLICIES",
    "check_policy",
    "check_batch",
    "check_batches",
    "check_epochs",
    "check_loss",
    "first_nonfinite",
    "warn_skipped",
    "pair",
]

POLICIES = ("raise", "skip")


class NonFiniteLossError(TrainingError):
    """A replica's loss was NaN or infinite; the step was undone (nothing changed).

    Attributes
    ----------
    loss : float
        The offending loss value.
    """

    def __init__(self, message: str = "", loss: float = math.nan, **where):
        super().__init__(message, **where)
        self.loss = loss

    @classmethod
    def of(cls, loss: float, replica: int, device: str) -> NonFiniteLossError:
        """The error for replica ``replica`` (on ``device``) whose loss was ``loss``."""
        return cls(
            f"the loss of replica {replica} is {loss}: the step was not taken (the "
            "parameters, optimizer state and buffers are as before it); lower the "
            "learning rate, check this batch, or pass on_nonfinite='skip'",
            loss=loss,
            replica=replica,
            device=device,
        )

    def _extra(self) -> dict:
        return dict(super()._extra(), loss=self.loss)


class NonFiniteLossWarning(RuntimeWarning):
    """A batch was skipped because its loss was not finite (``on_nonfinite="skip"``)."""


def check_policy(on_nonfinite) -> str:
    """``on_nonfinite``, checked."""
    return check_argument("on_nonfinite", on_nonfinite, [Options(POLICIES)])


def first_nonfinite(losses: list[float]) -> int | None:
    """Index of the first loss that is NaN or infinite, or None."""
    return next((k for k, v in enumerate(losses) if not math.isfinite(v)), None)


def warn_skipped(err: NonFiniteLossError, skipped: int) -> None:
    """Warn that the batch of ``err`` was skipped (the ``skipped``-th so far)."""
    warnings.warn(
        f"skipped a batch with a non-finite loss ({err.loss}) "
        f"[{', '.join(f'{k} {v}' for k, v in err.where.items())}]; "
        f"{skipped} skipped so far",
        NonFiniteLossWarning,
        stacklevel=3,
    )


def check_batch(x, y, step: int | None = None, what: str = "step", **where) -> int:
    """The row count of the batch ``(x, y)`` given to ``what`` (a step, evaluate), checked.

    The same rules for training and evaluating: torch tensors, rows in both,
    as many targets as rows (a length-1 ``y`` would otherwise broadcast).
    """
    where = dict(where, step=step)
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise InputError(
                f"{what} needs torch tensors: {name} is a {type(t).__name__} "
                "(convert it with torch.as_tensor)",
                argument=name,
                **where,
            )
        if t.dim() == 0:
            raise InputError(
                f"{name} is a scalar: a batch needs one row per sample", argument=name, **where
            )
    if len(x) == 0:
        raise InputError("the batch is empty (x has no rows)", argument="x", **where)
    if len(y) != len(x):
        raise InputError(
            f"the batch has {len(x)} rows but {len(y)} targets: x and y need "
            "the same number of rows",
            argument="y",
            **where,
        )
    return len(x)


def check_loss(loss) -> None:
    """What ``loss_fn`` returned, checked: one number to call ``backward`` on."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        got = (
            f"a tensor of shape {tuple(loss.shape)}"
            if isinstance(loss, torch.Tensor)
            else f"a {type(loss).__name__}"
        )
        raise InputError(
            f"loss_fn must return a tensor holding one number (a mean or a sum "
            f"over the rows), got {got}",
            argument="loss_fn",
        )


def check_epochs(epochs) -> int:
    """``epochs`` of ``fit``, checked: a positive int."""
    return int(check_argument("epochs", epochs, [POSITIVE_INT]))


def check_batches(batches, epochs: int = 1, what: str = "fit") -> None:
    """``batches``: an iterable of pairs, one that can be iterated again for several epochs."""
    if not isinstance(batches, Iterable) or isinstance(batches, (str, bytes, torch.Tensor)):
        raise InputError(
            f"{what} needs batches: an iterable of (x, y) pairs such as a list "
            f"or a DataLoader, got {type(batches).__name__}",
            argument="batches",
        )
    if epochs > 1 and iter(batches) is batches:
        raise InputError(
            f"{what} over several epochs needs batches it can iterate again "
            "(a list or a DataLoader), not a one-shot iterator",
            argument="batches",
        )


def pair(batch, epoch, b):
    """``(x, y, bucket key)`` of batch index ``b`` (a pair or a BucketBatch), or a clear error."""
    if isinstance(batch, BucketBatch):
        return batch.x, batch.y, batch.key
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise InputError(
            f"a batch must be an (x, y) pair or an lk.BucketBatch, got {type(batch).__name__}",
            epoch=epoch,
            batch=batch_number(b),
        )
    x, y = batch
    for name, t in (("x", x), ("y", y)):
        if not isinstance(t, torch.Tensor):
            raise InputError(
                f"a batch needs torch tensors: {name} is a {type(t).__name__} "
                "(convert it with torch.as_tensor)",
                argument=name,
                epoch=epoch,
                batch=batch_number(b),
            )
    return x, y, None
