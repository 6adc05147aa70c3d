"""A labkit task's failure reaches its caller once, not also as a worker's log block."""

from __future__ import annotations

import logging

import pytest

import labkit as lk
from tests.helpers import fail_on_two


class Records(logging.Handler):
    """Keeps the records of the logger it is attached to."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)

    def compute_failed(self) -> list[str]:
        return [str(r.args[0]) for r in self.records
                if isinstance(r.msg, str) and r.msg.startswith("Compute Failed")]


@pytest.fixture
def worker_log():
    log, handler = logging.getLogger("distributed.worker"), Records()
    log.addHandler(handler)
    yield handler
    log.removeHandler(handler)


def test_workers_do_not_log_labkit_task_failures_but_log_others(worker_log):
    with lk.DaskScheduler(mode="threads", n_workers=1, threads_per_worker=2) as s:
        for i in range(4):
            s.add_task(i, fail_on_two)
        with pytest.raises(lk.TaskError, match="chunk 2"):
            s.get_results()
        future = s.client.submit(fail_on_two, 2, key="someone-else-1")
        with pytest.raises(Exception):
            future.result(timeout=30)
        del future
    failed = worker_log.compute_failed()
    assert "someone-else-1" in failed                       # other code's tasks still logged
    assert [k for k in failed if k.startswith("labkit-")] == []
