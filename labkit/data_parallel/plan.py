"""Which rows each rank trains at each step of an epoch, when the data lives on the ranks.

A global batch of ``batch_size`` rows a step, every row once an epoch, and
each rank reading only rows it holds: a rank's rows are spread evenly over
the epoch's steps by giving the k-th of its ``n_r`` rows the virtual time
``(k + 0.5) / n_r`` and ordering all rows of all ranks by it (ties by rank).
Step ``s`` takes positions ``[s * batch_size, (s + 1) * batch_size)`` of that
order, so each rank's share of a step is proportional to the rows it holds
(the last step may be shorter).  Which of its rows a rank takes first comes
from one permutation of all rows per epoch (seeded by ``seed`` and the epoch,
the identity without ``shuffle``), restricted to the rows the rank holds: the
order does not depend on how many ranks there are.

Where every rank can read every row (a dataset made on each worker), a step's
rows are split by the ranks' shares instead (:meth:`EpochPlan.shared`), as
``DistributedSampler`` splits an epoch, but with uneven shares allowed.

After a rank is lost, :meth:`EpochPlan.resume` gives the rest of the epoch to
the ranks left: the rows not yet trained (those the plan put in steps before
the resume point are trained) go to their new holders, spread the same way.

Examples
--------
Two ranks holding 6 and 2 rows, batches of 4:

>>> plan = EpochPlan.make(holders=[0] * 6 + [1] * 2, batch_size=4, shuffle=False)
>>> [plan.rows(s, 0).tolist() for s in range(plan.steps)]
[[0, 1, 2], [3, 4, 5]]
>>> [plan.rows(s, 1).tolist() for s in range(plan.steps)]
[[6], [7]]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constraints import POSITIVE_INT, check_argument
from ..errors import InputError
from .split import shares as split_counts

__all__ = ["EpochPlan", "PlannedEpoch", "epoch_order", "check_batch_size"]


def check_batch_size(batch_size, rows: int) -> int:
    """``batch_size`` checked: a positive int (at most ``rows`` is not required)."""
    check_argument("batch_size", batch_size, [POSITIVE_INT])
    if rows < 1:
        raise InputError("there are no rows to train on", argument="X")
    return int(batch_size)


def epoch_order(rows: int, shuffle: bool, seed, epoch: int) -> np.ndarray:
    """The rows of an epoch in the order they are drawn: a seeded permutation, or 0..rows-1.

    >>> epoch_order(5, True, 0, 1).tolist() == epoch_order(5, True, 0, 1).tolist()
    True
    """
    if not shuffle:
        return np.arange(rows, dtype=np.int64)
    entropy = [0 if seed is None else int(seed), int(epoch)]
    return np.random.default_rng(entropy).permutation(rows).astype(np.int64)


@dataclass(frozen=True)
class EpochPlan:
    """The rows of every step of one epoch for every rank (global row numbers).

    ``order`` lists the epoch's rows, step after step; ``owner`` the rank
    training each; ``start`` the first step this plan covers (a resumed epoch
    starts later); ``batch_size`` rows a step.
    """

    order: np.ndarray
    owner: np.ndarray
    batch_size: int
    start: int = 0

    @classmethod
    def make(
        cls,
        holders,
        batch_size: int,
        shuffle: bool = True,
        seed=None,
        epoch: int = 0,
        start: int = 0,
    ) -> EpochPlan:
        """The plan of an epoch in which rank ``holders[i]`` holds row ``i``."""
        holders = np.asarray(holders, dtype=np.int64)
        drawn = epoch_order(len(holders), shuffle, seed, epoch)
        return cls._spread(drawn, holders[drawn], batch_size, start)

    @classmethod
    def shared(
        cls,
        rows: int,
        batch_size: int,
        shares,
        shuffle: bool = True,
        seed=None,
        epoch: int = 0,
        start: int = 0,
    ) -> EpochPlan:
        """The plan of an epoch whose rows every rank holds: each step split by ``shares``.

        >>> plan = EpochPlan.shared(5, 4, [1, 1], shuffle=False)
        >>> [(plan.rows(s, 0).tolist(), plan.rows(s, 1).tolist()) for s in range(plan.steps)]
        [([0, 1], [2, 3]), ([], [4])]
        """
        return cls._split(epoch_order(rows, shuffle, seed, epoch), batch_size, shares, start)

    @classmethod
    def _split(cls, rows: np.ndarray, batch_size: int, shares, start: int) -> EpochPlan:
        """Rows in order, each window of ``batch_size`` split by ``shares``."""
        owners = np.empty(len(rows), dtype=np.int64)
        for begin in range(0, len(rows), batch_size):
            counts = split_counts(min(batch_size, len(rows) - begin), list(shares))
            owners[begin : begin + sum(counts)] = np.repeat(np.arange(len(counts)), counts)
        return cls(rows, owners, int(batch_size), int(start))

    @classmethod
    def _spread(
        cls, rows: np.ndarray, owners: np.ndarray, batch_size: int, start: int
    ) -> EpochPlan:
        """Rows drawn in order, ``owners[i]`` holding ``rows[i]``: each rank's spread evenly."""
        times = np.empty(len(rows), dtype=np.float64)
        for rank in np.unique(owners):
            mine = np.flatnonzero(owners == rank)
            times[mine] = (np.arange(len(mine)) + 0.5) / len(mine)
        ranked = np.lexsort((owners, times))  # by virtual time, ties by rank
        return cls(rows[ranked], owners[ranked], int(batch_size), int(start))

    @property
    def steps(self) -> int:
        """Steps of the whole epoch (``start`` included)."""
        return self.start + -(-len(self.order) // self.batch_size)

    def _window(self, step: int) -> slice:
        k = step - self.start
        if not 0 <= k < self.steps - self.start:
            raise IndexError(f"step {step} is not in this plan ({self.start}..{self.steps - 1})")
        return slice(k * self.batch_size, (k + 1) * self.batch_size)

    def rows(self, step: int, rank: int) -> np.ndarray:
        """The global rows rank ``rank`` trains at ``step``."""
        window = self._window(step)
        return self.order[window][self.owner[window] == rank]

    def counts(self, step: int, ranks: int) -> list[int]:
        """Rows of each of ``ranks`` ranks at ``step``."""
        return np.bincount(self.owner[self._window(step)], minlength=ranks).tolist()

    def trained_before(self, step: int) -> np.ndarray:
        """The rows of the steps before ``step`` (all of them trained once ``step`` starts)."""
        return self.order[: max(0, step - self.start) * self.batch_size]

    def resume_shared(self, step: int, shares) -> EpochPlan:
        """The rest of the epoch from ``step`` on, each step split by the new ``shares``."""
        left = self.order[max(0, step - self.start) * self.batch_size :]
        return type(self)._split(left, self.batch_size, shares, step)

    def resume(self, step: int, holders) -> EpochPlan:
        """The rest of the epoch from ``step`` on, row ``i`` now held by ``holders[i]``.

        Rows trained before ``step`` are not trained again; the others keep
        their order and are spread over the ranks that hold them now.

        >>> plan = EpochPlan.make([0, 0, 1, 1, 2, 2], batch_size=3, shuffle=False)
        >>> later = plan.resume(1, [0, 0, 1, 1, 0, 0])     # rank 2 was lost
        >>> sorted(np.concatenate([plan.trained_before(1), later.order]).tolist())
        [0, 1, 2, 3, 4, 5]
        """
        holders = np.asarray(holders, dtype=np.int64)
        left = self.order[max(0, step - self.start) * self.batch_size :]
        return type(self)._spread(left, holders[left], self.batch_size, step)


@dataclass(frozen=True)
class PlannedEpoch:
    """One epoch as every rank plans it alike: what the client sends each rank's task.

    Rows in Dask blocks: ``first_table`` and ``table`` give ``(start, stop,
    rank)`` of every block when the epoch began and now, ``mine`` and ``keys``
    the blocks the receiving rank reads and their Dask keys.  A dataset made on
    every worker (:func:`~labkit.on_workers`): ``dataset`` (``make_dataset``
    pickled), its ``dataset_id`` and the ranks' ``shares`` of a step.
    ``resumes`` lists ``(step, table or shares)`` after each lost worker.
    """

    run: str
    epoch: int
    rows: int
    batch_size: int
    shuffle: bool = True
    seed: Any = None
    policy: str = "raise"
    commit_every: int = 0
    checkpoint: str | None = None
    topic: str | None = None
    dataset: bytes | None = None
    dataset_id: str | None = None
    shares: tuple = ()
    first_table: tuple = ()
    table: tuple = ()
    resumes: tuple = ()
    mine: tuple = ()
    keys: tuple = ()

    @property
    def made_on_workers(self) -> bool:
        """Whether the rows come from a dataset every worker made (else from Dask blocks)."""
        return self.dataset is not None

    def for_rank(self, mine, keys) -> PlannedEpoch:
        """This epoch as one rank gets it: the blocks it reads and their Dask keys."""
        return dataclasses.replace(self, mine=tuple(mine), keys=tuple(keys))

    def resumed(self, step: int, now) -> PlannedEpoch:
        """The epoch going on from ``step``: blocks by the new ``table``, or new ``shares``."""
        now = tuple(now)
        if self.made_on_workers:
            return dataclasses.replace(self, resumes=(*self.resumes, (step, now)))
        return dataclasses.replace(self, table=now, resumes=(*self.resumes, (step, now)))

    def plan(self) -> EpochPlan:
        """The plan of the epoch (every rank computes the same one), resumes applied."""
        if self.made_on_workers:
            plan = EpochPlan.shared(
                self.rows, self.batch_size, self.shares, self.shuffle, self.seed, self.epoch
            )
            for step, shares in self.resumes:
                plan = plan.resume_shared(step, shares)
            return plan
        plan = EpochPlan.make(
            _holders(self.rows, self.first_table),
            self.batch_size,
            self.shuffle,
            self.seed,
            self.epoch,
        )
        for step, table in self.resumes:
            plan = plan.resume(step, _holders(self.rows, table))
        return plan


def _holders(rows: int, table) -> np.ndarray:
    """Row -> rank, from ``table``: one ``(start, stop, rank)`` per block."""
    holders = np.empty(rows, dtype=np.int64)
    for start, stop, rank in table:
        holders[start:stop] = rank
    return holders
