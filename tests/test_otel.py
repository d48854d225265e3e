"""OpenTelemetry tracing (``trio_agent.otel``) against the real SDK and its in-memory
exporter: span tree, GenAI attributes, content capture, and closing on abort, failure and
outer cancellation."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import trio_agent
from trio_agent import (
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    DoneEvent,
    ImageContent,
    Model,
    RetryNotice,
    StartEvent,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
)
from trio_agent.models import FauxProvider, faux_assistant_message, faux_tool_call
from trio_agent.otel import AgentTracer, instrument_agent
from trio_agent.testing import faux_http_error


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


def tree(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, str]]:
    """The spans as ``(depth, name)`` in start order, depth-first (the ended ones only)."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans if span.context is not None}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        children = sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0)
        for child in children:
            out.append((depth, child.name))
            assert child.context is not None
            walk(child.context.span_id, depth + 1)

    walk(None, 0)
    return out


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = named(spans, name)
    return span


def attrs_of(span: ReadableSpan) -> dict[str, Any]:
    return {key: value for key, value in (span.attributes or {}).items()}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    value: int = span.context.span_id
    return value


def assistant_messages(agent: Agent) -> list[AssistantMessage]:
    return [m for m in agent.state.messages if isinstance(m, AssistantMessage)]


def input_tokens(usage: Usage) -> int:
    return usage.input + usage.cache_read + usage.cache_write


async def test_a_text_run_is_a_run_a_turn_and_a_chat(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    model = Model(
        id="faux-1", name="Faux", api="faux", provider="faux", base_url="https://llm.test/v1"
    )
    provider = FauxProvider(
        [faux_assistant_message("Hello!", response_id="resp-1")], models=[model]
    )
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    agent.session_id = "session-7"
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hi")

    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "turn"), (2, "chat faux-1")]
    run, turn, chat = one(spans, "invoke_agent"), one(spans, "turn"), one(spans, "chat faux-1")
    [answer] = assistant_messages(agent)
    usage = answer.usage
    # The faux provider reports the prompt as written to its cache (input counts it too).
    assert usage.cache_write > 0 and usage.output > 0 and usage.cache_read == 0
    assert run.kind is SpanKind.INTERNAL
    assert attrs_of(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "gen_ai.conversation.id": "session-7",
        "gen_ai.usage.input_tokens": input_tokens(usage),
        "gen_ai.usage.output_tokens": usage.output,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
    }
    assert turn.kind is SpanKind.INTERNAL
    assert attrs_of(turn) == {"trio_agent.turn.number": 1}
    assert chat.kind is SpanKind.CLIENT
    assert attrs_of(chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "faux",
        "gen_ai.request.model": "faux-1",
        "server.address": "llm.test",
        "server.port": 443,
        "gen_ai.conversation.id": "session-7",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.model": "faux-1",
        "gen_ai.response.id": "resp-1",
        "gen_ai.usage.input_tokens": input_tokens(usage),
        "gen_ai.usage.output_tokens": usage.output,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
    }
    for span in spans:
        assert span.status.status_code is StatusCode.UNSET
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "trio_agent"
        assert span.instrumentation_scope.version == trio_agent.__version__
    assert run.start_time is not None and turn.start_time is not None
    assert chat.start_time is not None and chat.end_time is not None
    assert run.end_time is not None and turn.end_time is not None
    assert run.start_time <= turn.start_time <= chat.start_time <= chat.end_time
    assert chat.end_time <= turn.end_time <= run.end_time


