"""The message data model: content blocks, messages, usage, models and tool declarations.

Every value is a frozen, keyword-only attrs class. Python attributes are snake_case; the
JSON wire format (see :mod:`trio_agent.serialization`) is the upstream camelCase one.
Variants carry their discriminator (``role`` for messages, ``type`` for content blocks)
as a ``Literal`` field with a default, so a serializer can always see it.
"""

from __future__ import annotations

import binascii
import time
import types
from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ._redaction import redact_headers_repr, redact_url

__all__ = [
    "UNKNOWN_MODEL",
    "add_usage",
    "BUILT_IN_MESSAGE_CLASSES",
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "Cost",
    "CustomAgentMessage",
    "ImageContent",
    "Message",
    "Model",
    "ModelCost",
    "QueueMode",
    "StopReason",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolCall",
    "ToolDeclaration",
    "ToolExecutionMode",
    "ToolReference",
    "ToolResultContent",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "WireExtras",
    "now_ms",
    "register_message_type",
    "registered_message_types",
]

StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted", "pending"]
"""Why an assistant response ended; ``"pending"`` only on partial messages while streaming."""

ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
"""Requested reasoning effort; ``"off"`` means no reasoning."""

QueueMode: TypeAlias = Literal["all", "one-at-a-time"]
"""How a steering or follow-up queue is drained: the whole queue, or its oldest message."""

ToolExecutionMode: TypeAlias = Literal["sequential", "parallel"]
"""How the tool calls of one assistant message are executed."""


def now_ms() -> int:
    """Wall-clock time as integer Unix milliseconds (the timestamp unit of every message)."""
    return time.time_ns() // 1_000_000


# ---------------------------------------------------------------------------------------
# What a loaded JSON object carried beyond the model


def _frozen_mapping(values: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(values))


@attrs.frozen(kw_only=True)
class WireExtras:
    """The part of a loaded JSON object that the attrs class does not model.

    Transcripts written by pi carry keys trio_agent has no field for (``rawStopReason``,
    ``diagnostics``, ``providerThinkingLevel`` on assistant messages, ``usage.cacheWrite1h``,
    ``cost.totalFromProvider``, ``toolCall.namespace``, ...; the full list is
    :data:`trio_agent.serialization.UPSTREAM_ONLY_KEYS`), and write the keys of an object
    in the order the provider happened to set them. So that such a transcript loads and
    dumps back byte for byte, loading keeps both here, and writing puts them back.

    Design: the classes stay frozen and typed, and the data the runtime works with stays
    in typed fields; what trio_agent does not interpret is held as opaque JSON, in one
    ``wire_extras`` field per class that pi can extend (messages, content blocks,
    :class:`Usage`, :class:`Cost`). That field is left out of ``==`` and ``repr``: two
    messages that say the same thing are equal whether or not one came from a file. It is
    ``None`` for objects built in Python and for loaded objects with nothing extra, so the
    common path costs nothing. ``attrs.evolve`` keeps it; a modelled field that is set
    later than the loaded order knows is written after the loaded keys, as JavaScript
    appends a property set later.
    """

    values: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    """Unmodelled wire keys and their JSON values, in the order they were read."""
    order: tuple[str, ...] | None = None
    """Every wire key of the object in the order it was read, when that order differs
    from the order trio_agent writes; ``None`` otherwise."""


# ---------------------------------------------------------------------------------------
# Content blocks


@attrs.frozen(kw_only=True, slots=False)
class TextContent:
    """Visible text."""

    text: str
    """The text."""
    text_signature: str | None = None
    """Opaque provider metadata (e.g. the OpenAI Responses message item id)."""
    type: Literal["text"] = "text"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


@attrs.frozen(kw_only=True, slots=False)
class ThinkingContent:
    """Reasoning text produced by a thinking model."""

    thinking: str
    """The reasoning text (a placeholder when ``redacted``)."""
    thinking_signature: str | None = None
    """Opaque replay data (Anthropic signature, a Responses reasoning item, a field name...)."""
    redacted: bool | None = None
    """True when the provider redacted the reasoning; the payload is in the signature."""
    type: Literal["thinking"] = "thinking"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


def _check_image_data(instance: Any, attribute: Any, data: Any) -> None:
    if not isinstance(data, str):
        raise TypeError(f"ImageContent.data must be a str of base64, got {_short(data)}")
    if data[:5].lower() == "data:":
        raise ValueError(
            "ImageContent.data must be plain base64, without a data: URL prefix (the media "
            f"type goes in mime_type), got {_short(data)}"
        )
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"ImageContent.data is not valid base64 ({exc}): {_short(data)}") from None


