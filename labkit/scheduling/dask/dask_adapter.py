"""Everything labkit knows about Dask beyond its public API, in one place.

labkit talks to Dask through its public API (``Client``, futures' ``status``,
``add_done_callback``, ``as_completed``, ``scatter``, worker events on a
topic).  A few things have no public form; each is here, with why, so that a
Dask upgrade that breaks one breaks it in this module only
(``tests/scheduling/test_dask_adapter.py`` checks that nothing else in
``labkit/`` uses a private Dask name):

* the words Dask gives as the reason of a cancel that is really a lost input
  (:data:`LOST_INPUT_REASONS`);
* the shape of the scheduler's ``remove-worker`` event, which names the tasks
  a dying worker was running, read on the scheduler (:func:`workers_lost_under`);
* the task-spec graph of ``dask._task_spec`` that a lazy block is made of
  (:func:`task_graph`, :func:`is_task_graph`), computed node by node inside a
  task because ``dask.local.get_sync`` costs three times as much;
* keeping the callables labkit shipped to every worker there
  (:func:`keep_shipped_copies`): Dask's Active Memory Manager drops a key's
  extra copies every two seconds (its ``ReduceReplicas`` policy, on by default),
  so a worker between two tasks lost the layer's inputs and fetched them again;
* whether a cluster adapts its size to demand (:func:`is_adaptive`): ``Cluster.adapt()``
  keeps its ``Adaptive`` in a private attribute, and no public one says so;
* which workers the scheduler retired, or closed for a preemption notice
  (SIGTERM) (:func:`watch_retirements`, :func:`left_gracefully`): a plugin on the
  scheduler hears its events, since Dask says nowhere public whether a worker
  that left was retired or lost;
* a handshake that another client's message crossed (:func:`handshake_comms`):
  Dask's client asserts that the scheduler's first batch holds ``stream-start``
  alone, and leaves that handshake's comm open in a local, so the scheduler
  keeps a client for it until a garbage collection frees it;
* asking the scheduler for its full identity (:func:`scheduler_identity`):
  ``Client.scheduler_info()`` returns a cache that the client's periodic
  refresh overwrites with a copy listing no worker.

The type tests (:func:`is_delayed`, :func:`is_future`, :func:`is_dask_array`,
:func:`is_killed_worker`, :func:`is_cancelled`) use Dask's public classes.

Examples
--------
>>> lost_input("lost dependencies"), lost_input("stopped by hand")
(True, False)
>>> is_delayed(3), is_future(3), is_dask_array([1])
(False, False, False)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import traceback
import weakref
from typing import Any

import dask

from ...errors import SchedulerError
from .preemption import SIGNAL_REASON, watch_preemption

logger = logging.getLogger("labkit.scheduling")

__all__ = [
    "RETIREMENTS",
    "watch_retirements",
    "left_gracefully",
    "SHIPPED_PREFIX",
    "keep_shipped_copies",
    "LOST_INPUT_REASONS",
    "lost_input",
    "cancel_reason",
    "is_killed_worker",
    "killed_worker_address",
    "is_cancelled",
    "allowed_failures",
    "workers_lost_under",
    "task_graph",
    "is_task_graph",
    "is_delayed",
    "is_future",
    "is_dask_array",
    "scheduler_identity",
    "forget_on_scheduler",
    "is_adaptive",
    "handshake_comms",
]

#: Reasons Dask gives when it cancels a task because its inputs died with their holders.
LOST_INPUT_REASONS = ("lost dependencies", "already forgotten")


def lost_input(reason: str) -> bool:
    """Whether a cancel's ``reason`` says that the task's inputs were lost."""
    return any(words in reason for words in LOST_INPUT_REASONS)


def cancel_reason(future, timeout: float = 5.0) -> str:
    """Why Dask cancelled ``future`` (``"lost dependencies"``, ``"scheduler-restart"``...).

    A cancelled future's ``result()`` raises ``FutureCancelledError`` with its
    ``reason``; ``""`` when it was not cancelled or says nothing.
    """
    if future.status != "cancelled":
        return ""
    try:
        future.result(timeout=timeout)
    except BaseException as exc:  # FutureCancelledError; anything else tells nothing
        return str(getattr(exc, "reason", "") or "")
    return ""


def is_killed_worker(error: BaseException | None) -> bool:
    """Whether ``error`` is Dask's ``KilledWorker``: workers kept dying under the task."""
    from distributed import KilledWorker

    return isinstance(error, KilledWorker)


def killed_worker_address(error: BaseException | None) -> str | None:
    """The last worker a ``KilledWorker`` names, if it names one."""
    return getattr(getattr(error, "last_worker", None), "address", None)


def is_cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancel of Dask's, asyncio's or ``concurrent.futures``' kind."""
    from distributed import CancelledError

    return isinstance(
        exc, (CancelledError, asyncio.CancelledError, concurrent.futures.CancelledError)
    )


