"""openai-completions against a real loopback HTTP server (and request-shape unit tests)."""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import attrs
import httpx
import pytest
import trio
from sse_server import SseServer, error_response, sse_chunk, sse_response

from trio_agent import (
    AbortController,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    ErrorEvent,
    ImageContent,
    LlmContext,
    Model,
    ModelCost,
    ProviderResponse,
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
from trio_agent.models._http import HttpEnv
from trio_agent.models._openai_completions import (
    build_openai_completions_body,
    detect_compat,
    stream_openai_completions,
)

KEY = "sk-test-key-1234567890"


def make_model(base_url: str, **changes: Any) -> Model:
    model = Model(
        id="gpt-test",
        name="Test",
        api="openai-completions",
        provider="custom",
        base_url=f"{base_url}/v1",
        input=["text", "image"],
        cost=ModelCost(input=1.0, output=2.0, cache_read=0.5, cache_write=0.0),
        context_window=128000,
        max_tokens=4096,
    )
    return attrs.evolve(model, **changes)


def hello_context() -> LlmContext:
    return LlmContext(
        messages=[
            SystemMessage(content="You are helpful.", timestamp=0),
            UserMessage(content="Hi", timestamp=1),
        ]
    )


def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}


TEXT_FRAMES: list[Any] = [
    chunk({"role": "assistant", "content": "Hel"}, id="chatcmpl-1", model="gpt-test"),
    chunk({"content": "lo"}),
    chunk({}, "stop"),
    {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}},
    "[DONE]",
]


async def collect(
    client: httpx.AsyncClient,
    model: Model,
    context: LlmContext | None = None,
    **options: Any,
) -> list[AssistantMessageEvent]:
    options.setdefault("api_key", KEY)
    stream = stream_openai_completions(
        model, context or hello_context(), StreamOptions(**options), HttpEnv(client=client)
    )
    async with aclosing(stream):
        return [event async for event in stream]


def types(events: list[AssistantMessageEvent]) -> list[str]:
    return [event.type for event in events]


def final(events: list[AssistantMessageEvent]) -> AssistantMessage:
    last = events[-1]
    assert isinstance(last, DoneEvent | ErrorEvent)
    return last.message if isinstance(last, DoneEvent) else last.error


# ---------------------------------------------------------------------------------------
# Streams


async def test_text_stream(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == [TextContent(text="Hello")]
    assert message.stop_reason == "stop"
    assert message.response_id == "chatcmpl-1"
    assert message.response_model is None
    assert message.usage.input == 10
    assert message.usage.output == 2
    assert message.usage.total_tokens == 12
    assert message.api == "openai-completions"
    assert message.provider == "custom"
    assert message.model == "gpt-test"
    assert message.duration_ms is not None
    (request,) = sse_server.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "store": False,
        "max_completion_tokens": 4096,
    }


