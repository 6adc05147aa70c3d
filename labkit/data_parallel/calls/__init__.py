"""The trainer's calls (``fit``, ``evaluate``, ``step``), as parts the trainer holds.

:mod:`.fit_loop` (``fit``, ``evaluate`` and ``step`` over a replica group),
:mod:`.stepper` (planned steps handed to the group, each report taken: the
count, the split, the balance, the views), :mod:`.one_call` (one call at a
time), :mod:`.model_sync` (the user's model holding what the replicas hold
after each call) and :mod:`.trainer_state` (the state in and out, and its
checkpoints at a location).  Each is made with explicit inputs and owns its state; none
reads the trainer's.

May import labkit's ground floor (errors, events, runs, constraints,
checkpoints) and the shared modules at the top of :mod:`labkit.data_parallel`
(never the trainer, :mod:`.local`, :mod:`.dask` or :mod:`.worker`).
"""
