"""Events: the assistant stream events a stream function yields, and the agent events the
loop emits.

Both families are frozen attrs classes discriminated by a ``type`` literal whose value is
the upstream wire string (``"text_delta"``, ``"message_update"``, ...). Every ``partial``
or ``message`` carried by an event is a snapshot: it never changes after the event is
emitted.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import attrs

from ._messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage, Usage
from ._tools import AgentToolResult

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "AssistantMessageEvent",
    "CompactionEvent",
    "DoneEvent",
    "ErrorEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "StartEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "TextStartEvent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ThinkingStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "TurnEndEvent",
    "TurnStartEvent",
]

# ---------------------------------------------------------------------------------------
# Assistant stream events (what a StreamFn yields)


@attrs.frozen(kw_only=True, slots=False)
class StartEvent:
    """First event of a successful stream."""

    partial: AssistantMessage
    """Snapshot of the assistant message so far."""
    type: Literal["start"] = "start"


@attrs.frozen(kw_only=True, slots=False)
class TextStartEvent:
    """A text block opened at ``content_index``."""

    content_index: int
    """Index of the new block in ``partial.content``."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far."""
    type: Literal["text_start"] = "text_start"


@attrs.frozen(kw_only=True, slots=False)
class TextDeltaEvent:
    """More text for the block at ``content_index``."""

    content_index: int
    """Index of the block in ``partial.content``."""
    delta: str
    """The text appended to the block."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far (past 65,536 characters a block's snapshot
    may lag behind its deltas)."""
    type: Literal["text_delta"] = "text_delta"


@attrs.frozen(kw_only=True, slots=False)
class TextEndEvent:
    """The text block at ``content_index`` is complete; ``content`` is its full text."""

    content_index: int
    """Index of the block in ``partial.content``."""
    content: str
    """The block's complete text."""
    partial: AssistantMessage
    """Snapshot of the assistant message with the block complete."""
    type: Literal["text_end"] = "text_end"


@attrs.frozen(kw_only=True, slots=False)
class ThinkingStartEvent:
    """A thinking block opened at ``content_index``."""

    content_index: int
    """Index of the new block in ``partial.content``."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far."""
    type: Literal["thinking_start"] = "thinking_start"


@attrs.frozen(kw_only=True, slots=False)
class ThinkingDeltaEvent:
    """More reasoning text for the block at ``content_index``."""

    content_index: int
    """Index of the block in ``partial.content``."""
    delta: str
    """The reasoning text appended to the block."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far (past 65,536 characters a block's snapshot
    may lag behind its deltas)."""
    type: Literal["thinking_delta"] = "thinking_delta"


@attrs.frozen(kw_only=True, slots=False)
class ThinkingEndEvent:
    """The thinking block at ``content_index`` is complete."""

    content_index: int
    """Index of the block in ``partial.content``."""
    content: str
    """The block's complete reasoning text."""
    partial: AssistantMessage
    """Snapshot of the assistant message with the block complete."""
    type: Literal["thinking_end"] = "thinking_end"


@attrs.frozen(kw_only=True, slots=False)
class ToolCallStartEvent:
    """A tool-call block opened at ``content_index``."""

    content_index: int
    """Index of the new block in ``partial.content``."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far."""
    type: Literal["toolcall_start"] = "toolcall_start"


@attrs.frozen(kw_only=True, slots=False)
class ToolCallDeltaEvent:
    """A piece of the raw JSON argument text of the tool call at ``content_index``."""

    content_index: int
    """Index of the block in ``partial.content``."""
    delta: str
    """The next piece of the raw JSON argument text."""
    partial: AssistantMessage
    """Snapshot of the assistant message so far (past 65,536 characters a block's snapshot
    may lag behind its deltas)."""
    type: Literal["toolcall_delta"] = "toolcall_delta"


@attrs.frozen(kw_only=True, slots=False)
class ToolCallEndEvent:
    """The tool call at ``content_index`` is complete and parsed."""

    content_index: int
    """Index of the block in ``partial.content``."""
    tool_call: ToolCall
    """The complete tool call with its parsed arguments."""
    partial: AssistantMessage
    """Snapshot of the assistant message with the block complete."""
    type: Literal["toolcall_end"] = "toolcall_end"


@attrs.frozen(kw_only=True, slots=False)
class DoneEvent:
    """Terminal event of a successful stream; ``message`` is the final message."""

    reason: Literal["stop", "length", "toolUse"]
    """Why the response ended: ``"stop"``, ``"length"`` (output token limit) or
    ``"toolUse"``; the message's ``stop_reason``."""
    message: AssistantMessage
    """The final assistant message."""
    type: Literal["done"] = "done"


@attrs.frozen(kw_only=True, slots=False)
class ErrorEvent:
    """Terminal event of a failed or aborted stream; ``error`` is the final message, with
    ``stop_reason`` equal to ``reason`` and ``error_message`` set."""

    reason: Literal["error", "aborted"]
    """``"aborted"`` when the request was aborted, else ``"error"``."""
    error: AssistantMessage
    """The final assistant message of the failed or aborted response."""
    type: Literal["error"] = "error"


AssistantMessageEvent: TypeAlias = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | DoneEvent
    | ErrorEvent
)
"""What a stream function yields: ``start``, block events, then one ``done`` or ``error``."""


