"""What cannot be sent to the workers: one rule to tell it, one error that names it.

Dask pickles what it ships (callables, chunks, a trainer's model and loss)
and wraps a failure in its own ``TypeError`` deep inside its event loop.
Whatever labkit sends goes through :func:`dumps` (or is judged by
:func:`pickling_cause` after the fact), so a lambda defined in a notebook
cell's closure, an open file or a lock inside a model is an
:class:`~labkit.errors.InputError` naming the argument or chunk, before
anything runs and never retried as if the network had failed.

Examples
--------
>>> import threading
>>> dumps(threading.Lock(), "loss_fn")
Traceback (most recent call last):
...
labkit.errors.InputError: loss_fn cannot be sent to the workers: TypeError: cannot pickle '_thread.lock' object [argument loss_fn]
"""

from __future__ import annotations

import pickle
import re

import cloudpickle

from ...errors import InputError

__all__ = [
    "dumps",
    "pickling_cause",
    "root_cause",
    "cause_chain",
    "unpicklable_part",
]


def root_cause(exc: BaseException) -> BaseException:
    """The innermost cause: Dask wraps a pickling error in its own TypeError."""
    seen = set()
    inner = exc.__cause__ or exc.__context__
    while inner is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc, inner = inner, inner.__cause__ or inner.__context__
    return exc


def cause_chain(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and its causes, outermost first."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def pickling_cause(exc: BaseException) -> BaseException | None:
    """The pickling failure behind ``exc``, or ``None`` when it is something else.

    The outermost error that says what could not be pickled: Dask tries
    pickle, then cloudpickle, and it is cloudpickle's complaint (raised last,
    so outermost) that names the real obstacle, a lock rather than a lambda.
    """
    chain = cause_chain(exc)
    for err in chain:
        if isinstance(err, pickle.PicklingError) or re.search(
            r"(?i)(can't|cannot) pickle", str(err)
        ):
            return err
    root = chain[-1]
    text = f"{type(root).__name__}: {root}".lower()
    if isinstance(root, (TypeError, AttributeError)) or "pickl" in text or "serializ" in text:
        return root
    return None


def unpicklable_part(task_callable) -> str:
    """How to name what keeps ``task_callable`` from being pickled: the user's part at fault.

    Each part of :meth:`~labkit.scheduling.TaskCallable.parts` is tried on its own;
    when each pickles alone (the failure was the trip, not a part), all of them, as
    the user named them; without parts, the callable's own ``repr``.
    """
    parts = getattr(task_callable, "parts", None)
    named = parts() if callable(parts) else {}
    for label, obj in named.items():
        try:
            cloudpickle.dumps(obj)
        except Exception:
            return label
    return ", ".join(named) if named else repr(task_callable)


def dumps(obj, argument: str, **where) -> bytes:
    """``cloudpickle.dumps(obj)``, or an ``InputError`` naming ``argument`` and the reason."""
    try:
        return cloudpickle.dumps(obj)
    except Exception as exc:
        root = pickling_cause(exc) or root_cause(exc)
        raise InputError(
            f"{argument} cannot be sent to the workers: {type(root).__name__}: {root}",
            argument=argument,
            **where,
        ) from exc
