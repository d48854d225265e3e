"""A two-turn tool-using conversation through the loop and the Agent, for each built-in HTTP
API, against the loopback SSE server: turn 1 asks for a tool, turn 2 answers with text."""

from __future__ import annotations

from typing import Any

import attrs
import httpx
import pytest
from sse_server import RecordedRequest, ScriptedResponse, SseServer, sse_chunk, sse_response

from trio_agent import (
    AbortSignal,
    Agent,
    AgentEvent,
    AgentInitialState,
    AgentMessage,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    Model,
    StreamOptions,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    create_initial_system_message,
    to_tool_declaration,
)
from trio_agent.loop import AgentContext, AgentLoopConfig, run_agent_loop
from trio_agent.models import Models

SYSTEM_PROMPT = "You are a weather bot."
QUESTION = "Weather in Paris?"
ANSWER = "It is sunny in Paris."


async def get_weather(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal | None,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=f"sunny in {params['city']}")])


WEATHER_TOOL = AgentTool(
    name="get_weather",
    label="Weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    execute=get_weather,
)


@attrs.frozen(kw_only=True)
class Script:
    """One API: its two scripted responses and what its second request must carry."""

    api: str
    provider: str
    base_path: str
    turns: tuple[ScriptedResponse, ScriptedResponse]
    tool_call_id: str
    history_tail: list[Any]
    """The last entries of the second request's message list (its wire shape)."""

    def history(self, request: RecordedRequest) -> list[Any]:
        body = request.json()
        key = "input" if self.api == "openai-responses" else "messages"
        entries: list[Any] = body[key]
        return entries[-len(self.history_tail) :]


# -- openai-completions ------------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "test-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


COMPLETIONS = Script(
    api="openai-completions",
    provider="local",
    base_path="/v1",
    turns=(
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
                                "function": {"name": "get_weather", "arguments": ""},
                            }
                        ],
                    }
                ),
                _chunk(
                    {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Paris"}'}}]}
                ),
                _chunk({}, "tool_calls"),
                "[DONE]",
            ]
        ),
        sse_response(
            [_chunk({"role": "assistant", "content": ANSWER}), _chunk({}, "stop"), "[DONE]"]
        ),
    ),
    tool_call_id="call_1",
    history_tail=[
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"},
    ],
)


# -- anthropic-messages ------------------------------------------------------------------


def _anthropic(kind: str, **data: Any) -> bytes:
    return sse_chunk({"type": kind, **data}, event=kind)


def _anthropic_turn(blocks: list[bytes], stop_reason: str) -> ScriptedResponse:
    return sse_response(
        [
            _anthropic(
                "message_start",
                message={
                    "id": "msg_1",
                    "model": "test-model",
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            ),
            *blocks,
            _anthropic(
                "message_delta",
                delta={"stop_reason": stop_reason},
                usage={"output_tokens": 5},
            ),
            _anthropic("message_stop"),
        ]
    )


ANTHROPIC = Script(
    api="anthropic-messages",
    provider="anthropic",
    base_path="",
    turns=(
        _anthropic_turn(
            [
                _anthropic(
                    "content_block_start",
                    index=0,
                    content_block={
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "get_weather",
                        "input": {},
                    },
                ),
                _anthropic(
                    "content_block_delta",
                    index=0,
                    delta={"type": "input_json_delta", "partial_json": '{"city":"Paris"}'},
                ),
                _anthropic("content_block_stop", index=0),
            ],
            "tool_use",
        ),
        _anthropic_turn(
            [
                _anthropic(
                    "content_block_start", index=0, content_block={"type": "text", "text": ""}
                ),
                _anthropic(
                    "content_block_delta", index=0, delta={"type": "text_delta", "text": ANSWER}
                ),
                _anthropic("content_block_stop", index=0),
            ],
            "end_turn",
        ),
    ),
    tool_call_id="toolu_1",
    history_tail=[
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "sunny in Paris",
                    "is_error": False,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
)


# -- openai-responses --------------------------------------------------------------------


def _responses(kind: str, **data: Any) -> bytes:
    return sse_chunk({"type": kind, **data}, event=kind)


_CALL_ITEM = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city":"Paris"}',
}
_MESSAGE_ITEM = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
}


