"""The embedded cluster's modes: threads by reference, GIL-holding work in processes; worker
processes refused from a script's unguarded top level."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import psutil
import pytest

import labkit as lk
from labkit.scheduling.workers.blas import blas_controller, one_blas_thread
from labkit.scheduling.dask.cluster import cluster_size, resolve_mode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PurePythonSum(lk.Node):
    """A node whose training is a Python loop (holds the GIL); records the process it ran in."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.total = 0.0
        self.pids = set()

    def _train(self, x):
        total = 0.0
        for v in x.ravel().tolist():
            total += v * v
        self.total += total
        self.pids.add(os.getpid())

    def _stop_training(self):
        pass

    def _execute(self, x):
        return x

    def _fork(self):
        return PurePythonSum()

    def _join(self, forked):
        self.total += forked.total
        self.pids |= forked.pids


def buffer_address(x):
    return x.__array_interface__["data"][0]


def exit_process(x):
    os._exit(3)


def test_modes_and_sizes_resolve():
    assert resolve_mode("auto", None) == "auto"
    assert resolve_mode("auto", False) == "threads"
    assert resolve_mode("processes", True) == "processes"
    assert cluster_size("threads", None, None, n_cores=2) == (1, 2)
    assert cluster_size("auto", 2, None, n_cores=2) == (2, 1)
    assert cluster_size("processes", None, None, n_cores=2) == (2, 1)
    with pytest.raises(lk.InputError, match="mode must be one of"):
        resolve_mode("fast", None)
    with pytest.raises(lk.InputError, match="contradicts"):
        resolve_mode("threads", True)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(lk.InputError, match="positive int"):
            cluster_size("auto", bad, None)
        with pytest.raises(lk.InputError, match="positive int"):
            cluster_size("processes", None, bad)


def test_bad_mode_is_refused_before_any_cluster_starts():
    with pytest.raises(lk.InputError, match="mode must be"):
        lk.DaskScheduler(mode="gpu")
    with pytest.raises(lk.InputError, match="n_workers must be a positive int"):
        lk.DaskScheduler(n_workers=0)


def test_default_runs_numpy_work_on_threads_with_chunks_by_reference():
    x = np.random.default_rng(0).normal(size=(2000, 30))
    with lk.DaskScheduler() as s:
        assert s.mode == "auto" and s.in_process
        assert s.client.scheduler_info()["address"].startswith("inproc://")
        # nothing listens beyond loopback, and the dashboard link is where it listens
        listening = {(c.laddr.ip, c.laddr.port) for c in psutil.Process().net_connections("inet")
                     if c.status == psutil.CONN_LISTEN}
        assert listening and {ip for ip, _ in listening} == {"127.0.0.1"}
        port = int(s.dashboard_link.split(":")[2].split("/")[0])
        assert s.dashboard_link.startswith("http://127.0.0.1:") and ("127.0.0.1", port) in listening
        # zero bytes copied: the task sees the client's own buffer
        s.add_task(x, buffer_address)
        assert s.get_results() == [buffer_address(x)]
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=4)])
        flow.train([np.array_split(x, 6)], scheduler=s)
        assert not s.offload_pool.started          # built-in nodes never need processes
    serial = lk.Flow([lk.nodes.PCA(output_dim=4)])
    serial.train([np.array_split(x, 6)])
    np.testing.assert_allclose(flow[0].d, serial[0].d, rtol=1e-10)


def test_processes_false_starts_a_threaded_cluster():
    with lk.DaskScheduler(processes=False, n_workers=1, threads_per_worker=2) as s:
        assert s.mode == "threads" and s.offload_pool is None
        assert list(s.client.nthreads().values()) == [2]
        s.add_task(3, lambda v: v * v)
        assert s.get_results() == [9]


def test_gil_holding_nodes_train_in_offload_processes_and_equal_serial():
    chunks = np.array_split(np.random.default_rng(1).normal(size=(3000, 10)), 6)
    serial = lk.Flow([PurePythonSum()])
    serial.train([chunks])
    with lk.DaskScheduler() as s:
        flow = lk.ParallelFlow([PurePythonSum()])
        flow.train([chunks], scheduler=s)
        pool_pids = set(s.offload_pool.pids())
        assert flow[0].pids and flow[0].pids <= pool_pids
        assert os.getpid() not in flow[0].pids
    assert flow[0].total == pytest.approx(serial[0].total, rel=1e-12)
    for pid in pool_pids:                           # shut down with the scheduler
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_threads_mode_keeps_gil_holding_nodes_on_threads():
    chunks = np.array_split(np.ones((400, 3)), 4)
    with lk.DaskScheduler(mode="threads") as s:
        flow = lk.ParallelFlow([PurePythonSum()])
        flow.train([chunks], scheduler=s)
    assert flow[0].pids == {os.getpid()} and flow[0].total == 1200.0


