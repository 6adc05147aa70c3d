"""Splitting a batch across devices by a work-load list.

Device *i* gets ``round(w_i * batch_size / sum(w))`` rows.  Rounding may leave
the rows short of the batch: the shortfall goes to the last device; or over
it: the split stops at the end of the batch, taking rows from the last
devices.  A split that leaves a device without rows is an error naming it.

Examples
--------
>>> split_batch(10, [1, 2, 3])
[slice(0, 2, None), slice(2, 5, None), slice(5, 10, None)]
>>> split_batch(10, [1, 1, 2])        # 2.5 rounds to 2 twice: the last device gets the rest
[slice(0, 2, None), slice(2, 4, None), slice(4, 10, None)]
>>> split_batch(7, [1, 1])
[slice(0, 4, None), slice(4, 7, None)]
"""

from __future__ import annotations

import math
from numbers import Real

from ..errors import InputError

__all__ = ["split_batch", "check_work_load", "shares", "normalised", "row_weights"]


def check_work_load(work_load, n_devices: int | None = None, devices=None) -> list[float]:
    """``work_load`` as floats, checked: one positive finite number per device."""
    try:
        values = list(work_load)
    except TypeError:
        raise InputError(f"work_load must be a list of numbers, got {work_load!r}") from None
    if n_devices is not None and len(values) != n_devices:
        raise InputError(f"work_load has {len(values)} entries for {n_devices} devices")
    if not values:
        raise InputError("work_load is empty")
    for i, w in enumerate(values):
        if isinstance(w, bool) or not isinstance(w, Real) or not math.isfinite(w) or w <= 0:
            raise InputError(
                f"work_load entry {w!r} is not a positive finite number", device=_name(devices, i)
            )
    return [float(w) for w in values]


def normalised(work_load) -> list[float]:
    """``work_load`` as fractions summing to 1, taken relative to the largest first.

    Dividing by the plain sum overflows for huge weights (``1e308 + 1e308`` is
    infinite, and every share then 0).

    >>> normalised([1e308, 1e308])
    [0.5, 0.5]
    """
    total = sum(work_load)
    if not math.isfinite(total):  # huge weights: relative to the largest first
        top = max(work_load)
        work_load = [w / top for w in work_load]
        total = sum(work_load)
    return [w / total for w in work_load]


def row_weights(counts, summed: bool = False) -> list[float]:
    """Each replica's weight in a mean over the whole batch: its share of the rows.

    With ``summed`` (the loss is a sum over rows, not a mean) every weight is 1.
    The one rule for gradients, evaluation and the ranks' steps alike.

    >>> row_weights([3, 1]), row_weights([3, 1], summed=True), row_weights([0, 0])
    ([0.75, 0.25], [1.0, 1.0], [0.0, 0.0])
    """
    if summed:
        return [1.0] * len(counts)
    total = max(sum(counts), 1)
    return [c / total for c in counts]


def shares(batch_size: int, work_load) -> list[int]:
    """Rows per device, before the empty-device check (may contain zeros).

    >>> shares(4, [1e308, 1e308])
    [2, 2]
    """
    counts = [int(round(w * batch_size)) for w in normalised(work_load)]
    short = batch_size - sum(counts)
    if short > 0:
        counts[-1] += short
    over = sum(counts) - batch_size
    for i in reversed(range(len(counts))):  # the split ends at the batch's end
        if over <= 0:
            break
        cut = min(over, counts[i])
        counts[i] -= cut
        over -= cut
    return counts


def split_batch(batch_size: int, work_load, devices=None) -> list[slice]:
    """Slices of a batch of ``batch_size`` rows, one a device, sized by ``work_load``.

    Parameters
    ----------
    batch_size : int
        Rows in the batch.
    work_load : list of float
        Relative speed of each device; positive and finite.
    devices : list, optional
        Device names, used in errors (else the device's index).

    Raises
    ------
    InputError
        A bad work load, or a split that leaves a device empty (naming it).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InputError(f"batch_size must be a positive int, got {batch_size!r}")
    work_load = check_work_load(work_load, None if devices is None else len(devices), devices)
    counts = shares(batch_size, work_load)
    for i, n in enumerate(counts):
        if n == 0:
            raise InputError(
                f"a batch of {batch_size} rows split by work load {work_load} "
                f"leaves no rows for a device",
                device=_name(devices, i),
            )
    slices, start = [], 0
    for n in counts:
        slices.append(slice(start, start + n))
        start += n
    return slices


def _name(devices, i: int):
    """Device ``i``'s name for errors."""
    return str(devices[i]) if devices is not None else i
