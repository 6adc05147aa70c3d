"""Flows: the node contract and the flows that train nodes serially, in parallel, with checkpoints.

A :class:`Node` learns from chunks in phases and forks/joins for parallel
training (its fork hands back a :class:`~.node.Partial`); a :class:`Flow`
trains its nodes one after another; :class:`ParallelFlow` trains each phase
as tasks on a scheduler (joining forks on the client or on the workers);
:class:`CheckpointFlow` saves after each node.  ``chunks`` turns what a user
passes to ``train``/``execute`` into streams of chunks.

Imports: ``labkit.errors``, ``labkit.events``, ``labkit.runs``,
``labkit.scheduling`` (to run tasks) and ``labkit.checkpoints`` (to save);
never ``labkit.nodes`` (they build on this room), ``labkit.experiments``,
``labkit.data_parallel`` or ``labkit.views``.  Its nodes and flows are
declared loadable from checkpoints here (:func:`labkit.checkpoints.allow_library`).
"""

from ..checkpoints import allow_in_checkpoints, allow_library
from .callables import FlowExecuteCallable, FlowTrainCallable
from .checkpoint import CheckpointFlow, CheckpointSaver
from .flow import Flow
from .node import Node
from .parallel import JoinResultContainer, ParallelFlow

# a checkpoint recreates labkit's nodes and flows without being told; not its savers (they write)
allow_library(__name__, Node, Flow)

__all__ = [
    "Node",
    "Flow",
    "ParallelFlow",
    "CheckpointFlow",
    "CheckpointSaver",
    "FlowTrainCallable",
    "FlowExecuteCallable",
    "JoinResultContainer",
    "allow_in_checkpoints",
]
