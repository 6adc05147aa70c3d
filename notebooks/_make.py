"""What the notebook generators share: cell makers and writing a notebook next to them."""

import os

import nbformat as nbf

md, code = nbf.v4.new_markdown_cell, nbf.v4.new_code_cell


def write(name: str, cells) -> None:
    """Write ``cells`` as ``notebooks/<name>`` with the python3 kernelspec (no dialog asks)."""
    for i, cell in enumerate(cells):  # stable ids: regenerating changes nothing
        cell["id"] = f"{name[:2]}-{i:02d}"
    nb = nbf.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbf.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), name))
