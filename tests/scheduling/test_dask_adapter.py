"""Dask beyond its public API only in ``labkit/scheduling/dask/dask_adapter.py``; what the adapter says.

The source of every module of ``labkit/`` but the adapter is read with
:mod:`ast` and refused when it

* imports a private Dask module or name (``dask._task_spec``, ``from
  distributed.client import _x``);
* reads a private attribute of Dask's classes (``future._state``): the private
  names that ``distributed.Future``, ``Client``, ``Worker``, ``Scheduler``,
  ``LocalCluster`` and ``dask.delayed.Delayed`` define, found in their source,
  unless some labkit module defines the same name itself (labkit's own
  objects' insides, such as a replica group's ``_client``);
* asks the scheduler to run code on it (``run_on_scheduler``: reading its state);
* tells a Dask type by the string of its name or module (``type(x).__name__ ==
  "KilledWorker"``, ``__module__.startswith("dask.array")``).
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import textwrap
import time

import numpy as np
import pytest

import labkit as lk
from labkit.scheduling.dask import dask_adapter as adapter
from tests.helpers import own_client

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "labkit"
ADAPTER = PACKAGE / "scheduling" / "dask" / "dask_adapter.py"


def _dask_private_names() -> set[str]:
    """Private attribute names that Dask's main classes define (class or instance)."""
    import distributed
    from dask.delayed import Delayed
    from distributed.client import FutureState
    names: set[str] = set()
    for cls in (distributed.Future, FutureState, distributed.Client, distributed.Worker,
                distributed.Scheduler, distributed.LocalCluster, Delayed):
        for klass in cls.__mro__:
            if not klass.__module__.startswith(("dask", "distributed")):
                continue
            names.update(n for n in vars(klass) if _private(n))
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
            except (OSError, TypeError):
                continue
            names.update(node.attr for node in ast.walk(tree)
                         if isinstance(node, ast.Attribute) and _private(node.attr)
                         and isinstance(node.value, ast.Name) and node.value.id == "self")
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dask_module(name: str) -> bool:
    return name.split(".")[0] in ("dask", "distributed")


def _own_names(tree: ast.AST) -> set[str]:
    """Private names the module assigns or defines itself."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            own.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    return own


def _dask_class_names() -> set[str]:
    """Names of the classes Dask's top-level modules offer, and of its common errors."""
    import dask
    import distributed
    names = {n for mod in (dask, distributed) for n in dir(mod) if n[:1].isupper()}
    return names | {"KilledWorker", "CommClosedError", "FutureCancelledError", "Delayed",
                    "Future", "Array"}


