"""The agent loop: the upstream ``agent-loop.test.ts`` behaviours (reference §5.2).

One test per upstream behaviour, named after it. The shared helpers at the top (tools,
a recording stream function, queue sources) are also used by ``test_loop_trio.py``; every
run's events are checked with :func:`trio_agent.testing.assert_event_grammar`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import attrs
import pytest
import trio
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

import trio_agent._streaming
from trio_agent import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentEvent,
    AgentLoopTurnUpdate,
    AgentMessage,
    AgentRequestUpdate,
    AgentTool,
    AgentToolResult,
    AgentTurnContext,
    AgentTurnDecision,
    AssistantMessage,
    BeforeToolCallContext,
    BeforeToolCallResult,
    Message,
    NothingToContinueError,
    PrepareRequestContext,
    SystemMessage,
    TextContent,
    ToolExecutionMode,
    ToolResultMessage,
    Usage,
    UserMessage,
    set_default_stream_fn,
)
from trio_agent.loop import (
    AgentContext,
    AgentLoopConfig,
    open_agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from trio_agent.testing import (
    EventRecorder,
    assert_event_grammar,
    assert_event_types,
    faux_assistant_message,
    faux_tool_call,
)


class Observer:
    """An ``emit`` sink that records events and, interleaved, hook observations."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []
        self.log: list[str] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)
        label: str = event.type
        if event.type in ("message_start", "message_end"):
            label = f"{event.type}:{event.message.role}"
        self.log.append(label)
        await trio.lowlevel.checkpoint()

    @property
    def types(self) -> list[str]:
        return [event.type for event in self.events]


@pytest.fixture
def restore_default_stream_fn() -> Iterator[None]:
    saved = trio_agent._streaming._default_stream_fn
    try:
        yield
    finally:
        set_default_stream_fn(saved)


# ---------------------------------------------------------------------------------------
# Default stream function


async def test_uses_the_configured_default_when_a_legacy_caller_omits_stream_fn(
    restore_default_stream_fn: None,
) -> None:
    stream = RecordingStream([faux_assistant_message("from the default")])
    set_default_stream_fn(stream)
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("hello")], AgentContext(messages=[]), AgentLoopConfig(model=stream.model), recorder
    )
    assert stream.calls == 1
    assert [message_text(m) for m in messages] == ["hello", "from the default"]
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# run_agent_loop


