"""Client-fed steps on Dask workers: batches split and sent ahead, several steps a command.

Steps the trainer planned (each batch split into the ranks' shares) are sent
as *commands* of several steps to every rank (:func:`~labkit.data_parallel.worker.training.run_steps`),
each rank's command after its previous one, and up to :data:`IN_FLIGHT`
commands ahead: while the workers train one command, the next one's shares
travel.  A command holds as many steps as take about :data:`COMMAND_SECONDS`,
from the step times measured so far.  Where the scheduler sends chunks through
shared memory (worker processes of this machine), each big share is copied
once into a segment the rank maps (:mod:`labkit.scheduling.workers.shared`); the
segments are reused once the rank unmapped them, and removed when a command
fails, is cancelled or its worker lost, and when the group closes or the
scheduler shuts down (a command too big for what /dev/shm has free goes as
below).  Elsewhere a rank's part of a command of :data:`SCATTER_BYTES` and
more goes straight to its worker; a smaller one rides inside the task.

Each command's results bring rank 0's step reports, which go to ``done`` in
order.  A step that fails on a rank halts the run on every rank (commands
sent ahead are skipped alike), and its error is raised naming the epoch and
batch; a cancel stops every rank after the same step.
"""

from __future__ import annotations

import collections
import itertools
import uuid

from ...errors import CancelledError, LabkitError, TaskError, WorkerLostError, for_caller
from ...scheduling.workers import shared
from ..reports import StepReport, batch_number
from ..worker.training import run_steps

__all__ = ["CommandPipe", "IN_FLIGHT", "COMMAND_SECONDS"]

#: Commands sent to every rank before the first one's results are awaited.
IN_FLIGHT = 2
#: Seconds of training a command aims to hold.
COMMAND_SECONDS = 0.1
#: Most steps in one command.
MAX_STEPS = 64
#: A rank's part of a command from this many bytes on is scattered straight to its worker.
SCATTER_BYTES = 2**20
#: Bytes left free in /dev/shm: a command that does not fit with them goes through sockets.
SHM_MARGIN = 32 * 2**20


