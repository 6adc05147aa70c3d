"""The built-in routes of :mod:`.transport`: in-process, shared memory, direct scatter, graph.

Each is registered under its ``name`` and says with :meth:`~.Transport.usable`
which clusters it serves; :func:`~.transport.open_routes` makes them once
per scheduler.  Every route reports what becomes of its tasks to the
scheduler's :class:`~.outcomes.Outcomes`.
"""

from __future__ import annotations

import asyncio

from ..dask.connect import cancel_futures
from ..dask.dask_adapter import is_delayed
from ..workers.lazy_chunks import lazy_chunk
from ..workers.reference import ByReference
from ..workers.running import HereTask, run_task, run_task_here
from ..workers.shared import SHARE_BYTES, SharedChunk, SharedChunks
from .packing import TaskClock, clock_key, run_pack_here
from .transport import PASS, ClusterTraits, Transport, register, task_key

__all__ = ["InProcessRoute", "SharedMemoryRoute", "DirectScatterRoute", "GraphRoute"]


def _run_arguments(route: Transport, entry) -> tuple:
    """``(shipped callable, key, topic, offload)`` for starting ``entry`` (on the client thread)."""
    topic, offload = route.context.run_options()
    return entry.batch.shipped_callable(entry), task_key(entry), topic, offload


def _submit_in_graph(route: Transport, entry, payload):
    """Start ``entry`` with ``payload`` inside the task graph; its result is fetched."""
    client = route.context.client
    shipped, key, topic, offload = _run_arguments(route, entry)
    if is_delayed(payload):  # a chunk built on data the cluster holds: a dependent task
        import dask

        task = dask.delayed(run_task, pure=False)(
            shipped, payload, entry.info, topic, None, offload, dask_key_name=key
        )
        future = client.compute(task, **route.context.placement)
    else:
        future = client.submit(
            run_task,
            shipped,
            payload,
            entry.info,
            topic,
            None,
            offload,
            key=key,
            pure=False,
            **route.context.placement,
        )
    route.context.outcomes.follow(entry, future)
    return future


@register
class InProcessRoute(Transport):
    """Tasks on worker threads of this process: the chunk by reference, the outcome delivered.

    Dask pickles every task, also for an in-process worker; the chunk (or a
    lazy block's small graph) goes as a token instead (see :mod:`.reference`),
    and the task hands its outcome to :class:`~.outcomes.Outcomes` where it
    ran (:func:`~.running.run_task_here`): nothing comes back through Dask.
    Tasks of one callable that are ready together start in one ``client.map``.
    """

    name = "in-process"
    priority = 0
    records_own_outcome = True
    starts_groups = True

    @classmethod
    def usable(cls, traits: ClusterTraits) -> bool:
        """Workers that are threads of this process, inputs by reference."""
        return traits.in_process and traits.by_reference

    def prepare(self, entry, data):
        """The chunk itself, or a lazy block as a :class:`~.lazy_chunks.LazyChunk`; a chunk that
        needs data on the cluster goes by the graph route."""
        if is_delayed(data):
            data = lazy_chunk(data)
            if data is None:
                return PASS
        return data

    def __init__(self, context):
        super().__init__(context)
        #: How long each callable's tasks take, to pack quick ones (see :mod:`.packing`).
        self.clock = TaskClock()

    def _held(self, entry, payload, key: str) -> ByReference:
        """``entry``'s input by reference, with the function that delivers its outcome."""
        outcomes = self.context.outcomes
        entry.reference = ByReference(
            HereTask(payload, outcomes.deliverer(entry, key), outcomes.still_open(entry))
        )
        return entry.reference

    def submit(self, entry, payload):
        """One task: ``client.submit`` of :func:`~.running.run_task_here`."""
        shipped, key, topic, offload = _run_arguments(self, entry)
        outcomes = self.context.outcomes
        outcomes.expect([(key, entry)])  # before it starts: it may deliver at once
        future = self.context.client.submit(
            run_task_here,
            self._held(entry, payload, key),
            entry.info,
            shipped,
            topic,
            offload=offload,
            key=key,
            pure=False,
            **self.context.placement,
        )
        outcomes.watch([future])
        return future

    def submit_group(self, group: list) -> list | None:
        """Tasks of one callable in one ``client.map`` (one graph update for the group)."""
        first = group[0][0]
        if any(entry.callable is not first.callable for entry, _ in group):
            return None
        payloads = [self.prepare(entry, data) for entry, data in group]
        if any(payload is PASS for payload in payloads):  # one by one, each by its route
            return None
        shipped, _, topic, offload = _run_arguments(self, first)
        keys = [task_key(entry) for entry, _ in group]
        held = [
            self._held(entry, payload, key)
            for (entry, _), payload, key in zip(group, payloads, keys, strict=True)
        ]
        outcomes = self.context.outcomes
        outcomes.expect([(key, entry) for (entry, _), key in zip(group, keys, strict=True)])
        size = self.clock.pack_size(clock_key(first.callable), len(group))
        if size > 1:
            return self._submit_packs(group, held, keys, size, (shipped, topic, offload))
        futures = self.context.client.map(
            run_task_here,
            held,
            [e.info for e, _ in group],
            task_callable=shipped,
            topic=topic,
            offload=offload,
            key=keys,
            pure=False,
            **self.context.placement,
        )
        outcomes.watch(futures)
        return futures

    def _submit_packs(self, group: list, held: list, keys: list, size: int, run: tuple) -> list:
        """The group's tasks ``size`` to a Dask task (:mod:`.packing`); a future a task."""
        shipped, topic, offload = run
        spans = [slice(i, i + size) for i in range(0, len(group), size)]
        packs = self.context.client.map(
            run_pack_here,
            [held[span] for span in spans],
            [[entry.info for entry, _ in group[span]] for span in spans],
            [keys[span] for span in spans],
            task_callable=shipped,
            topic=topic,
            offload=offload,
            key=[f"{keys[span][0]}-pack" for span in spans],
            pure=False,
            **self.context.placement,
        )
        self.context.outcomes.watch_keys(
            [(key, pack) for pack, span in zip(packs, spans, strict=True) for key in keys[span]]
        )
        return [pack for pack, span in zip(packs, spans, strict=True) for _ in keys[span]]

    def release(self, entry, outcome=None) -> None:
        """Drop the reference: the token no longer resolves.  Time the task for packing."""
        entry.reference = None
        end = getattr(outcome, "end", None)
        if end is not None:
            self.clock.observe(clock_key(entry.callable), end - outcome.start)