async def test_should_emit_events_with_agent_message_types() -> None:
    stream = RecordingStream([faux_assistant_message("hi there")], token_size=(1, 1))
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("hello")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert [m.role for m in messages] == ["user", "assistant"]
    assert_event_types(
        recorder,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_update",  # text_start
            "message_update",  # text_delta "hi t"
            "message_update",  # text_delta "here"
            "message_update",  # text_end
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    assert_event_grammar(recorder.events)
    end = recorder.events[-1]
    assert end.type == "agent_end"
    assert end.messages == messages


async def test_should_build_provider_context_exclusively_from_transcript_messages() -> None:
    system = SystemMessage(content="Transcript prompt", tools_added=[], timestamp=1)
    stream = RecordingStream([faux_assistant_message("ok")])
    recorder = EventRecorder()
    await run_agent_loop(
        [system, user("hello")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    (context,) = stream.contexts
    assert list(attrs.asdict(context, recurse=False)) == ["messages"]
    assert context.messages[0] is system
    assert [m.role for m in context.messages] == ["system", "user"]
    assert_event_grammar(recorder.events)


@attrs.frozen(kw_only=True)
class Notification:
    """An application message the provider must never see."""

    text: str
    timestamp: int = 1
    role: Literal["notification"] = "notification"


async def test_should_handle_custom_message_types_via_convert_to_llm() -> None:
    received: list[list[AgentMessage]] = []

    def convert(messages: list[AgentMessage]) -> list[Message]:
        received.append(list(messages))
        return [m for m in messages if isinstance(m, UserMessage)]

    stream = RecordingStream([faux_assistant_message("ok")])
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("hello")],
        AgentContext(messages=[Notification(text="deploy finished")]),
        AgentLoopConfig(model=stream.model, convert_to_llm=convert),
        recorder,
        stream_fn=stream,
    )
    assert [m.role for m in received[0]] == ["notification", "user"]
    (context,) = stream.contexts
    assert len(context.messages) == 1
    assert context.messages[0].role == "user"
    assert [m.role for m in messages] == ["user", "assistant"]
    assert_event_grammar(recorder.events)


async def test_should_apply_transform_context_before_convert_to_llm() -> None:
    old: list[AgentMessage] = [
        user("old 1"),
        faux_assistant_message("old 2"),
        user("old 3"),
        faux_assistant_message("old 4"),
    ]
    transformed: list[int] = []
    converted: list[list[str]] = []

    def transform(messages: list[AgentMessage], signal: AbortSignal | None) -> list[AgentMessage]:
        transformed.append(len(messages))
        return messages[-2:]

    def convert(messages: list[AgentMessage]) -> list[Message]:
        converted.append([message_text(m) for m in messages])
        return [m for m in messages if isinstance(m, UserMessage | AssistantMessage)]

    stream = RecordingStream([faux_assistant_message("ok")])
    recorder = EventRecorder()
    await run_agent_loop(
        [user("new")],
        AgentContext(messages=old),
        AgentLoopConfig(model=stream.model, transform_context=transform, convert_to_llm=convert),
        recorder,
        stream_fn=stream,
    )
    assert transformed == [5]
    assert converted == [["old 4", "new"]]
    assert [message_text(m) for m in stream.contexts[0].messages] == ["old 4", "new"]
    assert_event_grammar(recorder.events)


async def test_should_handle_tool_calls_and_results() -> None:
    tool_usage = Usage(input=1, output=2, total_tokens=3)
    hook_usage = Usage(input=10, output=20, total_tokens=30)
    executed: list[str] = []
    seen_usage: list[Usage | None] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(params["value"])
        await trio.lowlevel.checkpoint()
        return text_result(f"echoed: {params['value']}", usage=tool_usage)

    def after(ctx: AfterToolCallContext, signal: AbortSignal | None) -> AfterToolCallResult:
        seen_usage.append(ctx.result.usage)
        return AfterToolCallResult(usage=hook_usage)

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "echo", {"value": "hello"})), faux_assistant_message("done")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("echo hello")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(model=stream.model, after_tool_call=after),
        recorder,
        stream_fn=stream,
    )
    assert executed == ["hello"]
    assert seen_usage == [tool_usage]
    (start,) = recorder.of_type("tool_execution_start")
    assert (start.tool_call_id, start.tool_name, start.args) == (
        "tool-1",
        "echo",
        {"value": "hello"},
    )
    (end,) = recorder.of_type("tool_execution_end")
    assert end.is_error is False
    assert end.result.usage == hook_usage
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert result.usage == hook_usage
    assert result.content == [TextContent(text="echoed: hello")]
    assert result.is_error is False
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult", "assistant"]
    assert_event_grammar(recorder.events)


async def test_should_not_execute_tool_calls_from_a_length_truncated_assistant_message() -> None:
    executed: list[str] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(params["value"])
        return text_result("never")

    truncated = faux_assistant_message(
        [faux_tool_call("echo", {"value": "cut"}, id="tool-1")], stop_reason="length"
    )
    stream = RecordingStream([truncated, faux_assistant_message("again")])
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert executed == []
    (end,) = recorder.of_type("tool_execution_end")
    assert end.is_error is True
    assert end.duration_ms is None
    assert end.result.content == [
        TextContent(
            text='Tool call "echo" was not executed: the response hit the output token limit, '
            "so its arguments may be truncated. Re-issue the tool call with complete arguments."
        )
    ]
    assert stream.calls == 2
    assert messages[-1].role == "assistant"
    assert message_text(messages[-1]) == "again"
    assert_event_grammar(recorder.events)


