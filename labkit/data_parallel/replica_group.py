"""The contract every replica group keeps, and the capabilities some groups add, declared once.

Two groups keep it: replicas on threads of this process
(:class:`~labkit.data_parallel.local.thread_group.ThreadGroup`, and
:class:`~labkit.data_parallel.local.thread_group.SchedulerThreadGroup` on an
in-process scheduler) and replicas on Dask workers
(:class:`~labkit.data_parallel.dask.group.DaskReplicaGroup`).

:class:`ReplicaGroup` is what *every* group does: take planned steps, evaluate
a batch, hold and load state, monitors, close.  What only some groups can do
is a capability of its own, a protocol the group keeps or not, never a method
that only raises (as joblib's backends declare what they support):

:class:`FitsEpochs`
    A fit over data that lives on the workers runs its epochs there
    (:meth:`~FitsEpochs.fit_epoch`); without it every step comes from the
    client (:meth:`~ReplicaGroup.steps`).
:class:`EvaluatesSources`
    Evaluating data that lives on the workers reads it there; without it the
    client plans every batch (:meth:`~ReplicaGroup.evaluate`).
:class:`Recovers`
    The group goes on over fewer workers after losing one: its ranks re-form,
    and the trainer follows its names.
:class:`SavesOnRanks`
    The ranks write the group's checkpoint to a location themselves (rank 0)
    and read it back there (every rank); without it the trainer encodes its
    state and writes it from this process, where the state is.

The trainer and its fit loop ask a group which capabilities it keeps once, when
made, and branch on the answer only, never on its type.  ``holds_model`` is a fact
every group states: True where the trainer's own model is what the replicas
train (replica 0, or the target of the reduce), False where the replicas are
copies (on Dask workers) whose :meth:`~ReplicaGroup.fetch_state` the trainer
loads into the model after each call (:mod:`.calls.model_sync`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..checkpoints import CheckpointLocation, CheckpointRef

__all__ = [
    "ReplicaGroup",
    "FitsEpochs",
    "EvaluatesSources",
    "Recovers",
    "SavesOnRanks",
    "EpochOptions",
    "COMMIT_EVERY",
    "MAX_FAILURES",
]

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
    """What every group of replicas of one model does (see the module doc)."""

    @property
    def holds_model(self) -> bool:
        """The trainer's model is trained in place (False: copies, see :meth:`fetch_state`)."""

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

    def evaluate(
        self, x: Any, y: Any, counts: list[int], metrics: dict | None = None, bucket_key: Any = None
    ) -> dict[str, float]:
        """Row-weighted mean loss and metrics of the batch ``(x, y)`` split by ``counts``."""

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


@runtime_checkable
class FitsEpochs(Protocol):
    """Capability: a fit over data that lives on the workers runs its epochs there."""

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
        """One epoch over ``source``'s data on the workers (``done(report)`` a step): a summary."""

    def end_fit(self, source: Any) -> None:
        """Let go of what the fit over ``source`` left on the workers (idempotent)."""


@runtime_checkable
class EvaluatesSources(Protocol):
    """Capability: data that lives on the workers is evaluated there."""

    def evaluate_source(self, source: Any, metrics: dict | None = None) -> dict[str, float]:
        """Mean loss and ``metrics`` over every row of ``source``'s data on the workers."""


@runtime_checkable
class Recovers(Protocol):
    """Capability: after a lost worker the group goes on over the others (fewer names)."""

    @property
    def broken(self) -> str | None:
        """Why the group cannot go on (a collective failed, a worker was lost), else None."""

    def form(self, names: list, check: bool = False) -> None:
        """(Re-)form the group over the workers ``names``, in rank order."""


@runtime_checkable
class SavesOnRanks(Protocol):
    """Capability: the ranks write and read the group's checkpoints where they run."""

    def write_state(
        self, location: CheckpointLocation, key: str, step: Any, extra: dict
    ) -> CheckpointRef:
        """Rank 0 writes the state with ``extra`` under ``key`` of ``location``: the reference."""

    def read_state(self, location: CheckpointLocation, ref: CheckpointRef) -> dict:
        """Every rank loads the checkpoint ``ref`` from ``location``; the extras it held."""
