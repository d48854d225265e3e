"""The JSON wire format: one cattrs converter for messages, content blocks, events and models.

The wire format is the upstream one: keys are the
camelCase form of the snake_case attribute names (``tool_call_id`` -> ``toolCallId``),
optional fields whose value is ``None`` are omitted, timestamps are integer Unix
milliseconds, and the discriminator (``role`` for messages, ``type`` for content blocks and
events) is always written, first. Loading is strict: unknown roles and types, unknown keys,
missing keys and values of the wrong JSON type are errors, with one exception: the
upstream-only keys listed in :data:`UPSTREAM_ONLY_KEYS` (fields upstream writes but
trio_agent does not model) are accepted. They are kept in the object's ``wire_extras``
(see :class:`~trio_agent.serialization.WireExtras`), together with the key order when it
is not the one trio_agent writes, so a transcript written by upstream loads and dumps
back byte for byte. Keys the wire
format requires are required on load even where the Python class has a default for
convenience (``timestamp`` on the built-in messages, ``usage`` and ``stopReason`` on
assistant messages, ``isError`` on tool results): a line without them is malformed, and
filling in the current time would silently falsify the transcript. Lone surrogates in
strings are written as ``\\udXXX`` escapes, as ``JSON.stringify`` does, so the text can
always be encoded as UTF-8.

Every failure is a :class:`~trio_agent.SerializationError` whose message names the
offending value and its JSON path (``unknown key 'bogus' in TextContent @ $.content[0]``);
cattrs' own exception groups never leak.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NoReturn, TypeVar, overload

import attrs
import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
    StructureHandlerNotFoundError,
)
from cattrs.gen import (
    make_dict_structure_fn,
    make_mapping_structure_fn,
    override,
)
from cattrs.preconf.json import make_converter

from ._exceptions import SerializationError
from ._jsjson import MAX_DEPTH, depth_exceeds, js_stringify
from ._messages import (
    AssistantMessage,
    Cost,
    CustomAgentMessage,
    Model,
    ModelCost,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    WireExtras,
    registered_message_types,
)

__all__ = [
    "UPSTREAM_ONLY_KEYS",
    "converter",
    "from_dict",
    "from_json",
    "to_dict",
    "to_json",
]

T = TypeVar("T")

_DISCRIMINATORS = ("role", "type")

UPSTREAM_ONLY_KEYS: Mapping[type[Any], frozenset[str]] = types.MappingProxyType(
    {
        # Fields pi 1.6.0 writes that
        # trio_agent does not model. Loading keeps them in ``wire_extras`` (written back
        # as read) or, for the model classes, drops them; any other unknown key is an
        # error.
        AssistantMessage: frozenset(
            {"providerThinkingLevel", "diagnostics", "deferred", "rawStopReason", "endTurn"}
        ),
        ToolResultMessage: frozenset({"nestedCalls"}),
        ToolCall: frozenset({"namespace"}),
        Usage: frozenset({"cacheWrite1h"}),
        Cost: frozenset({"totalFromProvider"}),
        Model: frozenset(
            {
                "type",
                "inputLimits",
                "promptCache",
                "samplingParams",
                "samplingParamsByThinkingLevel",
            }
        ),
        ModelCost: frozenset({"tiers"}),
    }
)
"""Upstream-only wire keys, per class, that loading accepts although no field models them.

