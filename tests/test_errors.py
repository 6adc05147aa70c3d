"""labkit.errors, a package split by concept, is one place to import from: labkit.errors.X."""

from __future__ import annotations

import pickle
import traceback

import pytest

import labkit
import labkit.errors as errors

CLASSES = ["LabkitError", "TaskError", "NotForkableError", "InputError", "TrainingError",
           "NotFittedError", "CancelledError", "SchedulerError", "WorkerLostError",
           "StorageError", "RemoteTraceback"]


def test_every_name_is_imported_from_labkit_errors():
    for name in [*errors.__all__, "USER_EXITS", "SHOW_INTERNAL_FRAMES"]:
        assert hasattr(errors, name), name
    assert set(CLASSES) <= set(errors.__all__)
    for name in ["InputError", "LabkitError", "WorkerLostError", "SchedulerError"]:
        assert getattr(labkit, name) is getattr(errors, name)


@pytest.mark.parametrize("name", CLASSES)
def test_a_class_says_labkit_errors_in_tracebacks(name):
    kind = getattr(errors, name)
    assert kind.__module__ == "labkit.errors"
    try:
        raise kind("boom")
    except Exception as exc:  # noqa: BLE001 - each kind in turn
        last = traceback.format_exception_only(type(exc), exc)[-1]
    assert last.startswith(f"labkit.errors.{name}:")


def test_errors_pickle_whole_with_location_and_extras():
    task = errors.located(ValueError("bad row"), "replica 1", replica=1)
    again = pickle.loads(pickle.dumps(task))
    assert type(again) is errors.TaskError and str(again) == str(task)
    assert again.original_type == "ValueError" and again.where == {"replica": 1}
    disk = errors.StorageError.of(OSError(28, "No space left"), "saving the flow", "/x", node=2)
    again = pickle.loads(pickle.dumps(disk))
    assert again.errno == 28 and again.where == {"path": "/x", "node": 2}
    assert isinstance(again, OSError) and "ENOSPC" in str(again)


def test_for_caller_puts_the_users_frames_first():
    def users_code():
        raise KeyError("k")

    try:
        users_code()
    except KeyError as exc:
        err = errors.located(exc, "task", task=3)
    shown = errors.for_caller(err)
    assert isinstance(shown.__cause__, errors.RemoteTraceback)
    assert "in users_code" in str(shown.__cause__)
    assert shown.__traceback__ is None or errors.SHOW_INTERNAL_FRAMES


def test_a_labkit_error_from_a_stream_keeps_its_cause():
    def source():
        yield 1
        try:
            raise OSError("disk")
        except OSError as exc:
            raise errors.InputError("bad record") from exc

    with pytest.raises(errors.InputError) as info:
        list(errors.pulled(source(), "record", epoch=1))
    assert info.value.where == {"epoch": 1, "record": 1}
    assert isinstance(info.value.__cause__, OSError)
