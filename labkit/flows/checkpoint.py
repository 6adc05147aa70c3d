"""Checkpoints: save the flow after each trained node, resume from the last one.

Checkpoint functions are called as ``fn(flow, node_index)`` after a node
finishes training.  :class:`CheckpointSaver` writes the whole flow atomically
(temp file + rename), so a crash never leaves a half-written checkpoint;
``CheckpointFlow.load(path).train(data, resume=True, ...)`` goes on from the
first node that is not trained.

Examples
--------
>>> import numpy as np, labkit as lk, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "flow.pkl")
>>> flow = lk.CheckpointFlow([lk.nodes.PCA(output_dim=2)])
>>> flow.train([np.ones((10, 3)) + np.eye(10, 3)], checkpoints=path)
>>> lk.CheckpointFlow.load(path)[0].is_training()
False
>>> os.unlink(path); os.rmdir(os.path.dirname(path))
"""

from __future__ import annotations

import os
from typing import Callable

from ..errors import InputError
from .flow import atomic_dump
from .parallel import ParallelFlow

__all__ = ["CheckpointFlow", "CheckpointSaver"]


class CheckpointSaver:
    """A checkpoint function that saves the flow to ``path`` after each node."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def __call__(self, flow, node_index: int) -> None:
        atomic_dump(flow, self.path)

    def __repr__(self):
        return f"CheckpointSaver({self.path!r})"


class CheckpointFlow(ParallelFlow):
    """A parallel flow that calls checkpoint functions after each trained node."""

    _checkpoints: list = []

    def train(self, data_iterables, checkpoints=None, scheduler=None, wait: bool = True,
              train_callable_class=None, resume: bool = False):
        """Train like :meth:`ParallelFlow.train`, checkpointing after each node.

        Parameters
        ----------
        checkpoints : path, callable, or list of them
            A path means a :class:`CheckpointSaver`; a list holds one entry per
            node (``None`` for no checkpoint after that node) or applies to all.
        """
        self._checkpoints = self._checkpoint_list(checkpoints)
        return super().train(data_iterables, scheduler=scheduler, wait=wait,
                             train_callable_class=train_callable_class, resume=resume)

    def _checkpoint_list(self, checkpoints) -> list[Callable | None]:
        n = len(self.nodes)
        if checkpoints is None:
            return [None] * n
        if isinstance(checkpoints, (str, os.PathLike)) or callable(checkpoints):
            checkpoints = [checkpoints] * n
        checkpoints = list(checkpoints)
        if len(checkpoints) != n:
            raise InputError(f"got {len(checkpoints)} checkpoints for {n} nodes")
        return [CheckpointSaver(c) if isinstance(c, (str, os.PathLike)) else c
                for c in checkpoints]

    def _after_node(self, i: int) -> None:
        checkpoint = self._checkpoints[i] if i < len(self._checkpoints) else None
        if checkpoint is not None:
            checkpoint(self, i)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_checkpoints", None)  # functions of this run, not part of the flow
        return state
