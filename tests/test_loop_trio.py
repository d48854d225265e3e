"""The agent loop's Trio guarantees (SPEC §6, §8): aborts, cancellation, task hygiene,
durations on Trio's clock, parallel failures, ``on_update`` and the observable form.

Every run's events are checked with :func:`trio_agent.testing.assert_event_grammar`,
except where the run fails by design (then there is no ``agent_end``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import pytest
import trio
import trio.testing
from loop_helpers import (
    NOOP,
    STRING_VALUE,
    RecordingStream,
    Source,
    make_tool,
    message_text,
    text_result,
    tool_calls_reply,
    tool_result_ids,
    user,
)

from trio_agent import (
    AbortController,
    AbortSignal,
    AgentEvent,
    AgentMessage,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AgentTurnContext,
    AssistantMessage,
    AssistantMessageEvent,
    BeforeToolCallContext,
    BeforeToolCallResult,
    LlmContext,
    Message,
    Model,
    PrepareRequestContext,
    StartEvent,
    StreamOptions,
    TextContent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolResultMessage,
    Usage,
)
from trio_agent._tools import ToolExecute
from trio_agent.loop import (
    AgentContext,
    AgentLoopConfig,
    AgentToolCallOutcome,
    open_agent_loop,
    run_agent_loop,
    run_tool_call,
)
from trio_agent.models._builder import AssistantMessageBuilder
from trio_agent.testing import (
    EventRecorder,
    FauxProvider,
    assert_event_grammar,
    assert_event_types,
    faux_assistant_message,
    faux_text,
    faux_thinking,
    faux_tool_call,
)

# Loop-made error results carry no error flag of their own (parity W1).
OPERATION_ABORTED = AgentToolResult(content=[TextContent(text="Operation aborted")], details={})

Mode = Literal["sequential", "parallel"]
ToolEvents = ToolExecutionStartEvent | ToolExecutionUpdateEvent | ToolExecutionEndEvent


def tasks_living() -> int:
    return trio.lowlevel.current_statistics().tasks_living


def without_updates(events: list[AgentEvent]) -> list[str]:
    return [e.type for e in events if e.type != "message_update"]


def labels(events: list[AgentEvent]) -> list[str]:
    """Event types, with the role of message events and the call id of tool events."""
    out = []
    for event in events:
        if event.type == "message_update":
            continue
        if event.type in ("message_start", "message_end"):
            out.append(f"{event.type}:{event.message.role}")
        elif isinstance(event, ToolEvents):
            out.append(f"{event.type}:{event.tool_call_id}")
        else:
            out.append(event.type)
    return out


def assert_one_result_per_call(messages: list[AgentMessage]) -> None:
    """Every tool call of the transcript has exactly one result message."""
    calls = [
        block.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if block.type == "toolCall"
    ]
    results = tool_result_ids(messages)
    assert sorted(results) == sorted(calls)
    assert len(set(results)) == len(results)


class Forever:
    """A tool that sleeps forever and tells when it was entered."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.all_entered = trio.Event()
        self.expected = 1
        self.cancelled: list[str] = []

    def tool(self, name: str = "forever") -> AgentTool:
        async def execute(
            call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
        ) -> AgentToolResult:
            self.entered.append(call_id)
            if len(self.entered) == self.expected:
                self.all_entered.set()
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled.append(call_id)
                raise

        return make_tool(name, execute)


async def abort_when(event: trio.Event, controller: AbortController) -> None:
    await event.wait()
    controller.abort("test abort")


# ---------------------------------------------------------------------------------------
# Abort while a tool runs


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
async def test_abort_while_a_tool_sleeps_forever_ends_the_run_at_once(
    autojump_clock: trio.abc.Clock, mode: Mode
) -> None:
    forever = Forever()
    controller = AbortController()
    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "forever", {})), faux_assistant_message("never")]
    )
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, forever.all_entered, controller)
        before = trio.current_time()
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[forever.tool()]),
            AgentLoopConfig(model=stream.model, tool_execution=mode),
            recorder,
            signal=controller.signal,
            stream_fn=stream,
        )
        assert trio.current_time() == before
    assert forever.cancelled == ["tool-1"]
    assert labels(recorder.events) == [
        "agent_start",
        "turn_start",
        "message_start:system",
        "message_end:system",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:tool-1",
        "tool_execution_end:tool-1",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end",
    ]
    (end,) = recorder.of_type("tool_execution_end")
    assert end.result == OPERATION_ABORTED
    assert end.is_error is True
    # The tool did run (for no Trio time): SPEC §2.2 leaves duration_ms out only for
    # calls that never ran.
    assert end.duration_ms == 0
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name) == ("tool-1", "forever")
    assert result.content == [TextContent(text="Operation aborted")]
    assert (result.is_error, result.duration_ms, result.details) == (True, 0, {})
    (turn_end,) = recorder.of_type("turn_end")
    assert turn_end.tool_results == [result]
    assert turn_end.message is messages[2]
    assert recorder.events[-1].messages is messages
    assert stream.calls == 1
    assert_event_grammar(recorder.events)