async def test_should_execute_mutated_before_tool_call_args_without_revalidation() -> None:
    executed: list[Any] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(params["value"])
        return text_result("ok")

    def before(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> None:
        ctx.args["value"] = 123

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "echo", {"value": "hello"})), faux_assistant_message("done")]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(model=stream.model, before_tool_call=before),
        recorder,
        stream_fn=stream,
    )
    assert executed == [123]
    (end,) = recorder.of_type("tool_execution_end")
    assert end.is_error is False
    assert_event_grammar(recorder.events)


async def test_should_prepare_tool_arguments_for_validation() -> None:
    edits_schema = {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                    "required": ["oldText", "newText"],
                },
            }
        },
        "required": ["edits"],
    }
    received: list[Any] = []

    def fold_legacy(raw: dict[str, Any]) -> dict[str, Any]:
        if "oldText" in raw:
            return {"edits": [{"oldText": raw["oldText"], "newText": raw["newText"]}]}
        return raw

    async def edit(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        received.append(params["edits"])
        return text_result("edited")

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "edit", {"oldText": "before", "newText": "after"})),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("edit")],
        AgentContext(
            messages=[],
            tools=[make_tool("edit", edit, parameters=edits_schema, prepare_arguments=fold_legacy)],
        ),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert received == [[{"oldText": "before", "newText": "after"}]]
    # Events report the raw call arguments.
    (start,) = recorder.of_type("tool_execution_start")
    assert start.args == {"oldText": "before", "newText": "after"}
    assert_event_grammar(recorder.events)


def sleeper(log: list[str], *, name: str = "sleep") -> AgentTool:
    """A tool sleeping ``delay`` seconds; logs ``<label> start`` / ``<label> end``."""

    async def execute(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        log.append(f"{params['label']} start")
        await trio.sleep(params["delay"])
        log.append(f"{params['label']} end")
        return text_result(params["label"])

    schema = {
        "type": "object",
        "properties": {"label": {"type": "string"}, "delay": {"type": "number"}},
        "required": ["label", "delay"],
    }
    return make_tool(name, execute, parameters=schema)


async def test_should_emit_tool_execution_end_in_completion_order_but_persist_tool_results_in_source_order(  # noqa: E501
    autojump_clock: trio.abc.Clock,
) -> None:
    log: list[str] = []
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "sleep", {"label": "first", "delay": 2}),
                ("tool-2", "sleep", {"label": "second", "delay": 1}),
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[sleeper(log)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        recorder,
        stream_fn=stream,
    )
    # Trio does not order the start of sibling tasks; both start before either ends.
    assert sorted(log[:2]) == ["first start", "second start"]
    assert log[2:] == ["second end", "first end"]
    assert [e.tool_call_id for e in recorder.of_type("tool_execution_end")] == ["tool-2", "tool-1"]
    assert [e.duration_ms for e in recorder.of_type("tool_execution_end")] == [1000, 2000]
    result_ends = [
        e.message for e in recorder.of_type("message_end") if e.message.role == "toolResult"
    ]
    assert tool_result_ids(result_ends) == ["tool-1", "tool-2"]
    turn_end = recorder.of_type("turn_end")[0]
    assert tool_result_ids(turn_end.tool_results) == ["tool-1", "tool-2"]
    assert_event_grammar(recorder.events)


async def test_should_inject_queued_messages_after_all_tool_calls_complete() -> None:
    executed: list[str] = []
    steering = Source()

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(params["value"])
        if params["value"] == "first":
            steering.items.append(user("interrupt"))
        await trio.lowlevel.checkpoint()
        return text_result(params["value"])

    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "echo", {"value": "first"}), ("tool-2", "echo", {"value": "second"})
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(
            model=stream.model, tool_execution="sequential", get_steering_messages=steering
        ),
        recorder,
        stream_fn=stream,
    )
    assert executed == ["first", "second"]
    assert [e.is_error for e in recorder.of_type("tool_execution_end")] == [False, False]
    started = [
        e.message.tool_call_id if e.message.role == "toolResult" else message_text(e.message)
        for e in recorder.of_type("message_start")
        if e.message.role in ("toolResult", "user")
    ]
    assert started == ["go", "tool-1", "tool-2", "interrupt"]
    assert stream.calls == 2
    assert stream.request_texts(0) == ["go"]
    assert stream.request_texts(1) == ["go", "interrupt"]
    assert_event_grammar(recorder.events)


