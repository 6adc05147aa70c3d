"""Fixtures: a real in-process Dask cluster, schedulers on it, an event recorder.

Worker processes must import the helpers that tests ship to them, so the
repository root goes on ``PYTHONPATH`` before any cluster starts; Dask's
scratch space goes into a temporary folder removed at the end, and so does the
session's temporary root (``tmp_path``): a ``labkit-pytest-*`` folder of its own,
which no other pytest run on the machine can remove.  The session fails if it
leaves a child process behind.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SCRATCH = tempfile.mkdtemp(prefix="labkit-tests-dask-")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [ROOT, os.environ.get("PYTHONPATH")] if p)
os.environ["DASK_TEMPORARY_DIRECTORY"] = _SCRATCH
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__DAEMON", "False")
# The suite's clusters train torch on worker processes again and again: each worker forked
# from the fork server starts with torch loaded rather than importing it (about 2 s of CPU
# a worker, issue 45).  Set before any cluster starts: the server is this process's.
os.environ.setdefault("LABKIT_WORKER_PRELOAD", "torch")
# Dask's own watchers, which no test reads, off or slowed in every process of the suite
# (worker processes and notebooks' kernels inherit this environment): the statistical
# profiler samples every thread's stack each 10 ms, the tick watch wakes the event loop
# each 20 ms, the system monitor each 0.5 s, and the nannies' and workers' memory watch
# each 0.1 s (it stops a worker over its limit: no test sets one it reaches).  An idle
# cluster of two worker processes takes a tenth of a core with Dask's defaults and a
# fiftieth with these (benchmarks/bench_idle_cluster.py, issue 45).
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED", "False")
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL", "1s")
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL", "2s")
os.environ.setdefault("DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL", "500ms")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import dask  # noqa: E402  (after the environment above is set)

dask.config.set({"temporary-directory": _SCRATCH,
                 "distributed.scheduler.worker-ttl": None,
                 "distributed.admin.tick.limit": "30s"})


class EventRecorder:
    """Collects events from a scheduler or run (thread-safe)."""

    def __init__(self):
        self.events = []
        self._lock = threading.Lock()

    def __call__(self, event):
        with self._lock:
            self.events.append(event)

    def of(self, *kinds):
        """Events of the given classes, in arrival order."""
        with self._lock:
            return [e for e in self.events if isinstance(e, kinds)]

    def names(self):
        with self._lock:
            return [type(e).__name__ for e in self.events]


@pytest.fixture
def recorder():
    return EventRecorder()


@pytest.fixture(scope="session", autouse=True)
def _fork_server_workers():
    """The clusters of worker processes the tests make themselves fork their workers from
    the fork server, as labkit's embedded clusters do (labkit/scheduling/dask/worker_start.py).

    Dask spawns them by default: each worker a new interpreter importing Dask, NumPy and
    then torch, about 1-2 s of CPU, and the suite starts hundreds (issue 45).  A cluster
    that asks for spawn (``start_method="spawn"``) still gets it.  (Every test uses this
    fixture: its source names nothing of tests/tiers.py's STARTS_PROCESSES, or every test
    would be marked slow.)
    """
    from labkit.scheduling.dask.worker_start import worker_start
    with worker_start("forkserver"):
        yield


@pytest.fixture(scope="session")
def cluster():
    """A LocalCluster with 2 single-threaded worker processes on 127.0.0.1."""
    from distributed import LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as c:
        yield c


@pytest.fixture
def dask_scheduler(cluster):
    """A DaskScheduler with its own client on the shared cluster."""
    import labkit as lk
    with lk.DaskScheduler(cluster.scheduler_address) as s:
        yield s


@pytest.fixture(scope="module")
def browser():
    """One Chromium for a test module's pages; each page opens in a browser context of its
    own (``browser.new_page``), and Chromium starts once a module, not once a test."""
    from tests.browser import chromium
    with chromium() as launched:
        yield launched


@pytest.fixture
def local_scheduler():
    import labkit as lk
    with lk.LocalScheduler() as s:
        yield s


@pytest.fixture(scope="session")
def lab():
    """``(url, token, root_dir)`` of one throw-away JupyterLab for the session's notebook
    tests; each takes it through ``tests.views.jupyterlab.lab_for_a_test``, which gives it
    clean (no kernel, workspace or file left by the test before)."""
    from tests.views.jupyterlab import jupyter_lab
    with jupyter_lab() as served:
        yield served


@pytest.fixture(params=["local", "dask"])
def scheduler(request):
    """Each test that takes it runs on both schedulers."""
    import labkit as lk
    if request.param == "local":
        with lk.LocalScheduler() as s:
            yield s
    else:
        cluster = request.getfixturevalue("cluster")
        with lk.DaskScheduler(cluster.scheduler_address) as s:
            yield s


#: The temporary root this session made for itself (``None`` when one was given).
_OWN_BASETEMP: list[str] = []

#: The lock a session running the serial tests holds (tests/machine_turns.py).
_TURN: list = []


@pytest.hookimpl(tryfirst=True)   # before pytest's tmpdir plugin reads the option
def pytest_configure(config):
    """Give the session a temporary root of its own, then declare the ``needs`` mark; a
    session of the serial tests waits for another run's to end (tests/machine_turns.py).

    pytest's default root (``pytest-of-<user>`` in the system's temp folder) keeps only
    the three newest runs, so a second pytest run on the machine can remove this run's
    folders while its tests use them.  A fresh ``labkit-pytest-*`` folder, removed at the
    end, is this run's alone.  A ``--basetemp`` given is kept as it is, and so is an
    xdist worker's (its controller derives it from the controller's own root).
    """
    if config.option.basetemp is None and not hasattr(config, "workerinput"):
        _remove_roots_of_ended_runs()
        config.option.basetemp = tempfile.mkdtemp(prefix=f"labkit-pytest-{os.getpid()}-")
        _OWN_BASETEMP.append(config.option.basetemp)
    from tests.ordering import start_recording
    start_recording(config)
    config.addinivalue_line("markers", "needs(*tools): system tools the test needs "
                            "(tests/system.py); skipped where missing, failed in CI")
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_XdistController(), "labkit-xdist-controller")
    from tests.machine_turns import runs_serial_tests, take_turn
    if runs_serial_tests(config.option.markexpr or "") and not hasattr(config, "workerinput"):
        _TURN.append(take_turn(lambda words: print(f"labkit tests: {words}", flush=True)))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(config, items):
    """Mark each test ``slow``, ``browser`` or ``serial`` by the rules of tests/tiers.py;
    order the files longest first (tests/ordering.py)."""
    from tests.ordering import longest_first
    from tests.tiers import mark_tiers
    mark_tiers(items)
    longest_first(items)


def pytest_runtest_logreport(report):
    """Note the seconds of a test's phase, where a run is recorded (tests/ordering.py)."""
    from tests.ordering import record_report
    record_report(report)


