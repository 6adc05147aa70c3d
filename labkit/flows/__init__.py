"""Nodes and flows: the node contract, serial, parallel and checkpointed flows."""

from .callables import FlowExecuteCallable, FlowTrainCallable
from .checkpoint import CheckpointFlow, CheckpointSaver
from .flow import Flow
from .node import Node
from .parallel import JoinResultContainer, ParallelFlow
from .snapshot import allow_in_checkpoints

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
