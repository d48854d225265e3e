"""anthropic-messages: the parity rows (error texts, usage and cost, stream mapping)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sse_server import ScriptedResponse, SseServer, sse_response
from test_anthropic import (
    MESSAGE_STOP,
    assistant,
    block_delta,
    block_start,
    block_stop,
    collect,
    final_error,
    frame,
    make_model,
    message_delta,
    message_start,
    request_body,
    server_model,
    text_frames,
    types,
)

from trio_agent import (
    DoneEvent,
    ImageContent,
    LlmContext,
    Model,
    ModelCost,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._anthropic import (
    build_anthropic_request,
    format_anthropic_http_error,
    normalize_anthropic_beta,
)
from trio_agent.models._http import HttpError

PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)


def raw_response(
    status: int, body: str, content_type: str = "application/json"
) -> ScriptedResponse:
    chunks = [body.encode()] if body else []
    return ScriptedResponse(status=status, headers={"content-type": content_type}, chunks=chunks)


# ---------------------------------------------------------------------------------------
# U11 · HTTP error texts


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('{"message":"top-level message","code":7}', "400 top-level message"),
        ('{"message":7,"code":7}', '400 {"message":7,"code":7}'),
        (
            '{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}',
            '400 {"type":"error","error":{"type":"invalid_request_error","message":"bad"}}',
        ),
        ("<html><body>Bad Gateway</body></html>\n", "400 <html><body>Bad Gateway</body></html>\n"),
        ("", "400 status code (no body)"),
    ],
)
async def test_http_error_text(
    sse_server: SseServer, http_client: httpx.AsyncClient, body: str, expected: str
) -> None:
    sse_server.enqueue(raw_response(400, body))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["error"]
    assert final_error(events).error_message == expected


def test_a_long_json_error_body_is_not_cut() -> None:
    body = '{"error":{"message":"' + "x" * 5031 + '"}}'
    assert len(body) == 5055
    error = HttpError(status=400, headers={}, body=body)
    assert format_anthropic_http_error(error, make_model()) == f"400 {body}"


# ---------------------------------------------------------------------------------------
# U21 · one-hour cache writes · U22 · OpenRouter's billed cost


async def test_one_hour_cache_writes_cost_twice_the_input_rate(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    start_usage = {
        "input_tokens": 50,
        "output_tokens": 1,
        "cache_read_input_tokens": 10,
        "cache_creation_input_tokens": 40,
        "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30},
    }
    sse_server.enqueue(
        sse_response(
            [
                frame("message_start", {"message": {"id": "m", "usage": start_usage}}),
                *text_frames("ok"),
                message_delta("end_turn", usage={"output_tokens": 30}),
                MESSAGE_STOP,
            ]
        ),
        sse_response(
            [
                message_start(input_tokens=5, output_tokens=1),
                *text_frames("ok"),
                message_delta(
                    "end_turn",
                    usage={
                        "output_tokens": 2,
                        "cache_creation_input_tokens": 20,
                        "cache_creation": {"ephemeral_1h_input_tokens": 20},
                    },
                ),
                MESSAGE_STOP,
            ]
        ),
    )
    model = server_model(sse_server, cost=PRICES)
    first = (await collect(model, http_client))[-1]
    assert isinstance(first, DoneEvent)
    assert first.message.usage.cache_write == 40
    assert first.message.usage.cost.cache_write == pytest.approx(0.0002175)
    assert first.message.usage.cost.total == pytest.approx(0.0008205)
    second = (await collect(model, http_client))[-1]
    assert isinstance(second, DoneEvent)
    assert second.message.usage.cost.cache_write == pytest.approx(0.00012)
    assert second.message.usage.cost.total == pytest.approx(0.000165)


@pytest.mark.parametrize(
    ("provider", "extra", "total"),
    [
        ("openrouter", {}, 0.000336),
        ("openrouter", {"cost": 0.00123}, 0.000336),
        ("openrouter", {"cost": 0.00123, "is_byok": False}, 0.00123),
        (
            "openrouter",
            {"cost": 0.0001, "is_byok": True, "cost_details": {"upstream_inference_cost": 0.002}},
            0.0021,
        ),
        ("anthropic", {"cost": 0.00123, "is_byok": False}, 0.000336),
    ],
)
async def test_openrouter_billed_cost(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    provider: str,
    extra: dict[str, Any],
    total: float,
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(input_tokens=12, output_tokens=1),
                *text_frames("ok"),
                message_delta("end_turn", usage={"output_tokens": 20, **extra}),
                MESSAGE_STOP,
            ]
        )
    )
    done = (await collect(server_model(sse_server, provider=provider, cost=PRICES), http_client))[
        -1
    ]
    assert isinstance(done, DoneEvent)
    assert done.message.usage.cost.input == pytest.approx(0.000036)
    assert done.message.usage.cost.output == pytest.approx(0.0003)
    assert done.message.usage.cost.total == pytest.approx(total)


# ---------------------------------------------------------------------------------------
# U23 · usage before an unknown stop reason (documented)


async def test_usage_is_applied_before_an_unknown_stop_reason_fails(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(input_tokens=12, output_tokens=1),
                *text_frames("ok"),
                message_delta("surprise", usage={"output_tokens": 3}),
                MESSAGE_STOP,
            ]
        )
    )
    message = final_error(await collect(server_model(sse_server), http_client))
    assert message.error_message == "Unhandled stop reason: surprise"
    assert message.usage.output == 3
    assert message.content == [TextContent(text="ok")]


# ---------------------------------------------------------------------------------------
# U24 · tool start input kept (documented)


async def test_tool_use_start_input_without_deltas_is_kept(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(
                    0,
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read",
                        "input": {"path": "/init"},
                    },
                ),
                block_stop(0),
                message_delta("tool_use"),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "toolcall_start", "toolcall_end", "done"]
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content == [
        ToolCall(id="toolu_1", name="read", arguments={"path": "/init"})
    ]


# ---------------------------------------------------------------------------------------
# U25 · events without an `event:` line are mapped by type (documented)


def unnamed(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


async def test_events_without_an_event_line_are_mapped_by_type(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                unnamed({"type": "message_start", "message": {"id": "m", "usage": {}}}),
                unnamed(
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
                ),
                unnamed(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "Hi"},
                    }
                ),
                unnamed({"type": "content_block_stop", "index": 0}),
                unnamed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
                unnamed({"type": "message_stop"}),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]


# ---------------------------------------------------------------------------------------
# U26 · nothing after message_stop is read (documented)


async def test_an_error_event_after_message_stop_is_ignored(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    late = '{"type":"error","error":{"type":"api_error","message":"late"}}'
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                *text_frames("ok"),
                message_delta("end_turn"),
                MESSAGE_STOP,
                f"event: error\ndata: {late}\n\n".encode(),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.reason == "stop"


# ---------------------------------------------------------------------------------------
# U27 · a mid-output fallback block fails


async def test_a_fallback_block_after_content_fails(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                *text_frames("partial"),
                block_start(1, {"type": "fallback", "model": "claude-other"}),
                block_stop(1),
                *[f.replace(b'"index":0', b'"index":2') for f in text_frames("more")],
                message_delta("end_turn"),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    message = final_error(events)
    assert message.error_message == "Anthropic performed an unsupported mid-output model fallback"
    assert message.content == [TextContent(text="partial")]


# ---------------------------------------------------------------------------------------
# U28 · stream-shape texts


async def test_an_empty_body_has_no_stop_reason(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([]))
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "error"]
    assert final_error(events).error_message == "Anthropic stream ended without a stop reason"


@pytest.mark.parametrize(
    ("data", "tail"),
    [
        (
            "{this is not json}",
            "; data={this is not json}; raw=event: content_block_delta\\ndata: {this is not json}",
        ),
        ("", "; data=; raw=event: content_block_delta\\ndata: "),
    ],
)
async def test_unparsable_event_data(
    sse_server: SseServer, http_client: httpx.AsyncClient, data: str, tail: str
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "so far"}),
                f"event: content_block_delta\ndata: {data}\n\n".encode(),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    message = final_error(events)
    assert message.error_message is not None
    assert message.error_message.startswith(
        "Could not parse Anthropic SSE event content_block_delta: "
    )
    assert message.error_message.endswith(tail)
    assert message.content == [TextContent(text="so far")]


# ---------------------------------------------------------------------------------------
# Request building


def conversation(*messages: Any, tools: list[ToolDeclaration] | None = None) -> list[Any]:
    return [SystemMessage(content="Sys.", tools_added=tools, timestamp=0), *messages]


HI = UserMessage(content="hi", timestamp=1)
TOOL = ToolDeclaration(name="read", description="Read", parameters={"type": "object"})


# U50 · an error tool result with images


def test_an_error_result_notes_where_its_images_were() -> None:
    model = make_model(input=["text", "image"])
    image = ImageContent(data="AAAA", mime_type="image/png")
    messages = conversation(
        HI,
        assistant([ToolCall(id="call_1", name="shot", arguments={})], model),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="shot",
            content=[
                TextContent(text="failed to decode"),
                image,
                image,
                TextContent(text="x"),
                image,
            ],
            is_error=True,
        ),
    )
    blocks = request_body(model, messages)["messages"][-1]["content"]
    assert blocks[0]["content"] == (
        "failed to decode\n(image attached after the tool results)\nx\n"
        "(image attached after the tool results)"
    )
    assert blocks[1] == {
        "type": "text",
        "text": "Images from the error result of tool call call_1 (shot):",
    }
    assert [block["type"] for block in blocks[2:]] == ["image", "image", "image"]


# U51 · a whitespace-only signature counts as missing


@pytest.mark.parametrize(
    ("compat", "expected"),
    [
        ({}, {"type": "text", "text": "whitespace sig"}),
        (
            {"allowEmptySignature": True},
            {"type": "thinking", "thinking": "whitespace sig", "signature": ""},
        ),
    ],
)
def test_a_blank_signature_is_missing(compat: dict[str, Any], expected: dict[str, Any]) -> None:
    model = make_model(compat={"cacheRetention": "none", **compat})
    messages = conversation(
        HI,
        assistant(
            [
                ThinkingContent(thinking="whitespace sig", thinking_signature="   "),
                TextContent(text="answer"),
            ],
            model,
            stop_reason="stop",
        ),
        UserMessage(content="more", timestamp=3),
    )
    replayed = request_body(model, messages)["messages"][1]["content"]
    assert replayed == [expected, {"type": "text", "text": "answer"}]


# U52 · same-model tool-call ids are normalised too (documented)


def test_same_model_tool_call_ids_are_normalised() -> None:
    model = make_model(compat={"cacheRetention": "none"})
    messages = conversation(
        HI,
        assistant([ToolCall(id="call.with.dots|fc_x", name="read", arguments={})], model),
        ToolResultMessage(
            tool_call_id="call.with.dots|fc_x", tool_name="read", content=[TextContent(text="ok")]
        ),
        assistant([ToolCall(id="c" * 70, name="read", arguments={})], model),
        ToolResultMessage(
            tool_call_id="c" * 70, tool_name="read", content=[TextContent(text="ok")]
        ),
    )
    sent = request_body(model, messages)["messages"]
    assert sent[1]["content"][0]["id"] == "call_with_dots_fc_x"
    assert sent[2]["content"][0]["tool_use_id"] == "call_with_dots_fc_x"
    assert sent[3]["content"][0]["id"] == "c" * 64
    assert sent[4]["content"][0]["tool_use_id"] == "c" * 64


# U53 · thinking budgets: pi-ai 1.6.0's rule (issue 18 item 14)


def budget_model(**changes: Any) -> Model:
    fields: dict[str, Any] = {
        "reasoning": True,
        "max_tokens": 32000,
        "context_window": 200000,
        "cost": PRICES,
        "compat": {"cacheRetention": "none"},
    }
    fields.update(changes)
    return make_model(**fields)


def limits(body: dict[str, Any]) -> tuple[int, int]:
    return body["max_tokens"], body["thinking"]["budget_tokens"]


def test_the_budget_follows_the_requested_level_unclamped() -> None:
    model = budget_model(thinking_level_map={"minimal": None, "low": "lo", "off": None})
    assert limits(request_body(model, conversation(HI), StreamOptions(reasoning="minimal"))) == (
        32000,
        1024,
    )
    assert limits(
        request_body(model, conversation(HI), StreamOptions(reasoning="minimal", max_tokens=1000))
    ) == (2024, 1000)


@pytest.mark.parametrize("window", [8000, 40000, 60000])
def test_a_full_context_leaves_no_budget_which_is_sent_as_1024(window: int) -> None:
    # pi's rule: the budget leaves 1024 tokens for the answer; none left is sent as 1024.
    model = budget_model(context_window=window)
    history = UserMessage(content="x" * int((window - 1000) * 3.5), timestamp=1)
    body = request_body(model, conversation(history), StreamOptions(reasoning="medium"))
    assert body["max_tokens"] == 1
    assert body["thinking"]["budget_tokens"] == 1024


@pytest.mark.parametrize(
    ("model_max", "level", "option", "expected"),
    [
        # issue 18 item 14; every row checked against pi-ai 1.6.0's own functions
        (32000, "minimal", 1000, (2024, 1000)),
        (1500, "low", None, (1500, 476)),
        (1500, "medium", None, (1500, 476)),
        # the option's room added, the budget cut to leave the answer 1024 tokens
        (32000, "low", 1000, (3048, 2024)),
        (32000, "high", None, (32000, 16384)),
        # the model's limit leaves the answer exactly 1024 tokens, or no budget (sent as 1024)
        (2048, "minimal", None, (2048, 1024)),
        (2049, "minimal", None, (2049, 1024)),
        (2047, "minimal", None, (2047, 1023)),
        (1025, "low", None, (1025, 1)),
        (1024, "minimal", None, (1024, 1024)),
        (1000, "high", None, (1000, 1024)),
        # an option above the model's limit: the model's limit
        (4000, "medium", 8000, (4000, 2976)),
        (4000, "xhigh", 100, (4000, 2976)),
    ],
)
def test_the_budget_leaves_1024_tokens_for_the_answer(
    model_max: int, level: str, option: int | None, expected: tuple[int, int]
) -> None:
    model = budget_model(max_tokens=model_max)
    options = StreamOptions(reasoning=level, max_tokens=option)  # type: ignore[arg-type]
    assert limits(request_body(model, conversation(HI), options)) == expected


# U55 · the tool-cache, long-retention and temperature switches


def test_cache_and_temperature_switches() -> None:
    model = make_model(compat={"cacheRetention": "long"})
    body = request_body(model, conversation(HI, tools=[TOOL]), StreamOptions(temperature=0.7))
    long = {"type": "ephemeral", "ttl": "1h"}
    assert body["system"][0]["cache_control"] == long
    assert body["tools"][-1]["cache_control"] == long
    assert body["messages"][-1]["content"][-1]["cache_control"] == long
    assert body["temperature"] == 0.7
    model = make_model(
        compat={
            "cacheRetention": "long",
            "supportsLongCacheRetention": False,
            "supportsCacheControlOnTools": False,
            "supportsTemperature": False,
        }
    )
    body = request_body(model, conversation(HI, tools=[TOOL]), StreamOptions(temperature=0.7))
    short = {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == short
    assert "cache_control" not in body["tools"][-1]
    assert body["messages"][-1]["content"][-1]["cache_control"] == short
    assert "temperature" not in body


# U56 · the anthropic-beta header


def test_generated_betas_put_fine_grained_streaming_first() -> None:
    model = budget_model(compat={"supportsEagerToolInputStreaming": False})
    request = build_anthropic_request(
        model,
        LlmContext(messages=conversation(HI, tools=[TOOL])),
        StreamOptions(reasoning="low"),
        "sk-test",
    )
    assert request.headers["anthropic-beta"] == (
        "fine-grained-tool-streaming-2025-05-14,interleaved-thinking-2025-05-14"
    )


def test_a_caller_beta_value_is_normalised() -> None:
    assert normalize_anthropic_beta("foo-1, bar-2,foo-1") == "foo-1,bar-2"
    assert normalize_anthropic_beta(" , a ,,b, a") == "a,b"


# U61 · a level on a model without reasoning is ignored (documented)


def test_a_level_on_a_model_without_reasoning_is_ignored() -> None:
    model = budget_model(reasoning=False)
    body = request_body(
        model, conversation(HI), StreamOptions(reasoning="high", max_tokens=1000, temperature=0.7)
    )
    assert body["max_tokens"] == 1000
    assert body["temperature"] == 0.7
    assert "thinking" not in body


# U62 · session-affinity headers


def headers_for(model: Model, session_id: str | None) -> dict[str, str]:
    request = build_anthropic_request(
        model, LlmContext(messages=conversation(HI)), StreamOptions(session_id=session_id), "k"
    )
    return dict(request.headers)


def test_session_affinity_headers() -> None:
    assert headers_for(make_model(provider="openrouter"), "sess-c")["x-session-id"] == "sess-c"
    affinity = make_model(compat={"sendSessionAffinityHeaders": True})
    assert headers_for(affinity, "sess-c")["x-session-affinity"] == "sess-c"
    plain = headers_for(make_model(), "sess-c")
    assert "x-session-id" not in plain
    assert "x-session-affinity" not in plain
    assert "x-session-id" not in headers_for(make_model(provider="openrouter"), None)


OK_STREAM = [message_start(), *text_frames("ok"), message_delta("end_turn"), MESSAGE_STOP]


@pytest.mark.parametrize(
    ("model_headers", "option_headers", "sent"),
    [
        ({"anthropic-beta": "foo-1, bar-2,foo-1"}, None, "foo-1,bar-2"),
        ({"Anthropic-Beta": "a"}, {"ANTHROPIC-BETA": " b ,, c,b"}, "b,c"),
        (None, {"anthropic-beta": "x-1"}, "x-1"),
        ({"anthropic-beta": "a"}, {"anthropic-beta": None}, None),
        ({"anthropic-beta": " , "}, None, None),
    ],
)
async def test_a_caller_beta_header_replaces_the_generated_one(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    model_headers: dict[str, str] | None,
    option_headers: dict[str, str | None] | None,
    sent: str | None,
) -> None:
    sse_server.enqueue(sse_response(OK_STREAM))
    model = server_model(
        sse_server,
        headers=model_headers,
        reasoning=True,
        compat={"supportsEagerToolInputStreaming": False},
    )
    events = await collect(
        model, http_client, conversation(HI, tools=[TOOL]), headers=option_headers, reasoning="low"
    )
    assert isinstance(events[-1], DoneEvent)
    (request,) = sse_server.requests
    assert request.headers.get("anthropic-beta") == sent