async def test_parallel_tools_are_siblings_under_their_turn(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider, autojump_clock: Any
) -> None:
    finished: list[float] = []

    @trio_agent.tool
    async def wait(seconds: float) -> str:
        """Wait a while."""
        await trio.sleep(seconds)
        finished.append(seconds)
        return f"waited {seconds}"

    provider = FauxProvider(
        [
            faux_assistant_message(
                [
                    faux_tool_call("wait", {"seconds": 2}, id="call-slow"),
                    faux_tool_call("wait", {"seconds": 1}, id="call-fast"),
                ],
                stop_reason="toolUse",
            ),
            faux_assistant_message("Both done."),
        ]
    )
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[wait]),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Wait twice")

    spans = exporter.get_finished_spans()
    assert finished == [1, 2]  # the calls overlapped
    assert tree(spans) == [
        (0, "invoke_agent"),
        (1, "turn"),
        (2, "chat faux-1"),
        (2, "execute_tool wait"),
        (2, "execute_tool wait"),
        (1, "turn"),
        (2, "chat faux-1"),
    ]
    first_turn = min(named(spans, "turn"), key=lambda s: s.start_time or 0)
    slow, fast = sorted(
        named(spans, "execute_tool wait"), key=lambda s: attrs_of(s)["gen_ai.tool.call.id"]
    )[::-1]
    assert parent_of(slow) == parent_of(fast) == span_id(first_turn)
    # The fast call ended (and was exported) first although it started second.
    assert [s.name for s in spans].index("execute_tool wait") == spans.index(fast)
    assert slow.start_time is not None and fast.start_time is not None
    assert slow.start_time <= fast.start_time
    assert attrs_of(slow) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "wait",
        "gen_ai.tool.call.id": "call-slow",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Wait a while.",
    }
    assert attrs_of(fast)["gen_ai.tool.call.id"] == "call-fast"
    assert [attrs_of(s)["trio_agent.turn.number"] for s in named(spans, "turn")] == [1, 2]
    chats = sorted(named(spans, "chat faux-1"), key=lambda s: s.start_time or 0)
    assert [attrs_of(c)["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_call",),
        ("stop",),
    ]
    run = one(spans, "invoke_agent")
    answers = assistant_messages(agent)
    assert attrs_of(run)["gen_ai.usage.output_tokens"] == sum(m.usage.output for m in answers)
    assert attrs_of(run)["gen_ai.usage.input_tokens"] == sum(input_tokens(m.usage) for m in answers)
    assert all(span.status.status_code is StatusCode.UNSET for span in spans)


async def test_content_is_recorded_only_when_asked(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    @trio_agent.tool
    async def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    provider = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("shout", {"text": "hey"}, id="c1")], stop_reason="toolUse"
            ),
            faux_assistant_message("HEY it is."),
        ]
    )
    agent = Agent(
        AgentInitialState(system_prompt="Be loud.", model=provider.get_model(), tools=[shout]),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent, tracer_provider=tracer_provider, capture_content=True)
    image = ImageContent(data="aGk=", mime_type="image/png")
    await agent.prompt("Shout hey", images=[image])

    spans = exporter.get_finished_spans()
    chats = sorted(named(spans, "chat faux-1"), key=lambda s: s.start_time or 0)
    first, second = (attrs_of(chat) for chat in chats)
    user = {
        "role": "user",
        "parts": [
            {"type": "text", "content": "Shout hey"},
            {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "aGk="},
        ],
    }
    call = {"type": "tool_call", "id": "c1", "name": "shout", "arguments": {"text": "hey"}}
    assert json.loads(first["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be loud."}
    ]
    assert json.loads(first["gen_ai.input.messages"]) == [user]
    assert json.loads(first["gen_ai.output.messages"]) == [
        {"role": "assistant", "parts": [call], "finish_reason": "tool_call"}
    ]
    assert json.loads(second["gen_ai.input.messages"]) == [
        user,
        {"role": "assistant", "parts": [call]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "HEY"}]},
    ]
    assert json.loads(second["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "HEY it is."}],
            "finish_reason": "stop",
        }
    ]
    tool = attrs_of(one(spans, "execute_tool shout"))
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"text": "hey"}
    assert json.loads(tool["gen_ai.tool.call.result"]) == [{"type": "text", "content": "HEY"}]

    # Without capture_content, none of these attributes exist.
    exporter.clear()
    provider.append_responses([faux_assistant_message("Quiet.")])
    agent2 = Agent(
        AgentInitialState(system_prompt="Be loud.", model=provider.get_model()),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent2, tracer_provider=tracer_provider)
    await agent2.prompt("Hi")
    content_keys = {
        "gen_ai.system_instructions",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    for span in exporter.get_finished_spans():
        assert not content_keys & set(attrs_of(span)), span.name


async def test_a_failed_request_marks_chat_turn_and_run(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    provider = FauxProvider(
        [faux_assistant_message("", stop_reason="error", error_message="upstream 500")]
    )
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hi")

    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "turn"), (2, "chat faux-1")]
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert span.status.description == "upstream 500"
        assert attrs_of(span)["error.type"] == "error"
    assert attrs_of(one(spans, "chat faux-1"))["gen_ai.response.finish_reasons"] == ("error",)


