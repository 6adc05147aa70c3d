"""Built-in nodes, one family a module.

Every trainable node here except :class:`OnlineLinearRegression` forks and
joins exactly, so training it in parallel gives the serial result.
"""

from .classifier import GaussianClassifier
from .expansion import PolynomialExpansion, QuadraticExpansion, expanded_dim
from .fda import FDA
from .kmeans import KMeans
from .online import OnlineLinearRegression
from .pca import PCA, Whitening
from .regression import LinearRegression
from .sfa import SFA

__all__ = ["PCA", "Whitening", "SFA", "PolynomialExpansion", "QuadraticExpansion",
           "expanded_dim", "LinearRegression", "GaussianClassifier", "FDA", "KMeans",
           "OnlineLinearRegression"]
