"""How labkit shows up in a notebook: a run shows its board, the rest an HTML card.

:func:`register` adds a formatter to IPython's ``ipython_display_formatter``
(the one that lets a type display itself), so ``flow.train(..., wait=False)``
as the last line of a cell shows the live board of the run it returns, and
HTML formatters for schedulers, flows and nodes (and runs, without
ipywidgets): the cards of :mod:`labkit.views.notebook.cards`, with workers, threads,
memory and dashboard links, or a flow's nodes and their state.
Outside IPython it does nothing; calling it again changes nothing.

Examples
--------
>>> from IPython import get_ipython
>>> register() == (get_ipython() is not None)   # True in a kernel, False in a script
True
"""

from __future__ import annotations

from ...runs import Run
from . import cards

__all__ = ["register", "display_run"]

_registered_in: set[int] = set()  # ids of the shells that have the formatter


def display_run(run) -> None:
    """Display the live board of ``run`` (the formatter IPython calls); a sweep's is its own."""
    # imported on the first display, not with labkit: a kernel imports this module at once
    from .board import board

    board(run)._ipython_display_()  # board() gives a sweep's run its SweepBoard


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
    formatters = shell.display_formatter
    # By name: views know runs and events, not flows (IPython matches subclasses too).
    for module, name, card in (
        ("labkit.scheduling.tasks.base", "Scheduler", cards.scheduler_card),
        ("labkit.flows.flow", "Flow", cards.flow_card),
        ("labkit.flows.node", "Node", cards.node_card),
        ("labkit.runs", "Run", cards.run_card),
    ):
        formatters.formatters["text/html"].for_type_by_name(module, name, card)
    try:
        import ipywidgets  # noqa: F401  (no widgets, no board: a run shows its card)
    except ImportError:
        pass
    else:
        formatters.ipython_display_formatter.for_type(Run, display_run)
    _registered_in.add(id(shell))
    return True