def test_a_task_that_kills_its_offload_process_raises_worker_lost_and_the_next_runs():
    with lk.DaskScheduler() as s:
        s.add_task(1, lk.FunctionCallable(exit_process, holds_gil=True))
        with pytest.raises(lk.WorkerLostError, match="worker lost") as caught:
            s.get_results()
        assert caught.value.where["chunk"] == 0
        assert s.n_open_tasks == 0
        s.add_task(np.ones(4), lk.FunctionCallable(np.sum,
                                                    holds_gil=True))
        assert s.get_results() == [4.0]


def test_offloaded_errors_keep_their_place_and_remote_traceback():
    def boom(x):
        raise ValueError("bad chunk value")
    with lk.DaskScheduler() as s:
        s.add_task(1, lk.FunctionCallable(boom, holds_gil=True))
        with pytest.raises(lk.TaskError, match="bad chunk value") as caught:
            s.get_results()
    assert "boom" in caught.value.remote_traceback
    assert caught.value.where["chunk"] == 0


def test_the_blas_limit_is_counted_and_restored():
    libs = [lib for lib in blas_controller().lib_controllers if lib.user_api == "blas"]
    before = [lib.num_threads for lib in libs]
    with one_blas_thread():
        with one_blas_thread():
            assert all(lib.num_threads == 1 for lib in libs)
        assert all(lib.num_threads == 1 for lib in libs)   # the outer holder still runs
    assert [lib.num_threads for lib in libs] == before


def test_the_dask_replica_group_refuses_a_threaded_scheduler_clearly():
    """The trainer trains there on thread replicas (issue 38); the Dask group itself refuses."""
    import torch
    from labkit.data_parallel.dask.group import DaskReplicaGroup
    model = torch.nn.Linear(3, 1)
    with lk.DaskScheduler(mode="threads") as s:
        with pytest.raises(lk.InputError, match="need worker processes"):
            DaskReplicaGroup(model, torch.nn.MSELoss(),
                             torch.optim.SGD(model.parameters(), lr=0.1), s)
        with lk.DataParallelTrainer(model, torch.nn.MSELoss(),
                                    torch.optim.SGD(model.parameters(), lr=0.1),
                                    scheduler=s) as t:
            assert t.step(torch.randn(4, 3), torch.randn(4, 1)) >= 0


def test_in_process_training_keeps_no_chunk_alive_afterwards():
    """Dask's message logs once held every chunk submitted in-process (1.2 GB a training)."""
    import gc
    import time
    import weakref
    refs = []

    def chunks():
        for i in range(8):
            x = np.random.default_rng(i).normal(size=(500, 8))
            refs.append(weakref.ref(x))
            yield x
    with lk.DaskScheduler() as s:
        lk.ParallelFlow([lk.nodes.PCA(output_dim=2)]).train([chunks()], scheduler=s)
        deadline = time.monotonic() + 10
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.1)
        assert len(refs) == 8 and all(r() is None for r in refs)


def test_lazy_dask_blocks_are_computed_inside_their_training_task():
    import dask
    import dask.array as da
    blocks = [da.from_delayed(dask.delayed(np.full, pure=False)((50, 4), float(i)) +
                              np.arange(4.0), shape=(50, 4), dtype=float) for i in range(4)]
    arr = da.concatenate(blocks, axis=0) * da.from_array(np.linspace(1, 2, 200)[:, None])
    serial = lk.Flow([lk.nodes.PCA(output_dim=2)])
    serial.train([arr.compute()])
    with lk.DaskScheduler() as s:
        from distributed.diagnostics.plugin import SchedulerPlugin

        class Keys(SchedulerPlugin):
            """Every key the Dask scheduler moved (the in-process scheduler: read directly)."""
            seen: set = set()

            def transition(self, key, start, finish, *args, **kwargs):
                self.seen.add(str(key))
        s.cluster.scheduler.add_plugin(Keys())
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        flow.train([arr], scheduler=s)
        keys = sorted(Keys.seen)
        # one task per chunk: the blocks never ran as tasks of their own
        assert not [k for k in keys if "from-value" in k or "concatenate" in k], keys
        assert len([k for k in keys if k.startswith("labkit-train")]) == 4  # 200 rows, 50 a block
        persisted = lk.ParallelFlow([lk.nodes.PCA(output_dim=2)])
        persisted.train([arr.persist()], scheduler=s)     # blocks on the cluster: used there
    for trained in (flow, persisted):
        np.testing.assert_allclose(trained[0].d, serial[0].d, rtol=1e-10)


