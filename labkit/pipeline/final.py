"""Values reduced over a whole stream, ready once it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..errors import USER_EXITS, LabkitError, located
from .stream import PipelineError

__all__ = ["Final"]


class Final:
    """Values reduced over a whole stream; :meth:`result` waits for its end."""

    def __init__(self, reducers: dict[str, tuple[Any, Callable]]):
        self._fns = {name: fn for name, (_, fn) in reducers.items()}
        self._values = {name: init for name, (init, _) in reducers.items()}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: LabkitError | None = None

    @property
    def reduces(self) -> bool:
        """Whether records must be handed to :meth:`add` (beyond being counted)."""
        return bool(self._fns)

    def add(self, record) -> None:
        """Reduce ``record`` into every value (the stage's threads call it)."""
        with self._lock:  # threads of an unordered stage deliver concurrently
            for name, fn in self._fns.items():
                try:
                    self._values[name] = fn(self._values[name], record)
                except USER_EXITS as exc:  # named as the user named it, not the stage
                    what = getattr(fn, "__qualname__", None) or type(fn).__name__
                    raise located(
                        exc, f"final output {name!r} ({what})", PipelineError, output=name
                    ) from exc

    def end(self, error: LabkitError | None, count: int) -> None:
        """The stream ended (with ``error``) after ``count`` records: :meth:`result` returns."""
        self._values = {"count": count, **self._values}
        self._error = error
        self._done.set()

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        """The reduced values once the stream ended; raises the stage's error."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"stream still running after {timeout} s")
        if self._error is not None:
            raise self._error.with_traceback(None)
        return dict(self._values)