async def test_thinking_text_and_tool_call(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    frames: list[Any] = [
        chunk({"reasoning_content": "Let me "}, id="chatcmpl-9", model="gpt-test-2024"),
        chunk({"reasoning_content": "think."}),
        chunk({"content": "Hello"}),
        chunk({"content": " world"}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({}, "tool_calls"),
        {
            "choices": [],
            "usage": {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_tokens_details": {"cached_tokens": 30},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
        },
        "[DONE]",
    ]
    sse_server.enqueue(sse_response(frames))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "text_start",
        "text_delta",
        "text_delta",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "thinking_end",
        "text_end",
        "toolcall_end",
        "done",
    ]
    assert [getattr(e, "content_index", None) for e in events[11:14]] == [0, 1, 2]
    deltas = [getattr(e, "delta", None) for e in events[8:11]]
    assert deltas == ["", '{"city":', '"Paris"}']
    # Partials are snapshots: the first text delta's partial still shows "Hello" only.
    assert events[5].type == "text_delta"
    assert events[5].partial.content[1] == TextContent(text="Hello")
    message = final(events)
    assert message.content == [
        ThinkingContent(thinking="Let me think.", thinking_signature="reasoning_content"),
        TextContent(text="Hello world"),
        ToolCall(id="call_1", name="get_weather", arguments={"city": "Paris"}),
    ]
    assert message.stop_reason == "toolUse"
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].reason == "toolUse"
    assert message.response_id == "chatcmpl-9"
    assert message.response_model == "gpt-test-2024"
    usage = message.usage
    assert (usage.input, usage.cache_read, usage.cache_write) == (70, 30, 0)
    assert (usage.output, usage.reasoning, usage.total_tokens) == (20, 5, 120)
    assert usage.cost.input == pytest.approx(70e-6)
    assert usage.cost.output == pytest.approx(40e-6)
    assert usage.cost.cache_read == pytest.approx(15e-6)
    assert usage.cost.total == pytest.approx(125e-6)


async def test_text_after_tool_call_appends_to_the_single_text_block(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    frames: list[Any] = [
        chunk({"content": "a"}),
        chunk({"tool_calls": [call]}),
        chunk({"content": "b"}),
        chunk({}, "tool_calls"),
        "[DONE]",
    ]
    sse_server.enqueue(sse_response(frames))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert final(events).content == [
        TextContent(text="ab"),
        ToolCall(id="c1", name="f", arguments={}),
    ]


@pytest.mark.parametrize(
    ("finish_reason", "expected"),
    [("stop", "stop"), ("end", "stop"), ("length", "length"), ("function_call", "toolUse")],
)
async def test_finish_reason_mapping(
    sse_server: SseServer, http_client: httpx.AsyncClient, finish_reason: str, expected: str
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "x"}, finish_reason), "[DONE]"]))
    events = await collect(http_client, make_model(sse_server.base_url))
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.reason == expected
    assert last.message.stop_reason == expected


@pytest.mark.parametrize("finish_reason", ["content_filter", "weird"])
async def test_finish_reason_errors_keep_content(
    sse_server: SseServer, http_client: httpx.AsyncClient, finish_reason: str
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "partial"}, finish_reason), "[DONE]"]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    message = final(events)
    assert message.stop_reason == "error"
    assert message.error_message == f"Provider finish_reason: {finish_reason}"
    assert message.content == [TextContent(text="partial")]


async def test_stream_ended_without_finish_reason(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([chunk({"reasoning_content": "partial"})]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "thinking_start", "thinking_delta", "thinking_end", "error"]
    message = final(events)
    assert message.error_message == "Stream ended without finish_reason"
    assert message.content == [
        ThinkingContent(thinking="partial", thinking_signature="reasoning_content")
    ]


async def test_without_finish_reason_support_the_outcome_is_inferred(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    sse_server.enqueue(sse_response([chunk({"tool_calls": [call]})]))
    model = make_model(sse_server.base_url, compat={"supportsFinishReason": False})
    events = await collect(http_client, model)
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].reason == "toolUse"


async def test_malformed_json(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "ok"}), b"data: {nope\n\n"]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    message = final(events)
    assert message.error_message == "Error reading response: malformed server-sent event JSON."
    assert message.content == [TextContent(text="ok")]


async def test_error_chunk_in_stream(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response([{"error": {"message": "overloaded", "code": 503}}]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "error"]
    assert final(events).error_message == "overloaded"


async def test_early_eof(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "Hel"})], close_early=True))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    message = final(events)
    assert message.stop_reason == "error"
    assert message.error_message == (
        f"Connection error (127.0.0.1:{sse_server.port}): peer closed connection without "
        "sending complete message body (incomplete chunked read)"
    )
    assert message.content == [TextContent(text="Hel")]


# ---------------------------------------------------------------------------------------
# Request-phase failures