def _check_mime_type(instance: Any, attribute: Any, mime_type: Any) -> None:
    if not isinstance(mime_type, str):
        raise TypeError(f"ImageContent.mime_type must be a str, got {_short(mime_type)}")


def _short(value: Any) -> str:
    """``repr(value)``; for a long string its start and its length."""
    text = repr(value)
    if len(text) <= 60:
        return text
    if isinstance(value, str):
        return f"{value[:40]!r}... ({len(value)} characters)"
    return text[:57] + "..."


@attrs.frozen(kw_only=True)
class ImageContent:
    """An image input (user messages and tool results only).

    Raises:
        TypeError: ``data`` or ``mime_type`` is not a ``str``.
        ValueError: ``data`` is not strict base64 (no white space, correct padding), or
            starts with a ``data:`` URL prefix. Such a prefix is refused, not stripped:
            the providers add it themselves, and stripping would store something other
            than what was given; pass the part after the comma, with the media type in
            ``mime_type``.
    """

    data: str = attrs.field(validator=_check_image_data)
    """Base64 data without a ``data:`` prefix."""
    mime_type: str = attrs.field(validator=_check_mime_type)
    """For example ``"image/png"``."""
    type: Literal["image"] = "image"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


@attrs.frozen(kw_only=True, slots=False)
class ToolCall:
    """A tool invocation requested by the model."""

    id: str
    """Provider-assigned call id; tool results refer to it."""
    name: str
    """Name of the tool to call."""
    arguments: dict[str, Any]
    """Parsed JSON arguments (``{}`` when ``arguments_error`` is set)."""
    thought_signature: str | None = None
    """Provider-specific opaque data (Google)."""
    arguments_error: str | None = None
    """Set when the complete argument text was not a JSON object; validation then fails."""
    type: Literal["toolCall"] = "toolCall"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


UserContent: TypeAlias = TextContent | ImageContent
"""A block of a user message's list content."""
ToolResultContent: TypeAlias = TextContent | ImageContent
"""A block of a tool result's content."""
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
"""A block of an assistant message's content."""


# ---------------------------------------------------------------------------------------
# Usage, models, tool declarations


@attrs.frozen(kw_only=True)
class Cost:
    """Cost of one response in USD."""

    input: float = 0.0
    """USD for the input tokens."""
    output: float = 0.0
    """USD for the output tokens."""
    cache_read: float = 0.0
    """USD for the tokens read from the prompt cache."""
    cache_write: float = 0.0
    """USD for the tokens written to the prompt cache."""
    total: float = 0.0
    """Total USD: the sum of the four, or the billed total the provider reports (OpenRouter)."""
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


@attrs.frozen(kw_only=True)
class Usage:
    """Token usage of one response. ``input`` excludes cached tokens; ``reasoning`` is part of
    ``output``."""

    input: int = 0
    """Input tokens, not counting cache reads and writes."""
    output: int = 0
    """Output tokens, reasoning included."""
    cache_read: int = 0
    """Input tokens read from the prompt cache."""
    cache_write: int = 0
    """Input tokens written to the prompt cache."""
    total_tokens: int = 0
    """The provider's total if reported, else ``input + output + cache_read + cache_write``."""
    reasoning: int | None = None
    """Reasoning tokens, already counted in ``output``; ``None`` when not reported."""
    cost: Cost = attrs.field(factory=Cost)
    """The cost of these tokens in USD."""
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


def add_usage(first: Usage, second: Usage) -> Usage:
    """``first`` and ``second`` added up, field by field (costs included); ``reasoning``
    stays ``None`` only when both are."""
    reasoning = (
        None
        if first.reasoning is None and second.reasoning is None
        else (first.reasoning or 0) + (second.reasoning or 0)
    )
    return Usage(
        input=first.input + second.input,
        output=first.output + second.output,
        cache_read=first.cache_read + second.cache_read,
        cache_write=first.cache_write + second.cache_write,
        total_tokens=first.total_tokens + second.total_tokens,
        reasoning=reasoning,
        cost=Cost(
            input=first.cost.input + second.cost.input,
            output=first.cost.output + second.cost.output,
            cache_read=first.cost.cache_read + second.cost.cache_read,
            cache_write=first.cost.cache_write + second.cost.cache_write,
            total=first.cost.total + second.cost.total,
        ),
    )


