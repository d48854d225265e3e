"""The AG-UI encoder: every event it emits is in the protocol's list, has the protocol's
shape (checked with the protocol's own Python package when it is installed) and keeps its
ordering rules, for answers, thinking, tool calls, aborts and failures."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import trio

from trio_agent import Agent, AgentEvent, AgentInitialState, UserMessage
from trio_agent.models import (
    FauxProvider,
    faux_assistant_message,
    faux_text,
    faux_thinking,
    faux_tool_call,
)
from trio_agent.web import AgUiEncoder, agui_messages

from ._agui_grammar import SPEC_EVENT_TYPES, GrammarError, check_agui_stream
from .conftest import echo_tool

try:
    from ag_ui.core import Event as _AgUiEvent
    from ag_ui.core import Message as _AgUiMessage
    from pydantic import TypeAdapter
except ImportError:  # pragma: no cover - the test group installs it
    _event_adapter: Any = None
    _message_adapter: Any = None
else:
    _event_adapter = TypeAdapter(_AgUiEvent)
    _message_adapter = TypeAdapter(_AgUiMessage)


def _validate(events: list[dict[str, Any]]) -> None:
    check_agui_stream(events)
    for event in events:
        assert event["type"] in SPEC_EVENT_TYPES
        json.dumps(event)  # plain JSON values only
        if _event_adapter is not None:
            _event_adapter.validate_python(event)


async def _run(
    provider: FauxProvider, prompt: str = "hi", **kwargs: Any
) -> tuple[Agent, list[dict[str, Any]]]:
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[echo_tool], **kwargs),
        stream_fn=provider.stream_fn,
    )
    encoder = AgUiEncoder(
        thread_id="t1", run_id="r1", first_message_index=len(agent.state.messages)
    )
    out: list[dict[str, Any]] = []

    def listener(event: AgentEvent) -> None:
        out.extend(encoder.encode(event))

    agent.subscribe(listener)
    await agent.prompt(prompt)
    return agent, out


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


async def test_streamed_answer() -> None:
    provider = FauxProvider([faux_assistant_message("Hello there, world")])
    agent, events = await _run(provider)
    _validate(events)
    kinds = _types(events)
    assert kinds[:4] == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
    ]
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
    assert events[2] == {"type": "TEXT_MESSAGE_START", "messageId": "t1:1", "role": "user"}
    assert events[3]["delta"] == "hi"
    deltas = [
        e["delta"]
        for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == "t1:2"
    ]
    assert len(deltas) > 1
    assert "".join(deltas) == "Hello there, world"
    assert kinds[-2:] == ["STEP_FINISHED", "RUN_FINISHED"]
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"}
    assert finished["usage"][0]["provider"] == "faux"
    assert finished["usage"][0]["totalTokens"] == (
        finished["usage"][0]["inputTokens"] + finished["usage"][0]["outputTokens"]
    )
    # The ids of the stream are those of the transcript's snapshot.
    snapshot = agui_messages("t1", agent.state.messages)
    assert [m["id"] for m in snapshot] == ["t1:1", "t1:2"]  # no system message
    assert snapshot[1] == {"id": "t1:2", "role": "assistant", "content": "Hello there, world"}


async def test_thinking_and_tool_call() -> None:
    provider = FauxProvider(
        [
            faux_assistant_message(
                [
                    faux_thinking("let me think"),
                    faux_text("Calling."),
                    faux_tool_call("echo", {"text": "ping"}, id="call-1"),
                ],
                stop_reason="toolUse",
            ),
            faux_assistant_message("It said ping."),
        ]
    )
    agent, events = await _run(provider)
    _validate(events)
    kinds = _types(events)
    for kind in (
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ):
        assert kind in kinds, kind
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start == {
        "type": "TOOL_CALL_START",
        "toolCallId": "call-1",
        "toolCallName": "echo",
        "parentMessageId": "t1:2",
    }
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"text": "ping"}
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "t1:3",
        "toolCallId": "call-1",
        "content": "echo: ping",
        "role": "tool",
    }
    thinking = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert thinking == "let me think"
    assert kinds.count("STEP_STARTED") == 2
    assert [s["stepName"] for s in events if s["type"] == "STEP_FINISHED"] == ["turn 1", "turn 2"]
    snapshot = agui_messages("t1", agent.state.messages)
    if _message_adapter is not None:
        for message in snapshot:
            _message_adapter.validate_python(message)
    assert [m["role"] for m in snapshot] == ["user", "reasoning", "assistant", "tool", "assistant"]
    assert snapshot[2]["toolCalls"] == [
        {
            "id": "call-1",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text":"ping"}'},
        }
    ]


async def test_abort_closes_everything_and_finishes_cancelled() -> None:
    provider = FauxProvider([faux_assistant_message("a long answer " * 50)], tokens_per_second=50)
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    encoder = AgUiEncoder(thread_id="t", run_id="r")
    events: list[dict[str, Any]] = []

    def listener(event: AgentEvent) -> None:
        events.extend(encoder.encode(event))
        if event.type == "message_update" and len(events) > 8:
            agent.abort()

    agent.subscribe(listener)
    await agent.prompt("go")
    _validate(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert events[-3]["type"] == "TEXT_MESSAGE_END"


async def test_provider_error_is_run_error() -> None:
    provider = FauxProvider(
        [faux_assistant_message([], stop_reason="error", error_message="boom: 401")]
    )
    _, events = await _run(provider)
    _validate(events)
    assert events[-1] == {"type": "RUN_ERROR", "message": "boom: 401", "code": "error"}


async def test_steering_message_is_a_user_text_message() -> None:
    provider = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("echo", {"text": "a"}, id="c1")], stop_reason="toolUse"
            ),
            faux_assistant_message("done"),
        ]
    )
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[echo_tool]),
        stream_fn=provider.stream_fn,
    )
    encoder = AgUiEncoder(thread_id="t", run_id="r", first_message_index=1)
    events: list[dict[str, Any]] = []

    def listener(event: AgentEvent) -> None:
        events.extend(encoder.encode(event))
        if event.type == "tool_execution_start":
            agent.steer(UserMessage(content="also this"))

    agent.subscribe(listener)
    await agent.prompt("go")
    _validate(events)
    users = [e for e in events if e["type"] == "TEXT_MESSAGE_START" and e["role"] == "user"]
    assert [u["messageId"] for u in users] == ["t:1", "t:4"]
    content = next(
        e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == "t:4"
    )
    assert content["delta"] == "also this"


def test_grammar_checker_rejects_broken_streams() -> None:
    with pytest.raises(GrammarError, match="first event must be RUN_STARTED"):
        check_agui_stream([{"type": "TEXT_MESSAGE_START", "messageId": "m"}])
    with pytest.raises(GrammarError, match="still open"):
        check_agui_stream(
            [
                {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
                {"type": "TEXT_MESSAGE_START", "messageId": "m"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
            ]
        )
    with pytest.raises(GrammarError, match="not an AG-UI event type"):
        check_agui_stream([{"type": "THINKING_START"}])


def test_event_list_is_the_protocols() -> None:
    if _event_adapter is None:
        message = "pip install ag-ui-protocol to compare with the protocol's package"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from ag_ui.core import EventType

    assert {member.value for member in EventType} == SPEC_EVENT_TYPES


async def test_encoder_checkpoint_free() -> None:
    # Encoding is sync: a run's events are encoded without a task switch.
    encoder = AgUiEncoder(thread_id="t", run_id="r")
    assert encoder.run_started()["type"] == "RUN_STARTED"
    await trio.lowlevel.checkpoint()