async def test_http_400_json_error(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    body = {"error": {"message": "bad thing", "type": "invalid_request_error"}}
    sse_server.enqueue(error_response(400, body))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["error"]
    message = final(events)
    assert message.error_message == '400: {"message":"bad thing","type":"invalid_request_error"}'
    assert message.content == []
    assert message.usage == Usage()


async def test_http_500_text_error(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(error_response(500, "  upstream exploded\n"))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["error"]
    assert final(events).error_message == "500   upstream exploded\n"


async def test_http_error_body_is_truncated(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(400, "x" * 4005))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert final(events).error_message == "400 " + "x" * 4005


async def test_http_error_openrouter_raw_metadata(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    body = {
        "error": {"message": "Provider returned error", "metadata": {"raw": "upstream said no"}}
    }
    sse_server.enqueue(error_response(502, body))
    events = await collect(http_client, make_model(sse_server.base_url))
    # the raw text is already part of the message, so it is not repeated (as upstream)
    assert final(events).error_message == (
        '502: {"message":"Provider returned error","metadata":{"raw":"upstream said no"}}'
    )
    body = {"error": {"message": "Provider returned error", "metadata": {"raw": 'said "no"'}}}
    sse_server.enqueue(error_response(502, body))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert final(events).error_message == (
        '502: {"message":"Provider returned error","metadata":{"raw":"said \\"no\\""}}\nsaid "no"'
    )


async def test_connection_refused(http_client: httpx.AsyncClient) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    events = await collect(http_client, make_model(f"http://127.0.0.1:{port}"))
    assert types(events) == ["error"]
    assert final(events).error_message == (
        f"Connection error (127.0.0.1:{port}): [Errno 111] Error connecting to "
        f"('127.0.0.1', {port}): "
        "Connection refused"
    )


async def test_missing_api_key(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = make_model(sse_server.base_url, provider="openai")
    events = await collect(http_client, model, api_key=None)
    assert types(events) == ["error"]
    assert final(events).error_message == (
        "No API key for provider: openai (set OPENAI_API_KEY or pass api_key)"
    )
    assert sse_server.requests == []


async def test_authorization_header_replaces_the_key(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sse_server.enqueue(sse_response(TEXT_FRAMES))
    model = make_model(sse_server.base_url, provider="openai")
    events = await collect(http_client, model, api_key=None, headers={"Authorization": "Token abc"})
    assert types(events)[-1] == "done"
    assert sse_server.requests[0].headers["authorization"] == "Token abc"


async def test_env_api_key_never_leaks(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-env-secret-abcdef123456"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    body = {"error": {"message": f"Incorrect API key provided: {secret}", "type": "auth"}}
    sse_server.enqueue(error_response(401, body))
    model = make_model(sse_server.base_url, provider="openai")
    events = await collect(http_client, model, api_key=None)
    assert sse_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    assert final(events).error_message == (
        '401: {"message":"Incorrect API key provided: [REDACTED]","type":"auth"}'
    )
    for event in events:
        assert secret not in repr(event)
    assert secret not in repr(StreamOptions(api_key=secret))


@pytest.mark.parametrize(
    "options",
    [{"api_key": "sk-secret-123456\n"}, {"headers": {"Authorization": "Bearer sk-secret-9\n"}}],
)
async def test_a_key_with_a_control_character_fails_without_leaking_it(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, Any],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = make_model(sse_server.base_url, provider="openai")
    events = await collect(http_client, model, **{"api_key": None, **options})
    assert types(events) == ["error"]
    assert final(events).error_message == (
        "Invalid API key for provider: openai (it contains a control character)"
    )
    assert sse_server.requests == []
    assert "secret" not in repr(events)


async def test_headers_merge_and_delete(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))
    model = make_model(sse_server.base_url, headers={"X-Model": "m", "X-Both": "model"})
    await collect(
        http_client,
        model,
        headers={"x-both": "options", "User-Agent": None, "X-Extra": "e"},
    )
    headers = sse_server.requests[0].headers
    assert headers["x-model"] == "m"
    assert headers["x-both"] == "options"
    assert headers["x-extra"] == "e"
    # Deleting our default lets httpx's own default through.
    assert headers["user-agent"].startswith("python-httpx/")


# ---------------------------------------------------------------------------------------
# Retries on Trio's clock


async def test_retries_two_503_then_success(
    sse_server: SseServer, http_client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    busy = error_response(503, "busy", headers={"retry-after-ms": "50"})
    sse_server.enqueue(busy, busy, sse_response(TEXT_FRAMES))
    start = trio.current_time()
    events = await collect(http_client, make_model(sse_server.base_url), max_retries=2)
    assert types(events)[-1] == "done"
    assert len(sse_server.requests) == 3
    assert trio.current_time() - start == pytest.approx(0.1)


async def test_no_retries_by_default(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(error_response(503, "busy"), sse_response(TEXT_FRAMES))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["error"]
    assert final(events).error_message == "503 busy"
    assert len(sse_server.requests) == 1


async def test_retry_delay_above_the_cap_fails_at_once(
    sse_server: SseServer, http_client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.enqueue(error_response(429, "slow down", headers={"retry-after": "120"}))
    start = trio.current_time()
    events = await collect(http_client, make_model(sse_server.base_url), max_retries=3)
    assert types(events) == ["error"]
    assert final(events).error_message == (
        "Server requested 120s retry delay (max: 60s). 429 slow down"
    )
    assert len(sse_server.requests) == 1
    assert trio.current_time() == start


async def test_zero_cap_disables_the_retry_delay_limit(
    sse_server: SseServer, http_client: httpx.AsyncClient, autojump_clock: trio.abc.Clock
) -> None:
    sse_server.enqueue(
        error_response(429, "slow down", headers={"retry-after": "120"}), sse_response(TEXT_FRAMES)
    )
    start = trio.current_time()
    events = await collect(
        http_client, make_model(sse_server.base_url), max_retries=1, max_retry_delay_ms=0
    )
    assert types(events)[-1] == "done"
    assert trio.current_time() - start == 120


async def test_x_should_retry_false_forbids_a_retry(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(error_response(503, "no", headers={"x-should-retry": "false"}))
    events = await collect(http_client, make_model(sse_server.base_url), max_retries=3)
    assert final(events).error_message == "503 no"
    assert len(sse_server.requests) == 1


# ---------------------------------------------------------------------------------------
# Cancellation and abort


async def test_cancelling_the_consumer_closes_the_connection(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "Hel"})], hang=True))
    seen: list[str] = []
    stream = stream_openai_completions(
        make_model(sse_server.base_url),
        hello_context(),
        StreamOptions(api_key=KEY),
        HttpEnv(client=http_client),
    )
    with trio.CancelScope() as scope:
        async for event in stream:
            seen.append(event.type)
            if event.type == "text_delta":
                scope.cancel()
    assert scope.cancelled_caught
    assert seen == ["start", "text_start", "text_delta"]
    with trio.fail_after(5):
        await sse_server.client_closed.wait()
    assert sse_server.closed_by_client == 1
    await stream.aclose()


async def test_cancellation_propagates_from_a_pending_read(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "Hel"})], hang=True))
    seen: list[str] = []

    async def consume() -> None:
        stream = stream_openai_completions(
            make_model(sse_server.base_url),
            hello_context(),
            StreamOptions(api_key=KEY),
            HttpEnv(client=http_client),
        )
        async with aclosing(stream):
            async for event in stream:
                seen.append(event.type)

    with trio.move_on_after(0.5) as scope:
        await consume()
    assert scope.cancelled_caught
    assert seen == ["start", "text_start", "text_delta"]
    with trio.fail_after(5):
        await sse_server.client_closed.wait()


async def test_abort_signal_mid_stream_keeps_partial_content(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "Hel"})], hang=True))
    controller = AbortController()
    events: list[AssistantMessageEvent] = []
    stream = stream_openai_completions(
        make_model(sse_server.base_url),
        hello_context(),
        StreamOptions(api_key=KEY, signal=controller.signal),
        HttpEnv(client=http_client),
    )
    async with aclosing(stream):
        async for event in stream:
            events.append(event)
            if event.type == "text_delta":
                controller.abort()
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.reason == "aborted"
    assert last.error.stop_reason == "aborted"
    assert last.error.error_message == "Request was aborted"
    assert last.error.content == [TextContent(text="Hel")]
    with trio.fail_after(5):
        await sse_server.client_closed.wait()


