"""The user's model and optimizer, holding what the replicas hold whenever a trainer call returns.

Everyone who trains in PyTorch reads the model after ``fit``.  Where the
replicas are copies (on Dask workers: the group's ``holds_model`` is False),
:class:`ModelSync` brackets each call of the trainer (``fit``, ``step``,
``evaluate``) and, when it ends, loads the ranks' state into the model and the
optimizer, in place (:meth:`~ModelSync.pull`; the copy itself is the group's
``fetch_state``).  So:

* a call that returns leaves ``model`` and ``optimizer.state_dict()`` equal to
  the workers', after an in-fit recovery too (the ranks left hold it);
* a call that raised leaves them at the last step every rank completed (a
  step that failed is undone on every rank); where the workers are gone with
  it (a stopped group trial's scheduler shut down, no worker left), at the end
  of the call before: the call's own error says what happened, and closing the
  trainer later does not warn about it again;
* a copy that failed after a call that returned warns, and is tried again by
  the next call, ``trainer.sync_model()`` or ``close()``;
* ``sync_model=False`` skips the copy: the model is then *stale* after a call
  that trained, and using it (its forward, its ``state_dict()``) raises a
  :class:`~labkit.errors.TrainingError` naming ``trainer.sync_model()``
  (:class:`StaleGuard`) until that is called or the trainer is closed.

Replicas on threads train the model itself: nothing is copied there.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref
from collections.abc import Iterator

import torch

from ...errors import TrainingError

__all__ = ["ModelSync", "StaleGuard"]


class ModelSync:
    """Keeps ``model`` and ``optimizer`` equal to what ``group``'s replicas hold after each call."""

    def __init__(self, model: torch.nn.Module, optimizer, group, after_calls: bool = True):
        self.model, self.optimizer, self.group = model, optimizer, group
        #: copy after every call (``sync_model=True``), else on request only
        self.after_calls = bool(after_calls)
        #: the replicas may hold a state the model lacks (a call trained since the last copy)
        self.pending = False
        self.running = 0  # calls under way (their end copies)
        self._handles: list = []
        if not group.holds_model and not self.after_calls:
            guard = StaleGuard(self)
            self._handles = [
                model.register_forward_pre_hook(guard),
                model.register_state_dict_pre_hook(guard),
            ]

    @property
    def stale(self) -> bool:
        """Whether the model lags what the replicas hold, and no call is under way."""
        return self.pending and not self.running

    @contextlib.contextmanager
    def call(self, trains: bool = True) -> Iterator[None]:
        """Around one trainer call: when it ends the model holds what the replicas hold."""
        if trains and not self.group.holds_model:
            self.pending = True
        self.running += 1
        try:
            yield
        except Exception:
            self.running -= 1
            self._after_error()
            raise
        except BaseException:  # a Ctrl-C: no copy now (left pending: close() makes it)
            self.running -= 1
            raise
        self.running -= 1
        if self.after_calls and self.pending:
            self._after_success()

    def pull(self) -> None:
        """Load what the replicas hold into the model and the optimizer (in place)."""
        if self.group.holds_model:
            self.pending = False
            return
        state = self.group.fetch_state()
        if state is None:
            raise TrainingError("no worker of the replica group survived")
        self.load(state)

    def load(self, state: dict) -> None:
        """``state`` (``{"model", "optimizer"}``) into the model and the optimizer."""
        # load_state_dict copies into the model's own tensors; the optimizer keeps the
        # received tensors (already on the CPU, of the parameters' dtype) without a copy
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.pending = False

    def loaded(self) -> None:
        """The model and the replicas were given the same state (``load_state_dict``)."""
        self.pending = False

    def _after_success(self) -> None:
        """The copy after a call that returned; a failure warns (left pending: close() retries)."""
        try:
            self.pull()
        except Exception as exc:
            if self.group.stop_reason() is not None:  # stopped under it (a trial's stop)
                self.pending = False  # the stop ends the trial: nothing to warn about
                return
            warnings.warn(
                f"could not copy the trained parameters back from the workers ({exc}): the "
                "model keeps those of its last copy; call trainer.sync_model() to try again",
                RuntimeWarning,
                stacklevel=5,
            )

    def _after_error(self) -> None:
        """The copy after a call that raised: the last step every rank completed.

        Where the workers are gone with the call (a stopped trial's scheduler shut
        down, no worker left), the model keeps its last copy: the call's own error
        says what happened, so nothing is left pending for ``close`` to warn about.
        """
        if not self.pending or not self.after_calls:
            return
        try:
            self.pull()
        except Exception:
            self.pending = False

    def close(self) -> None:
        """The last copy, if one is pending; the model stops guarding. Warns if it is lost."""
        try:
            if self.pending:
                self._last_copy()
        finally:
            for handle in self._handles:
                handle.remove()
            self._handles = []
            self.pending = False

    def _last_copy(self) -> None:
        """Load the group's last state, or warn that it is lost (closing must not raise)."""
        try:
            state = self.group.last_state()
        except Exception as exc:  # closing must tear down whatever the workers say
            state, why = None, f"could not fetch the trained parameters from the workers ({exc})"
        else:
            why = "no worker of the replica group survived"
        if state is None:
            warnings.warn(
                f"{why}: the model keeps the parameters of its last sync",
                RuntimeWarning,
                stacklevel=5,
            )
        else:
            self.load(state)


class StaleGuard:
    """A hook on the user's model: using it while it is stale raises, naming the way out.

    Registered as a forward pre-hook and a ``state_dict`` pre-hook.  A pickled
    or copied model carries a guard that guards nothing (it names no trainer).
    """

    def __init__(self, sync: ModelSync | None = None):
        self._sync = weakref.ref(sync) if sync is not None else None

    def __call__(self, module, *args) -> None:
        sync = self._sync() if self._sync is not None else None
        if sync is not None and sync.stale:
            raise TrainingError(
                f"this {type(module).__name__} is stale: its trainer (sync_model=False) "
                "trained it on the workers since its parameters were last copied here; call "
                "trainer.sync_model() first (or leave sync_model=True, the default, to copy "
                "them after every fit, step and evaluate)"
            )

    def __reduce__(self):
        return (StaleGuard, ())
