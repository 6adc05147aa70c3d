"""Parts held, not mixed in: a scheduler's and a batch's parts, and the room's folders.

``DaskScheduler`` holds a cluster (``HeldCluster``), its routes (``Dispatcher``) and
the outcomes' thread; a ``Batch`` holds its ``TaskStarter``.  None of them is a
mixin that declares its host's private attributes for the type checker, and
scheduling is a few folders of at most 16 modules, each saying what it may import.
"""

from __future__ import annotations

import ast
import pathlib

import labkit as lk
from labkit.scheduling.tasks.starting import StartingBatch, TaskStarter

PACKAGE = pathlib.Path(lk.__file__).parent / "scheduling"
MAX_MODULES = 16


def _scheduling_classes(cls: type) -> list[type]:
    return [c for c in cls.__mro__ if c.__module__.startswith("labkit.scheduling")]


def test_a_dask_scheduler_and_a_batch_mix_nothing_in():
    assert _scheduling_classes(lk.DaskScheduler) == [lk.DaskScheduler, lk.scheduling.Scheduler]
    assert _scheduling_classes(lk.scheduling.Batch) == [lk.scheduling.Batch]


def test_no_scheduling_class_declares_private_attributes_of_a_host():
    """A mixin declared its host's ``_x: Any`` for the type checker; a part owns its state."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        if "TYPE_CHECKING" in source:
            found.append(f"{path.name}: TYPE_CHECKING")
        for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
            found += [
                f"{path.name}:{st.lineno} {cls.name}.{st.target.id}"
                for st in cls.body
                if isinstance(st, ast.AnnAssign) and st.value is None
                and isinstance(st.target, ast.Name) and st.target.id.startswith("_")
            ]
    assert found == []


def test_a_batch_holds_a_task_starter_that_owns_its_callable_and_chunks():
    def tenfold(v):
        return v * 10

    with lk.LocalScheduler() as s, s.batch() as batch:
        starter = batch.starter
        assert isinstance(starter, TaskStarter) and isinstance(batch, StartingBatch)
        assert starter.batch is batch and starter.callable is None
        assert batch.add_tasks(range(3), tenfold, ready=True) == 3
        assert starter.callable.fn is tenfold and starter.next_chunk == 3
        assert sorted(batch.get_results()) == [0, 10, 20]
        assert starter.next_chunk == 0  # a new cycle numbers its chunks from 0


def test_scheduling_is_folders_of_at_most_16_modules_that_say_what_they_may_import():
    top = [p.name for p in PACKAGE.glob("*.py")]
    folders = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
    assert top == ["__init__.py"]
    assert [f.name for f in folders] == ["dask", "routes", "tasks", "workers"]
    for folder in folders:
        modules = list(folder.glob("*.py"))
        assert len(modules) <= MAX_MODULES, folder.name
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        assert "imports" in doc, f"{folder.name}/__init__.py does not say what it may import"
