"""The sweep store: SQLite tables of sweeps, trials, reports and checkpoints, written by one
writer thread, read in bulk, followed while another process writes, listed by ``labkit sweeps``.

It may import :mod:`labkit.experiments.trials` (the records it keeps), labkit's errors and
constraints; never the launchers, the search or a view.
"""

__all__: list[str] = []
