"""The ``labkit`` command."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a flow in parallel on a local Dask cluster")
    demo.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    demo.add_argument("--chunk-size", type=int, default=150, help="rows per chunk (default 150)")
    board = commands.add_parser("dashboard",
                                help="serve the live Bokeh dashboard of a Dask cluster")
    board.add_argument("--scheduler", required=True, metavar="ADDRESS",
                       help="address of the Dask scheduler, e.g. tcp://127.0.0.1:8786")
    board.add_argument("--port", type=int, default=0,
                       help="port on 127.0.0.1 (default: a free one)")
    board.add_argument("--allow-websocket-origin", action="append", default=[],
                       metavar="HOST[:PORT]",
                       help="a further origin whose pages may connect (repeatable)")
    return parser


def serve_dashboard(address: str, port: int = 0, origins=(), out=None) -> int:
    """Serve the dashboard of the cluster at ``address`` until SIGINT or SIGTERM."""
    from .scheduling.dask import DaskScheduler
    from .views.dashboard import dashboard
    out = out or sys.stdout
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with DaskScheduler(address) as scheduler:
            url = dashboard(scheduler, port=port, allow_websocket_origin=list(origins))
            print(f"labkit dashboard: {url}", file=out, flush=True)
            while not stop.wait(0.5):  # a short wait, so the signal handler gets to run
                pass
            print("labkit dashboard: stopping", file=out, flush=True)
        # leaving the block shuts the scheduler down, which stops the dashboard
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def main(argv=None) -> int:
    """Entry point of the ``labkit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo
        if args.workers < 1 or args.chunk_size < 1:
            print("labkit demo: --workers and --chunk-size must be positive", file=sys.stderr)
            return 2
        run_demo(n_workers=args.workers, chunk_size=args.chunk_size)
    elif args.command == "dashboard":
        if not 0 <= args.port < 65536:
            print("labkit dashboard: --port must be between 0 and 65535", file=sys.stderr)
            return 2
        return serve_dashboard(args.scheduler, args.port, args.allow_websocket_origin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
