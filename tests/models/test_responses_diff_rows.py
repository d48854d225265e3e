"""openai-responses: differences from pi 1.6.0 found by the differential check.

Each test pins pi's behaviour for one finding: the request (strict tools, replayed ids of
another model, an explicit ``off`` level, OpenCode's session header), the wording of HTTP
errors and of error events, and the reasoning back-fill of a failed response.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sse_server import ScriptedResponse, SseServer, sse_chunk, sse_response
from test_openai_responses import (
    CREATED,
    WEATHER,
    assistant,
    collect,
    completed,
    ev,
    final_done,
    final_error,
    make_model,
    message_frames,
    request_body,
    server_model,
    types,
)

from trio_agent import (
    ImageContent,
    LlmContext,
    Message,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._openai_responses import build_responses_request

HI: list[Message] = [UserMessage(content="Hi")]

# ---------------------------------------------------------------------------------------
# Strict tools (U49): `strict` only for models that support strict mode


def test_tools_carry_no_strict_without_strict_mode() -> None:
    messages: list[Message] = [
        SystemMessage(content="Sys.", tools_added=[WEATHER]),
        UserMessage(content="Hi"),
    ]
    body = request_body(make_model(), messages)
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER.parameters,
        }
    ]
    strict_mode = make_model(compat={"supportsStrictMode": True})
    assert request_body(strict_mode, messages)["tools"][0]["strict"] is False


# ---------------------------------------------------------------------------------------
# Replayed tool calls of another model of the same provider and API (U58)


def test_call_of_another_model_of_the_same_provider_has_no_item_id() -> None:
    model = make_model()
    other = make_model(id="gpt-other")
    call = ToolCall(id="call_1|fc_1", name="get_weather", arguments={"city": "Oslo"})
    messages: list[Message] = [
        UserMessage(content="Weather?"),
        assistant([call], other),
        ToolResultMessage(
            tool_call_id="call_1|fc_1",
            tool_name="get_weather",
            content=[TextContent(text="Sunny")],
            timestamp=2,
        ),
        UserMessage(content="Thanks"),
    ]
    items = request_body(model, messages)["input"]
    assert items[1] == {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert items[2] == {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"}
    same = request_body(model, [messages[0], assistant([call], model), *messages[2:]])
    assert same["input"][1]["id"] == "fc_1"


# ---------------------------------------------------------------------------------------
# "off" on a model that cannot switch reasoning off


def test_off_is_no_level_when_off_is_unavailable() -> None:
    # The agent's "off" reaches the provider as "off"; pi's agent passes no level for it,
    # so it must not be clamped up to the model's lowest level. A real level is clamped.
    model = make_model(reasoning=True, thinking_level_map={"off": None, "minimal": None})
    messages = HI
    for options in (StreamOptions(reasoning="off"), StreamOptions()):
        body = request_body(model, messages, options)
        assert "reasoning" not in body
        assert "include" not in body
    body = request_body(model, messages, StreamOptions(reasoning="minimal"))
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}


# ---------------------------------------------------------------------------------------
# OpenCode's session header


def test_opencode_session_header() -> None:
    context = LlmContext(messages=list(HI))
    model = make_model(provider="opencode")
    request = build_responses_request(model, context, StreamOptions(session_id="sess-1"), "k")
    assert request.headers["x-opencode-session"] == "sess-1"
    given = StreamOptions(session_id="sess-1", headers={"X-OpenCode-Session": "mine"})
    assert "x-opencode-session" not in build_responses_request(model, context, given, "k").headers
    plain = build_responses_request(make_model(), context, StreamOptions(session_id="s"), "k")
    assert "x-opencode-session" not in plain.headers


# ---------------------------------------------------------------------------------------
# HTTP error texts (U07): the OpenAI client's message unless the error object says more


def raw_response(status: int, body: str) -> ScriptedResponse:
    chunks = [body.encode()] if body else []
    return ScriptedResponse(
        status=status, headers={"content-type": "application/json"}, chunks=chunks
    )


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, '{"error":null,"detail":"x"}', '400 {"error":null,"detail":"x"}'),
        (500, '{"detail":"x"}', '500 {"detail":"x"}'),
        (400, '"just a string"', "400 status code (no body)"),
        (404, "123", "404 status code (no body)"),
        (400, "null", "400 null"),
        (400, "false", "400 false"),
        (400, "[1,2]", "400 [1,2]"),
        (400, '{"error":{}}', "400 {}"),
        (400, '{"error":"str"}', '400 "str"'),
        (400, '{"error":""}', "400 status code (no body)"),
        (400, '{"error":{"code":"x"}}', '400 {"code":"x"}'),
        (400, '{"error":{"message":""}}', '400 {"message":""}'),
        (400, '{"error":{"message":"m","code":1}}', '{"message":"m","code":1}'),
        (400, '{"error":{"message":{"a":1}}}', '{"message":{"a":1}}'),
    ],
)
async def test_http_error_text_follows_the_openai_client(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    status: int,
    body: str,
    expected: str,
) -> None:
    sse_server.enqueue(raw_response(status, body))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["error"]
    assert final_error(events).error_message == f"OpenAI API error ({status}): {expected}"


# ---------------------------------------------------------------------------------------
# Error events (U32): the client's wording


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        (
            sse_chunk({"type": "error", "code": None, "message": "rate limited", "param": None}),
            "Error Code null: rate limited",
        ),
        (sse_chunk({"type": "error", "message": "no code"}), "Error Code undefined: no code"),
        (sse_chunk({"type": "error", "code": 42, "message": None}), "Error Code 42: null"),
        (
            sse_chunk({"type": "error", "error": {"message": "nested boom", "code": "x"}}),
            "nested boom",
        ),
        (sse_chunk({"type": "error", "error": {"code": "x"}}), '{"code":"x"}'),
        (
            sse_chunk({"type": "error", "code": "c", "message": None}, event="error"),
            '{"type":"error","code":"c","message":null}',
        ),
        (
            sse_chunk({"type": "error", "error": None, "message": "top"}, event="error"),
            "top",
        ),
        (
            sse_chunk({"type": "response.in_progress", "error": {"message": "odd"}}),
            "odd",
        ),
    ],
)
async def test_error_event_text(
    sse_server: SseServer, http_client: httpx.AsyncClient, frame: bytes, expected: str
) -> None:
    sse_server.enqueue(sse_response([CREATED, frame]))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "error"]
    assert final_error(events).error_message == expected


# ---------------------------------------------------------------------------------------
# A failed response: its output does not back-fill encrypted reasoning


async def test_failed_response_does_not_backfill_reasoning(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    item: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}
    full = {**item, "encrypted_content": "ENC"}
    frames = [
        CREATED,
        ev("response.output_item.added", output_index=0, item=item),
        ev("response.output_item.done", output_index=0, item=item),
        ev(
            "response.failed",
            response={"id": "resp_1", "status": "failed", "output": [full], "error": None},
        ),
    ]
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    error = final_error(events)
    assert error.error_message == "Unknown error (no error details in response)"
    assert error.content == [
        ThinkingContent(
            thinking="", thinking_signature='{"type":"reasoning","id":"rs_1","summary":[]}'
        )
    ]
    sse_server.enqueue(sse_response([*frames[:3], completed(output=[full])]))
    events = await collect(server_model(sse_server), http_client)
    done_block = final_done(events).message.content[0]
    assert isinstance(done_block, ThinkingContent)
    assert done_block.thinking_signature == (
        '{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ENC"}'
    )


# ---------------------------------------------------------------------------------------
# Session affinity, xAI's encrypted reasoning, explicit prompt caching


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, {"session-id": "s1", "x-client-request-id": "s1"}),
        ({"provider": "openrouter"}, {"x-session-id": "s1"}),
        ({"base_url": "https://openrouter.ai/api/v1"}, {"x-session-id": "s1"}),
        ({"compat": {"sessionAffinityFormat": "openrouter"}}, {"x-session-id": "s1"}),
        (
            {"provider": "openrouter", "compat": {"sessionAffinityFormat": "openai"}},
            {"session-id": "s1", "x-client-request-id": "s1"},
        ),
        ({"compat": {"sessionAffinityFormat": "none"}}, {"x-client-request-id": "s1"}),
    ],
)
def test_session_affinity_headers(changes: dict[str, Any], expected: dict[str, str]) -> None:
    context = LlmContext(messages=list(HI))
    request = build_responses_request(
        make_model(**changes), context, StreamOptions(session_id="s1"), "k"
    )
    assert request.headers == expected


def test_xai_always_asks_for_encrypted_reasoning() -> None:
    model = make_model(provider="xai", reasoning=True)
    body = request_body(model, HI)
    assert body["reasoning"] == {"effort": "none"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert "include" not in request_body(make_model(provider="xai"), HI)


@pytest.mark.parametrize(
    ("compat", "options"),
    [
        ({"cacheRetention": "none"}, {"mode": "explicit"}),
        ({"cacheRetention": "short"}, None),
        ({"cacheRetention": "long"}, {"ttl": "30m"}),
        ({"cacheRetention": "long", "supportsLongCacheRetention": False}, None),
    ],
)
def test_explicit_prompt_cache_mode(compat: dict[str, Any], options: Any) -> None:
    model = make_model(compat={"supportsExplicitPromptCacheMode": True, **compat})
    body = request_body(model, HI, StreamOptions(session_id="s"))
    assert body.get("prompt_cache_options") == options
    assert "prompt_cache_retention" not in body


# ---------------------------------------------------------------------------------------
# Arguments in output_item.added count at once (U34), even if the call never finishes


async def test_arguments_of_the_added_item_count_before_the_done_item(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    frames = [CREATED, ev("response.output_item.added", output_index=0, item=item), completed()]
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "toolcall_start", "toolcall_delta", "error"]
    error = final_error(events)
    assert error.error_message == (
        "OpenAI Responses stream completed with an unfinished tool call: get_weather (call_1|fc_1)"
    )
    assert error.content == [
        ToolCall(id="call_1|fc_1", name="get_weather", arguments={"city": "Oslo"})
    ]


# ---------------------------------------------------------------------------------------
# The retry-delay message ends with the OpenAI client's message (U08)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"error":{}}', "503 {}"),
        ('"just a string"', "503 status code (no body)"),
        ('{"detail":"x"}', '503 {"detail":"x"}'),
        ('{"error":{"message":"slow down","code":1}}', "503 slow down"),
        ("plain text", "503 plain text"),
    ],
)
async def test_retry_delay_message_ends_with_the_client_message(
    sse_server: SseServer, http_client: httpx.AsyncClient, body: str, expected: str
) -> None:
    sse_server.enqueue(
        ScriptedResponse(
            status=503,
            headers={"content-type": "application/json", "retry-after": "120"},
            chunks=[body.encode()],
        )
    )
    events = await collect(server_model(sse_server), http_client, max_retries=1)
    assert final_error(events).error_message == (
        f"Server requested 120s retry delay (max: 60s). {expected}"
    )


def test_whitespace_text_of_a_tool_result_with_images_is_left_out() -> None:
    image = ImageContent(data="AAAA", mime_type="image/png")
    messages: list[Message] = [
        UserMessage(content="Shot?"),
        assistant([ToolCall(id="call_1|fc_1", name="shot", arguments={})], make_model()),
        ToolResultMessage(
            tool_call_id="call_1|fc_1",
            tool_name="shot",
            content=[TextContent(text=" "), image],
            timestamp=2,
        ),
    ]
    items = request_body(make_model(input=["text", "image"]), messages)["input"]
    assert items[2] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_image", "detail": "auto", "image_url": "data:image/png;base64,AAAA"}
        ],
    }


# ---------------------------------------------------------------------------------------
# A tool call left unfinished by a response cut at its length limit


async def test_unfinished_tool_call_of_a_length_cut_response(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "noop"}
    frames = [
        CREATED,
        ev("response.output_item.added", output_index=0, item={**item, "arguments": ""}),
        ev("response.function_call_arguments.delta", output_index=0, delta='{"a":'),
        completed("incomplete", incomplete_details={"reason": "max_output_tokens"}),
    ]
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    done = final_done(events)
    assert done.reason == "length"
    assert done.message.content == [
        ToolCall(
            id="call_1|fc_1",
            name="noop",
            arguments={},
            arguments_error=(
                'Expecting value: line 1 column 6 (char 5)\n\nReceived arguments:\n{"a":'
            ),
        )
    ]


# ---------------------------------------------------------------------------------------
# Text signatures: only {"v":1,"id":<string>} is structured, anything else is a bare id


@pytest.mark.parametrize(
    ("signature", "item_id", "phase"),
    [
        ('{"v":1,"id":"msg_a","phase":"commentary"}', "msg_a", "commentary"),
        ('{"v":1,"id":"msg_a","phase":"other"}', "msg_a", None),
        ('{"id":"msg_nov"}', '{"id":"msg_nov"}', None),
        ('{"v":1,"id":7}', '{"v":1,"id":7}', None),
        ("{bad json", "{bad json", None),
        ("msg_legacy", "msg_legacy", None),
    ],
)
def test_text_signature_ids(signature: str, item_id: str, phase: str | None) -> None:
    model = make_model()
    text = TextContent(text="Hello", text_signature=signature)
    messages: list[Message] = [
        UserMessage(content="Hi"),
        assistant([text], model, stop_reason="stop"),
        UserMessage(content="Again"),
    ]
    item = request_body(model, messages)["input"][1]
    assert item["id"] == item_id
    assert item.get("phase") == phase


# ---------------------------------------------------------------------------------------
# `data: [DONE]` ends the body, as the OpenAI client reads it


async def test_done_sentinel_ends_the_body(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames = [CREATED, *message_frames(0, "Hi"), b"data: [DONE]\n\n", completed()]
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    assert final_error(events).error_message == (
        "OpenAI Responses stream ended before a terminal response event"
    )
    sse_server.enqueue(
        sse_response([CREATED, *message_frames(0, "Hi"), completed(), b"data: [DONE]\n\n"])
    )
    events = await collect(server_model(sse_server), http_client)
    assert final_done(events).reason == "stop"


# ---------------------------------------------------------------------------------------
# Event JSON is parsed strictly (U38): no repair of raw control characters or bad escapes


@pytest.mark.parametrize(
    "data",
    [
        b'{"type":"response.output_text.delta","output_index":0,"delta":"raw\ttab"}',
        b'{"type":"response.output_text.delta","output_index":0,"delta":"bad \\H"}',
    ],
)
async def test_event_json_is_parsed_strictly(
    sse_server: SseServer, http_client: httpx.AsyncClient, data: bytes
) -> None:
    added, part = message_frames(0, "x")[:2]
    frames = [CREATED, added, part, b"data: " + data + b"\n\n", completed()]
    sse_server.enqueue(sse_response(frames))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "error"]
    assert final_error(events).error_message == (
        "Error reading response: malformed server-sent event JSON."
    )