def sum_of_tuple(chunk):
    x, y = chunk
    return float(x.sum()), float(y.sum()), x.flags.writeable


def test_offloaded_chunks_travel_through_shared_memory_and_leave_none_behind():
    import glob

    from labkit.scheduling.workers.shared import segment_prefix
    ours = f"/dev/shm/{segment_prefix()}*"   # another run's segments come and go meanwhile
    before = set(glob.glob(ours))
    x = np.arange(200_000, dtype=float).reshape(-1, 4)       # 1.6 MB: shared, not pickled
    y = np.ones(3)                                           # small: through the pipe
    with lk.DaskScheduler() as s:
        s.add_task((x, y), lk.FunctionCallable(sum_of_tuple, holds_gil=True))
        assert s.get_results() == [(float(x.sum()), 3.0, True)]
        assert s.offload_pool.started
    assert set(glob.glob(ours)) <= before


def _segments_of_this_process():
    """The shared-memory segments this process has mapped (other runs on the machine make
    segments of their own: /dev/shm as a whole is no measure)."""
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if "/dev/shm/lk_" in line}


def test_offloaded_chunks_reuse_their_segments():
    y = np.ones(3)
    before = _segments_of_this_process()
    seen = set()
    with lk.DaskScheduler() as s:
        for value in (1.0, 2.0, 3.0):
            x = np.full((50_000, 4), value)
            s.add_task((x, y), lk.FunctionCallable(sum_of_tuple, holds_gil=True))
            assert s.get_results() == [(float(x.sum()), 3.0, True)]
            seen |= _segments_of_this_process() - before
        assert s.offload_pool._shared.free_bytes >= x.nbytes
    assert len(seen) == 1, "each chunk got a fresh segment"
    assert not any(os.path.exists(path) for path in seen)  # removed at the shutdown
    assert not (_segments_of_this_process() - before)


def test_schedulers_on_thread_workers_hold_one_blas_thread_for_their_life():
    libs = [lib for lib in blas_controller().lib_controllers if lib.user_api == "blas"]
    before = [lib.num_threads for lib in libs]
    with lk.DaskScheduler(mode="threads") as s:
        assert all(lib.num_threads == 1 for lib in libs)
        with lk.DaskScheduler(client=s.client) as other:    # someone else's in-process cluster
            assert other.in_process and other.mode == "existing"
        assert all(lib.num_threads == 1 for lib in libs)  # the first still holds it
    assert [lib.num_threads for lib in libs] == before


_UNGUARDED = '''
import labkit as lk

s = lk.DaskScheduler(mode="processes", n_workers=2)
print("started")
s.shutdown()
'''

_GUARDED = '''
import labkit as lk


def main():
    with lk.DaskScheduler(mode="processes", n_workers=1) as s:
        print("started", len(s.client.nthreads()))


if __name__ == "__main__":
    main()
'''


def _run_script(path, text: str):
    """Run ``text`` as the script ``path`` in a Python of its own; its completed process."""
    path.write_text(text)
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=path.parent)


def test_a_processes_cluster_started_from_a_scripts_unguarded_top_level_is_one_clear_error(
        tmp_path):
    done = _run_script(tmp_path / "unguarded.py", _UNGUARDED)
    assert done.returncode == 1 and "started" not in done.stdout
    # one labkit error naming the script's line and the fix; no process was started
    errors = [line for line in done.stderr.splitlines()
              if re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", line)]
    assert errors == [errors[0]] and errors[0].startswith("labkit.errors.SchedulerError: "), \
        done.stderr
    assert "unguarded.py (line 4)" in errors[0] and 'if __name__ == "__main__":' in errors[0]
    assert "bootstrapping phase" not in done.stderr and "Nanny failed" not in done.stderr
    # the same work under the guard (in a function called from it) runs
    done = _run_script(tmp_path / "guarded.py", _GUARDED)
    assert done.returncode == 0 and done.stdout.strip() == "started 1", done.stderr
