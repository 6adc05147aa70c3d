"""Exception types: every labkit error says where it happened.

A location is a small mapping with any of ``node`` (index), ``node_name``,
``phase``, ``chunk``, ``task``, ``worker`` and ``device``.  Layers that know
more of the location add it with :meth:`LabkitError.locate` as the error
travels outwards, so an error raised inside a node on a Dask worker reaches
the notebook naming node, phase, chunk and worker.

Examples
--------
>>> err = InputError("expected 3 columns, got 4").locate(node=1, node_name="PCA", chunk=7)
>>> str(err)
"expected 3 columns, got 4 [node 1 'PCA', chunk 7]"
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import sys
import traceback

__all__ = [
    "LabkitError",
    "TaskError",
    "NotForkableError",
    "InputError",
    "TrainingError",
    "NotFittedError",
    "CancelledError",
    "SchedulerError",
    "WorkerLostError",
    "StorageError",
    "RemoteTraceback",
    "format_location",
    "located",
    "for_caller",
    "user_frames",
    "pulled",
    "require_callable",
]

#: Show labkit's (and Dask's) own frames in the tracebacks of errors handed to the
#: caller; by default the caller sees its own frames and, as the cause, the task's.
SHOW_INTERNAL_FRAMES = os.environ.get("LABKIT_INTERNAL_FRAMES", "") not in ("", "0")

# Packages whose frames are plumbing around a task: the worker, the event loop,
# labkit's wrappers.  A task's traceback shown to the user starts after them.
_PLUMBING = (
    "labkit",
    "dask",
    "distributed",
    "tornado",
    "asyncio",
    "concurrent",
    "threading",
    "multiprocessing",
)

_ORDER = (
    "node",
    "node_name",
    "phase",
    "chunk",
    "epoch",
    "batch",
    "step",
    "task",
    "worker",
    "device",
    "replica",
)


def format_location(where: dict) -> str:
    """Render a location mapping as ``node 1 'PCA', phase 0, chunk 3``."""
    parts = []
    for key in _ORDER:
        if key not in where or key == "node_name":
            continue
        if key == "node" and "node_name" in where:
            parts.append(f"node {where['node']} {where['node_name']!r}")
        else:
            parts.append(f"{key} {where[key]}")
    if "node_name" in where and "node" not in where:
        parts.insert(0, f"node {where['node_name']!r}")
    parts.extend(f"{k} {v}" for k, v in where.items() if k not in _ORDER)
    return ", ".join(parts)


class LabkitError(Exception):
    """Base of every labkit error; carries where it happened.

    Parameters
    ----------
    message : str
        What went wrong, without the location.
    **where
        Location keys (``node``, ``node_name``, ``phase``, ``chunk``, ...);
        ``None`` values are dropped.
    """

    def __init__(self, message: str = "", **where):
        super().__init__(message)
        self.message = message
        self.where = {k: v for k, v in where.items() if v is not None}
        self.remote_traceback: str | None = None

    def locate(self, **where) -> "LabkitError":
        """Add location keys that are not known yet; return ``self``."""
        for key, value in where.items():
            if value is not None and key not in self.where:
                self.where[key] = value
        return self

    def __str__(self) -> str:
        loc = format_location(self.where)
        return f"{self.message} [{loc}]" if loc else self.message

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self.where, self._extra()))

    def _extra(self) -> dict:
        return {"remote_traceback": self.remote_traceback}


def _rebuild(cls, message, where, extra):
    err = cls.__new__(cls)
    LabkitError.__init__(err, message, **where)
    for key, value in extra.items():
        setattr(err, key, value)
    return err


class RemoteTraceback(Exception):
    """The traceback of a task's own code, shown as the cause of its labkit error.

    As :mod:`concurrent.futures` does for process pools: Python prints it above
    the error, "The above exception was the direct cause of ...".
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


