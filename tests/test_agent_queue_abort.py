"""Queue ownership across aborts (reference upstream-agent.md §3.12 and §5.3, upstream
``9340-queue-abort.test.ts``): drained-but-undelivered messages return to the front of
their queue, delivered ones stay delivered, and nothing is delivered twice."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest

from trio_agent import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentTurnContext,
    AssistantMessage,
    AssistantMessageEvent,
    ImageContent,
    LlmContext,
    Model,
    QueueMode,
    StreamOptions,
    TextContent,
    UserMessage,
    content_text,
)
from trio_agent.testing import (
    EventRecorder,
    FauxProvider,
    assert_event_types,
    faux_assistant_message,
)


def user(text: str, *, image: bool = False) -> UserMessage:
    content: list[TextContent | ImageContent] = [TextContent(text=text)]
    if image:
        content.append(ImageContent(data="aGVsbG8=", mime_type="image/png"))
    return UserMessage(content=content, timestamp=1)


class Requests:
    """A :class:`FauxProvider` that records the transcript of every request."""

    def __init__(self, *texts: str) -> None:
        self.faux = FauxProvider([faux_assistant_message(text) for text in texts])
        self.contexts: list[LlmContext] = []

    def stream_fn(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.contexts.append(context)
        return self.faux.stream_fn(model, context, options)

    def saw(self, text: str) -> bool:
        return any(
            isinstance(m, UserMessage) and content_text(m.content) == text
            for context in self.contexts
            for m in context.messages
        )


def user_texts(messages: list[Any]) -> list[str]:
    return [content_text(m.content) for m in messages if isinstance(m, UserMessage)]


def count_identity(messages: list[Any], message: Any) -> int:
    return sum(m is message for m in messages)


@pytest.mark.parametrize("clear", [False, True], ids=["kept", "cleared"])
@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
@pytest.mark.parametrize("kind", ["steering", "follow-up"])
async def test_given_reserved_s_originals_when_preparation_aborts_then_fifo_objects_survive_for_a_fresh_prompt(  # noqa: E501
    kind: Literal["steering", "follow-up"], mode: QueueMode, clear: bool
) -> None:
    requests = Requests("first answer", "r1", "r2", "r3", "r4")
    agent = Agent(
        initial_state=AgentInitialState(model=requests.faux.get_model()),
        stream_fn=requests.stream_fn,
        steering_mode=mode,
        follow_up_mode=mode,
    )
    originals = [user("queued-1"), user("queued-2", image=True)]
    queued = False

    def listener(event: AgentEvent) -> None:
        nonlocal queued
        if event.type == "turn_end" and not queued:
            queued = True
            for message in originals:
                if kind == "steering":
                    agent.steer(message)
                else:
                    agent.follow_up(message)

    prepare_calls: list[list[str]] = []

    def prepare_next_turn(turn: AgentTurnContext, signal: AbortSignal | None) -> None:
        prepare_calls.append(user_texts(turn.new_messages))
        agent.abort()
        if clear:
            agent.clear_all_queues()

    agent.prepare_next_turn_with_context = prepare_next_turn
    agent.subscribe(listener)
    recorder = EventRecorder()
    agent.subscribe(recorder)

    await agent.prompt("old")

    assert len(requests.contexts) == 1
    assert prepare_calls == [["old"]]
    for original in originals:
        assert count_identity(agent.state.messages, original) == 0
    assert agent.has_queued_messages() is (not clear)
    # An abort between turns ends the run directly (SPEC §8).
    assert_event_types(
        recorder,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            *["message_update"] * len(recorder.of_type("message_update")),
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    if not clear:
        expected_head = originals[:1] if mode == "one-at-a-time" else originals
        assert agent.peek_queued_messages() == expected_head
        assert all(a is b for a, b in zip(agent.peek_queued_messages(), expected_head, strict=True))

    agent.prepare_next_turn_with_context = None
    await agent.prompt("fresh")

    later = [
        m
        for m in agent.state.messages
        if isinstance(m, UserMessage) and content_text(m.content) not in ("old", "fresh")
    ]
    if clear:
        assert later == []
    else:
        assert len(later) == 2
        assert later[0] is originals[0]
        assert later[1] is originals[1]
    for original in originals:
        assert count_identity(agent.state.messages, original) == (0 if clear else 1)
    assert requests.saw("queued-1") is (not clear)
    assert agent.has_queued_messages() is False
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "stop"


async def test_given_an_all_mode_batch_when_stopped_after_accepting_its_first_message_then_accepted_input_stays_and_only_the_remainder_is_restored() -> (  # noqa: E501
    None
):
    requests = Requests("r1", "r2")
    agent = Agent(
        initial_state=AgentInitialState(model=requests.faux.get_model()),
        stream_fn=requests.stream_fn,
        steering_mode="all",
    )
    accepted, pending = user("accepted"), user("pending")
    agent.steer(accepted)
    agent.steer(pending)

    def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message is accepted:
            agent.abort()

    agent.subscribe(listener)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("old")

    assert len(requests.contexts) == 0
    assert count_identity(agent.state.messages, accepted) == 1
    assert count_identity(agent.state.messages, pending) == 0
    assert agent.peek_queued_messages() == [pending]
    # Aborted after turn_start, before the request: a synthesized aborted message closes
    # the turn (SPEC §8).
    assert_event_types(
        recorder,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    closing = agent.state.messages[-1]
    assert isinstance(closing, AssistantMessage)
    assert closing.content == []
    assert closing.stop_reason == "aborted"
    assert closing.error_message == "Operation aborted"
    assert (closing.api, closing.provider, closing.model) == ("faux", "faux", "faux-1")
    assert user_texts(agent.state.messages) == ["old", "accepted"]

    agent.clear_steering_queue()
    agent.steer(pending)
    await agent.prompt("fresh")
    assert count_identity(agent.state.messages, accepted) == 1
    assert count_identity(agent.state.messages, pending) == 1
    assert user_texts(agent.state.messages) == ["old", "accepted", "fresh", "pending"]
    assert agent.has_queued_messages() is False


async def test_given_a_completed_response_with_queued_steer_when_message_end_aborts_then_the_original_is_not_polled_or_delivered() -> (  # noqa: E501
    None
):
    requests = Requests("r1", "r2")
    agent = Agent(
        initial_state=AgentInitialState(model=requests.faux.get_model()),
        stream_fn=requests.stream_fn,
    )
    steering = user("steering")

    def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            agent.steer(steering)
            agent.abort()

    agent.subscribe(listener)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("old")

    assert len(requests.contexts) == 1
    assert count_identity(agent.state.messages, steering) == 0
    assert agent.has_queued_messages() is True
    assert agent.peek_queued_messages() == [steering]
    types = recorder.types
    assert types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert types.count("turn_start") == 1
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "stop"
    assert content_text(final.content) == "r1"
