"""The three built-in HTTP APIs end to end against a real local server such as llama.cpp's
``llama-server``: text, a tool call and its answer, tool calls for two cities, a reasoning
question, an abort mid-stream, and an HTTP error status.

A real model's answers vary, so the checks are about shape (a tool was called with the
right city, the answer is not empty, the abort ended the stream), not exact text. Not part
of the default run. Point it at a server with::

    TRIO_AGENT_LOCAL_SERVER=http://127.0.0.1:8080 pytest tests/interop/local_server_e2e.py

``TRIO_AGENT_LOCAL_MODEL`` sets the model id (default ``local``) and
``TRIO_AGENT_LOCAL_APIS`` the APIs to run (comma-separated, default all three). Without
``TRIO_AGENT_LOCAL_SERVER``, ``nox -s interop`` runs it against aimock, whose scripted
answers are matched on words the prompts contain.
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
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from trio_agent.models import Models

SERVER = os.environ.get("TRIO_AGENT_LOCAL_SERVER")
AIMOCK_CLI = os.environ.get("TRIO_AGENT_AIMOCK")
if SERVER is None and AIMOCK_CLI is None:
    pytest.skip("set TRIO_AGENT_LOCAL_SERVER (or TRIO_AGENT_AIMOCK)", allow_module_level=True)

MODEL_ID = os.environ.get("TRIO_AGENT_LOCAL_MODEL", "local")
ALL_APIS = {
    "openai-completions": "/v1",
    "anthropic-messages": "",
    "openai-responses": "/v1",
}
APIS = os.environ.get("TRIO_AGENT_LOCAL_APIS", ",".join(ALL_APIS)).split(",")
by_api = pytest.mark.parametrize("api", APIS)

LOCAL_COMPAT: dict[str, Any] = {
    "maxTokensField": "max_tokens",
    "requiresNonNullAssistantContent": True,
    "supportsStore": False,
    "supportsDeveloperRole": False,
}
"""What a local OpenAI-compatible server needs (see docs/providers.md)."""

KEY = "sk-local-placeholder"


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The local server's base URL (without ``/v1``)."""
    if SERVER is not None:
        yield SERVER.rstrip("/")
        return
    assert AIMOCK_CLI is not None
    with running_aimock(AIMOCK_CLI, tmp_path_factory.mktemp("aimock") / "aimock.log") as url:
        yield url


def make_model(server_url: str, api: str) -> Model:
    return Model(
        id=MODEL_ID,
        name="local server",
        api=api,
        provider="local",
        base_url=server_url + ALL_APIS[api],
        reasoning=True,
        context_window=16_384,
        max_tokens=1_024,
        compat=LOCAL_COMPAT if api == "openai-completions" else None,
    )


def texts(message: AssistantMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


async def get_weather(
    tool_call_id: str,
    params: dict[str, Any],
    signal: AbortSignal | None,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    city = str(params.get("city", ""))
    weather = "rainy" if "rome" in city.lower() else "sunny"
    return AgentToolResult(content=[TextContent(text=f"{weather} in {city}")])


WEATHER = AgentTool(
    name="get_weather",
    label="Weather",
    description="The current weather of a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city's name"}},
        "required": ["city"],
    },
    execute=get_weather,
)


async def run_agent(model: Model, prompt: str) -> Agent:
    async with Models() as models:
        agent = Agent(
            initial_state=AgentInitialState(
                system_prompt="You answer weather questions with the get_weather tool.",
                model=model,
                tools=[WEATHER],
            ),
            stream_fn=models.stream_simple,
            get_api_key=lambda provider: KEY,
        )
        with trio.fail_after(300):
            await agent.prompt(prompt)
    return agent


def called_cities(agent: Agent) -> list[str]:
    return [
        str(block.arguments.get("city", ""))
        for message in agent.state.messages
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, ToolCall)
    ]


@by_api
async def test_text(server_url: str, api: str) -> None:
    async with Models() as models:
        context = LlmContext(messages=[UserMessage(content="Please say hello in five words.")])
        stream = models.stream_simple(
            make_model(server_url, api), context, StreamOptions(api_key=KEY)
        )
        async with aclosing(stream):
            events = [event async for event in stream]
    last = events[-1]
    assert last.type == "done", last
    assert last.message.stop_reason in ("stop", "length")
    assert texts(last.message).strip()
    types = [event.type for event in events]
    assert types[0] == "start"
    assert types.count("text_start") == types.count("text_end") >= 1


@by_api
async def test_a_tool_call_and_its_answer(server_url: str, api: str) -> None:
    agent = await run_agent(
        make_model(server_url, api),
        "What is the weather in Paris? Call get_weather, then answer in one sentence.",
    )
    assert agent.state.error_message is None
    assert any("paris" in city.lower() for city in called_cities(agent))
    assert any(isinstance(message, ToolResultMessage) for message in agent.state.messages)
    answer = agent.state.messages[-1]
    assert isinstance(answer, AssistantMessage)
    assert answer.stop_reason == "stop"
    assert texts(answer).strip()


@by_api
async def test_tool_calls_for_two_cities(server_url: str, api: str) -> None:
    agent = await run_agent(
        make_model(server_url, api),
        "Compare two cities, Paris and Rome: call get_weather for each of them (both calls "
        "at once if you can), then answer in one sentence.",
    )
    assert agent.state.error_message is None
    cities = {city.lower() for city in called_cities(agent)}
    assert any("paris" in city for city in cities)
    assert any("rome" in city for city in cities)
    results = [m for m in agent.state.messages if isinstance(m, ToolResultMessage)]
    assert len(results) >= 2
    answer = agent.state.messages[-1]
    assert isinstance(answer, AssistantMessage)
    assert texts(answer).strip()


@by_api
async def test_reasoning(server_url: str, api: str) -> None:
    context = LlmContext(
        messages=[
            UserMessage(content="think first: what is six times seven? Reply with the number.")
        ]
    )
    options = StreamOptions(api_key=KEY, reasoning="low")
    async with Models() as models:
        with trio.fail_after(300):
            message = await models.complete_simple(make_model(server_url, api), context, options)
    assert message.stop_reason == "stop", message.error_message
    assert "42" in texts(message)


@by_api
async def test_abort_mid_stream(server_url: str, api: str) -> None:
    controller = AbortController()
    options = StreamOptions(api_key=KEY, signal=controller.signal)
    context = LlmContext(
        messages=[UserMessage(content="Tell a slow story about a lighthouse keeper, 300 words.")]
    )
    async with Models() as models:
        with trio.fail_after(60):
            stream = models.stream_simple(make_model(server_url, api), context, options)
            async with aclosing(stream):
                async for event in stream:
                    if event.type == "text_delta":
                        controller.abort()
    assert event.type == "error"
    assert event.error.stop_reason == "aborted"
    assert texts(event.error)


@by_api
async def test_an_http_error_status(server_url: str, api: str) -> None:
    model = make_model(server_url + "/no-such-path", api)
    async with Models() as models:
        message = await models.complete_simple(
            model, LlmContext(messages=[UserMessage(content="hi")]), StreamOptions(api_key=KEY)
        )
    assert message.stop_reason == "error"
    assert message.error_message
