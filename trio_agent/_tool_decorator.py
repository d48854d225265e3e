"""``trio_agent.tool``: build an :class:`~trio_agent.AgentTool` from a typed ``async def``.

Beyond upstream: the JSON Schema of the parameters comes from the annotations and
the descriptions from the Google-style docstring, so users need not hand-write schemas.

Supported annotations and their schemas:

==========================  =========================================================
``str`` / ``int``           ``{"type": "string"}`` / ``{"type": "integer"}``
``float`` / ``bool``        ``{"type": "number"}`` / ``{"type": "boolean"}``
``Literal["a", "b"]``       ``{"type": "string", "enum": ["a", "b"]}`` (``type`` only
                            when every value has the same JSON type)
``list[X]`` / ``list``      ``{"type": "array", "items": <X>}`` / ``{"type": "array"}``
``dict[str, X]`` / ``dict`` ``{"type": "object", "additionalProperties": <X>}`` /
                            ``{"type": "object"}``
``X | None``                with a default: ``<X>`` and not required (the validator drops
                            a ``null`` given for an optional property, so the default
                            applies); without one: ``{"anyOf": [<X>, {"type": "null"}]}``
``X | Y | ...``             ``{"anyOf": [<X>, <Y>, ...]}``; a value becomes the first
                            member whose schema and conversion accept it
an ``Enum``                 the ``enum`` of its values (the argument becomes the member)
a dataclass / ``TypedDict`` an object schema from its fields, like an attrs class (a
                            ``TypedDict`` argument stays a ``dict``)
a pydantic model            its ``model_json_schema()``, built with ``model_validate``
                            (only when the application imported pydantic)
an attrs class              ``{"type": "object", "properties": ..., "required": ...,
                            "additionalProperties": false}`` from its fields (init
                            names); descriptions from its docstring's ``Attributes:``;
                            the argument is built into an instance before the call
==========================  =========================================================
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeAlias, overload

import attrs

from ._abort import AbortSignal
from ._exceptions import ToolArgumentsError
from ._messages import TextContent, ToolExecutionMode
from ._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._validation import matches_schema

__all__ = ["tool"]

ToolFunction: TypeAlias = Callable[..., Awaitable[Any]]
"""An ``async def`` whose parameters become the tool's arguments."""

_Convert: TypeAlias = Callable[[Any], Any]
"""Turns a validated JSON argument into the Python value the function expects."""


def _identity(value: Any) -> Any:
    return value


def _to_float(value: Any) -> Any:
    # JSON has one number type: ``3`` for a float parameter arrives as an int.
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _Unsupported(Exception):
    """An annotation (possibly nested in the parameter's annotation) has no schema."""

    def __init__(self, annotation: Any, reason: str | None = None) -> None:
        super().__init__(annotation)
        self.annotation = annotation
        self.reason = reason


def _type_repr(annotation: Any) -> str:
    """``datetime.datetime``, ``int``, ``list[set[int]]``: how a user would write it."""
    if isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias):
        if annotation.__module__ == "builtins":
            return annotation.__qualname__
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation)


# ---------------------------------------------------------------------------------------
# Docstrings (Google style)

# Only the Google-style section names end the description: a free-text line such as
# "Supported units:" is part of it.
_SECTION_NAMES = frozenset(
    {
        *("Args", "Arguments", "Parameters", "Params"),
        "Attributes",
        *("Returns", "Return"),
        "Raises",
        *("Yields", "Yield"),
        *("Example", "Examples"),
        *("Note", "Notes"),
        *("Warning", "Warnings"),
        "See Also",
        "Todo",
    }
)
_SECTION_HEADER = re.compile(r"^(" + "|".join(sorted(_SECTION_NAMES)) + r"):\s*$")
_PARAMETER_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None, section_names: frozenset[str]) -> tuple[str, dict[str, str]]:
    """Split a cleaned docstring into its description and the entries of one section kind.

    The description is the text before the first section header (summary and extended
    description, paragraphs kept); a header is a known Google-style section name (see
    ``_SECTION_NAMES``) followed by a colon, alone on an unindented line. Entries are
    ``name (type): text`` lines of a section named in ``section_names``; more-indented
    lines continue the entry.
    """
    if not doc:
        return "", {}
    lines = doc.splitlines()
    description: list[str] = []
    entries: dict[str, str] = {}
    index = 0
    while index < len(lines) and not _SECTION_HEADER.match(lines[index]):
        description.append(lines[index])
        index += 1
    while index < len(lines):
        header = _SECTION_HEADER.match(lines[index])
        index += 1
        if header is None:
            continue
        wanted = header.group(1) in section_names
        entry_indent: int | None = None
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if line.strip() and not line[:1].isspace():
                break  # the next section (or stray text) at column 0
            index += 1
            if not wanted or not line.strip():
                continue
            indent = len(line) - len(line.lstrip())
            if entry_indent is None:
                entry_indent = indent
            match = _ENTRY.match(line.strip()) if indent <= entry_indent else None
            if match is not None:
                current = match.group(1)
                entries[current] = match.group(2).strip()
            elif current is not None:
                entries[current] = f"{entries[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), entries


