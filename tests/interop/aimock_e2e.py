"""The three built-in HTTP APIs end to end against aimock: text, a tool call and its answer,
two parallel tool calls, reasoning, an abort mid-stream, and the server's fault modes
(500, a malformed body, a disconnect before and during the stream, 429).

Not part of the default run (the file name does not match ``test_*.py``): ``nox -s interop``
installs npm ``@copilotkit/aimock``, sets ``TRIO_AGENT_AIMOCK`` to its CLI script
(``.../node_modules/@copilotkit/aimock/dist/cli.js``) and runs this file; the server is
started here on 127.0.0.1 with the scripted answers of ``aimock-fixtures.json``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import pytest
import trio
from aimock_server import running_aimock

from trio_agent import (
    AbortController,
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessage,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models import Models

AIMOCK_CLI = os.environ.get("TRIO_AGENT_AIMOCK")
if AIMOCK_CLI is None:
    pytest.skip("set TRIO_AGENT_AIMOCK (nox -s interop does)", allow_module_level=True)


@pytest.fixture(scope="session")
def aimock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL (``http://127.0.0.1:<port>``) of a running aimock server."""
    assert AIMOCK_CLI is not None
    with running_aimock(AIMOCK_CLI, tmp_path_factory.mktemp("aimock") / "aimock.log") as url:
        yield url


KEY = "sk-aimock-0123456789abcdef"
APIS = [
    ("openai-completions", "local", "/v1"),
    ("anthropic-messages", "anthropic", ""),
    ("openai-responses", "openai", "/v1"),
]
by_api = pytest.mark.parametrize(("api", "provider", "path"), APIS, ids=[a for a, _, _ in APIS])


def make_model(url: str, api: str, provider: str, path: str) -> Model:
    return Model(
        id="aimock-model",
        name="aimock",
        api=api,
        provider=provider,
        base_url=url + path,
        reasoning=True,
        context_window=32_000,
        max_tokens=1_000,
    )


async def complete(model: Model, text: str, **options: Any) -> AssistantMessage:
    async with Models() as models:
        context = LlmContext(messages=[UserMessage(content=text)])
        return await models.complete_simple(model, context, StreamOptions(api_key=KEY, **options))


def texts(message: AssistantMessage) -> list[str]:
    return [block.text for block in message.content if isinstance(block, TextContent)]


