"""anthropic-messages: behaviours pinned by the differential check against pi 1.6.0."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import httpx
import pytest
from sse_server import SseServer, sse_response
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
    types,
)

from trio_agent import (
    DoneEvent,
    LlmContext,
    ModelCost,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolDeclaration,
    UserMessage,
)
from trio_agent.models._anthropic import (
    build_anthropic_request,
    convert_anthropic_tools,
    stream_anthropic,
)
from trio_agent.models._http import HttpEnv
from trio_agent.models._sse import SseDecoder

PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)

# ---------------------------------------------------------------------------------------
# Event data with raw control characters or stray backslashes is repaired


async def test_event_data_with_a_raw_tab_and_a_stray_backslash_is_repaired(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    repairable = (
        b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"tab\there \\H"}}\n\n'
    )
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                repairable,
                block_stop(0),
                message_delta("end_turn"),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.message.content == [TextContent(text="tab\there \\H")]


# ---------------------------------------------------------------------------------------
# U28 · the raw lines of an unparsable event are quoted as received


async def test_unparsable_event_quotes_its_raw_lines(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "so far"}),
                b"id: 7\n\n: note\nevent:content_block_delta\ndata:{bad\n\n",
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    message = final_error(events)
    assert message.error_message is not None
    assert message.error_message.startswith(
        "Could not parse Anthropic SSE event content_block_delta: "
    )
    assert message.error_message.endswith(
        "; data={bad; raw=id: 7\\n: note\\nevent:content_block_delta\\ndata:{bad"
    )


# ---------------------------------------------------------------------------------------
# U62 · session-affinity headers


def affinity_headers(session_id: str | None = "sess-c", **changes: Any) -> dict[str, str]:
    model = make_model(**changes)
    context = LlmContext(
        messages=[
            SystemMessage(content="Sys.", timestamp=0),
            UserMessage(content="hi", timestamp=1),
        ]
    )
    request = build_anthropic_request(model, context, StreamOptions(session_id=session_id), "k")
    return {
        name: value
        for name, value in request.headers.items()
        if name in ("x-session-id", "x-session-affinity")
    }


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"provider": "openrouter"}, {"x-session-id": "sess-c"}),
        (
            {"provider": "openrouter", "compat": {"sendSessionAffinityHeaders": True}},
            {"x-session-id": "sess-c"},
        ),
        ({"provider": "openrouter", "compat": {"sendSessionAffinityHeaders": False}}, {}),
        ({"base_url": "https://openrouter.ai/api"}, {"x-session-id": "sess-c"}),
        ({"compat": {"sendSessionAffinityHeaders": True}}, {"x-session-affinity": "sess-c"}),
        (
            {
                "compat": {
                    "sendSessionAffinityHeaders": True,
                    "sessionAffinityFormat": "openrouter",
                }
            },
            {"x-session-id": "sess-c"},
        ),
        ({}, {}),
        (
            {"provider": "openrouter", "compat": {"cacheRetention": "none"}},
            {},
        ),
        (
            {"compat": {"sendSessionAffinityHeaders": True, "cacheRetention": "none"}},
            {},
        ),
    ],
)
def test_session_affinity_header_follows_the_compat_switches(
    changes: dict[str, Any], expected: dict[str, str]
) -> None:
    assert affinity_headers(**changes) == expected


def test_no_session_affinity_header_without_a_session() -> None:
    assert affinity_headers(None, provider="openrouter") == {}


def test_the_decoder_keeps_the_raw_lines_of_each_event_under_any_cut() -> None:
    body = b"id: 7\n\n: note\r\nevent:x\r\ndata: a\r\n\r\ndata: b\n\n"
    expected = [
        ("id: 7", ": note", "event:x", "data: a"),
        ("data: b",),
    ]
    for cut in range(len(body) + 1):
        decoder = SseDecoder()
        events = [*decoder.feed(body[:cut]), *decoder.feed(body[cut:]), *decoder.end()]
        assert [event.raw for event in events] == expected, cut


# ---------------------------------------------------------------------------------------
# Adaptive thinking: the effort follows the requested level, not the clamped one


@pytest.mark.parametrize(
    ("level_map", "level", "effort"),
    [
        ({"max": "max"}, "xhigh", "high"),
        ({"low": None, "minimal": None}, "low", "low"),
        ({"minimal": None}, "minimal", "low"),
        ({"xhigh": "xhigh"}, "xhigh", "xhigh"),
        (None, "max", "high"),
    ],
)
def test_adaptive_effort_maps_the_requested_level(
    level_map: dict[str, str | None] | None, level: ThinkingLevel, effort: str
) -> None:
    model = make_model(
        reasoning=True,
        thinking_level_map=level_map,
        compat={"forceAdaptiveThinking": True},
    )
    context = LlmContext(messages=[UserMessage(content="hi", timestamp=1)])
    request = build_anthropic_request(model, context, StreamOptions(reasoning=level), "k")
    assert request.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert request.body["output_config"] == {"effort": effort}


# ---------------------------------------------------------------------------------------
# An unknown stop reason fails at once (a body cut after it reports the reason)


async def test_an_unknown_stop_reason_fails_before_the_body_ends(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "so far"}),
                block_stop(0),
                message_delta("brand_new_reason", usage={"output_tokens": 3}),
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
    message = final_error(events)
    assert message.error_message == "Unhandled stop reason: brand_new_reason"
    assert message.usage.output == 3


async def test_a_cut_body_after_a_refusal_has_not_ended(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([message_start(), message_delta("refusal")]))
    events = await collect(server_model(sse_server), http_client)
    assert final_error(events).error_message == "Anthropic stream ended before message_stop"


# ---------------------------------------------------------------------------------------
# A delta of another kind than its block is ignored


async def test_a_delta_that_does_not_fit_its_block_is_ignored(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                block_delta(0, {"type": "text_delta", "text": "not thinking"}),
                block_delta(0, {"type": "input_json_delta", "partial_json": "{}"}),
                block_delta(0, {"type": "thinking_delta", "thinking": "hm"}),
                block_stop(0),
                block_start(1, {"type": "text", "text": ""}),
                block_delta(1, {"type": "thinking_delta", "thinking": "not text"}),
                block_delta(1, {"type": "signature_delta", "signature": "sig"}),
                block_delta(1, {"type": "text_delta", "text": "ok"}),
                block_stop(1),
                block_start(2, {"type": "tool_use", "id": "t1", "name": "noop", "input": {}}),
                block_delta(2, {"type": "text_delta", "text": "not json"}),
                block_delta(2, {"type": "input_json_delta", "partial_json": '{"a":1}'}),
                block_stop(2),
                message_delta("tool_use"),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
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
    last = events[-1]
    assert isinstance(last, DoneEvent)
    thinking, text, call = last.message.content
    assert thinking == ThinkingContent(thinking="hm", thinking_signature="")
    assert text == TextContent(text="ok")
    assert isinstance(call, ToolCall)
    assert call.arguments == {"a": 1}


@pytest.mark.parametrize(
    "tail",
    [b"event", b"event:\n\n", b"event: \n\n", b"event: x\nevent:\n\n", b"id: 3\nevent:"],
)
def test_an_empty_event_name_without_data_is_no_event(tail: bytes) -> None:
    body = b"data: a\n\n" + tail
    for cut in range(len(body) + 1):
        decoder = SseDecoder()
        events = [*decoder.feed(body[:cut]), *decoder.feed(body[cut:]), *decoder.end()]
        assert [(event.event, event.data) for event in events] == [("message", "a")], cut


# ---------------------------------------------------------------------------------------
# A message_start without usage counts zeros (documented)


async def test_a_message_start_without_usage_counts_zeros(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    start = frame("message_start", {"message": {"id": "msg_9", "model": "claude-test"}})
    sse_server.enqueue(
        sse_response(
            [
                start,
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "ok"}),
                block_stop(0),
                message_delta("end_turn", usage={"output_tokens": 4}),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server, cost=PRICES), http_client)
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.message.response_id == "msg_9"
    assert (last.message.usage.input, last.message.usage.output) == (0, 4)
    assert last.message.usage.total_tokens == 4
    assert last.message.usage.cost.total == pytest.approx(0.00006)


# ---------------------------------------------------------------------------------------
# U54 · strict tools: keywords Anthropic's strict mode rejects, and an unsupported model


def strict_tool(b_schema: dict[str, Any], strict: str | None = None) -> ToolDeclaration:
    sampling: dict[str, Any] = {"type": "json_schema"}
    if strict is not None:
        sampling["strict"] = strict
    return ToolDeclaration(
        name="strict_tool",
        description="Strict.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": b_schema},
            "required": ["a"],
        },
        constrained_sampling=sampling,
    )


@pytest.mark.parametrize(
    ("b_schema", "problem"),
    [
        ({"type": "integer", "minimum": 0}, "minimum: 0 is unsupported"),
        ({"type": "string", "format": "phone"}, 'format: "phone" is unsupported'),
        (
            {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "minItems: 2 is unsupported",
        ),
        (
            {"type": "array", "items": {"type": "number", "multipleOf": 0.5}},
            "multipleOf: 0.5 is unsupported",
        ),
        (
            {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "maximum": 9}]},
            "maximum: 9 is unsupported",
        ),
    ],
)
def test_a_keyword_anthropic_rejects_in_strict_mode_keeps_the_tool_non_strict(
    b_schema: dict[str, Any], problem: str
) -> None:
    model = make_model(compat={"supportsStrictTools": True})
    for strict in (None, "prefer"):
        (tool,) = convert_anthropic_tools([strict_tool(b_schema, strict)], model)
        assert "strict" not in tool
        assert tool["input_schema"]["properties"]["b"] == b_schema
    with pytest.raises(ValueError) as caught:
        convert_anthropic_tools([strict_tool(b_schema, "require")], model)
    assert str(caught.value) == (
        f'Tool "strict_tool" requires JSON-schema constrained sampling, but {problem}.'
    )


@pytest.mark.parametrize(
    "b_schema",
    [
        {"type": "string", "format": "email"},
        {"type": "array", "items": {"type": "string"}, "minItems": 1},
        {"type": "string", "maxLength": 3},
    ],
)
def test_keywords_anthropic_accepts_stay_strict(b_schema: dict[str, Any]) -> None:
    model = make_model(compat={"supportsStrictTools": True})
    (tool,) = convert_anthropic_tools([strict_tool(b_schema, "require")], model)
    assert tool["strict"] is True
    assert tool["input_schema"]["properties"]["b"] == {"anyOf": [b_schema, {"type": "null"}]}


def test_a_required_strict_tool_on_a_model_without_strict_tools() -> None:
    with pytest.raises(ValueError) as caught:
        convert_anthropic_tools([strict_tool({"type": "integer"}, "require")], make_model())
    assert str(caught.value) == (
        'Tool "strict_tool" requires JSON-schema constrained sampling, '
        "but strict tools are unsupported."
    )


def test_a_strict_schema_keeps_its_other_root_keywords() -> None:
    model = make_model(compat={"supportsStrictTools": True})
    parameters = {
        "type": "object",
        "description": "Arguments.",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }
    tool = ToolDeclaration(
        name="t",
        description="d",
        parameters=parameters,
        constrained_sampling={"type": "json_schema"},
    )
    loose = ToolDeclaration(name="u", description="d", parameters=parameters)
    strict_entry, loose_entry = convert_anthropic_tools([tool, loose], model)
    assert strict_entry["input_schema"] == {
        "type": "object",
        "description": "Arguments.",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert loose_entry["input_schema"] == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }


# ---------------------------------------------------------------------------------------
# A cf-aig-authorization header is enough (documented)


async def test_a_cloudflare_gateway_header_stands_in_for_the_key(
    sse_server: SseServer, http_client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    sse_server.enqueue(
        sse_response(
            [
                message_start(),
                block_start(0, {"type": "text", "text": "ok"}),
                block_stop(0),
                message_delta("end_turn"),
                MESSAGE_STOP,
            ]
        )
    )
    options = StreamOptions(headers={"cf-aig-authorization": "Bearer cf"})
    context = LlmContext(messages=[UserMessage(content="hi")])
    env = HttpEnv(client=http_client)
    async with aclosing(
        stream_anthropic(server_model(sse_server), context, options, env)
    ) as stream:
        events = [event async for event in stream]
    assert isinstance(events[-1], DoneEvent)
    (request,) = sse_server.requests
    assert request.headers["cf-aig-authorization"] == "Bearer cf"
    assert "x-api-key" not in request.headers
    assert "authorization" not in request.headers


# ---------------------------------------------------------------------------------------
# Empty fields from the server (documented)


async def test_an_empty_model_name_and_redacted_thinking_without_data(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    start = frame(
        "message_start",
        {"message": {"id": "m", "model": "", "usage": {"input_tokens": 1, "output_tokens": 1}}},
    )
    sse_server.enqueue(
        sse_response(
            [
                start,
                block_start(0, {"type": "redacted_thinking"}),
                block_stop(0),
                message_delta("end_turn"),
                MESSAGE_STOP,
            ]
        )
    )
    events = await collect(server_model(sse_server), http_client)
    last = events[-1]
    assert isinstance(last, DoneEvent)
    assert last.message.response_model is None
    assert last.message.content == [
        ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="", redacted=True)
    ]


def test_the_decoder_keeps_at_most_4096_raw_lines_per_event() -> None:
    decoder = SseDecoder()
    events = decoder.feed(b": keep-alive\n" * 5000 + b"data: x\n\n")
    assert [event.data for event in events] == ["x"]
    assert len(events[0].raw) == 4096
