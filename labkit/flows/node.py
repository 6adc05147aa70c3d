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
...     def _join(self, forked):
...         self.total = self.total + forked.total
>>> node = Mean()
>>> fork = node.fork(); fork.train(np.ones((4, 2)))
>>> node.join(fork); node.stop_training()
>>> node.mean.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InputError, NotForkableError, TrainingError

__all__ = ["Node", "FLOAT_DTYPES", "require_finite"]

FLOAT_DTYPES = ("float32", "float64")


def require_finite(node: "Node", values, what: str = "its input") -> None:
    """Raise an :class:`InputError` when ``values``, a reduction of one chunk, is not finite.

    Nodes pass a small reduction they compute anyway (a column sum, the
    diagonal of ``x.T @ x``): NaN or inf anywhere in the chunk shows there, so
    the check costs O(columns) instead of another pass over the chunk, and it
    runs before the node's statistics take the chunk in.
    """
    if not np.isfinite(values).all():
        raise InputError(f"{node.name} got NaN or inf in {what}: the chunk's data is not "
                         "finite (clean it, or set check_finite=True to reject such chunks "
                         "on arrival)", node_name=node.name, phase=node.phase)


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

    def __init__(self, input_dim=None, output_dim=None, dtype=None, check_finite=False,
                 name=None):
        self._input_dim = input_dim
        self._output_dim = output_dim
        self._dtype = np.dtype(dtype) if dtype is not None else None
        self.check_finite = check_finite
        self.name = name or type(self).__name__
        self._phase = 0
        self._training = self.is_trainable()
        self._samples = 0
        self._joins = 0
        self._is_fork = False

    # -- what the node is ----------------------------------------------------

    @classmethod
    def is_trainable(cls) -> bool:
        """Whether the node learns from data (it overrides ``_train``)."""
        return cls._train is not Node._train

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
        try:
            self._train(x, *args)
        except InputError as err:
            raise err.locate(node_name=self.name, phase=self._phase)
        self._samples += x.shape[0]

    def stop_training(self) -> None:
        """Finish the current phase; start the next one or end training."""
        if not self._training:
            raise TrainingError(f"training of {self.name} is finished", node_name=self.name)
        if self._samples == 0:
            raise InputError(f"{self.name} got no data in phase {self._phase}",
                             node_name=self.name, phase=self._phase)
        try:
            self._stop_training()
        except (np.linalg.LinAlgError, FloatingPointError) as exc:
            # Non-finite statistics are the usual cause; the chunks are named by
            # require_finite where a node checks them, this covers the others.
            raise InputError(f"{self.name} could not finish phase {self._phase}: "
                             f"{type(exc).__name__}: {exc}; its statistics hold NaN or inf "
                             "if the data was not finite (check_finite=True finds the chunk)",
                             node_name=self.name, phase=self._phase) from exc
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
            raise TrainingError(f"{self.name} must be trained before execute "
                                f"(phase {self._phase} of {self.n_phases() or '?'} is open)",
                                node_name=self.name)
        return self._execute(self._check_input(x))

    __call__ = execute

    # -- fork and join -----------------------------------------------------------

    def fork(self) -> "Node":
        """A fresh node with this node's parameters and empty statistics."""
        if not (self._training or self.use_execute_fork()):
            raise TrainingError(f"{self.name} is trained and does not learn in execute; "
                                "nothing to fork", node_name=self.name)
        forked = self._fork()
        forked.name = self.name
        forked._phase, forked._training = self._phase, self._training
        forked._input_dim, forked._dtype = self._input_dim, self._dtype
        forked.check_finite = self.check_finite
        forked._samples, forked._joins, forked._is_fork = 0, 0, True
        return forked

    def join(self, forked: "Node") -> None:
        """Merge the statistics of ``forked`` into this node."""
        if forked._phase != self._phase:
            raise TrainingError(f"cannot join a fork of phase {forked._phase} into "
                                f"{self.name} at phase {self._phase}", node_name=self.name)
        for attr, what in (("_input_dim", "input dim"), ("_dtype", "dtype")):
            mine, theirs = getattr(self, attr), getattr(forked, attr)
            if mine is None:
                setattr(self, attr, theirs)
            elif theirs is not None and mine != theirs:
                raise InputError(f"{self.name} expects {what} {mine}, a chunk had {theirs}",
                                 node_name=self.name, phase=self._phase)
        self._join(forked)
        self._samples += forked._samples
        self._joins += 1

    # -- views -----------------------------------------------------------------

    def state(self, plots: bool = True) -> dict[str, Any]:
        """Plain data for views: phase, samples, joins and small arrays to plot.

        ``plots=False`` leaves out the arrays, which can cost a computation
        (PCA's spectrum is an eigendecomposition).
        """
        state = {
            "name": self.name, "phase": self._phase, "phases": self.n_phases(),
            "training": self._training, "samples": self._samples, "joins": self._joins,
            "input_dim": self._input_dim, "output_dim": self._output_dim,
        }
        if plots:
            state["plots"] = {k: np.asarray(v).tolist() for k, v in self._plot_data().items()}
        return state

    def _plot_data(self) -> dict[str, Any]:
        """Small 1-D arrays worth plotting (e.g. a PCA spectrum); none by default."""
        return {}

    # -- input checks ----------------------------------------------------------

    def _check_input(self, x) -> np.ndarray:
        """Fix input dim and dtype from the first chunk; check every later one."""
        if not isinstance(x, np.ndarray):
            x = np.asarray(x)
        if x.ndim != 2:
            raise InputError(f"{self.name} expects a 2-D array (samples x features), "
                             f"got shape {x.shape}", node_name=self.name)
        if self.supported_dtypes is not None and x.dtype.name not in self.supported_dtypes:
            raise InputError(f"{self.name} does not support dtype {x.dtype} "
                             f"(supported: {', '.join(self.supported_dtypes)})",
                             node_name=self.name)
        if self._input_dim is None:
            self._input_dim = x.shape[1]
        elif x.shape[1] != self._input_dim:
            raise InputError(f"{self.name} expects input dim {self._input_dim}, "
                             f"got {x.shape[1]}", node_name=self.name)
        if self._dtype is None:
            self._dtype = x.dtype
        elif x.dtype != self._dtype:
            raise InputError(f"{self.name} expects dtype {self._dtype}, got {x.dtype}",
                             node_name=self.name)
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

    def _fork(self) -> "Node":
        """A fresh node that accumulates on its own; by default the node cannot fork."""
        raise NotForkableError(f"{self.name} cannot fork; it trains locally",
                               node_name=self.name)

    def _join(self, forked: "Node") -> None:
        """Merge a fork's statistics (must be commutative)."""
        raise NotForkableError(f"{self.name} cannot join forks", node_name=self.name)

    def __repr__(self) -> str:
        dims = f"input_dim={self._input_dim}, output_dim={self._output_dim}"
        return f"{type(self).__name__}({dims})"
