"""Errors on the move: located as they cross threads and processes, handed to the caller.

An exception raised in a task, a replica or a user's stream becomes a labkit
error located where it happened (:func:`located`, :func:`pulled`), and is
re-raised where the caller waits with the task's own frames as its cause
(:func:`for_caller`).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from . import frames
from .kinds import InputError, LabkitError, TaskError

__all__ = ["USER_EXITS", "for_caller", "located", "pulled", "require_callable"]

T = TypeVar("T")

#: What user code may raise and still fail only its own task, step or record: ``sys.exit()``
#: or a ``KeyboardInterrupt`` there must not end a worker thread, an event loop or a process.
USER_EXITS = (Exception, SystemExit, KeyboardInterrupt)


def for_caller(err: BaseException) -> BaseException:
    """``err`` as handed to the caller: the task's own frames as its cause, ours left out.

    Re-raised where the caller waits (``run.result()``, a verb with
    ``wait=True``), the error's traceback then holds the caller's frames
    only, and Python prints the task's frames (:class:`RemoteTraceback`)
    above it.  ``LABKIT_INTERNAL_FRAMES=1`` keeps labkit's frames.
    """
    if not isinstance(err, LabkitError):
        return err
    text = getattr(err, "user_traceback", None)
    # a RemoteTraceback made where the error was raised (a node's hook, see Node) is made
    # again here, where the sources of a notebook's functions can be found
    if text and (err.__cause__ is None or isinstance(err.__cause__, frames.RemoteTraceback)):
        err.__cause__ = frames.RemoteTraceback(frames.with_dynamic_sources(text))
    if not frames.SHOW_INTERNAL_FRAMES:
        err.__traceback__ = None
        err.__suppress_context__ = True
    return err


def located(
    exc: BaseException, what: str = "task", kind: type[TaskError] | None = None, **where: Any
) -> LabkitError:
    """``exc`` as a labkit error located at ``where``, for re-raising in the caller.

    A labkit error keeps its message and gains the location keys it lacks; any
    other exception becomes a ``kind`` (a :class:`TaskError` by default) that
    keeps its type, message and traceback: ``<what> failed with <type>: ...``.

    Examples
    --------
    >>> str(located(ValueError("bad row"), "replica 1", replica=1))
    'replica 1 failed with ValueError: bad row [replica 1]'
    """
    if isinstance(exc, LabkitError):
        return exc.locate(**where)
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (kind or TaskError).from_exception(exc, text, what=what, **where)


def pulled(
    items: Iterable[T],
    item: str = "chunk",
    source: str | None = None,
    first: int = 0,
    **where: Any,
) -> Iterator[T]:
    """Iterate ``items``, an error of the source itself located at the item it was making.

    One rule for every stream a user hands labkit (a flow's chunks, a
    trainer's batches): an exception raised while the next item is made
    becomes an :class:`InputError` "``source`` raised ... while making
    ``item`` k", located at ``where`` and ``item`` k (counted from ``first``), the
    original chained; a :class:`TaskError` from the user's code inside the source (a
    pipe's processor) keeps its own location too; other labkit errors gain ``where``.

    Examples
    --------
    >>> def batches():
    ...     yield 1
    ...     raise OSError("disk gone")
    >>> list(pulled(batches(), "batch", "the batches", epoch=2))
    Traceback (most recent call last):
    ...
    labkit.errors.InputError: the batches raised OSError: disk gone while making batch 1 [epoch 2, batch 1]
    """
    source = source or f"the {item} source"
    try:
        iterator = iter(items)
    except Exception as exc:
        raise InputError(
            f"{source} cannot be iterated ({type(exc).__name__}: {exc})", **where
        ) from exc
    index = first
    while True:
        try:
            value = next(iterator)
        except StopIteration:
            return
        except TaskError as err:
            raise InputError(
                f"{source} raised {type(err).__name__}: {err.message} while making {item} {index}",
                **{**err.where, **where, item: index},
            ) from err
        except LabkitError as err:
            err.locate(**where, **{item: index})
            raise  # the same error, its cause and traceback kept
        except Exception as exc:
            raise InputError(
                f"{source} raised {type(exc).__name__}: {exc} while making {item} {index}",
                **where,
                **{item: index},
            ) from exc
        yield value
        index += 1


def require_callable(value: object, argument: str, what: str) -> None:
    """An :class:`InputError` naming ``argument`` unless ``value`` can be called.

    For callbacks labkit keeps and calls later (subscribers, done and shutdown
    callbacks, task functions): refused when given, not logged or raised
    from another thread when first called.

    Examples
    --------
    >>> require_callable(5, "fn", "run.add_done_callback")
    Traceback (most recent call last):
    ...
    labkit.errors.InputError: run.add_done_callback takes a callable, got int 5 [argument fn]
    """
    if not callable(value):
        raise InputError(
            f"{what} takes a callable, got {type(value).__name__} {value!r:.60}", argument=argument
        )