class CommandPipe:
    """Sends the planned steps of one call to the ranks of ``group`` and hands back reports."""

    def __init__(self, group, policy: str = "raise"):
        self.group, self.policy = group, policy
        self.run_id = uuid.uuid4().hex[:12]
        self._last: list = [None] * len(group.names)  # each rank's previous command
        self._segments = group.segments  # None: the shares travel through sockets
        self._keys = itertools.count()  # of each rank's part of each command in _segments
        # the last call's step time: a new call sends full commands from its first step on
        # (one step a command until it is known cost a short fit round-trips)
        self._step_seconds: float | None = group.step_seconds

    def run(self, planned, done, check=None) -> None:
        """Train every step of ``planned``; ``done(report)`` for each, in order."""
        __tracebackhide__ = True
        steps = iter(planned)
        in_flight: collections.deque = collections.deque()
        try:
            while True:
                if check is not None:
                    check()
                command = list(itertools.islice(steps, self._size()))
                if not command:
                    break
                in_flight.append(self._send(command))
                if len(in_flight) >= IN_FLIGHT:
                    self._collect(in_flight.popleft(), done)
            while in_flight:
                self._collect(in_flight.popleft(), done)
        except BaseException:
            self._halt(in_flight)
            raise

    def _size(self) -> int:
        """Steps for the next command: about COMMAND_SECONDS of them (one while unknown)."""
        if not self._step_seconds:
            return 1
        return max(1, min(MAX_STEPS, round(COMMAND_SECONDS / self._step_seconds)))

    def _send(self, command: list) -> tuple:
        """Submit the command to every rank, after its previous one:
        ``(futures, command, keys)``, ``keys`` its parts' segments in ``_segments``."""
        group = self.group
        futures: list = []
        keys: list[int] = []
        try:
            for r, part in enumerate(self._parts(command)):
                shipped = self._ship(r, part, keys)
                futures.append(
                    group.tasks.submit(
                        r,
                        run_steps,
                        group.gid,
                        r,
                        self.run_id,
                        shipped,
                        self.policy,
                        after=self._last[r],
                    )
                )
                self._last[r] = futures[-1]
        except Exception as exc:  # its worker died, say: a labkit error, located
            self._drop(keys)
            err = group.labkit_error(exc, "step")
            if err is None:
                raise
            first = command[0]
            raise err.locate(epoch=first.epoch, batch=batch_number(first.batch)) from exc
        except BaseException:
            self._drop(keys)
            raise
        return futures, command, keys

    def _parts(self, command: list) -> list:
        """Each rank's part of ``command``: ``(epoch, step, x, y, weight, key, shares)`` a step."""
        sum_loss = self.group.sum_loss
        parts: list[list] = [[] for _ in self.group.names]
        for planned in command:
            total = max(sum(planned.counts), 1)
            shares = [c / total for c in planned.counts]
            start = 0
            for r, count in enumerate(planned.counts):
                x = _share(planned.x, start, count)
                y = None if planned.y is None else _share(planned.y, start, count)
                weight = 1.0 if sum_loss else count / total
                parts[r].append((planned.epoch, planned.batch, x, y, weight, planned.key, shares))
                start += count
        return parts

    def _ship(self, rank: int, part: list, keys: list):
        """``part`` as it travels: its big shares in shared memory (the segments' key
        appended to ``keys``), as a future on the rank's worker when it is big, or itself."""
        size = sum(t.nbytes for step in part for t in step[2:4] if t is not None)
        if self._segments is not None and size + SHM_MARGIN <= shared.room():
            key = next(self._keys)
            keys.append(key)
            return self._segments.chunk_for(key, tuple(part))
        if size < SCATTER_BYTES:
            return part
        return self.group.ship(rank, part)

    def _drop(self, keys: list, results: list | None = None) -> None:
        """Release the segments of ``keys``: reused where their rank unmapped them all
        (``results``, one a rank, say so), else removed."""
        if self._segments is None or not keys:
            return
        if results is None:
            return self._segments.drop(keys)
        for key, res in zip(
            keys, results, strict=False
        ):  # ranks whose part went by socket have no key
            self._segments.drop([key], reuse=res.get("unmapped") is True)

    def _collect(self, sent: tuple[list, list, list], done) -> None:
        """Wait for a command ``sent`` (see :meth:`_send`) on every rank; its reports to
        ``done``; raise what failed."""
        __tracebackhide__ = True
        futures, command, keys = sent
        group = self.group
        try:
            results = group.tasks.run(futures, "step", collective=True)
        except LabkitError as err:  # a lost worker, a cancel: at the command's first step
            self._drop(keys)
            err.locate(epoch=command[0].epoch, batch=batch_number(command[0].batch))
            raise
        except BaseException:
            self._drop(keys)
            raise
        self._drop(keys, results)
        statuses = {res["status"] for res in results}
        reports = [StepReport.from_wire(r) for res in results for r in res["reports"]]
        failed = [(r, res["error"]) for r, res in enumerate(results) if res["status"] == "error"]
        if failed:  # only the steps every rank finished before the failing one count
            reports = reports[: min(res["done"] for res in results)]
        for report in reports:
            done(report)
        if reports:
            walls = sorted(r.wall for r in reports)
            self._step_seconds = self.group.step_seconds = walls[len(walls) // 2]
        if failed:  # a rank's own step error, after the steps before it were reported
            rank, error = failed[0]
            raise for_caller(error.locate(replica=rank, device=group.names[rank]))
        if "broken" in statuses:
            raise self._broken(results, command)
        if "stopped" in statuses:
            raise CancelledError("the steps were stopped")

    def _broken(self, results: list, command: list) -> LabkitError:
        """The error of a step whose collective failed: a lost worker, or a rank that hung."""
        group = self.group
        step = command[min(min(res["done"] for res in results), len(command) - 1)]
        where = {"epoch": step.epoch, "batch": batch_number(step.batch)}
        lost = [n for n in group.names if n not in group.alive()]
        if lost:
            group.tasks.broken = f"a worker was lost during a step ({', '.join(lost)})"
            return WorkerLostError(
                f"a worker of the replica group was lost during a step ({', '.join(lost)}); "
                "client-fed steps cannot go on without it: close the trainer and start a new "
                "one (a fit over data on the workers, fit((X, y), batch_size=...), recovers "
                "by itself)",
                worker=", ".join(lost),
                **where,
            )
        rank = next(r for r, res in enumerate(results) if res["status"] == "broken")
        reason = results[rank].get("reason", "a collective failed")
        group.tasks.broken = f"a collective of a step failed ({reason})"
        return TaskError(
            f"replica {rank} failed in a collective with {reason}; the group is "
            "broken: close the trainer",
            original_type=reason.split(":")[0],
            original_message=reason,
            replica=rank,
            device=group.names[rank],
            **where,
        )

    def _halt(self, in_flight) -> None:
        """Stop what was sent ahead: ranks stop after the same step; wait for them."""
        if not in_flight:
            return
        self.group.stop(self.run_id)
        while in_flight:
            futures, _, keys = in_flight.popleft()
            try:
                self.group.tasks.run(futures, "step", collective=True)
            except LabkitError:
                pass
            finally:  # done, or lost with its worker: its segments go
                self._drop(keys)


def _share(t, start: int, count: int):
    """Rows ``start:start + count`` of ``t`` as they travel: a numpy view where torch has one.

    A torch view pickles its whole storage, and ``clone`` copies with torch's
    intra-op threads, which stall behind busy ranks on a full machine; a numpy
    view of the rows travels as its own buffer, copied once on the way.
    """
    rows = t[start : start + count].detach()
    if rows.device.type == "cpu":
        try:
            return rows.numpy()
        except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16)
            pass
    return rows.clone()
