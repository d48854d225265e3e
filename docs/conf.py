"""Sphinx configuration (``nox -s docs`` builds with ``-W``: warnings are errors)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer

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


# -- Type aliases and constants ------------------------------------------------------------
# The public namespaces re-export aliases such as ``AgentMessage`` from private modules,
# where their docstrings live (attribute docstrings, invisible at run time). autodoc looks
# for them in the public module, finds nothing and falls back to the docstring of the
# value's type; this hook fetches them from the defining module instead, so the reference
# never repeats (or drifts from) the source.


def _import_sources(public_module: str) -> dict[str, str]:
    module = importlib.import_module(public_module)
    tree = ast.parse(inspect.getsource(module))
    package = module.__name__ if hasattr(module, "__path__") else module.__package__
    sources: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level:
            base = importlib.util.resolve_name("." * node.level + node.module, package)
            for alias in node.names:
                sources[alias.asname or alias.name] = base
    return sources


def _alias_docstring(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    if what != "data":
        return
    public_module, _, attr = name.rpartition(".")
    source = _import_sources(public_module).get(attr)
    if source is None:
        return
    docstring = ModuleAnalyzer.for_module(source).find_attr_docs().get(("", attr))
    if docstring:
        # Replaces the docstring of the value's type (``types.UnionType``, ``dict``).
        lines[:] = list(docstring)


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _alias_docstring)