@attrs.frozen(kw_only=True)
class ModelCost:
    """Prices in USD per million tokens."""

    input: float = 0.0
    """USD per million input tokens."""
    output: float = 0.0
    """USD per million output tokens."""
    cache_read: float = 0.0
    """USD per million tokens read from the prompt cache."""
    cache_write: float = 0.0
    """USD per million tokens written to the prompt cache."""


@attrs.frozen(kw_only=True)
class Model:
    """A chat model and how to reach it. Streaming dispatches on ``api``."""

    id: str
    """Model id sent to the provider, e.g. ``"gpt-4o-mini"``."""
    name: str
    """Human-readable name."""
    api: str
    """Wire API: ``"openai-completions"``, ``"anthropic-messages"``, ``"openai-responses"``,
    ``"faux"`` or a registered custom API."""
    provider: str
    """Provider id, e.g. ``"openai"``; selects the API key."""
    base_url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    """Base URL of the HTTP API (its repr hides credentials a gateway URL may carry)."""
    reasoning: bool = False
    """Whether the model supports thinking levels."""
    input: list[Literal["text", "image"]] = attrs.field(factory=lambda: ["text"])
    """Accepted input kinds."""
    cost: ModelCost = attrs.field(factory=ModelCost)
    """Prices per million tokens."""
    context_window: int = 0
    """Context window in tokens."""
    max_tokens: int = 0
    """Default maximum output tokens."""
    headers: dict[str, str] | None = attrs.field(default=None, repr=redact_headers_repr)
    """Extra HTTP headers for every request (credential values are hidden in the repr)."""
    compat: dict[str, Any] | None = None
    """API-specific compatibility switches."""
    thinking_level_map: dict[str, str | None] | None = None
    """Maps thinking levels to provider values; ``None`` marks a level unsupported."""


UNKNOWN_MODEL = Model(
    id="unknown",
    name="unknown",
    api="unknown",
    provider="unknown",
    base_url="",
    reasoning=False,
    input=[],
    context_window=0,
    max_tokens=0,
)
"""The placeholder model: an Agent's before one is set, and the ids of a failure report
about a model that cannot be read."""


@attrs.frozen(kw_only=True)
class ToolDeclaration:
    """What the model sees of a tool: name, description and JSON-Schema parameters."""

    name: str
    """The name the model calls the tool by."""
    description: str
    """Tells the model what the tool does and when to use it."""
    parameters: dict[str, Any]
    """JSON Schema of the arguments (root ``type: "object"``)."""
    constrained_sampling: Any = None
    """Upstream's constrained-sampling config (``False`` disables it); passed through."""


@attrs.frozen(kw_only=True)
class ToolReference:
    """Names a tool, e.g. one that stops being available."""

    name: str
    """The tool's name."""


# ---------------------------------------------------------------------------------------
# Messages


@attrs.frozen(kw_only=True)
class SystemMessage:
    """Instructions and tool declarations at one point of the transcript.

    The leading system message holds the base prompt; later ones add instructions, patch
    named ``sections`` (``None`` removes one) and add or remove tools. See
    :func:`trio_agent.get_current_system_message` for the replay rules.
    """

    content: str | list[TextContent] = ""
    """The base prompt on the leading message; on a later one, instructions added from there on."""
    sections: dict[str, str | None] | None = None
    """Named prompt sections rendered in order after ``content``; a later message replaces
    one by name, and ``None`` removes it."""
    tools_added: list[ToolDeclaration] | None = None
    """Complete declarations of the tools that become available here."""
    tools_removed: list[ToolReference] | None = None
    """The tools that stop being available here."""
    timestamp: int = attrs.field(factory=now_ms)
    """Creation time in Unix milliseconds (``0`` for a leading message from a system prompt)."""
    role: Literal["system"] = "system"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


def _check_user_content(instance: Any, attribute: Any, value: Any) -> None:
    # Cheap (a user message is never built per streamed delta); the deep check of each
    # block's fields stays at the entry points (trio_agent._checks).
    if isinstance(value, str) or (
        isinstance(value, list)
        and all(isinstance(block, TextContent | ImageContent) for block in value)
    ):
        return
    raise TypeError(
        "UserMessage.content must be a str or a list of TextContent or ImageContent, "
        f"got {value!r}"[:400]
    )


@attrs.frozen(kw_only=True)
class UserMessage:
    """Input from the user.

    Raises:
        TypeError: ``content`` is neither a ``str`` nor a list of
            :class:`TextContent` and :class:`ImageContent`.
    """

    content: str | list[UserContent] = attrs.field(validator=_check_user_content)
    """The text, or a list of text and image blocks."""
    timestamp: int = attrs.field(factory=now_ms)
    """Creation time in Unix milliseconds."""
    role: Literal["user"] = "user"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


