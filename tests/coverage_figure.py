"""Print the coverage figure of a test run, and the modules the tests barely reach.

``make test`` runs pytest under ``coverage run`` and then this script, which
reads the data file (``[tool.coverage.run]`` in ``pyproject.toml``) and prints
the total line coverage of ``labkit/``, each package's, and the modules
under ``--below`` percent (30 by default), least covered first.  It writes
the same to ``test-artifacts/coverage.json``.  It never fails a build: the
figure is read, not asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_figures(data_file: str) -> dict[str, tuple[int, int]]:
    """``{module path: (statements, statements run)}`` for every labkit module."""
    import coverage

    cov = coverage.Coverage(data_file=data_file, config_file=os.path.join(ROOT, "pyproject.toml"))
    cov.load()
    figures = {}
    for path in sorted(_labkit_sources()):
        _, statements, _, missing, _ = cov.analysis2(path)
        figures[os.path.relpath(path, ROOT)] = (len(statements), len(statements) - len(missing))
    return figures


def _labkit_sources():
    for folder, _, files in os.walk(os.path.join(ROOT, "labkit")):
        yield from (os.path.join(folder, f) for f in files if f.endswith(".py"))


def percent(run: int, statements: int) -> float:
    """``run`` of ``statements`` as a percentage (100 for a module with no statement)."""
    return 100.0 * run / statements if statements else 100.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-file", default=os.path.join(ROOT, "test-artifacts", ".coverage"))
    parser.add_argument("--below", type=float, default=30.0)
    args = parser.parse_args(argv)
    if not os.path.exists(args.data_file):
        print(f"coverage: no data at {args.data_file}")
        return 0
    figures = module_figures(args.data_file)
    packages: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for path, (statements, run) in figures.items():
        package = os.path.dirname(path)
        packages[package][0] += statements
        packages[package][1] += run
    total = [sum(v[0] for v in figures.values()), sum(v[1] for v in figures.values())]
    print(f"\ncoverage of labkit/ by the tests: {percent(total[1], total[0]):.1f}% "
          f"({total[1]} of {total[0]} statements, this process only)")
    for package, (statements, run) in sorted(packages.items()):
        print(f"  {package:<28} {percent(run, statements):5.1f}%")
    low = sorted((percent(run, n), path) for path, (n, run) in figures.items()
                 if percent(run, n) < args.below)
    print(f"modules under {args.below:.0f}%: "
          + (", ".join(f"{path} ({p:.0f}%)" for p, path in low) or "none"))
    os.makedirs(os.path.join(ROOT, "test-artifacts"), exist_ok=True)
    with open(os.path.join(ROOT, "test-artifacts", "coverage.json"), "w") as f:
        json.dump({"total": percent(total[1], total[0]), "modules": figures,
                   "below": [path for _, path in low]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