@pytest.mark.parametrize("mode", ["sequential", "parallel"])
async def test_a_tool_interrupted_by_an_abort_reports_how_long_it_ran(
    autojump_clock: trio.abc.Clock, mode: Mode
) -> None:
    forever = Forever()
    controller = AbortController()

    async def abort_later() -> None:
        await forever.all_entered.wait()
        await trio.sleep(1.5)
        controller.abort()

    stream = RecordingStream([tool_calls_reply(("tool-1", "forever", {}))])
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[forever.tool()]),
            AgentLoopConfig(model=stream.model, tool_execution=mode),
            recorder,
            signal=controller.signal,
            stream_fn=stream,
        )
    (end,) = recorder.of_type("tool_execution_end")
    assert (end.result, end.duration_ms) == (OPERATION_ABORTED, 1500)
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert (result.is_error, result.duration_ms) == (True, 1500)
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Abort while the assistant response streams


async def test_abort_while_the_response_streams_keeps_the_partial_content(
    autojump_clock: trio.abc.Clock,
) -> None:
    controller = AbortController()
    recorder = EventRecorder()
    deltas = 0

    async def emit(event: AgentEvent) -> None:
        nonlocal deltas
        await recorder(event)
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            deltas += 1
            if deltas == 2:
                controller.abort()

    stream = RecordingStream(
        [faux_assistant_message("abcd" * 5), faux_assistant_message("never")],
        tokens_per_second=1,
        token_size=(1, 1),
    )
    start = trio.current_time()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model),
        emit,
        signal=controller.signal,
        stream_fn=stream,
    )
    # The second chunk was due 2 s after the start; nothing waited for the rest.
    assert trio.current_time() - start == 2
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "aborted"
    assert final.error_message == "Request was aborted"
    assert final.content == [TextContent(text="abcdabcd")]
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    assert recorder.events[-3].message is final
    assert recorder.events[-2].message is final
    assert recorder.events[-2].tool_results == []
    assert stream.calls == 1
    assert_event_grammar(recorder.events)


async def test_abort_interrupts_a_stream_that_ignores_the_signal(
    autojump_clock: trio.abc.Clock,
) -> None:
    controller = AbortController()
    stalled = trio.Event()
    closed: list[bool] = []

    async def stalling_stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        try:
            yield builder.start()
            index, text_start = builder.start_text()
            yield text_start
            yield builder.text_delta(index, "abc")
            stalled.set()
            await trio.sleep_forever()  # never looks at options.signal
            yield builder.done()  # pragma: no cover
        finally:
            closed.append(True)

    faux = FauxProvider()
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, stalled, controller)
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[]),
            AgentLoopConfig(model=faux.get_model()),
            recorder,
            signal=controller.signal,
            stream_fn=stalling_stream,
        )
    assert trio.current_time() == 0
    assert closed == [True]
    assert recorder.types[4:] == [
        "message_start",
        "message_update",
        "message_update",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.error_message) == ("aborted", "Request was aborted")
    assert final.content == [TextContent(text="abc")]
    assert final.thinking_level == "off"
    assert recorder.events[-3].message is final
    assert recorder.events[-2].message is final
    assert_event_grammar(recorder.events)


async def test_abort_before_the_first_stream_event_finalizes_an_empty_aborted_message(
    autojump_clock: trio.abc.Clock,
) -> None:
    controller = AbortController()
    requested = trio.Event()

    async def hanging_stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        requested.set()
        await trio.sleep_forever()
        yield StartEvent(partial=faux_assistant_message(""))  # pragma: no cover

    faux = FauxProvider()
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, requested, controller)
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[]),
            AgentLoopConfig(model=faux.get_model(), stream_options=StreamOptions(reasoning="high")),
            recorder,
            signal=controller.signal,
            stream_fn=hanging_stream,
        )
    assert_event_types(
        recorder,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.error_message) == ("aborted", "Request was aborted")
    assert final.content == []
    assert (final.api, final.provider, final.model) == ("faux", "faux", "faux-1")
    assert final.thinking_level == "high"
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Abort before the request