def _responses_turn(item: dict[str, Any], deltas: list[bytes]) -> ScriptedResponse:
    return sse_response(
        [
            _responses("response.created", response={"id": "resp_1", "status": "in_progress"}),
            _responses(
                "response.output_item.added",
                output_index=0,
                item={**item, "arguments": ""} if item["type"] == "function_call" else item,
            ),
            *deltas,
            _responses("response.output_item.done", output_index=0, item=item),
            _responses(
                "response.completed",
                response={
                    "id": "resp_1",
                    "status": "completed",
                    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
                },
            ),
        ]
    )


RESPONSES = Script(
    api="openai-responses",
    provider="openai",
    base_path="/v1",
    turns=(
        _responses_turn(
            _CALL_ITEM,
            [
                _responses(
                    "response.function_call_arguments.delta",
                    output_index=0,
                    delta='{"city":"Paris"}',
                )
            ],
        ),
        _responses_turn(
            _MESSAGE_ITEM,
            [_responses("response.output_text.delta", output_index=0, delta=ANSWER)],
        ),
    ),
    tool_call_id="call_1|fc_1",
    history_tail=[
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny in Paris"},
    ],
)

SCRIPTS = [
    pytest.param(COMPLETIONS, id="openai-completions"),
    pytest.param(ANTHROPIC, id="anthropic-messages"),
    pytest.param(RESPONSES, id="openai-responses"),
]


def make_model(script: Script, server: SseServer) -> Model:
    return Model(
        id="test-model",
        name="Test Model",
        api=script.api,
        provider=script.provider,
        base_url=server.base_url + script.base_path,
        max_tokens=1024,
    )


def check_transcript(script: Script, messages: list[AgentMessage]) -> None:
    assert [message.role for message in messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    first, result, final = messages[2], messages[3], messages[4]
    assert isinstance(first, AssistantMessage)
    assert first.stop_reason == "toolUse"
    assert first.content == [
        ToolCall(id=script.tool_call_id, name="get_weather", arguments={"city": "Paris"})
    ]
    assert isinstance(result, ToolResultMessage)
    assert result.tool_call_id == script.tool_call_id
    assert result.content == [TextContent(text="sunny in Paris")]
    assert result.is_error is False
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "stop"
    assert final.api == script.api
    assert [block.text for block in final.content if isinstance(block, TextContent)] == [ANSWER]


def check_requests(script: Script, server: SseServer) -> None:
    assert len(server.requests) == 2
    first, second = server.requests
    for request in (first, second):
        if script.api == "anthropic-messages":
            assert request.headers["x-api-key"] == "sk-test"
        else:
            assert request.headers["authorization"] == "Bearer sk-test"
    assert script.history(second) == script.history_tail


@pytest.mark.parametrize("script", SCRIPTS)
async def test_agent_two_turns_with_a_tool(
    script: Script, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(*script.turns)
    models = Models(http_client)
    agent = Agent(
        initial_state=AgentInitialState(
            system_prompt=SYSTEM_PROMPT,
            model=make_model(script, sse_server),
            tools=[WEATHER_TOOL],
        ),
        stream_fn=models.stream_simple,
        get_api_key=lambda provider: "sk-test",
    )
    events: list[str] = []
    agent.subscribe(lambda event: events.append(event.type))
    await agent.prompt(QUESTION)
    check_transcript(script, agent.state.messages)
    check_requests(script, sse_server)
    assert agent.state.error_message is None
    assert events.count("turn_start") == 2
    assert events.count("tool_execution_end") == 1
    assert events[-1] == "agent_end"


@pytest.mark.parametrize("script", SCRIPTS)
async def test_loop_two_turns_with_a_tool(
    script: Script, sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    sse_server.enqueue(*script.turns)
    models = Models(http_client)
    system = create_initial_system_message(SYSTEM_PROMPT, [to_tool_declaration(WEATHER_TOOL)])
    assert system is not None
    context = AgentContext(messages=[system], tools=[WEATHER_TOOL])
    config = AgentLoopConfig(
        model=make_model(script, sse_server), stream_options=StreamOptions(api_key="sk-test")
    )
    seen: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        seen.append(event)

    produced = await run_agent_loop(
        [UserMessage(content=QUESTION)], context, config, emit, stream_fn=models.stream_simple
    )
    check_transcript(script, [system, *produced])
    check_requests(script, sse_server)
    assert seen[0].type == "agent_start"
    assert seen[-1].type == "agent_end"