@attrs.frozen(kw_only=True, slots=False)
class AssistantMessage:
    """One response of the model (final, or a partial snapshot while it streams)."""

    content: list[AssistantContent]
    """Text, thinking and tool-call blocks, in the order the model produced them."""
    api: str
    """The wire API that produced the response, e.g. ``"anthropic-messages"``."""
    provider: str
    """The provider id, e.g. ``"openai"``."""
    model: str
    """The requested model id."""
    usage: Usage = attrs.field(factory=Usage)
    """Token usage and cost of the response."""
    stop_reason: StopReason = "stop"
    """Why the response ended (``"toolUse"`` when it asks for tools to run); ``"pending"``
    while it streams."""
    error_message: str | None = None
    """Set when ``stop_reason`` is ``"error"`` or ``"aborted"``."""
    response_id: str | None = None
    """The provider's id of the response, when it reports one."""
    response_model: str | None = None
    """The model the provider reported, when different."""
    thinking_level: ThinkingLevel | None = None
    """The level the agent loop requested (stamped on the final message)."""
    duration_ms: int | None = None
    """Milliseconds on Trio's clock from the start of the stream to the final message;
    ``None`` on partial messages and when the stream function does not measure it."""
    timestamp: int = attrs.field(factory=now_ms)
    """When the request started, in Unix milliseconds."""
    role: Literal["assistant"] = "assistant"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


@attrs.frozen(kw_only=True)
class ToolResultMessage:
    """The result of one tool call, sent back to the model."""

    tool_call_id: str
    """The ``id`` of the tool call this message answers."""
    tool_name: str
    """The name of the tool that was called."""
    content: list[ToolResultContent]
    """Text and image blocks the model sees as the result."""
    details: Any = None
    """Tool-specific data for logs and UIs; never sent to the model."""
    usage: Usage | None = None
    """Usage of the tool's own model calls, if any."""
    is_error: bool = False
    """Whether the model sees the result as an error."""
    duration_ms: int | None = None
    """Milliseconds ``execute()`` took on Trio's clock; ``None`` when the tool never ran."""
    timestamp: int = attrs.field(factory=now_ms)
    """Creation time in Unix milliseconds."""
    role: Literal["toolResult"] = "toolResult"
    wire_extras: WireExtras | None = attrs.field(default=None, eq=False, repr=False)
    """Unmodelled keys and key order of a loaded object
    (see :class:`~trio_agent.serialization.WireExtras`)."""


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
"""A message a provider understands."""
BUILT_IN_MESSAGE_CLASSES = (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)
"""The classes of :data:`Message`, for ``isinstance`` checks."""


@runtime_checkable
class CustomAgentMessage(Protocol):
    """Shape of an application message class (see :func:`register_message_type`)."""

    @property
    def role(self) -> str: ...


AgentMessage: TypeAlias = Message | CustomAgentMessage
"""A transcript entry: a :data:`Message` or a registered application message."""


_BUILTIN_ROLES = frozenset({"system", "user", "assistant", "toolResult"})
_registry: dict[str, type[Any]] = {}


def register_message_type(cls: type[Any]) -> type[Any]:
    """Register an application message class so the serializer can round-trip it.

    The class must be an attrs class with a ``role`` field whose default is a string
    distinct from the built-in roles (``system``, ``user``, ``assistant``, ``toolResult``)
    and from other registered classes. Registering the same class twice is a no-op.
    Usable as a class decorator; returns ``cls``.

    Raises:
        TypeError: if ``cls`` is not an attrs class or has no string ``role`` default.
        ValueError: if the role is built in or taken by another class.
    """
    if not attrs.has(cls):
        raise TypeError(f"register_message_type() needs an attrs class, got {cls!r}")
    role_field = getattr(attrs.fields(cls), "role", None)
    role = None if role_field is None else role_field.default
    if not isinstance(role, str):
        raise TypeError(f"{cls.__qualname__} needs a 'role' field with a string default")
    if role in _BUILTIN_ROLES:
        raise ValueError(f"role {role!r} of {cls.__qualname__} is a built-in role")
    existing = _registry.get(role)
    if existing is not None and existing is not cls:
        raise ValueError(f"role {role!r} is already registered by {existing.__qualname__}")
    _registry[role] = cls
    return cls


def registered_message_types() -> dict[str, type[Any]]:
    """A copy of the registry: role -> application message class."""
    return dict(_registry)