# ---------------------------------------------------------------------------------------
# Agent events (what the loop emits)


@attrs.frozen(kw_only=True, slots=False)
class AgentStartEvent:
    """First event of a run."""

    type: Literal["agent_start"] = "agent_start"


@attrs.frozen(kw_only=True, slots=False)
class AgentEndEvent:
    """Last event of a run; ``messages`` are the messages the run delivered (each had its
    ``message_end``).

    When a failure closes the run, ``messages`` holds only the synthesized failure
    message: the run's record is its ``message_end`` events (or ``Agent.state.messages``).
    """

    messages: list[AgentMessage]
    """The messages the run delivered, in order."""
    type: Literal["agent_end"] = "agent_end"


@attrs.frozen(kw_only=True, slots=False)
class TurnStartEvent:
    """A turn (one assistant response and its tool calls) begins."""

    type: Literal["turn_start"] = "turn_start"


@attrs.frozen(kw_only=True, slots=False)
class TurnEndEvent:
    """A turn ended; ``tool_results`` are its tool-result messages in source order.

    When a failure closes the turn, ``message`` is the synthesized failure message and
    ``tool_results`` is empty, even if some results were committed before the failure.
    """

    message: AgentMessage
    """The assistant message that ended the turn."""
    tool_results: list[ToolResultMessage]
    """The turn's tool-result messages, in source order."""
    type: Literal["turn_end"] = "turn_end"


@attrs.frozen(kw_only=True, slots=False)
class MessageStartEvent:
    """A message enters the transcript (system, user, assistant, tool result or custom)."""

    message: AgentMessage
    """The message; for a streamed assistant response, its first snapshot."""
    type: Literal["message_start"] = "message_start"


@attrs.frozen(kw_only=True, slots=False)
class MessageUpdateEvent:
    """An assistant message streams; ``message`` is a snapshot of the partial."""

    message: AgentMessage
    """Snapshot of the assistant message so far."""
    assistant_message_event: AssistantMessageEvent
    """The stream event that caused this update (e.g. a ``text_delta``)."""
    type: Literal["message_update"] = "message_update"


@attrs.frozen(kw_only=True, slots=False)
class MessageEndEvent:
    """A message is complete and committed to the transcript."""

    message: AgentMessage
    """The complete message, as committed to the transcript."""
    type: Literal["message_end"] = "message_end"


@attrs.frozen(kw_only=True, slots=False)
class ToolExecutionStartEvent:
    """A tool call is about to be prepared and run; ``args`` are the raw call arguments."""

    tool_call_id: str
    """The ``id`` of the tool call."""
    tool_name: str
    """The tool name the model called."""
    args: dict[str, Any]
    """The arguments as the model sent them (before preparation and validation)."""
    type: Literal["tool_execution_start"] = "tool_execution_start"


@attrs.frozen(kw_only=True, slots=False)
class ToolExecutionUpdateEvent:
    """A running tool reported progress through ``on_update``."""

    tool_call_id: str
    """The ``id`` of the tool call."""
    tool_name: str
    """The tool name the model called."""
    args: dict[str, Any]
    """The arguments as the model sent them (before preparation and validation)."""
    partial_result: AgentToolResult
    """The progress result the tool passed to ``on_update``."""
    type: Literal["tool_execution_update"] = "tool_execution_update"


@attrs.frozen(kw_only=True, slots=False)
class ToolExecutionEndEvent:
    """A tool call is finalized. ``duration_ms`` is the ``execute()`` time on Trio's clock,
    ``None`` when the tool never ran."""

    tool_call_id: str
    """The ``id`` of the tool call."""
    tool_name: str
    """The tool name the model called."""
    result: AgentToolResult
    """The final result (after ``after_tool_call``), or the error result the loop made."""
    is_error: bool
    """Whether the model sees the result as an error."""
    duration_ms: int | None = None
    """Milliseconds ``execute()`` took on Trio's clock; ``None`` when the tool never ran."""
    type: Literal["tool_execution_end"] = "tool_execution_end"


@attrs.frozen(kw_only=True, slots=False)
class CompactionEvent:
    """The run compacted its transcript (or tried to): beyond pi's Agent events, so that
    listeners (a session store, a UI) see it. Emitted before a request whose context
    would not fit (``reason="threshold"``), before the retry of a request the provider
    refused as too long (``"overflow"``), or by ``Agent.compact()`` (``"manual"``); never
    inside a message or a tool execution."""

    reason: Literal["threshold", "overflow", "manual"]
    """What started it."""
    messages: list[AgentMessage] | None
    """The transcript from now on (a system message, the summary, the kept messages), or
    ``None`` when the compaction failed and the transcript stays as it was."""
    summary: AgentMessage | None = None
    """The :class:`~trio_agent.compaction.CompactionSummary` (also in ``messages``)."""
    first_kept_index: int | None = None
    """Index, in the transcript before, of the first message kept."""
    tokens_before: int = 0
    """The estimated context size before."""
    usage: Usage | None = None
    """Usage of the summary request(s)."""
    error_message: str | None = None
    """Why it failed (``messages`` is then ``None``)."""
    type: Literal["compaction"] = "compaction"


AgentEvent: TypeAlias = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
    | CompactionEvent
)
"""Everything the loop emits, discriminated by ``type``."""