Where = Literal["prompt message_end", "prepare_request", "prepare_request blocking", "get_api_key"]


@pytest.mark.parametrize(
    "where", ["prompt message_end", "prepare_request", "prepare_request blocking", "get_api_key"]
)
async def test_abort_before_the_request_synthesizes_an_aborted_assistant_message(
    autojump_clock: trio.abc.Clock, where: Where
) -> None:
    controller = AbortController()
    recorder = EventRecorder()

    async def emit(event: AgentEvent) -> None:
        await recorder(event)
        if where == "prompt message_end" and event.type == "message_end":
            controller.abort()

    async def prepare_request(request: PrepareRequestContext, signal: AbortSignal | None) -> None:
        if where.startswith("prepare_request"):
            controller.abort()
            if where == "prepare_request blocking":
                await trio.sleep_forever()

    def get_api_key(provider: str) -> str:
        if where == "get_api_key":
            controller.abort()
        return "key"

    stream = RecordingStream([faux_assistant_message("never")])
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(
            model=stream.model, prepare_request=prepare_request, get_api_key=get_api_key
        ),
        emit,
        signal=controller.signal,
        stream_fn=stream,
    )
    assert stream.calls == 0
    assert stream.faux.state.call_count == 0
    assert labels(recorder.events) == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    final = messages[-1]
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.error_message) == ("aborted", "Operation aborted")
    assert final.content == []
    assert final.usage == Usage()
    assert (final.api, final.provider, final.model) == ("faux", "faux", "faux-1")
    assert recorder.events[-3].message is final
    assert [m.role for m in messages] == ["user", "assistant"]
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Abort between turns


BetweenTurns = Literal["turn_end listener", "finish_turn", "prepare_next_turn", "steering poll"]


@pytest.mark.parametrize(
    ("where", "steering_polls"),
    [
        ("turn_end listener", 1),
        ("finish_turn", 1),
        ("prepare_next_turn", 2),
        ("steering poll", 2),
    ],
)
async def test_abort_between_turns_ends_the_run_without_a_new_turn(
    where: BetweenTurns, steering_polls: int
) -> None:
    controller = AbortController()
    recorder = EventRecorder()
    follow_ups = Source(user("never delivered"))
    steering = Source()

    async def emit(event: AgentEvent) -> None:
        await recorder(event)
        if where == "turn_end listener" and event.type == "turn_end":
            controller.abort()

    def finish_turn(turn: AgentTurnContext, signal: AbortSignal | None) -> None:
        if where == "finish_turn":
            controller.abort()

    def prepare_next_turn(turn: AgentTurnContext) -> None:
        if where == "prepare_next_turn":
            controller.abort()

    def poll_steering() -> list[AgentMessage]:
        if where == "steering poll" and steering.polls == 1:
            controller.abort()
        return steering()

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("never")]
    )
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(
            model=stream.model,
            finish_turn=finish_turn,
            prepare_next_turn=prepare_next_turn,
            get_steering_messages=poll_steering,
            get_follow_up_messages=follow_ups,
        ),
        emit,
        signal=controller.signal,
        stream_fn=stream,
    )
    assert stream.calls == 1
    assert recorder.types[-2:] == ["turn_end", "agent_end"]
    assert recorder.types.count("turn_start") == 1
    assert steering.polls == steering_polls
    assert follow_ups.polls == 0
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult"]
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Every tool call gets exactly one result after an abort


async def test_abort_in_a_sequential_batch_answers_every_call(
    autojump_clock: trio.abc.Clock,
) -> None:
    forever = Forever()
    executed: list[str] = []

    async def quick(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(call_id)
        await trio.lowlevel.checkpoint()
        return text_result("quick")

    controller = AbortController()
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "quick", {}), ("tool-2", "forever", {}), ("tool-3", "quick", {})
            ),
            faux_assistant_message("never"),
        ]
    )
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, forever.all_entered, controller)
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[make_tool("quick", quick), forever.tool()]),
            AgentLoopConfig(model=stream.model, tool_execution="sequential"),
            recorder,
            signal=controller.signal,
            stream_fn=stream,
        )
    assert executed == ["tool-1"]
    batch = labels(recorder.events)[8:]
    assert batch == [
        "tool_execution_start:tool-1",
        "tool_execution_end:tool-1",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_execution_start:tool-2",
        "tool_execution_end:tool-2",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_execution_start:tool-3",
        "tool_execution_end:tool-3",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end",
    ]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, message_text(r), r.is_error) for r in results] == [
        ("tool-1", "quick", False),
        ("tool-2", "Operation aborted", True),
        ("tool-3", "Operation aborted", True),
    ]
    # tool-2 ran until the abort; tool-3 never ran.
    assert [e.duration_ms for e in recorder.of_type("tool_execution_end")] == [0, 0, None]
    assert recorder.of_type("turn_end")[0].tool_results == results
    assert_one_result_per_call(messages)
    assert_event_grammar(recorder.events)


