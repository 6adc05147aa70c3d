"""What runs on a Dask worker for one rank of a replica group.

:mod:`.rank` (the rank's replica and one training step, the ranks agreeing on
it), :mod:`.overlap` (the gradient all-reduce overlapping backward),
:mod:`.process_group` (a process group of its own per replica group),
:mod:`.network` (the interface its backend binds, the probe's listening side),
:mod:`.lifecycle` (built, joined, state, torn down), :mod:`.inputs` (the rows
it reads), :mod:`.training` (its loops: client-fed steps and whole epochs) and
:mod:`.saving` (its checkpoint written to, and read from, a location).

May import labkit.errors, labkit.checkpoints, labkit.scheduling.workers.shared and the shared modules at
the top of :mod:`labkit.data_parallel`; never :mod:`labkit.data_parallel.dask`
(the client) nor :mod:`labkit.data_parallel.local`.
"""
