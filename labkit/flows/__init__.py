"""Nodes and flows: the node contract, serial, parallel and checkpointed flows."""

from .node import Node

__all__ = ["Node"]
