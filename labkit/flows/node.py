"""The node contract: phased training, fork/join, checked input, plain state.

A node learns from chunks of a 2-D array (rows are samples).  Training runs
in one or more *phases*; each phase sees the data once (``train`` per chunk,
then ``stop_training``).  For parallel training a node *forks*: the fork is a
fresh node with the same parameters and empty statistics, trained on one chunk
somewhere else and *joined* back.  Joins must be commutative and exact, so a
parallel phase equals a serial one.

Subclasses implement the underscored hooks; the public methods do the checks
and the book-keeping (phase, samples seen, joins).

Examples
--------
>>> import numpy as np
>>> class Mean(Node):
...     def __init__(self, **kw):
...         super().__init__(**kw)
...         self.total = 0.0
...     def _train(self, x):
...         self.total = self.total + x.sum(axis=0)
...     def _stop_training(self):
...         self.mean = self.total / self.samples_seen
...     def _execute(self, x):
...         return x - self.mean
...     def _fork(self):
...         return Mean()
...     def _partial(self):
...         return self.total
...     def _join(self, total):
...         self.total = self.total + total
>>> node = Mean()
>>> fork = node.fork(); fork.train(np.ones((4, 2)))
>>> node.join(fork); node.stop_training()
>>> node.mean.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np

from ..errors import (
    USER_EXITS,
    InputError,
    LabkitError,
    NotForkableError,
    RemoteTraceback,
    TrainingError,
    located,
    not_fitted,
)
from .checks import as_chunk, check_parts, checked_dtype, positive_int, real_number, require_finite

__all__ = ["Node", "Partial", "FLOAT_DTYPES", "require_finite", "positive_int", "real_number"]

FLOAT_DTYPES = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class Partial:
    """What a fork hands to the node it joins (:meth:`Node.partial`).

    Its place in training (phase, the input dim and dtype it fixed, the
    samples it saw) and its ``statistics``: whatever the node's ``_partial``
    returns and its ``_join`` merges.
    """

    phase: int
    input_dim: int | None
    dtype: np.dtype | None
    samples: int
    statistics: Any


class Node:
    """Base class of flow nodes.

    Parameters
    ----------
    input_dim : int, optional
        Number of input columns; fixed by the first chunk when not given.
    output_dim : int, optional
        Number of output columns, where the node lets the user choose.
    dtype : str or numpy.dtype, optional
        Input dtype; fixed by the first chunk when not given.
    check_finite : bool
        Reject chunks holding NaN or inf (costs one pass over each chunk).
    name : str, optional
        Name shown in errors and views; the class name by default.
    """

    #: dtypes the node accepts; ``None`` accepts any numeric dtype.
    supported_dtypes: tuple[str, ...] | None = FLOAT_DTYPES

    #: Whether training or executing runs pure-Python code that holds the GIL.
    #: On the default (in-process) cluster such nodes train in worker
    #: processes; set ``False`` on a node whose work is numpy, BLAS or torch so
    #: that it runs on threads with its chunks passed by reference (every
    #: built-in node does).  ``True`` is the safe default for a new node.
    holds_gil: bool = True

    def __init__(self, input_dim=None, output_dim=None, dtype=None, check_finite=False, name=None):
        self.name = name or type(self).__name__
        self._input_dim = positive_int(self, input_dim, "input_dim", allow_none=True)
        self._output_dim = output_dim
        self._dtype = checked_dtype(self.name, dtype, self.supported_dtypes)
        self.check_finite = check_finite
        self._phase = 0
        self._training = self.is_trainable()
        self._samples = 0
        self._joins = 0
        self._is_fork = False

    # -- what the node is ----------------------------------------------------

    @classmethod
    def is_trainable(cls) -> bool:
        """Whether the node learns from data (it overrides ``_train``)."""
        return cls._train is not vars(Node)["_train"]

    def is_training(self) -> bool:
        """Whether training phases remain."""
        return self._training

    def n_phases(self) -> int | None:
        """Number of training phases; ``None`` when decided while training."""
        return 1 if self.is_trainable() else 0

    def use_execute_fork(self) -> bool:
        """Whether ``execute`` learns something, so forks must be joined after it."""
        return False

    @property
    def phase(self) -> int:
        """Index of the current training phase (the number of phases once trained)."""
        return self._phase

    @property
    def samples_seen(self) -> int:
        """Samples trained on in the current phase, joins included."""
        return self._samples

    @property
    def joins(self) -> int:
        """Forks joined into this node in the current phase."""
        return self._joins

    @property
    def input_dim(self) -> int | None:
        return self._input_dim

    @property
    def output_dim(self) -> int | None:
        return self._output_dim

    @property
    def dtype(self) -> np.dtype | None:
        return self._dtype

    # -- training --------------------------------------------------------------

    def train(self, x, *args) -> None:
        """Learn from one chunk ``x`` (rows are samples); ``args`` go to ``_train``."""
        if not self.is_trainable():
            raise TrainingError(f"{self.name} is not trainable", node_name=self.name)
        if not self._training:
            raise TrainingError(f"training of {self.name} is finished", node_name=self.name)
        x = self._check_input(x)
        check_parts(self.name, type(self)._train, args)
        with self._hook("_train"):
            self._train(x, *args)
        self._samples += x.shape[0]

    def stop_training(self) -> None:
        """Finish the current phase; start the next one or end training."""
        if not self._training:
            raise TrainingError(f"training of {self.name} is finished", node_name=self.name)
        if self._samples == 0:
            raise InputError(
                f"{self.name} got no data in phase {self._phase}",
                node_name=self.name,
                phase=self._phase,
            )
        with self._hook("_stop_training"):
            try:
                self._stop_training()
            except (np.linalg.LinAlgError, FloatingPointError) as exc:
                # Non-finite statistics are the usual cause; the chunks are named by
                # require_finite where a node checks them, this covers the others.
                raise InputError(
                    f"{self.name} could not finish phase {self._phase}: "
                    f"{type(exc).__name__}: {exc}; its statistics hold NaN or "
                    "inf if the data was not finite (check_finite=True finds "
                    "the chunk)",
                    node_name=self.name,
                    phase=self._phase,
                ) from exc
        if self._has_next_phase():
            self._phase += 1
        else:
            self._phase += 1
            self._training = False
        self._samples = 0
        self._joins = 0

    def _has_next_phase(self) -> bool:
        """Called after ``_stop_training``: whether another phase follows."""
        n = self.n_phases()
        return n is not None and self._phase + 1 < n

    # -- execution ---------------------------------------------------------------

    def execute(self, x):
        """Process a chunk with what the node has learnt."""
        if self.is_trainable() and self._training:
            raise not_fitted(
                f"{self.name} must be trained before execute "
                f"(phase {self._phase} of {self.n_phases() or '?'} is open)",
                node_name=self.name,
            )
        x = self._check_input(x)
        with self._hook("_execute"):
            return self._execute(x)

    __call__ = execute

    # -- fork and join -----------------------------------------------------------

    def fork(self) -> Node:
        """A fresh node with this node's parameters and empty statistics."""
        if not (self._training or self.use_execute_fork()):
            raise TrainingError(
                f"{self.name} is trained and does not learn in execute; nothing to fork",
                node_name=self.name,
            )
        with self._hook("_fork"):
            forked = self._fork()
        if not isinstance(forked, Node):
            raise TrainingError(
                f"{type(self).__name__}._fork returned a {type(forked).__name__}, not a Node",
                **self._where(),
            )
        forked.begin_fork(self)
        return forked

    def begin_fork(self, parent: Node) -> None:
        """Start as a fork of ``parent``: its name, phase, dims and checks; no samples yet.

        :meth:`fork` calls it on what ``_fork`` made.
        """
        self.name = parent.name
        self._phase, self._training = parent.phase, parent.is_training()
        self._input_dim, self._dtype = parent.input_dim, parent.dtype
        self.check_finite = parent.check_finite
        self._samples, self._joins, self._is_fork = 0, 0, True

    @property
    def joined(self) -> bool:
        """Whether this fork was joined (its statistics are in the node it joined)."""
        return getattr(self, "_joined", False)

    def partial(self) -> Partial:
        """What joining this fork merges: where it is in training and its statistics."""
        return Partial(
            phase=self._phase,
            input_dim=self._input_dim,
            dtype=self._dtype,
            samples=self._samples,
            statistics=self._partial(),
        )

    def join(self, forked: Node) -> None:
        """Merge the statistics of ``forked`` into this node."""
        self.check_fork(forked)
        partial = forked.partial()
        self._adopt_dims(partial)
        with self._hook("_join"):
            self._join(partial.statistics)
        # its statistics are in here now: joining it again would count them twice
        forked.mark_joined()
        self._samples += partial.samples
        self._joins += 1

    def mark_joined(self) -> None:
        """Note that this fork's statistics were joined: a second join is refused."""
        self._joined = True

    def _adopt_dims(self, partial: Partial) -> None:
        """Take the fork's input dim and dtype where unknown here; refuse others."""
        for attr, theirs, what in (
            ("_input_dim", partial.input_dim, "input dim"),
            ("_dtype", partial.dtype, "dtype"),
        ):
            mine = getattr(self, attr)
            if mine is None:
                setattr(self, attr, theirs)
            elif theirs is not None and mine != theirs:
                raise InputError(
                    f"{self.name} expects {what} {mine}, a chunk had {theirs}",
                    node_name=self.name,
                    phase=self._phase,
                )

    def check_fork(self, forked: object) -> None:
        """A TrainingError unless ``forked`` is a fork of this node's kind and phase, not
        joined yet."""
        related = isinstance(forked, Node) and (
            isinstance(forked, type(self)) or isinstance(self, type(forked))
        )
        if not isinstance(forked, Node) or not related:
            raise TrainingError(
                f"{self.name}.join takes a fork of this node (node.fork()), "
                f"got {type(forked).__name__}",
                **self._where(),
            )
        if forked.joined:
            raise TrainingError(
                f"this fork was joined already; joining it into {self.name} "
                "again would count its samples twice",
                **self._where(),
            )
        if forked.phase != self._phase:
            raise TrainingError(
                f"cannot join a fork of phase {forked.phase} into "
                f"{self.name} at phase {self._phase}",
                **self._where(),
            )

    # -- the hooks' errors -------------------------------------------------------

    def _where(self) -> dict:
        """This node's location: its name, and its phase while it trains."""
        return {"node_name": self.name, "phase": self._phase if self._training else None}

    @contextlib.contextmanager
    def _hook(self, hook: str):
        """Run a subclass hook: its labkit errors gain the node (and phase), others
        become a TaskError naming them, with the original's type, message and traceback.

        So an error of a node's own code names its place the same way whether the
        node trains serially, on the client or on a worker.
        """
        try:
            yield
        except LabkitError as err:
            err.locate(**self._where())
            raise  # the same error, located
        except USER_EXITS as exc:  # sys.exit() in a hook fails the hook, not the worker
            error = located(exc, f"{type(self).__name__}.{hook}", **self._where())
            text = getattr(error, "user_traceback", None) or error.remote_traceback or ""
            # shown as the cause, as for a task's error handed to its caller (for_caller)
            raise error from RemoteTraceback(text)

    # -- views -----------------------------------------------------------------

    def state(self, plots: bool = True) -> dict[str, Any]:
        """Plain data for views: phase, samples, joins and small arrays to plot.

        ``plots=False`` leaves out the arrays, which can cost a computation
        (PCA's spectrum is an eigendecomposition).
        """
        state = {
            "name": self.name,
            "phase": self._phase,
            "phases": self.n_phases(),
            "training": self._training,
            "samples": self._samples,
            "joins": self._joins,
            "input_dim": self._input_dim,
            "output_dim": self._output_dim,
        }
        if plots:
            state["plots"] = {k: np.asarray(v).tolist() for k, v in self._plot_data().items()}
        return state

    def _plot_data(self) -> dict[str, Any]:
        """Small 1-D arrays worth plotting (e.g. a PCA spectrum); none by default."""
        return {}

    # -- input checks ----------------------------------------------------------

    def _check_input(self, x: Any) -> np.ndarray:
        """Fix input dim and dtype from the first chunk; check every later one."""
        x = as_chunk(self.name, x, self.supported_dtypes)
        if self._input_dim is None:
            self._input_dim = x.shape[1]
        elif x.shape[1] != self._input_dim:
            raise InputError(
                f"{self.name} expects input dim {self._input_dim}, got {x.shape[1]}",
                node_name=self.name,
            )
        if self._dtype is None:
            self._dtype = x.dtype
        elif x.dtype != self._dtype:
            raise InputError(
                f"{self.name} expects dtype {self._dtype}, got {x.dtype}", node_name=self.name
            )
        if self.check_finite and x.dtype.kind in "fc" and not np.isfinite(x).all():
            raise InputError(f"{self.name} got NaN or inf in its input", node_name=self.name)
        return x

    # -- hooks for subclasses ----------------------------------------------------

    def _train(self, x, *args) -> None:
        """Accumulate statistics from one checked chunk."""
        raise NotImplementedError

    def _stop_training(self) -> None:
        """Finish the current phase (``self.phase`` tells which)."""

    def _execute(self, x):
        """Process one checked chunk."""
        return x

    def _fork(self) -> Node:
        """A fresh node that accumulates on its own; by default the node cannot fork."""
        raise NotForkableError(f"{self.name} cannot fork; it trains locally", node_name=self.name)

    def _partial(self) -> Any:
        """This fork's statistics, as ``_join`` takes them; the fork itself by default.

        A node that keeps its statistics in private attributes returns them here
        (an object, a dict, a dataclass), so no node reads another's privates.
        """
        return self

    def _join(self, partial: Any) -> None:
        """Merge a fork's statistics, what its ``_partial`` gave (must be commutative)."""
        raise NotForkableError(f"{self.name} cannot join forks", node_name=self.name)

    def __repr__(self) -> str:
        dims = f"input_dim={self._input_dim}, output_dim={self._output_dim}"
        return f"{type(self).__name__}({dims})"
