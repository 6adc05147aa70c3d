"""The sweep's search at work: configurations asked as trials start, reports and ends told.

One :class:`Searcher` a sweep, called by the engine under its lock, as
:mod:`.judge` is for the early-stopping rule.  A search that asks
(:attr:`~.search.Search.asks`, an Optuna sampler) is asked a trial's
configuration when the trial is taken to run, once a trial (a trial that
restarts after a lost worker keeps it); the configuration is set on the
trial's record and stored (the trial was stored with ``{}`` when added).  Each
value of the metric and each end is told to it.  A search that fails to ask
fails the trial (the sweep goes on); one that fails to listen is logged.  A search
that raises what is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``:
they would end the Dask worker's thread or the slots' listener that called
it) ends the sweep instead: the sweep is cancelled, and its loop raises a
:class:`~labkit.errors.TaskError` naming the search (:meth:`Searcher.check`).
Only a ``KeyboardInterrupt`` in the main thread is raised as it is: a Ctrl-C
there cancels the sweep as anywhere else.

A search that also decides (:class:`~.pbt.PBT`, a :class:`~.decision.Decider`)
hears each report once, as a decider, in the sweep's decision chain
(:mod:`.chain`); its ``ended`` and ``resume`` are told here as any search's.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from ...errors import TaskError, user_frames
from ..trials.record import TrialRecord
from ..trials.state import TrialState
from ..trials.status import Status
from . import RandomSearch, Search, describe_search
from .decision import Decider

__all__ = ["Searcher"]

logger = logging.getLogger("labkit.experiments")

#: What a search was doing when told, in words (``{}``: the trial).
_TOLD = {
    "reported": "being told a report of trial {}",
    "ended": "being told that trial {} ended",
    "resume": "being told the stored trials",
}


class Searcher:
    """The search of one sweep (``None``: random search), its store and the trials it asked."""

    def __init__(self, search: Search | None, store: Any, sweep: str, engine: Any = None):
        self.search: Search = search if search is not None else RandomSearch()
        self.store, self.sweep, self.engine = store, sweep, engine
        #: the error that ends the sweep: the search raised a BaseException (:meth:`check`)
        self.failure: TaskError | None = None
        self.asks = bool(self.search.asks)
        self.listens = not isinstance(self.search, RandomSearch)  # the hot path: skip a no-op
        #: whether reports are told here: a search that decides hears them in the chain
        self.told_reports = self.listens and not isinstance(self.search, Decider)
        self.asked: set[int] = set()  # trials asked in this run (a restart is not asked again)
        #: the events of trials ended in :meth:`take` (under the launcher's lock), sent later
        self.later: list = []

    def take(self, s: TrialState, end: Callable[..., Any]) -> bool:
        """Ask ``s``'s configuration if the search asks and has not yet; whether ``s`` may run.

        A search that fails to ask fails the trial: ``end(s, Status.FAILED, error=...)``
        (the engine's, under its lock) records it, its event kept in :attr:`later`.
        """
        if not self.asks or s.id in self.asked:
            return True
        try:
            config = dict(self.search.ask(s.id))
        except Exception as exc:  # noqa: BLE001 - a sampler's failure is the trial's
            logger.exception("labkit: the search failed to ask trial %d's configuration", s.id)
            why = f"the search {self.search!r:.60} failed to ask a configuration"
            self.later.append(end(s, Status.FAILED, error=f"{why}: {type(exc).__name__}: {exc}"))
            return False
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the sweep's end
            self._fatal(exc, f"asking trial {s.id}'s configuration", s.id)
            return False
        self.asked.add(s.id)
        s.update(config=config)
        self.store.trial_config(self.sweep, s.id, config)
        return True

    def reported(self, s: TrialState, step: Any, value: Any) -> None:
        """A value of the metric of ``s``, told to the search (not to one that decides)."""
        if not self.told_reports or (s.stop is not None and s.stop[0] == "fail"):
            return  # nothing to learn, or from a member that fails: its values are void
        self.guarded("reported", self.search.reported, s.id, step, value)

    def ended(self, record: TrialRecord) -> None:
        """A trial ended, as ``record`` says."""
        if self.listens:
            self.guarded("ended", self.search.ended, record)

    def resume(self, records: list[TrialRecord]) -> None:
        """A resumed sweep's stored trials (before anything is asked)."""
        if self.listens:
            self.guarded("resume", self.search.resume, records)

    def guarded(self, hook: str, told: Callable[..., Any], *args: Any) -> Any:
        """``told(*args)``, the search's ``hook``: what it returns, None if it raised."""
        try:
            return told(*args)
        except Exception:  # noqa: BLE001 - a search that fails to listen must not stop the sweep
            logger.exception("labkit: the search's %s failed", hook)
            return None
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: the sweep's end
            first = args[0] if hook != "resume" else None
            trial = first.id if isinstance(first, TrialRecord) else first
            self._fatal(exc, _TOLD.get(hook, "being told {}").format(trial), trial)
            return None

    def _fatal(self, exc: BaseException, doing: str, trial: int | None) -> None:
        """The search raised ``exc``, no ``Exception``: keep the sweep's error, cancel the sweep.

        A ``KeyboardInterrupt`` in the main thread is a Ctrl-C: raised again, the
        sweep's loop cancels the sweep as for any other.
        """
        if (
            isinstance(exc, KeyboardInterrupt)
            and threading.current_thread() is threading.main_thread()
        ):
            raise exc
        logger.error("labkit: the search raised %s while %s", type(exc).__name__, doing)
        if self.failure is None:
            name = describe_search(self.search)
            kind = type(exc).__name__
            self.failure = TaskError(
                f"the search {name} raised {kind}: {exc} while {doing}; the sweep was "
                f"stopped (a search must raise an Exception, not a {kind}: a failed ask "
                "then fails only its trial)",
                original_type=kind,
                original_message=str(exc),
                remote_traceback="".join(traceback.format_exception(exc)),
                user_traceback=user_frames(exc),
                trial=trial,
                search=name,
            )
        if self.engine is not None:
            self.engine.cancel()  # nothing more starts; running trials are asked to stop
            self.engine.wake()

    def check(self) -> None:
        """Raise the error of a search that raised a BaseException (the sweep's loop calls it)."""
        if self.failure is not None:
            raise self.failure