# ---------------------------------------------------------------------------------------
# Annotations -> (schema, converter)


@attrs.frozen
class _Spec:
    schema: dict[str, Any]
    convert: _Convert


_LITERAL_TYPES: dict[type[Any], str] = {str: "string", int: "integer", bool: "boolean"}


def _spec(annotation: Any, building: tuple[type[Any], ...] = ()) -> _Spec:
    if annotation is str:
        return _Spec({"type": "string"}, _identity)
    if annotation is bool:
        return _Spec({"type": "boolean"}, _identity)
    if annotation is int:
        return _Spec({"type": "integer"}, _identity)
    if annotation is float:
        return _Spec({"type": "number"}, _to_float)
    if annotation is list:
        return _Spec({"type": "array"}, _identity)
    if annotation is dict:
        return _Spec({"type": "object"}, _identity)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return _literal_spec(annotation, args)
    if origin is list and len(args) == 1:
        item = _spec(args[0], building)
        item_convert = item.convert
        convert_list: _Convert = (
            _identity
            if item_convert is _identity
            else lambda value: [item_convert(element) for element in value]
        )
        return _Spec({"type": "array", "items": item.schema}, convert_list)
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            raise _Unsupported(annotation, "dictionary keys must be str")
        value_spec = _spec(args[1], building)
        value_convert = value_spec.convert
        convert_dict: _Convert = (
            _identity
            if value_convert is _identity
            else lambda value: {key: value_convert(item) for key, item in value.items()}
        )
        return _Spec({"type": "object", "additionalProperties": value_spec.schema}, convert_dict)
    if origin in (typing.Union, types.UnionType):
        members = [member for member in args if member is not type(None)]
        if len(members) == 1 and len(args) == 2:
            inner = _spec(members[0], building)
            inner_convert = inner.convert
            return _Spec(
                {"anyOf": [inner.schema, {"type": "null"}]},
                lambda value: None if value is None else inner_convert(value),
            )
        return _union_spec(args, building)
    if isinstance(annotation, type) and attrs.has(annotation):
        return _attrs_spec(annotation, building)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return _enum_spec(annotation)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return _dataclass_spec(annotation, building)
    if typing.is_typeddict(annotation):
        return _typeddict_spec(annotation, building)
    if _is_pydantic_model(annotation):
        return _pydantic_spec(annotation)
    raise _Unsupported(annotation)


def _union_spec(members: tuple[Any, ...], building: tuple[type[Any], ...]) -> _Spec:
    """``A | B | ...``: any of the members' schemas; a value becomes the first member
    whose conversion and schema accept it."""
    specs = [
        _Spec({"type": "null"}, _identity) if member is type(None) else _spec(member, building)
        for member in members
    ]

    def convert(value: Any) -> Any:
        problems = []
        for spec in specs:
            if not matches_schema(value, spec.schema):
                continue
            try:
                return spec.convert(value)
            except (ToolArgumentsError, TypeError, ValueError) as exc:
                problems.append(str(exc))
        raise ToolArgumentsError(
            f"{json.dumps(value)} matches no member of the union"
            + (f" ({'; '.join(problems)})" if problems else "")
        )

    return _Spec({"anyOf": [spec.schema for spec in specs]}, convert)


def _enum_spec(cls: type[enum.Enum]) -> _Spec:
    values = [member.value for member in cls]
    literal = _literal_spec(cls, tuple(values))
    return _Spec(literal.schema, cls)