async def test_abort_while_waiting_for_the_body(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([], hang=True))
    controller = AbortController()

    async def abort_soon() -> None:
        await trio.sleep(0.2)
        controller.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        events = await collect(
            http_client, make_model(sse_server.base_url), signal=controller.signal
        )
    assert types(events) == ["start", "error"]
    assert final(events).error_message == "Request was aborted"


async def test_pre_aborted_signal(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    controller = AbortController()
    controller.abort()
    events = await collect(http_client, make_model(sse_server.base_url), signal=controller.signal)
    assert types(events) == ["error"]
    last = events[-1]
    assert isinstance(last, ErrorEvent)
    assert last.reason == "aborted"
    assert last.error.error_message == "Request was aborted"
    assert sse_server.requests == []


# ---------------------------------------------------------------------------------------
# Hooks


async def test_on_payload_replacement_forces_stream(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))
    seen: list[tuple[dict[str, Any], str]] = []

    async def on_payload(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append((payload, model.id))
        return {"model": "replaced", "messages": [], "stream": False}

    await collect(http_client, make_model(sse_server.base_url), on_payload=on_payload)
    assert seen[0][1] == "gpt-test"
    assert seen[0][0]["model"] == "gpt-test"
    assert sse_server.requests[0].json() == {"model": "replaced", "messages": [], "stream": True}


async def test_on_payload_returning_none_keeps_the_body(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))

    def on_payload(payload: dict[str, Any], model: Model) -> None:
        payload["temperature"] = 0.25

    await collect(http_client, make_model(sse_server.base_url), on_payload=on_payload)
    assert sse_server.requests[0].json()["temperature"] == 0.25


