"""The ``labkit`` command."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="labkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="train a flow in parallel on a local Dask cluster")
    demo.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    demo.add_argument("--chunk-size", type=int, default=150, help="rows per chunk (default 150)")
    return parser


def main(argv=None) -> int:
    """Entry point of the ``labkit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo
        if args.workers < 1 or args.chunk_size < 1:
            print("labkit demo: --workers and --chunk-size must be positive", file=sys.stderr)
            return 2
        run_demo(n_workers=args.workers, chunk_size=args.chunk_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