async def test_abort_in_parallel_preflight_answers_every_call() -> None:
    controller = AbortController()
    executed: list[str] = []

    async def quick(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(call_id)
        return text_result("quick")

    def before(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> None:
        if ctx.tool_call.id == "tool-2":
            controller.abort()

    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "quick", {}), ("tool-2", "quick", {}), ("tool-3", "quick", {})
            ),
            faux_assistant_message("never"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("quick", quick)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel", before_tool_call=before),
        recorder,
        signal=controller.signal,
        stream_fn=stream,
    )
    assert executed == []
    assert labels(recorder.events)[8:] == [
        "tool_execution_start:tool-1",
        "tool_execution_start:tool-2",
        "tool_execution_end:tool-2",
        # closing, in source order
        "tool_execution_end:tool-1",
        "message_start:toolResult",
        "message_end:toolResult",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_execution_start:tool-3",
        "tool_execution_end:tool-3",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end",
    ]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, message_text(r), r.is_error) for r in results] == [
        ("tool-1", "Operation aborted", True),
        ("tool-2", "Operation aborted", True),
        ("tool-3", "Operation aborted", True),
    ]
    assert_one_result_per_call(messages)
    assert_event_grammar(recorder.events)


async def test_abort_in_parallel_execution_answers_every_call(
    autojump_clock: trio.abc.Clock,
) -> None:
    forever = Forever()
    forever.expected = 3
    controller = AbortController()
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "forever", {}), ("tool-2", "forever", {}), ("tool-3", "forever", {})
            ),
            faux_assistant_message("never"),
        ]
    )
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, forever.all_entered, controller)
        messages = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[forever.tool()]),
            AgentLoopConfig(model=stream.model, tool_execution="parallel"),
            recorder,
            signal=controller.signal,
            stream_fn=stream,
        )
    assert sorted(forever.cancelled) == ["tool-1", "tool-2", "tool-3"]
    assert labels(recorder.events)[8:] == [
        "tool_execution_start:tool-1",
        "tool_execution_start:tool-2",
        "tool_execution_start:tool-3",
        "tool_execution_end:tool-1",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_execution_end:tool-2",
        "message_start:toolResult",
        "message_end:toolResult",
        "tool_execution_end:tool-3",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end",
    ]
    assert all(e.result == OPERATION_ABORTED for e in recorder.of_type("tool_execution_end"))
    assert tool_result_ids(messages) == ["tool-1", "tool-2", "tool-3"]
    assert_one_result_per_call(messages)
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# No task outlives a run


async def test_no_task_outlives_a_run(autojump_clock: trio.abc.Clock) -> None:
    updates: list[str] = []

    async def busy(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        on_update(text_result(f"{call_id} halfway"))
        await trio.sleep(1)
        updates.append(call_id)
        return text_result("done")

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "busy", {}), ("tool-2", "busy", {})),
            faux_assistant_message("finished"),
        ],
        tokens_per_second=10,
    )
    before = tasks_living()
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("busy", busy)]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert tasks_living() == before
    assert sorted(updates) == ["tool-1", "tool-2"]
    assert recorder.types.count("tool_execution_update") == 2
    assert_event_grammar(recorder.events)


async def test_no_task_outlives_an_aborted_run(autojump_clock: trio.abc.Clock) -> None:
    forever = Forever()
    forever.expected = 2
    controller = AbortController()
    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "forever", {}), ("tool-2", "forever", {}))]
    )
    recorder = EventRecorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when, forever.all_entered, controller)
        before = tasks_living()
        await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[forever.tool()]),
            AgentLoopConfig(model=stream.model),
            recorder,
            signal=controller.signal,
            stream_fn=stream,
        )
        # The abort_when task ended too, and nothing of the run is left.
        assert tasks_living() == before - 1
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Durations on Trio's clock


async def test_tool_duration_is_measured_on_trio_clock(autojump_clock: trio.abc.Clock) -> None:
    async def slow(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        await trio.sleep(2.5)
        return text_result("slept")

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "slow", {})), faux_assistant_message("ok")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("slow", slow)]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    (end,) = recorder.of_type("tool_execution_end")
    assert end.duration_ms == 2500
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert result.duration_ms == 2500
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# Parallel failures