async def test_on_payload_raising_ends_with_its_message(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    def on_payload(payload: dict[str, Any], model: Model) -> None:
        raise RuntimeError("payload boom")

    events = await collect(http_client, make_model(sse_server.base_url), on_payload=on_payload)
    assert types(events) == ["error"]
    assert final(events).error_message == "payload boom"
    assert sse_server.requests == []


async def test_on_response_and_provider_events(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))
    order: list[str] = []
    responses: list[ProviderResponse] = []
    raw_events: list[Any] = []

    async def on_response(response: ProviderResponse, model: Model) -> None:
        order.append("response")
        responses.append(response)

    def on_provider_stream_event(raw: Any, model: Model) -> None:
        order.append("raw")
        raw_events.append(raw)

    events = await collect(
        http_client,
        make_model(sse_server.base_url),
        on_response=on_response,
        on_provider_stream_event=on_provider_stream_event,
    )
    assert types(events)[-1] == "done"
    assert responses[0].status == 200
    assert responses[0].headers["content-type"] == "text/event-stream"
    assert order == ["response", "raw", "raw", "raw", "raw"]
    assert raw_events == TEXT_FRAMES[:4]


async def test_on_provider_stream_event_raising(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response(TEXT_FRAMES))

    def on_provider_stream_event(raw: Any, model: Model) -> None:
        raise ValueError("hook failed")

    events = await collect(
        http_client,
        make_model(sse_server.base_url),
        on_provider_stream_event=on_provider_stream_event,
    )
    assert types(events) == ["start", "error"]
    assert final(events).error_message == "hook failed"


# ---------------------------------------------------------------------------------------
# Request shape (no network)


def shape_model(**changes: Any) -> Model:
    return attrs.evolve(make_model("http://localhost:1"), **changes)


def body(model: Model, messages: list[Any], **options: Any) -> dict[str, Any]:
    return build_openai_completions_body(
        model, LlmContext(messages=messages), StreamOptions(**options)
    )


def test_system_messages_are_collapsed() -> None:
    messages = [
        SystemMessage(content="You are helpful.", timestamp=0),
        UserMessage(content="hi", timestamp=1),
        SystemMessage(content="Now be terse.", sections={"rules": "<rules>x</rules>"}, timestamp=2),
    ]
    result = body(shape_model(), messages)
    assert result["messages"] == [
        {"role": "system", "content": "You are helpful.\n\nNow be terse.\n\n<rules>x</rules>"},
        {"role": "user", "content": "hi"},
    ]


