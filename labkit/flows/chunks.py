"""Turning what a user passes to ``train``/``execute`` into streams of chunks.

A node's input may be one array (one chunk), a list of chunks, any iterable
or iterator of chunks (pulled lazily), a Dask array (its row blocks, trained
where they lie) or a list of Dask futures / delayed chunks.  A chunk is an
array, or a tuple ``(x, *args)`` passed on as ``node.train(x, *args)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import InputError
from ..errors import pulled as pulled_from
from ..scheduling.dask import dask_adapter

__all__ = [
    "as_chunks",
    "split_chunk",
    "is_one_shot",
    "is_dask_array",
    "check_data_iterables",
    "pulled",
]


def pulled(chunks: Iterable, **where) -> Iterator:
    """``chunks``, with an error of the source itself located where it happened.

    A generator that raises while making chunk 3 of node 0 raises here an
    :class:`~labkit.errors.InputError` naming the node, its phase and the chunk,
    the user's own exception chained to it; so does a pipe whose processor
    raised (its error, naming stage and record, is chained).  See
    :func:`labkit.errors.pulled`, which the trainer's batches go through too.

    Examples
    --------
    >>> def source():
    ...     yield 1
    ...     raise OSError("disk gone")
    >>> list(pulled(source(), node=0))
    Traceback (most recent call last):
    ...
    labkit.errors.InputError: the chunk source raised OSError: disk gone while making chunk 1 [node 0, chunk 1]
    """
    return pulled_from(chunks, "chunk", **where)


def is_dask_array(obj) -> bool:
    """Whether ``obj`` is a ``dask.array.Array`` (without importing dask.array)."""
    return dask_adapter.is_dask_array(obj)


def _dask_row_blocks(arr) -> list:
    """Row blocks of a Dask array as delayed objects, whole rows each."""
    if arr.ndim != 2:
        raise InputError(f"a Dask array chunk source must be 2-D, got shape {arr.shape}")
    if len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})  # a node needs whole rows; keep the row blocks as they are
    # Unoptimised: optimising culls and fuses the whole graph at once (2 ms for 40 blocks);
    # each block's own graph is culled when its task is made (see LazyChunk).
    return list(arr.to_delayed(optimize_graph=False).ravel())


def as_chunks(data) -> Iterable:
    """An iterable of chunks for ``data`` (see module docstring)."""
    if isinstance(data, np.ndarray):
        return [data]
    if is_dask_array(data):
        return _dask_row_blocks(data)
    if isinstance(data, tuple) and data and isinstance(data[0], np.ndarray):
        return [data]  # one (x, y) chunk
    if isinstance(data, (str, bytes)) or not hasattr(data, "__iter__"):
        raise InputError(f"expected an array or an iterable of chunks, got {type(data).__name__}")
    return data


def is_one_shot(data) -> bool:
    """Whether iterating ``data`` consumes it (an iterator or generator)."""
    return isinstance(data, Iterator)


def split_chunk(chunk) -> tuple[Any, tuple]:
    """``(x, args)`` for a chunk that is ``x`` or ``(x, *args)``."""
    if isinstance(chunk, tuple):
        if not chunk:
            raise InputError("a chunk tuple must hold at least the input array")
        return chunk[0], chunk[1:]
    return chunk, ()


def check_data_iterables(data_iterables, n_nodes: int) -> list:
    """One data source per node; a single array is used for every node."""
    if isinstance(data_iterables, np.ndarray) or is_dask_array(data_iterables):
        return [data_iterables] * n_nodes
    if not isinstance(data_iterables, (list, tuple)):
        raise InputError(
            "data_iterables must be a list with one iterable per node "
            f"(or one array for all), got {type(data_iterables).__name__}"
        )
    if len(data_iterables) != n_nodes:
        raise InputError(
            f"wrong number of data iterables: got {len(data_iterables)} "
            f"for {n_nodes} nodes (use None for nodes that do not train)"
        )
    return list(data_iterables)


def known_length(chunks) -> int | None:
    """Number of chunks when the source knows it without being consumed.

    A stream (a pipeline queue) has a length too, but it counts what waits in
    it now, not what it will deliver: its total is unknown.
    """
    if getattr(chunks, "_labkit_stream", False):
        return None
    try:
        return len(chunks)
    except TypeError:
        return None
