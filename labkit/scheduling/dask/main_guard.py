"""Refuse to start worker processes from a script's top level, where each would run it again.

Worker processes are *spawned*: each starts a fresh interpreter that imports
the script that started it (as ``__mp_main__``) before it works.  A script
that starts ``lk.DaskScheduler(mode="processes")`` at its top level, outside
``if __name__ == "__main__":``, has each of them start a cluster of its own
while it bootstraps; Python refuses, and Dask's nannies printed four raw
tracebacks ("An attempt has been made to start a new process before the
current process has finished its bootstrapping phase").

:func:`check_main_guarded` finds that before any process starts: in the
parent, the frame running the script's top level, and whether the line it
runs lies under an ``if`` on ``__name__`` (read from the script's source); in a
spawned child bootstrapping (the script running as ``__mp_main__``), always.
Notebooks, ``python -c`` and ``python -m package`` re-run nothing and pass.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import sys

from ...errors import SchedulerError

__all__ = ["check_main_guarded", "unguarded_line"]


def check_main_guarded(what: str, method: str = "spawn") -> None:
    """A ``SchedulerError`` naming the fix when ``what`` starts ``method`` processes from the
    unguarded top level of a script (which each of them would run again)."""
    if method == "fork":  # a forked child runs nothing of the script again
        return
    found = unguarded_line()
    if found is None:
        return
    path, line = found
    raise SchedulerError(
        f"{what} starts worker processes, and was called at the top level of "
        f'{os.path.basename(path)} (line {line}), outside `if __name__ == "__main__":`. '
        "Each worker process starts by importing the script, which would start a cluster "
        "of its own. Put the code that starts the scheduler (and uses it) under "
        '`if __name__ == "__main__":` (or in a function called from there)'
    )


def unguarded_line() -> tuple[str, int] | None:
    """``(script, line)`` where this process runs its main script's top level unguarded, or None."""
    main = sys.modules.get("__main__")
    if main is None or not _reruns(main):
        return None
    frame = inspect.currentframe()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "<module>" and frame.f_globals.get("__name__") == "__mp_main__":
            return code.co_filename, frame.f_lineno  # a spawned child, bootstrapping
        if code.co_name == "<module>" and frame.f_globals is vars(main):
            if not _same_file(code.co_filename, getattr(main, "__file__", None)):
                return None  # a notebook's cell: no process runs it again
            guarded = _guarded(code.co_filename, frame.f_lineno)
            return None if guarded is not False else (code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def _same_file(a: str, b: str | None) -> bool:
    """Whether paths ``a`` and ``b`` name one file."""
    if not b:
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _reruns(main) -> bool:
    """Whether a spawned child runs ``main`` again (as ``multiprocessing.spawn`` decides)."""
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:  # python -m: a package's __main__ is not run again
        return name != "__main__" and not name.endswith(".__main__")
    path = getattr(main, "__file__", None)
    # IPython's launcher is skipped too; a notebook's __main__ has no file
    return path is not None and os.path.splitext(os.path.basename(path))[0] != "ipython"


def _guarded(path: str, line: int) -> bool | None:
    """Whether ``line`` of the script at ``path`` lies under ``if __name__ ...``; None: unknown."""
    tree = _parse(path)
    if tree is None:
        return None
    body: list = tree.body
    while True:
        statement = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if statement is None:
            return False
        if isinstance(statement, ast.If) and _names_main(statement.test):
            return True
        if isinstance(statement, ast.FunctionDef | ast.ClassDef):
            return False
        body = []
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(statement, field, []):
                if isinstance(child, ast.ExceptHandler):
                    body.extend(child.body)  # a try's handlers hold statements too
                elif isinstance(child, ast.stmt):
                    body.append(child)
        if not body:
            return False


def _names_main(test: ast.expr) -> bool:
    """Whether an ``if`` test reads ``__name__`` (``__name__ == "__main__"`` and its kin)."""
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(test))


def _parse(path: str) -> ast.Module | None:
    """The script's syntax tree (None when its source cannot be read)."""
    source = "".join(linecache.getlines(path))
    if not source:
        return None
    try:
        return ast.parse(source, path)
    except (SyntaxError, ValueError):
        return None
