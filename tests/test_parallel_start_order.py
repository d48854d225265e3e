"""Parity row W3 (KEEP+DOCUMENT): the executions of a parallel tool batch start in no
guaranteed order. pi starts them synchronously in source order; trio_agent starts one task
per call and Trio's scheduler picks the order, so code before a tool's first ``await`` may
run as call_2, call_1. What stays ordered is pinned here too: ``tool_execution_start`` in
source order, the result messages in source order."""

from __future__ import annotations

from typing import Any

import trio

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    TextContent,
    ToolExecutionStartEvent,
    ToolResultMessage,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call


async def test_parallel_executions_start_in_scheduler_order() -> None:
    started: list[str] = []

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        started.append(tool_call_id)  # before the first checkpoint
        await trio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text=tool_call_id)])

    record = AgentTool(
        name="record",
        label="Record",
        description="d",
        parameters={"type": "object"},
        execute=execute,
    )
    faux = FauxProvider(
        [
            faux_assistant_message(
                [
                    faux_tool_call("record", {}, id="call_1"),
                    faux_tool_call("record", {}, id="call_2"),
                ],
                stop_reason="toolUse",
            ),
            faux_assistant_message("done"),
        ]
    )
    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model(), tools=[record]),
        stream_fn=faux.stream_fn,
        tool_execution="parallel",
    )
    starts: list[str] = []
    agent.subscribe(
        lambda event: (
            starts.append(event.tool_call_id)
            if isinstance(event, ToolExecutionStartEvent)
            else None
        )
    )
    await agent.prompt("go")
    # Both ran, in an order the scheduler chose ...
    assert sorted(started) == ["call_1", "call_2"]
    # ... while the start events and the result messages keep source order.
    assert starts == ["call_1", "call_2"]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [m.tool_call_id for m in results] == ["call_1", "call_2"]
