"""Sphinx configuration of the ksvd-bench manual.

Built offline: ``sphinx-build -W -b html docs docs/_build``.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))
os.environ.setdefault("MPLBACKEND", "Agg")

project = "ksvd-bench"
author = "the ksvd-bench developers"
copyright = "2026, the ksvd-bench developers"  # noqa: A001 (Sphinx's name)

from ksvd_bench import __version__ as release  # noqa: E402

version = release

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]

# offline: no intersphinx, no MathJax (it loads from a CDN); formulas render as text
myst_heading_anchors = 3

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"ksvd-bench {release}"
html_static_path = []
html_show_sphinx = False  # no footer links: the pages stay offline-clean


#: Where a page asks for the solver table, the registry writes it (one fact, one place).
SOLVER_TABLE = "<!-- solver-table -->"


def _solver_table(app, docname, source):
    if SOLVER_TABLE in source[0]:
        from solvers.registry import solver_table

        source[0] = source[0].replace(SOLVER_TABLE, solver_table())


def setup(app):
    app.connect("source-read", _solver_table)
