"""Helpers shared by the Agent and run tests: scripted agents, tools from small bodies,
and checks on a transcript."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolExecutionMode,
    ToolResultMessage,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call

PARAMS: dict[str, Any] = {"type": "object", "properties": {"value": {"type": "string"}}}

ToolBody = Callable[[str, AgentToolUpdateCallback], Awaitable[AgentToolResult]]


async def ok(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="ok")])


def make_tool(
    name: str, body: ToolBody = ok, *, execution_mode: ToolExecutionMode | None = None
) -> AgentTool:
    """A tool named ``name`` whose execution is ``body(tool_call_id, on_update)``."""

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        return await body(tool_call_id, on_update)

    return AgentTool(
        name=name,
        label=name,
        description=f"{name} tool",
        parameters=PARAMS,
        execute=execute,
        execution_mode=execution_mode,
    )


def text_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)])


async def instant(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
    await trio.lowlevel.checkpoint()
    return text_result(f"done {tool_call_id}")


async def forever(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
    await trio.sleep_forever()
    raise AssertionError("unreachable")  # pragma: no cover


def calls(*specs: tuple[str, str]) -> AssistantMessage:
    """An assistant message calling ``(tool name, call id)`` for each spec."""
    return faux_assistant_message(
        [faux_tool_call(name, {"value": call_id}, id=call_id) for name, call_id in specs],
        stop_reason="toolUse",
    )


def make_agent(
    responses: list[AssistantMessage],
    tools: list[AgentTool] | None = None,
    **kwargs: Any,
) -> tuple[Agent, FauxProvider]:
    faux = FauxProvider(responses)
    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model(), tools=tools or []),
        stream_fn=faux.stream_fn,
        **kwargs,
    )
    return agent, faux


def without_updates(types: list[str]) -> list[str]:
    return [t for t in types if t != "message_update"]


def assert_every_tool_call_answered(messages: list[Any]) -> None:
    call_ids = [
        block.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ToolCall)
    ]
    result_ids = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert sorted(call_ids) == sorted(result_ids)
