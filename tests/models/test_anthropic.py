"""The ``anthropic-messages`` API (reference ``upstream-ai.md`` §5.2, §6.2)."""

from __future__ import annotations

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
    ModelCost,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.models._anthropic import (
    build_anthropic_body,
    build_anthropic_request,
    format_anthropic_http_error,
    stream_anthropic,
)
from trio_agent.models._http import HttpEnv, HttpError

WEATHER = ToolDeclaration(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
        "description": "dropped: not an input_schema root keyword",
    },
)


def make_model(**changes: Any) -> Model:
    fields: dict[str, Any] = {
        "id": "claude-test",
        "name": "Claude Test",
        "api": "anthropic-messages",
        "provider": "anthropic",
        "base_url": "http://127.0.0.1:1",
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
    request = build_anthropic_request(
        model, LlmContext(messages=messages), options or StreamOptions(), "sk-test"
    )
    return request.body


# ---------------------------------------------------------------------------------------
# Request building


def test_request_url_headers_and_auth() -> None:
    model = make_model(base_url="http://127.0.0.1:1/")
    request = build_anthropic_request(
        model, LlmContext(messages=[UserMessage(content="hi")]), StreamOptions(), "sk-test"
    )
    assert request.url == "http://127.0.0.1:1/v1/messages?beta=true"
    assert dict(request.headers) == {
        "anthropic-version": "2023-06-01",
        "anthropic-dangerous-direct-browser-access": "true",
        "accept": "application/json",
    }
    assert dict(request.auth_headers) == {"x-api-key": "sk-test"}
    assert "sk-test" not in repr(request)


def test_body_with_system_tools_history_and_cache_markers() -> None:
    model = make_model()
    messages: list[Message] = [
        SystemMessage(content="You are helpful.", tools_added=[WEATHER], timestamp=0),
        UserMessage(content="Weather in Paris?", timestamp=1),
        assistant(
            [
                ThinkingContent(thinking="plan", thinking_signature="sig-1"),
                TextContent(text="Checking."),
                TextContent(text="   "),
                ToolCall(id="toolu_1", name="get_weather", arguments={"city": "Paris"}),
            ],
            model,
        ),
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="get_weather",
            content=[TextContent(text="sunny"), TextContent(text="21C")],
            timestamp=2,
        ),
        SystemMessage(content="Now be terse.", timestamp=3),
        UserMessage(content="Thanks", timestamp=4),
    ]
    body = request_body(model, messages, StreamOptions(temperature=0.5))
    assert body == {
        "model": "claude-test",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "sunny\n21C",
                        "is_error": False,
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}
                ],
            },
        ],
        "max_tokens": 4096,
        "stream": True,
        "system": [
            {
                "type": "text",
                "text": "You are helpful.\n\nNow be terse.",
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city",
                "eager_input_streaming": True,
                "input_schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
                "cache_control": {"type": "ephemeral"},
            }
        ],
        "temperature": 0.5,
    }


def test_cache_retention_none_sends_no_cache_markers() -> None:
    model = make_model(compat={"cacheRetention": "none"})
    body = request_body(
        model,
        [SystemMessage(content="sys", tools_added=[WEATHER]), UserMessage(content="hi")],
    )
    assert "cache_control" not in repr(body)
    assert body["system"] == [{"type": "text", "text": "sys"}]
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_budget_thinking_observed_numbers() -> None:
    # Reference §5.2 (observed): model max 8000, level medium -> 8000 / 6976.
    model = make_model(reasoning=True, max_tokens=8000)
    body, betas = build_anthropic_body(
        model,
        [UserMessage(content="hi")],
        StreamOptions(reasoning="medium", temperature=0.2),
    )
    assert body["max_tokens"] == 8000
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 6976, "display": "summarized"}
    assert "temperature" not in body
    assert betas == ["interleaved-thinking-2025-05-14"]


def test_budget_thinking_with_room_and_custom_budgets() -> None:
    model = make_model(reasoning=True, max_tokens=64000)
    body, _ = build_anthropic_body(
        model,
        [UserMessage(content="hi")],
        StreamOptions(reasoning="low", max_tokens=1000, thinking_budgets={"low": 3000}),
    )
    assert body["max_tokens"] == 4000
    assert body["thinking"]["budget_tokens"] == 2976


