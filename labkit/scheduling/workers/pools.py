"""The offload pools of this process by token: how a task finds the pool that runs it.

A task names its pool by a token (a string travels to a worker thread; the
pool does not), and :func:`~.running.run_task` looks the pool up here.  This
module sits below both :mod:`.offload` (which registers its pools) and
:mod:`.running` (which finds them), so neither imports the other back.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["RunsTasks", "register_pool", "unregister_pool", "offload_pool"]


@runtime_checkable
class RunsTasks(Protocol):
    """What :func:`~.running.run_task` asks of a pool: run one task, return its outcome."""

    def run(self, task_callable: Any, data: Any, info: Any, worker: str) -> Any:
        """Run one task; its outcome, or its error raised here."""
        ...


_POOLS: dict[str, RunsTasks] = {}  # token -> pool


def register_pool(token: str, pool: RunsTasks) -> None:
    """Make ``pool`` the one tasks naming ``token`` run in."""
    _POOLS[token] = pool


def unregister_pool(token: str) -> None:
    """Forget the pool of ``token`` (it closed)."""
    _POOLS.pop(token, None)


def offload_pool(token: str | None) -> RunsTasks | None:
    """The live pool registered under ``token`` (``None`` when there is none)."""
    return _POOLS.get(token) if token else None