def _fields_spec(
    cls: Any,
    fields: list[tuple[str, Any, bool, Any]],
    building: tuple[type[Any], ...],
    build: Callable[[dict[str, Any]], Any],
) -> _Spec:
    """An object schema for ``(name, annotation, has_default, default)`` fields; a value
    is converted field by field, then built with ``build``."""
    if cls in building:
        raise _Unsupported(cls, "recursive classes are not supported")
    _, descriptions = _parse_docstring(inspect.getdoc(cls), frozenset({"Attributes"}))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, _Convert] = {}
    for name, annotation, has_default, default in fields:
        try:
            spec = _property_spec(annotation, has_default, default, (*building, cls))
        except _Unsupported as exc:
            reason = f"field {name!r}: {_type_repr(exc.annotation)}"
            if exc.reason:
                reason += f" ({exc.reason})"
            raise _Unsupported(cls, reason) from None
        properties[name] = _described(spec.schema, descriptions.get(name))
        converters[name] = spec.convert
        if not has_default:
            required.append(name)

    def convert(value: Any) -> Any:
        if not isinstance(value, dict):
            raise ToolArgumentsError(
                f"expected an object for {cls.__name__}, got {json.dumps(value)}"
            )
        unknown = [key for key in value if key not in converters]
        if unknown:
            names = ", ".join(repr(key) for key in unknown)
            raise ToolArgumentsError(f"unknown field(s) {names} for {cls.__name__}")
        missing = [key for key in required if key not in value]
        if missing:
            names = ", ".join(repr(key) for key in missing)
            raise ToolArgumentsError(f"missing field(s) {names} for {cls.__name__}")
        return build({key: converters[key](item) for key, item in value.items()})

    return _Spec(_object_schema(properties, required), convert)


def _dataclass_spec(cls: type[Any], building: tuple[type[Any], ...]) -> _Spec:
    hints = _hints(cls)
    fields = [
        (
            field.name,
            hints[field.name],
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING,
            field.default if field.default is not dataclasses.MISSING else None,
        )
        for field in dataclasses.fields(cls)
        if field.init
    ]
    return _fields_spec(cls, fields, building, lambda values: cls(**values))


def _typeddict_spec(cls: Any, building: tuple[type[Any], ...]) -> _Spec:
    hints = _hints(cls)
    required_keys = getattr(cls, "__required_keys__", frozenset(hints))
    fields = [(name, hints[name], name not in required_keys, None) for name in hints]
    return _fields_spec(cls, fields, building, dict)