class Overlap:
    """Tracks how many tool executions run at once."""

    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0
        self.order: list[str] = []

    def tool(self, name: str, mode: ToolExecutionMode, delay: float) -> AgentTool:
        async def execute(
            call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
        ) -> AgentToolResult:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.order.append(f"{name}:{params['value']} start")
            await trio.sleep(delay)
            self.order.append(f"{name}:{params['value']} end")
            self.active -= 1
            return text_result(params["value"])

        return make_tool(name, execute, parameters=STRING_VALUE, execution_mode=mode)


async def test_should_force_sequential_execution_when_a_tool_has_execution_mode_sequential_even_with_default_parallel_config(  # noqa: E501
    autojump_clock: trio.abc.Clock,
) -> None:
    overlap = Overlap()
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "slow", {"value": "a"}), ("tool-2", "slow", {"value": "b"})
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[overlap.tool("slow", "sequential", 1)]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert overlap.max_active == 1
    assert overlap.order == ["slow:a start", "slow:a end", "slow:b start", "slow:b end"]
    assert tool_result_ids(messages) == ["tool-1", "tool-2"]
    assert_event_grammar(recorder.events)


async def test_should_force_sequential_execution_when_one_of_multiple_tools_has_execution_mode_sequential(  # noqa: E501
    autojump_clock: trio.abc.Clock,
) -> None:
    overlap = Overlap()
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "slow", {"value": "a"}), ("tool-2", "fast", {"value": "b"})
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(
            messages=[],
            tools=[overlap.tool("slow", "sequential", 2), overlap.tool("fast", "parallel", 1)],
        ),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert overlap.order == ["slow:a start", "slow:a end", "fast:b start", "fast:b end"]
    assert overlap.max_active == 1
    assert_event_grammar(recorder.events)


async def test_should_allow_parallel_execution_when_all_tools_have_execution_mode_parallel(
    autojump_clock: trio.abc.Clock,
) -> None:
    overlap = Overlap()
    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "slow", {"value": "a"}), ("tool-2", "fast", {"value": "b"})
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(
            messages=[],
            tools=[overlap.tool("slow", "parallel", 2), overlap.tool("fast", "parallel", 1)],
        ),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert overlap.max_active == 2
    assert sorted(overlap.order[:2]) == ["fast:b start", "slow:a start"]
    assert overlap.order[2:] == ["fast:b end", "slow:a end"]
    assert_event_grammar(recorder.events)


async def test_runs_finish_turn_after_tool_result_messages_and_before_turn_end() -> None:
    observer = Observer()
    turns: list[AgentTurnContext] = []

    def finish(turn: AgentTurnContext, signal: AbortSignal | None) -> None:
        turns.append(turn)
        observer.log.append("finish_turn")

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("done")]
    )
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model, finish_turn=finish),
        observer,
        stream_fn=stream,
    )
    first_turn_end = observer.log.index("turn_end")
    assert observer.log[first_turn_end - 2 : first_turn_end + 1] == [
        "message_end:toolResult",
        "finish_turn",
        "turn_end",
    ]
    first = turns[0]
    assert tool_result_ids(first.tool_results) == ["tool-1"]
    # Live objects: the context has moved on since, so compare with the recorded results.
    assert first.tool_results[0] in first.context.messages
    assert first.context.messages.index(first.tool_results[0]) == 3
    assert len(turns) == 2
    assert_event_grammar(observer.events)