async def test_abort_during_a_tool_closes_every_span(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider, autojump_clock: Any
) -> None:
    agent: Agent

    @trio_agent.tool
    async def hang() -> str:
        """Never returns."""
        agent.abort()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    provider = FauxProvider(
        [faux_assistant_message([faux_tool_call("hang", {}, id="h1")], stop_reason="toolUse")]
    )
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[hang]),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hang")

    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        (0, "invoke_agent"),
        (1, "turn"),
        (2, "chat faux-1"),
        (2, "execute_tool hang"),
    ]
    assert one(spans, "chat faux-1").status.status_code is StatusCode.UNSET
    for name in ("execute_tool hang", "turn", "invoke_agent"):
        span = one(spans, name)
        assert span.status.status_code is StatusCode.ERROR, name
        assert attrs_of(span)["error.type"] == "aborted"


async def test_abort_during_the_request(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider, autojump_clock: Any
) -> None:
    provider = FauxProvider([faux_assistant_message("A long answer " * 20)], tokens_per_second=5)
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    instrument_agent(agent, tracer_provider=tracer_provider)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "Talk")
        await trio.sleep(2)
        agent.abort()

    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "turn"), (2, "chat faux-1")]
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert attrs_of(span)["error.type"] == "aborted"
    assert attrs_of(one(spans, "chat faux-1"))["gen_ai.response.finish_reasons"] == ("aborted",)


async def test_outer_cancellation_closes_every_span(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider, autojump_clock: Any
) -> None:
    @trio_agent.tool
    async def hang() -> str:
        """Never returns."""
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    provider = FauxProvider(
        [
            faux_assistant_message(
                [faux_tool_call("hang", {}, id="h1"), faux_tool_call("hang", {}, id="h2")],
                stop_reason="toolUse",
            )
        ]
    )
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[hang]),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent, tracer_provider=tracer_provider)
    with trio.move_on_after(10) as scope:
        await agent.prompt("Hang")
    assert scope.cancelled_caught

    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        (0, "invoke_agent"),
        (1, "turn"),
        (2, "chat faux-1"),
        (2, "execute_tool hang"),
        (2, "execute_tool hang"),
    ]
    for span in named(spans, "execute_tool hang"):
        assert span.status.status_code is StatusCode.ERROR
        assert attrs_of(span)["error.type"] == "aborted"
    assert one(spans, "invoke_agent").status.status_code is StatusCode.ERROR


async def test_the_run_span_is_a_child_of_the_callers_span(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    provider = FauxProvider([faux_assistant_message("One."), faux_assistant_message("Two.")])
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    instrument_agent(agent, tracer_provider=tracer_provider, agent_name="Helper")
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("request"):
        await agent.prompt("Once")
    await agent.prompt("Twice")

    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        (0, "request"),
        (1, "invoke_agent Helper"),
        (2, "turn"),
        (3, "chat faux-1"),
        (0, "invoke_agent Helper"),
        (1, "turn"),
        (2, "chat faux-1"),
    ]
    runs = named(spans, "invoke_agent Helper")
    assert all(attrs_of(run)["gen_ai.agent.name"] == "Helper" for run in runs)
    assert runs[0].context is not None and runs[1].context is not None
    assert runs[0].context.trace_id != runs[1].context.trace_id


async def test_a_bare_listener_and_unsubscribing(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    provider = FauxProvider([faux_assistant_message("Hi there."), faux_assistant_message("x")])
    agent = Agent(AgentInitialState(model=provider.get_model()), stream_fn=provider.stream_fn)
    tracer = AgentTracer(tracer_provider=tracer_provider, capture_content=True)
    unsubscribe = agent.subscribe(tracer)
    await agent.prompt([UserMessage(content="Hello"), UserMessage(content="again")])

    spans = exporter.get_finished_spans()
    run = attrs_of(one(spans, "invoke_agent"))
    # Without the agent, the model is learned from the response.
    assert run["gen_ai.provider.name"] == "faux"
    assert run["gen_ai.request.model"] == "faux-1"
    assert "gen_ai.conversation.id" not in run
    chat = attrs_of(one(spans, "chat faux-1"))
    assert json.loads(chat["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Hello"}]},
        {"role": "user", "parts": [{"type": "text", "content": "again"}]},
    ]

    unsubscribe()
    exporter.clear()
    await agent.prompt("Again")
    assert exporter.get_finished_spans() == ()