def _hints(cls: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as exc:
        raise _Unsupported(cls, f"cannot resolve its annotations ({exc})") from None


def _is_pydantic_model(annotation: Any) -> bool:
    # Only when pydantic is already imported: trio_agent never imports it itself.
    pydantic = sys.modules.get("pydantic")
    return (
        pydantic is not None
        and isinstance(annotation, type)
        and issubclass(annotation, pydantic.BaseModel)
    )


def _pydantic_spec(cls: Any) -> _Spec:
    schema = cls.model_json_schema()

    def convert(value: Any) -> Any:
        try:
            return cls.model_validate(value)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise ToolArgumentsError(str(exc)) from None

    return _Spec(schema, convert)


def type_schema(annotation: Any, where: str) -> tuple[dict[str, Any], _Convert]:
    """The JSON Schema of ``annotation`` and the function that builds a value of it from
    JSON that the schema accepts (the same rules as tool parameters, plus dataclasses,
    ``TypedDict``, ``Enum``, unions of several types and pydantic models).

    Raises:
        TypeError: the annotation is not supported (the message names ``where``).
    """
    try:
        spec = _spec(annotation)
    except _Unsupported as exc:
        reason = f" ({exc.reason})" if exc.reason else ""
        raise TypeError(f"{where}: unsupported type {_type_repr(exc.annotation)}{reason}") from None
    return spec.schema, spec.convert


def _literal_spec(annotation: Any, values: tuple[Any, ...]) -> _Spec:
    for value in values:
        if type(value) not in _LITERAL_TYPES:
            raise _Unsupported(annotation, f"literal value {value!r} is not a str, int or bool")
    schema: dict[str, Any] = {}
    kinds = {type(value) for value in values}
    if len(kinds) == 1:
        schema["type"] = _LITERAL_TYPES[kinds.pop()]
    schema["enum"] = list(values)
    return _Spec(schema, _identity)


def _attrs_spec(cls: type[Any], building: tuple[type[Any], ...]) -> _Spec:
    if cls in building:
        raise _Unsupported(cls, "recursive classes are not supported")
    try:
        attrs.resolve_types(cls)
    except NameError as exc:
        raise _Unsupported(cls, f"cannot resolve its annotations ({exc})") from None
    fields = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        if field.type is None:
            raise _Unsupported(cls, f"field {field.name!r} has no annotation")
        fields.append((field.alias, field.type, field.default is not attrs.NOTHING, field.default))
    # Checked in the conversion, not left to ``cls(...)``: its TypeError would not be an
    # argument error (arguments that skipped validation reach this point too).
    return _fields_spec(cls, fields, building, lambda values: cls(**values))


def _property_spec(annotation: Any, has_default: bool, default: Any, building: Any) -> _Spec:
    """Schema of one property; ``X | None`` with a default declares just ``X``."""
    members = typing.get_args(annotation)
    optional = (
        typing.get_origin(annotation) in (typing.Union, types.UnionType)
        and len(members) == 2
        and type(None) in members
    )
    if optional and has_default:
        inner_annotation = next(member for member in members if member is not type(None))
        inner = _spec(inner_annotation, building)
        inner_convert = inner.convert
        spec = _Spec(inner.schema, lambda value: None if value is None else inner_convert(value))
    else:
        spec = _spec(annotation, building)
    # Defaults a model can read are worth showing; others (None, objects) are not.
    if has_default and isinstance(default, str | int | float | bool):
        spec = _Spec({**spec.schema, "default": default}, spec.convert)
    return spec


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return {**schema, "description": description} if description else schema


def _object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


# ---------------------------------------------------------------------------------------
# Results


def _json_default(value: Any) -> Any:
    if attrs.has(type(value)):
        return attrs.asdict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _to_result(tool_name: str, value: Any) -> AgentToolResult:
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, str):
        return AgentToolResult(content=[TextContent(text=value)])
    try:
        text = json.dumps(
            value,
            default=_json_default,
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        )
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tool {tool_name}: cannot convert the return value to JSON: {exc}"
        ) from None
    return AgentToolResult(content=[TextContent(text=text)], details=value)


# ---------------------------------------------------------------------------------------
# The decorator


def _build(
    fn: ToolFunction,
    name: str | None,
    label: str | None,
    description: str | None,
    execution_mode: ToolExecutionMode | None,
) -> AgentTool:
    fn_name = getattr(fn, "__name__", repr(fn))
    where = f"tool {fn_name}"
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"{where}: expected an async function (async def), got {fn!r}")
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise TypeError(f"{where}: cannot resolve annotations: {exc}") from None
    doc_description, arg_descriptions = _parse_docstring(inspect.getdoc(fn), _PARAMETER_SECTIONS)

    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, _Convert] = {}
    signal_param: str | None = None
    update_param: str | None = None
    for param in inspect.signature(fn).parameters.values():
        pname = param.name
        # Arguments are passed by keyword, so every parameter must accept one.
        if param.kind is param.VAR_POSITIONAL:
            raise TypeError(f"{where}: parameter *{pname} is not supported")
        if param.kind is param.VAR_KEYWORD:
            raise TypeError(f"{where}: parameter **{pname} is not supported")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{where}: positional-only parameter {pname!r} is not supported")
        annotation = hints.get(pname, inspect.Parameter.empty)
        if annotation is AbortSignal or annotation == AbortSignal | None:
            if signal_param is not None:
                raise TypeError(f"{where}: more than one AbortSignal parameter")
            signal_param = pname
            continue
        if annotation == AgentToolUpdateCallback or pname == "on_update":
            if update_param is not None:
                raise TypeError(f"{where}: more than one on_update parameter")
            update_param = pname
            continue
        if annotation is inspect.Parameter.empty:
            raise TypeError(f"{where}: parameter {pname!r} has no annotation")
        has_default = param.default is not inspect.Parameter.empty
        try:
            spec = _property_spec(annotation, has_default, param.default, ())
        except _Unsupported as exc:
            message = f"{where}: parameter {pname!r} has unsupported annotation "
            message += _type_repr(annotation)
            if exc.annotation is not annotation:
                message += f" ({_type_repr(exc.annotation)}"
                message += f": {exc.reason})" if exc.reason else ")"
            elif exc.reason:
                message += f" ({exc.reason})"
            raise TypeError(message) from None
        properties[pname] = _described(spec.schema, arg_descriptions.get(pname))
        converters[pname] = spec.convert
        if not has_default:
            required.append(pname)

    tool_name = name if name is not None else fn_name

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        unknown = [key for key in params if key not in converters]
        if unknown:
            names = ", ".join(repr(key) for key in unknown)
            raise ToolArgumentsError(f'Tool "{tool_name}" got unknown argument(s) {names}')
        missing = [key for key in required if key not in params]
        if missing:
            names = ", ".join(repr(key) for key in missing)
            raise ToolArgumentsError(f'Tool "{tool_name}" is missing argument(s) {names}')
        kwargs = {key: converters[key](value) for key, value in params.items()}
        if signal_param is not None:
            kwargs[signal_param] = signal
        if update_param is not None:
            kwargs[update_param] = on_update
        return _to_result(tool_name, await fn(**kwargs))

    return AgentTool(
        name=tool_name,
        label=label if label is not None else tool_name,
        description=description if description is not None else doc_description,
        parameters=_object_schema(properties, required),
        execute=execute,
        execution_mode=execution_mode,
    )


