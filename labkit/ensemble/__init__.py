"""Parallel ensembles: layers of estimators fitted in parallel (map) or in sequence (stack).

After ML-Ensemble's backend, on labkit's schedulers: :mod:`.indexers` (full,
k-fold, blend), :mod:`.layer` (estimators, preprocessing cases, output
columns), :mod:`.cache` (inputs sent once; a memory-mapped cache folder that
is always removed), :mod:`.tasks` (fit one estimator on one fold),
:mod:`.processing` (``map``/``stack``/``predict``) and :mod:`.evaluation`
(cross-validated scores of parameter grids).
"""

from .evaluation import ParallelEvaluation, Table
from .indexers import BlendIndex, FoldIndex, FullIndex
from .layer import Layer
from .processing import ParallelProcessing

__all__ = ["Layer", "FullIndex", "FoldIndex", "BlendIndex", "ParallelProcessing",
           "ParallelEvaluation", "Table"]