async def test_runs_finish_turn_before_turn_end_with_the_context_at_that_point() -> None:
    # The context the hook sees ends with the tool result at the time of the call.
    seen: list[list[str]] = []

    def finish(turn: AgentTurnContext, signal: AbortSignal | None) -> None:
        seen.append([m.role for m in turn.context.messages])

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("done")]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model, finish_turn=finish),
        recorder,
        stream_fn=stream,
    )
    assert seen == [
        ["system", "user", "assistant", "toolResult"],
        ["system", "user", "assistant", "toolResult", "assistant"],
    ]
    assert_event_grammar(recorder.events)


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
async def test_runs_finish_turn_for_a_failed_assistant_before_turn_end_without_changing_the_hard_exit(  # noqa: E501
    stop_reason: Literal["error", "aborted"],
) -> None:
    observer = Observer()
    steering, follow_ups = Source(), Source(user("never delivered"))

    def finish(turn: AgentTurnContext, signal: AbortSignal | None) -> AgentTurnDecision:
        observer.log.append("finish_turn")
        return AgentTurnDecision(action="continue")

    failed = faux_assistant_message(
        [faux_tool_call("noop", {}, id="tool-1")],
        stop_reason=stop_reason,
        error_message=f"provider said {stop_reason}",
    )
    stream = RecordingStream([failed, faux_assistant_message("never requested")])
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(
            model=stream.model,
            finish_turn=finish,
            get_steering_messages=steering,
            get_follow_up_messages=follow_ups,
        ),
        observer,
        stream_fn=stream,
    )
    assert observer.log[-3:] == ["finish_turn", "turn_end", "agent_end"]
    assert stream.calls == 1
    assert steering.polls == 1
    assert follow_ups.polls == 0
    # Tool calls of a failed response are never executed.
    assert "tool_execution_start" not in observer.log
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert (last.stop_reason, last.error_message) == (stop_reason, f"provider said {stop_reason}")
    assert_event_grammar(observer.events)


async def test_action_end_skips_queue_polling_and_next_turn_preparation() -> None:
    steering, follow_ups = Source(), Source(user("never delivered"))
    prepared: list[AgentTurnContext] = []

    def prepare_next_turn(turn: AgentTurnContext) -> None:
        prepared.append(turn)

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("never requested")]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(
            model=stream.model,
            finish_turn=lambda turn, signal: AgentTurnDecision(action="end"),
            prepare_next_turn=prepare_next_turn,
            get_steering_messages=steering,
            get_follow_up_messages=follow_ups,
        ),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 1
    assert steering.polls == 1
    assert follow_ups.polls == 0
    assert prepared == []
    assert_event_grammar(recorder.events)


class ContinueOnce:
    """A ``finish_turn`` that asks for continuation the first time only."""

    def __init__(self) -> None:
        self.calls = 0

    async def __call__(
        self, turn: AgentTurnContext, signal: AbortSignal | None
    ) -> AgentTurnDecision | None:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        return AgentTurnDecision(action="continue") if self.calls == 1 else None


async def test_makes_exactly_one_context_only_request_when_no_natural_request_satisfies_continuation() -> (  # noqa: E501
    None
):
    finish = ContinueOnce()
    stream = RecordingStream([faux_assistant_message("one"), faux_assistant_message("two")])
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(model=stream.model, finish_turn=finish),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert finish.calls == 2
    # The second request carries only the context: no new user message.
    assert [m.role for m in stream.contexts[1].messages] == ["user", "assistant"]
    assert [message_text(m) for m in messages] == ["go", "one", "two"]
    assert recorder.types.count("turn_start") == 2
    assert_event_grammar(recorder.events)


async def test_lets_a_natural_tool_result_request_satisfy_continuation() -> None:
    finish = ContinueOnce()
    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "noop", {})),
            faux_assistant_message("done"),
            faux_assistant_message("never requested"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model, finish_turn=finish),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert finish.calls == 2
    assert_event_grammar(recorder.events)


