"""One protocol for what decides at report time: a trial continues, stops, pauses or exploits.

As Ray Tune's ``TrialScheduler``, one kind of thing decides on every report,
whether the sweep was given it as ``early_stop=`` (``lk.ASHA``, ``lk.Median``,
a rule of one's own, adapted by :class:`~.judge.Judge`) or as ``search=``
(``lk.PBT``, which is a :class:`Search` for its first configurations and a
:class:`Decider` for the rest).  The sweep's engine consults them in one
chain (:class:`~.chain.DecisionChain`), the search's decider first.

A :class:`Decider` answers :meth:`Decider.on_report` with a :data:`Decision`:

* :data:`CONTINUE` -- the trial goes on;
* :class:`Stop` -- it stops (its next ``trial.report`` raises ``TrialStopped``);
* :class:`Pause` -- it goes to the end of the queue once its checkpoint of that
  step is taken, and resumes from it later;
* :class:`Exploit` -- it continues from ``donor``'s latest checkpoint with ``config``.

What a decider may decide it declares, rather than being probed for it:
``pauses`` and ``exploits`` (class attributes).  A decider that may do either
is handed the sweep's members (a :class:`Population`) and seed in
:meth:`Decider.start`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

__all__ = [
    "Decider",
    "Decision",
    "Continue",
    "CONTINUE",
    "Stop",
    "Pause",
    "Exploit",
    "Population",
]


@dataclass(frozen=True)
class Continue:
    """The trial goes on (:data:`CONTINUE`)."""


#: The decision to let a trial go on.
CONTINUE = Continue()


@dataclass(frozen=True)
class Stop:
    """Stop the trial, for ``reason`` (shown with the trial, kept in the store)."""

    reason: str


@dataclass(frozen=True)
class Exploit:
    """Continue from ``donor``'s latest checkpoint with the configuration ``config``.

    ``at``: the interval boundary the member was ranked at (in the bottom quantile).
    """

    donor: int
    config: dict
    at: Any = None


@dataclass(frozen=True)
class Pause:
    """Go to the end of the queue; resume from the member's own latest checkpoint."""


#: What a :class:`Decider` answers a report with.
Decision = Continue | Stop | Pause | Exploit


class Population(Protocol):
    """What the sweep tells a decider that pauses or exploits of its members."""

    def config(self, trial: int) -> dict:
        """The configuration in force of ``trial``."""
        ...

    def checkpoint_step(self, trial: int) -> Any:
        """The step of ``trial``'s latest checkpoint (None without one)."""
        ...

    def active(self, trial: int) -> bool:
        """Whether ``trial`` has not ended."""
        ...

    def waiting(self) -> bool:
        """Whether a member waits for a slot."""
        ...

    def size(self) -> int:
        """How many members the population has."""
        ...


class Decider:
    """What decides at each report of the sweep's metric; see the module's docstring.

    Every hook but :meth:`on_report` does nothing by default.  Hooks are called
    by the sweep's engine under its lock, in trial and step order.
    """

    #: whether :meth:`on_report` may answer :class:`Pause`
    pauses: ClassVar[bool] = False
    #: whether :meth:`on_report` may answer :class:`Exploit`
    exploits: ClassVar[bool] = False

    def start(self, population: Population | None, seed: int) -> None:
        """The sweep starts: its members (for a decider that pauses or exploits) and seed."""

    def on_trial_add(self, trial: int) -> None:
        """``trial`` joined the sweep (new, or known to a resumed sweep)."""

    def on_report(self, trial: int, step: Any, value: float, stopping: bool) -> Decision:
        """``trial`` reported ``value`` of the metric at ``step``; what it does now.

        ``stopping``: the trial is already asked to stop (learn the value; the
        decision is not carried out).
        """
        raise NotImplementedError

    def on_trial_restart(self, trial: int, from_step: Any) -> None:
        """``trial`` runs again from a checkpoint: it reports from ``from_step`` again."""

    def on_trial_end(self, trial: int, status: str) -> None:
        """``trial`` ended with ``status`` (completed, stopped, failed, cancelled)."""
