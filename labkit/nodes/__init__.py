"""Built-in nodes, one family a module.

Every trainable node here except :class:`OnlineLinearRegression` forks and
joins exactly, so training it in parallel gives the serial result.
:class:`TorchNode` (a torch module trained by sample-weighted parameter
averaging, one phase an epoch) is loaded on first use, since it imports torch.

Every class here loads from a checkpoint without being allowed (declared
below with :func:`labkit.checkpoints.allow_library`).

Imports: ``labkit.flows`` (the :class:`~labkit.flows.Node` contract and its
argument checks), ``labkit.checkpoints``, ``labkit.errors``, numpy and torch
(``torchnode`` only); never ``labkit.scheduling``, ``labkit.experiments``,
``labkit.data_parallel`` or ``labkit.views``: a node knows chunks, not where
they run.
"""

from typing import Any

from ..checkpoints import allow_library
from .classifier import GaussianClassifier
from .expansion import PolynomialExpansion, QuadraticExpansion, expanded_dim
from .fda import FDA
from .kmeans import KMeans
from .online import OnlineLinearRegression
from .pca import PCA, Whitening
from .regression import LinearRegression
from .sfa import SFA

allow_library(__name__)

__all__ = [
    "PCA",
    "Whitening",
    "SFA",
    "PolynomialExpansion",
    "QuadraticExpansion",
    "expanded_dim",
    "LinearRegression",
    "GaussianClassifier",
    "FDA",
    "KMeans",
    "OnlineLinearRegression",
]


def __getattr__(name: str) -> Any:
    """``TorchNode`` imports torch: it is loaded on first use, so ``import labkit`` stays light."""
    if name == "TorchNode":
        from .torchnode import TorchNode

        return TorchNode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "TorchNode"])
