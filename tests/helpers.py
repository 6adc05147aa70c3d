"""Functions and callables the tests ship to Dask workers (importable there), and
:func:`until`, the tests' one bounded wait for a condition."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import numpy as np

import labkit as lk
from labkit.nodes.pca import PCA


def double(x):
    return x * 2


def sleep_then_return(x):
    """Later tasks finish first: task ``x`` sleeps ``(5 - x) * 30`` ms."""
    time.sleep(0.03 * max(0, 5 - x))
    return x


def fail_on_two(x):
    if x == 2:
        raise ZeroDivisionError("chunk two is bad")
    return x


def worker_pid(_):
    return os.getpid()


class CountingCallable(lk.TaskCallable):
    """Counts how often it is pickled on the client (class-level counter)."""

    pickled = 0

    def __init__(self, payload_rows=1000):
        self.payload = np.ones((payload_rows, 100))

    def __getstate__(self):
        type(self).pickled += 1
        return self.__dict__

    def __call__(self, data):
        return float(self.payload[0, 0] + data)


class EnvCallable(lk.TaskCallable):
    """Records, per process, how many times setup_environment ran."""

    def setup_environment(self):
        os.environ["LABKIT_TEST_ENV_SETUPS"] = str(int(os.environ.get("LABKIT_TEST_ENV_SETUPS",
                                                                       "0")) + 1)

    def __call__(self, data):
        return os.getpid(), int(os.environ["LABKIT_TEST_ENV_SETUPS"])


class SleepyIdentity(lk.Node):
    """Untrainable node whose execute sleeps by its first value: finishes out of order."""

    def _execute(self, x):
        time.sleep(float(x[0, 0]))
        return x


class FussyPCA(PCA):
    """A PCA that raises a plain ValueError on a chunk whose first value is 999."""

    def _train(self, x, *args):
        if x[0, 0] == 999:
            raise ValueError("999 is not a sample")
        super()._train(x, *args)


class FaultyPCA(PCA):
    """A PCA whose hook named ``fails_in`` (``"_train"``, ``"_join"``...) raises a ValueError.

    ``fails_in = None`` makes it a plain PCA again; forks keep the setting.
    """

    def __init__(self, fails_in=None, **kw):
        super().__init__(**kw)
        self.fails_in = fails_in

    def _fail(self, hook):
        if self.fails_in == hook:
            raise ValueError(f"{hook} went wrong")

    def _train(self, x):
        self._fail("_train")
        super()._train(x)

    def _stop_training(self):
        self._fail("_stop_training")
        super()._stop_training()

    def _fork(self):
        self._fail("_fork")
        forked = super()._fork()
        forked.fails_in = self.fails_in
        return forked

    def _join(self, forked):
        self._fail("_join")
        super()._join(forked)

    def _execute(self, x):
        self._fail("_execute")
        return super()._execute(x)


class SlowPCA(PCA):
    """A PCA whose chunks take ``delay`` seconds each (for fault and cancel tests)."""

    def __init__(self, delay=0.2, **kw):
        super().__init__(**kw)
        self.delay = delay

    def _fork(self):
        forked = super()._fork()
        forked.delay = self.delay
        return forked

    def _train(self, x, *args):
        time.sleep(self.delay)
        super()._train(x, *args)


def assert_nodes_equal(a, b, rtol=1e-8):
    """Every numeric array attribute of two trained nodes agrees within ``rtol``."""
    for key, value in vars(a).items():
        if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
            other = vars(b)[key]
            scale = max(np.abs(value).max(initial=0), 1e-300)
            assert np.abs(value - other).max(initial=0) <= rtol * scale, key


class DecodeImages(lk.FlowTrainCallable):
    """Decodes uint8 image chunks to float64 on the worker."""

    def transform(self, chunk):
        return chunk.astype(np.float64) / 255


class RowCounter(lk.Node):
    """Untrainable node that learns during execute: counts rows and sums them."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.rows, self.total = 0, 0.0

    def use_execute_fork(self):
        return True

    def _execute(self, x):
        self.rows += x.shape[0]
        self.total += float(x.sum())
        return x

    def _fork(self):
        return RowCounter()

    def _join(self, forked):
        self.rows += forked.rows
        self.total += forked.total


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``port`` again (a closed connection's TIME_WAIT aside)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as servers bind
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class PythonMoments(lk.Node):
    """Column sums in a Python loop: a node that holds the GIL (``holds_gil`` default)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.total = None

    def _train(self, x):
        sums = [0.0] * x.shape[1]
        for row in x.tolist():
            for j, value in enumerate(row):
                sums[j] += value
        self.total = np.array(sums) if self.total is None else self.total + np.array(sums)

    def _stop_training(self):
        self.mean = self.total / self.samples_seen

    def _execute(self, x):
        return x - self.mean

    def _fork(self):
        return PythonMoments()

    def _join(self, forked):
        if forked.total is not None:
            self.total = forked.total if self.total is None else self.total + forked.total


class StartCounter:
    """A subscriber that passes every event to ``recorder`` and counts task starts.

    ``wait(n)`` returns once ``n`` tasks have started (a test then kills a worker).
    """

    def __init__(self, recorder):
        from labkit.events import TaskStarted
        self._recorder, self._kind = recorder, TaskStarted
        self._started = threading.Semaphore(0)

    def __call__(self, event):
        self._recorder(event)
        if isinstance(event, self._kind):
            self._started.release()

    def wait(self, n: int, timeout: float = 60) -> None:
        """Block until ``n`` more tasks started; fail the test after ``timeout`` s each."""
        for _ in range(n):
            assert self._started.acquire(timeout=timeout), "no task started in time"


class SlowMoments(PythonMoments):
    """:class:`PythonMoments` that sleeps ``delay`` seconds a chunk (for worker-loss tests)."""

    def __init__(self, delay=0.05, **kw):
        super().__init__(**kw)
        self.delay = delay

    def _fork(self):
        return SlowMoments(self.delay)

    def _train(self, x):
        time.sleep(self.delay)
        super()._train(x)


class LogRecords(logging.Handler):
    """Keeps the messages of one logger while the block runs (at ``level``, if given, then
    the logger's own level put back)."""

    def __init__(self, name: str, level: int | None = None):
        super().__init__(logging.DEBUG)
        self.logger, self.messages, self.level_in = logging.getLogger(name), [], level

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        self.logger.addHandler(self)
        self.level_before = self.logger.level
        if self.level_in is not None:
            self.logger.setLevel(self.level_in)
        return self

    def __exit__(self, *exc):
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level_before)


def own_client(address: str):
    """A user's own ``distributed.Client`` of the scheduler at ``address``.

    labkit's ``LabkitClient`` (a ``distributed.Client``): a test connecting
    right after another's shutdown may have its handshake crossed by that
    cancel, told to every client, which fails Dask's own client.
    """
    from labkit.scheduling.dask.connect import connect
    return connect(address)


def until(condition, timeout: float = 30.0, what: str = "the condition", every: float = 0.05):
    """Wait, at most ``timeout`` seconds, for ``condition()`` to be truthy; its value.

    Runs out with an ``AssertionError`` naming ``what``; ``condition`` is looked at
    every ``every`` seconds (more seldom where a look asks a scheduler or a job queue).
    """
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)
    return value
