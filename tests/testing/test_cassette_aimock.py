"""Cassettes recorded against aimock (the server of ``nox -s interop``) replay to the same
events and final messages as the live runs, byte for byte, for each of the three APIs;
and a replayed stream takes exactly its recorded time on Trio's mock clock.

Skipped unless ``TRIO_AGENT_AIMOCK`` names aimock's CLI script (see
``tests/interop/aimock_e2e.py``). Each test records live (real clock), then replays in a
second ``trio.run`` under ``MockClock(autojump_threshold=0)``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))

from aimock_server import running_aimock

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
    UserMessage,
)
from trio_agent.models import Models
from trio_agent.serialization import to_json
from trio_agent.testing import CassetteTransport, EventRecorder, assert_event_grammar, load_cassette

AIMOCK_CLI = os.environ.get("TRIO_AGENT_AIMOCK")
if AIMOCK_CLI is None:
    pytest.skip("set TRIO_AGENT_AIMOCK (nox -s interop does)", allow_module_level=True)

KEY = "sk-aimock-0123456789abcdef"
APIS = [
    ("openai-completions", "local", "/v1"),
    ("anthropic-messages", "anthropic", ""),
    ("openai-responses", "openai", "/v1"),
]
by_api = pytest.mark.parametrize(("api", "provider", "path"), APIS, ids=[a for a, _, _ in APIS])
PROMPTS = [
    "say hello",
    "think first",
    "slow story",
    "drop midway",
    "fail 500",
    "chaos malformed",
    "chaos disconnect",
]
AGENT_PROMPTS = ["weather in Paris", "two cities"]


@pytest.fixture(scope="module")
def aimock_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    assert AIMOCK_CLI is not None
    with running_aimock(AIMOCK_CLI, tmp_path_factory.mktemp("aimock") / "aimock.log") as url:
        yield url


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


def normalized(events: list[Any]) -> list[str]:
    texts = [to_json(event) for event in events]
    return [re.sub(r'"(timestamp|durationMs)":\d+', r'"\1":0', text) for text in texts]


async def session(transport: CassetteTransport, model: Model) -> list[list[str]]:
    """Every prompt as one stream, then the agent conversations; their events."""
    runs: list[list[str]] = []
    async with httpx.AsyncClient(transport=transport) as client:
        models = Models(http_client=client)
        for prompt in PROMPTS:
            context = LlmContext(messages=[UserMessage(content=prompt, timestamp=1)])
            stream = models.stream_simple(model, context, StreamOptions(api_key=KEY))
            async with aclosing(stream):
                runs.append(normalized([event async for event in stream]))
        for prompt in AGENT_PROMPTS:
            agent = Agent(
                AgentInitialState(
                    system_prompt="You are a weather bot.", model=model, tools=[WEATHER]
                ),
                stream_fn=models.stream_simple,
                get_api_key=lambda provider: KEY,
                # Two parallel instant tools finish in the order Trio's scheduler picks,
                # which it randomizes on purpose; the cassette replays the model traffic.
                tool_execution="sequential",
            )
            recorder = EventRecorder()
            agent.subscribe(recorder)
            await agent.prompt(prompt)
            assert_event_grammar(recorder)
            runs.append(normalized(recorder.events))
    return runs


@by_api
def test_a_cassette_recorded_against_aimock_replays_the_live_run(
    aimock_url: str, api: str, provider: str, path: str, tmp_path: Path
) -> None:
    model = make_model(aimock_url, api, provider, path)
    cassette = tmp_path / f"{api}.json"
    live = trio.run(session, CassetteTransport(cassette, mode="all"), model)
    replay = CassetteTransport(cassette, mode="none")
    replayed = trio.run(session, replay, model, clock=trio.testing.MockClock(autojump_threshold=0))
    assert replayed == live
    replay.assert_all_played()
    # The final messages, byte for byte.
    assert [run[-1] for run in replayed] == [run[-1] for run in live]
    finals = [run[-1] for run in live]
    assert '"errorMessage"' not in finals[0] and "Hello from aimock!" in finals[0]
    assert '"errorMessage":"Connection error' in finals[PROMPTS.index("drop midway")]


@by_api
def test_a_replayed_aimock_stream_takes_exactly_its_recorded_time(
    aimock_url: str, api: str, provider: str, path: str, tmp_path: Path
) -> None:
    model = make_model(aimock_url, api, provider, path)
    cassette = tmp_path / "slow.json"
    context = LlmContext(messages=[UserMessage(content="slow story", timestamp=1)])

    async def stream(transport: CassetteTransport) -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []
        async with httpx.AsyncClient(transport=transport) as client:
            events = Models(http_client=client).stream_simple(
                model, context, StreamOptions(api_key=KEY)
            )
            async with aclosing(events):
                async for event in events:
                    seen.append((event.type, trio.current_time()))
        return seen

    live = trio.run(stream, CassetteTransport(cassette, mode="all"))
    (interaction,) = load_cassette(cassette)
    assert interaction.response is not None
    last_chunk = interaction.response.chunks[-1].at
    assert last_chunk >= 2.0  # 13 chunks, 0.2 s apart
    replayed = trio.run(
        stream,
        CassetteTransport(cassette, mode="none"),
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
    assert [kind for kind, _ in replayed] == [kind for kind, _ in live]
    # Every event at the arrival time of the chunk that carried it; the last at the last.
    assert replayed[0] == ("start", interaction.response.at)
    assert replayed[-1] == ("done", last_chunk)
    arrivals = {chunk.at for chunk in interaction.response.chunks}
    assert {at for _, at in replayed[1:]} <= arrivals
