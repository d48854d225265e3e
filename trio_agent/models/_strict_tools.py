"""Strict (JSON-schema constrained) tools for the providers that support them.

A tool asks for constrained sampling with ``constrained_sampling={"type": "json_schema",
"strict": "prefer" | "require"}``. A provider in strict mode only accepts a restricted
schema: every object lists all its properties in ``required`` and forbids others, and an
optional property is expressed as "may be null". :func:`strict_tool_schema` converts a
schema to that form, or says why it cannot; :func:`strict_schema_for` applies the
``prefer``/``require`` rule for one tool.
"""

from __future__ import annotations

from typing import Any

from .._messages import ToolDeclaration

__all__ = ["StrictSchemaError", "strict_schema_for", "strict_tool_schema", "wants_strict"]

_UNSUPPORTED_KEYWORDS = (
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "not",
    "if",
    "then",
    "else",
    "prefixItems",
)


class StrictSchemaError(ValueError):
    """A schema that strict mode cannot express (the message says why)."""


def wants_strict(tool: ToolDeclaration) -> bool:
    """Whether ``tool`` asks for JSON-schema constrained sampling."""
    sampling = tool.constrained_sampling
    return isinstance(sampling, dict) and sampling.get("type") == "json_schema"


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    enum = schema.get("enum")
    if ("const" in schema and schema["const"] is None) or (isinstance(enum, list) and None in enum):
        return True
    branches = schema.get("anyOf")
    return isinstance(branches, list) and any(
        isinstance(branch, dict) and _allows_null(branch) for branch in branches
    )


def _convert(schema: Any, path: str) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise StrictSchemaError(f"{path} is not a schema object")
    for keyword in _UNSUPPORTED_KEYWORDS:
        if keyword in schema:
            raise StrictSchemaError(f"{path} uses {keyword}")
    result = dict(schema)
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            raise StrictSchemaError(f"{path} has an invalid anyOf")
        converted = []
        for position, branch in enumerate(branches):
            where = f"{path}.anyOf[{position}]"
            if isinstance(branch, dict) and branch.get("type") in ("object", "array"):
                raise StrictSchemaError(f"{where} is an {branch['type']} branch")
            converted.append(_convert(branch, where))
        result["anyOf"] = converted
        return result
    kind = schema.get("type")
    if kind is None:
        if "enum" in schema:
            return result  # a bare enum counts as typed; a bare const does not
        raise StrictSchemaError(f"{path} has no type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        extra = schema.get("additionalProperties", False)
        if extra is not False:
            raise StrictSchemaError(f"{path} allows additional properties")
        properties = schema.get("properties") or {}
        if not isinstance(properties, dict):
            raise StrictSchemaError(f"{path} has invalid properties")
        required = schema.get("required") or []
        new_properties: dict[str, Any] = {}
        for name, member in properties.items():
            converted_member = _convert(member, f"{path}.{name}")
            if name not in required and not _allows_null(converted_member):
                converted_member = {"anyOf": [converted_member, {"type": "null"}]}
            new_properties[name] = converted_member
        result["properties"] = new_properties
        result["required"] = list(properties)
        result["additionalProperties"] = False
    if "array" in kinds and "items" in schema:
        items = schema["items"]
        if isinstance(items, list):
            raise StrictSchemaError(f"{path} is a tuple")
        result["items"] = _convert(items, f"{path}.items")
    return result


def strict_tool_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` converted for strict mode.

    Every object lists all its properties in ``required`` and gets
    ``additionalProperties: false``; an optional property that does not already allow
    null becomes ``{"anyOf": [<schema>, {"type": "null"}]}``. The conversion recurses into
    properties, ``items`` and ``anyOf``.

    Raises:
        StrictSchemaError: the schema uses ``$ref``, ``$defs``, ``allOf``, ``oneOf``,
            ``patternProperties``, ``not``, ``if``/``then``/``else`` or tuples, has a node
            without a type, an object or array branch in ``anyOf``, or
            ``additionalProperties`` other than false.
    """
    return _convert(parameters, "parameters")


def strict_schema_for(
    tool: ToolDeclaration, *, supported: bool, provider: str
) -> dict[str, Any] | None:
    """The strict schema to send for ``tool``, or ``None`` to send it as a normal tool.

    Only a tool that asks for JSON-schema constrained sampling, on a model that supports
    strict mode, with a convertible schema, is strict.

    Raises:
        ValueError: the tool's ``strict`` is ``"require"`` and it cannot be strict:
            ``Tool "<name>" requires JSON-schema constrained sampling, but <reason>.``
    """
    if not wants_strict(tool):
        return None
    reason: str
    if not supported:
        reason = f"{provider} does not support strict tools for this model"
    else:
        try:
            return strict_tool_schema(tool.parameters)
        except StrictSchemaError as exc:
            reason = f"its schema cannot be made strict ({exc})"
    if tool.constrained_sampling.get("strict") == "require":
        raise ValueError(
            f'Tool "{tool.name}" requires JSON-schema constrained sampling, but {reason}.'
        )
    return None
