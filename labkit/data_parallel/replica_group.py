"""The contract every replica group keeps: what the trainer calls on it, declared once.

Two groups keep it: replicas on threads of this process
(:class:`~labkit.data_parallel.local.thread_group.ThreadGroup`, and
:class:`~labkit.data_parallel.local.thread_group.SchedulerThreadGroup` on an
in-process scheduler) and replicas on Dask workers
(:class:`~labkit.data_parallel.dask.group.DaskReplicaGroup`).  The trainer
and its loops call nothing else on a group, and branch on its capability
flags only, never on its type:

``runs_epochs``
    True: a fit over data that lives on the workers runs its epochs there
    (:meth:`~ReplicaGroup.fit_epoch`, :meth:`~ReplicaGroup.evaluate_source`);
    False: every step comes from the client (:meth:`~ReplicaGroup.steps`) and
    those two raise.

``holds_model``
    True: the trainer's own model is what the replicas train (it is replica 0,
    or the target of the reduce), so it holds the trained state after every
    call; False: the replicas are copies (on Dask workers), and the trainer
    loads :meth:`~ReplicaGroup.fetch_state` into the model after each call
    (:mod:`.model_sync`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["ReplicaGroup", "EpochOptions", "COMMIT_EVERY", "MAX_FAILURES"]

#: Steps between two commits (a lost worker costs at most this many steps again).
COMMIT_EVERY = 50
#: Workers a fit may lose and go on.
MAX_FAILURES = 3


@dataclass(frozen=True)
class EpochOptions:
    """How a fit whose epochs run on the workers commits, checkpoints and survives losses."""

    commit_every: int = COMMIT_EVERY  # steps between two commits (0: at each epoch's end only)
    checkpoint: str | None = None  # a file each commit is also written to
    max_failures: int = MAX_FAILURES  # workers the fit may lose and go on


@runtime_checkable
class ReplicaGroup(Protocol):
    """Replicas of one model that take planned steps and report each (see the module doc)."""

    @property
    def runs_epochs(self) -> bool:
        """Capability: fits over data on the workers run their epochs there."""

    @property
    def holds_model(self) -> bool:
        """Capability: the trainer's model is trained in place (nothing to copy back)."""

    @property
    def names(self) -> list[str]:
        """The replicas' names (devices or worker addresses), in rank order."""

    @property
    def devices(self) -> list:
        """Each replica's device (a ``torch.device`` here, a description on a worker)."""

    @property
    def replicas(self) -> list:
        """The replicas in this process (``[]`` when they live on workers)."""

    @property
    def interfaces(self) -> list[str]:
        """Per rank, the network interface its process group uses (``[]`` on threads)."""

    @property
    def scheduler(self) -> Any:
        """The scheduler whose workers or threads hold the replicas (None in-process)."""

    @property
    def client(self) -> Any:
        """The Dask client of the workers that hold the replicas (None on threads)."""

    def check_open(self) -> None:
        """Raise when the group cannot take a call (closed, broken, scheduler gone)."""

    def stop_reason(self) -> Any:
        """The error a call cut short by its scheduler's shutdown raises, where the one who
        shut it down gave one (a stopped trial's ``TrialStopped``); else None."""

    def steps(
        self,
        planned: Iterable[Any],
        done: Callable[[Any], None],
        check: Callable[[], None] | None = None,
        policy: str = "raise",
    ) -> None:
        """Train each planned step; ``done(report)`` for each, in order."""

    def fit_epoch(
        self,
        source: Any,
        epoch: int,
        done: Callable[[Any], None],
        check: Callable[[], None] | None,
        *,
        run: str,
        shares: Callable[[], list],
        policy: str,
        options: EpochOptions,
    ) -> dict:
        """One epoch over data on the workers (``runs_epochs`` only): its summary."""

    def end_fit(self, source: Any) -> None:
        """Let go of what the fit over ``source`` left on the group (idempotent)."""

    def evaluate(
        self, x: Any, y: Any, counts: list[int], metrics: dict | None = None, bucket_key: Any = None
    ) -> dict[str, float]:
        """Row-weighted mean loss and metrics of the batch ``(x, y)`` split by ``counts``."""

    def evaluate_source(self, source: Any, metrics: dict | None = None) -> dict[str, float]:
        """Mean loss and metrics over data on the workers (``runs_epochs`` only)."""

    def memory(self, index: int) -> tuple[int | None, int | None]:
        """``(bytes in use, limit)`` of replica ``index``'s device, where it can be read."""

    def set_monitors(self, monitors: Any) -> None:
        """Call ``monitors`` after each replica's backward."""

    def state_dict(self) -> dict:
        """``{"model": ..., "optimizer": ...}``."""

    def load_state_dict(self, state: dict) -> None:
        """Load a :meth:`state_dict`-shaped mapping into every replica."""

    def fetch_state(self) -> dict | None:
        """What the replicas hold now, cheaply (one replica's, CPU tensors; None: none left)."""

    def last_state(self) -> dict | None:
        """The state to keep at close (None when no replica survived)."""

    def close(self) -> None:
        """Stop the replicas; idempotent."""
