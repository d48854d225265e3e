"""openai-completions: the parity rows (stream mapping, usage and cost, request details)."""

from __future__ import annotations

import json
import time
from typing import Any

import attrs
import httpx
import pytest
from sse_server import ScriptedResponse, SseServer, sse_response
from test_openai_completions import chunk, collect, final, make_model, types

from trio_agent import (
    AssistantMessage,
    DoneEvent,
    ImageContent,
    LlmContext,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._http import HttpError
from trio_agent.models._openai_completions import (
    build_openai_completions_body,
    format_openai_completions_error,
)

PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)


def stop_frames(*, usage: dict[str, Any] | None = None) -> list[Any]:
    frames: list[Any] = [chunk({}, "stop")]
    if usage is not None:
        frames.append({"choices": [], "usage": usage})
    frames.append("[DONE]")
    return frames


# ---------------------------------------------------------------------------------------
# U13 · streamed reasoning_details


DETAIL_1 = {
    "type": "reasoning.text",
    "text": "Step ",
    "id": "rd1",
    "format": "anthropic-claude-v1",
    "index": 0,
}
DETAIL_2 = {
    "type": "reasoning.text",
    "text": "two.",
    "signature": "sig",
    "format": "anthropic-claude-v1",
    "index": 0,
}
ENCRYPTED = {
    "type": "reasoning.encrypted",
    "data": "ENCDATA",
    "id": "rd2",
    "format": "anthropic-claude-v1",
    "index": 1,
}


async def test_reasoning_details_are_validated_and_merged(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                chunk({"reasoning": "Step ", "reasoning_details": [DETAIL_1]}),
                chunk({"reasoning": "two.", "reasoning_details": [DETAIL_2]}),
                chunk({"reasoning_details": [ENCRYPTED, {"type": "bogus", "x": 1}]}),
                chunk({"content": "ok"}),
                *stop_frames(),
            ]
        )
    )
    message = final(await collect(http_client, make_model(sse_server.base_url)))
    assert message.content == [
        ThinkingContent(
            thinking="Step two.",
            thinking_signature=(
                '[{"type":"reasoning.text","text":"Step two.","id":"rd1",'
                '"format":"anthropic-claude-v1","index":0,"signature":"sig"},'
                '{"type":"reasoning.encrypted","data":"ENCDATA","id":"rd2",'
                '"format":"anthropic-claude-v1","index":1}]'
            ),
        ),
        TextContent(text="ok"),
    ]


async def test_long_streamed_reasoning_details_cost_linear_time(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    # 20,000 pieces of one reasoning.text entry (~240 KB): merging them and keeping the
    # signature must not re-serialize the growing entry for every piece.
    pieces = [f"word{i:05d} " for i in range(20_000)]
    frames = [chunk({"reasoning_details": [{**DETAIL_1, "text": piece}]}) for piece in pieces]
    body = sse_response([*frames, chunk({"content": "ok"}), *stop_frames()]).chunks
    # In 100 network chunks: the mapping is measured, not 20,000 socket reads.
    step = len(body) // 100
    grouped = [b"".join(body[i : i + step]) for i in range(0, len(body), step)]
    sse_server.enqueue(ScriptedResponse(chunks=grouped))
    started = time.perf_counter()
    message = final(await collect(http_client, make_model(sse_server.base_url)))
    elapsed = time.perf_counter() - started
    thinking = message.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert json.loads(thinking.thinking_signature or "") == [{**DETAIL_1, "text": "".join(pieces)}]
    assert elapsed < 2.0, elapsed


async def test_encrypted_reasoning_alone_opens_a_thinking_block(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                chunk({"reasoning_details": [ENCRYPTED, {"type": "bogus", "x": 1}]}),
                chunk({"content": "ok"}),
                *stop_frames(),
            ]
        )
    )
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == [
        "start",
        "thinking_start",
        "text_start",
        "text_delta",
        "thinking_end",
        "text_end",
        "done",
    ]
    assert final(events).content == [
        ThinkingContent(
            thinking="",
            thinking_signature=(
                '[{"type":"reasoning.encrypted","data":"ENCDATA","id":"rd2",'
                '"format":"anthropic-claude-v1","index":1}]'
            ),
        ),
        TextContent(text="ok"),
    ]


