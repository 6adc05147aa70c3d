"""Run as a script by ``test_quiet.py``: two schedulers of different modes opened and shut
down in every order, as a notebook would; the test reads what reached stderr.

Each worker says something below WARNING and a warning through Dask's loggers, in
the worker (a process of its own, or a thread here), as Dask's own code would.
"""

import itertools
import logging
import sys

import labkit as lk


def make(mode):
    if mode == "processes":
        return lk.DaskScheduler(mode="processes", n_workers=2)
    return lk.DaskScheduler(mode=mode, n_workers=1, threads_per_worker=2)


def _speak(dask_worker=None):
    log = logging.getLogger("distributed.worker")
    log.info("chatter from a worker")
    log.warning("a real problem on a worker")


def main():
    for first, second in itertools.permutations(sys.argv[1:], 2):
        for close_first_opened in (True, False):
            print(f"=== {first} {second} {close_first_opened}", file=sys.stderr, flush=True)
            a = make(first)
            b = make(second)
            for s in (a, b):
                s.add_task(1, abs)
                s.get_results()
                s.run_on_workers(_speak)
            for s in ((a, b) if close_first_opened else (b, a)):
                s.shutdown()
    logging.getLogger("distributed.scheduler").warning("a real problem")
    print("=== end", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
