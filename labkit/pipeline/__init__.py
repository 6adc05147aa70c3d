"""Pipelines: stages of threads that read records, process them and write them on.

:func:`pipe` starts ``num_threads`` daemon threads that read records from an
iterable, apply a processor and write the results into a bounded
:class:`Queue` (or a list, or a writer callable).  Stages chain, a queue is a
plain iterable of records (so it can feed ``ParallelFlow.train``), and every
way a stream can end leaves no thread behind:

* the input runs out: the output closes once every thread is done;
* a processor returns :data:`STOP`: the stream ends early;
* the consumer closes the queue: producers wake up and exit, upstream too;
* a processor (or the input) raises: the records processed before are still
  written, then the consumer's next read raises a labkit error naming the
  stage and the record index, the original exception chained to it.

Records already read when a stream ends (at its input's end, a STOP, an
error or :meth:`Stage.stop`) are still processed and written (ordered: those
before the STOP or the failing record); only a consumer closing its queue
drops what is left, and ``with pipe(...) as q:`` closes it on leaving the
block, however the block is left.  A processor returning ``None`` drops the
record.  Each stage reports
:class:`StageStats` (records/s, busy time, queue fill) to ``on_event`` at most
every :data:`STATS_INTERVAL` seconds and once at the end.

The room: ``pipe.py`` (the two verbs and their arguments), ``stage.py``
(the threads of one stage), ``reader.py`` (the lazy stage), ``queue.py``,
``final.py`` and ``stream.py`` (what stages share: STOP, the errors, stats).
It imports labkit.errors, labkit.events and labkit.constraints; never
labkit.scheduling, labkit.flows or labkit.views (a scheduler or event bus
given as ``on_event`` is only called through its ``emit``).

Examples
--------
>>> doubled = pipe(range(5), processor=lambda x: 2 * x, num_threads=2, ordered=True)
>>> list(pipe(doubled, processor=lambda x: x + 1))
[1, 3, 5, 7, 9]
>>> out, final = pipe_and_output(range(4), final_outputs={"total": (0, lambda a, r: a + r)})
>>> list(out), final.result(timeout=5)
([0, 1, 2, 3], {'count': 4, 'total': 6})
"""

from ..events import StageStats
from .final import Final
from .pipe import pipe, pipe_and_output
from .queue import Queue
from .reader import ProcessingReader
from .stage import Stage
from .stream import STATS_INTERVAL, STOP, PipelineError

__all__ = [
    "STOP",
    "STATS_INTERVAL",
    "Queue",
    "Stage",
    "Final",
    "ProcessingReader",
    "StageStats",
    "PipelineError",
    "pipe",
    "pipe_and_output",
]
