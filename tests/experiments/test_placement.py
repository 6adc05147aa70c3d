"""A sweep is placed once: one :class:`Placement`, declared, that every launcher and check reads.

On real schedulers: this thread, an in-process cluster's threads, and four
worker processes (slots, a task a trial, groups).
"""

from __future__ import annotations

import pathlib
import re

import pytest

import labkit as lk
from labkit.experiments import launch
from labkit.experiments.launch.group import GroupLauncher
from labkit.experiments.launch.launchers import LAUNCHERS, launcher_of
from labkit.experiments.launch.placement import Placement, Where
from labkit.experiments.launch.remote import RemoteLauncher
from labkit.experiments.launch.slots import SlotLauncher
from labkit.experiments.launch.threads import InlineLauncher, ThreadLauncher

EXPERIMENTS = pathlib.Path(lk.__file__).parent / "experiments"


def trial(config, trial):
    """A trial of nothing: returns its x."""
    return {"x": config["x"]}


def test_a_local_scheduler_places_trials_in_this_thread():
    placement = Placement.choose(lk.LocalScheduler(), workers_per_trial=1, holds_gil=True)
    assert placement.where is Where.INLINE
    assert not placement.travels and not placement.group and not placement.on_workers
    placement.check_room()  # nothing to fit
    assert type(launcher_of(placement, None, trial, None)) is InlineLauncher


def test_an_in_process_cluster_places_trials_on_its_threads(threads_scheduler):
    placement = Placement.choose(threads_scheduler, workers_per_trial=2)
    assert placement.where is Where.THREADS and not placement.on_workers
    assert not placement.travels  # a GIL-free function stays in this process
    assert Placement.choose(threads_scheduler, 1, holds_gil=True).travels  # its offload pool
    launcher = launcher_of(placement, None, trial, None)
    assert type(launcher) is ThreadLauncher and launcher.placement is placement
    assert launcher.slots() == 1  # 2 threads, 2 a trial
    with pytest.raises(lk.InputError, match="workers_per_trial=3"):
        Placement.choose(threads_scheduler, workers_per_trial=3).check_room()


def test_worker_processes_place_trials_in_slots_tasks_or_groups(four, monkeypatch):
    monkeypatch.setattr(launch, "SLOTS", False)
    assert launch.place(four).where is Where.TASKS  # the switch, read when a sweep is placed
    monkeypatch.setattr(launch, "SLOTS", True)
    slots = Placement.choose(four, workers_per_trial=1)
    assert slots.where is Where.SLOTS and slots.travels and not slots.group
    tasks = Placement.choose(four, workers_per_trial=1, slots=False)
    assert tasks.where is Where.TASKS and tasks.travels and tasks.on_workers
    groups = Placement.choose(four, workers_per_trial=2)
    assert groups.where is Where.GROUPS and groups.group and groups.on_workers
    assert not groups.travels  # a group trial's function runs on the client
    groups.check_room()
    with pytest.raises(lk.InputError, match="workers_per_trial=5"):
        Placement.choose(four, workers_per_trial=5).check_room()
    made = {where: type(launcher_of(p, None, trial, None)) for where, p in
            [(Where.SLOTS, slots), (Where.TASKS, tasks), (Where.GROUPS, groups)]}
    assert made == {Where.SLOTS: SlotLauncher, Where.TASKS: RemoteLauncher,
                    Where.GROUPS: GroupLauncher}


def test_every_placement_has_its_launcher():
    assert set(LAUNCHERS) == set(Where)


def test_a_sweep_reads_the_placement_it_chose_once(four, monkeypatch):
    """The placement is chosen when the sweep starts; its trials run where it said."""
    chosen = []
    choose = Placement.choose.__func__

    def counted(cls, *args, **kwargs):
        chosen.append(choose(cls, *args, **kwargs))
        return chosen[-1]

    monkeypatch.setattr(Placement, "choose", classmethod(counted))
    result = lk.sweep(trial, [{"x": x} for x in (1, 2, 3)], scheduler=four, store=None,
                      workers_per_trial=2, metric="x", mode="max")
    assert [p.where for p in chosen] == [Where.GROUPS]
    assert result.counts() == {"completed": 3}


def test_no_launch_module_asks_a_scheduler_what_it_is_by_hasattr():
    """Is this a group trial on worker processes? is answered by the placement alone."""
    sources = [*sorted((EXPERIMENTS / "launch").glob("*.py")), EXPERIMENTS / "job.py"]
    probes = [f"{path.name}: {m.group(0)}" for path in sources
              for m in re.finditer(r"hasattr\(\s*scheduler[^)]*\)", path.read_text())]
    assert probes == []


def test_every_channel_back_to_the_client_is_a_trial_channel():
    """A direct call, Dask's event stream, a slot's socket, an offload pool's socket: one protocol."""
    from labkit.experiments.launch.channel import TrialChannel
    from labkit.experiments.launch.group import HeldSink
    from labkit.experiments.launch.sinks import DirectSink, EventSink, MemorySink, PipeSink
    from labkit.experiments.launch.slot import SlotSink

    calls = {"start", "report", "checkpoint", "end", "restore", "stopped"}
    assert calls <= set(dir(TrialChannel))
    for channel in (DirectSink, EventSink, PipeSink, SlotSink, MemorySink, HeldSink):
        assert calls <= set(dir(channel)), channel.__name__


def test_a_trial_reports_the_same_through_each_channel(four, threads_scheduler, monkeypatch):
    """Reports, a checkpoint and the end reach the sweep alike, in this thread, on threads,
    in an offload process, in slots, a task a trial (Dask's event stream) and in groups."""
    def reporting(config, trial):
        for step in range(3):
            trial.report(step, x=config["x"] * step)
        trial.checkpoint({"step": 2})
        return {"x": 2 * config["x"]}

    def histories(scheduler, k=1, fn=reporting):
        result = lk.sweep(fn, [{"x": 1.0}, {"x": 2.0}], scheduler=scheduler, store=None,
                          metric="x", mode="max", workers_per_trial=k)
        return sorted((t.config["x"], t.status.value, tuple(m["x"] for _, m, _ in t.history))
                      for t in result.trials)

    expected = [(1.0, "completed", (0.0, 1.0, 2.0)), (2.0, "completed", (0.0, 2.0, 4.0))]
    assert histories(lk.LocalScheduler()) == expected
    assert histories(threads_scheduler) == expected
    offloaded = lk.FunctionCallable(reporting, holds_gil=True)  # the offload pool's socket
    assert histories(threads_scheduler, fn=offloaded) == expected
    assert histories(four) == expected  # slots
    assert histories(four, k=2) == expected  # groups
    monkeypatch.setattr(launch, "SLOTS", False)
    assert histories(four) == expected  # a task a trial