def _is_plumbing(filename: str) -> bool:
    """Whether a frame's file belongs to one of the :data:`_PLUMBING` packages."""
    for name in _PLUMBING:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path and filename.startswith(os.path.dirname(path) + os.sep):
            return True
    return False


def user_frames(exc: BaseException) -> str:
    """``exc``'s traceback from the first frame of the user's code on; ``""`` without one.

    Frames of labkit, Dask and the standard library's threading and event
    loop before it are left out: they are how the task got to run.

    Examples
    --------
    >>> def mine():
    ...     raise ValueError("bad row")
    >>> try:
    ...     mine()
    ... except ValueError as exc:
    ...     text = user_frames(exc)
    >>> "in mine" in text and text.rstrip().endswith("ValueError: bad row")
    True
    """
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if not _is_plumbing(f.filename)), None)
    if first is None:
        return ""
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(frames[first:]))
        + "".join(traceback.format_exception_only(type(exc), exc))
    )


_DYNAMIC_FRAME = re.compile(r'^  File "<dynamic-code>", line (\d+), in (\w+)$')


def _with_dynamic_sources(text: str) -> str:
    """``text`` with the source lines of frames that cloudpickle left without a file.

    Functions and classes of a notebook (``__main__``) reach worker processes
    pickled by value, their code objects renamed ``<dynamic-code>``, so the
    worker cannot show their lines; here, where they were written, we can.
    """
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        match = _DYNAMIC_FRAME.match(line)
        found = match and _main_source(match.group(2), int(match.group(1)))
        has_source = i + 1 < len(lines) and lines[i + 1].startswith("    ")
        if found and not has_source:
            filename, source = found
            out.append(f'  File "{filename}", line {match.group(1)}, in {match.group(2)}')
            out.append(f"    {source}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _main_source(name: str, lineno: int) -> tuple[str, str] | None:
    """``(file, source line)`` of a function ``name`` of ``__main__`` holding ``lineno``."""
    main = sys.modules.get("__main__")
    functions = []
    for obj in list(vars(main).values()) if main is not None else []:
        if inspect.isfunction(obj):
            functions.append(obj)
        elif inspect.isclass(obj) and getattr(obj, "__module__", None) == "__main__":
            functions.extend(f for f in vars(obj).values() if inspect.isfunction(f))
    for fn in functions:
        code = fn.__code__
        numbers = [n for _, _, n in code.co_lines() if n is not None]
        if code.co_name == name and numbers and code.co_firstlineno <= lineno <= max(numbers):
            found = (
                _cached_source(code, lineno)
                if code.co_filename == "<dynamic-code>"
                else _line(code.co_filename, lineno)
            )
            if found:
                return found
    return None


def _line(filename: str, lineno: int) -> tuple[str, str] | None:
    source = linecache.getline(filename, lineno).strip()
    return (filename, source) if source else None


def _cached_source(code, lineno: int) -> tuple[str, str] | None:
    """The line of a function that came back from a worker, found by its ``def``.

    Unpickling a class of ``__main__`` that a worker sent back (a fork, a
    result) sets that worker's copies of its functions on the class here,
    named ``<dynamic-code>``: the cell or file they were written in is found
    again among the sources Python (or IPython) keeps, newest first.
    """
    head = f"def {code.co_name}("
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if script:
        linecache.getlines(script)  # a script's own lines, read once
    for filename, entry in reversed(list(linecache.cache.items())):
        lines = entry[2] if len(entry) == 4 else None
        if (
            lines
            and len(lines) >= lineno
            and code.co_firstlineno <= len(lines)
            and head in lines[code.co_firstlineno - 1]
        ):
            return _line(filename, lineno)
    return None


def for_caller(err: BaseException) -> BaseException:
    """``err`` as handed to the caller: the task's own frames as its cause, ours left out.

    Re-raised where the caller waits (``run.result()``, a verb with
    ``wait=True``), the error's traceback then holds the caller's frames
    only, and Python prints the task's frames (:class:`RemoteTraceback`)
    above it.  ``LABKIT_INTERNAL_FRAMES=1`` keeps labkit's frames.
    """
    if not isinstance(err, LabkitError):
        return err
    text = getattr(err, "user_traceback", None)
    # a RemoteTraceback made where the error was raised (a node's hook, see Node) is made
    # again here, where the sources of a notebook's functions can be found
    if text and (err.__cause__ is None or isinstance(err.__cause__, RemoteTraceback)):
        err.__cause__ = RemoteTraceback(_with_dynamic_sources(text))
    if not SHOW_INTERNAL_FRAMES:
        err.__traceback__ = None
        err.__suppress_context__ = True
    return err


class TaskError(LabkitError):
    """A task raised a non-labkit exception; the original is described, not kept.

    The original exception object may not be picklable or importable in the
    caller, so its type name, message and the remote traceback travel as text.

    Attributes
    ----------
    original_type : str
        Qualified name of the exception raised inside the task.
    original_message : str
        ``str()`` of that exception.
    remote_traceback : str
        The traceback formatted where the task ran.
    user_traceback : str
        The same from the first frame of the user's own code on (see
        :func:`user_frames`); empty when the error came from labkit's code.
    """

    def __init__(
        self,
        message="",
        original_type="",
        original_message="",
        remote_traceback=None,
        user_traceback="",
        **where,
    ):
        super().__init__(message, **where)
        self.original_type = original_type
        self.original_message = original_message
        self.remote_traceback = remote_traceback
        self.user_traceback = user_traceback

    @classmethod
    def from_exception(
        cls, exc: BaseException, traceback_text: str, what: str = "task", **where
    ) -> "TaskError":
        """Describe ``exc`` as a TaskError: ``<what> failed with <type>: <message>``."""
        kind = type(exc)
        name = (
            kind.__qualname__
            if kind.__module__ == "builtins"
            else f"{kind.__module__}.{kind.__qualname__}"
        )
        return cls(
            f"{what} failed with {name}: {exc}",
            original_type=name,
            original_message=str(exc),
            remote_traceback=traceback_text,
            user_traceback=user_frames(exc),
            **where,
        )

    def _extra(self) -> dict:
        return {
            "remote_traceback": self.remote_traceback,
            "original_type": self.original_type,
            "original_message": self.original_message,
            "user_traceback": self.user_traceback,
        }


#: What user code may raise and still fail only its own task, step or record: ``sys.exit()``
#: or a ``KeyboardInterrupt`` there must not end a worker thread, an event loop or a process.
USER_EXITS = (Exception, SystemExit, KeyboardInterrupt)


def located(
    exc: BaseException, what: str = "task", kind: type | None = None, **where
) -> LabkitError:
    """``exc`` as a labkit error located at ``where``, for re-raising in the caller.

    A labkit error keeps its message and gains the location keys it lacks; any
    other exception becomes a ``kind`` (a :class:`TaskError` by default) that
    keeps its type, message and traceback: ``<what> failed with <type>: ...``.

    Examples
    --------
    >>> str(located(ValueError("bad row"), "replica 1", replica=1))
    'replica 1 failed with ValueError: bad row [replica 1]'
    """
    if isinstance(exc, LabkitError):
        return exc.locate(**where)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (kind or TaskError).from_exception(exc, text, what=what, **where)


def pulled(items, item: str = "chunk", source: str | None = None, first: int = 0, **where):
    """Iterate ``items``, an error of the source itself located at the item it was making.

    One rule for every stream a user hands labkit (a flow's chunks, a
    trainer's batches): an exception raised while the next item is made
    becomes an :class:`InputError` "``source`` raised ... while making
    ``item`` k", located at ``where`` and ``item`` k (counted from ``first``), the
    original chained; a :class:`TaskError` from the user's code inside the source (a
    pipe's processor) keeps its own location too; other labkit errors gain ``where``.

    Examples
    --------
    >>> def batches():
    ...     yield 1
    ...     raise OSError("disk gone")
    >>> list(pulled(batches(), "batch", "the batches", epoch=2))
    Traceback (most recent call last):
    ...
    labkit.errors.InputError: the batches raised OSError: disk gone while making batch 1 [epoch 2, batch 1]
    """
    source = source or f"the {item} source"
    try:
        iterator = iter(items)
    except Exception as exc:
        raise InputError(
            f"{source} cannot be iterated ({type(exc).__name__}: {exc})", **where
        ) from exc
    index = first
    while True:
        try:
            value = next(iterator)
        except StopIteration:
            return
        except TaskError as err:
            raise InputError(
                f"{source} raised {type(err).__name__}: {err.message} while making {item} {index}",
                **{**err.where, **where, item: index},
            ) from err
        except LabkitError as err:
            raise err.locate(**where, **{item: index})
        except Exception as exc:
            raise InputError(
                f"{source} raised {type(exc).__name__}: {exc} while making {item} {index}",
                **where,
                **{item: index},
            ) from exc
        yield value
        index += 1


def require_callable(value, argument: str, what: str) -> None:
    """An :class:`InputError` naming ``argument`` unless ``value`` can be called.

    For callbacks labkit keeps and calls later (subscribers, done and shutdown
    callbacks, task functions): refused when given, not logged or raised
    from another thread when first called.

    Examples
    --------
    >>> require_callable(5, "fn", "run.add_done_callback")
    Traceback (most recent call last):
    ...
    labkit.errors.InputError: run.add_done_callback takes a callable, got int 5 [argument fn]
    """
    if not callable(value):
        raise InputError(
            f"{what} takes a callable, got {type(value).__name__} {value!r:.60}", argument=argument
        )


class NotForkableError(LabkitError):
    """A node cannot fork; a parallel flow trains it locally instead."""


class InputError(LabkitError, ValueError):
    """Bad input: wrong shape, dtype, non-finite values, empty or wrong iterables."""


class TrainingError(LabkitError, RuntimeError):
    """A call that does not fit the training state (execute before training, ...)."""


try:  # scikit-learn is optional: without it, the same bases as its error
    from sklearn.exceptions import NotFittedError as _NotFittedBase
except ImportError:  # pragma: no cover - scikit-learn is installed for the tests

    class _NotFittedBase(ValueError, AttributeError):  # type: ignore[no-redef]
        """scikit-learn's ``NotFittedError`` bases, where scikit-learn is not installed."""


class NotFittedError(TrainingError, _NotFittedBase):
    """Used before it was fitted or trained: an estimator's predict, a node's execute.

    Both a labkit error (a :class:`TrainingError`) and scikit-learn's
    ``NotFittedError``, so ``except`` of either catches it.
    """


class CancelledError(LabkitError):
    """A run was cancelled before it finished."""


class SchedulerError(LabkitError, RuntimeError):
    """A scheduler was misused (shut down, no task callable) or lost its cluster."""


class WorkerLostError(SchedulerError):
    """A worker died under a task (or with its inputs) more often than a task may survive."""


class StorageError(LabkitError, OSError):
    """A file labkit writes or reads failed (disk full, no permission, a removed folder).

    Names the path (and, where it is known, the node or trial); also an
    ``OSError``, whose ``errno`` it keeps, so ``except OSError`` still works.
    """

    def __init__(self, message: str = "", errno: int | None = None, **where):
        super().__init__(message, **where)
        self.errno = errno

    @classmethod
    def of(cls, exc: OSError, doing: str, path: str, **where) -> "StorageError":
        """The error for ``exc``, raised while ``doing`` (e.g. "saving the flow") at ``path``."""
        import errno as codes

        name = codes.errorcode.get(exc.errno or 0, "")
        reason = exc.strerror or str(exc)
        return cls(
            f"{doing} failed: {reason}" + (f" ({name})" if name else ""),
            errno=exc.errno,
            path=path,
            **where,
        )

    def _extra(self) -> dict:
        return dict(super()._extra(), errno=self.errno)
