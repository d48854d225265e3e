"""Run control on the real provider path: usage limits, tool approval and structured
output against the loopback SSE server (OpenAI Chat Completions wire format)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import httpx
from sse_server import ScriptedResponse, SseServer, sse_response

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    Model,
    TextContent,
    UsageLimits,
)
from trio_agent.models import Models


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def tool_call(name: str, arguments: dict[str, Any], call_id: str) -> ScriptedResponse:
    return sse_response(
        [
            _chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ],
                }
            ),
            _chunk(
                {"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(arguments)}}]}
            ),
            _chunk({}, "tool_calls"),
            "[DONE]",
        ]
    )


def text(answer: str) -> ScriptedResponse:
    return sse_response(
        [_chunk({"role": "assistant", "content": answer}), _chunk({}, "stop"), "[DONE]"]
    )


async def lookup(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"found {params['q']}")])


def tool(needs_approval: bool = False) -> AgentTool:
    return AgentTool(
        name="lookup",
        label="Lookup",
        description="Look something up.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        execute=lookup,
        needs_approval=needs_approval,
    )


def agent_for(server: SseServer, client: httpx.AsyncClient, **kwargs: Any) -> tuple[Agent, Models]:
    models = Models(http_client=client)
    model = Model(
        id="test-model",
        name="Test Model",
        api="openai-completions",
        provider="local",
        base_url=server.base_url + "/v1",
        max_tokens=1024,
    )
    agent = Agent(
        AgentInitialState(model=model, tools=kwargs.pop("tools", [tool()])),
        stream_fn=models.stream_simple,
        get_api_key=lambda provider: "test-key",
        **kwargs,
    )
    return agent, models


async def test_a_request_limit_never_sends_request_n_plus_one(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(*(tool_call("lookup", {"q": f"q{i}"}, f"call_{i}") for i in range(4)))
    agent, _ = agent_for(sse_server, http_client, usage_limits=UsageLimits(requests=2))
    result = await agent.prompt("look things up")
    assert len(sse_server.requests) == 2
    assert (result.ending, str(result.limit)) == ("limit", "usage limit reached: requests (2)")


async def test_a_deferred_approval_then_the_call_over_http(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(tool_call("lookup", {"q": "trio"}, "call_1"), text("Found it."))
    agent, _ = agent_for(sse_server, http_client, tools=[tool(needs_approval=True)])
    result = await agent.prompt("look up trio")
    assert (result.ending, len(sse_server.requests)) == ("approval", 1)
    agent.deny("call_1", "not now")
    await agent.continue_()
    messages = sse_server.requests[1].json()["messages"]
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Tool call denied: not now",
    }


@attrs.frozen
class Answer:
    city: str
    degrees: int


async def test_structured_output_over_http(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        tool_call("final_result", {"result": {"city": "Oslo"}}, "call_1"),
        tool_call("final_result", {"result": {"city": "Oslo", "degrees": -3}}, "call_2"),
    )
    agent, _ = agent_for(sse_server, http_client, tools=[])
    result = await agent.prompt("weather?", output_type=Answer)
    assert result.output == Answer("Oslo", -3)
    declared = sse_server.requests[0].json()["tools"]
    assert [t["function"]["name"] for t in declared] == ["final_result"]
    assert declared[0]["function"]["parameters"]["properties"]["result"]["required"] == [
        "city",
        "degrees",
    ]


def native_model(server: SseServer, api: str = "openai-completions") -> Model:
    return Model(
        id="test-model",
        name="Test Model",
        api=api,
        provider="local",
        base_url=server.base_url + "/v1",
        max_tokens=1024,
        compat={"supportsJsonSchema": True},
    )


async def test_native_structured_output_over_chat_completions(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(
        text('{"result": {"city": "Oslo"}}'),  # wrong: sent back to the model
        text('{"result": {"city": "Oslo", "degrees": -3}}'),
    )
    agent, _ = agent_for(sse_server, http_client, tools=[])
    agent.state.model = native_model(sse_server)
    result = await agent.prompt("weather?", output_type=Answer)  # output_mode="auto"
    assert result.output == Answer("Oslo", -3)
    first = sse_server.requests[0].json()
    assert "tools" not in first
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "final_result"
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["result"]["required"] == ["city", "degrees"]
    retry = sse_server.requests[1].json()["messages"][-1]
    assert retry["role"] == "user"
    assert "Your answer is not valid" in json.dumps(retry)


async def test_native_mode_over_responses_sends_the_text_format(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(text("{}"))  # the answer is not read: only the request is checked
    agent, _ = agent_for(sse_server, http_client, tools=[], output_retries=0)
    agent.state.model = native_model(sse_server, "openai-responses")
    await agent.prompt("weather?", output_type=Answer)
    body = sse_server.requests[0].json()
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["name"] == "final_result"
