"""A run's events as AG-UI events (https://docs.ag-ui.com/concepts/events, protocol 1.0).

:class:`AgUiEncoder` turns the :data:`~trio_agent.AgentEvent` values of one run into AG-UI
event objects (plain ``dict`` values with the protocol's camelCase keys, ready for JSON),
and :func:`agui_messages` turns a transcript into AG-UI messages for a
``MESSAGES_SNAPSHOT``. The wire names are matched here rather than imported from the
``ag-ui-protocol`` package: that package is built on pydantic, which trio_agent does not
depend on (SPEC "Dependencies"); the tests validate every event we emit against it.

The mapping (one run):

========================================  ===============================================
trio_agent event                          AG-UI events
========================================  ===============================================
``agent_start``                           ``RUN_STARTED``
``turn_start`` / ``turn_end``             ``STEP_STARTED`` / ``STEP_FINISHED`` (``turn N``)
user message (``message_end``)            ``TEXT_MESSAGE_START`` (role ``user``),
                                          ``TEXT_MESSAGE_CONTENT``, ``TEXT_MESSAGE_END``
assistant text blocks                     one text message per assistant message:
                                          ``TEXT_MESSAGE_START`` at the first block,
                                          ``TEXT_MESSAGE_CONTENT`` per delta (blocks
                                          separated by a blank line),
                                          ``TEXT_MESSAGE_END`` at ``message_end``
assistant thinking block                  ``REASONING_START``, ``REASONING_MESSAGE_START``,
                                          ``REASONING_MESSAGE_CONTENT`` per delta,
                                          ``REASONING_MESSAGE_END``, ``REASONING_END``
assistant tool call                       ``TOOL_CALL_START`` (``parentMessageId``: the
                                          assistant message), ``TOOL_CALL_ARGS`` per delta,
                                          ``TOOL_CALL_END``
tool result message (``message_end``)     ``TOOL_CALL_RESULT``
``tool_execution_update``                 ``CUSTOM`` named ``tool_execution_update``
``agent_end``                             ``RUN_FINISHED`` (outcome ``success``, or
                                          ``cancelled`` after an abort, with the run's
                                          token usage), or ``RUN_ERROR`` when the run
                                          ended with an error message
========================================  ===============================================

A block still open when its message ends (an aborted or failed response) is closed at the
message's end, so every ``*_START`` has its ``*_END`` before the run's last event. Message
ids are ``"<thread>:<index>"``, the index being the message's position in the transcript,
so the ids of a run's events match those of :func:`agui_messages` for the same transcript.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from .._events import AgentEvent, AssistantMessageEvent
from .._messages import (
    AgentMessage,
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .._transcript import content_text

__all__ = ["AGUI_EVENT_TYPES", "AgUiEncoder", "agui_messages", "message_id"]

AGUI_EVENT_TYPES: frozenset[str] = frozenset(
    {
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "STEP_STARTED",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "MESSAGES_SNAPSHOT",
        "CUSTOM",
    }
)
"""The AG-UI event types this module emits (a subset of the protocol's list)."""

_BLOCK_SEPARATOR = "\n\n"


def message_id(thread_id: str, index: int) -> str:
    """The AG-UI id of the message at ``index`` of a thread's transcript."""
    return f"{thread_id}:{index}"


def _reasoning_id(assistant_id: str, content_index: int) -> str:
    return f"{assistant_id}:r{content_index}"


def _usage_entry(message: AssistantMessage) -> dict[str, Any]:
    """AG-UI ``TokenUsage``: input and output are totals, the cache counts parts of input
    (pi counts ``input`` without the cache reads and writes)."""
    usage: Usage = message.usage
    input_tokens = usage.input + usage.cache_read + usage.cache_write
    entry: dict[str, Any] = {
        "provider": message.provider,
        "model": message.model,
        "inputTokens": input_tokens,
        "outputTokens": usage.output,
        "totalTokens": input_tokens + usage.output,
        "cachedInputTokens": usage.cache_read,
        "cacheWriteInputTokens": usage.cache_write,
    }
    if usage.reasoning is not None:
        entry["reasoningTokens"] = usage.reasoning
    return entry


def _tool_result_text(message: ToolResultMessage) -> str:
    return content_text(message.content, "\n")


def _assistant_text(message: AssistantMessage) -> str:
    texts = [block.text for block in message.content if isinstance(block, TextContent)]
    return _BLOCK_SEPARATOR.join(text for text in texts if text)


def agui_messages(thread_id: str, messages: Sequence[AgentMessage]) -> list[dict[str, Any]]:
    """A transcript as AG-UI messages (for ``MESSAGES_SNAPSHOT`` or a transcript read).

    User messages become ``user`` messages (their text), assistant messages a
    ``reasoning`` message per thinking block followed by an ``assistant`` message (its
    text and ``toolCalls``), tool results ``tool`` messages (``error`` set when the result
    is an error). System messages and application messages are left out: AG-UI has no
    place for a tool declaration, and an application message means nothing to a
    generic client.
    """
    result: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        mid = message_id(thread_id, index)
        if isinstance(message, UserMessage):
            result.append({"id": mid, "role": "user", "content": content_text(message.content)})
        elif isinstance(message, AssistantMessage):
            for block_index, block in enumerate(message.content):
                if isinstance(block, ThinkingContent) and block.thinking:
                    result.append(
                        {
                            "id": _reasoning_id(mid, block_index),
                            "role": "reasoning",
                            "content": block.thinking,
                        }
                    )
            assistant: dict[str, Any] = {"id": mid, "role": "assistant"}
            text = _assistant_text(message)
            if text:
                assistant["content"] = text
            calls = [block for block in message.content if isinstance(block, ToolCall)]
            if calls:
                assistant["toolCalls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": json.dumps(call.arguments, separators=(",", ":")),
                        },
                    }
                    for call in calls
                ]
            if message.error_message:
                assistant["metadata"] = {
                    "stopReason": message.stop_reason,
                    "errorMessage": message.error_message,
                }
            result.append(assistant)
        elif isinstance(message, ToolResultMessage):
            tool: dict[str, Any] = {
                "id": mid,
                "role": "tool",
                "toolCallId": message.tool_call_id,
                "content": _tool_result_text(message),
            }
            if message.is_error:
                tool["error"] = _tool_result_text(message) or "error"
            result.append(tool)
    return result


