"""What a view can follow: anything with ``subscribe()`` (a scheduler, a run, a trainer).

Examples
--------
>>> check_source(5, "lk.board")
Traceback (most recent call last):
...
labkit.errors.InputError: lk.board follows a scheduler, a run or a trainer (anything with subscribe()), got int 5; to watch a cluster by address, open lk.DaskScheduler('tcp://host:8786') first [argument source]
"""

from __future__ import annotations

from ..errors import InputError

__all__ = ["check_source"]


def check_source(source, what: str) -> None:
    """An ``InputError`` naming ``what`` unless ``source`` can be subscribed to."""
    if isinstance(source, (str, bytes)) or not callable(getattr(source, "subscribe", None)):
        raise InputError(
            f"{what} follows a scheduler, a run or a trainer (anything with "
            f"subscribe()), got {type(source).__name__} {source!r:.60}; to watch "
            f"a cluster by address, open lk.DaskScheduler('tcp://host:8786') "
            f"first",
            argument="source",
        )
