"""A task's traceback as the user should read it: their own frames, with their sources.

Tracebacks cross threads and processes as text.  Here that text is cut to the
user's own frames (:func:`user_frames`), shown as the cause of the labkit
error (:class:`RemoteTraceback`), and given back the source lines of a
notebook's functions that a worker process could not show
(:func:`with_dynamic_sources`).  Imports nothing of labkit.
"""

from __future__ import annotations

import inspect
import linecache
import os
import re
import sys
import traceback
from types import CodeType

__all__ = ["SHOW_INTERNAL_FRAMES", "RemoteTraceback", "user_frames", "with_dynamic_sources"]

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


def with_dynamic_sources(text: str) -> str:
    """``text`` with the source lines of frames that cloudpickle left without a file.

    Functions and classes of a notebook (``__main__``) reach worker processes
    pickled by value, their code objects renamed ``<dynamic-code>``, so the
    worker cannot show their lines; here, where they were written, we can.
    """
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        match = _DYNAMIC_FRAME.match(line)
        found = _main_source(match.group(2), int(match.group(1))) if match else None
        has_source = i + 1 < len(lines) and lines[i + 1].startswith("    ")
        if match and found and not has_source:
            filename, source = found
            out.append(f'  File "{filename}", line {match.group(1)}, in {match.group(2)}')
            out.append(f"    {source}")
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def _main_functions() -> list:
    """The functions of ``__main__``, those of its classes included."""
    main = sys.modules.get("__main__")
    functions = []
    for obj in list(vars(main).values()) if main is not None else []:
        if inspect.isfunction(obj):
            functions.append(obj)
        elif inspect.isclass(obj) and getattr(obj, "__module__", None) == "__main__":
            functions.extend(f for f in vars(obj).values() if inspect.isfunction(f))
    return functions


def _main_source(name: str, lineno: int) -> tuple[str, str] | None:
    """``(file, source line)`` of a function ``name`` of ``__main__`` holding ``lineno``."""
    for fn in _main_functions():
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
    """``(filename, the stripped line)``, or None where the line is not known."""
    source = linecache.getline(filename, lineno).strip()
    return (filename, source) if source else None


def _cached_source(code: CodeType, lineno: int) -> tuple[str, str] | None:
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
