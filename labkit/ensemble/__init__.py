"""Parallel ensembles: layers of estimators fitted in parallel (map) or in sequence (stack).

After ML-Ensemble's backend, on labkit's schedulers: :mod:`.indexers` (full,
k-fold, blend), :mod:`.layer` (estimators, preprocessing cases, output
columns), :mod:`.cache` (inputs sent once; a memory-mapped cache folder that
is always removed), :mod:`.fold_fits` (fit one estimator on one fold; a phase
of such tasks as one batch), :mod:`.processing` (``map``/``stack``/``predict``)
and :mod:`.evaluation` (cross-validated scores of parameter grids);
:mod:`.validation` checks every ``X``, ``y`` and ``groups`` on the way in.

On top, scikit-learn estimators (ML-Ensemble's front end): :mod:`.estimators`
(:class:`SuperLearner`, :class:`BlendEnsemble`, :class:`SequentialEnsemble`),
:mod:`.subsemble` (:class:`Subsemble`), built on :mod:`.base`, which makes its
layers with :mod:`.assembly` from :mod:`.layerspec` (a layer as a parameter)
and :mod:`.subsets` (a subsemble's partitions); :mod:`.splitters` turns an
int, an indexer or a scikit-learn splitter into folds.

The room imports labkit.errors, labkit.constraints, labkit.events, labkit.runs
and labkit.scheduling (task callables, the local scheduler), and scikit-learn;
never labkit.views, labkit.flows, labkit.experiments or labkit.program.
"""

from .base import BaseEnsemble
from .estimators import BlendEnsemble, SequentialEnsemble, SuperLearner
from .evaluation import ParallelEvaluation, Table
from .indexers import BlendIndex, FoldIndex, FullIndex
from .layer import Layer
from .layerspec import LayerSpec
from .processing import ParallelProcessing
from .splitters import SplitterIndex, as_indexer
from .subsemble import Subsemble, SubsetIndex

__all__ = [
    "Layer",
    "FullIndex",
    "FoldIndex",
    "BlendIndex",
    "SplitterIndex",
    "SubsetIndex",
    "as_indexer",
    "ParallelProcessing",
    "ParallelEvaluation",
    "Table",
    "BaseEnsemble",
    "LayerSpec",
    "SuperLearner",
    "BlendEnsemble",
    "Subsemble",
    "SequentialEnsemble",
]