def raising(exc: Exception, delay: float = 0) -> ToolExecute:
    async def execute(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        await trio.sleep(delay)
        raise exc

    return execute


async def test_a_raising_tool_in_a_parallel_batch_becomes_an_error_result(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def fine(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        await trio.sleep(2)
        return text_result("fine")

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "boom", {}), ("tool-2", "fine", {})),
            faux_assistant_message("ok"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(
            messages=[],
            tools=[make_tool("boom", raising(ValueError("boom"), 1)), make_tool("fine", fine)],
        ),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        recorder,
        stream_fn=stream,
    )
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, message_text(r), r.is_error, r.duration_ms) for r in results] == [
        ("tool-1", "boom", True, 1000),
        ("tool-2", "fine", False, 2000),
    ]
    assert [e.tool_call_id for e in recorder.of_type("tool_execution_end")] == ["tool-1", "tool-2"]
    assert stream.calls == 2
    assert_event_grammar(recorder.events)


async def test_two_raising_tools_in_a_parallel_batch_become_two_error_results() -> None:
    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "first", {}), ("tool-2", "second", {})),
            faux_assistant_message("ok"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(
            messages=[],
            tools=[
                make_tool("first", raising(RuntimeError("first failure"))),
                make_tool("second", raising(ValueError())),
            ],
        ),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        recorder,
        stream_fn=stream,
    )
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    # An exception without a message is reported by its type name.
    assert [(r.tool_call_id, message_text(r), r.is_error) for r in results] == [
        ("tool-1", "first failure", True),
        ("tool-2", "ValueError", True),
    ]
    assert all(e.is_error for e in recorder.of_type("tool_execution_end"))
    assert_event_grammar(recorder.events)


class ListenerFailure(Exception):
    pass


