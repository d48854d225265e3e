from __future__ import annotations

import copy
import json
import math
import re
from contextlib import aclosing
from typing import Any

import attrs
import pytest
import trio

from trio_agent import (
    AbortController,
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    LlmContext,
    Model,
    ProviderResponse,
    StreamFn,
    StreamOptions,
    SystemMessage,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.models import (
    FauxProvider,
    FauxState,
    faux_assistant_message,
    faux_text,
    faux_thinking,
    faux_tool_call,
)


def user(text: str = "hi") -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def context(*messages: Any) -> LlmContext:
    return LlmContext(messages=list(messages) if messages else [user()])


async def collect(
    faux: FauxProvider,
    ctx: LlmContext | None = None,
    options: StreamOptions | None = None,
    *,
    model: Model | None = None,
) -> list[AssistantMessageEvent]:
    stream = faux.stream_fn(model or faux.get_model(), ctx or context(), options or StreamOptions())
    async with aclosing(stream):
        return [event async for event in stream]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    terminal = events[-1]
    if isinstance(terminal, DoneEvent):
        return terminal.message
    assert isinstance(terminal, ErrorEvent)
    return terminal.error


async def complete(
    faux: FauxProvider,
    ctx: LlmContext | None = None,
    options: StreamOptions | None = None,
    *,
    model: Model | None = None,
) -> AssistantMessage:
    return final(await collect(faux, ctx, options, model=model))


def types(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


# ---------------------------------------------------------------------------------------
# Models and helpers


def test_default_model() -> None:
    faux = FauxProvider()
    assert faux.models == [
        Model(
            id="faux-1",
            name="Faux Model",
            api="faux",
            provider="faux",
            base_url="http://localhost:0",
            reasoning=False,
            input=["text", "image"],
            context_window=128000,
            max_tokens=16384,
        )
    ]
    assert faux.get_model() is faux.models[0]
    assert faux.get_model("faux-1") is faux.models[0]
    assert faux.pending_response_count == 0
    assert faux.state == FauxState(call_count=0)
    assert repr(faux) == (
        "<FauxProvider api='faux' provider='faux' models=['faux-1'] pending=0 calls=0>"
    )


def test_multiple_models_and_unknown_id() -> None:
    custom = Model(
        id="faux-thinker",
        name="Faux Thinker",
        api="other",
        provider="other",
        base_url="http://example.invalid",
        reasoning=True,
    )
    faux = FauxProvider(models=["faux-fast", custom], api="faux:x", provider="fp")
    assert [model.id for model in faux.models] == ["faux-fast", "faux-thinker"]
    assert faux.get_model() is faux.models[0]
    assert faux.get_model("faux-fast").name == "faux-fast"
    assert faux.get_model("faux-fast").reasoning is False
    thinker = faux.get_model("faux-thinker")
    assert thinker == attrs.evolve(custom, api="faux:x", provider="fp")
    with pytest.raises(KeyError, match=r"no faux model with id 'nope'"):
        faux.get_model("nope")


def test_helpers() -> None:
    assert faux_text("a") == TextContent(text="a")
    assert faux_thinking("t") == ThinkingContent(thinking="t")
    call = faux_tool_call("echo", {"x": 1})
    assert re.fullmatch(r"tool:\d{13}:[0-9a-z]+", call.id)
    assert (call.name, call.arguments) == ("echo", {"x": 1})
    assert faux_tool_call("echo", {}, id="t1").id == "t1"
    assert faux_tool_call("a", {}).id != faux_tool_call("a", {}).id

    message = faux_assistant_message("hello")
    assert message.content == [TextContent(text="hello")]
    assert (message.api, message.provider, message.model) == ("faux", "faux", "faux-1")
    assert (message.stop_reason, message.error_message, message.response_id) == (
        "stop",
        None,
        None,
    )
    assert message.usage == Usage()
    assert faux_assistant_message(faux_thinking("t")).content == [ThinkingContent(thinking="t")]
    blocks: list[AssistantContent] = [faux_text("a"), faux_tool_call("b", {}, id="c")]
    message = faux_assistant_message(
        blocks, stop_reason="error", error_message="bad", response_id="r1"
    )
    assert message.content == blocks
    assert message.content is not blocks
    assert (message.stop_reason, message.error_message, message.response_id) == (
        "error",
        "bad",
        "r1",
    )


def test_stream_fn_is_a_stream_fn() -> None:
    faux = FauxProvider()
    stream_fn: StreamFn = faux.stream_fn  # checked by mypy
    assert callable(stream_fn)


# ---------------------------------------------------------------------------------------
# Queue


async def test_queue_order_and_exhaustion() -> None:
    faux = FauxProvider([faux_assistant_message("first"), faux_assistant_message("second")])
    assert faux.pending_response_count == 2
    first = await complete(faux)
    second = await complete(faux)
    events = await collect(faux)

    assert first.content == [TextContent(text="first")]
    assert second.content == [TextContent(text="second")]
    assert types(events) == ["error"]
    exhausted = final(events)
    assert isinstance(events[0], ErrorEvent)
    assert events[0].reason == "error"
    assert exhausted.stop_reason == "error"
    assert exhausted.error_message == "No more faux responses queued"
    assert exhausted.content == []
    assert faux.pending_response_count == 0
    assert faux.state.call_count == 3


async def test_set_and_append_responses() -> None:
    faux = FauxProvider([faux_assistant_message("first")])
    assert (await complete(faux)).content == [TextContent(text="first")]
    assert faux.pending_response_count == 0

    faux.set_responses([faux_assistant_message("second")])
    assert faux.pending_response_count == 1
    assert (await complete(faux)).content == [TextContent(text="second")]

    faux.append_responses([faux_assistant_message("third"), faux_assistant_message("fourth")])
    assert faux.pending_response_count == 2
    faux.set_responses([faux_assistant_message("replaced")])
    faux.append_responses([faux_assistant_message("appended")])
    assert faux.pending_response_count == 2
    assert (await complete(faux)).content == [TextContent(text="replaced")]
    assert (await complete(faux)).content == [TextContent(text="appended")]
    assert faux.pending_response_count == 0
    assert faux.state.call_count == 4


async def test_async_factory_sees_context_and_state() -> None:
    async def factory(
        ctx: LlmContext, options: StreamOptions, state: FauxState, model: Model
    ) -> AssistantMessage:
        await trio.lowlevel.checkpoint()
        return faux_assistant_message(
            f"{len(ctx.messages)}:{state.call_count}:{options.session_id}"
        )

    faux = FauxProvider([factory, factory])
    assert (await complete(faux)).content == [TextContent(text="1:1:None")]
    ctx = context(user("a"), user("b"))
    assert (await complete(faux, ctx, StreamOptions(session_id="s"))).content == [
        TextContent(text="2:2:s")
    ]


async def test_sync_factory_sees_requested_model() -> None:
    def factory(
        ctx: LlmContext, options: StreamOptions, state: FauxState, model: Model
    ) -> AssistantMessage:
        return faux_assistant_message(f"{model.id}:{model.reasoning}")

    faux = FauxProvider(
        [factory, factory],
        models=[
            Model(id="fast", name="Fast", api="", provider="", base_url=""),
            Model(id="thinker", name="Thinker", api="", provider="", base_url="", reasoning=True),
        ],
    )
    fast = await complete(faux, model=faux.get_model("fast"))
    thinker = await complete(faux, model=faux.get_model("thinker"))
    assert fast.content == [TextContent(text="fast:False")]
    assert thinker.content == [TextContent(text="thinker:True")]
    assert (fast.model, thinker.model) == ("fast", "thinker")


async def test_factory_error_is_one_error_event() -> None:
    def factory(
        ctx: LlmContext, options: StreamOptions, state: FauxState, model: Model
    ) -> AssistantMessage:
        raise RuntimeError("boom")

    faux = FauxProvider([factory])
    events = await collect(faux)
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, ErrorEvent)
    assert event.reason == "error"
    assert event.error.stop_reason == "error"
    assert event.error.error_message == "boom"
    assert event.error.content == []
    assert event.error.usage == Usage()
    assert faux.state.call_count == 1


async def test_factory_returning_wrong_type_is_an_error_event() -> None:
    def factory(ctx: LlmContext, options: StreamOptions, state: FauxState, model: Model) -> Any:
        return "not a message"

    events = await collect(FauxProvider([factory]))
    assert types(events) == ["error"]
    assert (
        final(events).error_message == "faux response factory returned str, not an AssistantMessage"
    )


async def test_restamps_api_provider_and_model() -> None:
    scripted = attrs.evolve(
        faux_assistant_message("hello", response_id="resp-1"),
        api="x",
        provider="y",
        model="z",
        timestamp=1234,
    )
    faux = FauxProvider([scripted], api="faux:test", provider="faux-provider", models=["m1"])
    events = await collect(faux)
    message = final(events)
    assert (message.api, message.provider, message.model) == ("faux:test", "faux-provider", "m1")
    assert message.response_id == "resp-1"
    assert message.timestamp == 1234
    for event in events[:-1]:
        assert not isinstance(event, DoneEvent | ErrorEvent)
        partial = event.partial
        assert (partial.api, partial.provider, partial.model) == (
            "faux:test",
            "faux-provider",
            "m1",
        )
        assert partial.stop_reason == "pending"


# ---------------------------------------------------------------------------------------
# Usage estimate


async def test_usage_estimate_from_rendered_prompt() -> None:
    echo = ToolDeclaration(name="echo", description="Echo back text", parameters={"type": "object"})
    ctx = LlmContext(
        messages=[
            SystemMessage(content="sys", tools_added=[echo], timestamp=0),
            UserMessage(
                content=[
                    TextContent(text="hello"),
                    ImageContent(data="abcd", mime_type="image/png"),
                ],
                timestamp=1,
            ),
            faux_assistant_message("prior"),
            ToolResultMessage(
                tool_call_id="tool-1",
                tool_name="echo",
                content=[TextContent(text="tool out")],
                timestamp=2,
            ),
        ]
    )
    faux = FauxProvider([faux_assistant_message("done")])
    message = await complete(faux, ctx)
    prompt = (
        'system:sys\ntool+:{"name":"echo","description":"Echo back text",'
        '"parameters":{"type":"object"}}'
        "\n\nuser:hello\n[image:image/png:4]"
        "\n\nassistant:prior"
        "\n\ntoolResult:echo\ntool out"
    )
    assert len(prompt) == 169
    assert message.usage == Usage(input=43, output=1, cache_read=0, cache_write=0, total_tokens=44)
    assert message.usage.total_tokens == message.usage.input + message.usage.output


async def test_usage_estimate_renders_system_updates_and_assistant_blocks() -> None:
    ctx = LlmContext(
        messages=[
            SystemMessage(content="base", sections={"a": "<a>1</a>"}, timestamp=0),
            user("hi"),
            SystemMessage(
                content="",
                sections={"a": None, "b": "<b>2</b>"},
                tools_removed=[ToolReference(name="first")],
                timestamp=3,
            ),
        ]
    )
    reply = faux_assistant_message(
        [faux_thinking("hmm"), faux_text("ok"), faux_tool_call("f", {"k": "v"}, id="c")],
        stop_reason="toolUse",
    )
    message = await complete(FauxProvider([reply]), ctx)
    prompt = 'system:base\n\n<a>1</a>\n\nuser:hi\n\nsystem:<b>2</b>\ntool-:{"name":"first"}'
    output = 'hmm\nok\nf:{"k":"v"}'
    assert message.usage == Usage(
        input=math.ceil(len(prompt) / 4),
        output=math.ceil(len(output) / 4),
        total_tokens=math.ceil(len(prompt) / 4) + math.ceil(len(output) / 4),
    )
    assert (message.usage.input, message.usage.output) == (18, 5)


async def test_empty_queue_error_carries_the_prompt_estimate() -> None:
    message = await complete(FauxProvider(), context(user("12345678")))
    assert message.usage == Usage(input=4, output=0, total_tokens=4)  # "user:12345678"


async def test_session_prompt_cache_simulation() -> None:
    faux = FauxProvider([faux_assistant_message(text) for text in ("first", "2nd", "3rd", "4")])
    messages: list[Any] = [user("hello")]
    first = await complete(faux, LlmContext(messages=messages), StreamOptions(session_id="s1"))
    # prompt "user:hello" = 3 tokens, all written to the cache; output "first" = 2 tokens
    assert first.usage == Usage(input=0, output=2, cache_read=0, cache_write=3, total_tokens=5)

    messages += [first, user("follow up")]
    ctx = LlmContext(messages=messages)
    second = await complete(faux, ctx, StreamOptions(session_id="s1"))
    # prompt "user:hello\n\nassistant:first\n\nuser:follow up" = 43 chars = 11 tokens;
    # the 10-char prefix shared with the previous prompt reads 3 tokens from the cache
    assert second.usage == Usage(input=0, output=1, cache_read=3, cache_write=8, total_tokens=12)

    other_session = await complete(faux, ctx, StreamOptions(session_id="s2"))
    assert other_session.usage == Usage(
        input=0, output=1, cache_read=0, cache_write=11, total_tokens=12
    )

    no_session = await complete(faux, ctx)
    assert no_session.usage == Usage(input=11, output=1, total_tokens=12)


async def test_prompt_cache_is_per_provider() -> None:
    ctx = context(user("hello"))
    faux_a = FauxProvider([faux_assistant_message("a"), faux_assistant_message("a")])
    faux_b = FauxProvider([faux_assistant_message("b")])
    await complete(faux_a, ctx, StreamOptions(session_id="s"))
    assert (await complete(faux_a, ctx, StreamOptions(session_id="s"))).usage.cache_read == 3
    assert (await complete(faux_b, ctx, StreamOptions(session_id="s"))).usage.cache_read == 0


# ---------------------------------------------------------------------------------------
# Event stream


async def test_exact_event_order_for_fixed_size_chunks() -> None:
    reply = faux_assistant_message(
        [faux_thinking("go"), faux_text("ok"), faux_tool_call("echo", {}, id="tool-1")],
        stop_reason="toolUse",
    )
    events = await collect(FauxProvider([reply], token_size=(1, 1)))
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert [getattr(event, "delta", None) for event in events if "delta" in event.type] == [
        "go",
        "ok",
        "{}",
    ]
    assert [getattr(event, "content_index", None) for event in events] == [
        None,
        *[0] * 3,
        *[1] * 3,
        *[2] * 3,
        None,
    ]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "toolUse"
    assert done.message.stop_reason == "toolUse"
    assert done.message.content == reply.content


async def test_chunks_are_token_size_times_four_characters() -> None:
    events = await collect(FauxProvider([faux_assistant_message("ok then")], token_size=(1, 1)))
    assert [e.delta for e in events if isinstance(e, TextDeltaEvent)] == ["ok t", "hen"]


async def test_empty_text_streams_one_empty_delta() -> None:
    events = await collect(FauxProvider([faux_assistant_message("")]))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    assert isinstance(events[2], TextDeltaEvent)
    assert events[2].delta == ""


async def test_tool_call_deltas_parse_to_the_arguments() -> None:
    call = faux_tool_call("echo", {"text": "hi", "count": 12}, id="tool-1")
    reply = faux_assistant_message([call], stop_reason="toolUse")
    events = await collect(FauxProvider([reply]))
    deltas = [e for e in events if isinstance(e, ToolCallDeltaEvent)]
    assert len(deltas) > 1
    assert json.loads("".join(e.delta for e in deltas)) == {"text": "hi", "count": 12}
    # the partial's arguments grow as the JSON streams in
    last_partial_call = deltas[-1].partial.content[0]
    assert isinstance(last_partial_call, ToolCall)
    assert last_partial_call.arguments == {"text": "hi", "count": 12}
    first_partial_call = deltas[0].partial.content[0]
    assert isinstance(first_partial_call, ToolCall)
    assert first_partial_call.arguments != {"text": "hi", "count": 12}
    end = next(e for e in events if isinstance(e, ToolCallEndEvent))
    assert end.tool_call == call


async def test_multiple_tool_calls_in_one_message() -> None:
    reply = faux_assistant_message(
        [
            faux_tool_call("echo", {"text": "one"}, id="tool-1"),
            faux_tool_call("echo", {"text": "two"}, id="tool-2"),
        ],
        stop_reason="toolUse",
    )
    events = await collect(FauxProvider([reply]))
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert [(e.content_index, e.tool_call.id) for e in ends] == [(0, "tool-1"), (1, "tool-2")]
    assert types(events).count("toolcall_start") == 2


async def test_final_message_replays_signatures_and_errors_verbatim() -> None:
    content: list[TextContent | ThinkingContent | ToolCall] = [
        ThinkingContent(thinking="t", thinking_signature="sig", redacted=True),
        TextContent(text="x", text_signature="ts"),
        ToolCall(id="c1", name="f", arguments={"a": 1}, thought_signature="th"),
        ToolCall(id="c2", name="g", arguments={}, arguments_error="not an object"),
    ]
    reply = faux_assistant_message(content, stop_reason="toolUse")
    events = await collect(FauxProvider([reply]))
    assert final(events).content == content
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert [e.tool_call for e in ends] == content[2:]
    assert ends[-1].partial.content == content


async def test_length_stop_reason() -> None:
    events = await collect(FauxProvider([faux_assistant_message("cut", stop_reason="length")]))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert (done.reason, done.message.stop_reason) == ("length", "length")


@pytest.mark.parametrize(
    ("stop_reason", "error_message"),
    [("error", "upstream failed"), ("aborted", "Request was aborted")],
)
async def test_scripted_failure_ends_with_error_event(stop_reason: Any, error_message: str) -> None:
    reply = faux_assistant_message("partial", stop_reason=stop_reason, error_message=error_message)
    events = await collect(FauxProvider([reply], token_size=(2, 2)))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason == stop_reason
    assert terminal.error.stop_reason == stop_reason
    assert terminal.error.error_message == error_message
    assert terminal.error.content == [TextContent(text="partial")]


async def test_pending_stop_reason_is_an_error() -> None:
    reply = faux_assistant_message("x", stop_reason="pending")
    events = await collect(FauxProvider([reply]))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    assert final(events).error_message == "Faux response ended without a stop reason"


async def test_scripted_message_can_be_reused_without_aliasing() -> None:
    reply = faux_assistant_message([faux_tool_call("f", {"a": [1]}, id="c")])
    faux = FauxProvider([reply, reply])
    first = await complete(faux)
    second = await complete(faux)
    assert first.content == second.content == reply.content
    first_call = first.content[0]
    assert isinstance(first_call, ToolCall)
    scripted_call = reply.content[0]
    assert isinstance(scripted_call, ToolCall)
    assert first_call.arguments is not scripted_call.arguments


async def test_on_response_hook_plain_and_async() -> None:
    seen: list[tuple[ProviderResponse, str]] = []

    def plain(response: ProviderResponse, model: Model) -> None:
        seen.append((response, model.id))

    async def asynchronous(response: ProviderResponse, model: Model) -> None:
        await trio.lowlevel.checkpoint()
        seen.append((response, "async"))

    faux = FauxProvider([faux_assistant_message("a"), faux_assistant_message("b")])
    await complete(faux, options=StreamOptions(on_response=plain))
    await complete(faux, options=StreamOptions(on_response=asynchronous))
    assert seen == [
        (ProviderResponse(status=200, headers={}), "faux-1"),
        (ProviderResponse(status=200, headers={}), "async"),
    ]


async def test_on_response_hook_error_is_one_error_event() -> None:
    def hook(response: ProviderResponse, model: Model) -> None:
        raise ValueError("hook failed")

    faux = FauxProvider([faux_assistant_message("a")])
    events = await collect(faux, options=StreamOptions(on_response=hook))
    assert types(events) == ["error"]
    assert final(events).error_message == "hook failed"


async def test_partial_snapshots_never_change() -> None:
    reply = faux_assistant_message(
        [faux_thinking("a" * 30), faux_text("b" * 30), faux_tool_call("f", {"x": "y" * 30})],
        stop_reason="toolUse",
    )
    seen: list[tuple[AssistantMessageEvent, Any]] = []
    stream = FauxProvider([reply], token_size=(1, 2)).stream_fn(
        FauxProvider().get_model(), context(), StreamOptions()
    )
    async with aclosing(stream):
        async for event in stream:
            seen.append((event, copy.deepcopy(event)))
    assert len(seen) > 11
    for event, at_receipt in seen:
        assert event == at_receipt
    partials = [getattr(event, "partial", None) for event, _ in seen[:-1]]
    contents = [partial.content for partial in partials if partial is not None]
    assert len({id(content) for content in contents}) == len(contents)


async def test_seeded_chunking_is_reproducible() -> None:
    text = "x" * 400

    async def chunk_sizes(seed: int) -> list[int]:
        reply = faux_assistant_message(text)
        events = await collect(FauxProvider([reply], seed=seed))
        return [len(e.delta) for e in events if isinstance(e, TextDeltaEvent)]

    first = await chunk_sizes(7)
    assert first == await chunk_sizes(7)
    assert sum(first) == 400
    assert set(first[:-1]) <= {12, 16, 20}
    assert len(set(first[:-1])) > 1
    assert first != await chunk_sizes(8)


async def test_token_size_is_clamped() -> None:
    events = await collect(FauxProvider([faux_assistant_message("x" * 20)], token_size=(5, 2)))
    # min(5, 2) = 2 tokens, max raised to the min: 8-character chunks
    assert [len(e.delta) for e in events if isinstance(e, TextDeltaEvent)] == [8, 8, 4]
    events = await collect(FauxProvider([faux_assistant_message("x" * 9)], token_size=(0, 0)))
    assert [len(e.delta) for e in events if isinstance(e, TextDeltaEvent)] == [4, 4, 1]


# ---------------------------------------------------------------------------------------
# Abort, cancellation, pacing


async def test_abort_before_start_is_one_error_event() -> None:
    controller = AbortController()
    controller.abort()
    faux = FauxProvider(
        [faux_assistant_message("abcdefghijklmnopqrstuvwxyz")], tokens_per_second=50
    )
    events = await collect(faux, options=StreamOptions(signal=controller.signal))
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, ErrorEvent)
    assert event.reason == "aborted"
    assert event.error.stop_reason == "aborted"
    assert event.error.error_message == "Request was aborted"
    assert event.error.content == []
    assert faux.pending_response_count == 0


