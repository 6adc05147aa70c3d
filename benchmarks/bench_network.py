"""labkit across hosts over shaped links: time and bytes moved per chunk and per step.

Run ``python benchmarks/bench_network.py`` as root (full size, about five
minutes on 2 cores) or ``--quick``.  It builds the multi-host cluster of the
tests (``tests/multihost/netns.py``: a scheduler host and two worker hosts,
each a network namespace on one bridge, the client in this process's
namespace) and shapes every host's link alike (``tests/multihost/shaping.py``:
``tbf`` for the rate, an NFQUEUE delayer for the latency, as this kernel has no
``netem``): unshaped, then 1 Gbit/s and 0.5 ms each way, then 100 Mbit/s and
5 ms.  On each network it runs, alternating, with medians:

* the core PCA flow on chunks **from the client** (scattered straight to a
  worker), on **small client chunks** both scattered (labkit's default on
  other hosts, from 64 KiB) and inside the task graph (through the scheduler:
  the default on one machine, below 1 MiB), and on chunks **generated on the workers** (a Dask
  array), the last with the forks joined **on the workers** (the default) and
  **on the client** (one fork a chunk comes back);
* the Dask trainer (one replica per worker host, gloo across the hosts) for a
  few steps, beside the same steps of a plain torch loop in this process.

Bytes come from the bridge's port counters: what the client sent and
received, and what crossed between the worker hosts (the gradient
reduction), divided by chunks or steps; the scheduler column is what its
host sent and received.  Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZES = {
    "full": dict(n_chunks=16, rows=2000, dim=400, small_rows=300, reps=3,
                 batch=1024, hidden=512, steps=8),
    "quick": dict(n_chunks=4, rows=400, dim=40, small_rows=100, reps=1,
                  batch=128, hidden=32, steps=2),
}
NETWORKS = [("unshaped", None, None), ("1 Gbit/s, 0.5 ms", 1e9, 0.0005),
            ("100 Mbit/s, 5 ms", 1e8, 0.005)]
SEED = 7


# -- traffic ---------------------------------------------------------------------------------

class Traffic:
    """Bytes through the bridge's ports, and counted between the worker hosts.

    The bridge's port of a host receives what the host sends and sends what it
    receives.  Traffic from one worker host to another is counted by an
    iptables rule in the sender's namespace (no target: it only counts).
    """

    def __init__(self, cluster):
        self.cluster = cluster
        self.ports = {"client": "root", **{f"host{h}": f"h{h}" for h in cluster.hosts}}
        self.workers = [h for h in cluster.hosts if h]
        for h in self.workers:
            for peer in self.workers:
                if peer != h:
                    self._iptables(h, "-A", "OUTPUT", "-d", f"{cluster.address(peer)}/32",
                                   "-m", "comment", "--comment", "labkit-bench")

    def _iptables(self, host, *args) -> str:
        return subprocess.run(["ip", "netns", "exec", self.cluster.namespace(host),
                               "iptables-legacy", "-w", *args], capture_output=True, text=True,
                              check=True).stdout

    def _among_workers(self) -> int:
        total = 0
        for h in self.workers:
            for line in self._iptables(h, "-L", "OUTPUT", "-v", "-x", "-n").splitlines():
                if "labkit-bench" in line:
                    total += int(line.split()[1])
        return total

    def read(self) -> dict[str, tuple[int, int]]:
        """``{name: (sent, received)}`` by each end, and ``workers``: (sent to each other, 0)."""
        out = subprocess.run(["ip", "-s", "-j", "-n", self.cluster.switch_ns, "link", "show"],
                             capture_output=True, text=True, check=True).stdout
        stats = {link["ifname"]: link["stats64"] for link in json.loads(out)}
        counts = {name: (stats[port]["rx"]["bytes"], stats[port]["tx"]["bytes"])
                  for name, port in self.ports.items()}
        counts["workers"] = (self._among_workers(), 0)
        return counts

    def between(self, before, after) -> dict[str, float]:
        """Bytes client -> cluster, cluster -> client, between the workers, at the scheduler."""
        d = {k: (after[k][0] - before[k][0], after[k][1] - before[k][1]) for k in after}
        return {"client_out": d["client"][0], "client_in": d["client"][1],
                "workers": d["workers"][0], "scheduler": d["host0"][0] + d["host0"][1]}


# -- the flow --------------------------------------------------------------------------------

def make_chunk(i: int, rows: int, dim: int) -> np.ndarray:
    """Chunk ``i``: seeded normal data with a graded spectrum."""
    x = np.random.default_rng(SEED + i).standard_normal((rows, dim))
    return x * np.linspace(0.5, 2.0, dim)


def worker_array(cfg):
    import dask
    import dask.array as da
    blocks = [da.from_delayed(dask.delayed(make_chunk, pure=False)(i, cfg["rows"], cfg["dim"]),
                              shape=(cfg["rows"], cfg["dim"]), dtype=np.float64)
              for i in range(cfg["n_chunks"])]
    return da.concatenate(blocks, axis=0)


def flow_variants(s, cfg, graph=None) -> dict:
    """name -> (train function, chunk bytes); each trains a fresh PCA flow.

    ``graph``: a scheduler on the same cluster with ``direct_bytes=2**20`` (the
    default on one machine), so small chunks travel inside the task graph.
    """
    import labkit as lk

    def train(source, scheduler=s, **kw):
        flow = lk.ParallelFlow([lk.nodes.PCA(output_dim=20)])
        flow.train([source], scheduler=scheduler, **kw)
        return flow

    big = lambda: (make_chunk(i, cfg["rows"], cfg["dim"]) for i in range(cfg["n_chunks"]))
    small = lambda: (make_chunk(i, cfg["small_rows"], cfg["dim"])
                     for i in range(cfg["n_chunks"]))
    nbytes = cfg["rows"] * cfg["dim"] * 8
    return {
        "client chunks (scattered to a worker)": (lambda: train(big()), nbytes),
        "small client chunks (scattered, 64 KiB up)":
            (lambda: train(small()), cfg["small_rows"] * cfg["dim"] * 8),
        "small client chunks (in the task graph)":
            (lambda: train(small(), scheduler=graph or s), cfg["small_rows"] * cfg["dim"] * 8),
        "generated on the workers, join on workers": (lambda: train(worker_array(cfg)), nbytes),
        "generated on the workers, join on client":
            (lambda: train(worker_array(cfg), join="client"), nbytes),
    }


# -- the trainer -----------------------------------------------------------------------------

def model(cfg):
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(cfg["dim"], cfg["hidden"]), torch.nn.ReLU(),
                               torch.nn.Linear(cfg["hidden"], 10))


def batches(cfg):
    import torch
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(cfg["batch"], cfg["dim"], generator=g),
             torch.randint(0, 10, (cfg["batch"],), generator=g)) for _ in range(cfg["steps"])]


def plain_steps(cfg, data) -> float:
    """Seconds a step of a plain torch loop in this process."""
    import torch
    net = model(cfg)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    t0 = time.perf_counter()
    for x, y in data:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return (time.perf_counter() - t0) / len(data)


def trainer_steps(s, cfg, data, traffic) -> tuple[float, dict, float]:
    """Seconds a step, bytes a step, and set-up seconds of the Dask trainer."""
    import torch
    import labkit as lk
    net = model(cfg)
    t0 = time.perf_counter()
    trainer = lk.DataParallelTrainer(net, torch.nn.functional.cross_entropy,
                                     torch.optim.SGD(net.parameters(), lr=0.01), scheduler=s)
    try:
        setup = time.perf_counter() - t0
        trainer.step(*data[0])                        # the first step builds gloo's buffers
        before, t1 = traffic.read(), time.perf_counter()
        for x, y in data:
            trainer.step(x, y)
        seconds = (time.perf_counter() - t1) / len(data)
        moved = traffic.between(before, traffic.read())
    finally:
        trainer.close()
    return seconds, {k: v / len(data) for k, v in moved.items()}, setup


# -- running ---------------------------------------------------------------------------------

def run_network(cluster, s, graph, cfg, traffic) -> dict:
    """Every variant on the network as it is shaped now: name -> (median s, bytes/chunk)."""
    variants = flow_variants(s, cfg, graph)
    times = {name: [] for name in variants}
    moved = {}
    for r in range(cfg["reps"]):
        for name in (list(variants) if r % 2 == 0 else list(variants)[::-1]):
            before, t0 = traffic.read(), time.perf_counter()
            variants[name][0]()
            times[name].append(time.perf_counter() - t0)
            moved[name] = traffic.between(before, traffic.read())
    out = {name: (statistics.median(times[name]),
                  {k: v / cfg["n_chunks"] for k, v in moved[name].items()}, variants[name][1])
           for name in variants}
    data = batches(cfg)
    out["trainer"] = trainer_steps(s, cfg, data, traffic)
    out["plain"] = plain_steps(cfg, data)
    return out


def mb(n: float) -> str:
    return f"{n / 2**20:8.2f}"


def report(label: str, res: dict, cfg) -> None:
    print(f"\n== {label}")
    print(f"  {'PCA flow, ' + str(cfg['n_chunks']) + ' chunks':<44} {'median':>8}   "
          f"{'MiB a chunk: client->':>22} {'->client':>9} {'workers<->':>10} "
          f"{'scheduler':>9}  chunk MiB")
    for name, value in res.items():
        if name in ("trainer", "plain"):
            continue
        seconds, per, nbytes = value
        print(f"  {name:<44} {seconds:7.3f}s   {mb(per['client_out']):>22} "
              f"{mb(per['client_in']):>9} {mb(per['workers']):>10} {mb(per['scheduler']):>9}  "
              f"{mb(nbytes)}")
    seconds, per, setup = res["trainer"]
    params = sum(p.numel() for p in model(cfg).parameters()) * 4
    print(f"  Dask trainer: {seconds * 1e3:7.1f} ms a step (plain torch loop here "
          f"{res['plain'] * 1e3:.1f} ms); set-up {setup:.2f} s")
    print(f"    MiB a step: client->cluster {mb(per['client_out']).strip()}, "
          f"cluster->client {mb(per['client_in']).strip()}, between workers "
          f"{mb(per['workers']).strip()} (gradients {mb(params).strip()}, batch "
          f"{mb(cfg['batch'] * cfg['dim'] * 4).strip()})")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    parser.add_argument("--networks", type=int, default=len(NETWORKS),
                        help="how many of the networks to run, in order")
    args = parser.parse_args(argv)
    cfg = SIZES["quick" if args.quick else "full"]
    from tests.multihost.netns import NetnsCluster, available
    from tests.multihost.shaping import missing_tools, shaped_links
    ok, why = available()
    if not ok or missing_tools():
        sys.exit(f"bench_network needs root, ip netns and iptables-legacy: "
                 f"{why if not ok else ', '.join(missing_tools())}")
    import labkit as lk
    print(f"labkit network benchmark ({'quick' if args.quick else 'full'}): {' '.join(sys.argv)}")
    print(time.strftime("%Y-%m-%d %H:%M:%S %Z"))
    print(f"python {platform.python_version()}, {os.cpu_count()} cores; load average "
          f"{os.getloadavg()[0]:.2f}; PCA on {cfg['n_chunks']} chunks of {cfg['rows']}x"
          f"{cfg['dim']} float64; MLP {cfg['dim']}-{cfg['hidden']}-10, batches of "
          f"{cfg['batch']}")
    with NetnsCluster(n_workers=2) as cluster, \
            lk.DaskScheduler(cluster.scheduler_address) as s, \
            lk.DaskScheduler(cluster.scheduler_address, direct_bytes=2**20) as graph:
        traffic = Traffic(cluster)
        ends = [(cluster.namespace(h), "eth0") for h in cluster.hosts] + \
               [(None, cluster.root_veth().host_if)]
        flow_variants(s, dict(cfg, n_chunks=2))["client chunks (scattered to a worker)"][0]()
        for label, rate, delay in NETWORKS[:args.networks]:
            shaping = shaped_links(ends, rate_bit=rate, delay_s=delay) if rate \
                else contextlib.nullcontext()
            with shaping:
                report(label, run_network(cluster, s, graph, cfg, traffic), cfg)
    print(f"\nload average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
