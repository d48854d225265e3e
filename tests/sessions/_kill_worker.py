"""The worker process of the kill tests: an agent on an SQLite session, run until killed.

``script()`` is the deterministic conversation (three turns of one ``replay="safe"`` and
one ``replay="never"`` tool call, then a final text); ``tools()`` its tools, which take a
few milliseconds of real time so a kill can land anywhere.
"""

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
    AssistantMessage,
    TextContent,
)
from trio_agent.sessions import attach_agent, open_store
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call

TURNS = 3
LEASE = 0.15
"""A short lease, so the killed worker's claim expires quickly."""


def script() -> list[AssistantMessage]:
    steps = [
        faux_assistant_message(
            [
                faux_tool_call("lookup", {"n": turn}, id=f"safe-{turn}"),
                faux_tool_call("send", {"n": turn}, id=f"never-{turn}"),
            ],
            stop_reason="toolUse",
        )
        for turn in range(TURNS)
    ]
    return [*steps, faux_assistant_message("all done")]


def tools(delay: float = 0.005) -> list[AgentTool]:
    def make(name: str, replay: Any) -> AgentTool:
        async def execute(
            tool_call_id: str,
            params: dict[str, Any],
            signal: AbortSignal,
            on_update: AgentToolUpdateCallback,
        ) -> AgentToolResult:
            await trio.sleep(delay)
            return AgentToolResult(content=[TextContent(text=f"{name} {params['n']}")])

        return AgentTool(
            name=name,
            label=name,
            description=name,
            parameters={
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
            execute=execute,
            replay=replay,
            execution_mode="sequential",
        )

    return [make("lookup", "safe"), make("send", "never")]


def make_agent(faux: FauxProvider) -> Agent:
    return Agent(
        initial_state=AgentInitialState(
            system_prompt="Kill test.", model=faux.get_model(), tools=tools()
        ),
        stream_fn=faux.stream_fn,
    )


async def run(url: str, session_id: str, committed: Any, started: Any) -> None:
    faux = FauxProvider(script(), tokens_per_second=2000)
    agent = make_agent(faux)
    async with open_store(url, lease_seconds=LEASE) as store:
        await store.create(session_id=session_id, cwd="/kill")
        async with store.open_for_writing(session_id) as session:

            def count(event: Any) -> None:
                # After the session's own listener: what is counted is committed.
                committed.value = len(session.entries)

            async with attach_agent(agent, session):
                agent.subscribe(count)
                started.set()
                await agent.prompt("go")
    committed.value = -1  # finished


def main(url: str, session_id: str, committed: Any, started: Any) -> None:
    trio.run(run, url, session_id, committed, started)
