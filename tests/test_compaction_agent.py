"""Compaction in the run: after a provider's overflow (compact, retry once), on request
(``Agent.compact``), and what an abort or a failed summary leaves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import attrs
import trio
import trio.testing

from trio_agent import (
    Agent,
    AgentEvent,
    AgentInitialState,
    AssistantMessage,
    AssistantMessageEvent,
    CompactionEvent,
    LlmContext,
    Model,
    StreamOptions,
    SystemMessage,
    UserMessage,
    content_text,
)
from trio_agent.compaction import (
    SUMMARIZATION_SYSTEM_PROMPT,
    CompactionFailure,
    CompactionResult,
    CompactionSettings,
    CompactionSummary,
)
from trio_agent.testing import FauxProvider, assert_event_grammar, faux_assistant_message

SETTINGS = CompactionSettings(reserve_tokens=200, keep_recent_tokens=100)
LONG = "a sentence that takes some room in the context window. " * 20


def is_summary_request(context: LlmContext) -> bool:
    first = context.messages[0]
    return isinstance(first, SystemMessage) and first.content == SUMMARIZATION_SYSTEM_PROMPT


class Model_:
    """A scripted model: answers, a summary for summary requests, and an overflow error
    for the first request whose context holds more than ``overflow_at`` messages."""

    def __init__(self, *, overflow_at: int | None = None, summary_fails: bool = False) -> None:
        self.provider = FauxProvider()
        self.overflow_at = overflow_at
        self.summary_fails = summary_fails
        self.requests: list[list[Any]] = []
        self.summaries = 0
        self.release = trio.Event()
        self.block_summary = False

    async def stream_fn(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        if is_summary_request(context):
            self.summaries += 1
            if self.block_summary:
                await self.release.wait()
            reply = (
                faux_assistant_message("", stop_reason="error", error_message="503 busy")
                if self.summary_fails
                else faux_assistant_message("## Goal\nTalk about sentences.")
            )
        else:
            self.requests.append(list(context.messages))
            if self.overflow_at is not None and len(context.messages) > self.overflow_at:
                self.overflow_at = None
                reply = faux_assistant_message(
                    "",
                    stop_reason="error",
                    error_message="prompt is too long: 213462 tokens > 200000 maximum",
                )
            else:
                reply = faux_assistant_message(f"answer {len(self.requests)}: " + LONG)
        self.provider.append_responses([reply])
        async with aclosing(self.provider.stream_fn(model, context, options)) as events:
            async for event in events:
                yield event


def make(script: Model_, window: int = 100_000, **kwargs: Any) -> tuple[Agent, list[AgentEvent]]:
    model = attrs.evolve(script.provider.get_model(), context_window=window)
    agent = Agent(
        AgentInitialState(model=model, system_prompt="You talk."),
        stream_fn=script.stream_fn,
        **kwargs,
    )
    events: list[AgentEvent] = []
    agent.subscribe(events.append)
    return agent, events


async def chat(agent: Agent, turns: int) -> None:
    for turn in range(turns):
        await agent.prompt(f"question {turn}: " + LONG)


async def test_an_overflow_is_compacted_and_the_request_retried_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Model_(overflow_at=12)
    agent, events = make(script, compaction=SETTINGS)
    await chat(agent, 8)
    compactions = [e for e in events if isinstance(e, CompactionEvent)]
    assert [e.reason for e in compactions] == ["overflow"]
    assert script.summaries == 1
    # The request after the compaction starts from the summary (as a user message).
    overflowed = next(i for i, r in enumerate(script.requests) if len(r) > 12)
    retried = script.requests[overflowed + 1]
    assert isinstance(retried[1], UserMessage)
    assert "Talk about sentences." in content_text(retried[1].content)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "stop"
    assert_event_grammar(events)


async def test_without_compaction_an_overflow_ends_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Model_(overflow_at=4)
    agent, events = make(script)
    await chat(agent, 3)
    assert not any(isinstance(e, CompactionEvent) for e in events)
    assert agent.state.error_message == "prompt is too long: 213462 tokens > 200000 maximum"


async def test_compact_on_request_is_a_run_of_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Model_()
    agent, events = make(script, compaction=SETTINGS)
    await chat(agent, 6)
    before = list(agent.state.messages)
    events.clear()
    outcome = await agent.compact("Keep the questions.")
    assert isinstance(outcome, CompactionResult)
    assert [e.type for e in events] == ["agent_start", "compaction", "agent_end"]
    assert agent.state.messages == outcome.messages
    assert isinstance(agent.state.messages[1], CompactionSummary)
    assert agent.state.messages[-1] == before[-1]  # the recent messages are kept
    assert len(agent.state.messages) < len(before)
    await agent.prompt("and now?")  # the conversation goes on from the summary
    assert isinstance(script.requests[-1][1], UserMessage)


async def test_an_abort_during_the_summary_leaves_the_transcript(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Model_()
    agent, _ = make(script, compaction=SETTINGS)
    await chat(agent, 6)
    before = list(agent.state.messages)
    script.block_summary = True
    async with trio.open_nursery() as nursery:

        async def compact() -> None:
            outcome = await agent.compact()
            assert isinstance(outcome, CompactionFailure) and outcome.aborted

        nursery.start_soon(compact)
        await trio.testing.wait_all_tasks_blocked()
        agent.abort("enough")
    assert agent.state.messages == before
    assert not agent.state.is_streaming


async def test_a_failed_summary_is_reported_and_the_request_goes_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    script = Model_(summary_fails=True)
    agent, events = make(script, window=1_500, compaction=SETTINGS)
    await chat(agent, 4)
    failures = [e for e in events if isinstance(e, CompactionEvent) and e.messages is None]
    assert failures and failures[0].error_message is not None
    assert failures[0].error_message.startswith("Summarization failed")
    assert not any(isinstance(m, CompactionSummary) for m in agent.state.messages)
    assert len(script.requests) == 4  # every request was still sent


async def test_a_summary_request_never_asks_for_the_runs_structured_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[bool] = []
    script = Model_()
    inner = script.stream_fn

    def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        if is_summary_request(context):
            seen.append(options.response_schema is None)
        return inner(model, context, options)

    model = attrs.evolve(script.provider.get_model(), context_window=100_000)
    agent = Agent(
        AgentInitialState(model=model, system_prompt="You talk."),
        stream_fn=stream_fn,
        compaction=SETTINGS,
    )
    await chat(agent, 6)
    from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_compaction

    config = AgentLoopConfig(
        model=model,
        compaction=SETTINGS,
        stream_options=StreamOptions(response_schema={"name": "final_result", "schema": {}}),
    )
    context = AgentContext(messages=list(agent.state.messages))
    outcome = await run_agent_compaction(context, config, lambda e: None, stream_fn=stream_fn)
    assert isinstance(outcome, CompactionResult)
    assert seen and all(seen)  # one summary request, or two when the cut split a turn
