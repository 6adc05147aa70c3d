"""The two tiers of tests: which tests are ``slow``, ``browser`` or ``serial``, said once.

``make check`` runs the tests marked neither ``slow`` nor ``browser`` (a few minutes);
``make test`` runs them all, on pytest-xdist workers, then the ``serial`` ones alone.
The marks are given here at collection (``tests/conftest.py`` calls :func:`mark_tiers`),
by rules rather than by a mark in each file, so that a test moved or added is placed by
what it uses:

- ``browser``: a test whose ``needs`` mark names Chromium or JupyterLab (tests/system.py).
- ``slow``: a test that starts worker processes, another Python or a cluster: it uses a
  fixture of :data:`SLOW_FIXTURES`, or a parameter of :data:`CLUSTER_KINDS` (the
  ``scheduler`` fixture's ``"dask"``, tests/clusters.py's kinds), or its source (or that of
  a function of its module that it calls, or of a fixture it uses) says one of
  :data:`STARTS_PROCESSES`; or its id starts with one of :data:`SLOW_PATHS` (files and
  tests measured heavy on CPU in a run of the whole suite, issue 45); or it is marked
  ``soak`` (the worker-loss and stress tests).  A ``slow`` mark in a file stays.
- ``serial``: a test of :data:`SERIAL_PATHS`: it measures time or load, so it must not
  share the two cores with other tests; ``make test`` runs these after the others, alone.
"""

from __future__ import annotations

import functools
import inspect
import types

import pytest

__all__ = ["BROWSER_TOOLS", "CLUSTER_KINDS", "SERIAL_PATHS", "SLOW_FIXTURES", "SLOW_PATHS",
           "STARTS_PROCESSES", "mark_tiers", "serial_files"]

#: Tools of a ``needs`` mark that make a test a browser test.
BROWSER_TOOLS = frozenset({"chromium", "jupyter"})

#: Fixtures that start worker processes or whole clusters: a test using one is slow.
SLOW_FIXTURES = frozenset({"cluster", "dask_scheduler", "four", "multihost", "make_multihost",
                           "multihost_client"})

#: Parameter values that put a test on a cluster of its own (or on the shared one).
CLUSTER_KINDS = frozenset({"dask", "processes", "address", "gil", "auto"})

#: Words in a test's source (or a module function it calls) that start processes.
STARTS_PROCESSES = ("DaskScheduler(", "LocalCluster(", "scheduler_of(", "subprocess",
                    "Popen(", "multiprocessing", "NetnsCluster(", "chromium(", "jupyter",
                    'mode="processes"', "mode='processes'", "Client(", "sys.executable")

#: Files or folders (relative to the repository root, '/'-separated) whose tests are slow:
#: heavy on CPU without starting a process (measured in an xdist run of the whole suite).
SLOW_PATHS: tuple[str, ...] = (
    "tests/multihost/", "tests/notebooks/", "tests/test_docs.py", "tests/test_demo.py",
    "tests/test_benchmarks.py", "tests/test_bench_views.py", "tests/test_binder.py",
    "tests/ensemble/test_sklearn_checks.py", "tests/ensemble/test_bad_input.py",
    "tests/experiments/test_pbt.py", "tests/experiments/test_search.py",
    "tests/data_parallel/test_bad_input.py::test_fit_over_a_source_that_fails",
    "tests/flows/test_snapshot.py::test_torch_node_round_trips_mid_training",
    "tests/ensemble/test_estimators.py::test_classifier_probabilities_equal_hand_written",
    "tests/ensemble/test_estimators.py::test_sequential_ensemble_mixes_layer_kinds",
    "tests/ensemble/test_estimators.py::test_grid_search_and_cross_val_score_reach",
)

#: Files or test ids (a prefix of the node id) that must run alone (see the module's doc):
#: they assert a balance or a time measured on the machine, which a second worker skews.
#: JupyterLab's tests bound how far a live board lags its kernel, and the warm fit's test the
#: time a fit pays beyond its steps: beside a second worker both failed in a fresh-clone run.
SERIAL_PATHS: tuple[str, ...] = (
    "tests/data_parallel/test_bucket_trainer.py::test_auto_work_load_is_balanced_per_bucket",
    "tests/data_parallel/test_fit_startup.py",
    "tests/views/test_jupyterlab.py",
    "tests/views/test_jupyterlab_cancel.py",
    "tests/notebooks/test_jupyterlab_01.py",
    "tests/notebooks/test_jupyterlab_notebooks.py",
    "tests/notebooks/test_jupyterlab_workers.py",
    "tests/experiments/test_jupyterlab_sweep.py",
    "tests/experiments/test_jupyterlab_sweep_10k.py",
    # groups on workers of 15 s lifetimes progress only while a fresh worker warms up within
    # its life: 40-55 s alone, over 300 s beside two other workers (a fresh-clone run)
    "tests/experiments/test_group_lifetimes.py",
)


def mark_tiers(items: list[pytest.Item]) -> None:
    """Add the ``browser``, ``slow`` and ``serial`` marks to the collected ``items``."""
    for item in items:
        if _is_browser(item):
            item.add_marker(pytest.mark.browser)
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.serial)


def _is_browser(item: pytest.Item) -> bool:
    """Whether a ``needs`` mark of the test names a browser tool."""
    return any(BROWSER_TOOLS.intersection(m.args) for m in item.iter_markers("needs"))


def _is_slow(item: pytest.Item) -> bool:
    """Whether the test starts processes or clusters, lies in a slow path, or is a soak."""
    if item.get_closest_marker("soak") is not None or item.nodeid.startswith(SLOW_PATHS):
        return True
    if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(_is_cluster_kind(v) for v in params.values()):
        return True
    return _starts_processes(item) or _fixture_starts_processes(item)


def _is_cluster_kind(value: object) -> bool:
    """Whether a parameter's value names a cluster ("processes", "dask-client-fed", ...)."""
    return isinstance(value, str) and (value in CLUSTER_KINDS or value.startswith("dask-"))


def _fixture_starts_processes(item: pytest.Item) -> bool:
    """Whether a fixture the test uses (one of its module's, say) starts processes."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's record of the test's fixtures
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        for definition in definitions:
            if definition.params is not None:  # its parameters decide (_is_cluster_kind)
                continue
            if any(word in _source(definition.func) for word in STARTS_PROCESSES):
                return True
    return False


def _starts_processes(item: pytest.Item) -> bool:
    """Whether the test function's source, or a module function it names, starts processes."""
    function = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if function is None or module is None:  # a doctest, a docs page: no process of its own
        return False
    source = _source(function)
    if any(word in source for word in STARTS_PROCESSES):
        return True
    return any(name in source for name in _starters(module))


@functools.cache
def _starters(module: types.ModuleType) -> frozenset[str]:
    """Names of the module's own functions and classes whose source starts processes."""
    found = set()
    for name, value in vars(module).items():
        own = getattr(value, "__module__", None) == module.__name__
        if not own or not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        if any(word in _source(value) for word in STARTS_PROCESSES):
            found.add(name + "(")
    return frozenset(found)


@functools.cache  # a parametrized test, a shared fixture: the same function read once
def _source(obj: object) -> str:
    """The source of ``obj`` ("" where it has none to read)."""
    try:
        return inspect.getsource(obj)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return ""


def serial_files() -> list[str]:
    """The files of :data:`SERIAL_PATHS`, once each: what ``make test``'s serial pass collects."""
    return list(dict.fromkeys(path.split("::")[0] for path in SERIAL_PATHS))


if __name__ == "__main__":  # `python -m tests.tiers`: the serial pass's files, for the Makefile
    print(" ".join(serial_files()))
