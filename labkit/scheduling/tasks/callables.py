"""Task callables: the work a scheduler applies to each chunk, as users write it.

Subclass :class:`TaskCallable` (or wrap a plain function in
:class:`FunctionCallable`); :mod:`.running` runs one wherever a task lands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import require_callable

__all__ = ["TaskCallable", "FunctionCallable"]


class TaskCallable:
    """Work that a scheduler applies to each chunk of data.

    A scheduler ships the callable to the workers once (not with every task)
    and calls ``fork()`` before each task, so a callable that accumulates
    state must return a fresh copy from ``fork``.

    ``holds_gil`` says that the work is pure Python (it holds the GIL): on an
    in-process cluster such tasks run in worker processes instead of threads
    (see :mod:`labkit.scheduling.workers.offload`).  numpy, BLAS, scikit-learn and
    torch work releases the GIL and runs best on threads.

    Examples
    --------
    >>> class Square(TaskCallable):
    ...     def __call__(self, data):
    ...         return data * data
    >>> Square().fork()(3)
    9
    """

    holds_gil: bool = False

    def setup_environment(self) -> None:
        """Prepare the process the callable runs in; called once per process."""

    def fork(self) -> TaskCallable:
        """The callable that runs one task; ``self`` for stateless callables."""
        return self

    def parts(self) -> dict[str, Any]:
        """The user's objects it carries, by how a message should name them.

        An error about the callable (it cannot be sent to the workers, say)
        names the part at fault (``"estimator 'svm' (SVC)"``), never labkit's
        own wrapper.  None by default.
        """
        return {}

    def __call__(self, data) -> Any:
        raise NotImplementedError


class FunctionCallable(TaskCallable):
    """A plain function as a task callable.

    Parameters
    ----------
    fn : callable
    holds_gil : bool
        The function is pure Python: run it in processes beside an
        in-process cluster (see :class:`TaskCallable`).

    Examples
    --------
    >>> FunctionCallable(len)([1, 2])
    2
    """

    def __init__(self, fn: Callable[[Any], Any], holds_gil: bool = False):
        require_callable(fn, "fn", "FunctionCallable")
        self.fn = fn
        self.holds_gil = holds_gil

    def __call__(self, data):
        return self.fn(data)

    def parts(self) -> dict[str, Any]:
        """The function, named as its code names it."""
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        return {f"the task function {name}": self.fn}

    def __repr__(self):
        return f"FunctionCallable({getattr(self.fn, '__name__', self.fn)!r})"