@attrs.define(eq=False)
class _OpenMessage:
    """The AG-UI blocks opened for the assistant message that streams now."""

    id: str
    text_open: bool = False
    text_written: bool = False
    reasoning: dict[int, str] = attrs.Factory(dict)
    """Open reasoning messages by content index."""
    tool_calls: dict[int, str] = attrs.Factory(dict)
    """Open tool calls (their ids) by content index."""
    started_calls: set[str] = attrs.Factory(set)
    """Ids of the tool calls that had their ``TOOL_CALL_START``."""


@attrs.define(eq=False)
class AgUiEncoder:
    """Encodes the events of one run as AG-UI events, in order.

    Stateful (it tracks open messages, blocks and turns): use one encoder per run and
    feed it every event of the run. Sync: encoding never blocks.

    """

    thread_id: str
    """The AG-UI ``threadId`` (the session's id)."""
    run_id: str
    """The AG-UI ``runId``."""
    first_message_index: int = 0
    """The transcript length when the run starts: the index, and so the id, of the run's
    first message."""
    _next_index: int = attrs.field(init=False, default=0)
    _turn: int = attrs.field(init=False, default=0)
    _open: _OpenMessage | None = attrs.field(init=False, default=None)
    _usage: list[dict[str, Any]] = attrs.field(init=False, factory=list)
    _last_assistant: AssistantMessage | None = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self._next_index = self.first_message_index

    def encode(self, event: AgentEvent) -> list[dict[str, Any]]:
        """The AG-UI events for one agent event (often none or one)."""
        if event.type == "message_update":
            if self._open is None:
                return []
            return self._stream_event(self._open, event.assistant_message_event)
        if event.type == "message_start":
            index = self._next_index
            self._next_index += 1
            if isinstance(event.message, AssistantMessage):
                self._open = _OpenMessage(id=message_id(self.thread_id, index))
            return []
        if event.type == "message_end":
            return self._message_end(event.message)
        if event.type == "tool_execution_update":
            return [
                {
                    "type": "CUSTOM",
                    "name": "tool_execution_update",
                    "value": {
                        "toolCallId": event.tool_call_id,
                        "toolName": event.tool_name,
                        "text": content_text(event.partial_result.content, "\n"),
                    },
                }
            ]
        if event.type == "turn_start":
            self._turn += 1
            return [{"type": "STEP_STARTED", "stepName": f"turn {self._turn}"}]
        if event.type == "turn_end":
            return [{"type": "STEP_FINISHED", "stepName": f"turn {self._turn}"}]
        if event.type == "agent_start":
            return [self.run_started()]
        if event.type == "agent_end":
            return [self._run_end()]
        return []  # tool_execution_start / _end: the tool call and its result say it all

    def run_started(self) -> dict[str, Any]:
        """The ``RUN_STARTED`` event of this run."""
        return {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}

    def run_error(self, message: str, code: str = "error") -> dict[str, Any]:
        """A ``RUN_ERROR`` event (for a run that failed outside the agent's events)."""
        return {"type": "RUN_ERROR", "message": message, "code": code}

    def _run_end(self) -> dict[str, Any]:
        last = self._last_assistant
        if last is not None and last.stop_reason == "error":
            return self.run_error(last.error_message or "error")
        outcome = "cancelled" if last is not None and last.stop_reason == "aborted" else "success"
        finished: dict[str, Any] = {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": {"type": outcome},
        }
        if self._usage:
            finished["usage"] = list(self._usage)
        return finished

    def _stream_event(
        self, open_message: _OpenMessage, event: AssistantMessageEvent
    ) -> list[dict[str, Any]]:
        mid = open_message.id
        if event.type == "text_start":
            events: list[dict[str, Any]] = []
            if not open_message.text_open:
                open_message.text_open = True
                events.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
            elif open_message.text_written:
                # A later text block (after a tool call, say): keep the blocks apart.
                events.append(
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": _BLOCK_SEPARATOR}
                )
                open_message.text_written = False
            return events
        if event.type == "text_delta":
            if not event.delta or not open_message.text_open:
                return []
            open_message.text_written = True
            return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": event.delta}]
        if event.type == "thinking_start":
            rid = _reasoning_id(mid, event.content_index)
            open_message.reasoning[event.content_index] = rid
            return [
                {"type": "REASONING_START", "messageId": rid},
                {"type": "REASONING_MESSAGE_START", "messageId": rid, "role": "reasoning"},
            ]
        if event.type == "thinking_delta":
            rid_or_none = open_message.reasoning.get(event.content_index)
            if rid_or_none is None or not event.delta:
                return []
            return [
                {
                    "type": "REASONING_MESSAGE_CONTENT",
                    "messageId": rid_or_none,
                    "delta": event.delta,
                }
            ]
        if event.type == "thinking_end":
            rid_or_none = open_message.reasoning.pop(event.content_index, None)
            return [] if rid_or_none is None else _close_reasoning(rid_or_none)
        if event.type == "toolcall_start":
            block = event.partial.content[event.content_index]
            if not isinstance(block, ToolCall):
                return []
            open_message.tool_calls[event.content_index] = block.id
            open_message.started_calls.add(block.id)
            return [
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": block.id,
                    "toolCallName": block.name,
                    "parentMessageId": mid,
                }
            ]
        if event.type == "toolcall_delta":
            call_id = open_message.tool_calls.get(event.content_index)
            if call_id is None or not event.delta:
                return []
            return [{"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": event.delta}]
        if event.type == "toolcall_end":
            call_id = open_message.tool_calls.pop(event.content_index, None)
            return [] if call_id is None else [{"type": "TOOL_CALL_END", "toolCallId": call_id}]
        return []  # start, text_end (the text message spans blocks), done, error

    def _message_end(self, message: AgentMessage) -> list[dict[str, Any]]:
        index = self._next_index - 1
        mid = message_id(self.thread_id, index)
        if isinstance(message, AssistantMessage):
            open_message = self._open or _OpenMessage(id=mid)
            self._open = None
            self._last_assistant = message
            self._usage.append(_usage_entry(message))
            return _close_message(open_message, message)
        if isinstance(message, UserMessage):
            text = content_text(message.content)
            events: list[dict[str, Any]] = [
                {"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "user"}
            ]
            if text:
                events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text})
            events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
            return events
        if isinstance(message, ToolResultMessage):
            result: dict[str, Any] = {
                "type": "TOOL_CALL_RESULT",
                "messageId": mid,
                "toolCallId": message.tool_call_id,
                "content": _tool_result_text(message),
                "role": "tool",
            }
            if message.is_error:
                result["metadata"] = {"isError": True}
            return [result]
        return []  # system and application messages have no AG-UI form