def test_thinking_disabled_and_adaptive() -> None:
    reasoning_model = make_model(reasoning=True)
    body, betas = build_anthropic_body(
        reasoning_model, [UserMessage(content="hi")], StreamOptions(temperature=0.1)
    )
    assert body["thinking"] == {"type": "disabled"}
    assert body["temperature"] == 0.1
    assert betas == []

    no_off = make_model(reasoning=True, thinking_level_map={"off": None})
    body, _ = build_anthropic_body(no_off, [UserMessage(content="hi")], StreamOptions())
    assert "thinking" not in body

    plain = make_model()
    body, _ = build_anthropic_body(plain, [UserMessage(content="hi")], StreamOptions())
    assert "thinking" not in body

    adaptive = make_model(reasoning=True, compat={"forceAdaptiveThinking": True})
    body, betas = build_anthropic_body(
        adaptive, [UserMessage(content="hi")], StreamOptions(reasoning="minimal")
    )
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "low"}
    assert betas == []


def test_without_eager_streaming_the_beta_is_sent() -> None:
    model = make_model(compat={"supportsEagerToolInputStreaming": False})
    request = build_anthropic_request(
        model,
        LlmContext(messages=[SystemMessage(tools_added=[WEATHER]), UserMessage(content="x")]),
        StreamOptions(),
        "sk-test",
    )
    assert "eager_input_streaming" not in request.body["tools"][0]
    assert "system" not in request.body
    assert request.headers["anthropic-beta"] == "fine-grained-tool-streaming-2025-05-14"


def test_assistant_block_conversion_rules() -> None:
    model = make_model()
    messages: list[Message] = [
        UserMessage(content="   "),
        UserMessage(
            content=[
                TextContent(text=""),
                ImageContent(data="AAAA", mime_type="image/png"),
                TextContent(text="what is this?"),
            ]
        ),
        assistant(
            [
                ThinkingContent(
                    thinking="[Reasoning redacted]", thinking_signature="enc", redacted=True
                ),
                ThinkingContent(thinking="unsigned idea"),
                ThinkingContent(thinking="  "),
                TextContent(text="It is a pixel."),
            ],
            model,
            stop_reason="stop",
        ),
        assistant([TextContent(text="")], model, stop_reason="stop"),
    ]
    body = request_body(
        make_model(input=["text", "image"], compat={"cacheRetention": "none"}), messages
    )
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {"type": "text", "text": "what is this?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "enc"},
                {"type": "text", "text": "unsigned idea"},
                {"type": "text", "text": "It is a pixel."},
            ],
        },
    ]


def test_tool_results_grouped_with_error_images_moved() -> None:
    model = make_model(input=["text", "image"], compat={"cacheRetention": "none"})
    image = ImageContent(data="BBBB", mime_type="image/jpeg")
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant(
            [
                ToolCall(id="call|with:odd*chars", name="shot", arguments={}),
                ToolCall(id="toolu_2", name="shot", arguments={}),
                ToolCall(id="toolu_3", name="shot", arguments={}),
            ],
            model,
            provider="openai",
            api="openai-responses",
            model="gpt-x",
        ),
        ToolResultMessage(
            tool_call_id="call|with:odd*chars",
            tool_name="shot",
            content=[TextContent(text="failed"), image],
            is_error=True,
        ),
        ToolResultMessage(tool_call_id="toolu_2", tool_name="shot", content=[image]),
        ToolResultMessage(
            tool_call_id="toolu_3", tool_name="shot", content=[TextContent(text="ok"), image]
        ),
    ]
    body = request_body(model, messages)
    image_block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"},
    }
    assert body["messages"][1]["content"][0]["id"] == "call_with_odd_chars"
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_with_odd_chars",
                "content": "failed\n(image attached after the tool results)",
                "is_error": True,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "text", "text": "(see attached image)"}, image_block],
                "is_error": False,
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_3",
                "content": [{"type": "text", "text": "ok"}, image_block],
                "is_error": False,
            },
            {
                "type": "text",
                "text": "Images from the error result of tool call call_with_odd_chars (shot):",
            },
            image_block,
        ],
    }