def _names_dask(node: ast.AST, classes: set[str]) -> bool:
    """A string constant naming a Dask class or module."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value in classes or _dask_module(node.value))


def _is_name_string(node: ast.AST) -> bool:
    """``x.__name__`` or ``x.__module__``."""
    return isinstance(node, ast.Attribute) and node.attr in ("__name__", "__module__")


def private_dask_uses(source: str, module: str, dask_private: set[str],
                      own: set[str] = frozenset()) -> list[str]:
    """Every use of Dask beyond its public API in ``source`` (see the module docstring).

    ``own``: private names labkit defines itself (besides those ``source`` defines).
    """
    tree = ast.parse(source)
    own = set(own) | _own_names(tree)
    classes = _dask_class_names()
    found = []
    for node in ast.walk(tree):
        where = f"{module}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):   # absolute only: labkit has a module "distributed"
            found += [f"{where} imports {a.name}" for a in node.names
                      if _dask_module(a.name) and any(map(_private, a.name.split(".")))]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and _dask_module(node.module):
            if any(map(_private, node.module.split("."))):
                found.append(f"{where} imports {node.module}")
            found += [f"{where} imports {node.module}.{a.name}" for a in node.names
                      if _private(a.name)]
        elif isinstance(node, ast.Attribute) and node.attr in dask_private \
                and node.attr not in own:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{where} reads .{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr == "run_on_scheduler":
            found.append(f"{where} runs code on the scheduler")
        elif isinstance(node, ast.Compare) and any(
                _is_name_string(side) for side in [node.left, *node.comparators]) and any(
                _names_dask(side, classes) for side in [node.left, *node.comparators]):
            found.append(f"{where} tells a type by its name")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "startswith" and _is_name_string(node.func.value) \
                and any(_names_dask(arg, classes) for arg in node.args):
            found.append(f"{where} tells a type by its module")
    return found


def violations() -> list[str]:
    dask_private = _dask_private_names()
    sources = {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}
    labkit_own = set().union(*(_own_names(ast.parse(text)) for text in sources.values()))
    found = []
    for path, text in sources.items():
        if path == ADAPTER:
            continue
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found += private_dask_uses(text, module, dask_private, labkit_own)
    return found


def test_private_dask_names_only_in_the_adapter():
    assert violations() == []


def test_the_check_catches_each_kind_of_private_use():
    planted = ("from dask._task_spec import GraphNode\n"
               "import distributed\n"
               "def f(future, client, error):\n"
               "    reason = future._state.exception\n"
               "    client.run_on_scheduler(len)\n"
               "    return type(error).__name__ == 'KilledWorker', "
               "type(error).__module__.startswith('distributed')\n")
    found = private_dask_uses(planted, "m", _dask_private_names())
    assert found == ["m:1 imports dask._task_spec", "m:4 reads ._state",
                     "m:5 runs code on the scheduler", "m:6 tells a type by its name",
                     "m:6 tells a type by its module"]


def test_the_adapter_tells_dask_types_apart():
    import dask
    import dask.array as da
    from labkit.scheduling.dask import dask_adapter as adapter
    block = dask.delayed(np.ones)(3)
    assert adapter.is_delayed(block) and not adapter.is_delayed(np.ones(3))
    assert adapter.is_dask_array(da.ones(3)) and not adapter.is_dask_array(np.ones(3))
    assert not adapter.is_future(block)
    assert adapter.lost_input("lost dependencies") and not adapter.lost_input("scheduler-restart")
    from distributed import KilledWorker
    assert adapter.is_killed_worker(KilledWorker("k", None, 3)) and not adapter.is_killed_worker(None)


def test_the_adapter_reads_a_cancel_reason_and_lost_workers(cluster):
    from distributed import Event
    from labkit.scheduling.dask import dask_adapter as adapter
    with own_client(cluster.scheduler_address) as client:
        gate = Event("labkit-test-cancel-gate", client=client)
        future = client.submit(gate.wait, key="labkit-test-cancel-0", pure=False)
        try:
            client.cancel([future], reason="stopped by hand")
            assert adapter.cancel_reason(future) == "stopped by hand"
            assert adapter.workers_lost_under(client, "labkit-test-") == []
            assert adapter.cancel_reason(client.submit(len, [1])) == ""
        finally:
            # a cancel does not stop a task already running: open the gate, or the task
            # holds its worker's only thread for the tests that share the cluster
            gate.set()


@pytest.mark.parametrize("graph, expected", [({"a": (np.ones, 2)}, False)])
def test_old_style_graphs_are_not_task_specs(graph, expected):
    from labkit.scheduling.dask import dask_adapter as adapter
    assert adapter.is_task_graph(graph) is expected
    assert adapter.is_task_graph(adapter.task_graph(graph))


def test_the_identity_of_a_shut_down_scheduler_is_a_labkit_error():
    # a fit's rank loops ask it when a step fails; under a shutdown() it was
    # "AttributeError: 'NoneType' object has no attribute 'identity'" (issue 44)
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=1) as s:
        client = s.client
        assert adapter.scheduler_identity(client)["workers"]
    with pytest.raises(lk.SchedulerError, match="the scheduler was shut down"):
        adapter.scheduler_identity(client)


def _copies(client, futures):
    """How many workers hold each future's key, read from the scheduler's ``who_has``."""
    return {k: len(v) for k, v in client.who_has(futures).items()}


def test_a_shipped_callable_keeps_a_copy_on_every_worker_through_the_memory_managers_runs(cluster):
    from labkit.scheduling.tasks.callables import TaskCallable

    class Double(TaskCallable):
        def __call__(self, data):
            return 2 * data

    with lk.DaskScheduler(cluster.scheduler_address) as s:
        shipped = s.ship_callable(Double())
        assert str(shipped.key).startswith(adapter.SHIPPED_PREFIX)
        plain = s.client.scatter(np.arange(10), broadcast=True, hash=False)
        assert _copies(s.client, [shipped, plain]) == {shipped.key: 2, plain.key: 2}
        deadline = time.monotonic() + 30
        while _copies(s.client, [plain])[plain.key] > 1:  # Dask drops a plain key's copy
            assert time.monotonic() < deadline, "the memory manager never ran"
            s.client.amm.run_once()
            time.sleep(0.05)
        s.client.amm.run_once()
        assert _copies(s.client, [shipped])[shipped.key] == 2  # labkit's stays everywhere
        s.release_callable(shipped)
