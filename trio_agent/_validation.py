"""Tool-argument validation: coerce the model's arguments, then check them.

:func:`validate_tool_arguments` does what pi 1.6.0 does: three coercion
passes (optional ``null`` members dropped; conversion by schema keyword; primitive
coercion by ``type``), then a JSON Schema check whose error messages are the upstream
ones, because they are sent back to the model.

The checker supports the subset of JSON Schema (drafts 2020-12 and 7) that tool schemas
use: boolean schemas, ``type`` (also lists), ``enum``, ``const``, ``properties``,
``required``, ``additionalProperties``, ``patternProperties``, ``items`` /
``prefixItems`` / ``additionalItems``, ``anyOf`` / ``oneOf`` / ``allOf`` / ``not``,
``minLength`` / ``maxLength`` / ``pattern`` / ``format``, ``minimum`` / ``maximum`` /
``exclusiveMinimum`` / ``exclusiveMaximum`` / ``multipleOf``, ``minItems`` /
``maxItems`` / ``uniqueItems``, ``minProperties`` / ``maxProperties`` and local
``$ref`` (``#``, ``#/$defs/...``, ``#/definitions/...``, any JSON Pointer into the root).
Other keywords are ignored. ``pattern`` and ``patternProperties`` use Python's :mod:`re`
(searching, like ECMAScript's ``test``), with ``\\d`` read as ``[0-9]`` and a final ``$``
as the end of the text, as in ECMAScript.
"""

from __future__ import annotations

import copy
import decimal
import json
import math
import urllib.parse
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, TypeAlias

from ._coercion import (
    _UNSET,
    _coerce_primitive,
    _convert_primitive,
    _has_type,
    _is_number,
    _json_equal,
    _literal_type,
    _type_name,
    _Unset,
)
from ._exceptions import ToolArgumentsError
from ._jsjson import MAX_ARGUMENTS_DEPTH, depth_exceeds, js_number, js_stringify
from ._json_stream import TOO_DEEP
from ._messages import ToolCall
from ._schema_formats import FORMATS, search
from ._tools import AgentTool

__all__ = ["validate_tool_arguments"]


def validate_tool_arguments(tool: AgentTool, tool_call: ToolCall) -> dict[str, Any]:
    """Coerce and check a tool call's arguments against ``tool.parameters``.

    Works on a deep copy: the tool call (and its ``arguments``) is never modified. Before
    the check, three coercion passes run (values that cannot be coerced are left for the
    check to report):

    1. a ``null`` member that is optional, not a ``$ref`` and not accepted by its schema
       is dropped, as if it had been omitted;
    2. values are converted by the first of the node's ``const``, ``enum``, ``anyOf``,
       ``oneOf``, ``allOf`` and (single) ``type`` keywords (for example ``"42.1"`` or
       ``1.5`` for an integer become ``42`` and ``1``, ``null`` for a string becomes
       ``"null"``, a scalar for a (non-tuple) array is wrapped into a one-item list);
    3. primitives are coerced by ``type``, type lists included, trying the listed types
       in order (``"1"`` for ``["boolean", "number"]`` becomes ``1``).

    Args:
        tool: The tool whose ``parameters`` schema applies.
        tool_call: The call to validate.

    Returns:
        The coerced copy of the arguments.

    Raises:
        ToolArgumentsError: ``tool_call.arguments_error`` is set (message
            ``Invalid arguments for tool "<name>": <error>``), the arguments nest more
            than 100 levels deep (``<error>`` is
            ``JSON nested too deeply (more than 100 levels)``), or the arguments fail the
            check. The message then reads ``Validation failed for tool "<name>":``
            followed by one ``  - <path>: <problem>`` line per problem (``root`` is the
            arguments object itself, nested paths are dotted: ``edits.0.oldText``) and
            ``Received arguments:`` with the original arguments as 2-space-indented JSON.
    """
    if tool_call.arguments_error:
        raise ToolArgumentsError(
            f'Invalid arguments for tool "{tool.name}": {tool_call.arguments_error}'
        )
    if depth_exceeds(tool_call.arguments, MAX_ARGUMENTS_DEPTH):
        # Too deep to copy, check or echo; the model gets an
        # error it can act on instead of a failed response.
        raise ToolArgumentsError(f'Invalid arguments for tool "{tool.name}": {TOO_DEEP}')
    fast = _compiled(tool.parameters)
    if fast is not None:
        try:
            return fast(tool_call.arguments)  # type: ignore[no-any-return]
        except _NotPlain:
            pass  # the interpreter below decides (and words any error)
    schema = _Schema(tool.parameters)
    value: Any = copy.deepcopy(tool_call.arguments)
    schema.drop_optional_nulls(value, schema.root, 0)
    value = schema.convert(value, schema.root, 0)
    value = schema.coerce(value, schema.root, 0)
    errors: list[_Error] = []
    schema.check(value, schema.root, (), errors, 0)
    if not errors:
        return value  # type: ignore[no-any-return]  # the root schema is an object schema
    lines = "\n".join(f"  - {_dotted(path)}: {message}" for path, message in errors)
    # As upstream's JSON.stringify(args, null, 2): numbers in JavaScript form (1.0 -> 1).
    try:
        received = js_stringify(tool_call.arguments, indent=2, default=str)
    except TypeError:  # a non-string key, which JSON text from a provider cannot have
        received = json.dumps(tool_call.arguments, indent=2, ensure_ascii=False, default=str)
    raise ToolArgumentsError(
        f'Validation failed for tool "{tool.name}":\n{lines}\n\nReceived arguments:\n{received}'
    )