def test_orphaned_tool_call_gets_synthetic_result() -> None:
    model = make_model(compat={"cacheRetention": "none"})
    messages: list[Message] = [
        UserMessage(content="go"),
        assistant([ToolCall(id="toolu_9", name="shot", arguments={})], model),
        UserMessage(content="never mind"),
    ]
    body = request_body(model, messages)
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_9",
                "content": "No result provided",
                "is_error": True,
            }
        ],
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '{"error": {"type": "invalid_request_error", "message": "bad"}}',
            '400 {"error":{"type":"invalid_request_error","message":"bad"}}',
        ),
        ("plain failure\n", "400 plain failure\n"),
        ("", "400 status code (no body)"),
    ],
)
def test_http_error_wording(body: str, expected: str) -> None:
    error = HttpError(status=400, headers={}, body=body)
    assert format_anthropic_http_error(error, make_model()) == expected


# ---------------------------------------------------------------------------------------
# Streaming against the loopback server


def frame(event: str, data: dict[str, Any]) -> bytes:
    return sse_chunk({"type": event, **data}, event=event)


def message_start(**usage: int) -> bytes:
    return frame(
        "message_start",
        {
            "message": {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "usage": usage or {"input_tokens": 12, "output_tokens": 1},
            }
        },
    )


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return frame("content_block_start", {"index": index, "content_block": block})


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return frame("content_block_delta", {"index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return frame("content_block_stop", {"index": index})


def message_delta(stop_reason: str | None, **extra: Any) -> bytes:
    return frame(
        "message_delta",
        {"delta": {"stop_reason": stop_reason, "stop_sequence": None}, **extra},
    )


MESSAGE_STOP = frame("message_stop", {})
PING = frame("ping", {})


def text_frames(*pieces: str) -> list[bytes]:
    return [
        block_start(0, {"type": "text", "text": ""}),
        *(block_delta(0, {"type": "text_delta", "text": piece}) for piece in pieces),
        block_stop(0),
    ]


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
    async with aclosing(stream_anthropic(model, context, stream_options, env)) as events:
        return [event async for event in events]


def types(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


def partial_of(event: AssistantMessageEvent) -> AssistantMessage:
    assert not isinstance(event, DoneEvent | ErrorEvent)
    return event.partial


def final_error(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    return last.error


async def test_text_stream(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(input_tokens=12, output_tokens=1),
                PING,
                *text_frames("Hel", "lo!"),
                message_delta("end_turn", usage={"output_tokens": 4}),
                MESSAGE_STOP,
            ]
        )
    )
    model = server_model(sse_server)
    events = await collect(model, http_client)
    assert types(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "stop"
    message = done.message
    assert message.content == [TextContent(text="Hello!")]
    assert message.stop_reason == "stop"
    assert message.response_id == "msg_01"
    assert message.response_model is None
    assert message.api == "anthropic-messages"
    assert message.usage.input == 12
    assert message.usage.output == 4
    assert message.usage.total_tokens == 16

    [request] = sse_server.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages?beta=true"
    assert request.headers["x-api-key"] == "sk-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["accept"] == "application/json"
    assert request.headers["content-type"] == "application/json"
    assert "anthropic-beta" not in request.headers
    assert request.json() == {
        "model": "claude-test",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Hello", "cache_control": {"type": "ephemeral"}}
                ],
            }
        ],
        "max_tokens": 4096,
        "stream": True,
    }