def test_developer_role_for_openai_reasoning_models() -> None:
    model = shape_model(provider="openai", reasoning=True)
    result = body(model, [SystemMessage(content="sys", timestamp=0)])
    assert result["messages"] == [{"role": "developer", "content": "sys"}]
    plain = body(shape_model(reasoning=True), [SystemMessage(content="sys", timestamp=0)])
    assert plain["messages"] == [{"role": "system", "content": "sys"}]


def test_user_parts_and_images() -> None:
    user = UserMessage(
        content=[
            TextContent(text="look"),
            TextContent(text=""),
            ImageContent(data="AAAA", mime_type="image/png"),
        ],
        timestamp=0,
    )
    assert body(shape_model(), [user])["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        }
    ]
    text_only = body(shape_model(input=["text"]), [user])
    assert text_only["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": "(image omitted: model does not support images)"},
    ]
    empty = UserMessage(content=[TextContent(text="")], timestamp=0)
    assert body(shape_model(), [empty])["messages"] == []


def assistant(*content: Any, **changes: Any) -> AssistantMessage:
    fields: dict[str, Any] = {
        "content": list(content),
        "api": "openai-completions",
        "provider": "custom",
        "model": "gpt-test",
        "stop_reason": "toolUse",
        "timestamp": 0,
    }
    fields.update(changes)
    return AssistantMessage(**fields)


def test_assistant_replay_and_tool_results() -> None:
    messages = [
        UserMessage(content="go", timestamp=0),
        assistant(
            ThinkingContent(thinking="hmm", thinking_signature="reasoning_content"),
            TextContent(text="Sure."),
            TextContent(text="  "),
            ToolCall(id="c1", name="shot", arguments={"q": "x"}),
            ToolCall(id="c2", name="read", arguments={}),
        ),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="shot",
            content=[ImageContent(data="BBBB", mime_type="image/jpeg")],
            timestamp=0,
        ),
        ToolResultMessage(
            tool_call_id="c2",
            tool_name="read",
            content=[TextContent(text="line1"), TextContent(text="line2")],
            timestamp=0,
        ),
        UserMessage(content="thanks", timestamp=0),
    ]
    assert body(shape_model(), messages)["messages"] == [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "Sure.",
            "reasoning_content": "hmm",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "shot", "arguments": '{"q":"x"}'},
                },
                {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "(see attached image)"},
        {"role": "tool", "tool_call_id": "c2", "content": "line1\nline2"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,BBBB"}},
            ],
        },
        {"role": "user", "content": "thanks"},
    ]


def test_compat_switches_for_tool_history() -> None:
    messages = [
        UserMessage(content="go", timestamp=0),
        assistant(ToolCall(id="c1", name="f", arguments={})),
        ToolResultMessage(tool_call_id="c1", tool_name="f", content=[], timestamp=0),
        UserMessage(content="next", timestamp=0),
    ]
    model = shape_model(
        compat={
            "requiresToolResultName": True,
            "requiresAssistantAfterToolResult": True,
            "requiresNonNullAssistantContent": True,
            "requiresToolsWithToolHistory": True,
        }
    )
    result = body(model, messages)
    assert result["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "(no tool output)", "name": "f"},
        {"role": "assistant", "content": "I have processed the tool results."},
        {"role": "user", "content": "next"},
    ]
    assert result["tools"] == []
    assert "tools" not in body(shape_model(), messages)


def test_orphaned_tool_call_and_foreign_ids() -> None:
    foreign = assistant(
        ThinkingContent(thinking="secret", thinking_signature="sig"),
        ToolCall(id="call_abc|fc_item+1", name="f", arguments={}),
        api="openai-responses",
        provider="openai",
        model="gpt-5",
    )
    result = body(shape_model(), [UserMessage(content="go", timestamp=0), foreign])
    assert result["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_abc_fc_item_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc_fc_item_1", "content": "No result provided"},
    ]


