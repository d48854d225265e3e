"""Contexts and results of the loop's hooks.

Every hook may be a plain function or an ``async def``; returning ``None`` means "no
change". Context objects hand out the loop's live lists: retaining them observes later
turns.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ._messages import (
    AgentMessage,
    AssistantMessage,
    Model,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from ._tools import AgentTool, AgentToolResult

__all__ = [
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentLoopTurnUpdate",
    "AgentRequestUpdate",
    "AgentTurnContext",
    "AgentTurnDecision",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "PrepareNextTurnContext",
    "PrepareRequestContext",
]


@attrs.frozen(kw_only=True)
class AgentContext:
    """The transcript the model sees (system messages carry prompt and tool declarations)
    and the tools that can actually run."""

    messages: list[AgentMessage]
    """The transcript; its system messages carry the prompt and the tool declarations."""
    tools: list[AgentTool] = attrs.field(factory=list)
    """The tools that can run; before each request the loop declares changes to this set in
    a system message."""


@attrs.frozen(kw_only=True)
class BeforeToolCallContext:
    """Argument of ``before_tool_call``: a validated call about to run."""

    assistant_message: AssistantMessage
    """The message that requested the call."""
    tool_call: ToolCall
    """The raw call from that message."""
    args: dict[str, Any]
    """Validated arguments; mutating this dict changes what runs (without revalidation)."""
    context: AgentContext
    """The loop's current working context."""


@attrs.frozen(kw_only=True)
class BeforeToolCallResult:
    """Return value of ``before_tool_call``; ``block=True`` prevents execution."""

    block: bool = False
    """``True`` prevents execution: the call gets an error result with ``reason`` instead."""
    reason: str | None = None
    """Text of the error result (default ``"Tool execution was blocked"``)."""
    terminate: bool | None = None
    """Copied onto the blocked result when exactly ``True``."""


@attrs.frozen(kw_only=True)
class AfterToolCallContext:
    """Argument of ``after_tool_call``: an executed call and its result."""

    assistant_message: AssistantMessage
    """The message that requested the call."""
    tool_call: ToolCall
    """The raw call from that message."""
    args: dict[str, Any]
    """The validated arguments the tool ran with."""
    result: AgentToolResult
    """What ``execute()`` returned, or the error result made from the exception it raised."""
    is_error: bool
    """Whether the result counts as an error (the tool raised, or its result set ``is_error``)."""
    context: AgentContext
    """The loop's current working context."""


@attrs.frozen(kw_only=True)
class AfterToolCallResult:
    """Field-by-field overrides of a tool result; ``None`` fields keep the original.

    Replacing ``content`` without giving ``structured_content`` drops the old
    ``structured_content``.
    """

    content: list[Any] | None = None
    """Replaces the content blocks the model sees."""
    details: Any = None
    """Replaces ``details`` (data for logs and UIs, never sent to the model)."""
    structured_content: Any = None
    """Replaces ``structured_content``."""
    is_error: bool | None = None
    """Replaces the error flag: whether the model sees the result as an error."""
    usage: Usage | None = None
    """Replaces ``usage`` (the tool's own model calls)."""
    terminate: bool | None = None
    """Replaces ``terminate``: stop after this batch when every result of the batch sets it."""


@attrs.frozen(kw_only=True)
class AgentTurnContext:
    """A completed turn, given to ``finish_turn`` and ``prepare_next_turn``.

    ``context`` and ``new_messages`` are the loop's live objects.
    """

    message: AgentMessage
    """The assistant message that completed the turn."""
    tool_results: list[ToolResultMessage]
    """The turn's tool-result messages, in source order."""
    context: AgentContext
    """The working context after the message and its results were appended."""
    new_messages: list[AgentMessage]
    """What the run would return if it ended now."""


PrepareNextTurnContext = AgentTurnContext
"""Alias of :class:`AgentTurnContext`."""


@attrs.frozen(kw_only=True)
class AgentTurnDecision:
    """Return value of ``finish_turn``: ``"end"`` stops the run after ``turn_end``;
    ``"continue"`` asks for one more request even when nothing else schedules one."""

    action: Literal["end", "continue"]
    """``"end"`` stops the run after ``turn_end``; ``"continue"`` asks for one more request."""


@attrs.frozen(kw_only=True)
class AgentLoopTurnUpdate:
    """Return value of ``prepare_next_turn``; every field is optional."""

    context: AgentContext | None = None
    """Replaces the working context."""
    messages: list[AgentMessage] | None = None
    """Appended (with message events) before the next request."""
    model: Model | None = None
    """Replaces the model from the next request on."""
    thinking_level: ThinkingLevel | None = None
    """``"off"`` clears reasoning."""


@attrs.frozen(kw_only=True)
class PrepareRequestContext:
    """Argument of ``prepare_request``, called before every provider request."""

    context: AgentContext
    """The loop's current working context."""
    model: Model
    """The model the request will use."""
    thinking_level: ThinkingLevel
    """``"off"`` when reasoning is disabled."""


@attrs.frozen(kw_only=True)
class AgentRequestUpdate:
    """Return value of ``prepare_request``; replacements last for the rest of the run."""

    context: AgentContext | None = None
    """Replaces the working context."""
    model: Model | None = None
    """Replaces the model."""
    thinking_level: ThinkingLevel | None = None
    """Replaces the thinking level; ``"off"`` disables reasoning."""