@pytest.mark.parametrize(
    ("block", "delta_type", "expected"),
    [
        (faux_text("abcdefghijklmnopqrstuvwxyz"), "text", TextContent(text="abcdefghijkl")),
        (
            faux_thinking("abcdefghijklmnopqrstuvwxyz"),
            "thinking",
            ThinkingContent(thinking="abcdefghijkl"),
        ),
        (
            faux_tool_call("echo", {"text": "abcdefghijklmnopqrstuvwxyz"}, id="t1"),
            "toolcall",
            ToolCall(id="t1", name="echo", arguments={"text": "abc"}),
        ),
    ],
)
async def test_abort_mid_block_has_no_end_event(
    autojump_clock: trio.abc.Clock, block: Any, delta_type: str, expected: Any
) -> None:
    reply = faux_assistant_message([block, faux_text("never")], stop_reason="toolUse")
    faux = FauxProvider([reply], tokens_per_second=100, token_size=(3, 3))
    controller = AbortController()
    events: list[AssistantMessageEvent] = []
    stream = faux.stream_fn(faux.get_model(), context(), StreamOptions(signal=controller.signal))
    async with aclosing(stream):
        async for event in stream:
            events.append(event)
            if event.type.endswith("_delta"):
                controller.abort()
    assert types(events) == ["start", f"{delta_type}_start", f"{delta_type}_delta", "error"]
    terminal = events[-1]
    assert isinstance(terminal, ErrorEvent)
    assert terminal.reason == "aborted"
    assert terminal.error.stop_reason == "aborted"
    assert terminal.error.error_message == "Request was aborted"
    assert terminal.error.content == [expected]


