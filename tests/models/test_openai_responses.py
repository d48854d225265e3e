"""The ``openai-responses`` API (reference ``upstream-ai.md`` §5.2, §6.3)."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import httpx
import pytest
import trio
from sse_server import ScriptedResponse, SseServer, error_response, sse_chunk, sse_response

from trio_agent import (
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    LlmContext,
    Message,
    Model,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolDeclaration,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._http import HttpEnv, HttpError
from trio_agent.models._openai_responses import (
    build_responses_request,
    format_responses_http_error,
    short_hash,
    stream_openai_responses,
)

WEATHER = ToolDeclaration(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def make_model(**changes: Any) -> Model:
    fields: dict[str, Any] = {
        "id": "gpt-test",
        "name": "GPT Test",
        "api": "openai-responses",
        "provider": "openai",
        "base_url": "http://127.0.0.1:1/v1",
        "max_tokens": 4096,
    }
    fields.update(changes)
    return Model(**fields)


def assistant(content: list[Any], source: Model, **changes: Any) -> AssistantMessage:
    fields: dict[str, Any] = {
        "content": content,
        "api": source.api,
        "provider": source.provider,
        "model": source.id,
        "stop_reason": "toolUse",
        "timestamp": 1,
    }
    fields.update(changes)
    return AssistantMessage(**fields)


def request_body(
    model: Model, messages: list[Message], options: StreamOptions | None = None
) -> dict[str, Any]:
    request = build_responses_request(
        model, LlmContext(messages=messages), options or StreamOptions(), "sk-test"
    )
    return request.body


# ---------------------------------------------------------------------------------------
# Request building

REASONING_ITEM = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "plan"}],
    "encrypted_content": "ENC",
}


def test_request_url_headers_and_auth() -> None:
    request = build_responses_request(
        make_model(),
        LlmContext(messages=[UserMessage(content="hi")]),
        StreamOptions(session_id="session-1"),
        "sk-test",
    )
    assert request.url == "http://127.0.0.1:1/v1/responses"
    assert dict(request.auth_headers) == {"Authorization": "Bearer sk-test"}
    assert dict(request.headers) == {
        "session-id": "session-1",
        "x-client-request-id": "session-1",
    }
    openrouter = build_responses_request(
        make_model(provider="openrouter"),
        LlmContext(messages=[UserMessage(content="hi")]),
        StreamOptions(session_id="s"),
        "k",
    )
    assert dict(openrouter.headers) == {"x-session-id": "s"}


def test_body_shape_with_replay() -> None:
    model = make_model(reasoning=True, input=["text", "image"])
    messages: list[Message] = [
        SystemMessage(content="You are helpful.", tools_added=[WEATHER], timestamp=0),
        UserMessage(
            content=[
                TextContent(text="Weather here?"),
                ImageContent(data="AAAA", mime_type="image/png"),
            ]
        ),
        assistant(
            [
                ThinkingContent(thinking="plan", thinking_signature=json.dumps(REASONING_ITEM)),
                TextContent(
                    text="Checking.",
                    text_signature='{"v":1,"id":"msg_1","phase":"commentary"}',
                ),
                TextContent(text="Second."),
                ToolCall(id="call_1|fc_1", name="get_weather", arguments={"city": "Paris"}),
            ],
            model,
        ),
        ToolResultMessage(
            tool_call_id="call_1|fc_1",
            tool_name="get_weather",
            content=[TextContent(text="sunny"), TextContent(text="21C")],
        ),
        SystemMessage(content="Be terse."),
        UserMessage(content="Thanks"),
    ]
    body = request_body(
        model, messages, StreamOptions(reasoning="high", session_id="s-1", temperature=0.3)
    )
    assert body == {
        "model": "gpt-test",
        "input": [
            {"role": "developer", "content": "You are helpful.\n\nBe terse."},
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Weather here?"},
                    {
                        "type": "input_image",
                        "detail": "auto",
                        "image_url": "data:image/png;base64,AAAA",
                    },
                ],
            },
            REASONING_ITEM,
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
                "status": "completed",
                "id": "msg_1",
                "phase": "commentary",
            },
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Second.", "annotations": []}],
                "status": "completed",
                "id": "msg_pi_1_1",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny\n21C"},
            {"role": "user", "content": [{"type": "input_text", "text": "Thanks"}]},
        ],
        "stream": True,
        "store": False,
        "prompt_cache_key": "s-1",
        "max_output_tokens": 4096,
        "temperature": 0.3,
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": WEATHER.parameters,
            }
        ],
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }


def test_system_role_reasoning_off_and_min_output_tokens() -> None:
    messages: list[Message] = [SystemMessage(content="sys"), UserMessage(content="hi")]
    plain = request_body(make_model(), messages, StreamOptions(max_tokens=5))
    assert plain["input"][0] == {"role": "system", "content": "sys"}
    assert plain["max_output_tokens"] == 16
    assert "reasoning" not in plain
    assert "prompt_cache_key" not in plain

    reasoning = make_model(reasoning=True)
    body = request_body(reasoning, messages)
    assert body["reasoning"] == {"effort": "none"}
    assert "include" not in body
    no_developer = make_model(reasoning=True, compat={"supportsDeveloperRole": False})
    assert request_body(no_developer, messages)["input"][0]["role"] == "system"
    mapped = make_model(reasoning=True, thinking_level_map={"off": "minimal", "low": "lite"})
    assert request_body(mapped, messages)["reasoning"] == {"effort": "minimal"}
    assert request_body(mapped, messages, StreamOptions(reasoning="low"))["reasoning"] == {
        "effort": "lite",
        "summary": "auto",
    }
    cannot_disable = make_model(reasoning=True, thinking_level_map={"off": None})
    assert "reasoning" not in request_body(cannot_disable, messages)
    no_cache = make_model(compat={"cacheRetention": "none"})
    assert "prompt_cache_key" not in request_body(no_cache, messages, StreamOptions(session_id="x"))


def test_tool_results_images_and_foreign_tool_calls() -> None:
    model = make_model(input=["text", "image"])
    other = make_model(id="other-model", provider="other-provider")
    image = ImageContent(data="BBBB", mime_type="image/jpeg")
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant(
            [
                ToolCall(id="call_a|fc_a", name="shot", arguments={}),
                ToolCall(id="toolu:weird", name="shot", arguments={"x": 1}),
            ],
            other,
        ),
        ToolResultMessage(tool_call_id="call_a|fc_a", tool_name="shot", content=[image]),
        ToolResultMessage(tool_call_id="toolu:weird", tool_name="shot", content=[]),
        assistant([ToolCall(id="call_b|item_b", name="shot", arguments={})], model),
    ]
    body = request_body(model, messages)
    assert body["input"][1:] == [
        {
            "type": "function_call",
            "id": f"fc_{short_hash('fc_a')}",
            "call_id": "call_a",
            "name": "shot",
            "arguments": "{}",
        },
        {"type": "function_call", "call_id": "toolu_weird", "name": "shot", "arguments": '{"x":1}'},
        {
            "type": "function_call_output",
            "call_id": "call_a",
            "output": [
                {
                    "type": "input_image",
                    "detail": "auto",
                    "image_url": "data:image/jpeg;base64,BBBB",
                }
            ],
        },
        {"type": "function_call_output", "call_id": "toolu_weird", "output": "(no tool output)"},
        {"type": "function_call", "call_id": "call_b", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_b", "output": "No result provided"},
    ]
    text_only = request_body(
        make_model(),
        [
            UserMessage(content="go"),
            assistant([ToolCall(id="c|fc_1", name="shot", arguments={})], make_model()),
            ToolResultMessage(tool_call_id="c|fc_1", tool_name="shot", content=[image]),
        ],
    )
    assert text_only["input"][-1] == {
        "type": "function_call_output",
        "call_id": "c",
        "output": "(tool image omitted: model does not support images)",
    }


def test_http_error_wording() -> None:
    error = HttpError(status=401, headers={}, body='  {"error":{"message":"bad key"}}\n')
    assert format_responses_http_error(error, make_model()) == (
        'OpenAI API error (401): {"message":"bad key"}'
    )
    assert format_responses_http_error(error, make_model(provider="myhost")) == (
        'myhost API error (401): {"message":"bad key"}'
    )


# ---------------------------------------------------------------------------------------
# Streaming against the loopback server


def ev(kind: str, **data: Any) -> bytes:
    return sse_chunk({"type": kind, **data}, event=kind)


CREATED = ev(
    "response.created", response={"id": "resp_1", "model": "gpt-test", "status": "in_progress"}
)


def completed(status: str = "completed", **response: Any) -> bytes:
    body = {
        "id": "resp_1",
        "status": status,
        "usage": {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        },
        **response,
    }
    kind = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
        status, "response.completed"
    )
    return ev(kind, response=body)


def message_frames(index: int, *pieces: str, item_id: str = "msg_1") -> list[bytes]:
    text = "".join(pieces)
    return [
        ev(
            "response.output_item.added",
            output_index=index,
            item={"type": "message", "id": item_id, "role": "assistant", "content": []},
        ),
        ev(
            "response.content_part.added",
            output_index=index,
            content_index=0,
            part={"type": "output_text", "text": ""},
        ),
        *(
            ev("response.output_text.delta", output_index=index, content_index=0, delta=piece)
            for piece in pieces
        ),
        ev(
            "response.output_item.done",
            output_index=index,
            item={
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            },
        ),
    ]


def call_added(index: int, name: str = "get_weather") -> bytes:
    return ev(
        "response.output_item.added",
        output_index=index,
        item={
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": name,
            "arguments": "",
        },
    )


def call_done(index: int, arguments: str, name: str = "get_weather") -> bytes:
    return ev(
        "response.output_item.done",
        output_index=index,
        item={
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": name,
            "arguments": arguments,
            "status": "completed",
        },
    )


def server_model(server: SseServer, **changes: Any) -> Model:
    return make_model(base_url=server.base_url, **changes)


async def collect(
    model: Model,
    client: httpx.AsyncClient,
    messages: list[Message] | None = None,
    **options: Any,
) -> list[AssistantMessageEvent]:
    context = LlmContext(messages=messages or [UserMessage(content="Hello")])
    stream_options = StreamOptions(api_key="sk-test", **options)
    env = HttpEnv(client=client)
    async with aclosing(stream_openai_responses(model, context, stream_options, env)) as events:
        return [event async for event in events]


def types(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


def final_done(events: list[AssistantMessageEvent]) -> DoneEvent:
    last = events[-1]
    assert isinstance(last, DoneEvent)
    return last


def final_error(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    return last.error


async def test_text_stream(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response([CREATED, *message_frames(0, "Hel", "lo!"), completed()]))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    done = final_done(events)
    assert done.reason == "stop"
    assert done.message.content == [
        TextContent(text="Hello!", text_signature='{"v":1,"id":"msg_1"}')
    ]
    assert done.message.response_id == "resp_1"
    assert done.message.usage.total_tokens == 15
    [request] = sse_server.requests
    assert request.path == "/responses"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.json() == {
        "model": "gpt-test",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hello"}]}],
        "stream": True,
        "store": False,
        "max_output_tokens": 4096,
    }


async def test_thinking_text_and_tool_call_stream(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    reasoning_done = {**REASONING_ITEM}
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                ev(
                    "response.output_item.added",
                    output_index=0,
                    item={"type": "reasoning", "id": "rs_1", "summary": []},
                ),
                ev("response.reasoning_summary_part.added", output_index=0, summary_index=0),
                ev(
                    "response.reasoning_summary_text.delta",
                    output_index=0,
                    summary_index=0,
                    delta="plan",
                ),
                ev("response.reasoning_summary_part.done", output_index=0, summary_index=0),
                ev("response.output_item.done", output_index=0, item=reasoning_done),
                *message_frames(1, "Hello", " world"),
                call_added(2),
                ev(
                    "response.function_call_arguments.delta",
                    output_index=2,
                    delta='{"city":"Paris"}',
                ),
                ev(
                    "response.function_call_arguments.done",
                    output_index=2,
                    arguments='{"city":"Paris"}',
                ),
                call_done(2, '{"city":"Paris"}'),
                ev(
                    "response.completed",
                    response={
                        "id": "resp_1",
                        "status": "completed",
                        "usage": {
                            "input_tokens": 100,
                            "input_tokens_details": {"cached_tokens": 40},
                            "output_tokens": 20,
                            "output_tokens_details": {"reasoning_tokens": 7},
                            "total_tokens": 120,
                        },
                    },
                ),
            ]
        )
    )
    events = await collect(
        server_model(sse_server, reasoning=True), http_client, reasoning="medium"
    )
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert [getattr(event, "delta", None) for event in events[2:4]] == ["plan", "\n\n"]
    assert getattr(events[4], "content", None) == "plan"
    done = final_done(events)
    assert done.reason == "toolUse"
    assert done.message.content == [
        ThinkingContent(
            thinking="plan",
            thinking_signature=json.dumps(REASONING_ITEM, separators=(",", ":")),
        ),
        TextContent(text="Hello world", text_signature='{"v":1,"id":"msg_1"}'),
        ToolCall(id="call_1|fc_1", name="get_weather", arguments={"city": "Paris"}),
    ]
    usage = done.message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (60, 20, 40, 0)
    assert usage.reasoning == 7
    assert usage.total_tokens == 120
    body = sse_server.requests[0].json()
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_arguments_done_replaces_streamed_text(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                call_added(0),
                ev("response.function_call_arguments.delta", output_index=0, delta='{"ci'),
                ev(
                    "response.function_call_arguments.done",
                    output_index=0,
                    arguments='{"city":"Oslo"}',
                ),
                call_done(0, '{"city":"Oslo"}'),
                completed(),
            ]
        ),
        sse_response(
            [
                CREATED,
                call_added(0),
                ev("response.function_call_arguments.delta", output_index=0, delta='{"x":'),
                call_done(0, '{"city":"Rome"}'),
                completed(),
            ]
        ),
    )
    events = await collect(server_model(sse_server), http_client)
    deltas = [event.delta for event in events if isinstance(event, ToolCallDeltaEvent)]
    assert deltas == ['{"ci', 'ty":"Oslo"}']
    assert final_done(events).message.content == [
        ToolCall(id="call_1|fc_1", name="get_weather", arguments={"city": "Oslo"})
    ]
    events = await collect(server_model(sse_server), http_client)
    deltas = [event.delta for event in events if isinstance(event, ToolCallDeltaEvent)]
    assert deltas == ['{"x":', '{"city":"Rome"}']
    assert final_done(events).message.content[0] == ToolCall(
        id="call_1|fc_1", name="get_weather", arguments={"city": "Rome"}
    )


async def test_incomplete_max_output_tokens_is_length(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                *message_frames(0, "cut"),
                completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
            ]
        )
    )
    done = final_done(await collect(server_model(sse_server), http_client))
    assert done.reason == "length"
    assert done.message.stop_reason == "length"


async def test_http_error(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(error_response(401, {"error": {"message": "bad key"}}))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["error"]
    assert final_error(events).error_message == ('OpenAI API error (401): {"message":"bad key"}')


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        pytest.param(
            [CREATED, ev("error", code="rate_limit_exceeded", message="Slow down")],
            "Slow down",
            id="error-event",
        ),
        pytest.param(
            [
                CREATED,
                ev(
                    "response.failed",
                    response={
                        "status": "failed",
                        "error": {"code": "server_error", "message": "boom"},
                    },
                ),
            ],
            "server_error: boom",
            id="failed",
        ),
        pytest.param(
            [
                CREATED,
                ev(
                    "response.failed",
                    response={"status": "failed", "incomplete_details": {"reason": "timeout"}},
                ),
            ],
            "incomplete: timeout",
            id="failed-incomplete",
        ),
        pytest.param(
            [CREATED, completed("incomplete", incomplete_details={"reason": "content_filter"})],
            "Response incomplete: content_filter",
            id="incomplete",
        ),
        pytest.param(
            [CREATED, *message_frames(0, "x")],
            "OpenAI Responses stream ended before a terminal response event",
            id="no-terminal",
        ),
        pytest.param(
            [
                CREATED,
                call_added(0),
                ev("response.function_call_arguments.delta", output_index=0, delta="{"),
                completed(),
            ],
            "OpenAI Responses stream completed with an unfinished tool call: "
            "get_weather (call_1|fc_1)",
            id="unfinished-tool-call",
        ),
    ],
)
async def test_stream_failures(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    frames: list[bytes],
    expected: str,
) -> None:
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    assert events[0].type == "start"
    message = final_error(events)
    assert message.stop_reason == "error"
    assert message.error_message == expected


async def test_error_keeps_partial_content_without_end(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                *message_frames(0, "cut")[:3],
                ev("error", code="server_error", message="oops"),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final_error(events).content == [TextContent(text="cut")]


async def test_retries_on_virtual_time(
    sse_server: SseServer, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.enqueue(
        error_response(503, "busy", headers={"retry-after-ms": "500"}),
        error_response(429, "slow", headers={"retry-after": "3"}),
        sse_response([CREATED, *message_frames(0, "ok"), completed()]),
    )
    async with httpx.AsyncClient(timeout=None) as client:
        start = trio.current_time()
        events = await collect(server_model(sse_server), client, max_retries=2)
    assert trio.current_time() - start == pytest.approx(3.5)
    assert types(events)[-1] == "done"
    assert len(sse_server.requests) == 3


async def test_retry_delay_cap(sse_server: SseServer, autojump_clock: trio.abc.Clock) -> None:
    sse_server.enqueue(error_response(429, "slow down", headers={"retry-after": "120"}))
    async with httpx.AsyncClient(timeout=None) as client:
        events = await collect(server_model(sse_server), client, max_retries=3)
    assert final_error(events).error_message == (
        "Server requested 120s retry delay (max: 60s). 429 slow down"
    )


async def test_mid_stream_cancellation_closes_the_connection(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        ScriptedResponse(chunks=[CREATED, *message_frames(0, "first")[:3]], hang=True)
    )
    seen: list[str] = []
    env = HttpEnv(client=http_client)
    context = LlmContext(messages=[UserMessage(content="hi")])
    options = StreamOptions(api_key="k")
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with aclosing(
                stream_openai_responses(server_model(sse_server), context, options, env)
            ) as stream:
                async for event in stream:
                    seen.append(event.type)
                    if event.type == "text_delta":
                        scope.cancel()
        assert scope.cancelled_caught
        await sse_server.client_closed.wait()
    assert seen == ["start", "text_start", "text_delta"]
    assert sse_server.closed_by_client == 1


async def test_abort_signal_mid_stream(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        ScriptedResponse(chunks=[CREATED, *message_frames(0, "first")[:3]], hang=True)
    )
    controller = AbortController()
    env = HttpEnv(client=http_client)
    context = LlmContext(messages=[UserMessage(content="hi")])
    options = StreamOptions(api_key="k", signal=controller.signal)
    events: list[AssistantMessageEvent] = []
    with trio.fail_after(5):
        async with aclosing(
            stream_openai_responses(server_model(sse_server), context, options, env)
        ) as stream:
            async for event in stream:
                events.append(event)
                if event.type == "text_delta":
                    controller.abort()
        await sse_server.client_closed.wait()
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.reason == "aborted"
    assert last.error.error_message == "Request was aborted"
    assert last.error.content == [TextContent(text="first")]


async def test_encrypted_reasoning_is_backfilled_from_the_final_output(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    streamed = {"type": "reasoning", "id": "rs_1", "summary": []}
    sse_server.enqueue(
        sse_response(
            [
                CREATED,
                ev("response.output_item.added", output_index=0, item=streamed),
                ev("response.output_item.done", output_index=0, item=streamed),
                *message_frames(1, "ok"),
                completed(output=[{**streamed, "encrypted_content": "ENC"}]),
            ]
        )
    )
    done = final_done(await collect(server_model(sse_server, reasoning=True), http_client))
    assert done.message.content[0] == ThinkingContent(
        thinking="",
        thinking_signature='{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ENC"}',
    )
