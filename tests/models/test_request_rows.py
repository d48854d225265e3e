"""Request rows shared by the three APIs: U40 (results of dropped turns), U42 (max_tokens=0)."""

from __future__ import annotations

import json
from typing import Any

from test_anthropic import make_model as anthropic_model
from test_anthropic import request_body as anthropic_body
from test_openai_completions import make_model as completions_model
from test_openai_responses import make_model as responses_model
from test_openai_responses import request_body as responses_body

from trio_agent import (
    AssistantMessage,
    LlmContext,
    Message,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models._openai_completions import build_openai_completions_body

LIMITS = {"max_tokens": 32000, "context_window": 200000}


def completions_body(model: Model, messages: list[Message], options: StreamOptions) -> Any:
    return build_openai_completions_body(model, LlmContext(messages=messages), options)


def errored_turn(model: Model) -> list[Message]:
    return [
        UserMessage(content="go", timestamp=1),
        AssistantMessage(
            content=[
                TextContent(text="partial"),
                ToolCall(id="call_err1", name="read", arguments={}),
            ],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="error",
            error_message="boom",
            timestamp=2,
        ),
        ToolResultMessage(
            tool_call_id="call_err1",
            tool_name="read",
            content=[TextContent(text="result of errored call")],
            timestamp=3,
        ),
        UserMessage(content="try again", timestamp=4),
    ]


def test_results_of_a_dropped_error_turn_are_not_sent() -> None:
    completions = completions_model("http://127.0.0.1:1")
    anthropic = anthropic_model()
    responses = responses_model()
    bodies = [
        completions_body(completions, errored_turn(completions), StreamOptions()),
        anthropic_body(anthropic, errored_turn(anthropic)),
        responses_body(responses, errored_turn(responses)),
    ]
    for body in bodies:
        text = json.dumps(body)
        assert "call_err1" not in text
        assert "result of errored call" not in text
        assert "partial" not in text
    assert [m["content"] for m in bodies[0]["messages"]] == ["go", "try again"]


def test_max_tokens_zero_means_the_models_limit() -> None:
    hi: list[Message] = [UserMessage(content="hi", timestamp=1)]
    options = StreamOptions(max_tokens=0)
    completions = completions_body(completions_model("http://127.0.0.1:1", **LIMITS), hi, options)
    assert completions["max_completion_tokens"] == 32000
    responses = responses_body(responses_model(**LIMITS), hi, options)
    assert responses["max_output_tokens"] == 32000
    plain = anthropic_body(anthropic_model(**LIMITS), hi, options)
    assert plain["max_tokens"] == 32000
    thinking = anthropic_body(
        anthropic_model(reasoning=True, **LIMITS), hi, StreamOptions(max_tokens=0, reasoning="high")
    )
    assert thinking["max_tokens"] == 32000
    assert thinking["thinking"]["budget_tokens"] == 16384