def matches_schema(value: Any, schema: dict[str, Any]) -> bool:
    """Whether ``value`` passes the check of ``schema`` as it is (no coercion)."""
    checked = _Schema(schema)
    errors: list[_Error] = []
    checked.check(value, checked.root, (), errors, 0)
    return not errors


# ---------------------------------------------------------------------------------------
# The compiled fast path
#
# Most tool schemas are plain: objects of typed members, arrays, string enums and
# annotations. For such a schema a plan is compiled once (and cached per schema object):
# a tree of closures that copies arguments which already fit it exactly, with no
# coercion to make. On such arguments the three passes above change nothing and the check
# finds nothing, so the result is the deep copy the interpreter would return. The plan
# only ever accepts: anything it is not sure of (a value needing coercion, a missing
# member, an unknown one where none is allowed, a keyword it does not know) raises
# ``_NotPlain``, and the interpreter runs as before, errors and all.


class _NotPlain(Exception):
    """The compiled plan cannot vouch for these arguments; the interpreter decides."""


_Plan: TypeAlias = Callable[[Any], Any]
"""Returns a copy of a value that fits its schema exactly; raises ``_NotPlain`` otherwise."""

# Keywords the interpreter ignores (annotations), besides the ones a plan compiles.
_ANNOTATIONS: Final = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "$comment",
        "$schema",
        "$id",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_PLAN_KEYWORDS: Final = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
}
_PRIMITIVE_TYPES: Final = {
    # What counts as already having the type, with no conversion to make: exact JSON
    # types only (``1.0`` for an integer would become ``1``, ``True`` is no number).
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
_PLAN_DEPTH: Final = 32
"""Schemas nesting deeper than this are left to the interpreter."""
_COPY_DEPTH: Final = 64
"""Values nesting deeper than this (under a schema that accepts anything) likewise."""
_JSON_SCALARS: Final = (str, int, float, bool, type(None))


def _copy_any(value: Any, depth: int = 0) -> Any:
    """A deep copy of a JSON value (dicts with string keys, lists, scalars)."""
    kind = type(value)
    if kind in _JSON_SCALARS:
        return value
    if depth > _COPY_DEPTH:
        raise _NotPlain
    if kind is dict:
        out = {}
        for key, member in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _copy_any(member, depth + 1)
        return out
    if kind is list:
        return [_copy_any(item, depth + 1) for item in value]
    raise _NotPlain


def _compile_plan(schema: Any, depth: int = 0) -> _Plan | None:
    """The plan of ``schema``, or ``None`` if it uses anything a plan does not cover."""
    if schema is True:
        return _copy_any
    if not isinstance(schema, dict) or depth > _PLAN_DEPTH or not schema.keys() <= _PLAN_KEYWORDS:
        return None
    types: tuple[type, ...] | None = None
    if "type" in schema:
        spec = schema["type"]
        names = [spec] if isinstance(spec, str) else spec
        if not isinstance(names, list) or not names:
            return None
        accepted: list[type] = []
        for name in names:
            if not isinstance(name, str) or name not in _PRIMITIVE_TYPES:
                return None
            accepted.extend(_PRIMITIVE_TYPES[name])
        types = tuple(accepted)
    enum: frozenset[str] | None = None
    if "enum" in schema:
        literals = schema["enum"]
        if not (isinstance(literals, list) and all(type(item) is str for item in literals)):
            return None
        enum = frozenset(literals)
    members: dict[str, _Plan] = {}
    if "properties" in schema:
        properties = schema["properties"]
        if not isinstance(properties, dict):
            return None
        for name, member_schema in properties.items():
            member = _compile_plan(member_schema, depth + 1)
            if member is None:
                return None
            members[name] = member
    required: tuple[str, ...] = ()
    if "required" in schema:
        names = schema["required"]
        if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
            return None
        required = tuple(names)
    others: _Plan | None = _copy_any  # None: no other members allowed
    if "additionalProperties" in schema:
        additional = schema["additionalProperties"]
        if additional is False:
            others = None
        else:
            others = _compile_plan(additional, depth + 1)
            if others is None:
                return None
    items: _Plan = _copy_any
    if "items" in schema:
        compiled = _compile_plan(schema["items"], depth + 1)
        if compiled is None:
            return None
        items = compiled
    return _node_plan(types, enum, members, required, others, items)


def _node_plan(
    types: tuple[type, ...] | None,
    enum: frozenset[str] | None,
    members: dict[str, _Plan],
    required: tuple[str, ...],
    others: _Plan | None,
    items: _Plan,
) -> _Plan:
    def plan(value: Any) -> Any:
        kind = type(value)
        if types is not None and kind not in types:
            raise _NotPlain
        if enum is not None:
            if kind is not str or value not in enum:
                raise _NotPlain
            return value
        if kind is dict:
            for name in required:
                if name not in value:
                    raise _NotPlain
            out = {}
            for key, member in value.items():
                member_plan = members.get(key)
                if member_plan is None:
                    if others is None or type(key) is not str:
                        raise _NotPlain
                    member_plan = others
                out[key] = member_plan(member)
            return out
        if kind is list:
            return [items(item) for item in value]
        if kind in _JSON_SCALARS:
            return value
        raise _NotPlain

    return plan


_NOT_COMPARABLE: Final = _Unset()
"""The copy kept for a schema that cannot be copied or compared (see :func:`_compiled`)."""
_PLANS: dict[int, tuple[Any, Any, _Plan | None]] = {}
"""``id(schema)`` -> (the schema, a copy of it as compiled, its plan)."""
_PLANS_LIMIT: Final = 512


def _compiled(schema: Any) -> _Plan | None:
    """The cached plan of ``schema`` (recompiled if the schema was changed in place)."""
    entry = _PLANS.get(id(schema))
    if entry is not None and entry[0] is schema:
        if entry[1] is _NOT_COMPARABLE:
            return None
        try:
            if entry[1] == schema:
                return entry[2]
        except RecursionError:  # a cycle
            _PLANS[id(schema)] = (schema, _NOT_COMPARABLE, None)
            return None
    plan: _Plan | None
    try:
        plan = _compile_plan(schema)
        snapshot: Any = copy.deepcopy(schema)
    except RecursionError:
        # Nested past the interpreter's limit, or a cycle: never plain, and not compared
        # again (a copy of it is out of reach too).
        plan, snapshot = None, _NOT_COMPARABLE
    if len(_PLANS) >= _PLANS_LIMIT:
        _PLANS.clear()
    _PLANS[id(schema)] = (schema, snapshot, plan)
    return plan


# ---------------------------------------------------------------------------------------
# Errors

_Path: TypeAlias = tuple[str | int, ...]
_Error: TypeAlias = tuple[_Path, str]
"""``(path, message)``."""


_CYCLE: Final = _Unset()  # a $ref already being expanded for the same value


def _dotted(path: _Path) -> str:
    return ".".join(str(part) for part in path) if path else "root"


# ---------------------------------------------------------------------------------------
# The schema walker

# Schema nesting (including $ref hops) deeper than this is reported as ``invalid``
# instead of exhausting the interpreter's stack.
_MAX_DEPTH: Final = 200
_ENUM_SHOWN: Final = 20

_Converter: TypeAlias = Callable[[Any, Any, int], Any]


def _as_dict(schema: Any, key: str) -> dict[str, Any]:
    value = schema.get(key)
    return value if isinstance(value, dict) else {}


def _tuple_schemas(schema: dict[str, Any]) -> tuple[list[Any] | None, Any]:
    """``(positional schemas or None, schema of the remaining items)`` of an array
    schema, for both the 2020-12 (``prefixItems``/``items``) and draft 7
    (``items`` list/``additionalItems``) spellings."""
    prefix = schema.get("prefixItems")
    items = schema.get("items", True)
    if isinstance(prefix, list):
        return prefix, items
    if isinstance(items, list):
        return items, schema.get("additionalItems", True)
    return None, items


class _Schema:
    """One validation run over a root schema (``$ref`` targets resolve against it)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        # (schema id, value id) pairs whose $ref is being expanded: re-entering one means
        # a reference cycle that consumes no data, which cannot fail by itself.
        self._expanding: set[tuple[int, int]] = set()

    def resolve(self, ref: Any) -> Any:
        """The schema a local ``$ref`` points to, or ``_UNSET``."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return _UNSET
        fragment = urllib.parse.unquote(ref[1:])
        node: Any = self.root
        if fragment:
            if not fragment.startswith("/"):
                return _UNSET
            for token in fragment[1:].split("/"):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and token in node:
                    node = node[token]
                elif (
                    isinstance(node, list)
                    and token.isascii()
                    and token.isdigit()
                    and int(token) < len(node)
                ):
                    node = node[int(token)]
                else:
                    return _UNSET
        return node if isinstance(node, dict | bool) else _UNSET

    def _with_ref(self, schema: dict[str, Any], value: Any, fn: Callable[[Any], Any]) -> Any:
        """Apply ``fn`` to the target of ``schema``'s ``$ref`` unless that would re-enter
        a reference already being expanded for this value (then ``_CYCLE``); ``_UNSET``
        if the reference does not resolve."""
        target = self.resolve(schema["$ref"])
        if target is _UNSET:
            return _UNSET
        key = (id(target), id(value))
        if key in self._expanding:
            return _CYCLE
        self._expanding.add(key)
        try:
            return fn(target)
        finally:
            self._expanding.discard(key)

    def is_valid(self, value: Any, schema: Any, depth: int = 0) -> bool:
        errors: list[_Error] = []
        self.check(value, schema, (), errors, depth)
        return not errors

    # -- pass 1: optional nulls --------------------------------------------------------

    def drop_optional_nulls(self, value: Any, schema: Any, depth: int) -> None:
        """Delete optional ``null`` members the schema would reject (in place)."""
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return
        if "$ref" in schema:
            self._with_ref(schema, value, lambda t: self.drop_optional_nulls(value, t, depth + 1))
        for branch in schema.get("allOf") or ():
            self.drop_optional_nulls(value, branch, depth + 1)
        if isinstance(value, dict):
            properties = _as_dict(schema, "properties")
            required_list = schema.get("required")
            required = (
                {name for name in required_list or () if isinstance(name, str)}
                if isinstance(required_list, list)
                else set()
            )
            for key in list(value):
                if key not in properties:
                    continue
                member_schema = properties[key]
                if (
                    value[key] is None
                    and key not in required
                    and not (isinstance(member_schema, dict) and "$ref" in member_schema)
                    and not self.is_valid(None, member_schema, depth + 1)
                ):
                    del value[key]
                else:
                    self.drop_optional_nulls(value[key], member_schema, depth + 1)
        elif isinstance(value, list):
            positional, rest = _tuple_schemas(schema)
            for index, item in enumerate(value):
                if positional is not None and index < len(positional):
                    self.drop_optional_nulls(item, positional[index], depth + 1)
                else:
                    self.drop_optional_nulls(item, rest, depth + 1)

    # -- pass 2: conversion by keyword ---------------------------------------------------

    def convert(self, value: Any, schema: Any, depth: int) -> Any:
        """TypeBox-style conversion by the node's first applicable keyword."""
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return value
        if "$ref" in schema:
            converted = self._with_ref(schema, value, lambda t: self.convert(value, t, depth + 1))
            if converted is not _UNSET and converted is not _CYCLE:
                value = converted
        if "const" in schema:
            return self._convert_literal(value, [schema["const"]], schema, depth)
        if isinstance(schema.get("enum"), list):
            return self._convert_literal(value, schema["enum"], schema, depth)
        for keyword in ("anyOf", "oneOf"):
            if isinstance(schema.get(keyword), list):
                return self._convert_union(value, schema[keyword], schema, depth, self.convert)
        if isinstance(schema.get("allOf"), list):
            for branch in schema["allOf"]:
                value = self.convert(value, branch, depth + 1)
            return value
        type_name = schema.get("type")
        if isinstance(type_name, str):
            value = _convert_primitive(value, type_name)
            if type_name == "array" and not isinstance(value, list):
                if _tuple_schemas(schema)[0] is not None:
                    return value  # tuples never wrap
                value = [value]
        # Type lists are left to pass 3, which tries the listed types in order.
        return self._walk(value, schema, depth, self.convert)

    def _convert_literal(
        self, value: Any, literals: list[Any], schema: dict[str, Any], depth: int
    ) -> Any:
        if any(_json_equal(value, literal) for literal in literals):
            return value
        for literal in literals:
            type_name = _literal_type(literal)
            if type_name is None or type_name == "null":
                continue  # nothing is converted to a null literal (as upstream)
            converted = _convert_primitive(value, type_name)
            if _json_equal(converted, literal) and self.is_valid(literal, schema, depth + 1):
                return literal
        return value

    def _convert_union(
        self,
        value: Any,
        branches: list[Any],
        schema: dict[str, Any],
        depth: int,
        converter: _Converter,
    ) -> Any:
        if any(self.is_valid(value, branch, depth + 1) for branch in branches):
            return value
        # As upstream: a keyword conversion (pass 2) is kept only if the whole node then
        # accepts the value; a type coercion (pass 3) as soon as some branch does, even
        # when it then matches several branches of a ``oneOf`` (which the check reports).
        whole = converter == self.convert
        for branch in branches:
            converted = converter(copy.deepcopy(value), branch, depth + 1)
            if whole:
                if self.is_valid(converted, schema, depth + 1):
                    return converted
            elif any(self.is_valid(converted, other, depth + 1) for other in branches):
                return converted
        return value

    def _walk(self, value: Any, schema: dict[str, Any], depth: int, converter: _Converter) -> Any:
        """Apply ``converter`` to the members or items of a container (in place)."""
        if isinstance(value, dict):
            properties = _as_dict(schema, "properties")
            patterns = _as_dict(schema, "patternProperties")
            additional = schema.get("additionalProperties")
            for key in list(value):
                matched = False
                if key in properties:
                    value[key] = converter(value[key], properties[key], depth + 1)
                    matched = True
                for pattern, member_schema in patterns.items():
                    if search(pattern, key):
                        value[key] = converter(value[key], member_schema, depth + 1)
                        matched = True
                if not matched and isinstance(additional, dict):
                    value[key] = converter(value[key], additional, depth + 1)
        elif isinstance(value, list):
            positional, rest = _tuple_schemas(schema)
            for index, item in enumerate(value):
                if positional is not None and index < len(positional):
                    value[index] = converter(item, positional[index], depth + 1)
                elif isinstance(rest, dict):
                    value[index] = converter(item, rest, depth + 1)
        return value

    # -- pass 3: primitive coercion by type ----------------------------------------------

    def coerce(self, value: Any, schema: Any, depth: int) -> Any:
        """AJV-style coercion: a primitive matching none of the node's types becomes the
        first listed type it can be coerced to."""
        if not isinstance(schema, dict) or depth > _MAX_DEPTH:
            return value
        if "$ref" in schema:
            coerced = self._with_ref(schema, value, lambda t: self.coerce(value, t, depth + 1))
            if coerced is not _UNSET and coerced is not _CYCLE:
                value = coerced
        type_spec = schema.get("type")
        types = [type_spec] if isinstance(type_spec, str) else type_spec
        if isinstance(types, list) and not any(_has_type(value, t) for t in types):
            for type_name in types:
                coerced = _coerce_primitive(value, type_name)
                if coerced is not _UNSET:
                    value = coerced
                    break
        for branch in schema.get("allOf") or ():
            value = self.coerce(value, branch, depth + 1)
        for keyword in ("anyOf", "oneOf"):
            if isinstance(schema.get(keyword), list):
                value = self._convert_union(value, schema[keyword], schema, depth, self.coerce)
        return self._walk(value, schema, depth, self.coerce)

    # -- the check -----------------------------------------------------------------------

    def check(self, value: Any, schema: Any, path: _Path, errors: list[_Error], depth: int) -> None:
        """Append one error per failing keyword of ``schema`` (and its subschemas)."""
        if not isinstance(schema, dict):
            if schema is False:
                errors.append((path, "no value is allowed here"))
            return  # ``true`` (and anything that is not a schema) accepts every value
        if depth > _MAX_DEPTH:
            errors.append((path, "invalid"))
            return
        type_spec = schema.get("type")
        types = [type_spec] if isinstance(type_spec, str) else type_spec
        if isinstance(types, list) and types and not any(_has_type(value, t) for t in types):
            expected = " or ".join(str(t) for t in types)
            errors.append((path, f"expected {expected}, got {_type_name(value)}"))
            return  # a node of the wrong type is not checked further
        if "$ref" in schema:

            def check_target(target: Any) -> bool:
                self.check(value, target, path, errors, depth + 1)
                return True

            if self._with_ref(schema, value, check_target) is _UNSET:
                errors.append((path, f"unresolved reference {schema['$ref']}"))
        if "const" in schema and not _json_equal(value, schema["const"]):
            errors.append((path, f"expected {js_stringify(schema['const'])}"))
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(_json_equal(value, item) for item in enum):
            errors.append((path, f"expected one of {_format_enum(enum)}"))
        if isinstance(value, str):
            self._check_string(value, schema, path, errors)
        elif _is_number(value):
            self._check_number(value, schema, path, errors)
        elif isinstance(value, list):
            self._check_array(value, schema, path, errors, depth)
        elif isinstance(value, dict):
            self._check_object(value, schema, path, errors, depth)
        self._check_combinators(value, schema, path, errors, depth)

    def _check_string(
        self, value: str, schema: dict[str, Any], path: _Path, errors: list[_Error]
    ) -> None:
        min_length = schema.get("minLength")
        if _is_number(min_length) and len(value) < min_length:
            errors.append((path, f"expected at least {js_number(min_length)} characters"))
        max_length = schema.get("maxLength")
        if _is_number(max_length) and len(value) > max_length:
            errors.append((path, f"expected at most {js_number(max_length)} characters"))
        if "pattern" in schema:
            matched = search(schema["pattern"], value)
            if matched is None:
                errors.append((path, "invalid"))
            elif not matched:
                errors.append((path, f"expected to match {schema['pattern']}"))
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in FORMATS and not FORMATS[fmt](value):
            errors.append((path, f"expected format {fmt}"))

    def _check_number(
        self, value: float, schema: dict[str, Any], path: _Path, errors: list[_Error]
    ) -> None:
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        exclusive_min, exclusive_max = (
            schema.get("exclusiveMinimum"),
            schema.get("exclusiveMaximum"),
        )
        if _is_number(minimum):
            if exclusive_min is True:  # draft 4 spelling
                if value <= minimum:
                    errors.append((path, f"expected > {js_number(minimum)}"))
            elif value < minimum:
                errors.append((path, f"expected >= {js_number(minimum)}"))
        if _is_number(maximum):
            if exclusive_max is True:
                if value >= maximum:
                    errors.append((path, f"expected < {js_number(maximum)}"))
            elif value > maximum:
                errors.append((path, f"expected <= {js_number(maximum)}"))
        if _is_number(exclusive_min) and value <= exclusive_min:
            errors.append((path, f"expected > {js_number(exclusive_min)}"))
        if _is_number(exclusive_max) and value >= exclusive_max:
            errors.append((path, f"expected < {js_number(exclusive_max)}"))
        multiple_of = schema.get("multipleOf")
        if _is_number(multiple_of) and multiple_of > 0 and not _is_multiple(value, multiple_of):
            errors.append((path, f"expected a multiple of {js_number(multiple_of)}"))

    def _check_array(
        self,
        value: list[Any],
        schema: dict[str, Any],
        path: _Path,
        errors: list[_Error],
        depth: int,
    ) -> None:
        min_items, max_items = schema.get("minItems"), schema.get("maxItems")
        if _is_number(min_items) and len(value) < min_items:
            errors.append((path, f"expected at least {js_number(min_items)} items"))
        if _is_number(max_items) and len(value) > max_items:
            errors.append((path, f"expected at most {js_number(max_items)} items"))
        if schema.get("uniqueItems") is True and not _all_unique(value):
            errors.append((path, "expected unique items"))
        positional, rest = _tuple_schemas(schema)
        for index, item in enumerate(value):
            if positional is not None and index < len(positional):
                item_schema = positional[index]
            else:
                item_schema = rest
            self.check(item, item_schema, (*path, index), errors, depth + 1)

    def _check_object(
        self,
        value: dict[str, Any],
        schema: dict[str, Any],
        path: _Path,
        errors: list[_Error],
        depth: int,
    ) -> None:
        required = schema.get("required")
        if isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in value:
                    errors.append(((*path, name), "missing"))
        properties = _as_dict(schema, "properties")
        patterns = _as_dict(schema, "patternProperties")
        additional = schema.get("additionalProperties", True)
        # Upstream's order: declared properties in the schema's order, then the value's
        # other members in the value's order.
        declared = [key for key in properties if key in value]
        others = [key for key in value if key not in properties]
        for key in declared + others:
            member = value[key]
            member_path = (*path, key)
            matched = False
            if key in properties:
                self.check(member, properties[key], member_path, errors, depth + 1)
                matched = True
            for pattern, member_schema in patterns.items():
                if search(pattern, key):
                    self.check(member, member_schema, member_path, errors, depth + 1)
                    matched = True
            if not matched:
                if additional is False:
                    errors.append((member_path, "unknown field"))
                else:
                    self.check(member, additional, member_path, errors, depth + 1)
        min_properties, max_properties = schema.get("minProperties"), schema.get("maxProperties")
        if _is_number(min_properties) and len(value) < min_properties:
            count = js_number(min_properties)
            errors.append((path, f"expected at least {count} properties"))
        if _is_number(max_properties) and len(value) > max_properties:
            count = js_number(max_properties)
            errors.append((path, f"expected at most {count} properties"))

    def _union_errors(
        self,
        value: Any,
        branches: list[Any],
        failures: list[tuple[Any, list[_Error]]],
        path: _Path,
    ) -> list[_Error]:
        """The errors of a union that no branch accepts.

        A union of object schemas that all give one property a ``const`` is
        discriminated by it, as upstream: an object whose property matches no branch's
        constant (or lacks it) gets ``<path>.<property>: expected one of [<constants>]``;
        otherwise the branches with its constant compete. Other unions report their best
        branch (:meth:`_best_alternative`).
        """
        discriminator = self._discriminator(branches) if isinstance(value, dict) else None
        if discriminator is not None:
            name, constants = discriminator
            if name in value:
                matching = [
                    failure
                    for failure, constant in zip(failures, constants, strict=False)
                    if _json_equal(value[name], constant)
                ]
                # ``failures`` lists every branch here: none passed.
                if matching:
                    return self._best_alternative(value, matching, path)
            shown: list[Any] = []
            for constant in constants:
                if not any(_json_equal(constant, seen) for seen in shown):
                    shown.append(constant)
            return [((*path, name), f"expected one of {_format_enum(shown)}")]
        return self._best_alternative(value, failures, path)

    def _discriminator(self, branches: list[Any]) -> tuple[str, list[Any]] | None:
        """``(property, constant per branch)`` when every branch is an object schema whose
        ``properties`` give that property a ``const``; ``None`` otherwise."""
        if not branches:
            return None
        all_properties: list[dict[str, Any]] = []
        for branch in branches:
            if isinstance(branch, dict) and "$ref" in branch and "properties" not in branch:
                branch = self.resolve(branch["$ref"])
            properties = branch.get("properties") if isinstance(branch, dict) else None
            if not isinstance(properties, dict):
                return None
            all_properties.append(properties)
        for name, member in all_properties[0].items():
            if not (isinstance(member, dict) and "const" in member):
                continue
            constants = []
            for properties in all_properties:
                candidate = properties.get(name)
                if not (isinstance(candidate, dict) and "const" in candidate):
                    break
                constants.append(candidate["const"])
            else:
                return name, constants
        return None

    def _best_alternative(
        self, value: Any, failures: list[tuple[Any, list[_Error]]], path: _Path
    ) -> list[_Error]:
        """The errors of the union branch that came closest (as pi 1.6.0 does).

        The best branch declares the most of the value's keys in its ``properties``; among
        those, the one whose first error lies deepest; among those, the first. ``matches no
        alternative`` is left for a union without any failing branch (``anyOf: []``).
        """
        if not failures:
            return [(path, "matches no alternative")]

        def score(failure: tuple[Any, list[_Error]]) -> tuple[int, int]:
            branch, branch_errors = failure
            return self._declared_keys(value, branch), len(branch_errors[0][0])

        best = failures[0]
        best_score = score(best)
        for failure in failures[1:]:
            failure_score = score(failure)
            if failure_score > best_score:
                best, best_score = failure, failure_score
        return best[1]

    def _declared_keys(self, value: Any, branch: Any) -> int:
        """How many of an object value's keys ``branch`` declares in ``properties``
        (through one local ``$ref``); 0 for other values."""
        if not isinstance(value, dict) or not isinstance(branch, dict):
            return 0
        properties = branch.get("properties")
        if not isinstance(properties, dict) and "$ref" in branch:
            target = self.resolve(branch["$ref"])
            properties = target.get("properties") if isinstance(target, dict) else None
        if not isinstance(properties, dict):
            return 0
        return sum(1 for key in value if key in properties)

    def _check_combinators(
        self, value: Any, schema: dict[str, Any], path: _Path, errors: list[_Error], depth: int
    ) -> None:
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            for branch in all_of:
                self.check(value, branch, path, errors, depth + 1)
        for keyword in ("anyOf", "oneOf"):
            branches = schema.get(keyword)
            if not isinstance(branches, list):
                continue
            failures: list[tuple[Any, list[_Error]]] = []
            passing = 0
            for branch in branches:
                branch_errors: list[_Error] = []
                self.check(value, branch, path, branch_errors, depth + 1)
                if not branch_errors:
                    passing += 1
                    if keyword == "anyOf":
                        break
                else:
                    failures.append((branch, branch_errors))
            if passing > 1:
                errors.append((path, "matches more than one alternative"))
            elif passing == 0:
                errors.extend(self._union_errors(value, branches, failures, path))
        if "not" in schema and self.is_valid(value, schema["not"], depth + 1):
            errors.append((path, "must not match the schema in not"))


def _format_enum(values: list[Any]) -> str:
    if len(values) <= _ENUM_SHOWN:
        return js_stringify(values)
    shown = ",".join(js_stringify(item) for item in values[:_ENUM_SHOWN])
    return f"[{shown}, ... and {len(values) - _ENUM_SHOWN} more]"


def _is_multiple(value: float, divisor: float) -> bool:
    if isinstance(value, int) and isinstance(divisor, int):
        return value % divisor == 0
    if not (math.isfinite(value) and math.isfinite(divisor)):
        return False
    # Decimal arithmetic on the shortest decimal forms, so 0.3 is a multiple of 0.1; the
    # precision covers every quotient of two floats (exponents span about 630 digits).
    with decimal.localcontext() as context:
        context.prec = 700
        try:
            return Decimal(repr(value)) % Decimal(repr(divisor)) == 0
        except decimal.DecimalException:
            return False


def _all_unique(items: list[Any]) -> bool:
    for index, item in enumerate(items):
        if any(_json_equal(item, other) for other in items[index + 1 :]):
            return False
    return True
