"""Optuna's logger held at WARNING while labkit calls Optuna (its INFO lines: one a trial).

Optuna logs a line when a study is created and when each trial ends: a
line a trial in the notebook.  :func:`quiet` holds its logger at WARNING
inside, and sets it back after, so a user's own study still says so.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

__all__ = ["quiet"]

_QUIET = threading.Lock()
_OPTUNA = logging.getLogger("optuna")  # the same object every time: looked up once


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Optuna's logger at WARNING at least inside, as it was after."""
    optuna_logger = _OPTUNA
    with _QUIET:
        level = optuna_logger.level
        # setLevel clears every logger's cache: only when the level must change (twice a trial)
        held = optuna_logger.getEffectiveLevel() < logging.WARNING
        if held:
            optuna_logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            if held:
                optuna_logger.setLevel(level)