async def test_abort_interrupts_a_paced_wait(autojump_clock: trio.abc.Clock) -> None:
    faux = FauxProvider(
        [faux_assistant_message("abcd" * 5)], tokens_per_second=1, token_size=(1, 1)
    )
    controller = AbortController()
    events: list[tuple[float, str]] = []

    async def abort_later() -> None:
        await trio.sleep(0.5)
        controller.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_later)
        stream = faux.stream_fn(
            faux.get_model(), context(), StreamOptions(signal=controller.signal)
        )
        async with aclosing(stream):
            async for event in stream:
                events.append((trio.current_time(), event.type))
    assert events == [(0.0, "start"), (0.0, "text_start"), (0.5, "error")]


async def test_pacing_is_exact_on_trio_clock(autojump_clock: trio.abc.Clock) -> None:
    faux = FauxProvider([faux_assistant_message("x" * 40)], tokens_per_second=10, token_size=(1, 1))
    times: list[float] = []
    stream = faux.stream_fn(faux.get_model(), context(), StreamOptions())
    async with aclosing(stream):
        async for event in stream:
            if event.type == "text_delta":
                times.append(trio.current_time())
    assert times == [k / 10 for k in range(1, 11)]
    assert trio.current_time() == 1.0


async def test_paced_final_message_duration(autojump_clock: trio.abc.Clock) -> None:
    # 3 chunks of 2 tokens and one of 1 token at 4 tokens/s: 7 tokens = 1.75 s
    reply = faux_assistant_message("y" * 28)
    events = await collect(FauxProvider([reply], tokens_per_second=4, token_size=(2, 2)))
    assert final(events).duration_ms == 1750
    assert trio.current_time() == 1.75


async def test_unpaced_stream_takes_no_time_but_checkpoints(
    autojump_clock: trio.abc.Clock,
) -> None:
    reply = faux_assistant_message("x" * 40)
    faux = FauxProvider([reply], token_size=(1, 1))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ticker)
        events = await collect(faux)
        nursery.cancel_scope.cancel()
    assert final(events).duration_ms == 0
    assert trio.current_time() == 0
    assert ticks >= 10  # the other task ran while the 10 chunks streamed


async def test_consumer_cancellation_propagates(autojump_clock: trio.abc.Clock) -> None:
    faux = FauxProvider([faux_assistant_message("x" * 40)], tokens_per_second=10, token_size=(1, 1))
    received: list[str] = []
    with trio.move_on_after(0.25) as scope:
        stream = faux.stream_fn(faux.get_model(), context(), StreamOptions())
        async with aclosing(stream):
            async for event in stream:
                received.append(event.type)
    assert scope.cancelled_caught
    assert received == ["start", "text_start", "text_delta", "text_delta"]
    assert trio.current_time() == 0.25