@overload
def tool(fn: ToolFunction, /) -> AgentTool: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    execution_mode: ToolExecutionMode | None = None,
) -> Callable[[ToolFunction], AgentTool]: ...
@overload
def tool(
    fn: ToolFunction,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    execution_mode: ToolExecutionMode | None = None,
) -> AgentTool: ...
def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    execution_mode: ToolExecutionMode | None = None,
) -> AgentTool | Callable[[ToolFunction], AgentTool]:
    """Build an :class:`~trio_agent.AgentTool` from a typed ``async def``.

    Usable as ``@tool``, ``@tool(name=...)`` or ``tool(fn)``. The decorated name becomes
    the :class:`~trio_agent.AgentTool` (call the function through ``execute``)::

        @trio_agent.tool
        async def get_weather(city: str, unit: Literal["C", "F"] = "C") -> str:
            \"\"\"Current weather of a city.

            Args:
                city: City name, e.g. "Paris".
                unit: Temperature unit.
            \"\"\"
            ...

    The parameters schema is a JSON Schema object (``additionalProperties: false``,
    ``required`` lists the parameters without defaults) built from the annotations,
    resolved with :func:`typing.get_type_hints` (so module-level names only); see the
    module documentation for the supported annotations. The docstring's text before its
    first Google-style section (``Args:``, ``Returns:``, ``Raises:``, ``Note:``, ...)
    becomes the description; ``Args:`` entries become the properties' ``description``.

    Two parameters are injected by ``execute`` rather than declared to the model: one
    annotated :class:`~trio_agent.AbortSignal` receives the run's signal, and one annotated
    :data:`~trio_agent.AgentToolUpdateCallback` or named ``on_update`` receives the progress
    callback. Each is optional.

    ``execute(tool_call_id, params, signal, on_update)`` converts the (validated) arguments
    (attrs classes are instantiated, ints become floats for ``float``), awaits the function
    and maps its return value: a ``str`` becomes one text block; an
    :class:`~trio_agent.AgentToolResult` is passed through; anything else becomes its
    compact JSON as text (attrs instances as dicts) with the value itself in ``details``.
    Arguments that do not fit the parameters raise :class:`~trio_agent.ToolArgumentsError`
    (an error result for the loop); exceptions of the function propagate likewise.

    Args:
        fn: The ``async def`` (positional only; omit it to get a decorator).
        name: Tool name; defaults to the function's ``__name__``.
        label: Human-readable label; defaults to the name.
        description: Overrides the docstring description.
        execution_mode: ``"sequential"`` forces batches containing this tool to run
            sequentially.

    Raises:
        TypeError: ``fn`` is not an ``async def``; a parameter is ``*args``, ``**kwargs``
            or positional-only, has no annotation, or has an unsupported one (``tool
            get_weather: parameter 'when' has unsupported annotation datetime.datetime``).
    """

    def decorate(function: ToolFunction) -> AgentTool:
        return _build(function, name, label, description, execution_mode)

    if fn is None:
        return decorate
    return decorate(fn)