@pytest.mark.parametrize("failing_event", ["tool_execution_end", "tool_execution_update"])
async def test_an_emit_failure_during_a_parallel_batch_is_reported_with_a_closed_grammar(
    autojump_clock: trio.abc.Clock, failing_event: str
) -> None:
    """The loop itself closes a failed run (not only the Agent): the running sibling is
    cancelled first, cut-short executions end with the failure's text, and the failure
    message ends the turn and the run."""
    log: list[str] = []

    async def fast(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        on_update(text_result("progress"))
        await trio.sleep(1)
        return text_result("fast")

    async def slow(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        try:
            await trio.sleep(10)
        except trio.Cancelled:
            log.append("slow cancelled")
            raise
        return text_result("slow")  # pragma: no cover

    recorder = EventRecorder()

    async def emit(event: AgentEvent) -> None:
        await recorder(event)
        if isinstance(event, ToolEvents) and (event.type, event.tool_call_id) == (
            failing_event,
            "tool-1",
        ):
            raise ListenerFailure("listener failed")

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "fast", {}), ("tool-2", "slow", {})),
            faux_assistant_message("ok"),
        ]
    )
    start = trio.current_time()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("fast", fast), make_tool("slow", slow)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        emit,
        stream_fn=stream,
    )
    assert log == ["slow cancelled"]
    # The running sibling was cancelled, not awaited.
    assert trio.current_time() - start <= 1
    assert_event_grammar(recorder.events)
    cut_short = [f"{e.tool_call_id}:{e.is_error}" for e in recorder.of_type("tool_execution_end")]
    if failing_event == "tool_execution_end":
        assert cut_short == ["tool-1:False", "tool-2:True"]
    else:
        assert cut_short == ["tool-1:True", "tool-2:True"]
    assert labels(recorder.events)[-4:] == [
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    failure = messages[-1]
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("error", "listener failed")
    assert recorder.of_type("agent_end")[0].messages == [failure]
    # Calls the failure cut short stay unanswered (SPEC §8).
    assert [m.role for m in messages] == ["system", "user", "assistant", "assistant"]
    assert stream.calls == 1


# ---------------------------------------------------------------------------------------
# Outer cancellation


async def test_outer_cancellation_delivers_the_closing_events_and_reraises(
    autojump_clock: trio.abc.Clock,
) -> None:
    forever = Forever()
    stream = RecordingStream([tool_calls_reply(("tool-1", "forever", {}))])
    recorder = EventRecorder()
    before = tasks_living()
    returned: list[AgentMessage] | None = None
    with trio.move_on_after(5) as scope:
        returned = await run_agent_loop(
            [user("go")],
            AgentContext(messages=[], tools=[forever.tool()]),
            AgentLoopConfig(model=stream.model),
            recorder,
            stream_fn=stream,
        )
    assert scope.cancelled_caught is True
    assert returned is None
    assert trio.current_time() == 5
    assert tasks_living() == before
    assert forever.cancelled == ["tool-1"]
    assert labels(recorder.events)[-6:] == [
        "tool_execution_start:tool-1",
        "tool_execution_end:tool-1",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "agent_end",
    ]
    assert recorder.of_type("tool_execution_end")[0].result == OPERATION_ABORTED
    assert_event_grammar(recorder.events)


async def test_outer_cancellation_while_streaming_finalizes_the_partial(
    autojump_clock: trio.abc.Clock,
) -> None:
    stream = RecordingStream(
        [faux_assistant_message("abcd" * 5)], tokens_per_second=1, token_size=(1, 1)
    )
    recorder = EventRecorder()
    with trio.move_on_after(2.5) as scope:
        await run_agent_loop(
            [user("go")],
            AgentContext(messages=[]),
            AgentLoopConfig(model=stream.model),
            recorder,
            stream_fn=stream,
        )
    assert scope.cancelled_caught is True
    assert recorder.types[-3:] == ["message_end", "turn_end", "agent_end"]
    final = recorder.events[-3].message
    assert isinstance(final, AssistantMessage)
    assert (final.stop_reason, final.error_message) == ("aborted", "Request was aborted")
    assert final.content == [TextContent(text="abcdabcd")]
    assert recorder.events[-1].messages[-1] is final
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# on_update


async def test_on_update_is_sync_non_blocking_serialized_and_precedes_the_end(
    autojump_clock: trio.abc.Clock,
) -> None:
    call_times: list[float] = []
    returned_at: list[float] = []

    async def chatty(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        before = trio.current_time()
        for index in range(3):
            assert on_update(text_result(f"{call_id} {index}")) is None
        call_times.append(trio.current_time() - before)
        await trio.sleep(params["delay"])
        returned_at.append(trio.current_time())
        return text_result(f"{call_id} done")

    schema = {"type": "object", "properties": {"delay": {"type": "number"}}}
    recorder = EventRecorder()
    active = 0
    max_active = 0

    async def slow_emit(event: AgentEvent) -> None:
        nonlocal active, max_active
        active += 1
        max_active = max(max_active, active)
        await recorder(event)
        if event.type == "tool_execution_update":
            # A slow listener: it must neither block the tool nor overlap other events.
            await trio.sleep(1)
        active -= 1

    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "chatty", {"delay": 0}), ("tool-2", "chatty", {"delay": 0})
            ),
            faux_assistant_message("ok"),
        ]
    )
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("chatty", chatty, parameters=schema)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        slow_emit,
        stream_fn=stream,
    )
    assert call_times == [0, 0]
    # Both tools finished at once although the listener spent 6 s on their updates.
    assert returned_at == [0, 0]
    assert trio.current_time() == 6
    assert max_active == 1
    for call_id in ("tool-1", "tool-2"):
        mine = [
            e
            for e in recorder.events
            if e.type.startswith("tool_execution") and e.tool_call_id == call_id
        ]
        assert [e.type for e in mine] == [
            "tool_execution_start",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_update",
            "tool_execution_end",
        ]
        assert [message_text(e.partial_result) for e in mine[1:4]] == [
            f"{call_id} 0",
            f"{call_id} 1",
            f"{call_id} 2",
        ]
        assert mine[1].args == {"delay": 0}
    assert_event_grammar(recorder.events)


async def test_late_on_update_calls_are_ignored() -> None:
    kept: list[AgentToolUpdateCallback] = []

    async def first(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        kept.append(on_update)
        return text_result("first")

    async def second(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        # While the run goes on: the first tool's callback is dead.
        kept[0](text_result("late, during the run"))
        await trio.lowlevel.checkpoint()
        return text_result("second")

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "first", {}), ("tool-2", "second", {})),
            faux_assistant_message("ok"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("first", first), make_tool("second", second)]),
        AgentLoopConfig(model=stream.model, tool_execution="sequential"),
        recorder,
        stream_fn=stream,
    )
    count = len(recorder.events)
    kept[0](text_result("late, after the run"))
    await trio.testing.wait_all_tasks_blocked()
    assert len(recorder.events) == count
    assert "tool_execution_update" not in recorder.types
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# open_agent_loop


def scripted_turns() -> RecordingStream:
    return RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("done")]
    )


