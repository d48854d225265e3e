"""The Trio guarantees of :class:`~trio_agent.Agent` (SPEC §8): serialized listeners, the
event grammar under aborts, failures and outer cancellation, ``events()``, and the seed
example of SPEC §2.2."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing
from agent_helpers import (
    assert_every_tool_call_answered,
    calls,
    forever,
    instant,
    make_agent,
    make_tool,
    text_result,
    without_updates,
)

from trio_agent import (
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentEvent,
    AgentInitialState,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    AssistantMessageEvent,
    BeforeToolCallContext,
    BeforeToolCallResult,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    ToolExecutionMode,
    UserMessage,
    content_text,
)
from trio_agent.loop import CLOSING_GRACE_SECONDS
from trio_agent.testing import (
    EventRecorder,
    FauxProvider,
    assert_event_grammar,
    assert_event_types,
    faux_assistant_message,
    faux_text,
)


def assert_idle(agent: Agent) -> None:
    assert agent.state.is_streaming is False
    assert agent.signal is None
    assert agent.state.streaming_message is None
    assert agent.state.pending_tool_calls == frozenset()


# ---------------------------------------------------------------------------------------
# Listeners are serialized


async def test_listeners_never_overlap_with_parallel_tool_updates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def chatty(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        for step in range(3):
            on_update(text_result(f"{tool_call_id} step {step}"))
            await trio.sleep(0.01)
        return text_result(f"{tool_call_id} done")

    agent, _ = make_agent(
        [calls(("chatty", "a"), ("chatty", "b"), ("chatty", "c")), faux_assistant_message("ok")],
        [make_tool("chatty", chatty)],
    )
    inside = 0
    max_inside = 0
    seen: list[AgentEvent] = []

    async def slow_listener(event: AgentEvent) -> None:
        nonlocal inside, max_inside
        inside += 1
        max_inside = max(max_inside, inside)
        seen.append(event)
        await trio.sleep(0.005)
        inside -= 1

    def sync_listener(event: AgentEvent) -> None:
        # Runs after the slow listener of the same event has returned.
        assert inside == 0

    agent.subscribe(slow_listener)
    agent.subscribe(sync_listener)
    await agent.prompt("go")
    assert max_inside == 1
    updates = [e for e in seen if e.type == "tool_execution_update"]
    assert len(updates) == 9
    # Every accepted update of a tool precedes that tool's end event.
    for call_id in "abc":
        positions = [
            i
            for i, e in enumerate(seen)
            if e.type in ("tool_execution_update", "tool_execution_end")
            and e.tool_call_id == call_id
        ]
        kinds = [seen[i].type for i in positions]
        assert kinds == ["tool_execution_update"] * 3 + ["tool_execution_end"]
    assert_event_grammar(seen)


async def test_listener_failure_in_a_parallel_batch_cancels_siblings_before_agent_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []

    async def slow(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            log.append("slow cancelled")
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    agent, faux = make_agent(
        [calls(("slow", "call-slow"), ("fast", "call-fast")), faux_assistant_message("never")],
        [make_tool("slow", slow), make_tool("fast", instant)],
    )
    recorder = EventRecorder()

    def failing(event: AgentEvent) -> None:
        log.append(event.type)
        if event.type == "tool_execution_end" and event.tool_call_id == "call-fast":
            raise ValueError("listener exploded")

    agent.subscribe(failing)
    agent.subscribe(recorder)
    await agent.prompt("go")

    assert_event_types(
        without_updates(recorder.types),
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_start",
            # The failing listener raised on call-fast's end, before the recorder saw it;
            # the cancelled call-slow is closed as an error to keep the grammar.
            "tool_execution_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    closing = recorder.of_type("tool_execution_end")
    assert [(e.tool_call_id, e.is_error) for e in closing] == [("call-slow", True)]
    assert closing[0].result.content == [TextContent(text="listener exploded")]
    assert without_updates(log) == [
        *without_updates(recorder.types)[:8],
        "tool_execution_end",
        "slow cancelled",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    failure = agent.state.messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert failure.stop_reason == "error"
    assert failure.error_message == "listener exploded"
    assert recorder.events[-1].messages == [failure]
    assert agent.state.error_message == "listener exploded"
    assert faux.state.call_count == 1
    # Nothing arrives after agent_end, however long we wait.
    count = len(recorder)
    await trio.sleep(10)
    assert len(recorder) == count
    assert_idle(agent)
    # Calls left without a result by a failure stay unanswered (SPEC §8).
    assert [m.role for m in agent.state.messages] == ["system", "user", "assistant", "assistant"]


# ---------------------------------------------------------------------------------------
# Abort


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
async def test_abort_while_a_tool_sleeps_forever_returns_at_once_with_closing_events(
    autojump_clock: trio.testing.MockClock, mode: ToolExecutionMode
) -> None:
    agent, faux = make_agent(
        [
            calls(("quick", "call-1"), ("stuck", "call-2"), ("quick", "call-3")),
            faux_assistant_message("never"),
        ],
        [make_tool("quick", instant), make_tool("stuck", forever)],
        tool_execution=mode,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    stuck_started = trio.Event()

    def on_start(event: AgentEvent) -> None:
        if event.type == "tool_execution_start" and event.tool_call_id == "call-2":
            stuck_started.set()

    agent.subscribe(on_start)
    finished_at: list[float] = []

    async def run() -> None:
        await agent.prompt("go")  # returns normally
        finished_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await stuck_started.wait()
        await trio.sleep(1.5)
        aborted_at = trio.current_time()
        agent.abort("user pressed stop")
    assert finished_at == [aborted_at]
    assert faux.state.call_count == 1

    tail = without_updates(recorder.types)[6:]
    ends = {e.tool_call_id: e for e in recorder.of_type("tool_execution_end")}
    if mode == "sequential":
        assert tail == [
            "tool_execution_start",
            "tool_execution_end",
            "message_start",
            "message_end",
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
    else:
        # The abort answers the calls in source order, each with its end event (if
        # missing) followed by its result message (SPEC §8 table).
        assert tail == [
            "tool_execution_start",
            "tool_execution_start",
            "tool_execution_start",
            "tool_execution_end",
            "tool_execution_end",
            "message_start",
            "message_end",
            "tool_execution_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ]
        # Completion order: both quick calls (in either order) before the aborted one.
        end_ids = [e.tool_call_id for e in recorder.of_type("tool_execution_end")]
        assert sorted(end_ids[:2]) == ["call-1", "call-3"]
        assert end_ids[2] == "call-2"
    stuck = ends["call-2"]
    assert stuck.is_error is True
    assert stuck.result == AgentToolResult(
        content=[TextContent(text="Operation aborted")], details={}
    )
    # It ran for 1.5 s of Trio time before the abort interrupted it.
    assert stuck.duration_ms == 1500
    if mode == "sequential":
        # The third call never ran: an aborted result without a duration.
        assert ends["call-3"].result.content == [TextContent(text="Operation aborted")]
        assert ends["call-3"].duration_ms is None
    else:
        assert ends["call-3"].is_error is False
        assert ends["call-3"].duration_ms == 0
    turn_end = recorder.of_type("turn_end")[0]
    assert [r.tool_call_id for r in turn_end.tool_results] == ["call-1", "call-2", "call-3"]
    assert_event_grammar(recorder.events)
    assert_every_tool_call_answered(agent.state.messages)
    assert [m.role for m in agent.state.messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "toolResult",
    ]
    assert agent.state.error_message is None
    assert_idle(agent)


@pytest.mark.parametrize(
    "phase", ["prepare_request", "transform_context", "convert_to_llm", "get_api_key", "stream"]
)
async def test_abort_before_the_response_starts_closes_the_turn_with_an_aborted_message(
    autojump_clock: trio.testing.MockClock, phase: str
) -> None:
    entered = trio.Event()

    async def stuck(*args: Any) -> Any:
        entered.set()
        await trio.sleep_forever()

    async def stuck_stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        await stuck()
        raise AssertionError("unreachable")  # pragma: no cover
        yield  # makes this an async generator

    faux = FauxProvider([faux_assistant_message("never")])
    hooks: dict[str, Any] = {} if phase == "stream" else {phase: stuck}
    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model()),
        stream_fn=stuck_stream if phase == "stream" else faux.stream_fn,
        **hooks,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await entered.wait()
        agent.abort()
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
    closing = agent.state.messages[-1]
    assert isinstance(closing, AssistantMessage)
    # Inside the request the abort is a "Request was aborted" response; before it, the
    # loop synthesizes "Operation aborted" (SPEC §8 table).
    expected = "Request was aborted" if phase == "stream" else "Operation aborted"
    assert closing == AssistantMessage(
        content=[],
        api="faux",
        provider="faux",
        model="faux-1",
        stop_reason="aborted",
        error_message=expected,
        thinking_level="off",
        timestamp=closing.timestamp,
    )
    assert recorder.of_type("turn_end")[0].message is closing
    assert recorder.events[-1].messages[-1] is closing
    assert faux.state.call_count == 0
    assert agent.state.error_message == expected
    assert_idle(agent)


async def test_prompt_from_a_listener_is_rejected_as_busy() -> None:
    agent, _ = make_agent([faux_assistant_message("ok")])
    errors: list[str] = []

    async def listener(event: AgentEvent) -> None:
        if event.type == "agent_start":
            try:
                await agent.prompt("nested")
            except AgentBusyError as exc:
                errors.append(str(exc))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert errors == [
        "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
        "or wait for completion."
    ]
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]


async def test_abort_never_interrupts_a_listener(autojump_clock: trio.testing.MockClock) -> None:
    agent, _ = make_agent([calls(("stuck", "call-1"))], [make_tool("stuck", forever)])
    stuck_started = trio.Event()
    slow_log: list[str] = []
    slow_events: list[AgentEvent] = []
    plain = EventRecorder()

    async def slow(event: AgentEvent, signal: AbortSignal) -> None:
        slow_events.append(event)
        if event.type == "tool_execution_start":
            stuck_started.set()
        if signal.aborted and not slow_log:
            slow_log.append(f"sleeping at {event.type}")
            await trio.sleep(1)
            slow_log.append("woke")

    agent.subscribe(slow)
    agent.subscribe(plain)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await stuck_started.wait()
        started = trio.current_time()
        agent.abort()
    assert slow_log == ["sleeping at tool_execution_end", "woke"]
    assert trio.current_time() - started == 1
    assert slow_events == plain.events
    assert without_updates(plain.types)[-6:] == [
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert_event_grammar(plain.events)
    assert_idle(agent)


async def test_abort_while_streaming_keeps_the_partial_message(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(
        [faux_assistant_message("one two three four five six seven eight")],
        tokens_per_second=4,
        token_size=(1, 1),
    )
    agent = Agent(initial_state=AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        # Chunks of 4 characters arrive every 0.25 s: two deltas by t=0.6.
        await trio.sleep(0.6)
        agent.abort()
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request was aborted"
    assert content_text(final.content) == "one two "
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert recorder.events[-1].messages[-1] is final
    assert agent.state.error_message == "Request was aborted"
    assert_event_grammar(recorder.events)
    assert_idle(agent)


# ---------------------------------------------------------------------------------------
# Outer cancellation and KeyboardInterrupt


async def test_outer_cancellation_delivers_closing_events_and_reraises_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, faux = make_agent(
        [calls(("quick", "call-1"), ("stuck", "call-2")), faux_assistant_message("again")],
        [make_tool("quick", instant), make_tool("stuck", forever)],
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with trio.move_on_after(5) as scope:
        await agent.prompt("go")
        raise AssertionError("prompt() returned normally")  # pragma: no cover
    assert scope.cancelled_caught is True
    assert trio.current_time() == 5
    # Listeners observe the outer cancellation through the run's signal.
    assert recorder.signals[0] is not None
    assert recorder.signals[0].aborted is True
    assert recorder.signals[0].reason == "cancelled"
    assert without_updates(recorder.types)[6:] == [
        "tool_execution_start",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    aborted = recorder.of_type("tool_execution_end")[1]
    assert aborted.duration_ms == 5000
    assert aborted.tool_call_id == "call-2"
    assert aborted.result.content == [TextContent(text="Operation aborted")]
    assert_event_grammar(recorder.events)
    assert_idle(agent)
    assert_every_tool_call_answered(agent.state.messages)
    assert [m.role for m in agent.state.messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
    ]

    recorder.clear()
    await agent.prompt("next")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "again"
    assert faux.state.call_count == 2
    assert_event_grammar(recorder.events)
    assert_idle(agent)


async def test_outer_cancellation_while_streaming_appends_the_aborted_partial(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(
        [faux_assistant_message("abcdefghijklmnop"), faux_assistant_message("fresh")],
        tokens_per_second=1,
        token_size=(1, 1),
    )
    agent = Agent(initial_state=AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with trio.move_on_after(2.5) as scope:
        await agent.prompt("go")
    assert scope.cancelled_caught is True
    final = agent.state.messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request was aborted"
    assert content_text(final.content) == "abcdefgh"
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert_event_grammar(recorder.events)
    assert_idle(agent)
    await agent.prompt("again")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "fresh"


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
async def test_keyboard_interrupt_from_a_tool_propagates_and_leaves_the_agent_idle(
    mode: ToolExecutionMode,
) -> None:
    async def interrupt(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    agent, _ = make_agent(
        [calls(("interrupt", "call-1")), faux_assistant_message("after")],
        [make_tool("interrupt", interrupt)],
        tool_execution=mode,
    )
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert_idle(agent)
    # Closed like an abort before it propagated (finding F13): the call is answered.
    assert_event_grammar(recorder.events)
    assert without_updates(recorder.types)[-6:] == [
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    end = recorder.of_type("tool_execution_end")[0]
    assert (end.tool_call_id, end.is_error, content_text(end.result.content)) == (
        "call-1",
        True,
        "Operation aborted",
    )
    assert [m.role for m in agent.state.messages][-2:] == ["assistant", "toolResult"]
    recorder.clear()
    await agent.prompt("next")
    assert_event_grammar(recorder.events)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "after"


async def test_keyboard_interrupt_from_a_listener_propagates_and_leaves_the_agent_idle() -> None:
    agent, _ = make_agent([faux_assistant_message("first"), faux_assistant_message("second")])

    def interrupting(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            raise KeyboardInterrupt

    unsubscribe = agent.subscribe(interrupting)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with pytest.raises(KeyboardInterrupt):
        await agent.prompt("go")
    assert_idle(agent)
    # The listeners after the raising one miss that event; every listener receives the
    # closing events (finding F13).
    assert without_updates(recorder.types)[-3:] == ["message_start", "turn_end", "agent_end"]
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    unsubscribe()
    recorder.clear()
    await agent.prompt("next")
    assert_event_grammar(recorder.events)
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "second"


async def test_outer_cancellation_never_interrupts_a_listener(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent, faux = make_agent([faux_assistant_message("never")])
    log: list[str] = []

    async def slow(event: AgentEvent) -> None:
        log.append(event.type)
        if event.type == "message_end" and event.message.role == "user":
            # Within the closing grace after the cancellation at 1 s: never cut off.
            await trio.sleep(1 + CLOSING_GRACE_SECONDS - 0.5)
            log.append("slept")

    agent.subscribe(slow)
    with trio.move_on_after(1) as scope:
        await agent.prompt("go")
    assert scope.cancelled_caught is True
    assert trio.current_time() == 1 + CLOSING_GRACE_SECONDS - 0.5
    assert log == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "slept",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert faux.state.call_count == 0
    closing = agent.state.messages[-1]
    assert isinstance(closing, AssistantMessage)
    assert (closing.stop_reason, closing.error_message) == ("aborted", "Operation aborted")
    assert_idle(agent)


# ---------------------------------------------------------------------------------------
# Listener failures


async def test_a_listener_raising_twice_makes_prompt_raise_after_cleanup() -> None:
    agent, faux = make_agent([faux_assistant_message("never seen"), faux_assistant_message("ok")])
    raised: list[str] = []

    def failing(event: AgentEvent) -> None:
        if event.type == "message_end" and not raised:
            raised.append("first")
            raise ValueError("first failure")
        if event.type == "message_start" and raised == ["first"]:
            raised.append("second")
            raise ValueError("second failure")

    unsubscribe = agent.subscribe(failing)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    with pytest.raises(ValueError) as info:
        await agent.prompt("go")
    # The first failure is reported in-band; the second, raised while reporting it,
    # leaves prompt() after the run was closed.
    assert str(info.value) == "second failure"
    assert raised == ["first", "second"]
    assert faux.state.call_count == 0
    # The failing listener came first, so the recorder saw neither failed event.
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    failure = agent.state.messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert failure.error_message == "first failure"
    assert_idle(agent)
    unsubscribe()
    faux.set_responses([faux_assistant_message("ok")])
    await agent.prompt("again")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "ok"


async def test_a_listener_raising_on_agent_end_makes_prompt_raise_with_nothing_after_it() -> None:
    agent, faux = make_agent([faux_assistant_message("ok"), faux_assistant_message("again")])
    recorder = EventRecorder()
    agent.subscribe(recorder)

    def failing(event: AgentEvent) -> None:
        if event.type == "agent_end":
            raise ValueError("end listener failed")

    unsubscribe = agent.subscribe(failing)
    with pytest.raises(ValueError) as info:
        await agent.prompt("go")
    assert str(info.value) == "end listener failed"
    assert without_updates(recorder.types) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    assert agent.state.error_message is None
    assert_idle(agent)
    unsubscribe()
    await agent.prompt("next")
    assert faux.state.call_count == 2


async def test_a_listener_raising_on_a_message_update_fails_the_run_with_a_closed_grammar() -> None:
    agent, _ = make_agent([faux_assistant_message("x" * 64)])
    recorder = EventRecorder()
    agent.subscribe(recorder)
    updates = 0

    def failing(event: AgentEvent) -> None:
        nonlocal updates
        if event.type == "message_update":
            updates += 1
            if updates == 2:
                raise ValueError("update listener failed")

    agent.subscribe(failing)
    await agent.prompt("go")
    assert_event_grammar(recorder.events)
    # Reported at once: the open partial is replaced by the failure message.
    assert without_updates(recorder.types)[-6:] == [
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    assert recorder.types.count("message_update") == 2
    user_message, failure = agent.state.messages[-2:]
    assert isinstance(user_message, UserMessage)
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("error", "update listener failed")
    assert agent.state.error_message == "update listener failed"
    assert_idle(agent)


# ---------------------------------------------------------------------------------------
# events()


async def test_events_sees_the_listener_sequence_and_waits_for_the_consumer() -> None:
    agent, _ = make_agent(
        [
            calls(("quick", "call-1")),
            faux_assistant_message("a1"),
            faux_assistant_message("a2"),
            faux_assistant_message("a3"),
        ],
        [make_tool("quick", instant)],
    )
    before = EventRecorder()
    agent.subscribe(before)
    received: list[AgentEvent] = []
    async with agent.open_events() as receive:
        after = EventRecorder()
        agent.subscribe(after)

        async def two_runs() -> None:
            await agent.prompt("one")
            await agent.prompt("two")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(two_runs)
            first = await receive.receive()
            received.append(first)
            await trio.testing.wait_all_tasks_blocked()
            # Buffer 0: the run is parked on the next event until we receive it; the
            # listener subscribed after the channel has seen only the first one.
            assert first.type == "agent_start"
            assert after.types == ["agent_start"]
            assert before.types == ["agent_start", "turn_start"]
            ends = 0
            async for event in receive:
                received.append(event)
                if event.type == "agent_end":
                    ends += 1
                    if ends == 2:
                        break
    assert received == before.events == after.events
    assert [e.type for e in received].count("agent_start") == 2
    # Unsubscribed on exit: a later run is not held up by the closed channel.
    after.clear()
    await agent.prompt("three")
    assert after.types[-1] == "agent_end"
    assert len(received) == len(before.events) - len(after.events)


async def test_events_consumer_leaving_early_does_not_break_the_run() -> None:
    agent, _ = make_agent([faux_assistant_message("hello")])
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery, agent.open_events() as receive:
        agent.subscribe(recorder)
        nursery.start_soon(agent.prompt, "go")
        first = await receive.receive()
        assert first.type == "agent_start"
    assert recorder.types[0] == "agent_start"
    assert recorder.types[-1] == "agent_end"
    assert_idle(agent)


# ---------------------------------------------------------------------------------------
# Listener signatures, state snapshots, hook barrier


class _CallableListener:
    def __init__(self) -> None:
        self.types: list[str] = []

    def __call__(self, event: AgentEvent) -> None:
        self.types.append(event.type)


async def test_sync_and_async_listeners_with_both_signatures() -> None:
    agent, _ = make_agent([faux_assistant_message("hi")])
    log: dict[str, list[str]] = {"sync1": [], "sync2": [], "async1": [], "async2": []}
    signals: list[AbortSignal] = []

    def sync1(event: AgentEvent) -> None:
        log["sync1"].append(event.type)

    def sync2(event: AgentEvent, signal: AbortSignal) -> None:
        log["sync2"].append(event.type)
        signals.append(signal)

    async def async1(event: AgentEvent) -> None:
        await trio.lowlevel.checkpoint()
        log["async1"].append(event.type)

    async def async2(event: AgentEvent, signal: AbortSignal) -> None:
        await trio.lowlevel.checkpoint()
        log["async2"].append(event.type)
        signals.append(signal)

    callable_listener = _CallableListener()
    for listener in (sync1, sync2, async1, async2, callable_listener):
        agent.subscribe(listener)
    # Subscribing the same function twice has no effect.
    agent.subscribe(sync1)
    await agent.prompt("go")
    expected = log["sync1"]
    assert expected[0] == "agent_start"
    assert expected[-1] == "agent_end"
    assert log["sync2"] == log["async1"] == log["async2"] == callable_listener.types == expected
    assert len(signals) == 2 * len(expected)
    assert all(s is signals[0] for s in signals)
    assert signals[0].aborted is False


async def test_pending_tool_calls_is_a_frozenset_replaced_on_change() -> None:
    release = trio.Event()

    async def gated(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await release.wait()
        return text_result("gated")

    async def opener(tool_call_id: str, on_update: AgentToolUpdateCallback) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        release.set()
        return text_result("opened")

    agent, _ = make_agent(
        [calls(("gated", "call-1"), ("opener", "call-2")), faux_assistant_message("ok")],
        [make_tool("gated", gated), make_tool("opener", opener)],
    )
    snapshots: list[tuple[str, frozenset[str]]] = []

    def listener(event: AgentEvent) -> None:
        if event.type in ("tool_execution_start", "tool_execution_end"):
            snapshots.append((event.type, agent.state.pending_tool_calls))

    agent.subscribe(listener)
    await agent.prompt("go")
    assert snapshots == [
        ("tool_execution_start", frozenset({"call-1"})),
        ("tool_execution_start", frozenset({"call-1", "call-2"})),
        ("tool_execution_end", frozenset({"call-1"})),
        ("tool_execution_end", frozenset()),
    ]
    assert all(type(s) is frozenset for _, s in snapshots)
    # Every change produced a new object; earlier ones were never mutated.
    assert len({id(s) for _, s in snapshots[:3]}) == 3
    assert agent.state.pending_tool_calls == frozenset()


async def test_before_tool_call_sees_the_assistant_message_already_in_state(
    autojump_clock: trio.testing.MockClock,
) -> None:
    order: list[str] = []

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            await trio.sleep(1)  # a slow listener is a barrier before preflight
            order.append("listener done")

    agent: Agent | None = None
    checks: list[bool] = []

    def before_tool_call(
        context: BeforeToolCallContext, signal: AbortSignal | None
    ) -> BeforeToolCallResult | None:
        assert agent is not None
        order.append("before_tool_call")
        checks.append(agent.state.messages[-1] is context.assistant_message)
        checks.append(context.tool_call in context.assistant_message.content)
        return None

    agent, _ = make_agent(
        [calls(("quick", "call-1")), faux_assistant_message("ok")],
        [make_tool("quick", instant)],
        before_tool_call=before_tool_call,
    )
    agent.subscribe(listener)
    await agent.prompt("go")
    assert order == ["listener done", "before_tool_call", "listener done"]
    assert checks == [True, True]


# ---------------------------------------------------------------------------------------
# Queue ownership after an abort (reference §3.12)


@pytest.mark.parametrize("cleared", [False, True], ids=["kept", "cleared"])
async def test_queue_ownership_after_abort_restores_drained_messages_to_the_front(
    autojump_clock: trio.testing.MockClock, cleared: bool
) -> None:
    preparing = trio.Event()

    async def prepare_next_turn(turn: Any, signal: AbortSignal | None) -> None:
        preparing.set()
        await trio.sleep_forever()

    agent, faux = make_agent(
        [faux_assistant_message("first"), faux_assistant_message("never")],
        prepare_next_turn_with_context=prepare_next_turn,
        steering_mode="all",
    )
    drained = [UserMessage(content="s1"), UserMessage(content="s2")]
    late = UserMessage(content="late")

    def listener(event: AgentEvent) -> None:
        if event.type == "turn_end":
            for message in drained:
                agent.steer(message)

    agent.subscribe(listener)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await preparing.wait()
        # Drained by the poll after turn_end, not yet delivered: invisible to the queue.
        assert agent.has_queued_messages() is False
        agent.steer(late)
        if cleared:
            agent.clear_steering_queue()
        agent.abort()
    assert faux.state.call_count == 1
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]
    queued = agent.peek_queued_messages()
    if cleared:
        assert queued == []
    else:
        assert len(queued) == 3
        assert queued[0] is drained[0]
        assert queued[1] is drained[1]
        assert queued[2] is late


# ---------------------------------------------------------------------------------------
# The seed example (SPEC §2.2)


async def test_seed_example_runs_on_the_faux_provider(capsys: pytest.CaptureFixture[str]) -> None:
    faux = FauxProvider(
        [faux_assistant_message([faux_text("Hi there! How can I help you today?")])]
    )
    model = faux.get_model()

    agent = Agent(
        initial_state=AgentInitialState(system_prompt="You are a helpful assistant.", model=model),
        stream_fn=faux.stream_fn,
    )

    def on_event(event: AgentEvent, signal: AbortSignal) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            print(event.assistant_message_event.delta, end="", flush=True)

    agent.subscribe(on_event)
    await agent.prompt("Hello!")

    printed = capsys.readouterr().out
    assert printed == "Hi there! How can I help you today?"
    assert [m.role for m in agent.state.messages] == ["system", "user", "assistant"]
    assert agent.state.system_prompt == "You are a helpful assistant."
