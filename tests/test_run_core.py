"""The run core: one close path, one emit path, options held once, cancellable everywhere.

Each test pins one finding or parity row; the ones that hung before run under
``trio.fail_after`` so a regression fails instead of hanging.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from agent_helpers import calls, make_agent, make_tool, without_updates

from trio_agent import (
    AbortSignal,
    AgentError,
    AgentEvent,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    ToolResultMessage,
    UserMessage,
    content_text,
)
from trio_agent._util import collapse_errors, collapse_exception_group
from trio_agent.loop import (
    CLOSING_GRACE_SECONDS,
    AgentContext,
    AgentLoopConfig,
    AgentToolCallOutcome,
    run_agent_loop,
    run_tool_call,
)
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call
from trio_agent.testing import EventRecorder, assert_event_grammar


async def _done(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="done")])


# ---------------------------------------------------------------------------------------
# F1: an exception leaving the run under the caller's cancellation is not lost


@pytest.mark.parametrize(
    ("kind", "error"),
    [("message_end", KeyboardInterrupt()), ("agent_end", ValueError("failed on agent_end"))],
)
async def test_an_exception_leaving_a_cancelled_run_is_not_replaced_by_cancelled(
    autojump_clock: trio.testing.MockClock, kind: str, error: BaseException
) -> None:
    provider = FauxProvider(
        [faux_assistant_message("a fairly long answer " * 5)], tokens_per_second=20
    )
    agent, _ = make_agent([])
    agent.stream_fn = provider.stream_fn
    agent.state.model = provider.get_model()
    scope = trio.CancelScope()

    def listener(event: AgentEvent) -> None:
        if event.type == "message_update":
            scope.cancel()
        role = getattr(getattr(event, "message", None), "role", None)
        if event.type == kind and (kind != "message_end" or role == "assistant"):
            raise error

    agent.subscribe(listener)
    with trio.fail_after(10), pytest.raises(type(error)) as info, scope:
        await agent.prompt("hi")
    assert info.value is error
    assert agent.state.is_streaming is False


# ---------------------------------------------------------------------------------------
# F12: the caller's cancellation after an error response reaches the closing listeners


async def test_outer_cancellation_after_an_error_response_reaches_the_closing_listeners(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent([faux_assistant_message("answer", stop_reason="error")])
    seen: list[tuple[bool, Any]] = []

    async def listener(event: AgentEvent, signal: AbortSignal) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            await trio.sleep(1)
        if event.type in ("turn_end", "agent_end"):
            seen.append((signal.aborted, signal.reason))

    agent.subscribe(listener)
    with trio.move_on_after(0.5) as scope:
        await agent.prompt("hi")
    assert scope.cancelled_caught is True
    assert seen == [(True, "cancelled"), (True, "cancelled")]


# ---------------------------------------------------------------------------------------
# F13: a BaseException closes the grammar before it propagates


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit, GeneratorExit])
async def test_a_base_exception_from_a_tool_answers_every_call_then_propagates(
    autojump_clock: trio.testing.MockClock, mode: str, exc_type: type[BaseException]
) -> None:
    async def slow(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.sleep(1)
        return AgentToolResult(content=[TextContent(text="slow")])

    async def interrupted(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.sleep(0.1)
        raise exc_type

    agent, _ = make_agent(
        [calls(("slow", "a"), ("interrupted", "b"))],
        [make_tool("slow", slow), make_tool("interrupted", interrupted)],
        tool_execution=mode,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with trio.fail_after(10), pytest.raises(exc_type):
        await agent.prompt("go")
    assert_event_grammar(recorder.events)
    assert_event_grammar(recorder.events)
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == (
        [("a", False), ("b", True)] if mode == "sequential" else [("a", True), ("b", True)]
    )
    assert content_text(results[-1].content) == "Operation aborted"
    # The transcript is the initial system message plus every committed message.
    assert [e.message for e in recorder.of_type("message_end")] == agent.state.messages[1:]
    assert agent.state.is_streaming is False


async def test_a_listener_that_never_returns_is_bounded_by_the_grace_after_a_base_exception(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def interrupted(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        raise KeyboardInterrupt

    agent, _ = make_agent([calls(("interrupted", "b"))], [make_tool("interrupted", interrupted)])
    seen: list[str] = []

    async def stuck_on_turn_end(event: AgentEvent) -> None:
        seen.append(event.type)
        if event.type == "turn_end":
            await trio.sleep_forever()

    agent.subscribe(stuck_on_turn_end)
    start = trio.current_time()
    with trio.fail_after(60), pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert trio.current_time() - start == CLOSING_GRACE_SECONDS
    assert seen[-2:] == ["turn_end", "agent_end"]


# ---------------------------------------------------------------------------------------
# F19: a failure after an abort never starts a turn


async def test_a_failure_reported_after_an_abort_starts_no_turn() -> None:
    async def aborting(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        agent.abort()
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    agent, _ = make_agent(
        [calls(("aborting", "a"), ("done", "b"))],
        [make_tool("aborting", aborting), make_tool("done", _done)],
    )
    recorder = EventRecorder()

    def failing(event: AgentEvent) -> None:
        if event.type == "turn_end":
            raise RuntimeError("turn_end listener failed")

    agent.subscribe(recorder)
    agent.subscribe(failing)
    with trio.fail_after(5):
        await agent.prompt("go")
    types = without_updates(recorder.types)
    assert types.count("turn_start") == 1
    assert types[-4:] == ["turn_end", "message_start", "message_end", "agent_end"]
    failure = agent.state.messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("aborted", "turn_end listener failed")
    assert agent.state.error_message == "turn_end listener failed"
    assert [e.message for e in recorder.of_type("message_end")] == agent.state.messages[1:]


# ---------------------------------------------------------------------------------------
# P1a, P1b: no hang that cancellation cannot end


async def test_wait_for_idle_from_a_listener_of_the_run_raises_at_once() -> None:
    agent, _ = make_agent([faux_assistant_message("hi")])
    errors: list[BaseException] = []

    async def on_event(event: AgentEvent) -> None:
        if event.type == "agent_end":
            try:
                await agent.wait_for_idle()
            except AgentError as exc:
                errors.append(exc)
                raise

    agent.subscribe(on_event)
    with trio.fail_after(5), pytest.raises(AgentError) as info:
        await agent.prompt("x")
    assert str(info.value) == (
        "wait_for_idle() called from inside the active run (a listener, hook or tool); "
        "it would wait for itself"
    )
    assert errors == [info.value]
    assert agent.state.is_streaming is False


async def test_wait_for_idle_from_a_tool_raises_at_once() -> None:
    async def waiting(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await agent.wait_for_idle()
        raise AssertionError("unreachable")  # pragma: no cover

    agent, _ = make_agent(
        [calls(("waiting", "a")), faux_assistant_message("ok")], [make_tool("waiting", waiting)]
    )
    with trio.fail_after(5):
        await agent.prompt("go")
    result = agent.state.messages[-2]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error is True
    assert content_text(result.content) == (
        "wait_for_idle() called from inside the active run (a listener, hook or tool); "
        "it would wait for itself"
    )


async def test_events_opened_outside_the_nursery_ends_under_the_callers_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, _ = make_agent([faux_assistant_message("Hello there"), faux_assistant_message("2")])
    with trio.fail_after(60), trio.move_on_after(2) as scope:
        async with agent.open_events() as events, trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt, "Hello")
            async for event in events:
                if event.type == "message_end":
                    break
    assert scope.cancelled_caught is True
    assert trio.current_time() == 2 + CLOSING_GRACE_SECONDS
    assert agent.state.is_streaming is False
    await agent.prompt("next")
    assert content_text(agent.state.messages[-1].content) == "2"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------
# One close path: loop users get the closed failure sequence


async def test_run_agent_loop_reports_a_hook_failure_in_band() -> None:
    faux = FauxProvider([faux_assistant_message("never")])

    def failing_key(provider: str) -> str:
        raise RuntimeError("no key today")

    recorder = EventRecorder()
    messages = await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=faux.get_model(), get_api_key=failing_key),
        recorder,
        stream_fn=faux.stream_fn,
    )
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in messages] == ["user", "assistant"]
    failure = messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("error", "no key today")
    assert recorder.of_type("agent_end")[0].messages == [failure]


async def test_agent_end_lists_only_delivered_messages() -> None:
    """Finding F10: a prompt the abort stopped before delivery is not in agent_end."""
    faux = FauxProvider([faux_assistant_message("never")])
    recorder = EventRecorder()

    async def emit(event: AgentEvent) -> None:
        recorder.events.append(event)
        if event.type == "message_end":
            controller_signal._abort("stop")

    controller_signal = AbortSignal()
    messages = await run_agent_loop(
        [UserMessage(content="one"), UserMessage(content="two")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=faux.get_model()),
        emit,
        signal=controller_signal,
        stream_fn=faux.stream_fn,
    )
    delivered = [e.message for e in recorder.of_type("message_end")]
    users = [m for m in delivered if isinstance(m, UserMessage)]
    assert [content_text(m.content) for m in users] == ["one"]
    assert recorder.of_type("agent_end")[0].messages == delivered == messages


# ---------------------------------------------------------------------------------------
# One emit path: the sink protocol


async def test_a_memory_channel_is_a_sink() -> None:
    faux = FauxProvider([faux_assistant_message("hi")])
    send, receive = trio.open_memory_channel[AgentEvent](100)
    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=faux.get_model()),
        send,
        stream_fn=faux.stream_fn,
    )
    send.close()
    types: list[str] = [event.type async for event in receive]
    assert without_updates(types) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


@pytest.mark.parametrize("through_agent", [False, True])
async def test_events_whose_listeners_do_not_await_cost_no_checkpoint(
    through_agent: bool,
) -> None:
    """With a stream that has its events ready (it never checkpoints) and listeners that
    do not await, the whole response is handed over without a checkpoint: no other task
    runs between its first and last event (no cancel scope, no task switch per event)."""
    faux = FauxProvider([faux_assistant_message("x" * 200)], token_size=(1, 1))
    partials: list[Any] = []

    async def collect() -> None:
        async for event in faux.stream_fn(
            faux.get_model(), LlmContext(messages=[]), StreamOptions()
        ):
            partials.append(event)

    await collect()

    async def ready(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        for event in partials:
            yield event

    seen: list[tuple[str, int]] = []
    ticks = 0

    def listener(event: AgentEvent) -> None:
        seen.append((event.type, ticks))

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        await trio.lowlevel.checkpoint()  # the ticker is running
        if through_agent:
            agent, _ = make_agent([])
            agent.stream_fn = ready
            agent.subscribe(listener)
            await agent.prompt("go")
        else:
            await run_agent_loop(
                [UserMessage(content="go")],
                AgentContext(messages=[]),
                AgentLoopConfig(model=faux.get_model()),
                listener,
                stream_fn=ready,
            )
        nursery.cancel_scope.cancel()
    streamed = [tick for kind, tick in seen if kind == "message_update"]
    assert len(streamed) > 50
    assert len(set(streamed)) == 1


# ---------------------------------------------------------------------------------------
# Options held once


async def test_agent_request_options_reach_every_request() -> None:
    seen: list[StreamOptions] = []
    faux = FauxProvider([faux_assistant_message("hi")])

    async def stream_fn(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        seen.append(options)
        return faux.stream_fn(model, context, options)

    agent, _ = make_agent(
        [], temperature=0.25, max_tokens=77, max_retries=3, headers={"x-trace": "1"}
    )
    agent.stream_fn = stream_fn
    agent.state.model = faux.get_model()
    await agent.prompt("go")
    options = seen[0]
    assert (options.temperature, options.max_tokens, options.max_retries, options.headers) == (
        0.25,
        77,
        3,
        {"x-trace": "1"},
    )
    assert options.reasoning is None  # "off" is no level: the stream function gets None
    agent.max_retries = 5  # attributes are read when a run starts
    faux.set_responses([faux_assistant_message("again")])
    await agent.prompt("again")
    assert seen[1].max_retries == 5


async def test_loop_config_holds_one_stream_options() -> None:
    field_names = {field.name for field in attrs.fields(AgentLoopConfig)}
    assert "stream_options" in field_names
    assert not field_names & {field.name for field in attrs.fields(StreamOptions)}


# ---------------------------------------------------------------------------------------
# Exception groups the trio way


def test_collapse_keeps_several_real_errors_together() -> None:
    first, second = ValueError("a"), RuntimeError("b")
    group = collapse_exception_group(BaseExceptionGroup("", [first, second]))
    assert isinstance(group, ExceptionGroup)
    assert list(group.exceptions) == [first, second]


def test_collapse_raises_one_real_error_as_itself_and_interrupts_first() -> None:
    error = ValueError("a")
    assert collapse_errors([error]) is error
    interrupt = KeyboardInterrupt()
    assert collapse_errors([error, interrupt]) is interrupt
    assert interrupt.__context__ is error
    exit_ = SystemExit(2)
    assert collapse_errors([exit_]) is exit_


async def test_collapse_of_only_cancelled_is_one_cancelled() -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            cancelled = exc
            assert collapse_errors([exc, exc]) is exc
            raise
    assert isinstance(cancelled, trio.Cancelled)


async def test_two_listener_failures_in_a_parallel_batch_are_both_raised_or_reported() -> None:
    agent, _ = make_agent([calls(("done", "a"), ("done", "b"))], [make_tool("done", _done)])

    def failing(event: AgentEvent) -> None:
        if event.type == "tool_execution_end":
            raise ValueError(f"failed on {event.tool_call_id}")

    agent.subscribe(failing)
    with pytest.raises(ValueError) as info:
        await agent.prompt("go")
    failure = agent.state.messages[-1]
    assert isinstance(failure, AssistantMessage)
    # The first is reported in-band, the second leaves prompt(): none is dropped.
    assert {failure.error_message, str(info.value)} == {"failed on a", "failed on b"}


# ---------------------------------------------------------------------------------------
# Parity rows of the loop: B1, C1, W1


async def test_b1_an_abort_before_preparation_skips_lookup_preparation_and_hooks() -> None:
    ran: list[str] = []

    def prepare(arguments: dict[str, Any]) -> dict[str, Any]:
        ran.append("prepare")
        return arguments

    def before(context: Any, signal: AbortSignal) -> None:
        ran.append("before")

    tool = attrs.evolve(make_tool("strict", _done), prepare_arguments=prepare)
    agent, _ = make_agent(
        [
            faux_assistant_message(
                [
                    faux_tool_call("strict", {"value": 1}, id="a"),  # fails the schema
                    faux_tool_call("ghost", {}, id="b"),
                ],
                stop_reason="toolUse",
            )
        ],
        [tool],
        before_tool_call=before,
    )
    recorder = EventRecorder()

    def aborting(event: AgentEvent) -> None:
        if event.type == "tool_execution_start":
            agent.abort()

    agent.subscribe(aborting)
    agent.subscribe(recorder)
    await agent.prompt("go")
    assert ran == []
    ends = recorder.of_type("tool_execution_end")
    assert [(e.tool_call_id, e.is_error, e.duration_ms) for e in ends] == [
        ("a", True, None),
        ("b", True, None),
    ]
    assert all(
        e.result == AgentToolResult(content=[TextContent(text="Operation aborted")], details={})
        for e in ends
    )


@pytest.mark.parametrize("stream_kind", ["self-aborting", "cancelled"])
async def test_c1_finish_turn_runs_once_after_an_abort_during_streaming(
    autojump_clock: trio.testing.MockClock, stream_kind: str
) -> None:
    turns: list[str | None] = []

    def finish_turn(turn: Any, signal: AbortSignal) -> None:
        turns.append(turn.message.stop_reason)

    faux = FauxProvider([faux_assistant_message("long answer " * 20)], tokens_per_second=10)

    async def cancelled_stream(model: Model, context: LlmContext, options: StreamOptions) -> Any:
        async def events() -> Any:
            async with aclosing(faux.stream_fn(model, context, options)) as inner:
                async for event in inner:
                    if event.type == "start":
                        yield event
                        await trio.sleep_forever()

        return events()

    agent, _ = make_agent([], finish_turn=finish_turn)
    agent.state.model = faux.get_model()
    agent.stream_fn = faux.stream_fn if stream_kind == "self-aborting" else cancelled_stream
    recorder = EventRecorder()

    def aborting(event: AgentEvent) -> None:
        if event.type == "message_start" and event.message.role == "assistant":
            agent.abort()

    agent.subscribe(aborting)
    agent.subscribe(recorder)
    await agent.prompt("go")
    assert turns == ["aborted"]
    assert without_updates(recorder.types)[-4:] == [
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    final = recorder.of_type("message_end")[-1].message
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request was aborted"


async def test_w1_loop_made_error_results_carry_no_error_flag() -> None:
    seen: list[AgentToolResult] = []

    async def bad(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text="bad")], is_error=True)

    def after(context: Any, signal: AbortSignal) -> Any:
        from trio_agent import AfterToolCallResult

        seen.append(context.result)
        return AfterToolCallResult(is_error=False)

    agent, _ = make_agent(
        [calls(("bad", "a"), ("ghost", "b")), faux_assistant_message("ok")],
        [make_tool("bad", bad)],
        after_tool_call=after,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    ends = {e.tool_call_id: e for e in recorder.of_type("tool_execution_end")}
    assert ends["b"].result == AgentToolResult(
        content=[TextContent(text="Tool ghost not found")], details={}
    )
    assert ends["b"].is_error is True
    assert ends["a"].is_error is False
    assert ends["a"].result.is_error is True  # the tool's own field, untouched
    results = {m.tool_call_id: m for m in agent.state.messages if isinstance(m, ToolResultMessage)}
    assert results["a"].is_error is False
    assert seen[0].is_error is True


async def test_run_tool_call_outcome_carries_the_duration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def slow(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.sleep(0.25)
        return AgentToolResult(content=[TextContent(text="ok")])

    tool: AgentTool = make_tool("slow", slow)
    call = faux_tool_call("slow", {"value": "x"}, id="a")
    outcome = await run_tool_call(
        call,
        tools=[tool],
        assistant_message=faux_assistant_message([call], stop_reason="toolUse"),
        context=AgentContext(messages=[]),
    )
    assert outcome == AgentToolCallOutcome(
        tool_call=call,
        result=AgentToolResult(content=[TextContent(text="ok")]),
        is_error=False,
        duration_ms=250,
    )


# ---------------------------------------------------------------------------------------
# F14: what a failure leaves in turn_end and agent_end (kept as upstream, documented)


async def test_f14_a_failure_reports_only_the_failure_message_in_turn_end_and_agent_end() -> None:
    agent, _ = make_agent(
        [calls(("done", "a"), ("done", "b"))],
        [make_tool("done", _done)],
        tool_execution="sequential",
    )
    before = EventRecorder()
    after = EventRecorder()
    results = 0

    def failing(event: AgentEvent) -> None:
        nonlocal results
        if event.type == "message_end" and event.message.role == "toolResult":
            results += 1
            if results == 1:
                raise RuntimeError("listener failed")

    agent.subscribe(before)
    agent.subscribe(failing)
    agent.subscribe(after)
    await agent.prompt("go")
    roles = [e.message.role for e in before.of_type("message_end")]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    failure = agent.state.messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("error", "listener failed")
    assert before.of_type("turn_end")[0].tool_results == []
    assert before.of_type("agent_end")[0].messages == [failure]
    # The listener after the raising one missed that event, then got the failure sequence.
    assert [e.message.role for e in after.of_type("message_end")] == [
        "user",
        "assistant",
        "assistant",
    ]
    assert [m.role for m in agent.state.messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]


# ---------------------------------------------------------------------------------------
# Logging: run failures and aborts


async def test_run_failures_and_aborts_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    caplog.set_level(logging.DEBUG, logger="trio_agent.loop")
    agent, _ = make_agent([faux_assistant_message("hi"), faux_assistant_message("again")])

    def failing(event: AgentEvent) -> None:
        if event.type == "turn_start":
            raise RuntimeError("listener failed")

    unsubscribe = agent.subscribe(failing)
    await agent.prompt("go")
    unsubscribe()

    def aborting(event: AgentEvent) -> None:
        if event.type == "turn_start":
            agent.abort("enough")

    agent.subscribe(aborting)
    await agent.prompt("again")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "run failed: RuntimeError: listener failed"),
        ("DEBUG", "run aborted (reason: 'enough')"),
    ]


# ---------------------------------------------------------------------------------------
# F7 on the faux provider: arguments nested too deep become an invalid-arguments result


async def test_faux_tool_arguments_nested_too_deep_become_an_invalid_arguments_result(
    tmp_path: Any,
) -> None:
    from trio_agent.serialization import dump_transcript, load_transcript

    deep: dict[str, Any] = {}
    for _ in range(500):
        deep = {"a": deep}
    agent, _ = make_agent(
        [
            faux_assistant_message([faux_tool_call("done", deep, id="a")], stop_reason="toolUse"),
            faux_assistant_message("ok"),
        ],
        [make_tool("done", _done)],
    )
    await agent.prompt("go")
    result = agent.state.messages[-2]
    assert isinstance(result, ToolResultMessage)
    assert result.is_error is True
    assert content_text(result.content) == (
        'Invalid arguments for tool "done": JSON nested too deeply (more than 100 levels)'
    )
    path = tmp_path / "deep.jsonl"
    dump_transcript(path, agent.state.messages)
    assert load_transcript(path) == agent.state.messages