async def test_invalid_reasoning_details_open_nothing(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    invalid = [
        {"type": "reasoning.text", "text": 5},
        {"type": "reasoning.text", "text": "t", "signature": 5},
        {"type": "reasoning.summary"},
        {"type": "reasoning.encrypted", "data": "x", "id": 5},
        {"type": "reasoning.encrypted", "data": "x", "format": None},
        {"type": "reasoning.encrypted", "data": "x", "index": "0"},
        "reasoning.text",
    ]
    sse_server.enqueue(
        sse_response(
            [chunk({"reasoning_details": invalid}), chunk({"content": "ok"}), *stop_frames()]
        )
    )
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]


# ---------------------------------------------------------------------------------------
# U14 · the provider's billed cost, only from OpenRouter with valid BYOK accounting


OPENROUTER = "https://openrouter.ai/api"


@pytest.mark.parametrize(
    ("openrouter", "extra", "total"),
    [
        (False, {"cost": 0.00123}, 0.0006),
        (True, {"cost": 0.00123}, 0.0006),
        (False, {"cost": 0.00123, "is_byok": False}, 0.0006),
        (True, {"cost": 0.00123, "is_byok": False}, 0.00123),
        (
            False,
            {"cost": 0.0001, "is_byok": True, "cost_details": {"upstream_inference_cost": 0.002}},
            0.0006,
        ),
        (
            True,
            {"cost": 0.0001, "is_byok": True, "cost_details": {"upstream_inference_cost": 0.002}},
            0.0021,
        ),
        (
            True,
            {
                "cost": 0.0001,
                "is_byok": True,
                "cost_details": {
                    "upstream_inference_cost": None,
                    "upstream_inference_prompt_cost": 0.001,
                    "upstream_inference_completions_cost": 0.002,
                },
            },
            0.0031,
        ),
        (
            True,
            {
                "cost": 0.0001,
                "is_byok": True,
                "cost_details": {
                    "upstream_inference_prompt_cost": 0.001,
                    "upstream_inference_completions_cost": "x",
                },
            },
            0.0006,
        ),
        (True, {"cost": -1, "is_byok": False}, 0.0006),
    ],
)
async def test_provider_reported_cost(
    sse_server: SseServer,
    http_client: httpx.AsyncClient,
    openrouter: bool,
    extra: dict[str, Any],
    total: float,
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                chunk({"content": "ok"}),
                *stop_frames(usage={"prompt_tokens": 100, "completion_tokens": 20, **extra}),
            ]
        )
    )
    model = make_model(sse_server.base_url, cost=PRICES)
    if openrouter:
        model = make_model(sse_server.base_url, cost=PRICES, provider="openrouter")
    message = final(await collect(http_client, model))
    assert message.usage.cost.input == pytest.approx(0.0003)
    assert message.usage.cost.output == pytest.approx(0.0003)
    assert message.usage.cost.total == pytest.approx(total)


# ---------------------------------------------------------------------------------------
# U15 · an error chunk carries OpenRouter's raw upstream text


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            {
                "message": "Upstream provider error",
                "code": 502,
                "metadata": {"raw": "raw upstream text"},
            },
            "Upstream provider error\nraw upstream text",
        ),
        (
            {"message": "Upstream: raw upstream text", "metadata": {"raw": "raw upstream text"}},
            "Upstream: raw upstream text",
        ),
    ],
)
async def test_error_chunk_appends_metadata_raw(
    sse_server: SseServer, http_client: httpx.AsyncClient, error: dict[str, Any], expected: str
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "a"}), {"error": error}]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final(events).error_message == expected
    assert final(events).content == [TextContent(text="a")]


# ---------------------------------------------------------------------------------------
# U16 · chunks that are not objects are skipped


async def test_chunks_that_are_not_objects_are_skipped(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "a"}), "[1,2,3]", '"str"', *stop_frames()]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.stop_reason == "stop"
    assert message.content == [TextContent(text="a")]


# ---------------------------------------------------------------------------------------
# U17 · repairable chunk JSON is accepted (documented)


async def test_a_chunk_with_a_raw_tab_or_a_bad_escape_is_repaired(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    bad = '{"id":"x","choices":[{"index":0,"delta":{"content":"tab\there \\H"}}]}'
    sse_server.enqueue(sse_response([bad, *stop_frames()]))
    message = final(await collect(http_client, make_model(sse_server.base_url)))
    assert message.content == [TextContent(text="tab\there \\H")]
    assert message.stop_reason == "stop"
    assert message.response_id == "x"


# ---------------------------------------------------------------------------------------
# U18 · malformed event JSON


async def test_malformed_event_json(sse_server: SseServer, http_client: httpx.AsyncClient) -> None:
    sse_server.enqueue(sse_response([chunk({"content": "a"}), "{this is not json}"]))
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["start", "text_start", "text_delta", "error"]
    assert final(events).error_message == (
        "Error reading response: malformed server-sent event JSON."
    )


# ---------------------------------------------------------------------------------------
# U19 · responseModel is the first model that differs


async def test_response_model_is_the_first_differing_model(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                chunk({"content": "a"}, model="gpt-test"),
                chunk({"content": "b"}, model="routed-1"),
                chunk({"content": "c"}, model="routed-2"),
                *stop_frames(),
            ]
        )
    )
    message = final(await collect(http_client, make_model(sse_server.base_url)))
    assert message.response_model == "routed-1"


