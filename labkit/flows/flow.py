"""``Flow``: a sequence of nodes trained one after another, serially.

Node ``k`` trains on chunks that first pass through nodes ``0..k-1``.  A
failure while training a node puts that node back as it was before the
phase, so the flow can be trained again at once.

Examples
--------
>>> import numpy as np, labkit as lk
>>> flow = lk.Flow([lk.nodes.PCA(output_dim=2), lk.nodes.QuadraticExpansion()])
>>> x = np.random.default_rng(0).normal(size=(100, 4))
>>> flow.train([[x[:50], x[50:]], None])
>>> flow.execute(x).shape
(100, 5)
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..checkpoints import atomic_dump, load_checkpoint
from ..errors import InputError, LabkitError, TrainingError, not_fitted
from ..scheduling.tasks.local import resolve_local
from .callables import execute_nodes
from .chunks import as_chunks, check_data_iterables, is_one_shot, pulled, split_chunk
from .node import Node

__all__ = ["Flow", "atomic_dump", "restore_node"]


def restore_node(node: Node, snapshot: Node) -> None:
    """Put ``node`` back to ``snapshot`` in place (references to it stay valid)."""
    node.__dict__.clear()
    node.__dict__.update(snapshot.__dict__)


class Flow:
    """A sequence of nodes.

    Parameters
    ----------
    nodes : iterable of Node
    """

    def __init__(self, nodes: Iterable[Node]):
        if isinstance(nodes, Node) or not hasattr(nodes, "__iter__"):
            raise InputError(
                f"a flow takes a list of nodes, got {type(nodes).__name__}; "
                "for one node write lk.Flow([node])"
            )
        self.nodes = list(nodes)
        for i, node in enumerate(self.nodes):
            if not isinstance(node, Node):
                raise InputError(
                    f"flow entry {i} is a {type(node).__name__}, not a labkit Node", node=i
                )

    # -- training ----------------------------------------------------------------

    def train(self, data_iterables, resume: bool = False) -> None:
        """Train every trainable node in turn.

        Parameters
        ----------
        data_iterables : list
            One chunk source per node (``None`` for untrainable nodes); a single
            array trains every node on it.  Nodes with several phases need a
            re-iterable source (a list, not a generator).
        resume : bool
            Skip nodes that are already trained (e.g. after loading a checkpoint);
            otherwise a trained node is an error.
        """
        sources = self._check_training(data_iterables, resume)
        for i, source in enumerate(sources):
            if source is not None:
                self._train_node_serial(i, source)
                self._after_node(i)

    def _check_training(self, data_iterables, resume: bool) -> list:
        """Validate inputs up front; one chunk source per node (None: skip)."""
        sources = check_data_iterables(data_iterables, len(self.nodes))
        out: list[Any] = []
        for i, (node, data) in enumerate(zip(self.nodes, sources, strict=True)):
            where = {"node": i, "node_name": node.name}
            if not node.is_trainable() or (resume and not node.is_training()):
                out.append(None)
                continue
            if not node.is_training():
                raise TrainingError(
                    f"{node.name} is already trained (pass resume=True to skip trained nodes)",
                    **where,
                )
            if data is None:
                raise InputError(f"{node.name} is trainable but its data iterable is None", **where)
            chunks = as_chunks(data)
            if is_one_shot(chunks) and node.n_phases() != 1:
                raise InputError(
                    f"{node.name} trains in several phases and needs a "
                    "re-iterable source (a list or an object with __iter__), "
                    "not a one-shot iterator or generator",
                    **where,
                )
            out.append(chunks)
        return out

    def _train_node_serial(self, i: int, chunks) -> None:
        node = self.nodes[i]
        snapshot = copy.deepcopy(node)
        try:
            while node.is_training():
                self._train_phase_serial(i, chunks)
        except BaseException as exc:
            restore_node(node, snapshot)
            if isinstance(exc, LabkitError):
                exc.locate(node=i, node_name=node.name)
            raise

    def _train_phase_serial(self, i: int, chunks) -> None:
        """One phase of node ``i`` on the client; errors name node, phase and chunk."""
        node, phase, count = self.nodes[i], self.nodes[i].phase, 0
        where = dict(node=i, node_name=node.name, phase=phase)
        for count, chunk in enumerate(pulled(chunks, **where), start=1):
            try:
                x, args = split_chunk(resolve_local(chunk))
                node.train(execute_nodes(self.nodes[:i], x), *args)
            except LabkitError as err:
                err.locate(node=i, node_name=node.name, phase=phase, chunk=count - 1)
                raise  # the same error, located
        if count == 0:
            raise InputError(
                f"{node.name} got an empty data iterable", node=i, node_name=node.name, phase=phase
            )
        try:
            node.stop_training()
        except LabkitError as err:
            err.locate(node=i, node_name=node.name, phase=phase)
            raise  # the same error, located

    def _after_node(self, i: int) -> None:
        """Called after node ``i`` finished training (checkpoints hook in here)."""

    # -- execution ---------------------------------------------------------------

    def execute(self, x, nodenr: int | None = None):
        """Process ``x`` (an array, or an iterable of chunks) with nodes ``0..nodenr``."""
        nodes = self._executing_nodes(nodenr)
        if isinstance(x, np.ndarray):
            return execute_nodes(nodes, x)
        outputs = []
        for index, chunk in enumerate(as_chunks(x)):
            try:
                outputs.append(execute_nodes(nodes, split_chunk(chunk)[0]))
            except LabkitError as err:
                err.locate(chunk=index)
                raise  # the same error, located
        if not outputs:
            raise InputError("execute got an empty iterable")
        return np.concatenate(outputs)

    def _executing_nodes(self, nodenr: int | None) -> list:
        """Nodes ``0..nodenr``, all trained, or a TrainingError naming the first that is not."""
        if nodenr is not None and not (
            isinstance(nodenr, (int, np.integer)) and 0 <= nodenr < len(self.nodes)
        ):
            raise InputError(
                f"nodenr must be a node index from 0 to {len(self.nodes) - 1}, got {nodenr!r}"
            )
        nodes = self.nodes if nodenr is None else self.nodes[: nodenr + 1]
        for i, node in enumerate(nodes):
            if node.is_trainable() and node.is_training():
                raise not_fitted(
                    f"{node.name} must be trained before execute", node=i, node_name=node.name
                )
        return nodes

    __call__ = execute

    # -- a list of nodes ---------------------------------------------------------

    def __len__(self):
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __contains__(self, node):
        return node in self.nodes

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._with_nodes(self.nodes[key])
        return self.nodes[key]

    def __add__(self, other):
        if isinstance(other, Flow):
            return self._with_nodes(self.nodes + other.nodes)
        if isinstance(other, Node):
            return self._with_nodes(self.nodes + [other])
        return NotImplemented

    def _with_nodes(self, nodes):
        new = copy.copy(self)
        new.nodes = list(nodes)
        return new

    def copy(self):
        """A deep copy of the flow and its nodes."""
        return copy.deepcopy(self)

    def __repr__(self):
        inner = ", ".join(repr(n) for n in self.nodes)
        return f"{type(self).__name__}([{inner}])"

    # -- persistence -----------------------------------------------------------------

    def save(self, path, format: str = "safe") -> None:
        """Save the flow to ``path`` atomically (temp file + rename).

        ``format="safe"`` (the default) writes labkit's checkpoint format, which
        loads without running code from the file; ``format="pickle"`` writes
        labkit's old pickle format (it loads only with ``trusted=True``).
        """
        atomic_dump(self, path, format)

    @classmethod
    def load(cls, path, allow=None, trusted: bool = False) -> Flow:
        """Load a flow saved with :meth:`save`.

        Parameters
        ----------
        path : str or path-like
        allow : list of classes or functions, optional
            Classes and functions besides labkit's nodes and flows (and torch's
            built-in layers, losses and optimizers) the file may recreate,
            e.g. ``allow=[MyNode]``.
        trusted : bool
            Also read pickle checkpoints and recreate any class: unpickling runs
            code named in the file, so pass it only for files you trust.
        """
        flow = load_checkpoint(path, allow=allow, trusted=trusted)
        if not isinstance(flow, Flow):
            raise InputError(
                f"the file holds a {type(flow).__name__}, not a labkit Flow", path=os.fspath(path)
            )
        if not isinstance(flow, cls):
            if not issubclass(cls, type(flow)):
                raise InputError(
                    f"the file holds a {type(flow).__name__}, which is not a "
                    f"{cls.__name__}; load it with lk.{type(flow).__name__}.load",
                    path=os.fspath(path),
                )
            # flow.save(path) read back as a ParallelFlow or a CheckpointFlow: the same
            # nodes, in the class asked for (its methods, e.g. resume=True, then work)
            adopted = cls.__new__(cls)
            adopted.__dict__.update(flow.__dict__)
            flow = adopted
        return flow