@pytest.mark.parametrize("queue", ["steering", "follow-up"])
async def test_lets_a_natural_queued_request_satisfy_continuation(
    queue: Literal["steering", "follow-up"],
) -> None:
    finish = ContinueOnce()
    steering, follow_ups = Source(), Source()

    def poll_steering() -> list[AgentMessage]:
        # Deliver at the second steering poll (the one after turn 1).
        if queue == "steering" and steering.polls == 1:
            steering.items.append(user("queued"))
        return steering()

    if queue == "follow-up":
        follow_ups.items.append(user("queued"))
    stream = RecordingStream(
        [
            faux_assistant_message("one"),
            faux_assistant_message("two"),
            faux_assistant_message("never requested"),
        ]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(
            model=stream.model,
            finish_turn=finish,
            get_steering_messages=poll_steering,
            get_follow_up_messages=follow_ups,
        ),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert finish.calls == 2
    assert stream.request_texts(0) == ["go"]
    assert stream.request_texts(1) == ["go", "queued"]
    assert_event_grammar(recorder.events)


async def test_prepares_the_initial_request_after_pending_messages_and_can_replace_request_state() -> (  # noqa: E501
    None
):
    steering = Source(user("startup steer"))
    canonical = user("canonical")
    recorder = EventRecorder()
    stream = RecordingStream([faux_assistant_message("ok")], models=["faux-1", "faux-2"])
    replacement = stream.faux.get_model("faux-2")
    requests: list[PrepareRequestContext] = []
    committed_before: list[list[str]] = []

    def prepare_request(
        request: PrepareRequestContext, signal: AbortSignal | None
    ) -> AgentRequestUpdate:
        requests.append(request)
        committed_before.append([message_text(e.message) for e in recorder.of_type("message_end")])
        return AgentRequestUpdate(
            context=AgentContext(messages=[canonical]), model=replacement, thinking_level="high"
        )

    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(
            model=stream.model, prepare_request=prepare_request, get_steering_messages=steering
        ),
        recorder,
        stream_fn=stream,
    )
    assert len(requests) == 1
    assert committed_before == [["go", "startup steer"]]
    assert [message_text(m) for m in requests[0].context.messages] == ["go", "startup steer"]
    assert requests[0].model == stream.model
    assert requests[0].thinking_level == "off"
    assert stream.models == [replacement]
    assert stream.contexts[0].messages == [canonical]
    assert stream.contexts[0].messages[0] is canonical
    assert stream.options[0].reasoning == "high"
    assert_event_grammar(recorder.events)


async def test_does_not_poll_steering_after_prepare_request() -> None:
    steering = Source()
    calls = 0

    def prepare_request(request: PrepareRequestContext, signal: AbortSignal | None) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            steering.items.append(user("late steer"))

    stream = RecordingStream([faux_assistant_message("one"), faux_assistant_message("two")])
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[]),
        AgentLoopConfig(
            model=stream.model, prepare_request=prepare_request, get_steering_messages=steering
        ),
        recorder,
        stream_fn=stream,
    )
    assert stream.request_texts(0) == ["go"]
    assert stream.request_texts(1) == ["go", "late steer"]
    assert calls == 2
    assert steering.polls == 3
    assert_event_grammar(recorder.events)


async def test_should_use_prepare_next_turn_snapshot_before_continuing() -> None:
    calls: list[AgentTurnContext] = []

    def prepare_next_turn(turn: AgentTurnContext) -> AgentLoopTurnUpdate:
        calls.append(turn)
        return AgentLoopTurnUpdate(
            context=AgentContext(
                messages=list(turn.context.messages), tools=list(turn.context.tools)
            ),
            messages=[SystemMessage(content="updated guidance", timestamp=2)],
        )

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("done")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model, prepare_next_turn=prepare_next_turn),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert len(calls) == 1
    second = stream.contexts[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "toolResult", "system"]
    assert isinstance(second[-1], SystemMessage)
    assert second[-1].content == "updated guidance"
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "system",
        "assistant",
    ]
    assert_event_grammar(recorder.events)


async def test_picks_up_steering_queued_during_prepare_next_turn_before_the_next_request() -> None:
    steering = Source()

    def prepare_next_turn(turn: AgentTurnContext) -> None:
        steering.items.append(user("steer from preparation"))

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("done")]
    )
    recorder = EventRecorder()
    await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(
            model=stream.model,
            prepare_next_turn=prepare_next_turn,
            get_steering_messages=steering,
        ),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert stream.request_texts(1) == ["go", "steer from preparation"]
    # startup, after turn 1 (empty), the re-poll after preparation, after turn 2
    assert steering.polls == 4
    assert_event_grammar(recorder.events)


