"""Schedulers: the seed's ``add_task``/``get_results`` verbs, in-process or on Dask.

The room where work meets the workers: a :class:`Scheduler` (``LocalScheduler``
in this thread, ``DaskScheduler`` on a Dask cluster) runs the tasks of
:class:`Batch` es, each a :class:`TaskCallable` applied to a chunk.  Every
other room hands its work over here (flows, data_parallel, experiments,
ensembles), so this one knows none of them.

Its folders, each with its own docstring:

* ``tasks/``: what a task is and its book-keeping on the client (callables,
  open tasks, batches and the task starter each holds, the in-flight window,
  results), the ``Scheduler`` base and ``LocalScheduler``;
* ``workers/``: where a task runs (a Dask worker, a thread here, an offload
  pool's process) and how its chunk reaches it (by reference, shared memory,
  a lazy block);
* ``routes/``: how a task and its outcome travel to and from Dask's workers;
* ``dask/``: the cluster (reaching it, starting one, Dask beyond its public
  API) and ``DaskScheduler``, which holds a cluster, its routes and their faults.

It imports labkit.errors, labkit.events and labkit.constraints only; never
labkit.flows, labkit.data_parallel, labkit.experiments or labkit.views.
"""

from .dask.dask_scheduler import DaskScheduler
from .tasks.base import Scheduler
from .tasks.batch import Batch
from .tasks.callables import FunctionCallable, TaskCallable
from .tasks.local import LocalScheduler
from .tasks.results import ListResultContainer, OrderedResultContainer, ResultContainer
from .workers.running import TaskOutcome, current_task, worker_address

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