async def get_weather(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal | None,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    weather = {"Paris": "sunny", "Rome": "rainy"}[params["city"]]
    return AgentToolResult(content=[TextContent(text=f"{weather} in {params['city']}")])


WEATHER = AgentTool(
    name="get_weather",
    label="Weather",
    description="Weather for a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    execute=get_weather,
)


async def run_agent(model: Model, prompt: str) -> Agent:
    async with Models() as models:
        agent = Agent(
            initial_state=AgentInitialState(
                system_prompt="You are a weather bot.", model=model, tools=[WEATHER]
            ),
            stream_fn=models.stream_simple,
            get_api_key=lambda provider: KEY,
        )
        await agent.prompt(prompt)
    return agent


@by_api
async def test_text(aimock_url: str, api: str, provider: str, path: str) -> None:
    model = make_model(aimock_url, api, provider, path)
    async with Models() as models:
        context = LlmContext(messages=[UserMessage(content="say hello")])
        stream = models.stream_simple(model, context, StreamOptions(api_key=KEY))
        async with aclosing(stream):
            events = [event async for event in stream]
    types = [event.type for event in events]
    assert types[:2] == ["start", "text_start"]
    assert types[-2:] == ["text_end", "done"]
    last = events[-1]
    assert last.type == "done"
    assert last.message.stop_reason == "stop"
    assert texts(last.message) == ["Hello from aimock!"]


@by_api
async def test_a_tool_call_and_its_answer(
    aimock_url: str, api: str, provider: str, path: str
) -> None:
    agent = await run_agent(make_model(aimock_url, api, provider, path), "weather in Paris")
    assert agent.state.error_message is None
    roles = [message.role for message in agent.state.messages]
    assert roles == ["system", "user", "assistant", "toolResult", "assistant"]
    call = agent.state.messages[2]
    assert isinstance(call, AssistantMessage)
    assert call.stop_reason == "toolUse"
    assert [(b.name, b.arguments) for b in call.content if isinstance(b, ToolCall)] == [
        ("get_weather", {"city": "Paris"})
    ]
    answer = agent.state.messages[-1]
    assert isinstance(answer, AssistantMessage)
    assert texts(answer) == ["It is sunny in Paris."]


@by_api
async def test_two_parallel_tool_calls(aimock_url: str, api: str, provider: str, path: str) -> None:
    agent = await run_agent(make_model(aimock_url, api, provider, path), "two cities")
    assert agent.state.error_message is None
    messages = agent.state.messages
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    call = messages[2]
    assert isinstance(call, AssistantMessage)
    calls = [b for b in call.content if isinstance(b, ToolCall)]
    assert [c.arguments for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == [c.id for c in calls]
    assert [r.content for r in results] == [
        [TextContent(text="sunny in Paris")],
        [TextContent(text="rainy in Rome")],
    ]
    answer = messages[-1]
    assert isinstance(answer, AssistantMessage)
    assert texts(answer) == ["Paris is sunny, Rome is rainy."]


@by_api
async def test_reasoning(aimock_url: str, api: str, provider: str, path: str) -> None:
    message = await complete(make_model(aimock_url, api, provider, path), "think first")
    assert message.stop_reason == "stop"
    thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
    assert thinking == ["Six times seven."]
    assert texts(message) == ["42"]


@by_api
async def test_abort_mid_stream(aimock_url: str, api: str, provider: str, path: str) -> None:
    # The answer takes 13 chunks of 0.2 s; the abort after the first one ends it at once.
    model = make_model(aimock_url, api, provider, path)
    controller = AbortController()
    options = StreamOptions(api_key=KEY, signal=controller.signal)
    context = LlmContext(messages=[UserMessage(content="slow story")])
    async with Models() as models:
        with trio.fail_after(2):
            stream = models.stream_simple(model, context, options)
            async with aclosing(stream):
                async for event in stream:
                    if event.type == "text_delta":
                        controller.abort()
    assert event.type == "error"
    assert event.error.stop_reason == "aborted"
    assert event.error.error_message == "Request was aborted"
    assert texts(event.error) == ["Once "]


@by_api
async def test_http_500(aimock_url: str, api: str, provider: str, path: str) -> None:
    message = await complete(make_model(aimock_url, api, provider, path), "fail 500")
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith(
        {"openai-responses": "OpenAI API error (500): "}.get(api, "500")
    )
    assert "Internal failure" in message.error_message


@by_api
async def test_http_500_is_retried(aimock_url: str, api: str, provider: str, path: str) -> None:
    with trio.fail_after(10):
        message = await complete(
            make_model(aimock_url, api, provider, path), "fail 500", max_retries=2
        )
    assert message.stop_reason == "error"
    assert "Internal failure" in str(message.error_message)


@by_api
async def test_malformed_body(aimock_url: str, api: str, provider: str, path: str) -> None:
    # aimock answers 200 with a body that is neither a stream nor valid JSON.
    message = await complete(make_model(aimock_url, api, provider, path), "chaos malformed")
    assert message.stop_reason == "error"
    # Worded as each API words an HTTP error body that is not JSON (Responses: the OpenAI
    # client's "<status> <body>" after pi's prefix).
    prefix = {"openai-responses": "OpenAI API error (200): 200 "}.get(api, "200 ")
    assert message.error_message == prefix + "{malformed json: <<<chaos>>>"


@by_api
async def test_disconnect_before_the_response(
    aimock_url: str, api: str, provider: str, path: str
) -> None:
    message = await complete(make_model(aimock_url, api, provider, path), "chaos disconnect")
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith("Connection error (127.0.0.1:")
    assert message.error_message.endswith("): Server disconnected without sending a response.")


@by_api
async def test_disconnect_mid_stream(aimock_url: str, api: str, provider: str, path: str) -> None:
    message = await complete(make_model(aimock_url, api, provider, path), "drop midway")
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert message.error_message.startswith("Connection error (127.0.0.1:")
    assert texts(message)
    assert "This answer is dropped by the server".startswith(texts(message)[0][:10])


@by_api
async def test_rate_limited(aimock_url: str, api: str, provider: str, path: str) -> None:
    model = make_model(aimock_url, api, provider, path)
    message = await complete(model, "chaos ratelimit")
    assert message.stop_reason == "error"
    assert "429" in str(message.error_message)
    assert "Chaos: rate limit exceeded" in str(message.error_message)
    # aimock asks for a 1 s delay: over a 0.5 s cap, the request fails at once.
    with trio.fail_after(0.9):
        capped = await complete(model, "chaos ratelimit", max_retries=1, max_retry_delay_ms=500)
    assert str(capped.error_message).startswith("Server requested 1s retry delay (max: 1s). ")
    # Within the cap, it is retried after that delay (and fails again).
    start = trio.current_time()
    retried = await complete(model, "chaos ratelimit", max_retries=1)
    assert trio.current_time() - start >= 1
    assert "Chaos: rate limit exceeded" in str(retried.error_message)
