"""The offline demo model of ``trio-agent`` can stand in for a compaction's summary."""

from __future__ import annotations

import trio
import trio.testing

from trio_agent import Agent, AgentInitialState
from trio_agent._demo import DemoModel
from trio_agent.compaction import CompactionResult, CompactionSettings, CompactionSummary


async def test_the_demo_model_compacts_a_chat(autojump_clock: trio.testing.MockClock) -> None:
    demo = DemoModel(tokens_per_second=None)
    agent = Agent(
        AgentInitialState(model=demo.model),
        stream_fn=demo.stream_fn,
        compaction=CompactionSettings(reserve_tokens=100, keep_recent_tokens=20),
    )
    for city in ["Paris", "Oslo", "Rome", "Lima"]:
        await agent.prompt(f"What is the weather in {city}?")
    outcome = await agent.compact()
    assert isinstance(outcome, CompactionResult)
    summary = next(m for m in agent.state.messages if isinstance(m, CompactionSummary))
    assert summary.summary.startswith("## Goal\nTry the offline demo model of trio-agent.")


async def test_two_requests_at_once_each_get_an_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    demo = DemoModel(tokens_per_second=None)
    agents = [Agent(AgentInitialState(model=demo.model), stream_fn=demo.stream_fn) for _ in "ab"]
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.prompt, "Hello!")
    assert [a.state.messages[-1].stop_reason for a in agents] == ["stop", "stop"]  # type: ignore[union-attr]