def _close_reasoning(rid: str) -> list[dict[str, Any]]:
    return [
        {"type": "REASONING_MESSAGE_END", "messageId": rid},
        {"type": "REASONING_END", "messageId": rid},
    ]


def _close_message(open_message: _OpenMessage, message: AssistantMessage) -> list[dict[str, Any]]:
    """Close what is still open of a finished assistant message; a message that streamed
    nothing (a synthesized abort or failure message) is sent whole."""
    events: list[dict[str, Any]] = []
    mid = open_message.id
    for rid in open_message.reasoning.values():
        events.extend(_close_reasoning(rid))
    for call_id in open_message.tool_calls.values():
        events.append({"type": "TOOL_CALL_END", "toolCallId": call_id})
    if open_message.text_open:
        events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
    elif text := _assistant_text(message):
        # Nothing streamed (a stream function that only sent its final message).
        events.append({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"})
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": text})
        events.append({"type": "TEXT_MESSAGE_END", "messageId": mid})
    for block in message.content:
        if isinstance(block, ToolCall) and block.id not in open_message.started_calls:
            events.append(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": block.id,
                    "toolCallName": block.name,
                    "parentMessageId": mid,
                }
            )
            events.append(
                {
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": block.id,
                    "delta": json.dumps(block.arguments, separators=(",", ":")),
                }
            )
            events.append({"type": "TOOL_CALL_END", "toolCallId": block.id})
    return events