def allowed_failures() -> int:
    """How many workers may die under one task before Dask gives up on it."""
    return int(dask.config.get("distributed.scheduler.allowed-failures", 3))


def workers_lost_under(client, key_prefix: str) -> list[str]:
    """Workers that died while running a task whose key starts with ``key_prefix``.

    Read on the scheduler from its structured ``remove-worker`` events (topic
    ``"all"``), which list the keys the worker was processing.  The public
    ``Client.get_events("all")`` cannot be used: other events of that topic
    hold objects that do not serialize, so the whole answer fails.  ``[]``
    when the scheduler cannot be asked.
    """

    def lost_under(dask_scheduler):  # nested: pickled by value, the scheduler needs no labkit
        return [
            msg.get("worker", "?")
            for _, msg in dask_scheduler.get_events("all")
            if isinstance(msg, dict)
            and msg.get("action") == "remove-worker"
            and any(str(k).startswith(key_prefix) for k in msg.get("processing-tasks", ()))
        ]

    try:
        return list(client.run_on_scheduler(lost_under))
    except Exception:  # the scheduler is gone too: nothing more to learn
        return []


def forget_on_scheduler(client, topic: str, group: str, key: str) -> None:
    """Drop a topic's logged events and one entry of a ``task_metadata`` group, on the scheduler.

    A sweep's reports travel as events of a topic and its checkpoints as task
    metadata; both can be large and outlive the sweep unless dropped.
    """

    def forget(dask_scheduler):  # nested: pickled by value, the scheduler needs no labkit
        broker = getattr(dask_scheduler, "_broker", None)  # private: the event log
        if broker is not None:
            broker.truncate(topic)
        dask_scheduler.task_metadata.get(group, {}).pop(key, None)

    client.run_on_scheduler(forget)


def task_graph(graph: dict) -> dict:
    """``graph`` (a dict of keys to tasks) with old-style tuples converted to task specs."""
    from dask._task_spec import convert_legacy_graph

    return convert_legacy_graph(graph)


def is_task_graph(graph: dict) -> bool:
    """Whether every node of ``graph`` is a task spec that can be computed node by node."""
    from dask._task_spec import GraphNode

    return all(isinstance(node, GraphNode) for node in graph.values())


def is_delayed(obj: Any) -> bool:
    """Whether ``obj`` is a ``dask.delayed`` object (it answers any ``hasattr``)."""
    from dask.delayed import Delayed

    return isinstance(obj, Delayed)


def is_future(obj: Any) -> bool:
    """Whether ``obj`` is a ``distributed`` future (without importing distributed for it)."""
    if "distributed" not in sys.modules:
        return False
    from distributed import Future

    return isinstance(obj, Future)


def is_dask_array(obj: Any) -> bool:
    """Whether ``obj`` is a ``dask.array.Array`` (without importing dask.array for it)."""
    if "dask.array" not in sys.modules:
        return False
    import dask.array as da

    return isinstance(obj, da.Array)


def scheduler_identity(client, timeout: float | None = None) -> dict:
    """The scheduler's identity, every worker included, asked of the scheduler itself
    (``timeout``: most seconds to wait for its answer; None: no limit).

    ``client.scheduler_info()`` hands back a cache that the client's own periodic
    refresh overwrites with a copy listing no worker at all; under load that copy
    won often enough that a live worker looked lost.
    """
    scheduler = client.scheduler
    if scheduler is None or getattr(client, "status", None) in ("closing", "closed"):
        # shut down under a running loop (a fit, a sweep): a labkit error, not Dask's None
        raise SchedulerError("the Dask client is closed: the scheduler was shut down")
    return client.sync(scheduler.identity, n_workers=-1, callback_timeout=timeout)


#: The start of the key of a callable shipped to every worker (see ``ship_callable``).
SHIPPED_PREFIX = "shipped-callable-"


def keep_shipped_copies(client) -> bool:
    """Have the scheduler keep every copy of a shipped callable; whether it now does.

    The scheduler's ``ReduceReplicas`` policy is swapped for one that passes
    over keys starting with :data:`SHIPPED_PREFIX` and drops other keys' extra
    copies as before.  A scheduler without the Active Memory Manager, or one
    that refuses, keeps Dask's behaviour: a worker refetches what it lacks.
    """
    prefix = SHIPPED_PREFIX

    def swap(dask_scheduler) -> bool:  # nested: pickled by value, the scheduler needs no labkit
        from distributed.active_memory_manager import ReduceReplicas

        class KeepShipped(ReduceReplicas):
            """ReduceReplicas, except for labkit's shipped callables."""

            def run(self):
                inner = super().run()
                answer = None
                while True:
                    try:
                        suggestion = inner.send(answer)
                    except StopIteration:
                        return
                    if str(suggestion.ts.key).startswith(prefix):
                        answer = None
                        continue
                    answer = yield suggestion

        amm = dask_scheduler.extensions.get("amm")
        if amm is None:
            return False
        for policy in list(amm.policies):
            if type(policy) is ReduceReplicas:
                amm.policies.discard(policy)
                amm.add_policy(KeepShipped())
        return any(type(p).__name__ == "KeepShipped" for p in amm.policies)

    try:
        return bool(client.run_on_scheduler(swap))
    except Exception:  # an old or locked-down scheduler: Dask's own policy stays
        return False


