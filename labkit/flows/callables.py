"""Task callables for flows: train one node, or execute a flow, on a worker.

The callable carries the already-trained nodes before the one being trained,
so a chunk goes through them on the worker, inside the task, never on the
client.  Subclass and override :meth:`FlowTrainCallable.transform` (or the
execute twin) to change chunks on the worker first, e.g. to decode images.

Examples
--------
>>> import numpy as np
>>> class Decode(FlowTrainCallable):
...     def transform(self, chunk):
...         return chunk.astype("float64") / 255
>>> # flow.train(chunks_of_uint8, scheduler=s, train_callable_class=Decode)
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ..errors import LabkitError
from ..scheduling import TaskCallable
from .chunks import split_chunk

__all__ = ["FlowTrainCallable", "FlowExecuteCallable", "execute_nodes", "join_execute_forks"]


def execute_nodes(nodes, x, first_index: int = 0):
    """Run ``x`` through ``nodes``; an error names the node that raised it."""
    for offset, node in enumerate(nodes):
        try:
            x = node.execute(x)
        except LabkitError as err:
            err.locate(node=first_index + offset, node_name=node.name)
            raise  # the same error, located
    return x


class FlowTrainCallable(TaskCallable):
    """Trains a fork of node ``len(prefix)`` on one chunk and returns the fork.

    Parameters
    ----------
    prefix : list of Node
        Trained nodes that come before the node being trained.
    node : Node
        A fork of the node being trained; forked again for every task.
    """

    def __init__(self, prefix, node):
        self.prefix = list(prefix)
        self.node = node

    def transform(self, chunk):
        """Change a chunk on the worker before anything else sees it."""
        return chunk

    @property
    def holds_gil(self) -> bool:
        """Whether a node the chunk goes through runs GIL-holding Python."""
        return any(getattr(n, "holds_gil", True) for n in [*self.prefix, self.node])

    @holds_gil.setter
    def holds_gil(self, value: bool) -> None:
        raise AttributeError("holds_gil follows the nodes: set it on a node class")

    def fork(self):
        forked = copy.copy(self)
        forked.node = self.node.fork()
        return forked

    def parts(self) -> dict:
        """The nodes it carries, named (for messages)."""
        return _node_parts([*self.prefix, self.node])

    def __call__(self, chunk):
        x, args = split_chunk(self.transform(chunk))
        x = execute_nodes(self.prefix, x)
        self.node.train(x, *args)
        return self.node


class FlowExecuteCallable(TaskCallable):
    """Executes ``nodes`` on one chunk; forks nodes that learn during execute.

    Returns the output array, or ``(output, forks)`` when some node uses
    execute forks (``forks`` maps node index to the fork to join).
    """

    def __init__(self, nodes):
        self.nodes = list(nodes)
        self.forking = [i for i, n in enumerate(self.nodes) if n.use_execute_fork()]

    def transform(self, chunk):
        """Change a chunk on the worker before anything else sees it."""
        return chunk

    @property
    def holds_gil(self) -> bool:
        """Whether a node of the flow runs GIL-holding Python."""
        return any(getattr(n, "holds_gil", True) for n in self.nodes)

    @holds_gil.setter
    def holds_gil(self, value: bool) -> None:
        raise AttributeError("holds_gil follows the nodes: set it on a node class")

    def parts(self) -> dict:
        """The nodes it carries, named (for messages)."""
        return _node_parts(self.nodes)

    def fork(self):
        if not self.forking:
            return self
        forked = copy.copy(self)
        forked.nodes = [n.fork() if i in self.forking else n for i, n in enumerate(self.nodes)]
        return forked

    def __call__(self, chunk):
        x, _ = split_chunk(self.transform(chunk))
        y = execute_nodes(self.nodes, np.asarray(x))
        if self.forking:
            return y, {i: self.nodes[i] for i in self.forking}
        return y


def _node_parts(nodes) -> dict:
    """``{"node 2 (PCA)": node, ...}``: each node by its place in the flow and its name."""
    return {f"node {i} ({getattr(n, 'name', type(n).__name__)})": n for i, n in enumerate(nodes)}


def join_execute_forks(nodes: list[Any], result: tuple[Any, dict[int, Any]]) -> Any:
    """The output of a forking execute task, its forks joined into ``nodes``."""
    y, forks = result
    for index, forked in forks.items():
        nodes[index].join(forked)
    return y