async def test_open_agent_loop_yields_all_events_and_ends_after_agent_end() -> None:
    recorder = EventRecorder()
    reference = scripted_turns()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=reference.model),
        recorder,
        stream_fn=reference,
    )
    stream = scripted_turns()
    before = tasks_living()
    async with open_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model),
        stream_fn=stream,
    ) as events:
        received = [event async for event in events]
    assert tasks_living() == before
    assert [e.type for e in received] == recorder.types
    assert received[-1].type == "agent_end"
    assert [m.role for m in received[-1].messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert_event_grammar(received)


async def test_leaving_open_agent_loop_early_cancels_the_loop(
    autojump_clock: trio.abc.Clock,
) -> None:
    forever = Forever()
    stream = RecordingStream([tool_calls_reply(("tool-1", "forever", {}))])
    before = tasks_living()
    received: list[AgentEvent] = []
    async with open_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[forever.tool()]),
        AgentLoopConfig(model=stream.model),
        stream_fn=stream,
    ) as events:
        async for event in events:
            received.append(event)
            if event.type == "tool_execution_start":
                await forever.all_entered.wait()
                break
    assert tasks_living() == before
    assert trio.current_time() == 0
    assert forever.cancelled == ["tool-1"]
    assert received[-1].type == "tool_execution_start"


async def test_leaving_open_agent_loop_before_receiving_anything_cancels_the_loop() -> None:
    stream = RecordingStream([faux_assistant_message("never")])
    before = tasks_living()
    async with open_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model),
        stream_fn=stream,
    ):
        pass
    assert tasks_living() == before
    assert stream.calls == 0


async def test_open_agent_loop_with_a_buffer_does_not_wait_for_the_consumer() -> None:
    stream = RecordingStream([faux_assistant_message("hello")])
    async with open_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model),
        stream_fn=stream,
        max_buffer_size=100,
    ) as events:
        await trio.testing.wait_all_tasks_blocked()
        # The whole run was buffered before the consumer received anything.
        assert events.statistics().current_buffer_used > 0
        received = [event async for event in events]
    assert received[-1].type == "agent_end"
    assert_event_grammar(received)


async def test_a_failure_of_the_run_closes_the_open_agent_loop_channel() -> None:
    def failing_convert(messages: list[AgentMessage]) -> list[Message]:
        raise ListenerFailure("convert failed")

    stream = RecordingStream([faux_assistant_message("never")])
    received: list[AgentEvent] = []
    async with open_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model, convert_to_llm=failing_convert),
        stream_fn=stream,
    ) as events:
        async for event in events:
            received.append(event)
    assert [e.type for e in received] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    end = received[-1]
    assert end.type == "agent_end"
    failure = end.messages[0]
    assert isinstance(failure, AssistantMessage)
    assert (failure.stop_reason, failure.error_message) == ("error", "convert failed")
    assert stream.calls == 0


async def test_an_agent_end_failure_propagates_out_of_open_agent_loop() -> None:
    """Nothing may follow agent_end, so an error there leaves the block as itself."""
    stream = RecordingStream([faux_assistant_message("done")])
    with pytest.raises(ListenerFailure, match=r"^agent_end failed$"):
        await run_agent_loop(
            [user("go")],
            AgentContext(messages=[]),
            AgentLoopConfig(model=stream.model),
            _raise_on("agent_end", ListenerFailure("agent_end failed")),
            stream_fn=stream,
        )


def _raise_on(kind: str, error: BaseException) -> Callable[[AgentEvent], None]:
    def emit(event: AgentEvent) -> None:
        if event.type == kind:
            raise error

    return emit


# ---------------------------------------------------------------------------------------
# run_tool_call


