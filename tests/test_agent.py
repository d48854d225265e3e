"""The :class:`~trio_agent.Agent` against upstream's ``agent.test.ts`` behaviours
(reference upstream-agent.md §5.1, one test per behaviour, in the same order)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

import pytest
import trio
import trio.testing

from trio_agent import (
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentError,
    AgentEvent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AgentTurnContext,
    AgentTurnDecision,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    Model,
    NothingToContinueError,
    QueueMode,
    StreamFn,
    StreamOptions,
    SystemMessage,
    TextContent,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    UserMessage,
    content_text,
    get_current_system_message,
    get_current_tools,
    set_default_stream_fn,
)
from trio_agent.models._builder import AssistantMessageBuilder
from trio_agent.testing import (
    EventRecorder,
    FauxProvider,
    assert_event_types,
    faux_assistant_message,
    faux_tool_call,
)

PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"value": {"type": "string"}},
    "required": ["value"],
}

_BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, "
    "or wait for completion."
)
_BUSY_CONTINUE = "Agent is already processing. Wait for completion before continuing."
_BUSY_RESET = "Agent is already processing. Wait for completion before resetting."


# ---------------------------------------------------------------------------------------
# Helpers


def user(text: str, timestamp: int = 1) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


def make_tool(
    name: str = "echo",
    *,
    description: str | None = None,
    result: AgentToolResult | None = None,
) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        if result is not None:
            return result
        return AgentToolResult(content=[TextContent(text=f"{name}: {params.get('value')}")])

    return AgentTool(
        name=name,
        label=name.title(),
        description=description if description is not None else f"{name} tool",
        parameters=PARAMS,
        execute=execute,
    )


def declaration(tool: AgentTool) -> ToolDeclaration:
    return ToolDeclaration(name=tool.name, description=tool.description, parameters=tool.parameters)


class Requests:
    """Wraps a :class:`FauxProvider` and records every request it receives."""

    def __init__(self, *responses: AssistantMessage) -> None:
        self.faux = FauxProvider(responses)
        self.contexts: list[LlmContext] = []
        self.options: list[StreamOptions] = []

    @property
    def model(self) -> Model:
        return self.faux.get_model()

    def stream_fn(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        self.contexts.append(context)
        self.options.append(options)
        return self.faux.stream_fn(model, context, options)

    def text(self, index: int) -> str:
        """All user-visible text of request ``index`` (user and tool-result messages)."""
        parts: list[str] = []
        for message in self.contexts[index].messages:
            if isinstance(message, UserMessage | ToolResultMessage):
                parts.append(content_text(message.content))
        return "\n".join(parts)

    def agent(self, **kwargs: Any) -> Agent:
        initial = kwargs.pop("initial_state", None) or AgentInitialState(model=self.model)
        return Agent(initial_state=initial, stream_fn=self.stream_fn, **kwargs)


def text_reply(text: str = "ok") -> AssistantMessage:
    return faux_assistant_message(text)


def tool_reply(*calls: tuple[str, str, str]) -> AssistantMessage:
    """An assistant message calling ``(tool name, call id, value)`` for each call."""
    return faux_assistant_message(
        [faux_tool_call(name, {"value": value}, id=call_id) for name, call_id, value in calls],
        stop_reason="toolUse",
    )


def roles(messages: list[Any]) -> list[str]:
    return [message.role for message in messages]


def assistant_tail() -> AssistantMessage:
    return faux_assistant_message("earlier answer")


def gated_stream(started: trio.Event, release: trio.Event) -> StreamFn:
    """A stream that emits ``start``, then waits for ``release`` before finishing."""

    async def stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        builder = AssistantMessageBuilder(api=model.api, provider=model.provider, model=model.id)
        yield builder.start()
        started.set()
        await release.wait()
        index, text_start = builder.start_text()
        yield text_start
        yield builder.text_delta(index, "done")
        yield builder.end_text(index)
        yield builder.done()

    return stream


# ---------------------------------------------------------------------------------------
# 1-9: construction, transcript state, subscribe


async def test_uses_the_configured_default_when_a_legacy_caller_omits_stream_fn() -> None:
    requests = Requests(text_reply())
    set_default_stream_fn(requests.stream_fn)
    try:
        agent = Agent()
        agent.state.model = requests.model
        await agent.prompt("Hello")
    finally:
        set_default_stream_fn(None)
    assert len(requests.contexts) == 1
    with pytest.raises(AgentError, match=r"^No default stream function configured"):
        Agent()


def test_should_create_an_agent_instance_with_default_state() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    state = agent.state
    assert state.model == Model(
        id="unknown",
        name="unknown",
        api="unknown",
        provider="unknown",
        base_url="",
        reasoning=False,
        input=[],
        context_window=0,
        max_tokens=0,
    )
    assert state.thinking_level == "off"
    assert state.tools == []
    assert state.messages == []
    assert state.system_prompt == ""
    assert state.is_streaming is False
    assert state.streaming_message is None
    assert state.pending_tool_calls == frozenset()
    assert state.error_message is None
    assert agent.signal is None


def test_should_create_an_agent_instance_with_custom_initial_state() -> None:
    model = FauxProvider().get_model()
    agent = Agent(
        initial_state=AgentInitialState(
            system_prompt="You are a helpful assistant.", model=model, thinking_level="low"
        ),
        stream_fn=FauxProvider().stream_fn,
    )
    assert agent.state.messages == [
        SystemMessage(content="You are a helpful assistant.", timestamp=0)
    ]
    assert agent.state.model is model
    assert agent.state.thinking_level == "low"
    assert agent.state.system_prompt == "You are a helpful assistant."


def test_converts_initial_prompt_and_tools_into_transcript_state() -> None:
    echo = make_tool()
    agent = Agent(
        initial_state=AgentInitialState(system_prompt="Use tools.", tools=[echo]),
        stream_fn=FauxProvider().stream_fn,
    )
    first = agent.state.messages[0]
    assert isinstance(first, SystemMessage)
    assert first.content == "Use tools."
    assert [d.name for d in first.tools_added or []] == ["echo"]
    assert first.tools_added == [declaration(echo)]
    assert agent.state.tools == [echo]


def tool_marks(context: LlmContext) -> list[str]:
    marks: list[str] = []
    for message in context.messages:
        if isinstance(message, SystemMessage):
            marks.append("+" + ",".join(d.name for d in message.tools_added or []))
            marks.append("-" + ",".join(r.name for r in message.tools_removed or []))
    return marks


async def test_declares_tool_loadout_changes_to_the_model_before_the_next_request() -> None:
    first, second = make_tool("first"), make_tool("second")
    requests = Requests(text_reply("1"), text_reply("2"), text_reply("3"))
    agent = requests.agent(initial_state=AgentInitialState(model=requests.model, tools=[first]))
    await agent.prompt("one")
    agent.state.tools = [second]
    await agent.prompt("two")
    await agent.prompt("three")
    assert [tool_marks(c) for c in requests.contexts] == [
        ["+first", "-"],
        ["+first", "-", "+second", "-first"],
        ["+first", "-", "+second", "-first"],
    ]
    inserted = [m for m in requests.contexts[1].messages if isinstance(m, SystemMessage)][1]
    assert inserted == SystemMessage(
        content="",
        tools_added=[ToolDeclaration(name="second", description="second tool", parameters=PARAMS)],
        tools_removed=[ToolReference(name="first")],
        timestamp=inserted.timestamp,
    )
    assert isinstance(inserted.timestamp, int)
    assert inserted.timestamp > 0
    # The delta sits before the new prompt and is stored once in the transcript.
    assert roles(requests.contexts[1].messages) == [
        "system",
        "user",
        "assistant",
        "system",
        "user",
    ]
    assert sum(m is inserted for m in agent.state.messages) == 1


async def test_merges_tool_changes_into_a_pending_system_message() -> None:
    echo = make_tool()
    requests = Requests(text_reply())
    agent = requests.agent(
        initial_state=AgentInitialState(system_prompt="Base prompt.", model=requests.model)
    )
    agent.state.tools = [echo]
    pending = SystemMessage(content="", sections={"skills": "Use echo wisely."}, timestamp=1)
    await agent.prompt([pending, user("hi")])
    messages = requests.contexts[0].messages
    assert [m.role for m in messages].count("system") == 2
    assert messages[1] == SystemMessage(
        content="",
        sections={"skills": "Use echo wisely."},
        tools_added=[declaration(echo)],
        timestamp=1,
    )
    assert roles(messages) == ["system", "system", "user"]


async def test_rewrites_pending_tool_declarations_to_match_the_executable_set() -> None:
    first, second = make_tool("first"), make_tool("second")
    requests = Requests(text_reply())
    agent = requests.agent(initial_state=AgentInitialState(model=requests.model, tools=[first]))
    pending = SystemMessage(
        content="",
        sections={"note": "tools changed"},
        tools_added=[declaration(second)],
        tools_removed=[ToolReference(name="first")],
        timestamp=1,
    )
    await agent.prompt([pending, user("hi")])
    assert agent.state.messages[1] == SystemMessage(
        content="", sections={"note": "tools changed"}, timestamp=1
    )
    current = get_current_system_message(agent.state.messages)
    assert current is not None
    assert [d.name for d in current.tools_added or []] == ["first"]
    assert [d.name for d in get_current_tools(agent.state.messages)] == ["first"]


async def test_restores_the_transcript_baseline_when_reset() -> None:
    echo = make_tool()
    requests = Requests(text_reply())
    agent = requests.agent(
        initial_state=AgentInitialState(
            system_prompt="Be brief.", model=requests.model, tools=[echo]
        )
    )
    await agent.prompt("hello")
    agent.steer(user("queued"))
    assert roles(agent.state.messages) == ["system", "user", "assistant"]
    agent.reset()
    assert len(agent.state.messages) == 1
    system = agent.state.messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content == "Be brief."
    assert [d.name for d in system.tools_added or []] == ["echo"]
    assert agent.has_queued_messages() is False
    assert agent.state.error_message is None
    assert agent.state.tools == [echo]


def test_should_subscribe_to_events() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    recorder = EventRecorder()
    unsubscribe = agent.subscribe(recorder)
    assert recorder.events == []
    agent.state.thinking_level = "high"
    assert recorder.events == []
    unsubscribe()
    agent.state.thinking_level = "low"
    assert recorder.events == []
    unsubscribe()  # harmless twice


# ---------------------------------------------------------------------------------------
# 10-15: failures, awaited listeners, signal, late tool updates


async def test_emits_full_lifecycle_events_for_thrown_run_failures() -> None:
    async def exploding(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        raise RuntimeError("provider exploded")
        yield  # pragma: no cover  # makes this an async generator

    agent = Agent(stream_fn=exploding)
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("Hello")
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
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error"
    assert last.error_message == "provider exploded"
    assert last.content == [TextContent(text="")]
    assert agent.state.error_message == "provider exploded"
    assert agent.state.is_streaming is False
    end = recorder.events[-1]
    assert end.messages == [last]


async def test_should_await_async_subscribers_before_prompt_resolves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    requests = Requests(text_reply())
    agent = requests.agent()
    release = trio.Event()

    async def listener(event: AgentEvent) -> None:
        if event.type == "agent_end":
            await release.wait()

    agent.subscribe(listener)
    resolved = False

    async def run() -> None:
        nonlocal resolved
        await agent.prompt("Hello")
        resolved = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(0.01)
        assert resolved is False
        assert agent.state.is_streaming is True
        release.set()
    assert resolved is True
    assert agent.state.is_streaming is False


async def test_wait_for_idle_should_wait_for_async_subscribers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    requests = Requests(text_reply())
    agent = requests.agent()
    release = trio.Event()
    blocked = trio.Event()

    async def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            blocked.set()
            await release.wait()

    agent.subscribe(listener)
    idle = False

    async def wait_idle() -> None:
        nonlocal idle
        await agent.wait_for_idle()
        idle = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Hello")
        await blocked.wait()
        nursery.start_soon(wait_idle)
        await trio.sleep(0.01)
        assert idle is False
        assert agent.state.is_streaming is True
        release.set()
    assert idle is True
    assert agent.state.is_streaming is False
    await agent.wait_for_idle()  # returns at once when idle


async def test_should_pass_the_active_abort_signal_to_subscribers() -> None:
    started, release = trio.Event(), trio.Event()
    agent = Agent(stream_fn=gated_stream(started, release))
    received: list[AbortSignal] = []

    def listener(event: AgentEvent, signal: AbortSignal) -> None:
        if event.type == "agent_start":
            received.append(signal)

    agent.subscribe(listener)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Hello")
        await started.wait()
        assert len(received) == 1
        assert received[0] is agent.signal
        assert received[0].aborted is False
        agent.abort()
        assert received[0].aborted is True
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
    assert last.error_message == "Request was aborted"
    assert agent.signal is None


async def test_should_ignore_tool_updates_after_the_tool_execution_settles() -> None:
    captured: list[AgentToolUpdateCallback] = []

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        captured.append(on_update)
        on_update(AgentToolResult(content=[TextContent(text="working")]))
        await trio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text="done")], terminate=True)

    tool = AgentTool(
        name="echo", label="Echo", description="echo", parameters=PARAMS, execute=execute
    )
    requests = Requests(tool_reply(("echo", "call-1", "x")))
    agent = requests.agent(initial_state=AgentInitialState(model=requests.model, tools=[tool]))
    recorder = EventRecorder()
    agent.subscribe(recorder)
    await agent.prompt("go")
    assert len(recorder.of_type("tool_execution_update")) == 1
    count = len(recorder)
    captured[0](AgentToolResult(content=[TextContent(text="late")]))
    await trio.testing.wait_all_tasks_blocked()
    assert len(recorder) == count
    assert len(recorder.of_type("tool_execution_update")) == 1
    assert len(requests.contexts) == 1  # terminate stopped the run


async def test_should_ignore_a_settled_parallel_tool_update_while_another_tool_is_still_running() -> (  # noqa: E501
    None
):
    fast_update: list[AgentToolUpdateCallback] = []
    release_slow = trio.Event()
    slow_running = False

    async def fast(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        fast_update.append(on_update)
        await trio.lowlevel.checkpoint()
        return AgentToolResult(content=[TextContent(text="fast")])

    async def slow(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        nonlocal slow_running
        slow_running = True
        await release_slow.wait()
        slow_running = False
        return AgentToolResult(content=[TextContent(text="slow")])

    tools = [
        AgentTool(name="fast", label="Fast", description="f", parameters=PARAMS, execute=fast),
        AgentTool(name="slow", label="Slow", description="s", parameters=PARAMS, execute=slow),
    ]
    requests = Requests(
        tool_reply(("slow", "call-slow", "a"), ("fast", "call-fast", "b")), text_reply()
    )
    agent = requests.agent(initial_state=AgentInitialState(model=requests.model, tools=tools))
    recorder = EventRecorder()
    late_sent_while_slow_running: list[bool] = []

    async def listener(event: AgentEvent) -> None:
        await recorder(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "call-fast":
            fast_update[0](AgentToolResult(content=[TextContent(text="late")]))
            await trio.testing.wait_all_tasks_blocked()
            late_sent_while_slow_running.append(slow_running)
            release_slow.set()

    agent.subscribe(listener)
    await agent.prompt("go")
    assert late_sent_while_slow_running == [True]
    assert recorder.of_type("tool_execution_update") == []
    assert [e.tool_call_id for e in recorder.of_type("tool_execution_end")] == [
        "call-fast",
        "call-slow",
    ]


# ---------------------------------------------------------------------------------------
# 16-22: mutators, queues, abort, busy errors


def test_should_update_state_with_mutators() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    model = FauxProvider().get_model()
    agent.state.model = model
    assert agent.state.model is model
    agent.state.thinking_level = "medium"
    assert agent.state.thinking_level == "medium"
    tools = [make_tool()]
    agent.state.tools = tools
    assert agent.state.tools == tools
    assert agent.state.tools is not tools
    messages: list[Any] = [user("hello")]
    agent.state.messages = messages
    assert agent.state.messages == messages
    assert agent.state.messages is not messages
    pushed = user("pushed")
    agent.state.messages.append(pushed)
    assert agent.state.messages[-1] is pushed
    assert len(agent.state.messages) == 2
    assert len(messages) == 1
    agent.state.messages = []
    assert agent.state.messages == []


def test_should_support_steering_message_queue() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    message = user("steer me")
    agent.steer(message)
    assert agent.state.messages == []
    assert agent.has_queued_messages() is True
    assert agent.peek_queued_messages() == [message]


def test_should_support_follow_up_message_queue() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    message = user("later")
    agent.follow_up(message)
    assert agent.state.messages == []
    assert agent.has_queued_messages() is True
    assert agent.peek_queued_messages() == [message]


def test_should_handle_abort_controller() -> None:
    agent = Agent(stream_fn=FauxProvider().stream_fn)
    agent.abort()
    assert agent.signal is None
    assert agent.state.is_streaming is False


async def test_should_reject_reset_while_processing_without_corrupting_the_transcript() -> None:
    started, release = trio.Event(), trio.Event()
    agent = Agent(stream_fn=gated_stream(started, release))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Hello")
        await started.wait()
        with pytest.raises(AgentBusyError) as info:
            agent.reset()
        assert str(info.value) == _BUSY_RESET
        assert agent.state.is_streaming is True
        assert roles(agent.state.messages) == ["user"]
        release.set()
    assert roles(agent.state.messages) == ["user", "assistant"]


async def test_should_throw_when_prompt_called_while_streaming() -> None:
    started, release = trio.Event(), trio.Event()
    agent = Agent(stream_fn=gated_stream(started, release))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Hello")
        await started.wait()
        with pytest.raises(AgentBusyError) as info:
            await agent.prompt("again")
        assert str(info.value) == _BUSY_PROMPT
        release.set()
    assert roles(agent.state.messages) == ["user", "assistant"]


async def test_should_throw_when_continue_called_while_streaming() -> None:
    started, release = trio.Event(), trio.Event()
    agent = Agent(stream_fn=gated_stream(started, release))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Hello")
        await started.wait()
        with pytest.raises(AgentBusyError) as info:
            await agent.continue_()
        assert str(info.value) == _BUSY_CONTINUE
        release.set()
    assert roles(agent.state.messages) == ["user", "assistant"]


# ---------------------------------------------------------------------------------------
# 23-35: continuation, hooks, queues, forwarded options


async def test_continue_should_process_queued_follow_up_messages_after_an_assistant_turn() -> None:
    requests = Requests(text_reply("answer to follow-up"))
    agent = requests.agent(
        initial_state=AgentInitialState(
            model=requests.model, messages=[user("Initial"), assistant_tail()]
        )
    )
    follow = user("follow-up")
    agent.follow_up(follow)
    await agent.continue_()
    assert follow in agent.state.messages
    assert agent.state.messages[2] is follow
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert content_text(last.content) == "answer to follow-up"
    assert agent.has_queued_messages() is False


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_continue_keeps_mode_steering_semantics_for_assistant_tail_fallback(
    mode: QueueMode,
) -> None:
    requests = Requests(text_reply("a1"), text_reply("a2"))
    agent = requests.agent(
        initial_state=AgentInitialState(
            model=requests.model, messages=[user("Initial"), assistant_tail()]
        ),
        steering_mode=mode,
    )
    agent.steer(user("Steering 1"))
    agent.steer(user("Steering 2"))
    await agent.continue_()
    new_roles = roles(agent.state.messages[2:])
    if mode == "one-at-a-time":
        assert len(requests.contexts) == 2
        assert "Steering 1" in requests.text(0)
        assert "Steering 2" not in requests.text(0)
        assert "Steering 2" in requests.text(1)
        assert new_roles == ["user", "assistant", "user", "assistant"]
    else:
        assert len(requests.contexts) == 1
        assert "Steering 1" in requests.text(0)
        assert "Steering 2" in requests.text(0)
        assert new_roles == ["user", "user", "assistant"]
    assert agent.has_queued_messages() is False


async def test_keeps_legacy_prepare_next_turn_signal_callback_behavior() -> None:
    calls: list[tuple[Any, ...]] = []

    def prepare_next_turn(*args: Any) -> None:
        calls.append(args)

    requests = Requests(tool_reply(("echo", "call-1", "x")), text_reply())
    agent = requests.agent(
        initial_state=AgentInitialState(model=requests.model, tools=[make_tool()]),
        prepare_next_turn=prepare_next_turn,
    )
    await agent.prompt("go")
    assert len(requests.contexts) == 2
    assert len(calls) == 1
    assert len(calls[0]) == 1
    assert isinstance(calls[0][0], AbortSignal)
    assert calls[0][0].aborted is False


async def test_forwards_finish_turn_through_agent_options_with_the_active_abort_signal() -> None:
    seen: list[tuple[list[str], AbortSignal | None]] = []

    def finish_turn(turn: AgentTurnContext, signal: AbortSignal | None) -> AgentTurnDecision:
        seen.append((roles(turn.context.messages), signal))
        return AgentTurnDecision(action="end")

    requests = Requests(tool_reply(("echo", "call-1", "x")), text_reply())
    agent = requests.agent(
        initial_state=AgentInitialState(model=requests.model, tools=[make_tool()]),
        finish_turn=finish_turn,
    )
    await agent.prompt("go")
    assert len(requests.contexts) == 1
    assert len(seen) == 1
    assert seen[0][0] == ["system", "user", "assistant", "toolResult"]
    assert isinstance(seen[0][1], AbortSignal)
    assert roles(agent.state.messages) == ["system", "user", "assistant", "toolResult"]


@pytest.mark.parametrize("name", ["empty", "system-only"])
async def test_rejects_a_queued_continuation_from_name_context_without_draining_queues(
    name: str,
) -> None:
    requests = Requests(text_reply())
    messages: list[Any] = [] if name == "empty" else [SystemMessage(content="sys", timestamp=1)]
    agent = requests.agent(initial_state=AgentInitialState(model=requests.model, messages=messages))
    steering, follow = user("steering"), user("follow-up")
    agent.steer(steering)
    agent.follow_up(follow)
    with pytest.raises(NothingToContinueError) as info:
        await agent.continue_()
    assert str(info.value) == "No messages to continue from"
    assert agent.peek_queued_messages() == [steering]
    agent.clear_steering_queue()
    assert agent.peek_queued_messages() == [follow]
    assert requests.contexts == []


def _tail(name: str) -> list[Any]:
    if name == "user":
        return [user("start")]
    return [
        user("start"),
        tool_reply(("echo", "call-1", "x")),
        ToolResultMessage(
            tool_call_id="call-1",
            tool_name="echo",
            content=[TextContent(text="echo: x")],
            timestamp=2,
        ),
    ]


@pytest.mark.parametrize("name", ["user", "tool-result"])
async def test_defers_follow_up_input_on_the_first_continuation_request_from_a_name_tail(
    name: str,
) -> None:
    requests = Requests(text_reply("a1"), text_reply("a2"))
    agent = requests.agent(
        initial_state=AgentInitialState(
            model=requests.model, tools=[make_tool()], messages=_tail(name)
        )
    )
    agent.follow_up(user("follow-up"))
    await agent.continue_()
    assert len(requests.contexts) == 2
    assert "follow-up" not in requests.text(0)
    assert "follow-up" in requests.text(1)


@pytest.mark.parametrize("mode", ["one-at-a-time", "all"])
async def test_polls_mode_steering_at_continuation_startup(mode: QueueMode) -> None:
    requests = Requests(text_reply("a1"), text_reply("a2"))
    agent = requests.agent(
        initial_state=AgentInitialState(model=requests.model, messages=[user("start")]),
        steering_mode=mode,
    )
    agent.steer(user("first"))
    agent.steer(user("second"))
    await agent.continue_()
    if mode == "one-at-a-time":
        assert len(requests.contexts) == 2
        assert "first" in requests.text(0)
        assert "second" not in requests.text(0)
        assert "second" in requests.text(1)
    else:
        assert len(requests.contexts) == 1
        assert "first" in requests.text(0)
        assert "second" in requests.text(0)


async def test_keeps_steering_ahead_of_follow_up_from_a_non_assistant_continuation_tail() -> None:
    requests = Requests(text_reply("a1"), text_reply("a2"))
    agent = requests.agent(
        initial_state=AgentInitialState(model=requests.model, messages=[user("start")])
    )
    agent.follow_up(user("follow-up"))
    agent.steer(user("steering"))
    await agent.continue_()
    assert len(requests.contexts) == 2
    assert "steering" in requests.text(0)
    assert "follow-up" not in requests.text(0)
    assert "follow-up" in requests.text(1)


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
async def test_keeps_queues_on_a_s_response_even_when_finish_turn_requests_continuation(
    stop_reason: Literal["error", "aborted"],
) -> None:
    requests = Requests(
        faux_assistant_message("", stop_reason=stop_reason, error_message=f"{stop_reason}!"),
        text_reply("never requested"),
    )
    finish_calls: list[AgentTurnContext] = []

    def finish_turn(turn: AgentTurnContext, signal: AbortSignal | None) -> AgentTurnDecision:
        finish_calls.append(turn)
        return AgentTurnDecision(action="continue")

    agent = requests.agent(finish_turn=finish_turn)
    steering, follow = user("steering"), user("follow-up")
    agent.follow_up(follow)

    def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            agent.steer(steering)

    agent.subscribe(listener)
    await agent.prompt("go")
    assert len(requests.contexts) == 1
    assert len(finish_calls) == 1
    assert agent.state.error_message == f"{stop_reason}!"
    assert agent.peek_queued_messages() == [steering]
    agent.clear_steering_queue()
    assert agent.peek_queued_messages() == [follow]


async def test_keeps_queues_when_finish_turn_ends_the_run() -> None:
    requests = Requests(text_reply("done"), text_reply("never requested"))
    agent = requests.agent(finish_turn=lambda turn, signal: AgentTurnDecision(action="end"))
    steering, follow = user("steering"), user("follow-up")
    agent.follow_up(follow)

    def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            agent.steer(steering)

    agent.subscribe(listener)
    await agent.prompt("go")
    assert len(requests.contexts) == 1
    assert agent.peek_queued_messages() == [steering]
    agent.clear_steering_queue()
    assert agent.peek_queued_messages() == [follow]
    agent.clear_follow_up_queue()
    assert agent.has_queued_messages() is False


def test_previews_the_next_selected_queued_messages_without_consuming_them() -> None:
    agent = Agent(
        stream_fn=FauxProvider().stream_fn, steering_mode="one-at-a-time", follow_up_mode="all"
    )
    first, second, follow = user("first"), user("second"), user("follow-up")
    agent.steer(first)
    agent.steer(second)
    agent.follow_up(follow)
    assert agent.peek_queued_messages() == [first]
    assert agent.peek_queued_messages() == [first]
    agent.steering_mode = "all"
    assert agent.peek_queued_messages() == [first, second]
    agent.clear_steering_queue()
    assert agent.peek_queued_messages() == [follow]
    agent.clear_all_queues()
    assert agent.peek_queued_messages() == []
    assert agent.has_queued_messages() is False


async def test_forwards_provider_stream_event_observers_through_agent_options() -> None:
    observed: list[Any] = []
    faux = FauxProvider([text_reply()])

    async def stream(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        assert options.on_provider_stream_event is not None
        options.on_provider_stream_event({"request_cost": 0.01}, model)
        async with aclosing(faux.stream_fn(model, context, options)) as events:
            async for event in events:
                yield event

    agent = Agent(
        initial_state=AgentInitialState(model=faux.get_model()),
        stream_fn=stream,
        on_provider_stream_event=lambda event, model: observed.append(event),
    )
    await agent.prompt("Hello")
    assert observed == [{"request_cost": 0.01}]


async def test_forwards_session_id_to_stream_function_options() -> None:
    requests = Requests(text_reply("1"), text_reply("2"))
    agent = requests.agent(session_id="session-abc")
    assert agent.session_id == "session-abc"
    await agent.prompt("one")
    agent.session_id = "session-def"
    await agent.prompt("two")
    assert [o.session_id for o in requests.options] == ["session-abc", "session-def"]