@register
class SharedMemoryRoute(Transport):
    """Big chunk arrays to worker processes of this machine through shared memory.

    The client copies each array of 64 KiB or more once into a segment, the
    worker maps it (see :mod:`.shared`); a resubmission sends the same
    segments again.  Segments are reused once the worker unmapped them.
    """

    name = "shared-memory"
    priority = 10
    holds_copies = True

    def __init__(self, context):
        super().__init__(context)
        self.segments = SharedChunks()

    @classmethod
    def usable(cls, traits: ClusterTraits) -> bool:
        """Worker processes that all run on this machine."""
        return traits.shares_memory and not traits.in_process

    def prepare(self, entry, data):
        """The chunk with its big arrays in shared memory, or :data:`PASS` without one."""
        if entry.nbytes < SHARE_BYTES:
            return PASS
        shared = self.segments.chunk_for(entry.info.task, data)
        return shared if isinstance(shared, SharedChunk) else PASS

    def submit(self, entry, payload):
        """The task in the graph, carrying segment names instead of arrays."""
        return _submit_in_graph(self, entry, payload)

    def release(self, entry, outcome=None) -> None:
        """Keep the segments for reuse when the worker unmapped them all, else remove them."""
        self.segments.drop([entry.info.task], reuse=getattr(outcome, "released", None) is True)

    def close(self) -> None:
        """Remove every segment."""
        self.segments.drop_all()


@register
class DirectScatterRoute(Transport):
    """Big chunks straight to a worker process, not through the scheduler.

    The copy runs on the client's event loop while the client thread goes on
    reading chunks; the task is submitted once the chunk is there.  A copy
    that fails (its worker died under it) is a fault for the scheduler to
    judge, as a lost input would be.
    """

    name = "direct-scatter"
    priority = 20
    holds_copies = True

    @classmethod
    def usable(cls, traits: ClusterTraits) -> bool:
        """Worker processes (threads see chunks by reference already)."""
        return not traits.in_process

    def prepare(self, entry, data):
        """The chunk when it is at least ``direct_bytes`` long, else :data:`PASS`."""
        return data if entry.nbytes >= self.context.direct_bytes else PASS

    def submit(self, entry, payload):
        """Start the copy on the event loop; the future is known later (``entry.handle``)."""
        shipped, key, topic, _ = _run_arguments(self, entry)
        client = self.context.client
        asyncio.run_coroutine_threadsafe(
            self._send(entry, payload, key, shipped, topic), client.loop.asyncio_loop
        )
        return None

    async def _send(self, entry, data, key: str, shipped, topic) -> None:
        """On the event loop: scatter the chunk to one worker, then submit its task there."""
        client, outcomes = self.context.client, self.context.outcomes
        placement = self.context.placement
        try:
            chunk = await client.scatter(
                data, direct=True, hash=False, asynchronous=True, workers=placement.get("workers")
            )
            if not entry.is_open():  # cancelled meanwhile
                chunk.release()
                return
            future = client.submit(
                run_task, shipped, chunk, entry.info, topic, key=key, pure=False, **placement
            )
            entry.handle = future
            outcomes.follow(entry, future)
            if not entry.is_open():  # cancelled while it was submitted: the cancel saw no handle
                cancel_futures(client, [future])
        except Exception as exc:  # its worker died, no workers left, it does not pickle
            outcomes.fault(entry, exc)


@register
class GraphRoute(Transport):
    """Everything else, inside the task graph: small chunks, lazy blocks, delayed chunks.

    A lazy block (say of ``da.random`` or ``from_delayed``) is computed inside
    its task (one task a chunk); a chunk built on data the cluster holds (a
    persisted array's block, a future) is a task that depends on it, run
    where the data lies.
    """

    name = "graph"
    priority = 90

    def prepare(self, entry, data):
        """A lazy block as a :class:`~.lazy_chunks.LazyChunk`; anything else as it is."""
        if is_delayed(data):
            lazy = lazy_chunk(data)
            return lazy if lazy is not None else data
        return data

    def submit(self, entry, payload):
        """The task in the graph; its result fetched when done."""
        return _submit_in_graph(self, entry, payload)
