"""Widgets that answer while the kernel is busy: their messages go to a kernel subshell.

A notebook kernel handles widget messages (a button's click) on its main
thread, between cells: while a cell blocks in ``run.result()``, a Cancel
click waits until the cell ends, which is too late.  ipykernel 7 runs
*subshells*, threads of the kernel with their own event loop, and lets a
comm say which subshell its front-end messages go to.  :func:`serve_while_busy`
makes one subshell per kernel (created through the kernel's control thread,
which is free while a cell runs) and routes a widget's messages there, so its
handlers run at once whatever the main thread is doing.

Where there is no such kernel (ipykernel < 7, a plain script, a test's
recording comm) it does nothing and says so; the widget then works as usual,
between cells (and during ``await run``).

Examples
--------
>>> serve_while_busy(object())   # not a widget in a kernel with subshells
False
"""

from __future__ import annotations

import logging
import threading

__all__ = ["serve_while_busy", "kernel_subshell"]

logger = logging.getLogger("labkit.views")

_lock = threading.Lock()
_subshells: dict[int, str | None] = {}  # id(kernel) -> its labkit subshell (None: failed)


def _kernel():
    """The running ipykernel, or ``None``."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    return getattr(shell, "kernel", None)


def kernel_subshell(kernel, timeout: float = 5.0) -> str | None:
    """The id of labkit's subshell of ``kernel``, made on first use; ``None`` if it has none."""
    if not _has_subshells(kernel) or getattr(kernel, "control_thread", None) is None:
        return None
    with _lock:
        if id(kernel) in _subshells:
            return _subshells[id(kernel)]
        reply: dict = {}
        done = threading.Event()

        def create():  # on the control thread, which owns this socket
            try:
                socket = kernel.shell_channel_thread.manager.control_to_shell_channel.from_socket
                socket.send_json({"type": "create"})
                reply.update(socket.recv_json())
            except Exception as exc:  # reported below, never raised in the control thread
                reply["evalue"] = f"{type(exc).__name__}: {exc}"
            finally:
                done.set()

        kernel.control_thread.io_loop.add_callback(create)
        ok = done.wait(timeout) and reply.get("status") == "ok"
        if not ok:
            logger.warning(
                "labkit: no kernel subshell for widgets (%s)", reply.get("evalue", "no answer")
            )
        _subshells[id(kernel)] = reply["subshell_id"] if ok else None
        return _subshells[id(kernel)]


def serve_while_busy(widget) -> bool:
    """Route ``widget``'s front-end messages to labkit's kernel subshell; whether it could."""
    comm = getattr(widget, "comm", None)
    kernel = _kernel()
    if comm is None or kernel is None or not _can_route(comm):
        return False
    subshell = kernel_subshell(kernel)
    if subshell is None:
        return False
    _route_to_subshell(comm, subshell)
    return True


# -- the adapter to ipykernel's private members ---------------------------------------------
#
# ipykernel 7 has no public way to ask whether a kernel runs subshells, nor to say which
# subshell a comm's messages go to: each message asks the comm's
# ``_reply_subshell_for(data, default)``.  These three functions are the only place labkit
# touches them; when ipykernel offers a public way, change them.

_IPYKERNEL_SUBSHELL_FLAG = "_supports_kernel_subshells"
_IPYKERNEL_SUBSHELL_HOOK = "_reply_subshell_for"


def _has_subshells(kernel) -> bool:
    """Whether ``kernel`` (an ipykernel 7 kernel) runs subshells."""
    return bool(getattr(kernel, _IPYKERNEL_SUBSHELL_FLAG, False))


def _can_route(comm) -> bool:
    """Whether ``comm`` is an ipykernel comm that asks where its messages go."""
    return hasattr(comm, _IPYKERNEL_SUBSHELL_HOOK)


def _route_to_subshell(comm, subshell: str) -> None:
    """Make ``comm`` send its front-end messages to ``subshell``, whatever they are."""
    setattr(comm, _IPYKERNEL_SUBSHELL_HOOK, lambda data, default: subshell)
