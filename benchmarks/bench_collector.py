"""How finished tasks come back: ``as_completed(...).batches()`` vs a done-callback queue.

Both collectors run in a thread of their own and fetch each batch of finished
futures with one ``gather``; the client submits no-op tasks through a bounded
window, as a labkit batch does.  Two shapes of work, alternating the
collectors' order each repetition, medians printed:

* one stream of 2000 tasks, at most 256 in flight (benchmark 3's shape);
* 60 batches of 8 tasks, each waited for before the next (short flow phases).

Run ``python benchmarks/bench_collector.py`` (about a minute on 2 cores), or
with ``--quick`` for a smoke test.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import threading
import time

from distributed import Client, LocalCluster, as_completed


def noop(x):
    return None


def callback_collector(client, finished):
    """Futures' done callbacks fill a queue; a thread drains it, one gather a batch."""
    q: queue.SimpleQueue = queue.SimpleQueue()

    def run():
        while True:
            batch = [q.get()]
            while not q.empty():
                batch.append(q.get())
            client.gather(batch)
            finished(len(batch))

    threading.Thread(target=run, daemon=True).start()
    return lambda future: future.add_done_callback(q.put)


def as_completed_collector(client, finished):
    """One ``as_completed``; a thread takes its ``batches()``, one gather each."""
    ac = as_completed()
    cond = threading.Condition()

    def run():
        while True:
            with cond:
                while ac.is_empty():
                    cond.wait()
            for batch in ac.batches():
                client.gather(batch)
                finished(len(batch))

    threading.Thread(target=run, daemon=True).start()

    def track(future):
        ac.add(future)
        with cond:
            cond.notify()
    return track


class Counter:
    """Tasks open and done, with a condition to wait on."""

    def __init__(self):
        self.cond, self.open, self.done = threading.Condition(), 0, 0

    def finished(self, k):
        with self.cond:
            self.open, self.done = self.open - k, self.done + k
            self.cond.notify_all()

    def wait(self, ready):
        with self.cond:
            while not ready():
                self.cond.wait()


def stream(client, make, n=2000, window=256) -> float:
    c = Counter()
    track = make(client, c.finished)
    t0 = time.perf_counter()
    for i in range(n):
        c.wait(lambda: c.open < window)
        with c.cond:
            c.open += 1
        track(client.submit(noop, i, pure=False))
    c.wait(lambda: c.done >= n)
    return time.perf_counter() - t0


def small_batches(client, make, n_batches=60, per=8) -> float:
    c = Counter()
    track = make(client, c.finished)
    t0 = time.perf_counter()
    for b in range(n_batches):
        for i in range(per):
            track(client.submit(noop, (b, i), pure=False))
        c.wait(lambda: c.done >= (b + 1) * per)
    return time.perf_counter() - t0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke test")
    quick = parser.parse_args(argv).quick
    reps, scale = (1, 10) if quick else (5, 1)
    shapes = (lambda c, m: stream(c, m, n=2000 // scale),
              lambda c, m: small_batches(c, m, n_batches=60 // scale))
    collectors = {"done-callback queue": callback_collector,
                  "as_completed().batches()": as_completed_collector}
    with LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for title, shape in zip(("stream", "small_batches"), shapes):
            for make in collectors.values() if not quick else ():
                shape(client, make)                       # warm-up (the full run's timings)
            times = {name: [] for name in collectors}
            for r in range(reps):
                for name in (list(collectors) if r % 2 == 0 else list(collectors)[::-1]):
                    times[name].append(shape(client, collectors[name]))
            print(f"{title}:")
            for name, ts in times.items():
                print(f"  {name:<28} median {statistics.median(ts):.3f} s   "
                      f"(runs: {', '.join(f'{t:.3f}' for t in ts)})")
            a, b = (statistics.median(times[n]) for n in collectors)
            print(f"  => as_completed / callback queue: {b / a:.3f}")


if __name__ == "__main__":
    main()
