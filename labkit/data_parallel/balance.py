"""Automatic work load: shares moved toward each device's measured throughput.

A bounded proportional controller: after each step the measured rows per
second of every device (smoothed) give target shares proportional to speed;
each share moves a fraction ``gain`` of the way to its target, by at most
``max_step`` (absolute, as a fraction of the batch) a step, and never below
``min_share``.  Bounded steps keep one noisy measurement from swinging the
split; the floor keeps every device measured.

:class:`WorkLoads` holds a trainer's shares: a fixed work load, or "auto"
with one balancer per bucket key (a device's relative speed can change with
the sequence length), each new bucket starting where the trainer started.

Examples
--------
>>> b = Balancer(2)
>>> speeds = [200.0, 100.0]           # rows per second: device 0 is twice as fast
>>> for _ in range(30):
...     rows = [64 * s for s in b.shares]
...     _ = b.update(rows, [r / v for r, v in zip(rows, speeds)])
>>> [round(s, 2) for s in b.shares]
[0.67, 0.33]
"""

from __future__ import annotations

import copy

from ..errors import InputError
from .split import check_work_load, normalised

__all__ = ["Balancer", "WorkLoads"]


class Balancer:
    """Work-load shares of ``n`` devices, re-balanced from measured step times.

    Parameters
    ----------
    n : int
        Number of devices.
    initial : list of float, optional
        Starting work load (default even).
    gain : float
        Fraction of the gap to the target share closed per update.
    max_step : float
        Largest change of one share per update.
    min_share : float
        Smallest share of any device.
    smoothing : float
        Weight of the newest speed in its exponential average.
    """

    def __init__(
        self,
        n: int,
        initial=None,
        gain: float = 0.5,
        max_step: float = 0.1,
        min_share: float = 0.02,
        smoothing: float = 0.5,
    ):
        if (
            not 0 < gain <= 1
            or not 0 < max_step <= 1
            or not 0 <= min_share < 1.0 / n
            or not 0 < smoothing <= 1
        ):
            raise InputError(
                f"bad balancer settings: gain={gain}, max_step={max_step}, "
                f"min_share={min_share}, smoothing={smoothing}"
            )
        self.shares = normalised([1.0] * n if initial is None else list(initial))
        self.gain, self.max_step, self.min_share, self.smoothing = (
            gain,
            max_step,
            min_share,
            smoothing,
        )
        self.speeds: list[float | None] = [None] * n
        self.updates = 0

    def update(self, rows: list[int], seconds: list[float]) -> list[float]:
        """Take one step's rows and compute seconds per device; returns the new shares."""
        for i, (r, t) in enumerate(zip(rows, seconds, strict=True)):
            if r > 0 and t > 0:
                speed = r / t
                old = self.speeds[i]
                self.speeds[i] = (
                    speed if old is None else self.smoothing * speed + (1 - self.smoothing) * old
                )
        speeds = [s for s in self.speeds if s is not None]
        if len(speeds) < len(self.speeds):
            return self.shares
        total = sum(speeds)
        moved = []
        for share, speed in zip(self.shares, speeds, strict=True):
            change = self.gain * (speed / total - share)
            change = max(-self.max_step, min(self.max_step, change))
            moved.append(max(0.0, share + change))
        self.shares = _floored(moved, self.min_share)
        self.updates += 1
        return self.shares


def _floored(shares: list[float], floor: float) -> list[float]:
    """``shares`` normalised to sum 1 with none below ``floor`` (the rest scaled down)."""
    total = sum(shares)
    shares = [s / total for s in shares]
    low = [s < floor for s in shares]
    while True:
        rest = sum(s for s, lo in zip(shares, low, strict=True) if not lo)
        scale = (1.0 - floor * sum(low)) / rest
        out = [floor if lo else s * scale for s, lo in zip(shares, low, strict=True)]
        newly = [not lo and o < floor for o, lo in zip(out, low, strict=True)]
        if not any(newly):
            return out
        low = [a or b for a, b in zip(low, newly, strict=True)]


class WorkLoads:
    """Each device's share of a batch: a fixed work load, or "auto" per bucket key.

    ``names`` are the devices; ``work_load`` is None (even), a list of
    relative speeds or ``"auto"`` (then ``balancer`` is the one of key None).
    """

    def __init__(self, names: list[str], work_load=None, balancer: Balancer | None = None):
        n = len(names)
        self.balancer: Balancer | None = None
        self.work_load: list[float] | None = None
        self._fixed: list[float] = []
        if isinstance(work_load, str):
            if work_load != "auto":
                raise InputError(
                    f"work_load must be None, a list or 'auto', got {work_load!r}",
                    argument="work_load",
                )
            self.balancer = balancer or Balancer(n)
            self._fresh = copy.deepcopy(self.balancer)  # what a new bucket starts from
        else:
            self.work_load = check_work_load(
                [1.0] * n if work_load is None else work_load, n, names
            )
            self._fixed = normalised(self.work_load)
        self._buckets: dict = {}  # bucket key -> its own Balancer ("auto" only)

    def _balancer(self, key) -> Balancer | None:
        """The balancer of bucket ``key`` (made on first use), or None for a fixed load."""
        if self.balancer is None or key is None:
            return self.balancer
        if key not in self._buckets:
            self._buckets[key] = copy.deepcopy(self._fresh)
        return self._buckets[key]

    def shares(self, key=None) -> list[float]:
        """The shares a batch of bucket ``key`` is split by."""
        balancer = self._balancer(key)
        return list(self._fixed if balancer is None else balancer.shares)

    def update(self, key, rows: list[int], seconds: list[float]) -> None:
        """Feed one step's rows and seconds per device to bucket ``key``'s balancer."""
        balancer = self._balancer(key)
        if balancer is not None:
            balancer.update(rows, seconds)

    @property
    def bucket_shares(self) -> dict:
        """The shares of each bucket key that has its own balancer."""
        return {key: list(b.shares) for key, b in self._buckets.items()}

    def regrouped(self, names: list[str], old: list[str]) -> WorkLoads:
        """The loads of the devices ``names`` of ``old`` (those left, and those that joined,
        which take the mean of the others): their shares, made whole again."""
        if self.balancer is None:
            assert self.work_load is not None  # a fixed work load
            return WorkLoads(names, _carried(names, old, list(self.work_load)))
        fresh = WorkLoads(names, "auto", Balancer(len(names)))
        assert fresh.balancer is not None  # "auto"
        kept = _carried(names, old, [max(s, 1e-9) for s in self.balancer.shares])
        fresh.balancer.shares = normalised(kept)
        return fresh

    def load(self, shares, bucket_shares=None) -> None:
        """Restore the shares of key None and of each bucket ("auto" only)."""
        if self.balancer is None:
            return
        if shares is not None:
            self.balancer.shares = list(shares)
        for key, values in (bucket_shares or {}).items():
            balancer = self._balancer(key)
            if balancer is not None:  # every key's is, "auto" being on
                balancer.shares = list(values)


def _carried(names: list, old: list, values: list) -> list:
    """``values`` of ``old``'s devices carried to ``names``; a device new to them, their mean."""
    mean = sum(values) / len(values) if values else 1.0
    return [values[old.index(n)] if n in old else mean for n in names]
