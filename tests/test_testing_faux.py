"""The faux provider as a test double: its request log, assert_complete(), per-step delays
and failures that go through the HTTP providers' request phase and retries."""

from __future__ import annotations

from contextlib import aclosing

import pytest
import trio
import trio.testing

from trio_agent import (
    AbortController,
    Agent,
    AgentInitialState,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    StreamOptions,
    UserMessage,
    get_system_message_text,
)
from trio_agent.models import FauxResponse
from trio_agent.testing import (
    FauxProvider,
    FauxRequest,
    faux_assistant_message,
    faux_connection_error,
    faux_http_error,
    faux_step,
)

RATE_LIMITED = '{"error": {"message": "Rate limited"}}'


async def collect(
    faux: FauxProvider, options: StreamOptions | None = None, text: str = "hi"
) -> list[AssistantMessageEvent]:
    context = LlmContext(messages=[UserMessage(content=text)])
    stream = faux.stream_fn(faux.get_model(), context, options or StreamOptions())
    async with aclosing(stream):
        return [event async for event in stream]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert last.type in ("done", "error")
    return last.message if last.type == "done" else last.error


async def test_every_request_is_logged_with_its_context_and_options() -> None:
    faux = FauxProvider([faux_assistant_message("a"), faux_assistant_message("b")])
    options = StreamOptions(session_id="s1")
    await collect(faux, options, text="first")
    await collect(faux, text="second")
    assert [type(r) for r in faux.requests] == [FauxRequest, FauxRequest]
    first, second = faux.requests
    assert first.model == faux.get_model()
    (message,) = first.context.messages
    assert message == UserMessage(content="first", timestamp=message.timestamp)
    assert first.options is options
    assert (first.attempt, second.attempt) == (0, 0)
    assert second.options.session_id is None


async def test_an_agent_run_is_logged_request_by_request() -> None:
    faux = FauxProvider([faux_assistant_message("hello")])
    agent = Agent(
        AgentInitialState(system_prompt="Be brief.", model=faux.get_model()),
        stream_fn=faux.stream_fn,
    )
    await agent.prompt("hi")
    (request,) = faux.requests
    assert [m.role for m in request.context.messages] == ["system", "user"]
    assert get_system_message_text(request.context.messages[0]) == "Be brief."  # type: ignore[arg-type]  # the system message
    assert request.options.signal is not None
    faux.assert_complete()


async def test_assert_complete_fails_on_left_over_steps() -> None:
    faux = FauxProvider(
        [
            faux_assistant_message("used"),
            faux_assistant_message("a rather long answer that nobody ever asked for"),
            faux_step(faux_http_error(429, RATE_LIMITED), delay=2),
            faux_connection_error(),
            faux_assistant_message("x"),
        ]
    )
    await collect(faux)
    with pytest.raises(AssertionError) as info:
        faux.assert_complete()
    assert str(info.value) == (
        "4 scripted faux steps left over after 1 request: "
        "message 'a rather long answer that nobody ever a... (stop), HTTP 429 after 2 s, "
        "connection error 'Connection refused', ..."
    )
    faux.set_responses([lambda context, options, state, model: faux_assistant_message("x")])
    with pytest.raises(AssertionError) as info:
        faux.assert_complete()
    assert str(info.value) == (
        "1 scripted faux step left over after 1 request: "
        "factory test_assert_complete_fails_on_left_over_steps.<locals>.<lambda>"
    )


async def test_a_step_delay_passes_on_trios_clock(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider([faux_step(faux_assistant_message("late"), delay=3.5)])
    seen: list[tuple[str, float]] = []
    context = LlmContext(messages=[UserMessage(content="hi")])
    stream = faux.stream_fn(faux.get_model(), context, StreamOptions())
    async with aclosing(stream):
        async for event in stream:
            seen.append((event.type, trio.current_time()))
    assert seen == [
        ("start", 3.5),
        ("text_start", 3.5),
        ("text_delta", 3.5),
        ("text_end", 3.5),
        ("done", 3.5),
    ]


async def test_an_abort_ends_a_step_delay_at_once(autojump_clock: trio.testing.MockClock) -> None:
    faux = FauxProvider([faux_step(faux_assistant_message("late"), delay=30)])
    controller = AbortController()

    async def abort_later() -> None:
        await trio.sleep(1)
        controller.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        events = await collect(faux, StreamOptions(signal=controller.signal))
    assert [e.type for e in events] == ["error"]
    assert final(events).stop_reason == "aborted"
    assert final(events).error_message == "Request was aborted"
    assert trio.current_time() == 1.0


async def test_a_429_with_retry_after_is_retried_on_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(
        [
            faux_http_error(429, RATE_LIMITED, headers={"retry-after": "2"}),
            faux_step(faux_http_error(503), delay=0.5),
            faux_assistant_message("finally"),
        ]
    )
    events = await collect(faux, StreamOptions(max_retries=2, max_retry_delay_ms=5000))
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_end", "done"]
    assert final(events).content[0].text == "finally"  # type: ignore[union-attr]  # a text block
    assert [r.attempt for r in faux.requests] == [0, 1, 2]
    assert faux.state.call_count == 1
    # 2 s asked by retry-after, 0.5 s of delay, then a backoff of 0.375-0.5 s * 2 for the 503.
    assert 3.25 <= trio.current_time() <= 3.5
    faux.assert_complete()


async def test_http_failures_are_worded_like_the_providers() -> None:
    cases: list[tuple[FauxResponse, StreamOptions, str]] = [
        (faux_http_error(429, RATE_LIMITED), StreamOptions(), "429 Rate limited"),
        (faux_http_error(503), StreamOptions(), "503 status code (no body)"),
        (faux_http_error(400, "bad request"), StreamOptions(max_retries=3), "400 bad request"),
        (
            faux_http_error(429, RATE_LIMITED, headers={"retry-after": "120"}),
            StreamOptions(max_retries=1),
            "Server requested 120s retry delay (max: 60s). 429 Rate limited",
        ),
    ]
    for step, options, message in cases:
        faux = FauxProvider([step])
        events = await collect(faux, options)
        assert [e.type for e in events] == ["error"]
        assert (final(events).stop_reason, final(events).error_message) == ("error", message)
        assert len(faux.requests) == 1  # not retryable, or not retried
    # Worded as the HTTP providers word a connection error (with the model's origin).
    events = await collect(FauxProvider([faux_connection_error("no route")]))
    text = final(events).error_message
    assert text is not None
    assert text.startswith("Connection error") and text.endswith(": no route")


async def test_a_retry_with_nothing_scripted_is_the_empty_queue_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider([faux_connection_error()])
    events = await collect(faux, StreamOptions(max_retries=1))
    assert final(events).error_message == "No more faux responses queued"
    assert [r.attempt for r in faux.requests] == [0, 1]


async def test_an_agent_retries_through_its_max_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(
        [
            faux_http_error(429, RATE_LIMITED, headers={"retry-after-ms": "1500"}),
            faux_assistant_message("ok"),
        ]
    )
    agent = Agent(
        AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn, max_retries=1
    )
    await agent.prompt("hi")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.content[0].text) == ("stop", "ok")  # type: ignore[union-attr]  # a text block
    assert trio.current_time() == 1.5
    faux.assert_complete()


def test_http_error_needs_an_error_status() -> None:
    with pytest.raises(ValueError, match="an HTTP error status is >= 400, not 302"):
        faux_http_error(302)