async def test_thinking_text_and_tool_call_stream(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(
                    input_tokens=50,
                    output_tokens=1,
                    cache_read_input_tokens=10,
                    cache_creation_input_tokens=5,
                ),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                block_delta(0, {"type": "thinking_delta", "thinking": "Need the weather."}),
                block_delta(0, {"type": "signature_delta", "signature": "sig-"}),
                block_delta(0, {"type": "signature_delta", "signature": "abc"}),
                block_stop(0),
                block_start(1, {"type": "text", "text": ""}),
                block_delta(1, {"type": "text_delta", "text": "Checking."}),
                block_stop(1),
                PING,
                block_start(
                    2, {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}
                ),
                block_delta(2, {"type": "input_json_delta", "partial_json": '{"city": "Pa'}),
                block_delta(2, {"type": "input_json_delta", "partial_json": 'ris"}'}),
                block_stop(2),
                message_delta("tool_use", usage={"output_tokens": 30}),
                MESSAGE_STOP,
            ]
        )
    )
    model = server_model(
        sse_server,
        reasoning=True,
        cost=ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
    )
    events = await collect(model, http_client, reasoning="high")
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
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert partial_of(events[2]).content == [
        ThinkingContent(thinking="Need the weather.", thinking_signature="")
    ]
    assert partial_of(events[8]).content[2] == ToolCall(
        id="toolu_01", name="get_weather", arguments={"city": "Pa"}
    )
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "toolUse"
    assert done.message.content == [
        ThinkingContent(thinking="Need the weather.", thinking_signature="sig-abc"),
        TextContent(text="Checking."),
        ToolCall(id="toolu_01", name="get_weather", arguments={"city": "Paris"}),
    ]
    usage = done.message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (50, 30, 10, 5)
    assert usage.total_tokens == 95
    assert usage.reasoning is None
    cost = usage.cost
    assert (cost.input, cost.output, cost.cache_read, cost.cache_write) == pytest.approx(
        (50 * 3.0 / 1e6, 30 * 15.0 / 1e6, 10 * 0.3 / 1e6, 5 * 3.75 / 1e6)
    )
    assert cost.total == pytest.approx((150 + 450 + 3 + 18.75) / 1e6)
    [request] = sse_server.requests
    assert request.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"
    assert request.json()["thinking"] == {
        "type": "enabled",
        "budget_tokens": 3072,
        "display": "summarized",
    }


async def test_initial_block_content_redacted_thinking_and_thinking_tokens(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "redacted_thinking", "data": "ENCRYPTED"}),
                block_stop(0),
                block_start(1, {"type": "thinking", "thinking": "Start ", "signature": "s1"}),
                block_delta(1, {"type": "thinking_delta", "thinking": "more"}),
                block_stop(1),
                block_start(2, {"type": "text", "text": "Hi "}),
                block_delta(2, {"type": "text_delta", "text": "there"}),
                block_stop(2),
                block_start(
                    3, {"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {"a": 1}}
                ),
                block_stop(3),
                message_delta(
                    "max_tokens",
                    usage={"output_tokens": 9, "output_tokens_details": {"thinking_tokens": 6}},
                ),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server, reasoning=True), http_client)
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_end",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_end",
        "done",
    ]
    assert partial_of(events[1]).content == [
        ThinkingContent(
            thinking="[Reasoning redacted]", thinking_signature="ENCRYPTED", redacted=True
        )
    ]
    assert partial_of(events[6]).content[2] == TextContent(text="Hi ")
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "length"
    assert done.message.content[1:] == [
        ThinkingContent(thinking="Start more", thinking_signature="s1"),
        TextContent(text="Hi there"),
        ToolCall(id="toolu_2", name="noop", arguments={"a": 1}),
    ]
    assert done.message.usage.reasoning == 6
    assert done.message.usage.output == 9


async def test_http_error(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(
        error_response(
            400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["error"]
    message = final_error(events)
    assert message.stop_reason == "error"
    assert message.error_message == (
        '400 {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}'
    )
    assert message.content == []
    assert message.usage == Usage()


async def test_provider_error_event_uses_raw_data(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    raw = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "partial"}),
                f"event: error\ndata: {raw}\n\n".encode(),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    message = final_error(events)
    assert message.error_message == raw
    assert message.content == [TextContent(text="partial")]


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        pytest.param(
            [message_start(), *text_frames("x")],
            "Anthropic stream ended before message_stop",
            id="no-message-stop",
        ),
        pytest.param(
            [message_start(), *text_frames("x"), message_delta(None), MESSAGE_STOP],
            "Anthropic stream ended without a stop reason",
            id="no-stop-reason",
        ),
        pytest.param([], "Anthropic stream ended without a stop reason", id="empty"),
        pytest.param(
            [message_start(), message_delta("refusal"), MESSAGE_STOP],
            "The model refused to complete the request",
            id="refusal",
        ),
        pytest.param(
            [
                message_start(),
                message_delta("refusal", stop_details={"explanation": "Not allowed."}),
                MESSAGE_STOP,
            ],
            "Not allowed.",
            id="refusal-explained",
        ),
        pytest.param(
            [message_start(), message_delta("sensitive"), MESSAGE_STOP],
            "Provider stopped with: sensitive",
            id="sensitive",
        ),
        pytest.param(
            [message_start(), message_delta("surprise"), MESSAGE_STOP],
            "Unhandled stop reason: surprise",
            id="unknown",
        ),
    ],
)
async def test_stream_shape_failures(
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


async def test_stream_ended_mid_block_keeps_partial_without_end(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "cut"}),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final_error(events).content == [TextContent(text="cut")]