def test_events_outside_a_run_are_ignored(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    # A tracer subscribed in the middle of a run starts with the next run; called with
    # the event alone (no signal), it works too.
    tracer = AgentTracer(tracer_provider=tracer_provider)
    message = AssistantMessage(
        content=[ToolCall(id="x", name="y", arguments={})], api="a", provider="p", model="m"
    )
    tracer(trio_agent.MessageEndEvent(message=message))
    tracer(trio_agent.TurnEndEvent(message=message, tool_results=[]))
    tracer(trio_agent.AgentEndEvent(messages=[]))
    assert exporter.get_finished_spans() == ()

    controller = trio_agent.AbortController()
    tracer(trio_agent.AgentStartEvent(), controller.signal)
    tracer(trio_agent.TurnStartEvent(), controller.signal)
    controller.abort()
    tracer(trio_agent.AgentEndEvent(messages=[]), controller.signal)  # the turn never ended
    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "turn")]
    assert attrs_of(one(spans, "invoke_agent")) == {
        "gen_ai.operation.name": "invoke_agent",
        "error.type": "aborted",
    }


def test_instrument_agent_names_a_wrong_agent() -> None:
    with pytest.raises(TypeError) as caught:
        instrument_agent("agent")  # type: ignore[arg-type]  # the error under test
    assert str(caught.value) == "instrument_agent() needs an Agent, got 'agent'"


# -- Telemetry never fails a run (issue 18, item 10) -----------------------------------------


