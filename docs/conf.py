"""Sphinx configuration of labkit's docs (``make docs``; ``tests/test_docs.py``).

Three parts: the user guide (``guide/*.md``, MyST Markdown, a page per room), the
notebooks (``notebooks/*.ipynb``, links to the repository's ``notebooks/``, rendered by
myst-nb as stored, never executed here) and the API reference (``api/*.rst``, built from
the docstrings: numpydoc style, read by napoleon), so ``labkit`` must import: run Sphinx
from the environment labkit is installed in, with torch (``pip install -e
".[docs,torch,views]"``). The build is meant to be warning-free:
``sphinx-build -W --keep-going -b html docs docs/_build/html``.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's labkit, also when it is not installed

project = "labkit"
author = "the labkit developers"
copyright = "2026, the labkit developers"
try:
    release = metadata.version("labkit")
except metadata.PackageNotFoundError:  # a checkout that was never installed
    import labkit

    release = labkit.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode", "myst_nb"]
exclude_patterns = ["_build"]

# The user guide (guide/*.md) is MyST Markdown, and the notebooks (notebooks/*.ipynb, links
# to the repository's notebooks/) are rendered by myst-nb as they are stored: without
# outputs, never executed here (the tests execute them), and with no pandoc needed.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
nb_execution_mode = "off"
myst_heading_anchors = 3
# A parameter's type in a docstring is prose ("list of classes or functions"), and the
# Python domain makes every word of it a cross-reference: a word that names attributes
# of several classes ("classes") would be "more than one target found". Such words are
# not meant as references; leave them plain text rather than warn.
suppress_warnings = ["ref.python"]

# numpydoc-style docstrings throughout; no Google style
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "signature"

html_theme = "alabaster"
version = release
html_title = f"labkit {release}"
html_static_path: list[str] = []


def _skip_sklearn_routing(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_*_request`` methods (metadata routing):
    their docstrings link into scikit-learn's own docs, which are not part of this build."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_routing)
