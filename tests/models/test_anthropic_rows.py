"""anthropic-messages: the parity rows (error texts, usage and cost, stream mapping)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sse_server import ScriptedResponse, SseServer, sse_response
from test_anthropic import (
    MESSAGE_STOP,
    block_delta,
    block_start,
    block_stop,
    collect,
    final_error,
    frame,
    make_model,
    message_delta,
    message_start,
    server_model,
    text_frames,
    types,
)

from trio_agent import DoneEvent, ModelCost, TextContent, ToolCall
from trio_agent.models._anthropic import format_anthropic_http_error
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