class RaisingProcessor(SpanProcessor):
    """A span processor whose ``on_start`` or ``on_end`` raises for the spans named
    ``failing`` (all when empty), as a broken exporter or sampler might."""

    def __init__(self, where: str, failing: frozenset[str] = frozenset()) -> None:
        self.where = where
        self.failing = failing
        self.calls = 0

    def fail(self, name: str) -> None:
        if not self.failing or name in self.failing:
            self.calls += 1
            raise RuntimeError("exporter down")

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.where == "on_start":
            self.fail(span.name)

    def on_end(self, span: ReadableSpan) -> None:
        if self.where == "on_end":
            self.fail(span.name)


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        # A span that cannot start is left out; its children go under its parent.
        (
            RaisingProcessor("on_start", frozenset({"turn"})),
            [
                (0, "invoke_agent"),
                (1, "chat faux-1"),
                (1, "execute_tool echo"),
                (1, "chat faux-1"),
            ],
        ),
        # Spans whose end fails in a processor still reach the others, and the spans
        # after them are still ended.
        (
            RaisingProcessor("on_end"),
            [
                (0, "invoke_agent"),
                (1, "turn"),
                (2, "chat faux-1"),
                (2, "execute_tool echo"),
                (1, "turn"),
                (2, "chat faux-1"),
            ],
        ),
    ],
    ids=["on_start", "on_end"],
)
async def test_a_failing_span_processor_does_not_fail_the_run(
    broken: RaisingProcessor,
    expected: list[tuple[int, str]],
    exporter: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracer_provider.add_span_processor(broken)
    provider = FauxProvider(
        [
            faux_assistant_message([faux_tool_call("echo", {"text": "x"})], stop_reason="toolUse"),
            faux_assistant_message("Done."),
        ]
    )
    agent = Agent(
        AgentInitialState(model=provider.get_model(), tools=[echo_tool()]),
        stream_fn=provider.stream_fn,
    )
    instrument_agent(agent, tracer_provider=tracer_provider)
    with caplog.at_level(logging.WARNING, logger="trio_agent.otel"):
        await agent.prompt("Hi")

    [*_, last] = assistant_messages(agent)
    assert (last.stop_reason, last.error_message) == ("stop", None)
    assert agent.state.error_message is None
    assert tree(exporter.get_finished_spans()) == expected
    # Each failure is logged once, with its traceback, and nothing else is.
    assert broken.calls == (2 if broken.where == "on_start" else 6)  # two turns; six spans
    assert [record.getMessage() for record in caplog.records] == [
        "tracing failed (the run goes on): RuntimeError: exporter down"
    ] * broken.calls
    assert all(record.levelno == logging.WARNING for record in caplog.records)
    assert all(record.exc_info is not None for record in caplog.records)


def echo_tool() -> AgentTool:
    async def execute(
        tool_call_id: str, params: dict[str, Any], signal: Any, on_update: Any
    ) -> AgentToolResult:
        return AgentToolResult(content=[TextContent(text=params["text"])])

    return AgentTool(
        name="echo",
        label="Echo",
        description="Echo the text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=execute,
    )


# -- Request attributes, retries and missing usage (issue 19, "Traces") --------------------


async def test_temperature_and_max_tokens_set_on_the_agent_are_recorded(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    provider = FauxProvider([faux_assistant_message("Hi"), faux_assistant_message("Again")])
    agent = Agent(
        AgentInitialState(model=provider.get_model()),
        stream_fn=provider.stream_fn,
        temperature=0.2,
        max_tokens=256,
    )
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hi")
    for span in exporter.get_finished_spans():
        if span.name in ("invoke_agent", "chat faux-1"):
            attributes = attrs_of(span)
            assert attributes["gen_ai.request.temperature"] == 0.2, span.name
            assert attributes["gen_ai.request.max_tokens"] == 256, span.name

    # Unset, they are left out (the provider's defaults are not known here).
    exporter.clear()
    agent.temperature = None
    agent.max_tokens = None
    await agent.prompt("Again")
    for span in exporter.get_finished_spans():
        assert "gen_ai.request.temperature" not in attrs_of(span), span.name
        assert "gen_ai.request.max_tokens" not in attrs_of(span), span.name


async def test_a_response_without_usage_records_no_token_counts(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    model = FauxProvider([]).get_model()

    async def stream_fn(model: Model, context: Any, options: Any) -> Any:
        message = AssistantMessage(
            content=[TextContent(text="no usage here")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            usage=Usage(),
            stop_reason="stop",
        )
        yield StartEvent(partial=message)
        yield DoneEvent(reason="stop", message=message)

    agent = Agent(AgentInitialState(model=model), stream_fn=stream_fn)
    instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hi")
    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "turn"), (2, "chat faux-1")]
    for span in spans:
        assert not {key for key in attrs_of(span) if key.startswith("gen_ai.usage.")}, span.name


async def test_retries_are_events_of_the_request_span(
    exporter: InMemorySpanExporter, tracer_provider: TracerProvider, autojump_clock: Any
) -> None:
    # The faux provider's HTTP errors go through the providers' real retry loop, which
    # tells the agent's on_retry (instrument_agent chains it) before each retry.
    provider = FauxProvider(
        [
            faux_http_error(
                429, '{"error": {"message": "slow down"}}', headers={"retry-after": "2"}
            ),
            faux_http_error(503),
            faux_assistant_message("Hi"),
        ]
    )
    told: list[RetryNotice] = []
    agent = Agent(
        AgentInitialState(model=provider.get_model()),
        stream_fn=provider.stream_fn,
        max_retries=2,
        on_retry=lambda notice, model: told.append(notice),
    )
    uninstrument = instrument_agent(agent, tracer_provider=tracer_provider)
    await agent.prompt("Hi")
    chat = one(exporter.get_finished_spans(), "chat faux-1")
    events = [(event.name, dict(event.attributes or {})) for event in chat.events]
    assert events[0] == (
        "trio_agent.retry",
        {
            "http.request.resend_count": 1,
            "trio_agent.retry.wait_s": 2.0,
            "http.response.status_code": 429,
        },
    )
    assert events[1][1]["http.response.status_code"] == 503
    assert [(n.status, n.attempt) for n in told] == [(429, 2), (503, 3)]  # still told
    assert chat.start_time is not None
    assert all(chat.start_time <= event.timestamp for event in chat.events)
    uninstrument()
    assert agent.on_retry is not None and agent.on_retry.__name__ == "<lambda>"
