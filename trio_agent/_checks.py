"""Checks for what enters the agent from outside: messages, images and tools.

A message with a field of the wrong type (``UserMessage(content=123)``, a plain dict as a
content block, ``TextContent(text=None)``, ``timestamp="now"``) is accepted by Python
and only fails later, inside a provider request or when the transcript is saved, and
then on every later request too. These checks
reject such input where it enters, with a :class:`TypeError` (wrong type) or
:class:`ValueError` (wrong value) whose message names the entry point, the field and the
whole value::

    prompt(): UserMessage.content must be a str or a list of TextContent or
    ImageContent, got 123

Why functions and not attrs validators on every message class: the streaming builders
create a new :class:`~trio_agent.AssistantMessage` (and a new block) for every delta, and
a validator on each field would slow the hottest path for the sake of input that only
users produce. So the classes stay plain values and the entry points (``Agent.prompt``,
``steer``, ``follow_up``, ``AgentInitialState``, the ``state.messages`` and
``state.tools`` setters, ``dump_transcript``) call these functions. The exceptions are
checks that live on the classes themselves because they are cheap and rare:
:class:`~trio_agent.ImageContent` checks its base64 ``data`` when built (a ``data:``
prefix would reach the provider twice), :class:`~trio_agent.UserMessage` its
``content``, and :class:`~trio_agent.AgentTool` its ``name``.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, Literal

import attrs

from . import _messages
from ._messages import (
    BUILT_IN_MESSAGE_CLASSES,
    AgentMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingLevel,
    UserMessage,
    registered_message_types,
)
from ._tools import AgentTool

__all__ = [
    "check_callable",
    "check_images",
    "check_message",
    "check_messages",
    "check_model",
    "check_thinking_level",
    "check_tools",
    "prompt_messages",
]

_MESSAGE_CLASSES = BUILT_IN_MESSAGE_CLASSES
# Free-form JSON may nest this deep below the message before the check refuses it;
# messages add a few levels, and transcripts allow 200 in all.
_JSON_DEPTH = 190
_MAX_REPR = 200


def _show(value: Any) -> str:
    """``repr(value)``, cut in the middle of very long values."""
    text = repr(value)
    if len(text) <= _MAX_REPR:
        return text
    return f"{text[: _MAX_REPR - 20]}...{text[-15:]} ({len(text)} characters)"


def _expected_message(where: str, value: Any) -> TypeError:
    return TypeError(
        f"{where}: expected a message (SystemMessage, UserMessage, AssistantMessage, "
        "ToolResultMessage or a class registered with register_message_type), got "
        f"{_show(value)}"
    )


def check_message(value: object, where: str) -> AgentMessage:
    """Return ``value`` if it is a message the transcript can hold, checked deeply.

    A message is an instance of a built-in message class or of a class registered with
    :func:`~trio_agent.register_message_type`. Each field of a built-in message, and of
    its content blocks, usage and tool declarations, must have its declared type (an
    ``int`` field refuses ``True``, a ``float`` field accepts an ``int``); a ``Literal``
    field (``stop_reason``, ``thinking_level``, the ``role``) one of its values; free-form
    fields (``details``, tool-call ``arguments``, schemas) must be JSON that
    :func:`~trio_agent.serialization.dump_transcript` can write. Application messages
    are checked for the last point only.

    Args:
        value: The candidate message.
        where: The entry point, for the message (``"prompt()"``, ``"steer()"``,
            ``"state.messages[3]"``).

    Raises:
        TypeError: ``value`` is not a message, or a field has the wrong type. The message
            names ``where``, the field path and the value
            (``prompt(): UserMessage.content[0].text must be a str, got None``).
        ValueError: a field has a value outside its ``Literal`` values, or a free-form
            value cannot be written as JSON (bytes, a cyclic value, nesting deeper than
            200 levels).
    """
    cls = type(value)
    if isinstance(value, _MESSAGE_CLASSES):
        if not _valid(cls)(value):  # the fast check; the slow one names the problem
            _check_attrs(value, cls.__name__, where)
    elif cls in registered_message_types().values():
        _check_json(value, cls.__name__, where)
    else:
        raise _expected_message(where, value)
    return value  # type: ignore[return-value]  # checked just above


def check_messages(values: object, where: str) -> list[AgentMessage]:
    """Check a sequence of messages (see :func:`check_message`); return them as a new list.

    Raises:
        TypeError: ``values`` is not a sequence (a ``str`` or ``bytes`` is not one here),
            or an item is not a valid message (named as ``where[index]``).
        ValueError: an item has a field value that :func:`check_message` refuses.
    """
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Sequence):
        raise TypeError(f"{where} must be a sequence of messages, got {_show(values)}")
    return [check_message(value, f"{where}[{index}]") for index, value in enumerate(values)]


def check_images(images: object, where: str) -> list[ImageContent]:
    """Check the ``images`` argument of ``prompt()``: ``None`` or a sequence of
    :class:`~trio_agent.ImageContent`; return them as a new list.

    Raises:
        TypeError: ``images`` is not a sequence (``"abc"`` is not a sequence of images:
            ``prompt(): images must be a sequence of ImageContent, got 'abc'``), or an item
            is not an :class:`~trio_agent.ImageContent`
            (``prompt(): images must be ImageContent, got 'x'``).
        ValueError: an image's fields are invalid (see :class:`~trio_agent.ImageContent`).
    """
    if images is None:
        return []
    if isinstance(images, str | bytes | bytearray) or not isinstance(images, Sequence):
        raise TypeError(f"{where}: images must be a sequence of ImageContent, got {_show(images)}")
    for index, image in enumerate(images):
        if not isinstance(image, ImageContent):
            raise TypeError(f"{where}: images must be ImageContent, got {_show(image)}")
        _check_attrs(image, f"images[{index}]", where)
    return list(images)


def prompt_messages(
    input: object, images: object = None, where: str = "prompt()"
) -> list[AgentMessage]:
    """The messages of a ``prompt(input, images)`` call, checked.

    ``input`` is a text (a :class:`~trio_agent.UserMessage` is made of it and the
    ``images``), one message, or a sequence of messages. ``bytes`` are refused whole
    (they are not text, and not a sequence of messages).

    Raises:
        TypeError: ``input`` is none of the above, ``images`` is given with something
            other than a text, or a message or image is invalid (see
            :func:`check_message` and :func:`check_images`).
        ValueError: a message or image has an invalid value.
    """
    if isinstance(input, str):
        content: list[TextContent | ImageContent] = [TextContent(text=input)]
        content.extend(check_images(images, where))
        return [UserMessage(content=content)]
    if images is not None:
        raise TypeError(f"{where}: images can only go with a text input, got {_show(input)}")
    if isinstance(input, bytes | bytearray):
        raise _expected_message(where, input)
    if isinstance(input, Sequence):
        return [check_message(message, where) for message in input]
    return [check_message(input, where)]


def check_tools(tools: object, where: str) -> list[AgentTool]:
    """Check a tool set: a sequence of :class:`~trio_agent.AgentTool` with distinct names;
    return it as a new list.

    A call names one tool, so two tools with one name would make the second unreachable
    and declare the name twice to the model. Each tool's name
    was checked when it was built (see :class:`~trio_agent.AgentTool`).

    Raises:
        TypeError: ``tools`` is not a sequence, or an item is not an ``AgentTool``.
        ValueError: two tools share a name (``duplicate tool name 'search' at
            state.tools[0] and state.tools[2]``).
    """
    if isinstance(tools, str | bytes | bytearray) or not isinstance(tools, Sequence):
        raise TypeError(f"{where} must be a sequence of AgentTool, got {_show(tools)}")
    seen: dict[str, int] = {}
    for index, tool in enumerate(tools):
        if not isinstance(tool, AgentTool):
            raise TypeError(f"{where}[{index}] must be an AgentTool, got {_show(tool)}")
        first = seen.setdefault(tool.name, index)
        if first != index:
            raise ValueError(
                f"duplicate tool name {tool.name!r} at {where}[{first}] and {where}[{index}]"
            )
    return list(tools)


# ---------------------------------------------------------------------------------------
# The deep check of attrs values against their annotations


def _check_json(value: Any, path: str, where: str) -> None:
    # Imported here: the serializer imports this module.
    from ._serialization import Unwritable, check_writable

    depth = path.count(".") + path.count("[")  # roughly how deep the value sits
    try:
        check_writable(value, strict=True, root=path, depth=depth)
    except Unwritable as exc:
        kind = TypeError if exc.problem.startswith(("cannot write", "a key must")) else ValueError
        raise kind(f"{where}: {exc.path}: {exc.problem}") from None


def _describe(tp: Any) -> str:
    """``tp`` in words: ``a str``, ``a list of TextContent or ImageContent``, ``None``."""
    if tp is type(None):
        return "None"
    if tp is Any:
        return "any JSON value"
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(option) for option in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(member) for member in typing.get_args(tp))
    if origin is list:
        (item,) = typing.get_args(tp)
        members = typing.get_args(item) or (item,)
        return "a list of " + " or ".join(
            member.__name__ if isinstance(member, type) else _describe(member) for member in members
        )
    if origin is dict:
        return "a dict with str keys"
    name = tp.__name__ if isinstance(tp, type) else str(tp)
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def _matches(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the outer shape of ``tp`` (items are checked separately)."""
    if tp is Any:
        return True
    if tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    if origin is Literal:
        return any(
            value == option and type(value) is type(option) for option in typing.get_args(tp)
        )
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, member) for member in typing.get_args(tp))
    if origin is list:
        return isinstance(value, list)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(key, str) for key in value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _pick(value: Any, tp: Any) -> Any:
    """The member of a union ``tp`` that ``value`` matches (``tp`` itself otherwise)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        for member in typing.get_args(tp):
            if _matches(value, member):
                return _pick(value, member)
    return tp


def _is_literal_only(tp: Any) -> bool:
    """Whether a mismatch with ``tp`` is a wrong value rather than a wrong type."""
    members = (
        typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
    )
    return any(typing.get_origin(member) is Literal for member in members)


def _check_value(value: Any, tp: Any, path: str, where: str) -> None:
    if not _matches(value, tp):
        message = f"{where}: {path} must be {_describe(tp)}, got {_show(value)}"
        literal_value = _is_literal_only(tp) and isinstance(value, str)
        raise (ValueError if literal_value else TypeError)(message)
    tp = _pick(value, tp)
    origin = typing.get_origin(tp)
    if tp is float and not math.isfinite(value):
        # JSON has no NaN or infinity: such a value would not load back.
        raise ValueError(f"{where}: {path} must be a finite number, got {value!r}")
    if tp is Any:
        _check_json(value, path, where)
    elif origin is dict:
        value_type = typing.get_args(tp)[1]
        if value_type is Any:
            _check_json(value, path, where)
        else:
            for key, item in value.items():
                _check_value(item, value_type, f"{path}[{key!r}]", where)
    elif origin is list:
        (item_type,) = typing.get_args(tp)
        for index, item in enumerate(value):
            _check_value(item, item_type, f"{path}[{index}]", where)
    elif isinstance(tp, type) and attrs.has(tp):
        _check_attrs(value, path, where)


def _check_attrs(value: Any, path: str, where: str) -> None:
    for field in attrs.fields(type(value)):
        if field.name == "wire_extras":
            continue
        tp = _field_type(type(value), field.name)
        _check_value(getattr(value, field.name), tp, f"{path}.{field.name}", where)


_TYPES: dict[type[Any], dict[str, Any]] = {}


def _field_type(cls: type[Any], name: str) -> Any:
    hints = _TYPES.get(cls)
    if hints is None:
        # The module of the classes: their public __module__ is ``trio_agent``.
        hints = _TYPES[cls] = typing.get_type_hints(cls, globalns=vars(_messages))
    return hints[name]


# ---------------------------------------------------------------------------------------
# The fast path: one compiled predicate per type, no messages built. A value it refuses
# is checked again by the functions above, which name the problem.

_Predicate = Callable[[Any], bool]
_COMPILED: dict[Any, _Predicate] = {}


def _json_ok(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= _JSON_DEPTH:
        return False  # too deep, or cyclic
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and _json_ok(item, depth + 1) for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return all(_json_ok(item, depth + 1) for item in value)
    return False  # other types (attrs values included) take the slow path


def _valid(tp: Any) -> _Predicate:
    predicate = _COMPILED.get(tp)
    if predicate is None:
        predicate = _COMPILED[tp] = _compile(tp)
    return predicate


def _compile(tp: Any) -> _Predicate:
    if tp is Any:
        return _json_ok
    if tp is type(None):
        return lambda value: value is None
    if tp is str:
        return lambda value: isinstance(value, str)
    if tp is bool:
        return lambda value: isinstance(value, bool)
    if tp is int:
        return lambda value: isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return lambda value: (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    origin = typing.get_origin(tp)
    if origin is Literal:
        options = typing.get_args(tp)
        return lambda value: any(
            value == option and type(value) is type(option) for option in options
        )
    if origin in (typing.Union, types.UnionType):
        members = [_valid(member) for member in typing.get_args(tp)]
        return lambda value: any(member(value) for member in members)
    if origin is list:
        item = _valid(typing.get_args(tp)[0])
        return lambda value: isinstance(value, list) and all(item(x) for x in value)
    if origin is dict:
        member = _valid(typing.get_args(tp)[1])
        return lambda value: (
            isinstance(value, dict)
            and all(isinstance(key, str) and member(x) for key, x in value.items())
        )
    if isinstance(tp, type) and attrs.has(tp):
        fields = [
            (field.name, _valid(_field_type(tp, field.name)))
            for field in attrs.fields(tp)
            if field.name != "wire_extras"
        ]
        return lambda value: (
            type(value) is tp and all(check(getattr(value, name)) for name, check in fields)
        )
    if isinstance(tp, type):
        return lambda value: isinstance(value, tp)
    return lambda value: True


def check_model(value: object, where: str) -> Model:
    """Return ``value`` as a :class:`~trio_agent.Model`.

    A ``"provider/model-id"`` string (the form the ``trio-agent`` program takes, e.g.
    ``"openai/gpt-4o-mini"``) is looked up in the built-in catalogue.

    Raises:
        TypeError: neither a ``Model`` nor a string
            (``state.model must be a Model or a 'provider/model-id' string, got None``).
        ValueError: a string that names no model of the catalogue; the message lists the
            closest names.
    """
    if isinstance(value, Model):
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"{where} must be a Model or a 'provider/model-id' string, got {_show(value)}"
        )
    from .models._catalog import load_catalog  # the catalogue loads on first use only

    catalog = load_catalog()
    provider, _, model_id = value.partition("/")
    model = catalog.get((provider, model_id))
    if model is not None:
        return model
    names = [f"{provider}/{model_id}" for provider, model_id in catalog]
    closest = difflib.get_close_matches(value, names, n=3, cutoff=0.4)
    hint = f" (closest: {', '.join(map(repr, closest))})" if closest else ""
    raise ValueError(
        f"{where}: unknown model {value!r}; give a Model, or 'provider/model-id' from the "
        f"built-in catalogue{hint}"
    )


def check_thinking_level(value: object, where: str) -> ThinkingLevel:
    """Return ``value`` if it is a :data:`~trio_agent.ThinkingLevel`.

    Raises:
        ValueError: any other value (``state.thinking_level must be one of 'off', ...``).
    """
    levels: tuple[str, ...] = typing.get_args(ThinkingLevel)
    if not isinstance(value, str) or value not in levels:
        raise ValueError(
            f"{where} must be one of {', '.join(map(repr, levels))}, got {_show(value)}"
        )
    return value  # type: ignore[return-value]  # one of the levels


def check_callable(value: object, where: str, name: str) -> None:
    """Raise ``TypeError`` (``Agent(): stream_fn must be callable, got 42``) unless
    ``value`` is callable or ``None``."""
    if value is not None and not callable(value):
        raise TypeError(f"{where}{name} must be callable, got {_show(value)}")
