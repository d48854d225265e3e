"""U43: the context-window clamp estimates the input exactly as upstream does."""

from __future__ import annotations

import math
from typing import Any

import attrs
from test_anthropic import make_model as anthropic_model
from test_anthropic import request_body as anthropic_body
from test_openai_completions import make_model as completions_model
from test_openai_responses import make_model as responses_model
from test_openai_responses import request_body as responses_body

from trio_agent import (
    AssistantMessage,
    ImageContent,
    LlmContext,
    Message,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolDeclaration,
    ToolReference,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from trio_agent._serialization import to_json
from trio_agent.models._cost import estimate_context_tokens
from trio_agent.models._openai_completions import build_openai_completions_body

PLAIN: list[Message] = [
    SystemMessage(content="Sys.", timestamp=0),  # 4 characters: 2 tokens
    UserMessage(content="Hello", timestamp=1),  # 5 characters: 2 tokens
]


def reply(content: list[Any], **changes: Any) -> AssistantMessage:
    fields: dict[str, Any] = {
        "content": content,
        "api": "openai-completions",
        "provider": "custom",
        "model": "gpt-test",
        "stop_reason": "stop",
        "timestamp": 5,
    }
    fields.update(changes)
    return AssistantMessage(**fields)


def test_each_message_is_rounded_up_on_its_own() -> None:
    assert estimate_context_tokens(PLAIN) == 4  # one ceil over the sum would give 3


def test_lengths_are_utf16_code_units() -> None:
    assert estimate_context_tokens([UserMessage(content="😀" * 7, timestamp=0)]) == 4


def test_what_each_message_counts() -> None:
    tool = ToolDeclaration(name="read", description="Read a file", parameters={"type": "object"})
    system = SystemMessage(
        content="Sys.",
        sections={"rules": "Be brief."},
        tools_added=[tool],
        tools_removed=[ToolReference(name="old")],
        timestamp=0,
    )
    expected_system = (
        math.ceil(len("Sys.\n\nBe brief.") / 3.5)
        + math.ceil(len(to_json([tool])) / 3.5)
        + math.ceil(len(to_json([ToolReference(name="old")])) / 3.5)
    )
    assert estimate_context_tokens([system]) == expected_system
    image = ImageContent(data="AAAA", mime_type="image/png")
    user = UserMessage(content=[TextContent(text="abc"), image], timestamp=1)
    assert estimate_context_tokens([user]) == math.ceil(4803 / 3.5)
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=[TextContent(text="x" * 10), image]
    )
    assert estimate_context_tokens([result]) == math.ceil(4810 / 3.5)
    assistant = reply(
        [
            TextContent(text="ab"),
            ThinkingContent(thinking="cde"),
            ToolCall(id="c", name="read", arguments={"path": "/é"}),
        ]
    )
    assert estimate_context_tokens([assistant]) == math.ceil((2 + 3 + 4 + 13) / 3.5)


def test_the_last_qualifying_response_replaces_what_came_before() -> None:
    answered = reply([TextContent(text="ok")], usage=Usage(total_tokens=1000))
    later = UserMessage(content="x" * 35, timestamp=6)
    assert estimate_context_tokens([*PLAIN, answered, later]) == 1010
    summed = reply([TextContent(text="ok")], usage=Usage(input=600, output=400))
    assert estimate_context_tokens([*PLAIN, summed, later]) == 1010
    failed = attrs.evolve(answered, stop_reason="error")
    assert estimate_context_tokens([*PLAIN, failed, later]) == 4 + 1 + 10
    older = attrs.evolve(answered, timestamp=0)
    newer_user = UserMessage(content="Hello", timestamp=3)
    assert estimate_context_tokens([newer_user, older, later]) == 2 + 1 + 10


def test_the_transcript_is_estimated_before_provider_transforms() -> None:
    # A failed turn is dropped from the request but still counts.
    failed = reply([TextContent(text="x" * 35)], stop_reason="error")
    messages = [*PLAIN, failed, UserMessage(content="again", timestamp=6)]
    assert estimate_context_tokens(messages) == 4 + 10 + 2
    model = completions_model("http://127.0.0.1:1", context_window=8000, max_tokens=32000)
    body = build_openai_completions_body(model, LlmContext(messages=messages), StreamOptions())
    assert body["max_completion_tokens"] == 8000 - 16 - 4096


def test_the_clamped_limits_of_the_three_apis() -> None:
    window = {"context_window": 8000, "max_tokens": 32000}
    completions = build_openai_completions_body(
        completions_model("http://127.0.0.1:1", **window),
        LlmContext(messages=PLAIN),
        StreamOptions(),
    )
    assert completions["max_completion_tokens"] == 3900
    responses = responses_body(responses_model(**window), PLAIN)
    assert responses["max_output_tokens"] == 3900
    anthropic = anthropic_body(
        anthropic_model(reasoning=True, **window), PLAIN, StreamOptions(reasoning="medium")
    )
    assert anthropic["max_tokens"] == 3900
    assert anthropic["thinking"]["budget_tokens"] == 2876
