"""assert_event_grammar: the SPEC §8 grammar, public, with messages naming event and rule."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import (
    Agent,
    AgentEndEvent,
    AgentEvent,
    AgentInitialState,
    AgentStartEvent,
    AgentToolResult,
    AssistantMessage,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    StopReason,
    TextContent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
    UserMessage,
)
from trio_agent.testing import (
    EventGrammarError,
    EventRecorder,
    FauxProvider,
    assert_event_grammar,
    faux_assistant_message,
)


def assistant(stop_reason: StopReason = "stop") -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text="hi")], api="faux", provider="faux", model="m",
        stop_reason=stop_reason,
    )  # fmt: skip


def one_turn() -> list[AgentEvent]:
    user = UserMessage(content="hi")
    answer = assistant()
    return [
        AgentStartEvent(),
        TurnStartEvent(),
        MessageStartEvent(message=user),
        MessageEndEvent(message=user),
        MessageStartEvent(message=answer),
        MessageEndEvent(message=answer),
        TurnEndEvent(message=answer, tool_results=[]),
        AgentEndEvent(messages=[user, answer]),
    ]


def breaks(events: list[Any]) -> EventGrammarError:
    with pytest.raises(EventGrammarError) as info:
        assert_event_grammar(events)
    return info.value


def test_a_well_formed_run_and_several_runs_in_a_row_pass() -> None:
    assert_event_grammar(one_turn())
    assert_event_grammar(one_turn() + one_turn())


async def test_a_real_agent_run_passes() -> None:
    faux = FauxProvider([faux_assistant_message("hello there, friend")])
    agent = Agent(initial_state=AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("hi")
    assert_event_grammar(recorder)


def test_the_message_names_event_rule_problem_and_the_events_around_it() -> None:
    events = one_turn()
    del events[1]  # no turn_start
    error = breaks(events)
    assert isinstance(error, AssertionError)
    assert (error.index, error.rule) == (1, "in-turn")
    assert str(error) == "\n".join(
        [
            "event 1 (message_start (user)) breaks the rule 'in-turn': "
            "message_start outside a turn",
            "  rule: every event other than agent_start, agent_end, turn_start and turn_end "
            "lies inside a turn (except the failure report after an aborted run's last turn: "
            "its assistant message_start/message_end directly before agent_end)",
            "    0: agent_start",
            "  > 1: message_start (user)",
            "    2: message_end (user)",
            "    3: message_start (assistant)",
            "    4: message_end (assistant)",
            "    5: turn_end",
            "    ...",
        ]
    )


def test_each_rule_is_named() -> None:
    start = ToolExecutionStartEvent(tool_call_id="c1", tool_name="t", args={})
    end = ToolExecutionEndEvent(
        tool_call_id="c1", tool_name="t", result=AgentToolResult(content=[]), is_error=False
    )
    update = MessageUpdateEvent(message=UserMessage(content="hi"), assistant_message_event=None)  # type: ignore[arg-type]  # only the type matters here
    run = one_turn()
    cases: list[tuple[list[Any], int, str, str]] = [
        ([], 0, "run-start", "there are no events"),
        (run[1:], 0, "run-start", "the first event is turn_start"),
        (run[:-1], 7, "run-end", "the last run has no agent_end"),
        ([*run, TurnStartEvent()], 8, "run-end", "turn_start comes after agent_end"),
        (run[:2] + run, 2, "run-end", "a run starts before the previous agent_end"),
        (run[:2] + run[1:], 2, "turns", "a turn starts inside an open turn"),
        (run[:6] + run[7:], 6, "turns", "agent_end comes before the open turn's turn_end"),
        (run[:3] + run[6:], 3, "messages", "turn_end comes with a message still open"),
        (run[:3] + run[2:], 3, "messages", "a message starts inside an open message"),
        ([*run[:2], run[3]], 2, "messages", "no message is open"),
        ([*run[:3], run[5]], 3, "messages",
         "it ends a assistant message, but a user message is open"),
        ([*run[:3], MessageEndEvent(message=UserMessage(content="hi"))], 3, "messages",
         "it ends another message than the one started"),
        ([*run[:3], update], 3, "updates", "the open message is a user message"),
        ([*run[:2], update], 2, "updates", "no message is open"),
        ([*run[:2], start, start], 3, "tools", "call c1 already has an open execution"),
        ([*run[:2], end], 2, "tools", "call c1 has no open tool_execution_start"),
        ([*run[:2], start, run[6]], 3, "tools",
         "turn_end comes with tool executions open: c1"),
    ]  # fmt: skip
    for events, index, rule, problem in cases:
        error = breaks(events)
        assert (error.index, error.rule) == (index, rule), events
        assert str(error).split("\n")[0].endswith(f"breaks the rule {rule!r}: {problem}")


def test_the_failure_report_of_an_aborted_run_may_stand_outside_a_turn() -> None:
    run = one_turn()
    failure = assistant("aborted")
    report = [MessageStartEvent(message=failure), MessageEndEvent(message=failure)]
    assert_event_grammar(run[:-1] + report + run[-1:])
    # Only directly before agent_end, only an aborted assistant message.
    error = breaks(run[:-1] + report + [TurnStartEvent()] + run[-2:])
    assert (error.index, error.rule) == (7, "in-turn")
    failed = assistant("error")
    error = breaks(
        [*run[:-1], MessageStartEvent(message=failed), MessageEndEvent(message=failed), *run[-1:]]
    )
    assert (error.index, error.rule) == (7, "in-turn")


def test_items_that_are_not_events_are_a_type_error() -> None:
    with pytest.raises(TypeError, match="not an event"):
        assert_event_grammar([object()])