OK_FRAMES = [message_start(), *text_frames("ok"), message_delta("end_turn"), MESSAGE_STOP]


async def test_retries_on_virtual_time(
    sse_server: SseServer, autojump_clock: trio.abc.Clock
) -> None:
    busy = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    sse_server.enqueue(
        error_response(503, busy, headers={"retry-after-ms": "250"}),
        error_response(529, busy, headers={"retry-after": "2"}),
        sse_response(OK_FRAMES),
    )
    async with httpx.AsyncClient(timeout=None) as client:
        start = trio.current_time()
        events = await collect(server_model(sse_server), client, max_retries=2)
    assert trio.current_time() - start == pytest.approx(2.25)
    assert types(events)[-1] == "done"
    assert len(sse_server.requests) == 3


async def test_retry_exhausted_and_delay_cap(
    sse_server: SseServer, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.enqueue(
        error_response(500, "down"),
        error_response(500, "still down"),
        error_response(429, "slow down", headers={"retry-after": "120"}),
    )
    async with httpx.AsyncClient(timeout=None) as client:
        events = await collect(server_model(sse_server), client, max_retries=1)
        assert final_error(events).error_message == "500 still down"
        events = await collect(server_model(sse_server), client, max_retries=3)
    assert final_error(events).error_message == (
        "Server requested 120s retry delay (max: 60s). 429 slow down"
    )
    assert len(sse_server.requests) == 3


async def test_missing_api_key(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    env = HttpEnv(client=http_client)
    context = LlmContext(messages=[UserMessage(content="hi")])
    async with aclosing(
        stream_anthropic(server_model(sse_server), context, StreamOptions(), env)
    ) as stream:
        events = [event async for event in stream]
    assert final_error(events).error_message == (
        "No API key for provider: anthropic (set ANTHROPIC_API_KEY or pass api_key)"
    )
    assert sse_server.requests == []


async def test_mid_stream_cancellation_closes_the_connection(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        ScriptedResponse(
            chunks=[message_start(), *text_frames("first")[:2]],
            hang=True,
        )
    )
    seen: list[str] = []
    env = HttpEnv(client=http_client)
    context = LlmContext(messages=[UserMessage(content="hi")])
    with trio.move_on_after(5) as outer:
        with trio.CancelScope() as scope:
            async with aclosing(
                stream_anthropic(server_model(sse_server), context, StreamOptions(api_key="k"), env)
            ) as stream:
                async for event in stream:
                    seen.append(event.type)
                    if event.type == "text_delta":
                        scope.cancel()
        assert scope.cancelled_caught
        await sse_server.client_closed.wait()
    assert not outer.cancelled_caught
    assert seen == ["start", "text_start", "text_delta"]
    assert sse_server.closed_by_client == 1


async def test_abort_signal_mid_stream(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        ScriptedResponse(chunks=[message_start(), *text_frames("first")[:2]], hang=True)
    )
    controller = AbortController()
    env = HttpEnv(client=http_client)
    context = LlmContext(messages=[UserMessage(content="hi")])
    events: list[AssistantMessageEvent] = []
    options = StreamOptions(api_key="k", signal=controller.signal)
    with trio.fail_after(5):
        async with aclosing(stream_anthropic(server_model(sse_server), context, options, env)) as s:
            async for event in s:
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


async def test_provider_events_are_forwarded_in_order(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([*OK_FRAMES[:1], PING, *OK_FRAMES[1:]]))
    raw: list[str] = []

    async def on_event(event: Any, model: Model) -> None:
        raw.append(event["type"])

    events = await collect(
        server_model(sse_server, max_tokens=0), http_client, on_provider_stream_event=on_event
    )
    assert types(events)[-1] == "done"
    assert raw == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert sse_server.requests[0].json()["max_tokens"] == 4096