async def test_action_end_receives_finalized_turn_context_and_stops_before_queue_polling() -> None:
    steering, follow_ups = Source(), Source()
    executed: list[str] = []
    seen: list[tuple[list[str], list[str]]] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(call_id)
        await trio.lowlevel.checkpoint()
        return text_result("ok")

    def finish(turn: AgentTurnContext, signal: AbortSignal | None) -> AgentTurnDecision:
        seen.append((tool_result_ids(turn.tool_results), [m.role for m in turn.context.messages]))
        return AgentTurnDecision(action="end")

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "echo", {"value": "x"})), faux_assistant_message("never")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(
            model=stream.model,
            finish_turn=finish,
            get_steering_messages=steering,
            get_follow_up_messages=follow_ups,
        ),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 1
    assert executed == ["tool-1"]
    assert (steering.polls, follow_ups.polls) == (1, 0)
    assert seen == [(["tool-1"], ["system", "user", "assistant", "toolResult"])]
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult"]
    assert_event_types(
        [e for e in recorder.events if e.type != "message_update"],
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "tool_execution_start",
            "tool_execution_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ],
    )
    assert [e.message.role for e in recorder.of_type("message_end")] == [
        "system",
        "user",
        "assistant",
        "toolResult",
    ]
    assert_event_grammar(recorder.events)


async def test_should_stop_after_a_tool_batch_when_every_tool_result_sets_terminate_true() -> None:
    async def final(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        return text_result("final answer", terminate=True)

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "final", {}), ("tool-2", "final", {})),
            faux_assistant_message("never requested"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("final", final)]),
        AgentLoopConfig(model=stream.model),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 1
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult", "toolResult"]
    assert recorder.types.count("turn_end") == 1
    # terminate is a runtime hint: it is on the end event's result, not in the transcript.
    assert [e.result.terminate for e in recorder.of_type("tool_execution_end")] == [True, True]
    assert_event_grammar(recorder.events)


async def test_should_stop_after_a_blocked_tool_call_when_before_tool_call_sets_terminate_true() -> (  # noqa: E501
    None
):
    executed: list[str] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(call_id)
        return text_result("ran")

    def before(ctx: BeforeToolCallContext, signal: AbortSignal | None) -> BeforeToolCallResult:
        return BeforeToolCallResult(block=True, reason="Blocked by policy", terminate=True)

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "echo", {"value": "x"})), faux_assistant_message("never")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(model=stream.model, before_tool_call=before),
        recorder,
        stream_fn=stream,
    )
    assert executed == []
    assert stream.calls == 1
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert result.is_error is True
    assert result.content == [TextContent(text="Blocked by policy")]
    (end,) = recorder.of_type("tool_execution_end")
    assert (end.is_error, end.result.terminate, end.duration_ms) == (True, True, None)
    assert_event_grammar(recorder.events)


