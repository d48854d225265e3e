"""Reliability finding F7: tool arguments nested too deeply, streamed over
openai-completions in 16-character deltas, become an invalid-arguments tool result the
model can act on; the response completes and the run goes on."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sse_server import SseServer, sse_response

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    Model,
    TextContent,
    ToolArgumentsError,
    ToolCall,
    ToolResultMessage,
    validate_tool_arguments,
)
from trio_agent.models import Models

TOO_DEEP = "JSON nested too deeply (more than 100 levels)"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


async def _execute(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal | None,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    raise AssertionError("the tool must not run")


DEEP = AgentTool(
    name="deep", label="Deep", description="deep", parameters={"type": "object"}, execute=_execute
)


@pytest.mark.parametrize("levels", [500, 1_000, 10_000])
async def test_deep_arguments_become_an_invalid_arguments_result(
    levels: int, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    text = '{"a":' * levels + "1" + "}" * levels
    deltas = [text[start : start + 16] for start in range(0, len(text), 16)]
    sse_server.enqueue(
        sse_response(
            [
                _chunk(
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "deep", "arguments": ""},
                            }
                        ],
                    }
                ),
                *(
                    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": delta}}]})
                    for delta in deltas
                ),
                _chunk({}, "tool_calls"),
                "[DONE]",
            ]
        ),
        sse_response(
            [_chunk({"role": "assistant", "content": "sorry"}), _chunk({}, "stop"), "[DONE]"]
        ),
    )
    model = Model(
        id="test-model",
        name="Test Model",
        api="openai-completions",
        provider="local",
        base_url=sse_server.base_url + "/v1",
        max_tokens=1024,
    )
    agent = Agent(
        initial_state=AgentInitialState(model=model, tools=[DEEP]),
        stream_fn=Models(http_client).stream_simple,
        get_api_key=lambda provider: "sk-test",
    )
    await agent.prompt("go deep")
    roles = [message.role for message in agent.state.messages]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]
    call_message, result, answer = agent.state.messages[2:]
    assert isinstance(call_message, AssistantMessage)
    assert call_message.stop_reason == "toolUse"
    (call,) = call_message.content
    assert isinstance(call, ToolCall)
    assert call.arguments == {}
    assert call.arguments_error == f"{TOO_DEEP}\n\nReceived arguments:\n{text}"
    assert isinstance(result, ToolResultMessage)
    assert result.is_error is True
    assert result.content == [
        TextContent(
            text=f'Invalid arguments for tool "deep": {TOO_DEEP}\n\nReceived arguments:\n{text}'
        )
    ]
    assert isinstance(answer, AssistantMessage)
    assert answer.stop_reason == "stop"
    assert agent.state.error_message is None


def test_deep_arguments_built_in_python_are_invalid_arguments() -> None:
    call = ToolCall(id="c", name="deep", arguments=_nested(2_000))
    with pytest.raises(ToolArgumentsError) as info:
        validate_tool_arguments(DEEP, call)
    assert str(info.value) == f'Invalid arguments for tool "deep": {TOO_DEEP}'