@pytest.mark.parametrize(
    ("retention", "base_url", "expected"),
    [
        (None, "https://api.openai.com/v1", {"prompt_cache_key": "sess-1"}),
        (None, "http://localhost:8000/v1", {}),
        ("none", "https://api.openai.com/v1", {}),
        (
            "long",
            "http://localhost:8000/v1",
            {"prompt_cache_key": "sess-1", "prompt_cache_retention": "24h"},
        ),
    ],
)
def test_prompt_cache_key_follows_cache_retention(
    retention: str | None, base_url: str, expected: dict[str, str]
) -> None:
    compat = {"cacheRetention": retention} if retention else None
    model = shape_model(base_url=base_url, compat=compat)
    result = body(model, [UserMessage(content="hi", timestamp=1)], session_id="sess-1")
    cache_fields = {k: v for k, v in result.items() if k.startswith("prompt_cache")}
    assert cache_fields == expected


def test_tools_temperature_reasoning_and_cache_key() -> None:
    tool = ToolDeclaration(
        name="read", description="Read a file", parameters={"type": "object", "properties": {}}
    )
    model = shape_model(provider="openai", base_url="https://api.openai.com/v1", reasoning=True)
    result = body(
        model,
        [SystemMessage(content="s", tools_added=[tool], timestamp=0)],
        temperature=0.5,
        reasoning="max",
        session_id="s" * 80,
    )
    assert result["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    assert result["temperature"] == 0.5
    assert result["reasoning_effort"] == "high"
    assert result["prompt_cache_key"] == "s" * 64
    assert list(result) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "store",
        "max_completion_tokens",
        "temperature",
        "tools",
        "reasoning_effort",
        "prompt_cache_key",
    ]


def test_reasoning_effort_rules() -> None:
    mapped = shape_model(reasoning=True, thinking_level_map={"low": "lite", "off": "none"})
    assert body(mapped, [], reasoning="low")["reasoning_effort"] == "lite"
    assert body(mapped, [])["reasoning_effort"] == "none"
    assert "reasoning_effort" not in body(shape_model(reasoning=False), [], reasoning="high")
    assert "reasoning_effort" not in body(shape_model(reasoning=True), [], reasoning="off")
    router = shape_model(reasoning=True, provider="openrouter")
    assert body(router, [], reasoning="medium")["reasoning"] == {"effort": "medium"}


def test_compat_detection() -> None:
    deepseek = shape_model(provider="deepseek", base_url="https://api.deepseek.com")
    compat = detect_compat(deepseek)
    assert compat.max_tokens_field == "max_tokens"
    assert compat.supports_store is False
    result = body(deepseek, [])
    assert "store" not in result
    assert result["max_tokens"] == 4096
    explicit = shape_model(
        provider="deepseek",
        compat={"supportsStore": True, "max_tokens_field": "max_completion_tokens"},
    )
    assert detect_compat(explicit).supports_store is True
    assert detect_compat(explicit).max_tokens_field == "max_completion_tokens"
    no_usage = shape_model(compat={"supportsUsageInStreaming": False})
    assert "stream_options" not in body(no_usage, [])


def test_max_tokens_option_and_context_clamp() -> None:
    assert body(shape_model(), [], max_tokens=100)["max_completion_tokens"] == 100
    small = shape_model(context_window=10000, max_tokens=8000)
    # room = min(32768, 10000 - 0 - 4096)
    assert body(small, [])["max_completion_tokens"] == 5904
    assert "max_completion_tokens" not in body(shape_model(max_tokens=0), [])


def test_lone_surrogates_are_removed() -> None:
    result = body(shape_model(), [UserMessage(content="a\ud800b", timestamp=0)])
    assert result["messages"] == [{"role": "user", "content": "ab"}]
    assert json.dumps(result, ensure_ascii=False).encode()


async def test_request_shape_through_mock_transport() -> None:
    captured: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        stream = b"".join(
            sse_chunk(frame) for frame in [chunk({"content": "ok"}, "stop"), "[DONE]"]
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        events = await collect(client, shape_model())
    assert types(events)[-1] == "done"
    (request,) = captured
    assert str(request.url) == "http://localhost:1/v1/chat/completions"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["user-agent"] == "trio-agent/0.1.0"
    assert json.loads(request.content)["stream"] is True