On transcript classes (messages, content blocks, :class:`~trio_agent.Usage`,
:class:`~trio_agent.Cost`) they are kept in the object's ``wire_extras`` and written back
unchanged, so a transcript written by pi dumps back byte for byte; on
:class:`~trio_agent.Model` and :class:`~trio_agent.ModelCost` they are dropped.
"""

# Wire keys that are not optional in pi 1.6.0 but have a
# default in the Python classes (so that code can build messages tersely). Loading
# requires them; in field order, so errors list them as the class declares them.
_REQUIRED_ON_LOAD: Mapping[type[Any], tuple[str, ...]] = types.MappingProxyType(
    {
        SystemMessage: ("timestamp",),
        UserMessage: ("timestamp",),
        AssistantMessage: ("usage", "stopReason", "timestamp"),
        ToolResultMessage: ("isError", "timestamp"),
    }
)


MAX_PROBLEMS = 10
"""How many problems an error message names; the others are counted (``... and 12 more``)."""


class _SchemaError(ValueError):
    """A value does not fit the wire schema; the message is shown to the user as is."""


# ---------------------------------------------------------------------------------------
# Helpers


def _camel(name: str) -> str:
    """``tool_call_id`` -> ``toolCallId`` (the upstream wire name of an attribute)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):  # a tuple: faster than a union, per element of a list
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _discriminator(cls: type[Any]) -> tuple[str, str] | None:
    """The ``(field name, value)`` discriminating an attrs class, if it has one."""
    if not (isinstance(cls, type) and attrs.has(cls)):
        return None
    fields = attrs.fields_dict(cls)
    for name in _DISCRIMINATORS:
        field = fields.get(name)
        if field is not None and isinstance(field.default, str):
            return name, field.default
    return None


