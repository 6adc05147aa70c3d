"""Run the worker-loss, cancel and stress tests (``-m soak``) again and again, and tally.

``make soak`` runs ``python tests/soak.py --times 10``: ten whole pytest runs of
the tests marked ``soak``, one after another, each in a fresh process.  It
prints, for every test, how many rounds it passed, writes the tally to
``test-artifacts/soak.json`` and exits non-zero if any round failed a test.

``--busy N`` runs N busy-looping processes beside the rounds (``make soak-loaded``
uses two), so the tests are shown to hold on a loaded machine; they end with the
soak, and with this process if it is killed (``PR_SET_PDEATHSIG``).

Further arguments go to pytest, e.g. ``python tests/soak.py --times 3 -k stress``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def outcomes_of(junit_xml: str) -> dict[str, str]:
    """``{test id: "passed" | "failed" | "skipped"}`` from one round's JUnit XML."""
    found = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[name] = (
            "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds
            else "passed"
        )
    return found


#: What a busy process runs: it asks the kernel to kill it when its parent dies, checks
#: that the parent is still the one that started it, then spins one core.
_SPIN = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[1]): sys.exit(0)\n"
    "while True: pass\n"
)


@contextlib.contextmanager
def busy(n: int):
    """Run ``n`` processes that each keep a core busy, for the duration of the block.

    >>> with busy(2) as pids:   # two cores' worth of competing load
    ...     len(pids)
    2
    """
    procs = [subprocess.Popen([sys.executable, "-c", _SPIN, str(os.getpid())]) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def one_round(k: int, folder: str, pytest_args: list[str]) -> tuple[dict[str, str], float]:
    """One pytest run of the soak tests; its outcomes and seconds."""
    report = os.path.join(folder, f"round-{k}.xml")
    command = [sys.executable, "-m", "pytest", "-m", "soak", "-q", "-p", "no:cacheprovider",
               f"--junitxml={report}", *pytest_args]
    t0 = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    if not os.path.exists(report):
        sys.stdout.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit(f"round {k}: pytest wrote no report (exit {proc.returncode})")
    found = outcomes_of(report)
    if "failed" in found.values():  # the whole output kept, to read why
        kept = os.path.join(ROOT, "test-artifacts", f"soak-round-{k}.log")
        with open(kept, "w") as f:
            f.write(proc.stdout + proc.stderr)
        print(f"round {k}: failures; the output is in {kept}")
        for case in ET.parse(report).getroot().iter("testcase"):
            for child in case:
                if child.tag in ("failure", "error"):
                    print(f"  {case.get('name')}: {(child.get('message') or '')[:500]}")
    return found, seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=int, default=10, help="rounds (10)")
    parser.add_argument("--busy", type=int, default=0,
                        help="busy-looping processes beside the rounds (0)")
    args, pytest_args = parser.parse_known_args(argv)
    passed: collections.Counter = collections.Counter()
    ran: collections.Counter = collections.Counter()
    rounds = []
    os.makedirs(os.path.join(ROOT, "test-artifacts"), exist_ok=True)
    if args.busy:
        print(f"{args.busy} busy-looping processes run beside the rounds", flush=True)
    with tempfile.TemporaryDirectory(prefix="labkit-soak-") as folder, busy(args.busy):
        for k in range(1, args.times + 1):
            found, seconds = one_round(k, folder, pytest_args)
            for name, how in found.items():
                ran[name] += how != "skipped"
                passed[name] += how == "passed"
            failed = sorted(n for n, how in found.items() if how == "failed")
            rounds.append({"round": k, "seconds": round(seconds, 1), "failed": failed})
            print(f"round {k}/{args.times}: {len(found)} tests, {len(failed)} failed, "
                  f"{seconds:.0f} s", flush=True)
    print(f"\n{'passed':>8}  test")
    for name in sorted(ran):
        print(f"{passed[name]:>4}/{ran[name]:<3}  {name}")
    os.makedirs(os.path.join(ROOT, "test-artifacts"), exist_ok=True)
    with open(os.path.join(ROOT, "test-artifacts", "soak.json"), "w") as f:
        json.dump({"times": args.times, "busy": args.busy, "passed": dict(passed), "ran": dict(ran),
                   "rounds": rounds}, f, indent=1)
    return 0 if all(passed[n] == ran[n] for n in ran) else 1


if __name__ == "__main__":
    sys.exit(main())
