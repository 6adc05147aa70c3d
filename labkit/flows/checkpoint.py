"""Checkpoints: save the flow after each trained node, resume from the last one.

Checkpoint functions are called as ``fn(flow, node_index)`` after a node
finishes training.  :class:`CheckpointSaver` writes the whole flow atomically
(temp file + rename), so a crash never leaves a half-written checkpoint, in
labkit's safe format (loading it runs no code from the file; see
:mod:`labkit.checkpoints`); ``CheckpointFlow.load(path).train(data,
resume=True, ...)`` goes on from the first node that is not trained.  A
checkpoint path whose folder is missing is an error before any node trains.

Examples
--------
>>> import numpy as np, labkit as lk, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "flow.lk")
>>> flow = lk.CheckpointFlow([lk.nodes.PCA(output_dim=2)])
>>> flow.train([np.ones((10, 3)) + np.eye(10, 3)], checkpoints=path)
>>> lk.CheckpointFlow.load(path)[0].is_training()
False
>>> os.unlink(path); os.rmdir(os.path.dirname(path))
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..checkpoints import FORMATS, atomic_dump, check_writable
from ..errors import InputError, LabkitError
from .parallel import ParallelFlow

__all__ = ["CheckpointFlow", "CheckpointSaver"]


class CheckpointSaver:
    """A checkpoint function that saves the flow to ``path`` after each node.

    ``format`` is ``"safe"`` (the default) or ``"pickle"`` (see
    :meth:`Flow.save`).  The folder of ``path`` must exist when the saver is made.
    """

    def __init__(self, path, format: str = "safe"):
        if format not in FORMATS:
            raise InputError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
        self.path = check_writable(path)
        self.format = format

    def __call__(self, flow, node_index: int) -> None:
        atomic_dump(flow, self.path, self.format)

    def __repr__(self):
        return f"CheckpointSaver({self.path!r})"


class CheckpointFlow(ParallelFlow):
    """A parallel flow that calls checkpoint functions after each trained node."""

    _checkpoints: list = []

    def train(  # type: ignore[override]  # public since the seed: checkpoints come second
        self,
        data_iterables,
        checkpoints=None,
        scheduler=None,
        wait: bool = True,
        train_callable_class=None,
        resume: bool = False,
    ):
        """Train like :meth:`ParallelFlow.train`, checkpointing after each node.

        Parameters
        ----------
        checkpoints : path, callable, or list of them
            A path means a :class:`CheckpointSaver`; a list holds one entry per
            node (``None`` for no checkpoint after that node) or applies to all.
        """
        self._checkpoints = self._checkpoint_list(checkpoints)
        return super().train(
            data_iterables,
            scheduler=scheduler,
            wait=wait,
            train_callable_class=train_callable_class,
            resume=resume,
        )

    def _checkpoint_list(self, checkpoints) -> list[Callable | None]:
        """One checkpoint function (or None) per node; paths checked before training."""
        n = len(self.nodes)
        if checkpoints is None:
            return [None] * n
        if _is_checkpoint(checkpoints):
            checkpoints = [checkpoints] * n
        elif not hasattr(checkpoints, "__iter__"):
            raise InputError(
                "checkpoints must be a file path, a function fn(flow, node_index), "
                f"a list of them (one per node) or None, got "
                f"{type(checkpoints).__name__} {checkpoints!r}"
            )
        checkpoints = list(checkpoints)
        if len(checkpoints) != n:
            raise InputError(f"got {len(checkpoints)} checkpoints for {n} nodes")
        out = []
        for i, entry in enumerate(checkpoints):
            if entry is not None and not _is_checkpoint(entry):
                raise InputError(
                    f"checkpoint {i} must be a file path, a function or None, "
                    f"got {type(entry).__name__} {entry!r}",
                    node=i,
                )
            is_path = isinstance(entry, (str, os.PathLike))
            try:
                out.append(CheckpointSaver(entry) if is_path else entry)
            except InputError as err:
                err.locate(node=i, node_name=self.nodes[i].name)
                raise  # the same error, located
        return out

    def _after_node(self, i: int) -> None:
        checkpoint = self._checkpoints[i] if i < len(self._checkpoints) else None
        if checkpoint is not None:
            try:
                checkpoint(self, i)
            except LabkitError as err:  # a full disk, say: which node's checkpoint it was
                err.locate(node=i, node_name=self.nodes[i].name)
                raise  # the same error, located

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_checkpoints", None)  # functions of this run, not part of the flow
        return state


def _is_checkpoint(entry) -> bool:
    """Whether ``entry`` is one checkpoint: a path or a function."""
    return isinstance(entry, (str, os.PathLike)) or callable(entry)