async def test_run_tool_call_returns_outcomes_without_events() -> None:
    partials: list[AgentToolResult] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        on_update(text_result(f"working on {params['value']}"))
        await trio.lowlevel.checkpoint()
        return text_result(f"echo {params['value']}")

    tools = [
        make_tool("echo", echo, parameters=STRING_VALUE),
        make_tool("boom", raising(RuntimeError("tool broke"))),
    ]
    assistant = tool_calls_reply(("tool-1", "echo", {"value": "x"}))
    context = AgentContext(messages=[user("go"), assistant], tools=tools)
    snapshot = list(context.messages)

    async def run(call_args: tuple[str, str, dict[str, Any]], **hooks: Any) -> AgentToolCallOutcome:
        call = faux_tool_call(call_args[1], call_args[2], id=call_args[0])
        return await run_tool_call(
            call,
            tools=tools,
            assistant_message=assistant,
            context=context,
            on_update=partials.append,
            **hooks,
        )

    ok = await run(("tool-1", "echo", {"value": "x"}))
    assert ok == AgentToolCallOutcome(
        tool_call=faux_tool_call("echo", {"value": "x"}, id="tool-1"),
        result=text_result("echo x"),
        is_error=False,
        duration_ms=0,
    )
    assert partials == [text_result("working on x")]

    broken = await run(("tool-2", "boom", {}))
    assert (broken.result.content, broken.is_error) == ([TextContent(text="tool broke")], True)

    missing = await run(("tool-3", "missing", {}))
    assert missing.result == AgentToolResult(
        content=[TextContent(text="Tool missing not found")], details={}
    )
    assert missing.is_error is True

    def block(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True)

    blocked = await run(("tool-4", "echo", {"value": "y"}), before_tool_call=block)
    assert blocked.result.content == [TextContent(text="Tool execution was blocked")]
    assert blocked.is_error is True

    invalid = await run(("tool-5", "echo", {}))
    assert invalid.is_error is True
    assert message_text(invalid.result).startswith('Validation failed for tool "echo":\n')

    # Nothing was appended anywhere.
    assert context.messages == snapshot
    assert len(partials) == 1


# ---------------------------------------------------------------------------------------
# The faux provider's event order through the loop


async def test_faux_event_order_through_the_loop() -> None:
    reply = faux_assistant_message(
        [faux_thinking("plan"), faux_text("okay"), faux_tool_call("noop", {}, id="tool-1")],
        stop_reason="toolUse",
    )
    stream = RecordingStream([reply, faux_assistant_message("done")], token_size=(1, 1))
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    first_turn = recorder.events[: recorder.types.index("turn_end") + 1]
    assert [
        f"message_update:{e.assistant_message_event.type}" if e.type == "message_update" else e.type
        for e in first_turn[6:]
    ] == [
        "message_start",
        "message_update:thinking_start",
        "message_update:thinking_delta",
        "message_update:thinking_end",
        "message_update:text_start",
        "message_update:text_delta",
        "message_update:text_end",
        "message_update:toolcall_start",
        "message_update:toolcall_delta",
        "message_update:toolcall_end",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
    ]
    updates = [e for e in first_turn if e.type == "message_update"]
    # Each update carries the provider event's own partial snapshot.
    assert all(e.message is e.assistant_message_event.partial for e in updates)
    assert [e.assistant_message_event.content_index for e in updates] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    deltas = [getattr(e.assistant_message_event, "delta", None) for e in updates]
    assert deltas == [None, "plan", None, None, "okay", None, None, "{}", None]
    final = recorder.of_type("message_end")[2].message
    assert isinstance(final, AssistantMessage)
    assert final.content == reply.content
    assert final.stop_reason == "toolUse"
    assert final.thinking_level == "off"
    assert_event_grammar(recorder.events)


async def test_parallel_tools_events_reach_the_sink_one_at_a_time_from_the_run_task(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The run's task dispatches its tool tasks' events: the sink is never entered twice,
    and an awaiting sink delays the next event, not the tools."""
    from trio_agent import AgentTool, AgentToolResult, TextContent, UserMessage
    from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
    from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call

    async def execute(
        tool_call_id: str, params: dict[str, object], signal: object, on_update: object
    ) -> AgentToolResult:
        await trio.sleep(1)
        return AgentToolResult(content=[TextContent(text="ok")])

    tool = AgentTool(
        name="wait",
        label="wait",
        description="waits",
        parameters={"type": "object"},
        execute=execute,
    )
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("wait", {}, id=f"c{i}") for i in range(3)],
                stop_reason="toolUse",
            ),
            faux_assistant_message("done"),
        ]
    )
    inside = peak = 0
    run_task = trio.lowlevel.current_task()
    ends: list[float] = []

    async def emit(event: AgentEvent) -> None:
        nonlocal inside, peak
        assert trio.lowlevel.current_task() is run_task
        if event.type != "tool_execution_end":
            return
        inside += 1
        peak = max(peak, inside)
        ends.append(trio.current_time())
        await trio.sleep(1)
        inside -= 1

    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(messages=[], tools=[tool]),
        AgentLoopConfig(model=faux.get_model()),
        emit,
        stream_fn=faux.stream_fn,
    )
    assert peak == 1
    # The three tools ran together (1 s); their end events then took 1 s each.
    assert [round(t - ends[0], 3) for t in ends] == [0, 1, 2]
