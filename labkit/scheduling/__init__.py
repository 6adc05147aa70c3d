"""Schedulers: the seed's ``add_task``/``get_results`` verbs, in-process or on Dask.

The room where work meets the workers: a :class:`Scheduler` (``LocalScheduler``
in this thread, ``DaskScheduler`` on a Dask cluster) runs the tasks of
:class:`Batch` es, each a :class:`TaskCallable` applied to a chunk.  Every
other room hands its work over here (flows, data_parallel, experiments,
ensembles), so this one knows none of them.

The layers, lowest first:

* what a task is: ``callables`` (what users write), ``lazy_chunks``,
  ``reference``, ``shared`` (chunks in shared memory), ``pools``, ``running``
  (runs one task wherever it lands: a worker, a thread here, a pool process),
  ``open_task`` (a task's book-keeping between its start and its outcome);
* the client's book-keeping: ``window`` (the in-flight limits), ``starting``,
  ``batch``, ``batch_runs``, ``results``, ``base`` (the ``Scheduler``);
* Dask: ``dask_adapter`` (Dask's API across its versions), ``connect``,
  ``cluster``, ``quiet`` (Dask's logs), ``blas``, ``offload``,
  ``transport`` / ``routes`` / ``packing`` / ``dispatch`` / ``outcomes`` (how a
  task and its outcome travel), and ``dask_scheduler`` (``DaskScheduler``);
  ``local`` (``LocalScheduler``).

It imports labkit.errors, labkit.events and labkit.constraints only; never
labkit.flows, labkit.data_parallel, labkit.experiments or labkit.views.
"""

from .base import Scheduler
from .batch import Batch
from .callables import FunctionCallable, TaskCallable
from .dask_scheduler import DaskScheduler
from .local import LocalScheduler
from .results import ListResultContainer, OrderedResultContainer, ResultContainer
from .running import TaskOutcome, current_task, worker_address

__all__ = [
    "Scheduler",
    "Batch",
    "LocalScheduler",
    "DaskScheduler",
    "TaskCallable",
    "FunctionCallable",
    "TaskOutcome",
    "ResultContainer",
    "ListResultContainer",
    "OrderedResultContainer",
    "current_task",
    "worker_address",
]