# ---------------------------------------------------------------------------------------
# U20 · token counts are integers (documented)


async def test_fractional_token_counts_are_truncated(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        sse_response(
            [
                chunk({"content": "a"}),
                *stop_frames(usage={"prompt_tokens": 10.0, "completion_tokens": 2.5}),
            ]
        )
    )
    events = await collect(http_client, make_model(sse_server.base_url, cost=PRICES))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    usage = done.message.usage
    assert (usage.input, usage.output, usage.total_tokens) == (10, 2, 12)
    assert isinstance(usage.output, int)
    assert usage.cost.total == pytest.approx(0.00006)


# ---------------------------------------------------------------------------------------
# Request building


def body_for(
    messages: list[Any], *, options: StreamOptions | None = None, **changes: Any
) -> dict[str, Any]:
    model = make_model(
        "http://127.0.0.1:1", **{k: v for k, v in changes.items() if k != "base_url"}
    )
    if "base_url" in changes:
        model = attrs.evolve(model, base_url=changes["base_url"])
    return build_openai_completions_body(
        model, LlmContext(messages=messages), options or StreamOptions()
    )


def from_model(content: list[Any], **changes: Any) -> AssistantMessage:
    fields: dict[str, Any] = {
        "content": content,
        "api": "openai-completions",
        "provider": "custom",
        "model": "gpt-test",
        "stop_reason": "stop",
        "timestamp": 2,
    }
    fields.update(changes)
    return AssistantMessage(**fields)


USER = UserMessage(content="hi", timestamp=1)
CALL = ToolCall(id="call_1", name="read", arguments={"p": 1})


# U41 · whitespace-only tool results


def test_a_whitespace_only_tool_result_is_no_tool_output() -> None:
    messages = [
        USER,
        from_model([CALL], stop_reason="toolUse"),
        ToolResultMessage(
            tool_call_id="call_1", tool_name="read", content=[TextContent(text="   ")], timestamp=3
        ),
    ]
    tool = body_for(messages)["messages"][-1]
    assert tool == {"role": "tool", "tool_call_id": "call_1", "content": "(no tool output)"}


# U44 · the replayed reasoning field is named after the first non-blank thinking block


def test_the_reasoning_field_comes_from_the_first_non_blank_thinking() -> None:
    messages = [
        USER,
        from_model(
            [
                ThinkingContent(thinking="  ", thinking_signature="reasoning_text"),
                ThinkingContent(thinking="real", thinking_signature="reasoning"),
                TextContent(text="a"),
            ]
        ),
        UserMessage(content="more", timestamp=3),
    ]
    replayed = body_for(messages)["messages"][1]
    assert replayed == {"role": "assistant", "content": "a", "reasoning": "real"}


# U45 · only valid reasoning_details are replayed


@pytest.mark.parametrize(
    ("signature", "sent"),
    [
        ('[{"type":"bogus"}]', None),
        ("[]", None),
        (
            '[{"type":"reasoning.encrypted","data":"ENC"}]',
            [{"type": "reasoning.encrypted", "data": "ENC"}],
        ),
    ],
)
def test_only_valid_reasoning_details_are_replayed(signature: str, sent: Any) -> None:
    messages = [
        USER,
        from_model(
            [ThinkingContent(thinking="", thinking_signature=signature), TextContent(text="a")]
        ),
        UserMessage(content="more", timestamp=3),
    ]
    replayed = body_for(messages)["messages"][1]
    assert replayed.get("reasoning_details") == sent


# U46 · host detection by provider id


