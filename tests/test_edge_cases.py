"""Edge cases of aborts, failures and hooks that edit the live context."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import (
    AbortController,
    AbortSignal,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentLoopTurnUpdate,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AgentTurnContext,
    AssistantMessage,
    AssistantMessageEvent,
    LlmContext,
    Model,
    PrepareRequestContext,
    StreamOptions,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TurnEndEvent,
    UserMessage,
    content_text,
    get_current_tools,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call
from trio_agent.testing import assert_event_grammar


async def _noop(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text="ok")])


NOOP = AgentTool(
    name="noop",
    label="noop",
    description="does nothing",
    parameters={"type": "object", "properties": {}},
    execute=_noop,
)


async def test_a_stream_that_honours_the_abort_itself_gets_its_tool_calls_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The faux provider ends the stream in-band (stop_reason "aborted") when the signal is
    # aborted between chunks; the streamed tool call must still get exactly one result.
    faux = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("noop", {}, id="a"), faux_tool_call("noop", {}, id="b")],
                stop_reason="toolUse",
            )
        ]
    )
    controller = AbortController()
    events: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        events.append(event)
        if event.type == "message_update" and event.assistant_message_event.type == "toolcall_end":
            controller.abort()

    messages = await run_agent_loop(
        [UserMessage(content="hi")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=faux.get_model()),
        emit,
        signal=controller.signal,
        stream_fn=faux.stream_fn,
    )
    assert_event_grammar(events)
    calls = [
        block.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for block in m.content
        if isinstance(block, ToolCall)
    ]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == calls == ["a"]
    assert results[0].content == [TextContent(text="Operation aborted")]
    assert events[-2].type == "turn_end"
    turn_end = events[-2]
    assert isinstance(turn_end, TurnEndEvent)
    assert [r.tool_call_id for r in turn_end.tool_results] == ["a"]


async def test_prepare_request_edits_to_the_live_context_reach_the_provider() -> None:
    faux = FauxProvider(
        [
            faux_assistant_message([faux_tool_call("noop", {}, id="a")], stop_reason="toolUse"),
            faux_assistant_message("done"),
        ]
    )
    seen: list[list[str]] = []

    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        seen.append([content_text(m.content) for m in context.messages if m.role == "user"])
        async with aclosing(faux.stream_fn(model, context, options)) as inner:
            async for event in inner:
                yield event

    requests = 0

    def prepare_request(request: PrepareRequestContext, signal: AbortSignal | None) -> None:
        nonlocal requests
        requests += 1
        if requests == 2:  # redact in place, in the live context
            messages = request.context.messages
            for index, message in enumerate(messages):
                if isinstance(message, UserMessage) and message.content == "my password is hunter2":
                    messages[index] = UserMessage(content="[redacted]")

    async def emit(event: AgentEvent) -> None:
        pass

    await run_agent_loop(
        [UserMessage(content="my password is hunter2"), UserMessage(content="please help")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=faux.get_model(), prepare_request=prepare_request),
        emit,
        stream_fn=stream_fn,
    )
    assert seen == [["my password is hunter2", "please help"], ["[redacted]", "please help"]]


async def test_tools_are_redeclared_after_a_hook_rewrites_the_system_message() -> None:
    faux = FauxProvider(
        [
            faux_assistant_message([faux_tool_call("noop", {}, id="a")], stop_reason="toolUse"),
            faux_assistant_message("done"),
        ]
    )
    declared: list[list[str]] = []

    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        declared.append([tool.name for tool in get_current_tools(context.messages)])
        async with aclosing(faux.stream_fn(model, context, options)) as inner:
            async for event in inner:
                yield event

    def prepare_next_turn(turn: AgentTurnContext) -> AgentLoopTurnUpdate | None:
        messages = turn.context.messages
        for index, message in enumerate(messages):
            if isinstance(message, SystemMessage):
                messages[index] = SystemMessage(content="replaced", timestamp=0)
        return None

    async def emit(event: AgentEvent) -> None:
        pass

    await run_agent_loop(
        [UserMessage(content="go")],
        AgentContext(messages=[], tools=[NOOP]),
        AgentLoopConfig(model=faux.get_model(), prepare_next_turn=prepare_next_turn),
        emit,
        stream_fn=stream_fn,
    )
    assert declared == [["noop"], ["noop"]]


async def test_an_abort_in_continue_prompt_batch_restores_undelivered_steering() -> None:
    faux = FauxProvider([faux_assistant_message(f"r{i}") for i in range(3)])
    agent = Agent(
        AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn, steering_mode="all"
    )
    await agent.prompt("hello")
    first, second = UserMessage(content="steer-1"), UserMessage(content="steer-2")

    def listener(event: AgentEvent) -> None:
        if event.type == "message_end" and event.message is first:
            agent.abort()

    agent.subscribe(listener)
    agent.steer(first)
    agent.steer(second)
    await agent.continue_()
    users = [m for m in agent.state.messages if m.role == "user"]
    assert [content_text(m.content) for m in users if isinstance(m, UserMessage)] == [
        "hello",
        "steer-1",
    ]
    assert agent.peek_queued_messages() == [second]
    assert faux.state.call_count == 1


async def test_a_listener_failure_on_an_update_is_reported_at_once() -> None:
    """The update's listener error reaches the loop before the next event (the stream's
    own later failure never happens: the stream is closed first)."""
    faux = FauxProvider([faux_assistant_message("hello world, this is long")])

    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        count = 0
        async with aclosing(faux.stream_fn(model, context, options)) as inner:
            async for event in inner:
                yield event
                count += 1
                if count == 3:
                    raise RuntimeError("stream broke")

    agent = Agent(AgentInitialState(model=faux.get_model()), stream_fn=stream_fn)
    events: list[AgentEvent] = []

    def listener(event: AgentEvent) -> None:
        events.append(event)
        if event.type == "message_update":
            raise ValueError("listener failed on update")

    agent.subscribe(listener)
    await agent.prompt("hi")
    assert_event_grammar(events)
    assert [e.type for e in events][-3:] == ["message_end", "turn_end", "agent_end"]
    last = agent.state.messages[-1]
    assert last.role == "assistant"
    assert agent.state.error_message == "listener failed on update"
    assert [e.type for e in events].count("message_update") == 1
    assert agent.state.is_streaming is False


async def test_bad_input_is_rejected_naming_the_value() -> None:
    faux = FauxProvider([faux_assistant_message("never")])
    agent = Agent(AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    expected = (
        "expected a message (SystemMessage, UserMessage, AssistantMessage, ToolResultMessage "
        "or a class registered with register_message_type), got "
    )
    with pytest.raises(TypeError, match=re.escape(f"prompt(): {expected}42")):
        await agent.prompt(42)  # type: ignore[call-overload]  # the point of the test
    bad = {"role": "user", "content": "hi"}
    with pytest.raises(TypeError, match=re.escape(f"prompt(): {expected}{bad!r}")):
        await agent.prompt([bad])  # type: ignore[list-item]  # the point of the test
    with pytest.raises(TypeError, match=re.escape(f"steer(): {expected}'hi'")):
        agent.steer("hi")  # type: ignore[arg-type]  # the point of the test
    with pytest.raises(TypeError, match=re.escape(f"follow_up(): {expected}None")):
        agent.follow_up(None)  # type: ignore[arg-type]  # the point of the test
    with pytest.raises(TypeError, match=r"^prompt\(\): images must be ImageContent, got 'x'$"):
        await agent.prompt("hi", images=["x"])  # type: ignore[list-item]  # the point of the test
    assert agent.state.messages == []
    assert not agent.has_queued_messages()
    assert faux.state.call_count == 0


def test_bad_options_and_listeners_are_rejected_naming_the_value() -> None:
    faux = FauxProvider()
    model = faux.get_model()
    with pytest.raises(ValueError, match=r"^queue mode must be 'all' or 'one-at-a-time', not 'x'$"):
        Agent(AgentInitialState(model=model), stream_fn=faux.stream_fn, steering_mode="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^tool_execution must be 'sequential' or 'parallel'"):
        Agent(AgentInitialState(model=model), stream_fn=faux.stream_fn, tool_execution="x")  # type: ignore[arg-type]
    agent = Agent(AgentInitialState(model=model), stream_fn=faux.stream_fn)
    with pytest.raises(TypeError, match=r"^listener must be callable, got None$"):
        agent.subscribe(None)  # type: ignore[arg-type]  # the point of the test
    with pytest.raises(TypeError, match=r"must accept \(event\) or \(event, signal\), not 0"):
        agent.subscribe(lambda: None)
    with pytest.raises(TypeError, match=r"must accept \(event\) or \(event, signal\), not 3"):
        agent.subscribe(lambda a, b, c: None)
    with pytest.raises(TypeError, match=r"required keyword-only parameter 'event'"):
        agent.subscribe(lambda *, event: None)
    # Accepted shapes.
    agent.subscribe(lambda event: None)
    agent.subscribe(lambda event, signal: None)
    agent.subscribe(lambda event, signal=None, extra=1: None)
    agent.subscribe(lambda *args: None)


def _listener_shapes() -> list[Any]:
    def one(event): ...  # type: ignore[no-untyped-def]
    def two(event, signal): ...  # type: ignore[no-untyped-def]
    def optional(event, signal=None): ...  # type: ignore[no-untyped-def]
    def three_defaults(event, signal=None, extra=1): ...  # type: ignore[no-untyped-def]
    def three(event, signal, extra): ...  # type: ignore[no-untyped-def]
    def none(): ...  # type: ignore[no-untyped-def]
    def star(*args): ...  # type: ignore[no-untyped-def]
    def one_star(event, *rest): ...  # type: ignore[no-untyped-def]
    def three_star(a, b, c, *rest): ...  # type: ignore[no-untyped-def]
    def positional_only(event, /, signal=None): ...  # type: ignore[no-untyped-def]
    def keyword_only(event, *, flag): ...  # type: ignore[no-untyped-def]
    def keyword_default(event, *, flag=1): ...  # type: ignore[no-untyped-def]
    def star_keyword(event, *rest, flag): ...  # type: ignore[no-untyped-def]
    def keywords(event, **extra): ...  # type: ignore[no-untyped-def]
    async def coroutine(event, signal): ...  # type: ignore[no-untyped-def]

    def relabelled(event): ...  # type: ignore[no-untyped-def]

    relabelled.__signature__ = inspect.signature(two)  # type: ignore[attr-defined]

    @functools.wraps(two)
    def wrapper(*args): ...  # type: ignore[no-untyped-def]

    return [
        one, two, optional, three_defaults, three, none, star, one_star, three_star,
        positional_only, keyword_only, keyword_default, star_keyword, keywords, coroutine,
        relabelled, wrapper, lambda event: None, lambda event, signal=None: None,
    ]  # fmt: skip


def _by_signature(fn: Any) -> bool:
    """What ``subscribe`` decides, read from ``inspect.signature`` alone."""
    parameters = inspect.signature(fn).parameters.values()
    positional = required = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return required <= 2
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional += 1
            required += parameter.default is inspect.Parameter.empty
        elif (
            parameter.kind is inspect.Parameter.KEYWORD_ONLY
            and parameter.default is inspect.Parameter.empty
        ):
            raise TypeError
    if positional == 0 or required > 2:
        raise TypeError
    return positional >= 2


@pytest.mark.parametrize("fn", _listener_shapes(), ids=lambda fn: fn.__name__)
def test_a_plain_function_listener_is_read_as_its_signature_says(fn: Any) -> None:
    try:
        expected: bool | None = _by_signature(fn)
    except TypeError:
        expected = None
    faux = FauxProvider([])
    agent = Agent(AgentInitialState(model=faux.get_model()), stream_fn=faux.stream_fn)
    if expected is None:
        with pytest.raises(TypeError):
            agent.subscribe(fn)
        return
    agent.subscribe(fn)
    (listener,) = agent._listeners
    assert listener.takes_signal is expected
