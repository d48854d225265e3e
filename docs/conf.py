"""Sphinx configuration (``nox -s docs`` builds with ``-W``: warnings are errors)."""

from __future__ import annotations

import trio_agent

project = "trio_agent"
author = "trio_agent contributors"
copyright = "trio_agent contributors"
release = trio_agent.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Google-style docstrings (the house style); attrs attribute docstrings are picked up
# by autodoc from the source.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
# Signatures stay readable and free of forward-reference noise: the types are in the
# docstrings and in the stubs the package ships (py.typed).
autodoc_typehints = "none"

# No intersphinx: the build must work offline (CI, fresh clones) and -W would turn an
# unreachable inventory into an error.

html_theme = "alabaster"
html_title = "trio_agent"
