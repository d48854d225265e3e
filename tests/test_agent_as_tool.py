"""An agent as another agent's tool: events, abort, usage, failure, and shared limits."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from agent_helpers import make_agent

from trio_agent import (
    AgentEvent,
    AssistantMessage,
    LlmContext,
    Model,
    StreamFn,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    UsageLimits,
)
from trio_agent._util import maybe_await
from trio_agent.models import faux_assistant_message, faux_tool_call
from trio_agent.testing import EventRecorder


def _ask(tool: str, prompt: str, call_id: str = "c1") -> AssistantMessage:
    return faux_assistant_message(
        [faux_tool_call(tool, {"prompt": prompt}, id=call_id)], stop_reason="toolUse"
    )


async def test_the_child_answers_and_its_text_streams_as_progress(
    autojump_clock: trio.testing.MockClock,
) -> None:
    child, _ = make_agent([faux_assistant_message("Paris is the capital.")])
    tool = child.as_tool(name="researcher", description="Looks things up.")
    parent, _ = make_agent(
        [_ask("researcher", "capital of France?"), faux_assistant_message("Paris.")],
        tools=[tool],
    )
    recorder = EventRecorder()
    parent.subscribe(recorder)
    result = await parent.prompt("hi")
    answer = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert answer.content == [TextContent(text="Paris is the capital.")]
    assert (answer.is_error, answer.details) == (
        False,
        {"agent": "researcher", "ending": "stop"},
    )
    assert answer.usage is not None and answer.usage.total_tokens > 0
    updates = recorder.of_type("tool_execution_update")
    assert updates and updates[-1].partial_result.content == [
        TextContent(text="Paris is the capital.")
    ]
    # fresh=True: each call starts from the child's system message.
    assert [m.role for m in child.state.messages] == ["user", "assistant"]


async def test_the_parents_abort_cancels_the_child_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    child, _ = make_agent([faux_assistant_message("a long answer " * 50)])
    child.stream_fn = _slow(child.stream_fn)
    parent, _ = make_agent(
        [_ask("helper", "work")], tools=[child.as_tool(name="helper", description="Helps.")]
    )

    def stop(event: AgentEvent) -> None:
        if event.type == "message_update":
            parent.abort("enough")

    child.subscribe(stop)
    with trio.fail_after(5):
        result = await parent.prompt("hi")
    assert (result.ending, result.abort_reason) == ("aborted", "enough")
    assert not child.state.is_streaming
    last = child.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"


async def test_a_failed_child_run_is_an_error_result(
    autojump_clock: trio.testing.MockClock,
) -> None:
    child, _ = make_agent(
        [faux_assistant_message("", stop_reason="error", error_message="502 bad gateway")]
    )
    parent, _ = make_agent(
        [_ask("helper", "work"), faux_assistant_message("sorry")],
        tools=[child.as_tool(name="helper", description="Helps.")],
    )
    result = await parent.prompt("hi")
    answer = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert (answer.is_error, answer.content) == (True, [TextContent(text="502 bad gateway")])


async def test_a_shared_budget_stops_the_child_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = UsageLimits(requests=2)
    child, _ = make_agent([faux_assistant_message("never")], usage_limits=limits)
    parent, _ = make_agent(
        [_ask("helper", "work"), faux_assistant_message("never either")],
        tools=[child.as_tool(name="helper", description="Helps.")],
        usage_limits=limits,
    )
    parent.stream_fn = _spend_one_more(parent.stream_fn, limits)
    result = await parent.prompt("hi")
    answer = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert answer.is_error
    assert answer.details == {"agent": "helper", "ending": "limit"}
    assert answer.content == [TextContent(text="usage limit reached: requests (2)")]
    assert result.ending == "limit"


def _slow(stream_fn: StreamFn) -> StreamFn:
    async def slow(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        await trio.sleep(1)
        return await maybe_await(stream_fn(model, context, options))

    return slow


def _spend_one_more(stream_fn: StreamFn, limits: UsageLimits) -> StreamFn:
    """The parent's first request also spends one from the shared budget elsewhere."""

    def spend(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        if limits.used.requests == 1:
            limits.used.requests += 1
        return stream_fn(model, context, options)

    return spend
