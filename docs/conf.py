"""Sphinx configuration (``nox -s docs`` builds with ``-W``: warnings are errors)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re

import attrs
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.transforms import SphinxTransform
from sphinx.util.inspect import TypeAliasForwardRef
from sphinx.util.typing import stringify_annotation

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
# Types in the signatures, each parameter on its own line once a signature is long.
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
python_maximum_signature_line_length = 88
# No fully qualified ``trio_agent._messages.X`` in rendered annotations.
python_use_unqualified_type_names = True


def _type_aliases() -> dict[str, str]:
    """Every public type alias, so annotations show ``StreamFn`` instead of its expansion."""
    aliases: dict[str, str] = {}
    for module_name in (
        "trio_agent",
        "trio_agent.compaction",
        "trio_agent.loop",
        "trio_agent.models",
        "trio_agent.serialization",
        "trio_agent.sessions",
        "trio_agent.testing",
        "trio_agent.web",
    ):
        module = importlib.import_module(module_name)
        for name in dir(module):
            value = getattr(module, name)
            if name.startswith("_") or inspect.ismodule(value) or inspect.isroutine(value):
                continue
            if isinstance(value, type) and not hasattr(value, "__origin__"):
                continue
            if name[0].isupper():
                aliases.setdefault(name, f"{module_name}.{name}")
    return aliases


autodoc_type_aliases = _type_aliases()
# Sphinx 9 renders an alias it resolved through ``autodoc_type_aliases`` by its repr,
# ``TypeAliasForwardRef('trio_agent.StreamFn')``, wherever it is not a whole annotation
# (``list[AgentMessage]``, property types). Render it as a short cross-reference instead.
TypeAliasForwardRef.__repr__ = lambda self: f"~{self.name}"  # type: ignore[method-assign]

# No intersphinx: the build must work offline (CI, fresh clones) and -W would turn an
# unreachable inventory into an error.

# Furo's content column fits the 100-column code of the examples.
html_theme = "furo"
html_title = "trio_agent"
html_theme_options = {"sidebar_hide_name": False}
html_static_path = ["_static"]
html_css_files = ["wide-code.css"]


# -- Where a public name is defined ----------------------------------------------------------
# The public namespaces re-export names from private modules and rewrite their
# ``__module__`` (``trio_agent.Agent``, not ``trio_agent._agent.Agent``). Attribute
# docstrings (attrs fields, ``self.x = ...`` in ``__init__``, type aliases) are only in
# the source of the defining module, where autodoc does not look once ``__module__`` says
# ``trio_agent``. The hooks below read them from there, so the reference never repeats (or
# drifts from) the source.


def _import_sources(public_module: str) -> dict[str, str]:
    """Public name -> the private module it is imported from, for ``public_module``."""
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


def _defining_module(name: str) -> tuple[str, str] | None:
    """``(private module, attribute)`` of the public ``module.attr`` name, if re-exported."""
    public_module, _, attr = name.rpartition(".")
    try:
        source = _import_sources(public_module).get(attr)
    except (ImportError, TypeError, OSError):
        return None
    return (source, attr) if source is not None else None


def _alias_docstring(lines: list[str], source: str, attr: str) -> None:
    docstring = ModuleAnalyzer.for_module(source).find_attr_docs().get(("", attr))
    if docstring:
        # Replaces the docstring of the value's type (``types.UnionType``, ``dict``).
        lines[:] = list(docstring)


def _attribute_docs(cls: type, source: str) -> list[str]:
    """``py:attribute`` entries for the documented attributes of ``cls``: attrs fields (in
    field order, with their type) and attributes documented in ``__init__``."""
    analyzer = ModuleAnalyzer.for_module(source)
    docs = analyzer.find_attr_docs()
    qualname = cls.__name__
    documented = {attr: doc for (owner, attr), doc in docs.items() if owner == qualname}
    fields = {field.name: field for field in attrs.fields(cls)} if attrs.has(cls) else {}
    names = [name for name in fields if not name.startswith("_")]
    names += [name for name in documented if name not in fields and not name.startswith("_")]
    entries: list[str] = []
    for name in names:
        if isinstance(inspect.getattr_static(cls, name, None), property):
            continue  # autodoc documents properties itself
        doc = list(documented.get(name, []))
        entries += ["", f".. py:attribute:: {name}"]
        if name == "type":
            # Dozens of classes have a ``type`` discriminator; as targets they would make
            # every ``type`` in an annotation an ambiguous cross-reference.
            entries.append("   :no-index:")
        field = fields.get(name)
        # The annotation as written (``StreamFn``), not its expansion.
        annotation = inspect.get_annotations(cls).get(name) if field is not None else None
        if annotation is None and field is not None:
            annotation = field.type
        if annotation is None:
            annotation = analyzer.annotations.get((qualname, name))
        if annotation is not None:
            text = (
                annotation
                if isinstance(annotation, str)
                else stringify_annotation(annotation, "smart")
            )
            entries.append(f"   :type: {text}")
        if field is not None and field.default is not attrs.NOTHING:
            entries.append(f"   :value: {_default_text(field.default)}")
        entries.append("")
        if not doc and field is not None and name in ("role", "type"):
            doc = [f"The discriminator (always ``{field.default!r}``)."]
        entries += [f"   {line}" if line else "" for line in doc]
    return entries


def _default_text(default: object) -> str:
    """A readable default: a factory's result instead of attrs' ``NOTHING`` sentinel."""
    if isinstance(default, attrs.Factory):
        factory = default.factory
        if factory is list:
            return "[]"
        if factory is dict:
            return "{}"
        if isinstance(factory, type):
            return f"{factory.__name__}()"
        if factory.__name__ == "<lambda>":
            return repr(factory())
        return f"{factory.__name__}()"
    return repr(default)


def _process_docstring(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    if what not in ("data", "class", "exception"):
        return
    found = _defining_module(name)
    if found is None:
        return
    source, attr = found
    if what == "data":
        _alias_docstring(lines, source, attr)
    elif what in ("class", "exception") and isinstance(obj, type):
        lines += _attribute_docs(obj, source)


def _process_signature(
    app: Sphinx,
    what: str,
    name: str,
    obj: object,
    options: object,
    signature: str | None,
    return_annotation: str | None,
) -> tuple[str | None, str | None] | None:
    if signature is None:
        return signature, return_annotation
    # A function default renders as ``<function f>``, which is no Python.
    signature = re.sub(r"<function (\w+)(?: at 0x[0-9a-f]+)?>", r"\1", signature)
    # attrs gives factory defaults the sentinel ``NOTHING``; say what the factory makes.
    if what == "class" and isinstance(obj, type) and attrs.has(obj):
        for field in attrs.fields(obj):
            if isinstance(field.default, attrs.Factory):
                pattern = rf"(\b{re.escape(field.alias)}\b(?::[^=]*?)?\s*=\s*)NOTHING"
                text = _default_text(field.default)
                signature = re.sub(pattern, lambda m, text=text: m.group(1) + text, signature)
    return signature, return_annotation


# -- Output blocks --------------------------------------------------------------------------
# A ``% output`` comment marks the block after it as the printed output of the example
# before it (tests/test_docs_examples.py compares them); label it as such.


class _LabelOutputBlocks(SphinxTransform):
    default_priority = 500

    def apply(self, **kwargs: object) -> None:
        for comment in list(self.document.findall(nodes.comment)):
            if comment.astext().strip() != "output":
                continue
            block = comment.next_node(nodes.literal_block, siblings=True, descend=False)
            if block is None or block.parent is not comment.parent:
                continue
            label = "输出" if self.env.docname.startswith("zh/") else "Output"
            wrapper = nodes.container("", literal_block=True, classes=["literal-block-wrapper"])
            wrapper += nodes.caption("", label)
            block.replace_self(wrapper)
            wrapper += block
            self.document.set_id(wrapper)  # a captioned block is a numbered target


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-process-signature", _process_signature)
    app.add_transform(_LabelOutputBlocks)