@pytest.mark.parametrize(
    ("provider", "limit_field", "store", "effort"),
    [
        ("moonshotai", "max_tokens", False, False),
        ("moonshotai-cn", "max_tokens", False, False),
        ("nvidia", "max_tokens", False, False),
        ("together", "max_tokens", False, False),
        ("mistral", "max_completion_tokens", True, True),
        ("deepseek", "max_tokens", False, True),
        ("custom", "max_completion_tokens", True, True),
    ],
)
def test_provider_id_detection(provider: str, limit_field: str, store: bool, effort: bool) -> None:
    messages = [
        USER,
        from_model([CALL], stop_reason="toolUse"),
        ToolResultMessage(
            tool_call_id="call_1", tool_name="read", content=[TextContent(text="ok")], timestamp=3
        ),
    ]
    body = body_for(
        messages,
        options=StreamOptions(reasoning="high"),
        provider=provider,
        reasoning=True,
    )
    assert limit_field in body
    assert ("store" in body) is store
    assert ("reasoning_effort" in body) is effort
    assert "name" not in body["messages"][-1]


# U47 · OpenRouter's reasoning switched off


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"provider": "openrouter"}, {"effort": "none"}),
        ({"base_url": "https://openrouter.ai/api/v1"}, {"effort": "none"}),
        ({"compat": {"thinkingFormat": "openrouter"}}, {"effort": "none"}),
        (
            {"provider": "openrouter", "thinking_level_map": {"off": "minimal"}},
            {"effort": "minimal"},
        ),
        ({"provider": "openrouter", "thinking_level_map": {"off": None}}, None),
    ],
)
def test_openrouter_reasoning_off(changes: dict[str, Any], expected: Any) -> None:
    body = body_for([USER], reasoning=True, **changes)
    assert body.get("reasoning") == expected
    assert "reasoning_effort" not in body


# U48 · requiresAssistantAfterToolResult


def test_assistant_after_tool_results_also_before_the_image_message() -> None:
    image = ImageContent(data="AAAA", mime_type="image/png")
    messages = [
        USER,
        from_model([CALL], stop_reason="toolUse"),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="read",
            content=[TextContent(text="see"), image],
            timestamp=3,
        ),
        UserMessage(content="next", timestamp=4),
    ]
    sent = body_for(messages, compat={"requiresAssistantAfterToolResult": True})["messages"]
    assert sent[1]["content"] == ""
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user", "user"]
    assert sent[3] == {"role": "assistant", "content": "I have processed the tool results."}
    assert sent[4]["content"][0] == {"type": "text", "text": "Attached image(s) from tool result:"}
    assert sent[5] == {"role": "user", "content": "next"}


# Lessons from real servers: maxTokensField and requiresNonNullAssistantContent


def test_servers_that_ignore_max_completion_tokens() -> None:
    body = body_for([USER], compat={"maxTokensField": "max_tokens"})
    assert body["max_tokens"] == 4096
    assert "max_completion_tokens" not in body


def test_servers_that_reject_null_content_next_to_tool_calls() -> None:
    messages = [USER, from_model([CALL], stop_reason="toolUse")]
    default = body_for(messages)["messages"][1]
    assert default["content"] is None
    strict = body_for(messages, compat={"requiresNonNullAssistantContent": True})["messages"][1]
    assert strict["content"] == ""
    assert strict["tool_calls"][0]["id"] == "call_1"


# ---------------------------------------------------------------------------------------
# U09 · U10 · HTTP error texts: raw bodies whole, error objects cut with "..."


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (
            502,
            "<html><body>Bad Gateway</body></html>\n",
            "502 <html><body>Bad Gateway</body></html>\n",
        ),
        (
            400,
            'data: {"error":{"message":"sse bad"}}\n\n',
            '400 data: {"error":{"message":"sse bad"}}\n\n',
        ),
        (400, "y" * 5000, "400 " + "y" * 5000),
        (400, "[1,2]", "400 [1,2]"),
        (400, "", "400 status code (no body)"),
        (400, '{"error":{"message":"m","code":1}}', '400: {"message":"m","code":1}'),
    ],
)
async def test_http_error_text(
    sse_server: SseServer, http_client: httpx.AsyncClient, status: int, body: str, expected: str
) -> None:
    chunks = [body.encode()] if body else []
    sse_server.enqueue(
        ScriptedResponse(status=status, headers={"content-type": "text/plain"}, chunks=chunks)
    )
    events = await collect(http_client, make_model(sse_server.base_url))
    assert types(events) == ["error"]
    assert final(events).error_message == expected


def test_a_long_error_object_is_cut_at_4000_characters() -> None:
    detail = '{"message":"' + "z" * 5031 + '"}'
    assert len(detail) == 5045
    error = HttpError(status=400, headers={}, body='{"error":' + detail + "}")
    assert format_openai_completions_error(error, make_model("http://x")) == (
        f"400: {detail[:4000]}... [truncated 1045 chars]"
    )
