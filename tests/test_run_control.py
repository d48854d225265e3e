"""Run control: what a run returns (RunResult) and the usage limits that end it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import calls, make_agent, make_tool

from trio_agent import (
    AgentEvent,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    LimitReached,
    LlmContext,
    Model,
    RunResult,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    UsageLimits,
    UserMessage,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.models import FauxProvider, faux_assistant_message
from trio_agent.testing import EventRecorder


async def _instant(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"ran {tool_call_id}")])


def _counting(provider: FauxProvider) -> tuple[list[int], Any]:
    sent: list[int] = []

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        sent.append(len(context.messages))
        return provider.stream_fn(model, context, options)

    return sent, stream_fn


# ---------------------------------------------------------------------------------------
# RunResult


async def test_a_run_returns_what_it_added_how_it_ended_and_its_usage(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent(
        [
            calls(("t", "a")),
            faux_assistant_message("done"),
        ],
        tools=[make_tool("t", _instant)],
    )
    result = await agent.prompt("hi")
    assert isinstance(result, RunResult)
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert result.messages == agent.state.messages[-4:]
    assert result.final is agent.state.messages[-1]
    assert (result.ending, result.error, result.abort_reason, result.limit) == (
        "stop",
        None,
        None,
        None,
    )
    responses = [m for m in result.messages if isinstance(m, AssistantMessage)]
    assert result.usage.total_tokens == sum(m.usage.total_tokens for m in responses) > 0
    assert result.usage.output == sum(m.usage.output for m in responses)
    assert result.usage.cost.total == sum(m.usage.cost.total for m in responses)


async def test_an_abort_in_a_tool_batch_gives_its_reason(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.sleep(10)
        return AgentToolResult(content=[TextContent(text="late")])

    agent, _ = make_agent([calls(("slow", "a"))], tools=[make_tool("slow", slow)])

    def listener(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.abort("user pressed stop")

    agent.subscribe(listener)
    result = await agent.prompt("hi")
    assert (result.ending, result.abort_reason) == ("aborted", "user pressed stop")
    assert agent.state.error_message is None  # the reason is in the result, not there
    last = result.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.is_error


@pytest.mark.parametrize(
    ("response", "ending", "error"),
    [
        (faux_assistant_message("cut", stop_reason="length"), "length", None),
        (
            faux_assistant_message("", stop_reason="error", error_message="429 slow down"),
            "error",
            "429 slow down",
        ),
    ],
)
async def test_the_ending_follows_the_final_message(
    autojump_clock: trio.testing.MockClock,
    response: AssistantMessage,
    ending: str,
    error: str | None,
) -> None:
    agent, _ = make_agent([response])
    result = await agent.prompt("hi")
    assert (result.ending, result.error) == (ending, error)


async def test_a_terminating_tool_leaves_the_run_at_tool_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def final(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text="final")], terminate=True)

    agent, _ = make_agent([calls(("final", "a"))], tools=[make_tool("final", final)])
    result = await agent.prompt("hi")
    assert result.ending == "tool_use"


async def test_loop_users_get_the_same_result(autojump_clock: trio.testing.MockClock) -> None:
    provider = FauxProvider([faux_assistant_message("hello")])
    from trio_agent import AbortSignal

    signal = AbortSignal()
    added = await run_agent_loop(
        [UserMessage(content="hi")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=provider.get_model()),
        EventRecorder(),
        signal=signal,
        stream_fn=provider.stream_fn,
    )
    result = RunResult.of(added, signal)
    assert (result.ending, [m.role for m in result.messages]) == ("stop", ["user", "assistant"])


# ---------------------------------------------------------------------------------------
# Usage limits


async def test_a_request_limit_never_sends_request_n_plus_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    provider = FauxProvider([calls(("t", f"c{i}")) for i in range(5)])
    sent, stream_fn = _counting(provider)
    limits = UsageLimits(requests=3)
    agent, _ = make_agent([], tools=[make_tool("t", _instant)], usage_limits=limits)
    agent.stream_fn = stream_fn
    recorder = EventRecorder()
    agent.subscribe(recorder)
    result = await agent.prompt("hi")
    assert len(sent) == 3
    assert (result.ending, result.limit) == ("limit", LimitReached("requests", 3))
    assert str(result.limit) == "usage limit reached: requests (3)"
    assert limits.used.requests == 3
    # Stopped before a fourth turn starts: the run ends as an abort between turns does.
    assert isinstance(result.messages[-1], ToolResultMessage)
    assert [t for t in recorder.types if t != "message_update"][-3:] == [
        "message_end",
        "turn_end",
        "agent_end",
    ]


async def test_a_tool_call_limit_runs_no_tool_past_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ran: list[str] = []

    async def tracked(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        ran.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text="ok")])

    limits = UsageLimits(tool_calls=2)
    agent, _ = make_agent(
        [calls(("t", "a"), ("t", "b"), ("t", "c")), faux_assistant_message("never")],
        tools=[make_tool("t", tracked)],
        usage_limits=limits,
    )
    result = await agent.prompt("hi")
    assert sorted(ran) == ["a", "b"]
    assert (result.ending, result.limit) == ("limit", LimitReached("tool_calls", 2))
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [
        ("a", False),
        ("b", False),
        ("c", True),
    ]
    assert results[-1].content == [TextContent(text="usage limit reached: tool_calls (2)")]
    assert isinstance(result.messages[-1], ToolResultMessage)  # no request after the batch


async def test_a_token_limit_stops_the_next_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = [calls(("t", f"c{i}")) for i in range(5)]
    probe, _ = make_agent(script, tools=[make_tool("t", _instant)])
    first, second, *_ = [
        m.usage.total_tokens
        for m in (await probe.prompt("hi")).messages
        if isinstance(m, AssistantMessage)
    ]
    provider = FauxProvider(script)
    sent, stream_fn = _counting(provider)
    limit = first + second  # reached by the second response
    agent, _ = make_agent(
        [], tools=[make_tool("t", _instant)], usage_limits=UsageLimits(total_tokens=limit)
    )
    agent.stream_fn = stream_fn
    result = await agent.prompt("hi")
    assert len(sent) == 2  # the third request is not sent
    assert result.limit == LimitReached("total_tokens", limit)


async def test_one_budget_is_shared_by_several_agents(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = UsageLimits(requests=3)
    first, _ = make_agent(
        [faux_assistant_message("one"), faux_assistant_message("two")], usage_limits=limits
    )
    second, _ = make_agent(
        [faux_assistant_message("three"), faux_assistant_message("four")],
        usage_limits=limits,
    )
    assert (await first.prompt("a")).ending == "stop"
    assert (await second.prompt("b")).ending == "stop"
    assert (await first.prompt("c")).ending == "stop"
    spent = await second.prompt("d")
    assert (spent.ending, limits.used.requests) == ("limit", 3)
    # Spent before the run's first request: that turn closes like an abort before it.
    assert [m.role for m in spent.messages] == ["user", "assistant"]
    assert spent.final is not None
    assert (spent.final.stop_reason, spent.final.error_message) == (
        "aborted",
        "usage limit reached: requests (3)",
    )


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError) as info:
        UsageLimits(requests=-1)
    assert str(info.value) == "UsageLimits: requests must be an int >= 0 or None, got -1"
    with pytest.raises(ValueError) as info:
        UsageLimits(cost="a lot")  # type: ignore[arg-type]
    assert str(info.value) == "UsageLimits: cost must be a number >= 0 or None, got 'a lot'"
