"""How a sweep's client could talk to a long task on a worker process: round trips, side by side.

Run ``python benchmarks/bench_channels.py`` (about half a minute) or ``--quick``.
It prints milliseconds a round trip and never asserts.  On a
``LocalCluster`` of two worker processes (one thread each, 127.0.0.1), a
long task echoes what the client sends, through:

* Dask's ``Queue`` (both ways through the scheduler);
* a Dask actor's method (a call from the client straight to the worker);
* ``client.run`` to the worker and ``log_event`` back (how a stop and the
  reports of a trial went before slots);
* a ``multiprocessing.connection`` socket from the task to the client, with
  Nagle's wait off (what a slot uses, :mod:`labkit.experiments.launch.slot`), and
  with it on (two small writes in a row then wait for a delayed ACK);
* a Dask task a message (``submit`` + ``result``: a task a trial).

The message is a trial's spec: ``{"trial": i, "config": {"x": 0.5}}``.
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SIZES = {"full": dict(n=500, repeat=3), "quick": dict(n=30, repeat=1)}


def queue_echo(inbox: str, outbox: str, n: int) -> int:
    from distributed import Queue

    a, b = Queue(inbox), Queue(outbox)
    for _ in range(n):
        b.put(a.get())
    return n


class Echo:
    """An actor: its method runs on the worker, called straight from the client."""

    def echo(self, message):
        return message


def socket_echo(address, key: bytes, n: int, no_delay: bool) -> int:
    from multiprocessing.connection import Client

    from labkit.experiments.launch.slot_line import no_delay as set_no_delay

    conn = Client(address, authkey=key)
    if no_delay:
        set_no_delay(conn)
    for _ in range(n):
        message = conn.recv()
        conn.send(["start"])            # two writes in a row, as a slot's start and end
        conn.send([message])
    conn.close()
    return n


def emit(message, dask_worker=None) -> None:
    dask_worker.log_event("labkit-bench-echo", message)


def echo(message):
    return message


def message(i: int) -> dict:
    return {"trial": i, "config": {"x": 0.5}}


def by_queue(client, n: int) -> float:
    from distributed import Queue

    a, b = Queue("labkit-bench-a"), Queue("labkit-bench-b")
    task = client.submit(queue_echo, "labkit-bench-a", "labkit-bench-b", n, pure=False)
    began = time.perf_counter()
    for i in range(n):
        a.put(message(i))
        b.get()
    took = time.perf_counter() - began
    task.result()
    return took / n


def by_actor(client, n: int) -> float:
    actor = client.submit(Echo, actor=True).result()
    actor.echo(message(0)).result()
    began = time.perf_counter()
    for i in range(n):
        actor.echo(message(i)).result()
    return (time.perf_counter() - began) / n


def by_run_and_events(client, n: int) -> float:
    box: queue.SimpleQueue = queue.SimpleQueue()
    client.subscribe_topic("labkit-bench-echo", box.put)
    worker = sorted(client.nthreads())[0]
    began = time.perf_counter()
    for i in range(n):
        client.run(emit, message(i), workers=[worker])
        box.get()
    took = time.perf_counter() - began
    client.unsubscribe_topic("labkit-bench-echo")
    return took / n


def by_socket(client, n: int, no_delay: bool) -> float:
    from multiprocessing.connection import Listener

    from labkit.experiments.launch.slot_line import no_delay as set_no_delay

    key = os.urandom(16)
    with Listener(("127.0.0.1", 0), authkey=key) as listener:
        task = client.submit(socket_echo, listener.address, key, n, no_delay, pure=False)
        conn = listener.accept()
        if no_delay:
            set_no_delay(conn)
        began = time.perf_counter()
        for i in range(n):
            conn.send(("trial", message(i)))
            conn.recv()
            conn.recv()
        took = time.perf_counter() - began
        task.result()
        conn.close()
    return took / n


def by_task(client, n: int) -> float:
    client.submit(echo, message(0), pure=False).result()
    began = time.perf_counter()
    for i in range(n):
        client.submit(echo, message(i), pure=False).result()
    return (time.perf_counter() - began) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    size = SIZES["quick" if parser.parse_args().quick else "full"]
    from distributed import Client, LocalCluster

    print(f"channels to a long task on a worker process: {platform.node()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    rows = {"dask Queue (through the scheduler)": lambda c, n: by_queue(c, n),
            "dask actor method": lambda c, n: by_actor(c, n),
            "client.run there, log_event back": lambda c, n: by_run_and_events(c, n),
            "socket, Nagle off (a slot's line)": lambda c, n: by_socket(c, n, True),
            "socket, Nagle on": lambda c, n: by_socket(c, n, False),
            "a Dask task a message": lambda c, n: by_task(c, n)}
    times: dict = {k: [] for k in rows}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for _ in range(size["repeat"]):
            for label, run in rows.items():
                n = size["n"] if "Nagle on" not in label else max(10, size["n"] // 20)
                times[label].append(run(client, n))
    print(f"\n{size['n']} round trips of a trial's spec, milliseconds each "
          f"(medians of {size['repeat']})")
    for label, values in times.items():
        print(f"    {label:40s} {statistics.median(values) * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
