"""Property test of SPEC §8: wherever an abort (or an outer cancellation) lands, the run
closes with a well-formed event grammar, every tool call in the transcript has exactly one
result, nothing is delivered after ``agent_end``, and the agent is idle afterwards."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import hypothesis
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models import FauxProvider, faux_assistant_message, faux_text, faux_tool_call
from trio_agent.testing import (
    EventRecorder,
    FaultInjector,
    abort_at,
    assert_event_grammar,
    cancel_at,
    raise_at,
)

SLEEPS = {"instant": 0.0, "short": 1.0, "long": 5.0}


def _make_tool(name: str, seconds: float) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        on_update(AgentToolResult(content=[TextContent(text="working")]))
        await trio.sleep(seconds)
        return AgentToolResult(content=[TextContent(text=f"{name} done")])

    return AgentTool(
        name=name,
        label=name,
        description=f"sleeps {seconds} s",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}},
        execute=execute,
    )


@attrs.frozen
class Scenario:
    turns: list[list[str]]  # per turn: the tools called (empty: a text answer)
    mode: str
    steering: int
    abort_at: int  # abort when the listener sees this event index
    outer: bool  # cancel the caller's scope instead of agent.abort()
    tokens_per_second: float | None


scenarios = st.builds(
    Scenario,
    turns=st.lists(st.lists(st.sampled_from(list(SLEEPS)), max_size=3), min_size=1, max_size=3),
    mode=st.sampled_from(["parallel", "sequential"]),
    steering=st.integers(0, 2),
    abort_at=st.integers(0, 60),
    outer=st.booleans(),
    tokens_per_second=st.sampled_from([None, 20.0]),
)


def _script(scenario: Scenario) -> list[AssistantMessage]:
    script = []
    for turn, tools in enumerate(scenario.turns):
        if tools:
            calls = [
                faux_tool_call(name, {"n": i}, id=f"t{turn}-{i}") for i, name in enumerate(tools)
            ]
            script.append(
                faux_assistant_message([faux_text("calling"), *calls], stop_reason="toolUse")
            )
        else:
            script.append(faux_assistant_message(f"answer {turn} with some words"))
    # Enough final answers for the steering messages and the follow-up turns.
    script.extend(faux_assistant_message("final answer") for _ in range(6))
    return script


async def _run(scenario: Scenario) -> None:
    faux = FauxProvider(_script(scenario), tokens_per_second=scenario.tokens_per_second)
    tools = [_make_tool(name, seconds) for name, seconds in SLEEPS.items()]
    agent = Agent(
        AgentInitialState(model=faux.get_model(), tools=tools),
        stream_fn=faux.stream_fn,
        tool_execution=scenario.mode,  # type: ignore[arg-type]  # sampled from the two modes
    )
    for i in range(scenario.steering):
        agent.steer(UserMessage(content=f"steer {i}"))
    outer_scope = trio.CancelScope()
    fault = (
        cancel_at(scenario.abort_at, outer_scope)
        if scenario.outer
        else abort_at(scenario.abort_at, agent)
    )
    unsubscribe = agent.subscribe(fault)
    with outer_scope:
        await agent.prompt("go")

    events = fault.events
    assert_event_grammar(events)
    aborted = any(
        e.type == "message_end" and getattr(e.message, "stop_reason", None) == "aborted"
        for e in events
    )
    hypothesis.event("aborted mid-turn" if aborted else "not aborted mid-turn")
    messages = agent.state.messages
    calls = [
        block.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ToolCall)
    ]
    results = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert sorted(calls) == sorted(results)
    assert len(set(results)) == len(results)
    assert agent.state.is_streaming is False
    assert agent.signal is None
    assert agent.state.pending_tool_calls == frozenset()
    # The transcript holds exactly what the message_end events committed.
    committed = [e.message for e in events if e.type == "message_end"]
    assert messages[-len(committed) :] == committed
    # The agent is usable again.
    unsubscribe()
    recorder = EventRecorder()
    agent.subscribe(recorder)
    faux.set_responses([faux_assistant_message("again")])
    agent.clear_all_queues()
    await agent.prompt("again")
    assert_event_grammar(recorder)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "stop"


@settings(max_examples=1000, deadline=None)
@given(scenarios)
def test_abort_anywhere_keeps_the_run_well_formed(scenario: Scenario) -> None:
    trio.run(_run, scenario, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_abort_while_tool_calls_stream_answers_them(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("instant", {"n": 1}, id="c1"), faux_tool_call("long", {}, id="c2")],
                stop_reason="toolUse",
            )
        ],
        tokens_per_second=10,
        token_size=(1, 1),
    )
    tools = [_make_tool(name, seconds) for name, seconds in SLEEPS.items()]
    agent = Agent(AgentInitialState(model=faux.get_model(), tools=tools), stream_fn=faux.stream_fn)

    def second_call_starts(event: AgentEvent) -> bool:
        return (
            event.type == "message_update"
            and event.assistant_message_event.type == "toolcall_start"
            and event.assistant_message_event.content_index == 1
        )

    # Abort once the second tool call has started streaming.
    fault = abort_at(second_call_starts, agent)
    agent.subscribe(fault)
    await agent.prompt("go")
    events = fault.events
    assert_event_grammar(events)
    types = [e.type for e in events if e.type != "message_update"]
    assert types[-11:] == [
        "message_end",  # the aborted assistant message, both calls in it
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    final = [e for e in events if e.type == "message_end"][-3].message
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request was aborted"
    assert [b.id for b in final.content if isinstance(b, ToolCall)] == ["c1", "c2"]
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error, r.content) for r in results] == [
        ("c1", True, [TextContent(text="Operation aborted")]),
        ("c2", True, [TextContent(text="Operation aborted")]),
    ]
    ends = [e for e in events if e.type == "tool_execution_end"]
    assert [e.duration_ms for e in ends] == [None, None]


@attrs.frozen
class FailureScenario:
    turns: list[list[str]]
    mode: str
    fail_at: int  # the listener raises on this event index
    tokens_per_second: float | None
    error: str = "ValueError"  # what it raises (a BaseException closes the run like an abort)


class CustomInterrupt(BaseException):
    pass


ERRORS: dict[str, type[BaseException]] = {
    "ValueError": ValueError,
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "CustomInterrupt": CustomInterrupt,
}


failure_scenarios = st.builds(
    FailureScenario,
    turns=st.lists(st.lists(st.sampled_from(list(SLEEPS)), max_size=3), min_size=1, max_size=3),
    mode=st.sampled_from(["parallel", "sequential"]),
    fail_at=st.integers(0, 50),
    tokens_per_second=st.sampled_from([None, 20.0]),
    error=st.sampled_from(list(ERRORS)),
)


async def _run_failure(scenario: FailureScenario) -> None:
    base = Scenario(
        turns=scenario.turns,
        mode=scenario.mode,
        steering=0,
        abort_at=-1,
        outer=False,
        tokens_per_second=scenario.tokens_per_second,
    )
    faux = FauxProvider(_script(base), tokens_per_second=scenario.tokens_per_second)
    tools = [_make_tool(name, seconds) for name, seconds in SLEEPS.items()]
    agent = Agent(
        AgentInitialState(model=faux.get_model(), tools=tools),
        stream_fn=faux.stream_fn,
        tool_execution=scenario.mode,  # type: ignore[arg-type]  # sampled from the two modes
    )
    error_type = ERRORS[scenario.error]
    seen = itertools.count()
    fault: FaultInjector = raise_at(
        lambda event: next(seen) == scenario.fail_at and event.type != "agent_end",
        error_type("listener failed"),
    )
    agent.subscribe(fault)
    try:
        await agent.prompt("go")
    except error_type:
        assert fault.fired and not issubclass(error_type, Exception)
    events = fault.events
    assert_event_grammar(events)
    if fault.fired and issubclass(error_type, Exception):
        last = agent.state.messages[-1]
        assert isinstance(last, AssistantMessage)
        assert last.error_message == "listener failed"
        assert agent.state.error_message == "listener failed"
    elif fault.fired:
        # Closed like an abort: every tool call in the transcript has exactly one result.
        called = [
            block.id
            for m in agent.state.messages
            if isinstance(m, AssistantMessage)
            for block in m.content
            if isinstance(block, ToolCall)
        ]
        answered = [
            m.tool_call_id for m in agent.state.messages if isinstance(m, ToolResultMessage)
        ]
        assert sorted(called) == sorted(answered)
    assert agent.state.is_streaming is False
    assert agent.signal is None
    assert agent.state.pending_tool_calls == frozenset()
    committed = [e.message for e in events if e.type == "message_end"]
    assert agent.state.messages[len(agent.state.messages) - len(committed) :] == committed


@settings(max_examples=1000, deadline=None)
@given(failure_scenarios)
def test_a_listener_failure_anywhere_keeps_the_run_well_formed(
    scenario: FailureScenario,
) -> None:
    trio.run(_run_failure, scenario, clock=trio.testing.MockClock(autojump_threshold=0))
