"""Notebook 05 runs end to end: a flow trains on an existing cluster (scheduler and two
workers started as processes) reached by address; labkit leaves the cluster running on
shutdown, and the notebook then stops every process it started."""

import ast
import re
import uuid

import psutil
import pytest

from .run import progress_bars, execute, figure, html_values, text


def _dask_cli_processes(tag: str) -> dict[int, str]:
    """``{pid: command line}`` of running ``python -m distributed.cli.dask_*`` processes
    that this notebook's kernel started: they inherit its ``LABKIT_TEST_NOTEBOOK=tag``.

    The tag, not the time a process started, tells them apart from another test's: a job
    cluster's workers started by a test in the other xdist worker, while this notebook ran,
    were once taken for this notebook's and killed, and that test lost its workers.
    """
    found = {}
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        cmdline = " ".join(p.info["cmdline"] or [])
        if "distributed.cli.dask_" not in cmdline or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if p.environ().get("LABKIT_TEST_NOTEBOOK") == tag:
                found[p.info["pid"]] = cmdline
        except psutil.Error:  # gone meanwhile, or another user's
            continue
    return found


def check_data_parallel(out: str, interface) -> None:
    """The notebook's data-parallel section: two replicas, each on ``interface(worker)``."""
    bound = dict(re.findall(r"replica on (\S+): process group on (.*)", out))
    assert len(bound) == 2, bound
    for worker, used in bound.items():
        assert used.strip() == interface(worker), (worker, used)
    steps = re.search(r"data-parallel steps: (\d+), loss ([0-9.]+) -> ([0-9.]+)", out)
    assert steps, out[-2000:]
    assert int(steps.group(1)) >= 30 and float(steps.group(3)) < 0.8 * float(steps.group(2))


@pytest.mark.timeout(300)
def test_scale_out_notebook(monkeypatch):
    tag = uuid.uuid4().hex
    monkeypatch.setenv("LABKIT_TEST_NOTEBOOK", tag)  # the kernel and what it starts inherit it
    try:
        nb = execute("05-scale-out.ipynb")
    finally:
        leftover = _dask_cli_processes(tag)
        for pid in leftover:  # never leave the cluster behind, even when the notebook failed
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
    assert not leftover, f"cluster processes survived the notebook: {leftover}"
    out = text(nb)
    bars = progress_bars(nb)
    assert bars and all(v == m for v, m in bars), bars  # every phase's bar full

    scheduler_pid = int(figure(nb, "scheduler pid:"))
    worker_pids = ast.literal_eval(re.search(r"worker pids: (\[[0-9, ]+\])", out).group(1))
    assert len(worker_pids) == 2 and scheduler_pid not in worker_pids
    assert figure(nb, "workers connected:") == 2

    assert "run status: finished" in out
    assert figure(nb, "test accuracy:") > 0.9
    ran = ast.literal_eval(re.search(r"workers that ran tasks: (\[.*\])", out).group(1))
    assert sorted(ran) == ["worker-0", "worker-1"], ran
    tasks = ast.literal_eval(re.search(r"tasks per worker: (\{.*\})", out).group(1))
    assert sum(tasks.values()) == 2 * 24 + 4  # PCA and classifier phases, then execute

    check_data_parallel(
        out, lambda worker: "lo 127.0.0.1 (GLOO_SOCKET_IFNAME=lo, chosen by labkit)")

    # labkit's shutdown left the external cluster running ...
    assert "labkit scheduler closed: True" in out
    assert figure(nb, "workers still on the cluster:") == 2
    # ... and the notebook then stopped each process it had started
    for name, pid in [("scheduler", scheduler_pid), ("worker-0", worker_pids[0]),
                      ("worker-1", worker_pids[1])]:
        match = re.search(rf"{name} \(pid {pid}\) exited with code (-?\d+)", out)
        assert match, f"{name} (pid {pid}) not reported stopped:\n{out[-1500:]}"
    assert "all cluster processes stopped: True" in out
    running = _dask_cli_processes(tag)
    assert not {scheduler_pid, *worker_pids} & set(running), running

    # the run showed its live board
    run_cell = next(c for c in nb.cells
                    if c.cell_type == "code" and c.source.rstrip().endswith("\nrun"))
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in run_cell.outputs), run_cell.outputs
