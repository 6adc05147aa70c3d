"""Automatic work load: shares moved toward each device's measured throughput.

A bounded proportional controller: after each step the measured rows per
second of every device (smoothed) give target shares proportional to speed;
each share moves a fraction ``gain`` of the way to its target, by at most
``max_step`` (absolute, as a fraction of the batch) a step, and never below
``min_share``.  Bounded steps keep one noisy measurement from swinging the
split; the floor keeps every device measured.

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

from ..errors import InputError

__all__ = ["Balancer"]


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

    def __init__(self, n: int, initial=None, gain: float = 0.5, max_step: float = 0.1,
                 min_share: float = 0.02, smoothing: float = 0.5):
        if not 0 < gain <= 1 or not 0 < max_step <= 1 or not 0 <= min_share < 1.0 / n \
                or not 0 < smoothing <= 1:
            raise InputError(f"bad balancer settings: gain={gain}, max_step={max_step}, "
                             f"min_share={min_share}, smoothing={smoothing}")
        initial = [1.0] * n if initial is None else list(initial)
        total = sum(initial)
        self.shares = [w / total for w in initial]
        self.gain, self.max_step, self.min_share, self.smoothing = gain, max_step, min_share, smoothing
        self.speeds: list[float | None] = [None] * n
        self.updates = 0

    def update(self, rows: list[int], seconds: list[float]) -> list[float]:
        """Take one step's rows and compute seconds per device; returns the new shares."""
        for i, (r, t) in enumerate(zip(rows, seconds)):
            if r > 0 and t > 0:
                speed = r / t
                old = self.speeds[i]
                self.speeds[i] = speed if old is None else \
                    self.smoothing * speed + (1 - self.smoothing) * old
        if any(s is None for s in self.speeds):
            return self.shares
        total = sum(self.speeds)
        moved = []
        for share, speed in zip(self.shares, self.speeds):
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
        rest = sum(s for s, lo in zip(shares, low) if not lo)
        scale = (1.0 - floor * sum(low)) / rest
        out = [floor if lo else s * scale for s, lo in zip(shares, low)]
        newly = [not lo and o < floor for o, lo in zip(out, low)]
        if not any(newly):
            return out
        low = [a or b for a, b in zip(low, newly)]
