"""openai-completions: behaviours the differential check against pi-ai 1.6.0 found."""

from __future__ import annotations

import json
from typing import Any

import attrs
import httpx
import pytest
from sse_server import ScriptedResponse, SseServer, sse_response
from test_openai_completions import chunk, collect, final, make_model, types

from trio_agent import (
    AssistantMessage,
    LlmContext,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent.models._openai_completions import build_openai_completions_body


def body_for(base_url: str, provider: str = "custom", **changes: Any) -> dict[str, Any]:
    options = changes.pop("options", StreamOptions(reasoning="high", max_tokens=100))
    model = attrs.evolve(make_model("x"), base_url=base_url, provider=provider, reasoning=True)
    model = attrs.evolve(model, **changes)
    context = LlmContext(messages=[UserMessage(content="Hi", timestamp=1)])
    return build_openai_completions_body(model, context, options)


# ---------------------------------------------------------------------------------------
# Host detection (the hosts and provider ids pi 1.6.0 knows)


@pytest.mark.parametrize(
    "base_url",
    [
        "https://api.together.xyz/v1",
        "https://api.together.ai/v1",
        "https://api.moonshot.ai/v1",
        "https://integrate.api.nvidia.com/v1",
        "https://open.bigmodel.cn/api/paas/v4",
    ],
)
def test_non_standard_hosts_by_base_url(base_url: str) -> None:
    body = body_for(base_url)
    assert "store" not in body
    assert body["max_tokens"] == 100
    assert "max_completion_tokens" not in body
    assert "reasoning_effort" not in body


def test_mistral_gets_the_standard_request() -> None:
    body = body_for("https://api.mistral.ai/v1", provider="mistral")
    assert body["store"] is False
    assert body["max_completion_tokens"] == 100
    assert body["reasoning_effort"] == "high"


@pytest.mark.parametrize("provider", ["together", "nvidia"])
def test_long_retention_unsupported_hosts(provider: str) -> None:
    options = StreamOptions(session_id="sess-1")
    body = body_for(
        "https://example.test/v1", provider, options=options, compat={"cacheRetention": "long"}
    )
    assert "prompt_cache_key" not in body
    assert "prompt_cache_retention" not in body
    body = body_for(
        "https://example.test/v1",
        provider,
        options=options,
        compat={"cacheRetention": "long", "supportsLongCacheRetention": True},
    )
    assert body["prompt_cache_key"] == "sess-1"
    assert body["prompt_cache_retention"] == "24h"


def test_prompt_cache_key_mode() -> None:
    options = StreamOptions(session_id="sess-1")
    enabled = body_for(
        "https://example.test/v1", options=options, compat={"promptCacheKeyMode": "enabled"}
    )
    assert enabled["prompt_cache_key"] == "sess-1"
    disabled = body_for(
        "https://api.openai.com/v1", options=options, compat={"promptCacheKeyMode": "disabled"}
    )
    assert "prompt_cache_key" not in disabled
    none = body_for(
        "https://example.test/v1",
        options=options,
        compat={"promptCacheKeyMode": "enabled", "cacheRetention": "none"},
    )
    assert "prompt_cache_key" not in none


# ---------------------------------------------------------------------------------------
# Replayed tool-call ids and reasoning


def _replay(
    call_id: str, *, thought_signature: str | None = None, same: bool = False
) -> list[dict[str, Any]]:
    model = make_model("http://x")
    assistant = AssistantMessage(
        content=[
            ThinkingContent(thinking="thought", thinking_signature="reasoning_content"),
            ToolCall(id=call_id, name="noop", arguments={}, thought_signature=thought_signature),
        ],
        api=model.api if same else "openai-responses",
        provider=model.provider if same else "openai",
        model=model.id if same else "gpt-other",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=2,
    )
    context = LlmContext(
        messages=[
            UserMessage(content="Hi", timestamp=1),
            assistant,
            ToolResultMessage(
                tool_call_id=call_id,
                tool_name="noop",
                content=[TextContent(text="done")],
                is_error=False,
                timestamp=3,
            ),
        ]
    )
    body = build_openai_completions_body(model, context, StreamOptions())
    messages: list[dict[str, Any]] = body["messages"]
    return messages


def test_long_responses_style_ids_are_hashed_as_upstream() -> None:
    messages = _replay("call_76|" + "i" * 39)
    assert messages[1]["tool_calls"][0]["id"] == "call_76_1m8iizw1"
    assert messages[2]["tool_call_id"] == "call_76_1m8iizw1"


def test_responses_style_id_without_item_part() -> None:
    messages = _replay("call_7|")
    assert messages[1]["tool_calls"][0]["id"] == "call_7"


ENCRYPTED_DETAIL = (
    '{"type":"reasoning.encrypted","data":"ENCDATA","id":"rd1",'
    '"format":"openai-responses-v1","index":0}'
)


def test_legacy_encrypted_detail_on_a_tool_call_is_replayed() -> None:
    messages = _replay("call_1", thought_signature=ENCRYPTED_DETAIL, same=True)
    assert messages[1]["reasoning_details"] == [
        {
            "type": "reasoning.encrypted",
            "data": "ENCDATA",
            "id": "rd1",
            "format": "openai-responses-v1",
            "index": 0,
        }
    ]
    # reasoning_details replace the raw reasoning field
    assert "reasoning_content" not in messages[1]


@pytest.mark.parametrize(
    "signature",
    [
        '{"type":"reasoning.encrypted","data":"","id":"rd1"}',
        '{"type":"reasoning.encrypted","data":"X"}',
        '{"type":"reasoning.text","text":"t","id":"rd1"}',
        "sig",
    ],
)
def test_other_tool_call_signatures_are_not_replayed(signature: str) -> None:
    messages = _replay("call_1", thought_signature=signature, same=True)
    assert "reasoning_details" not in messages[1]
    assert messages[1]["reasoning_content"] == "thought"


# ---------------------------------------------------------------------------------------
# Stream mapping


async def test_empty_chunk_id_is_the_response_id(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response([chunk({"content": "a"}, id=""), chunk({}, "stop", id=""), "[DONE]"])
    )
    assert final(await collect(http_client, make_model(sse_server.base_url))).response_id == ""
    sse_server.enqueue(
        sse_response([chunk({"content": "a"}, id=""), chunk({}, "stop", id="c-2"), "[DONE]"])
    )
    assert final(await collect(http_client, make_model(sse_server.base_url))).response_id == "c-2"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"message": "boom"}, "boom"),
        ({"error": {"message": "nested boom", "code": "x"}}, "nested boom"),
        ({"code": 5}, '{"code":5}'),
        (
            {"error": {"message": "Upstream", "metadata": {"raw": "raw text"}}},
            "Upstream\nraw text",
        ),
    ],
)
async def test_named_error_event(
    sse_server: SseServer, http_client: httpx.AsyncClient, data: dict[str, Any], text: str
) -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n'
        b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"
    )
    sse_server.enqueue(ScriptedResponse(chunks=[body]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    message = final(events)
    assert message.stop_reason == "error"
    assert message.error_message == text
    assert message.content == [TextContent(text="a")]


async def test_reasoning_details_are_kept_when_the_stream_fails(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    detail = {"type": "reasoning.summary", "summary": "Sum.", "id": None, "format": "unknown"}
    sse_server.enqueue(
        sse_response(
            [
                chunk({"reasoning_details": [detail]}),
                {"error": {"message": "Upstream provider error"}},
            ]
        )
    )
    message = final(await collect(http_client, make_model(sse_server.base_url)))
    assert message.error_message == "Upstream provider error"
    assert message.content == [
        ThinkingContent(
            thinking="",
            thinking_signature='[{"type":"reasoning.summary","summary":"Sum.","id":null,"format":"unknown"}]',
        )
    ]


def test_system_prompt_role_unchanged() -> None:
    # guard: the host rewrite keeps the developer role for OpenAI reasoning models only
    model = attrs.evolve(make_model("x"), base_url="https://api.openai.com/v1", reasoning=True)
    context = LlmContext(
        messages=[SystemMessage(content="S", timestamp=0), UserMessage(content="Hi", timestamp=1)]
    )
    body = build_openai_completions_body(model, context, StreamOptions())
    assert body["messages"][0] == {"role": "developer", "content": "S"}


# ---------------------------------------------------------------------------------------
# Thinking levels


def test_off_is_no_level_when_the_model_cannot_turn_thinking_off() -> None:
    # The agent's "off" reaches the provider as "off"; pi's agent passes no level for it,
    # so it must not be clamped up to the model's lowest level.
    options = StreamOptions(reasoning="off")
    body = body_for("https://example.test/v1", options=options, thinking_level_map={"off": None})
    assert "reasoning_effort" not in body
    body = body_for("https://example.test/v1", options=options)
    assert "reasoning_effort" not in body
    minimal = StreamOptions(reasoning="minimal")
    body = body_for("https://example.test/v1", options=minimal, thinking_level_map={"off": None})
    assert body["reasoning_effort"] == "minimal"
    body = body_for(
        "https://example.test/v1", options=StreamOptions(), thinking_level_map={"off": None}
    )
    assert "reasoning_effort" not in body


def test_openrouter_format_ignores_supports_reasoning_effort() -> None:
    compat = {"thinkingFormat": "openrouter", "supportsReasoningEffort": False}
    body = body_for(
        "https://example.test/v1", options=StreamOptions(reasoning="low"), compat=compat
    )
    assert body["reasoning"] == {"effort": "low"}
    assert "reasoning_effort" not in body
    body = body_for("https://example.test/v1", options=StreamOptions(), compat=compat)
    assert body["reasoning"] == {"effort": "none"}


# ---------------------------------------------------------------------------------------
# The client message after a refused retry delay (U08)


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ('{"error":{"message":"rate limited","code":1}}', "429 rate limited"),
        ('{"message":"top-level message","code":7}', "429 top-level message"),
        ('{"code": 7}', '429 {"code":7}'),
        ('{"error":{"code":7}}', '429 {"code":7}'),
        ('{"error":{"message":{"m":1}}}', '429 {"m":1}'),
        ('{"error":null,"message":"m"}', "429 m"),
        ("[1, 2]", "429 [1,2]"),
        ("slow down", "429 slow down"),
        ("", "429 status code (no body)"),
    ],
)
async def test_retry_delay_message_uses_the_client_wording(
    sse_server: SseServer, http_client: httpx.AsyncClient, body: str, text: str
) -> None:
    sse_server.enqueue(
        ScriptedResponse(
            status=429,
            headers={"content-type": "application/json", "retry-after": "120"},
            chunks=[body.encode()] if body else [],
        )
    )
    events = await collect(http_client, make_model(sse_server.base_url), max_retries=1)
    assert final(events).error_message == (f"Server requested 120s retry delay (max: 60s). {text}")


async def test_an_array_chunk_clears_an_empty_response_id(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # upstream reads the id of every object chunk, arrays included (they have none)
    sse_server.enqueue(
        sse_response([chunk({"content": "a"}, id=""), [1, 2, 3], {"error": {"message": "x"}}])
    )
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final(events).response_id is None


# ---------------------------------------------------------------------------------------
# opencode-go: its `reasoning` field is replayed as `reasoning_content`


async def test_opencode_go_reasoning_is_signed_as_reasoning_content(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response([chunk({"reasoning": "hm"}), chunk({"content": "a"}), chunk({}, "stop")])
    )
    model = make_model(sse_server.base_url, provider="opencode-go")
    message = final(await collect(http_client, model))
    assert message.content[0] == ThinkingContent(
        thinking="hm", thinking_signature="reasoning_content"
    )


def test_opencode_go_replays_reasoning_as_reasoning_content() -> None:
    model = attrs.evolve(make_model("http://x"), provider="opencode-go")
    assistant = AssistantMessage(
        content=[
            ThinkingContent(thinking="hm", thinking_signature="reasoning"),
            TextContent(text="a"),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=Usage(),
        stop_reason="stop",
        timestamp=2,
    )
    context = LlmContext(
        messages=[
            UserMessage(content="Hi", timestamp=1),
            assistant,
            UserMessage(content="Go", timestamp=3),
        ]
    )
    body = build_openai_completions_body(model, context, StreamOptions())
    assert body["messages"][1] == {"role": "assistant", "content": "a", "reasoning_content": "hm"}


def test_tool_history_counts_calls_of_a_dropped_failed_turn() -> None:
    # upstream looks at the transcript as given, before failed turns are dropped
    model = attrs.evolve(make_model("http://x"), compat={"requiresToolsWithToolHistory": True})
    failed = AssistantMessage(
        content=[ToolCall(id="call_1", name="noop", arguments={})],
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=Usage(),
        stop_reason="error",
        error_message="boom",
        timestamp=2,
    )
    context = LlmContext(
        messages=[
            UserMessage(content="Hi", timestamp=1),
            failed,
            UserMessage(content="Again", timestamp=3),
        ]
    )
    body = build_openai_completions_body(model, context, StreamOptions())
    assert body["tools"] == []
    assert [m["role"] for m in body["messages"]] == ["user", "user"]