def handshake_comms(exc: BaseException) -> list:
    """The open comms that the frames of ``exc``'s traceback (a failed handshake) hold.

    Dask's client keeps its handshake's comm in a local of the coroutine that
    failed: only the traceback still reaches it, and nothing else closes it.
    """
    from distributed.comm import Comm

    found: list = []
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        for value in frame.f_locals.values():
            if isinstance(value, Comm) and not value.closed() and value not in found:
                found.append(value)
    return found


def is_adaptive(cluster) -> bool:
    """Whether ``cluster`` (a ``distributed.deploy.Cluster``, or None) adapts its size to
    its scheduler's demand (``cluster.adapt(...)`` was called and not stopped)."""
    adaptive = getattr(cluster, "_adaptive", None)  # Cluster.adapt() keeps it there
    if adaptive is None:
        return False
    state = getattr(adaptive, "state", "running")  # "stopped" once adapt is stopped
    return str(state) != "stopped"


#: The name of labkit's plugin on a scheduler that keeps which workers were retired.
RETIREMENTS = "labkit-retirements"


#: Clients whose scheduler was given the watches below, and that scheduler's address.
_WATCHING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _watching(client) -> bool:
    """Whether ``client``'s scheduler (the one at its address now) watches retirements."""
    try:
        return _WATCHING.get(client) == client.scheduler.address
    except (AttributeError, TypeError):  # a closed client: no scheduler, nothing known
        return False


def watch_retirements(client) -> None:
    """Have the scheduler of ``client`` keep which workers it retires (once per scheduler).

    The scheduler's own event log may keep nothing (labkit's embedded clusters
    keep no message log), but a plugin hears every event as it is logged.  A
    worker that closes for a signal (a preemption notice, SIGTERM) left
    gracefully too: ``dask worker`` (a nanny) closes its worker so, and
    :func:`.preemption.watch_preemption`, registered here, has a worker process
    under a nanny do the same.  The
    plugin is defined inside this function, so that it travels by value: the
    scheduler needs no labkit.  A scheduler that cannot take it leaves every
    departure unknown to be graceful (a loss).
    """

    if _watching(client):
        return  # three round trips (two to every worker) that each fit and sweep paid again
    notice = SIGNAL_REASON  # a local: the plugin travels by value, without this module

    def install(dask_scheduler):  # nested: pickled by value
        from distributed.diagnostics.plugin import SchedulerPlugin

        class Retirements(SchedulerPlugin):
            """Which workers the scheduler's events say it was last retiring (the 1000 last)."""

            def __init__(self):
                self.retired: dict = {}

            def log_event(self, topic, msg) -> None:
                if not isinstance(msg, dict) or not isinstance(topic, str):
                    return
                action, status = msg.get("action"), msg.get("status")
                if action == "could-not-retire" or status == "running":
                    self.retired.pop(topic, None)  # a retirement called off
                elif self.graceful(action, status, msg):
                    self.retired[topic] = True
                    while len(self.retired) > 1000:
                        self.retired.pop(next(iter(self.retired)))

            @staticmethod
            def graceful(action, status, msg) -> bool:
                """Whether an event says its worker leaves gracefully: retired, or closing
                for a signal (a preemption notice: ``dask worker``'s SIGTERM, or labkit's
                plugin on a worker process), which a killed worker never announces."""
                return (
                    action == "retired"
                    or status == "closing_gracefully"
                    or (action == "remove-worker" and msg.get("expected") is True)
                    or (action == "closing-worker" and str(msg.get("reason")).startswith(notice))
                )

        dask_scheduler.add_plugin(Retirements(), name="labkit-retirements", idempotent=True)

    try:
        client.run_on_scheduler(install)
        _WATCHING[client] = client.scheduler.address
    except Exception:  # the scheduler gone or refusing plugins: departures count as losses
        logger.debug("labkit: could not watch the scheduler for retired workers", exc_info=True)
    watch_preemption(client)  # a SIGTERM to a worker process: a graceful close, announced


def left_gracefully(client, addresses) -> list:
    """The workers of ``addresses`` that the scheduler retired (``retire_workers``, a
    ``lifetime``, an adaptive scale-down) or that closed for a preemption notice (SIGTERM),
    as heard since :func:`watch_retirements`.

    Asked once a worker has left: a worker killed (or lost) was never retired.
    """
    addresses = list(addresses)

    def ask(dask_scheduler):  # nested: pickled by value
        plugin = dask_scheduler.plugins.get("labkit-retirements")
        retired = {} if plugin is None else plugin.retired
        return [address for address in addresses if address in retired]

    try:
        return list(client.run_on_scheduler(ask))
    except Exception:  # the scheduler unreachable: the loss is not known to be graceful
        return []