def pytest_runtest_setup(item):
    """Skip (or, in CI, fail) a test whose ``needs`` mark names a tool this machine lacks."""
    from tests.system import check_marks
    check_marks(item)


def pytest_terminal_summary(terminalreporter):
    """Say once which system tools were missing, and how to install them."""
    from tests.system import MISSING_SEEN
    if MISSING_SEEN:
        terminalreporter.write_sep("-", "system tools missing here (their tests were skipped)")
        for name, install in sorted(MISSING_SEEN.items()):
            terminalreporter.write_line(f"{name}: {install}")


def _children():
    """Live child processes, except multiprocessing's resource tracker and fork server.

    Both are started by the standard library on first use (the fork server by an
    embedded cluster's first worker process: labkit/scheduling/dask/worker_start.py)
    and exit when this process exits (each waits on a pipe from us), so neither is a
    leak.  The fork server's children, the workers, are still counted.
    """
    import psutil
    found = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
            ours = "resource_tracker" in cmd or "multiprocessing.forkserver" in cmd
            if proc.status() != psutil.STATUS_ZOMBIE and not ours:
                found[proc.pid] = cmd
        except psutil.NoSuchProcess:
            pass
    return found


#: Processes the xdist workers reported left behind (read by the controller at its end).
_LEFT_BY_WORKERS: dict[str, str] = {}


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session, exitstatus):
    """Fail the session if a child process was left behind; remove the scratch folder.

    An xdist worker checks its own children and hands what it found to the controller
    (before xdist's own wrapper reports the worker's end); the controller checks after
    xdist has stopped its workers, which are its children until then.
    """
    worker = hasattr(session.config, "workerinput")
    if worker:
        session.config.workeroutput["labkit_left"] = _left_behind()
    result = yield
    if not worker:
        left = {**_LEFT_BY_WORKERS, **_left_behind()}
        if left:
            print(f"\nlabkit tests left processes behind: {left}", file=sys.stderr)
            session.exitstatus = 1
    return result


def _left_behind() -> dict[str, str]:
    """This process's children still alive after up to 10 s; removes the scratch folder."""
    import time
    deadline = time.time() + 10
    left = _children()
    while left and time.time() < deadline:  # processes being closed need a moment to exit
        time.sleep(0.2)
        left = _children()
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    return {str(pid): cmd for pid, cmd in left.items()}


class _XdistController:
    """Hooks of the xdist controller (registered only where pytest-xdist is installed)."""

    @staticmethod
    def pytest_testnodedown(node, error):
        """Keep what a worker left behind, to fail the session at its end."""
        output = getattr(node, "workeroutput", None) or {}
        _LEFT_BY_WORKERS.update(output.get("labkit_left", {}))


def _remove_roots_of_ended_runs():
    """Remove the roots that runs killed before their end left (their process is gone).

    A root names its run's pid; a live process's root is never touched (nor one whose
    pid was taken again since: it stays, which is the safe side).
    """
    import glob

    import psutil
    for root in glob.glob(os.path.join(tempfile.gettempdir(), "labkit-pytest-*-*")):
        pid = os.path.basename(root).split("-")[2]
        if pid.isdigit() and not psutil.pid_exists(int(pid)):
            shutil.rmtree(root, ignore_errors=True)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Remove the temporary root this session made for itself (see pytest_configure); let
    the serial tests of another run take their turn."""
    while _OWN_BASETEMP:
        shutil.rmtree(_OWN_BASETEMP.pop(), ignore_errors=True)
    while _TURN:
        _TURN.pop().close()  # the next run's serial tests may start
