"""What a trainer tells the views: device load, per-epoch progress and the loss curve.

Events go to the trainer (an :class:`~labkit.events.Observable`) only while
someone subscribes, so an unwatched trainer pays nothing.  Per step, each
replica's forward/backward becomes a finished task on its device (so the
tracker shows busy fraction, samples/s and task lanes per device).  As often
as a subscriber asks for state (``subscribe(fn, state_every=...)``), each
device also reports memory, step time and its share of the batch, and the
model's state (samples seen, loss so far) is sent like a flow node's joins so
the node-state view draws the loss curve; every epoch ends with that state.
Steps with a bucket key are counted per key, and that state carries the
counts (``"buckets": {key: steps}``) so a board shows the steps of each bucket.
"""

from __future__ import annotations

import collections
import itertools
import time
import uuid

from ..events import (
    DeviceStats,
    NodeJoined,
    Observable,
    PhaseFinished,
    PhaseStarted,
    TaskFinished,
    TaskInfo,
)
from .devices import memory

__all__ = ["Reporter"]


class Reporter:
    """Turns a trainer's steps into events on ``bus`` (the trainer)."""

    def __init__(self, bus: Observable, names: list[str], devices, model_name: str, memory=None):
        self.bus, self.names, self.devices, self.model_name = bus, names, devices, model_name
        self._memory = memory  # memory(i) -> (used, limit) of device i, where it can be read
        self.run = f"steps-{uuid.uuid4().hex[:8]}"
        self.epoch = 0
        self.batch = 0
        self.samples = 0
        self.losses: collections.deque = collections.deque(maxlen=500)  # the curve drawn
        self.loss_steps: collections.deque = collections.deque(maxlen=500)  # its x: step
        self.epoch_points: dict[str, list] = {"x": [], "loss": [], "val": []}
        self.bucket_steps: dict = {}  # bucket key -> steps taken with it
        self._tasks = itertools.count()
        self._epoch_tasks = 0
        self._last: float | None = None
        self._unreported: tuple | None = None  # the last step's device stats, if not reported

    def report(self, report, shares: list[float]) -> None:
        """One step's :class:`~labkit.data_parallel.reports.StepReport`, as events.

        A replica is busy for the whole step (its forward and backward, the
        reduce it waits on, the optimizer step): on a small model the reduce is
        most of a step, and forward and backward alone read as an idle device.
        """
        active = [i for i, c in enumerate(report.rows) if c]
        walls = [max(report.wall, report.seconds[i]) for i in active]
        self.step(
            active,
            [report.rows[i] for i in active],
            [(report.time - w, report.time) for w in walls],
            [report.seconds[i] for i in active],
            shares,
            report.loss,
            report.key,
        )

    def step(
        self,
        active: list[int],
        counts: list[int],
        spans: list[tuple[float, float]],
        computed: list[float],
        shares: list[float],
        loss: float,
        key=None,
    ) -> None:
        """One step's replica spans (each in the step), and (throttled) device stats and loss.

        ``computed`` holds each replica's forward and backward seconds: the
        device stats' ``busy`` is their fraction of the step.
        """
        self.samples += sum(counts)
        self.losses.append(loss)
        self.loss_steps.append(len(self.loss_steps) and self.loss_steps[-1] + 1)
        if key is not None:
            self.bucket_steps[key] = self.bucket_steps.get(key, 0) + 1
        if not self.bus.has_subscribers:
            return
        for i, n, (start, end) in zip(active, counts, spans, strict=True):
            info = TaskInfo(
                self.run, next(self._tasks), self.batch, "train", 0, self.model_name, self.epoch
            )
            self.bus.emit(TaskFinished(info, self.names[i], start, end, n))
            self._epoch_tasks += 1
        self.batch += 1
        every, now = self.bus.state_every, time.monotonic()
        self._unreported = (active, counts, spans, computed, shares)
        if every is not None and (self._last is None or now - self._last >= every):
            self._last = now
            self._flush()

    def _flush(self) -> None:
        """Report the last step's device stats if they were not yet (the shares fit ends on)."""
        last, self._unreported = self._unreported, None
        if last is not None:
            self._report(*last)

    def _report(self, active, counts, spans, computed, shares) -> None:
        for i, n, (start, end), busy in zip(active, counts, spans, computed, strict=True):
            step = max(end - start, 1e-9)
            used, limit = self._device_memory(i)
            self.bus.emit(
                DeviceStats(
                    self.names[i],
                    "device",
                    used,
                    limit,
                    n / step,  # the rows it trained a second of its steps
                    step,
                    min(busy / step, 1.0),  # the fraction of the step it computed
                    shares[i],
                )
            )
        self.bus.emit(
            NodeJoined(self.run, 0, self.model_name, self.epoch, self.batch, self.state())
        )

    def _device_memory(self, i: int):
        if self._memory is not None:
            return self._memory(i)
        device = self.devices[i] if i < len(self.devices) else None
        return (
            memory(device) if device is not None and not isinstance(device, str) else (None, None)
        )

    def state(self) -> dict:
        """The model's state for the views: samples, the loss curves, steps per bucket.

        ``plots`` holds the loss of each step, the mean loss of each epoch (at the
        step where it ended, as ``fit`` returns it) and, with a validation, its loss.
        """
        plots = {"loss": {"x": list(self.loss_steps), "y": list(self.losses)}}
        if self.epoch_points["x"]:
            plots["epoch loss"] = {
                "x": list(self.epoch_points["x"]),
                "y": list(self.epoch_points["loss"]),
            }
        if any(v is not None for v in self.epoch_points["val"]):
            points = [
                (x, v)
                for x, v in zip(self.epoch_points["x"], self.epoch_points["val"], strict=False)
                if v is not None
            ]
            plots["validation loss"] = {"x": [x for x, _ in points], "y": [v for _, v in points]}
        state = {"samples": self.samples, "batches": self.batch, "plots": plots}
        if self.bucket_steps:
            state["buckets"] = dict(self.bucket_steps)
        return state

    # -- fit progress ----------------------------------------------------------------

    def fit_started(self, run: str) -> None:
        """A fit begins under run ``run`` (its scope emits RunStarted)."""
        self.run, self.epoch, self.batch = run, 0, 0

    def epoch_started(
        self, epoch: int, n_batches: int | None, n_devices: int, epochs: int | None = None
    ) -> None:
        """An epoch begins; ``n_batches`` when the batches have a length."""
        self.epoch, self.batch, self._epoch_tasks = epoch, 0, 0
        if self.bus.has_subscribers:
            total = None if n_batches is None else n_batches * n_devices
            batches = "?" if n_batches is None else n_batches
            self.bus.emit(
                PhaseStarted(
                    self.run,
                    0,
                    self.model_name,
                    epoch,
                    False,
                    total,
                    detail=f"{batches} batches on {n_devices} devices",
                )
            )

    def fit_finished(self) -> None:
        """The fit ended: the views show the model as trained, no longer training."""
        if self.bus.has_subscribers:
            self.bus.emit(
                NodeJoined(
                    self.run,
                    0,
                    self.model_name,
                    self.epoch,
                    self.batch,
                    {**self.state(), "training": False},
                )
            )

    def epoch_finished(self, ok: bool = True, record: dict | None = None) -> None:
        """The epoch ended: its real task count, the model's state and the epoch's record."""
        if record is not None and self.loss_steps:
            self.epoch_points["x"].append(self.loss_steps[-1])
            self.epoch_points["loss"].append(record["loss"])
            self.epoch_points["val"].append(record.get("val_loss"))
        if self.bus.has_subscribers:
            self._flush()  # the board ends the epoch on the shares the trainer now has
            state = self.state() if record is None else {**self.state(), "record": record}
            self.bus.emit(
                PhaseFinished(
                    self.run, 0, self.model_name, self.epoch, self._epoch_tasks, ok, state
                )
            )
