"""Built-in nodes, one family a module.

Every trainable node here except :class:`OnlineLinearRegression` forks and
joins exactly, so training it in parallel gives the serial result.
:class:`TorchNode` (a torch module trained by sample-weighted parameter
averaging, one phase an epoch) is loaded on first use, since it imports torch.
"""

from .classifier import GaussianClassifier
from .expansion import PolynomialExpansion, QuadraticExpansion, expanded_dim
from .fda import FDA
from .kmeans import KMeans
from .online import OnlineLinearRegression
from .pca import PCA, Whitening
from .regression import LinearRegression
from .sfa import SFA

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


def __getattr__(name):
    """``TorchNode`` imports torch: it is loaded on first use, so ``import labkit`` stays light."""
    if name == "TorchNode":
        from .torchnode import TorchNode

        return TorchNode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), "TorchNode"])
