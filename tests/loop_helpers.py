"""Helpers shared by the loop tests: scripted streams that record requests, queue
sources, tools from raw ``execute`` functions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import trio

from trio_agent import (
    AbortSignal,
    AgentMessage,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    UserMessage,
    content_text,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call

STRING_VALUE = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def text_result(text: str, **fields: Any) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], details={}, **fields)


def make_tool(
    name: str,
    execute: Callable[[str, dict[str, Any], AbortSignal, AgentToolUpdateCallback], Awaitable[Any]],
    *,
    parameters: dict[str, Any] | None = None,
    **fields: Any,
) -> AgentTool:
    return AgentTool(
        name=name,
        label=name.title(),
        description=f"The {name} tool.",
        parameters=parameters if parameters is not None else {"type": "object"},
        execute=execute,
        **fields,
    )


def message_text(message: Any) -> str:
    """The text of a user/assistant/tool-result message ('' for others)."""
    content = getattr(message, "content", "")
    return content_text(content) if isinstance(content, str | list) else ""


def tool_calls_reply(*calls: tuple[str, str, dict[str, Any]]) -> AssistantMessage:
    """An assistant message asking for ``(id, name, arguments)`` calls."""
    return faux_assistant_message(
        [faux_tool_call(name, arguments, id=id) for id, name, arguments in calls],
        stop_reason="toolUse",
    )


class RecordingStream:
    """A faux provider whose stream function records every request."""

    def __init__(self, responses: Sequence[AssistantMessage], **faux_options: Any) -> None:
        self.faux = FauxProvider(responses, **faux_options)
        self.models: list[Model] = []
        self.contexts: list[LlmContext] = []
        self.options: list[StreamOptions] = []

    @property
    def model(self) -> Model:
        return self.faux.get_model()

    @property
    def calls(self) -> int:
        return len(self.contexts)

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.models.append(model)
        self.contexts.append(context)
        self.options.append(options)
        return self.faux.stream_fn(model, context, options)

    def request_texts(self, index: int) -> list[str]:
        """The texts of the user messages of request ``index``."""
        return [message_text(m) for m in self.contexts[index].messages if m.role == "user"]


class Source:
    """A steering or follow-up source: returns (and empties) its items, counts polls."""

    def __init__(self, *items: AgentMessage) -> None:
        self.items: list[AgentMessage] = list(items)
        self.polls = 0

    def __call__(self) -> list[AgentMessage]:
        self.polls += 1
        items, self.items = self.items, []
        return items


def tool_result_ids(messages: Sequence[Any]) -> list[str]:
    return [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]


async def noop_execute(
    call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
) -> AgentToolResult:
    await trio.lowlevel.checkpoint()
    return text_result(f"ran {call_id}")


NOOP = make_tool("noop", noop_execute)
