"""The ``anthropic-messages`` API (reference ``upstream-ai.md`` §5.2, §6.2)."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import (
    AssistantMessage,
    ImageContent,
    LlmContext,
    Message,
    Model,
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
    build_anthropic_body,
    build_anthropic_request,
    format_anthropic_http_error,
)
from trio_agent.models._http import HttpError

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
                ThinkingContent(thinking="[Reasoning redacted]", thinking_signature="enc", redacted=True),
                ThinkingContent(thinking="unsigned idea"),
                ThinkingContent(thinking="  "),
                TextContent(text="It is a pixel."),
            ],
            model,
            stop_reason="stop",
        ),
        assistant([TextContent(text="")], model, stop_reason="stop"),
    ]
    body = request_body(make_model(input=["text", "image"], compat={"cacheRetention": "none"}), messages)
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
                "content": "failed",
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
        ("plain failure\n", "400 plain failure"),
        ("", "400 status code (no body)"),
    ],
)
def test_http_error_wording(body: str, expected: str) -> None:
    error = HttpError(status=400, headers={}, body=body)
    assert format_anthropic_http_error(error, make_model()) == expected