async def test_should_continue_after_a_mixed_batch_with_one_terminating_blocked_call() -> None:
    executed: list[str] = []

    async def echo(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        executed.append(params["value"])
        await trio.lowlevel.checkpoint()
        return text_result("ran")

    def before(
        ctx: BeforeToolCallContext, signal: AbortSignal | None
    ) -> BeforeToolCallResult | None:
        if ctx.args["value"] == "first":
            return BeforeToolCallResult(block=True, terminate=True)
        return None

    stream = RecordingStream(
        [
            tool_calls_reply(
                ("tool-1", "echo", {"value": "first"}), ("tool-2", "echo", {"value": "second"})
            ),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("echo", echo, parameters=STRING_VALUE)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel", before_tool_call=before),
        recorder,
        stream_fn=stream,
    )
    assert executed == ["second"]
    assert stream.calls == 2
    blocked = next(m for m in messages if isinstance(m, ToolResultMessage))
    assert blocked.content == [TextContent(text="Tool execution was blocked")]
    assert_event_grammar(recorder.events)


async def test_should_continue_after_parallel_tool_calls_when_not_all_tool_results_terminate() -> (
    None
):
    async def maybe_final(
        call_id: str, params: dict[str, Any], signal: AbortSignal, on_update: Any
    ) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        return text_result("ok", terminate=True if call_id == "tool-1" else None)

    stream = RecordingStream(
        [
            tool_calls_reply(("tool-1", "maybe", {}), ("tool-2", "maybe", {})),
            faux_assistant_message("done"),
        ]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[make_tool("maybe", maybe_final)]),
        AgentLoopConfig(model=stream.model, tool_execution="parallel"),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 2
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    assert_event_grammar(recorder.events)


async def test_should_allow_after_tool_call_to_mark_a_tool_batch_as_terminating() -> None:
    def after(ctx: AfterToolCallContext, signal: AbortSignal | None) -> AfterToolCallResult:
        return AfterToolCallResult(terminate=True)

    stream = RecordingStream(
        [tool_calls_reply(("tool-1", "noop", {})), faux_assistant_message("never requested")]
    )
    recorder = EventRecorder()
    messages = await run_agent_loop(
        [user("go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=stream.model, after_tool_call=after),
        recorder,
        stream_fn=stream,
    )
    assert stream.calls == 1
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult"]
    assert_event_grammar(recorder.events)


# ---------------------------------------------------------------------------------------
# run_agent_loop_continue


async def test_should_throw_when_context_has_no_messages() -> None:
    stream = RecordingStream([faux_assistant_message("never")])
    recorder = EventRecorder()
    config = AgentLoopConfig(model=stream.model)
    with pytest.raises(NothingToContinueError, match=r"^Cannot continue: no messages in context$"):
        await run_agent_loop_continue(AgentContext(messages=[]), config, recorder, stream_fn=stream)
    # The observable form refuses at the call, before any block is entered.
    with pytest.raises(NothingToContinueError, match=r"^Cannot continue: no messages in context$"):
        open_agent_loop_continue(AgentContext(messages=[]), config, stream_fn=stream)
    assert stream.calls == 0
    assert recorder.events == []


async def test_should_throw_when_the_last_message_is_an_assistant_message() -> None:
    stream = RecordingStream([faux_assistant_message("never")])
    recorder = EventRecorder()
    with pytest.raises(
        NothingToContinueError, match=r"^Cannot continue from message role: assistant$"
    ):
        await run_agent_loop_continue(
            AgentContext(messages=[user("hi"), faux_assistant_message("hello")]),
            AgentLoopConfig(model=stream.model),
            recorder,
            stream_fn=stream,
        )
    assert stream.calls == 0
    assert recorder.events == []


async def test_should_continue_from_existing_context_without_emitting_user_message_events() -> None:
    stream = RecordingStream([faux_assistant_message("continued")])
    recorder = EventRecorder()
    context = AgentContext(messages=[user("hello")])
    messages = await run_agent_loop_continue(
        context, AgentLoopConfig(model=stream.model), recorder, stream_fn=stream
    )
    assert [m.role for m in messages] == ["assistant"]
    assert [e.message.role for e in recorder.of_type("message_end")] == ["assistant"]
    assert [e.message.role for e in recorder.of_type("message_start")] == ["assistant"]
    assert stream.request_texts(0) == ["hello"]
    assert_event_grammar(recorder.events)


async def test_should_allow_custom_message_types_as_last_message_caller_responsibility() -> None:
    def convert(messages: list[AgentMessage]) -> list[Message]:
        converted: list[Message] = []
        for m in messages:
            if isinstance(m, Notification):
                converted.append(user(m.text))
            elif isinstance(m, UserMessage | AssistantMessage):
                converted.append(m)
        return converted

    stream = RecordingStream([faux_assistant_message("answered")])
    recorder = EventRecorder()
    messages = await run_agent_loop_continue(
        AgentContext(messages=[Notification(text="custom tail")]),
        AgentLoopConfig(model=stream.model, convert_to_llm=convert),
        recorder,
        stream_fn=stream,
    )
    assert [m.role for m in messages] == ["assistant"]
    assert message_text(messages[0]) == "answered"
    assert stream.request_texts(0) == ["custom tail"]
    assert_event_grammar(recorder.events)
