"""Notebook 05 runs end to end: a flow trains on an existing cluster (scheduler and two
workers started as processes) reached by address; labkit leaves the cluster running on
shutdown, and the notebook then stops every process it started."""

import ast
import os
import re
import sys

import psutil
import pytest

from .run import progress_bars, execute, figure, html_values, text


def _dask_cli_processes() -> dict[int, str]:
    """``{pid: command line}`` of running ``python -m distributed.cli.dask_*`` processes of
    this environment's Python (another checkout's test run beside this one has its own)."""
    found = {}
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        argv = p.info["cmdline"] or []
        cmdline = " ".join(argv)
        ours = bool(argv) and os.path.abspath(argv[0]).startswith(sys.prefix + os.sep)
        if ours and "distributed.cli.dask_" in cmdline and p.info["status"] != psutil.STATUS_ZOMBIE:
            found[p.info["pid"]] = cmdline
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
def test_scale_out_notebook():
    before = _dask_cli_processes()
    try:
        nb = execute("05-scale-out.ipynb")
    finally:
        leftover = {pid: c for pid, c in _dask_cli_processes().items() if pid not in before}
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
    running = _dask_cli_processes()
    assert not {scheduler_pid, *worker_pids} & set(running), running

    # the run showed its live board
    run_cell = next(c for c in nb.cells
                    if c.cell_type == "code" and c.source.rstrip().endswith("\nrun"))
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for o in run_cell.outputs), run_cell.outputs