def _union_members(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return None


def _is_attrs_class(tp: Any) -> bool:
    return isinstance(tp, type) and attrs.has(tp)


# ---------------------------------------------------------------------------------------
# Hooks: attrs classes (camelCase keys, omitted Nones, discriminator first)


_PRIMITIVES = (str, int, float, bool)


_EXTRAS = "wire_extras"


def _has_extras(cls: type[Any]) -> bool:
    return _EXTRAS in attrs.fields_dict(cls)


def _attrs_unstructure_factory(cls: type[Any], conv: cattrs.Converter) -> Callable[[Any], Any]:
    # Hand-rolled rather than cattrs' generated function: that one moves every omittable
    # field after the required ones, and we want the attribute order on the wire (with the
    # discriminator first, as upstream writes it).
    attrs.resolve_types(cls)
    fields = [field for field in attrs.fields(cls) if field.name != _EXTRAS]
    with_extras = _has_extras(cls)
    wire_names = frozenset(_camel(field.name) for field in fields)
    disc = _discriminator(cls)
    if disc is not None:
        fields.sort(key=lambda field: field.name != disc[0])
    Plan = list[tuple[str, str, bool, Callable[[Any], Any] | None]]
    # (attribute, wire key, omitted when None, hook or None for JSON primitives); built on
    # the first call so that self-referencing classes do not recurse in the factory.
    plan: Plan | None = None

    def build_plan() -> Plan:
        return [
            (
                field.name,
                _camel(field.name),
                field.default is None,
                None if field.type in _PRIMITIVES else conv.get_unstructure_hook(field.type),
            )
            for field in fields
        ]

    def unstructure(obj: Any) -> dict[str, Any]:
        nonlocal plan
        if plan is None:
            plan = build_plan()
        out: dict[str, Any] = {}
        for name, key, omit_none, hook in plan:
            value = getattr(obj, name)
            if value is None:
                if not omit_none:
                    out[key] = None
            else:
                out[key] = value if hook is None else hook(value)
        if with_extras:
            extras = obj.wire_extras
            if extras is not None:
                return _with_extras(out, extras, wire_names)
        return out

    return unstructure


def _with_extras(
    out: dict[str, Any], extras: WireExtras, wire_names: frozenset[str]
) -> dict[str, Any]:
    """``out`` plus the unmodelled keys of ``extras``, in the key order they were read
    (keys that order does not know follow, in the order they are written)."""
    for key, value in extras.values.items():
        if key not in wire_names:  # a modelled field always wins
            out[key] = value
    if extras.order is None:
        return out
    ordered = {key: out.pop(key) for key in extras.order if key in out}
    ordered.update(out)
    return ordered


def _attrs_structure_factory(cls: type[Any], conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    attrs.resolve_types(cls)
    with_extras = _has_extras(cls)
    renames: dict[str, Any] = {
        field.name: override(omit=True)
        if field.name == _EXTRAS
        else override(rename=_camel(field.name))
        for field in attrs.fields(cls)
    }
    inner = make_dict_structure_fn(cls, conv, _cattrs_forbid_extra_keys=True, **renames)
    upstream_only = UPSTREAM_ONLY_KEYS.get(cls, frozenset())
    required = _REQUIRED_ON_LOAD.get(cls, ())
    # The order in which the unstructure hook writes the modelled keys.
    fields = [field for field in attrs.fields(cls) if field.name != _EXTRAS]
    disc = _discriminator(cls)
    if disc is not None:
        fields.sort(key=lambda field: field.name != disc[0])
    written_order = tuple(_camel(field.name) for field in fields)

    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise _SchemaError(
                f"expected a JSON object for {cls.__name__}, got {_json_type_name(data)}"
            )
        extra_values: dict[str, Any] | None = None
        if upstream_only and not upstream_only.isdisjoint(data):
            extra_values = {key: value for key, value in data.items() if key in upstream_only}
            modelled = {key: value for key, value in data.items() if key not in upstream_only}
        else:
            modelled = data
        errors: list[Exception] = [
            _SchemaError(f"missing key {key!r}") for key in required if key not in data
        ]
        if not errors:
            obj = inner(modelled, cls)
            if with_extras:
                return _attach_extras(obj, data, extra_values, written_order)
            return obj
        # Report the other problems of the object too, as for any other missing key.
        try:
            inner(modelled, cls)
        except Exception as exc:
            errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise ExceptionGroup(f"while structuring {cls.__name__}", errors)

    return structure


def _attach_extras(
    obj: Any,
    data: dict[str, Any],
    extra_values: dict[str, Any] | None,
    written_order: tuple[str, ...],
) -> Any:
    """``obj`` with the :class:`~trio_agent.WireExtras` of ``data``, if it has any."""
    read_order = tuple(data)
    # What the unstructure hook would write: the modelled keys in its order, then the
    # extra values in the order they were read.
    expected = [key for key in written_order if key in data]
    if extra_values:
        expected += extra_values
    order = None if read_order == tuple(expected) else read_order
    if order is None and not extra_values:
        return obj
    return attrs.evolve(obj, wire_extras=WireExtras(values=extra_values or {}, order=order))


# ---------------------------------------------------------------------------------------
# Hooks: discriminated unions (messages by role; blocks and events by type)


def _is_discriminated_union(tp: Any) -> bool:
    members = _union_members(tp)
    if members is None:
        return False
    keys = set()
    for member in members:
        if member is type(None) or member is CustomAgentMessage:
            continue
        disc = _discriminator(member)
        if disc is None:
            return False
        keys.add(disc[0])
    return len(keys) == 1 or (not keys and CustomAgentMessage in members)


def _make_dispatcher(members: Iterable[Any], conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure hook choosing the class by discriminator value.

    ``CustomAgentMessage`` among ``members`` opens the union to registered application
    message classes, looked up when a role is not a built-in one.
    """
    members = tuple(members)
    table: dict[str, type[Any]] = {}
    key = "role"
    for member in members:
        disc = _discriminator(member)
        if disc is not None:
            key, value = disc
            table[value] = member
    open_to_registry = CustomAgentMessage in members
    nullable = type(None) in members

    def structure(data: Any, _: Any) -> Any:
        if data is None and nullable:
            return None
        if not isinstance(data, dict):
            raise _SchemaError(f"expected a JSON object, got {_json_type_name(data)}")
        if key not in data:
            raise _SchemaError(f"missing key {key!r}")
        value = data[key]
        cls = table.get(value) if isinstance(value, str) else None
        if cls is None and open_to_registry and isinstance(value, str):
            cls = registered_message_types().get(value)
        if cls is None:
            raise _SchemaError(f"unknown {key} {_short_repr(value)}")
        return conv.get_structure_hook(cls)(data, cls)

    return structure


def _custom_message_dispatcher(conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    return _make_dispatcher([CustomAgentMessage], conv)


# ---------------------------------------------------------------------------------------
# Hooks: strict JSON primitives and containers. cattrs' defaults call ``int(x)``/``str(x)``
# and iterate strings as lists; a transcript with ``"timestamp": "1"`` is malformed.


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise _SchemaError(f"expected a string, got {_short_repr(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _SchemaError(f"expected an integer, got {_short_repr(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _SchemaError(f"expected a number, got {_short_repr(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _SchemaError(f"expected a boolean, got {_short_repr(value)}")


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _literal_factory(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = typing.get_args(tp)
    options = [repr(option) for option in allowed]
    expected = " or ".join(options) if len(options) <= 2 else "one of " + ", ".join(options)

    def structure(value: Any, _: Any) -> Any:
        # A bool is an int in Python; never let ``true`` match ``Literal[1]``.
        for option in allowed:
            if value == option and type(value) is type(option):
                return option
        raise _SchemaError(f"invalid value {_short_repr(value)} (expected {expected})")

    return structure


def _is_list(tp: Any) -> bool:
    return typing.get_origin(tp) is list


def _list_factory(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    # cattrs' list hook keeps every element's error (with a note): a million bad
    # elements took over 20 s and made a 58 MB message (issue 18, item 9). This one keeps
    # the first MAX_PROBLEMS and only counts the others.
    element_type = typing.get_args(tp)[0] if typing.get_args(tp) else Any
    try:
        element_hook = conv.get_structure_hook(element_type)
    except RecursionError:  # a recursive type: bind late, as cattrs does
        element_hook = conv.structure

    def structure(value: Any, cl: Any) -> Any:
        if not isinstance(value, list):
            raise _SchemaError(f"expected an array, got {_json_type_name(value)}")
        result = []
        errors: list[Exception] = []
        omitted = 0
        for index, item in enumerate(value):
            try:
                result.append(element_hook(item, element_type))
            except Exception as exc:
                if len(errors) < MAX_PROBLEMS:
                    note = IterableValidationNote(
                        f"Structuring {cl} @ index {index}", index, element_type
                    )
                    exc.__notes__ = [*getattr(exc, "__notes__", []), note]
                    errors.append(exc)
                else:
                    omitted += _problem_count(exc)
        if errors:
            raise _ListErrors(f"While structuring {cl!r}", errors, cl, omitted)
        return result

    return structure


class _ListErrors(IterableValidationError):
    """The first errors of a list's elements; ``omitted`` counts the problems left out."""

    omitted: int

    def __new__(
        cls, message: str, errors: list[Exception], cl: Any, omitted: int = 0
    ) -> _ListErrors:
        self = super().__new__(cls, message, errors, cl)
        self.omitted = omitted
        return self


def _problem_count(exc: BaseException) -> int:
    """How many problems ``exc`` stands for (the lines :func:`_error_lines` would make)."""
    if isinstance(exc, BaseExceptionGroup):
        omitted = exc.omitted if isinstance(exc, _ListErrors) else 0
        return omitted + sum(_problem_count(sub) for sub in exc.exceptions)
    return 1


def _is_dict(tp: Any) -> bool:
    return typing.get_origin(tp) is dict


def _dict_factory(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    inner = make_mapping_structure_fn(tp, conv)

    def structure(value: Any, cl: Any) -> Any:
        if not isinstance(value, dict):
            raise _SchemaError(f"expected an object, got {_json_type_name(value)}")
        return inner(value, cl)

    return structure


def _is_str_or_list(tp: Any) -> bool:
    members = _union_members(tp)
    return (
        members is not None
        and len(members) == 2
        and members[0] is str
        and typing.get_origin(members[1]) is list
    )


def _str_or_list_factory(tp: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    list_type = typing.get_args(tp)[1]
    list_hook = conv.get_structure_hook(list_type)

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            return list_hook(value, list_type)
        raise _SchemaError(f"expected a string or an array, got {_json_type_name(value)}")

    return structure


def _make_converter() -> cattrs.Converter:
    conv = make_converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _structure_bool)
    # Factories registered later take precedence over cattrs' defaults and each other.
    conv.register_structure_hook_factory(_is_literal, _literal_factory)
    conv.register_structure_hook_factory(_is_list, _list_factory)
    conv.register_structure_hook_factory(_is_dict, _dict_factory)
    conv.register_structure_hook_factory(_is_attrs_class, _attrs_structure_factory)
    conv.register_unstructure_hook_factory(_is_attrs_class, _attrs_unstructure_factory)
    conv.register_structure_hook_factory(_is_str_or_list, _str_or_list_factory)
    conv.register_structure_hook_factory(
        _is_discriminated_union, lambda tp, c: _make_dispatcher(typing.get_args(tp), c)
    )
    conv.register_structure_hook_factory(
        lambda tp: tp is CustomAgentMessage, lambda _, c: _custom_message_dispatcher(c)
    )
    return conv


converter: cattrs.Converter = _make_converter()
"""The converter behind every function of :mod:`trio_agent.serialization`.

Use it to (un)structure trio_agent values inside your own attrs classes. Do not register
hooks on it: it is shared by the whole process.
"""


# ---------------------------------------------------------------------------------------
# Error messages


def _at(message: str, path: str) -> str:
    return message if path == "$" else f"{message} @ {path}"


def _error_lines(exc: BaseException, path: str) -> list[str]:
    """Flatten a cattrs error tree into ``"<problem> @ <json path>"`` lines (wire names)."""
    if isinstance(exc, ClassValidationError):
        lines: list[str] = []
        for sub in exc.exceptions:
            note = next(
                (
                    n
                    for n in getattr(sub, "__notes__", ())
                    if isinstance(n, AttributeValidationNote)
                ),
                None,
            )
            if note is None:
                lines += _error_lines(sub, path)
            elif isinstance(sub, KeyError):
                lines.append(_at(f"missing key {_camel(note.name)!r}", path))
            else:
                lines += _error_lines(sub, f"{path}.{_camel(note.name)}")
        return lines
    if isinstance(exc, IterableValidationError):
        lines = []
        for sub in exc.exceptions:
            inote = next(
                (n for n in getattr(sub, "__notes__", ()) if isinstance(n, IterableValidationNote)),
                None,
            )
            if inote is None:
                lines += _error_lines(sub, path)
            elif isinstance(inote.index, int):
                lines += _error_lines(sub, f"{path}[{inote.index}]")
            elif inote.startswith("Structuring mapping key"):
                lines.append(_at(f"invalid key {_short_repr(inote.index)}: {sub}", path))
            else:
                lines += _error_lines(sub, f"{path}[{json.dumps(inote.index)}]")
        return lines
    if isinstance(exc, BaseExceptionGroup):
        return [line for sub in exc.exceptions for line in _error_lines(sub, path)]
    if isinstance(exc, ForbiddenExtraKeysError):
        # The first few in sorted order, without sorting them all (a line may hold a
        # million keys).
        shown = heapq.nsmallest(MAX_PROBLEMS, exc.extra_fields)
        keys = ", ".join(repr(key) for key in shown)
        if len(exc.extra_fields) > len(shown):
            keys += f" and {len(exc.extra_fields) - len(shown)} more"
        noun = "key" if len(exc.extra_fields) == 1 else "keys"
        return [_at(f"unknown {noun} {keys} in {exc.cl.__name__}", path)]
    if isinstance(exc, _SchemaError | ValueError):
        # ValueErrors come from our own hooks and from the classes' validators (an
        # ImageContent's base64), whose messages name the field and the value.
        return [_at(str(exc), path)]
    return [_at(f"{type(exc).__name__}: {exc}", path)]


def _structure(data: Any, cls: Any) -> Any:
    try:
        return converter.structure(data, cls)
    except StructureHandlerNotFoundError:
        raise TypeError(f"trio_agent.serialization cannot load {cls!r}") from None
    except Exception as exc:
        raise SerializationError(_summary(exc)) from None


def _summary(exc: Exception) -> str:
    """The first :data:`MAX_PROBLEMS` problems of ``exc``, and how many more there are."""
    lines = _error_lines(exc, "$")
    more = _problem_count(exc) - min(len(lines), MAX_PROBLEMS)
    return "; ".join(lines[:MAX_PROBLEMS] + ([f"... and {more} more"] if more > 0 else []))


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON (upstream's JSON.parse rejects them too).
    raise ValueError(f"{name} is not valid JSON")


_TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels)"


class _TooDeep(ValueError):
    """JSON text nests deeper than :data:`MAX_DEPTH`."""


def _loads(text: str | bytes) -> Any:
    """Parse JSON text; ``ValueError`` for text that is not JSON, :class:`_TooDeep` for
    text that nests deeper than :data:`MAX_DEPTH` (which the rest of the library could
    not walk, and which Python's parser may not even read)."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise _TooDeep(_TOO_DEEP) from None
    # The nesting depth cannot exceed the number of opening brackets, which C counts
    # fast: only text with enough of them is walked.
    if isinstance(text, bytes):
        opening = text.count(b"{") + text.count(b"[")
    else:
        opening = text.count("{") + text.count("[")
    if opening > MAX_DEPTH and depth_exceeds(data, MAX_DEPTH):
        raise _TooDeep(_TOO_DEEP)
    return data


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _dumps(data: Any) -> str:
    # Numbers as JSON.stringify writes them (5.0 -> 5, 1.5e-07 ->
    # 1.5e-7, NaN -> null), except that an int keeps all its digits, so that Python reads
    # back the value it wrote.
    try:
        text = js_stringify(data, exact_ints=True)
    except TypeError as exc:
        raise SerializationError(f"cannot serialize: {exc}") from None
    # A Python str may hold lone surrogates (from a ``\udXXX`` escape in the model's JSON,
    # or from ``surrogateescape``); UTF-8 cannot encode them. They can only occur inside
    # JSON strings, where an escape is valid: write them as JSON.stringify does.
    return _LONE_SURROGATE.sub(_escape_surrogate, text)


# ---------------------------------------------------------------------------------------
# What can be written: only what reads back equal

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _member_path(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{json.dumps(key)}]"


class Unwritable(SerializationError):
    """A value JSON cannot hold; ``path`` says where, ``problem`` what."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(_at(problem, path))
        self.path = path
        self.problem = problem


def check_writable(
    value: Any, *, strict: bool, root: str = "$", depth: int = 0, tuples: bool = True
) -> None:
    """Refuse, before anything is converted, a value that JSON cannot hold.

    Raises :class:`Unwritable` (a :class:`~trio_agent.SerializationError`) naming the
    path (from ``root``) and the problem: bytes, a non-string key, a value of another
    type, a cyclic value, nesting deeper than :data:`MAX_DEPTH` (counting ``depth``
    levels above ``value``) and, when ``strict``, a float that is NaN or infinite (which
    ``JSON.stringify`` writes as ``null``, so it would not load back) and, unless
    ``tuples``, a tuple (which loads back as a list). The walk is
    recursive but stops at :data:`MAX_DEPTH`, so it never exhausts the stack.
    """
    ancestors: set[int] = set()

    def fail(path: str, problem: str) -> NoReturn:
        if len(path) > 80:
            path = path[:77] + "..."
        raise Unwritable(path, problem)

    def walk(item: Any, path: str, depth: int) -> None:
        if item is None or isinstance(item, str | bool | int):
            return
        if isinstance(item, float):
            if strict and not math.isfinite(item):
                name = "NaN" if math.isnan(item) else ("-Infinity" if item < 0 else "Infinity")
                fail(path, f"{name} is not JSON")
            return
        if isinstance(item, bytes | bytearray | memoryview):
            fail(path, "bytes are not JSON")
        if isinstance(item, dict):
            members: Iterable[tuple[str, Any]] = item.items()
            for key in item:
                if not isinstance(key, str):
                    fail(path, f"a key must be a string, got {_short_repr(key)}")
        elif isinstance(item, list | tuple):
            if not tuples and isinstance(item, tuple):
                fail(path, "a tuple is not JSON (it would load back as a list)")
            members = ((f"[{index}]", child) for index, child in enumerate(item))
        elif attrs.has(type(item)):
            members = (
                (field.name, getattr(item, field.name))
                for field in attrs.fields(type(item))
                if field.name != _EXTRAS
            )
        else:
            fail(path, f"cannot write {type(item).__name__!r} values as JSON")
        if depth >= MAX_DEPTH:
            fail(path, _TOO_DEEP)
        if id(item) in ancestors:
            fail(path, "cyclic value")
        ancestors.add(id(item))
        is_list = isinstance(item, list | tuple)
        is_attrs = not is_list and not isinstance(item, dict)
        for key, child in members:
            if is_list:
                child_path = path + key
            elif is_attrs:
                child_path = f"{path}.{_camel(key)}"
            else:
                child_path = _member_path(path, key)
            walk(child, child_path, depth + 1)
        ancestors.discard(id(item))

    walk(value, root, depth)


# ---------------------------------------------------------------------------------------
# Public API


def to_dict(value: Any) -> Any:
    """Convert a trio_agent value (message, block, event, ...) to plain JSON data.

    Lists and dicts of such values work too. The result uses the upstream wire names and
    omits ``None`` optionals; it contains only dicts, lists, strings, numbers, booleans and
    ``None`` as long as ``details``-like free-form fields do.
    """
    return converter.unstructure(value)


@overload
def from_dict(data: Any, cls: type[T]) -> T: ...
@overload
def from_dict(data: Any, cls: Any) -> Any: ...
def from_dict(data: Any, cls: Any) -> Any:
    """Build a value of ``cls`` from plain JSON data (the inverse of :func:`to_dict`).

    ``cls`` may be a class (``UserMessage``, ``Usage``, ``Model``, a registered application
    message class, ...) or a union alias such as :data:`~trio_agent.AgentMessage`,
    :data:`~trio_agent.Message`, :data:`~trio_agent.AgentEvent` or
    :data:`~trio_agent.AssistantMessageEvent`, resolved by ``role`` / ``type``.
    :data:`~trio_agent.AgentMessage` also accepts the roles of classes registered with
    :func:`~trio_agent.register_message_type`.

    Raises:
        SerializationError: unknown role or type, unknown or missing key, wrong JSON type;
            the message names the value and its JSON path.
        TypeError: ``cls`` is not a type this module can load.
    """
    return _structure(data, cls)


def to_json(value: Any) -> str:
    """Serialize a trio_agent value to compact JSON text (non-ASCII characters kept as is).

    The text is the one ``JSON.stringify`` writes for the same data: floats in JavaScript's
    form (``5.0`` as ``5``, ``1.5e-07`` as ``1.5e-7``, ``NaN`` and the infinities as
    ``null``), integer-like keys of free-form objects first, lone surrogates escaped. Python
    ints keep all their digits.

    Raises:
        SerializationError: the value holds something JSON cannot represent: bytes, a set
            or a complex number in ``details``, a non-string key, a cyclic value, or
            nesting deeper than 200 levels. The message names the JSON path
            (``$.details.b: bytes are not JSON``).
    """
    check_writable(value, strict=False)
    return _dumps(converter.unstructure(value))


@overload
def from_json(text: str | bytes, cls: type[T]) -> T: ...
@overload
def from_json(text: str | bytes, cls: Any) -> Any: ...
def from_json(text: str | bytes, cls: Any) -> Any:
    """Parse JSON text into a value of ``cls``; see :func:`from_dict` for ``cls``.

    Raises:
        SerializationError: the text is not JSON (``invalid JSON: ...``), is bytes that
            are not UTF-8, nests deeper than 200 levels, or does not describe a ``cls``.
        TypeError: ``cls`` is not a type this module can load.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = _decode_line(bytes(text))
        except _NotUtf8 as exc:
            raise SerializationError(str(exc)) from None
    try:
        data = _loads(text)
    except _TooDeep as exc:
        raise SerializationError(str(exc)) from None
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise SerializationError(f"invalid JSON: {exc}") from None
    return _structure(data, cls)


class _NotUtf8(ValueError):
    pass


def _decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", "replace")) + 1
        raise _NotUtf8(
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column})"
        ) from None
