"""How labkit shows up in a notebook: a run that is a cell's result shows its board.

:func:`register` adds a formatter to IPython's ``ipython_display_formatter``
(the one that lets a type display itself), so ``flow.train(..., wait=False)``
as the last line of a cell shows the live board of the run it returns.
Outside IPython it does nothing; calling it again changes nothing.

Examples
--------
>>> register()   # not in IPython here
False
"""

from __future__ import annotations

__all__ = ["register", "display_run"]

_registered_in: set[int] = set()   # ids of the shells that have the formatter


def display_run(run) -> None:
    """Display the live board of ``run`` (the formatter IPython calls)."""
    from .board import board
    board(run)._ipython_display_()


def register() -> bool:
    """Show a Run that is a cell's result as its board; returns whether IPython is there."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    if id(shell) in _registered_in:
        return True
    try:
        import ipywidgets  # noqa: F401  (no widgets, no board: keep the plain repr)
    except ImportError:
        return False
    from ..runs import Run
    shell.display_formatter.ipython_display_formatter.for_type(Run, display_run)
    _registered_in.add(id(shell))
    return True
