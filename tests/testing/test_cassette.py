"""Cassettes: record real provider traffic, replay it through the real provider code with
its chunking and its timing on Trio's clock.

The live runs here talk to the provider tests' loopback SSE server
(``tests/models/sse_server.py``); ``test_cassette_aimock.py`` does the same against aimock
when ``TRIO_AGENT_AIMOCK`` is set.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio
import trio.testing

# The provider tests' scripted loopback server (tests/models/sse_server.py), shared.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from sse_server import ScriptedResponse, SseServer, error_response, sse_response, start_sse_server
from test_provider_agent_e2e import (
    ANTHROPIC,
    COMPLETIONS,
    QUESTION,
    RESPONSES,
    SYSTEM_PROMPT,
    WEATHER_TOOL,
    Script,
)

from trio_agent import (
    AbortController,
    Agent,
    AgentEvent,
    AgentInitialState,
    AssistantMessageEvent,
    LlmContext,
    Model,
    StreamOptions,
    UserMessage,
)
from trio_agent.models import Models
from trio_agent.serialization import to_json
from trio_agent.testing import (
    CassetteError,
    CassetteMismatchError,
    CassetteTransport,
    EventRecorder,
    Interaction,
    RecordedChunk,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
    assert_event_grammar,
    load_cassette,
    save_cassette,
)

KEY = "sk-test-cassette-0123456789abcdef"
SCRIPTS = [
    pytest.param(COMPLETIONS, id="openai-completions"),
    pytest.param(ANTHROPIC, id="anthropic-messages"),
    pytest.param(RESPONSES, id="openai-responses"),
]


def make_model(script: Script, base_url: str) -> Model:
    return Model(
        id="test-model",
        name="Test Model",
        api=script.api,
        provider=script.provider,
        base_url=base_url + script.base_path,
        context_window=32_000,
        max_tokens=1_000,
    )


def normalized(events: list[Any]) -> list[str]:
    """Events as JSON, without the wall-clock timestamps and the measured durations."""
    texts = [to_json(event) for event in events]
    return [re.sub(r'"(timestamp|durationMs)":\d+', r'"\1":0', text) for text in texts]


async def run_agent(transport: httpx.AsyncBaseTransport, model: Model) -> list[AgentEvent]:
    async with httpx.AsyncClient(transport=transport) as client:
        models = Models(http_client=client)
        agent = Agent(
            AgentInitialState(system_prompt=SYSTEM_PROMPT, model=model, tools=[WEATHER_TOOL]),
            stream_fn=models.stream_simple,
            get_api_key=lambda provider: KEY,
        )
        recorder = EventRecorder()
        agent.subscribe(recorder)
        await agent.prompt(QUESTION)
    return recorder.events


async def stream_once(
    transport: httpx.AsyncBaseTransport,
    model: Model,
    options: StreamOptions | None = None,
    *,
    abort_after_deltas: int | None = None,
) -> list[AssistantMessageEvent]:
    options = options or StreamOptions(api_key=KEY)
    controller = AbortController()
    options = attrs.evolve(options, signal=controller.signal)
    events: list[AssistantMessageEvent] = []
    async with httpx.AsyncClient(transport=transport) as client:
        models = Models(http_client=client)
        context = LlmContext(messages=[UserMessage(content=QUESTION, timestamp=1)])
        stream = models.stream_simple(model, context, options)
        async with aclosing(stream):
            async for event in stream:
                events.append(event)
                deltas = sum(e.type.endswith("_delta") for e in events)
                if abort_after_deltas is not None and deltas == abort_after_deltas:
                    controller.abort()
    return events


@pytest.fixture
async def sse_server(nursery: trio.Nursery) -> SseServer:
    """A running loopback server (stopped with the test's nursery)."""
    return await start_sse_server(nursery)


# ---------------------------------------------------------------------------------------
# Record live, replay the same


@pytest.mark.parametrize("script", SCRIPTS)
async def test_a_recorded_agent_run_replays_to_the_same_events(
    script: Script, sse_server: SseServer, tmp_path: Path
) -> None:
    path = tmp_path / "run.json"
    sse_server.enqueue(*script.turns)
    model = make_model(script, sse_server.base_url)
    live = await run_agent(CassetteTransport(path, mode="once"), model)
    assert len(sse_server.requests) == 2
    assert [i.response.status for i in load_cassette(path) if i.response] == [200, 200]

    replay_transport = CassetteTransport(path, mode="none")
    replayed = await run_agent(replay_transport, model)
    assert len(sse_server.requests) == 2  # nothing reached the server
    assert normalized(replayed) == normalized(live)
    assert_event_grammar(replayed)
    final = replayed[-2]
    assert final.type == "turn_end"
    replay_transport.assert_all_played()


@pytest.mark.parametrize("script", SCRIPTS)
async def test_a_cassette_cut_at_any_chunk_replays_the_live_cut(
    script: Script, sse_server: SseServer, tmp_path: Path
) -> None:
    sse_server.enqueue(script.turns[1])
    model = make_model(script, sse_server.base_url)
    full_path = tmp_path / "full.json"
    full_events = await stream_once(CassetteTransport(full_path), model)
    assert full_events[-1].type == "done"
    (full,) = load_cassette(full_path)
    assert full.response is not None
    body = b"".join(chunk.data for chunk in full.response.chunks)
    # Every chunk boundary, every SSE frame boundary, and the middle of every frame.
    ends = [0, *(m.end() for m in re.finditer(rb"\n\n", body))]
    boundaries = [0]
    for chunk in full.response.chunks:
        boundaries.append(boundaries[-1] + len(chunk.data))
    middles = [(a + b) // 2 for a, b in itertools.pairwise(ends)]
    cuts = sorted({*ends, *boundaries, *middles} - {len(body)})
    assert len(cuts) >= 5
    for cut in cuts:
        # Live: the server sends the first `cut` bytes and drops the connection.
        sse_server.enqueue(
            ScriptedResponse(
                headers={"content-type": "text/event-stream"},
                chunks=[body[:cut]] if cut else [],
                close_early=True,
            )
        )
        live_path = tmp_path / f"live-{cut}.json"
        live = await stream_once(CassetteTransport(live_path, mode="all"), model)
        (live_recording,) = load_cassette(live_path)
        assert live_recording.response is not None
        error = live_recording.response.error
        assert error is not None and error.type == "RemoteProtocolError"
        # The full cassette cut there: the same bytes, then the recorded disconnect.
        cut_path = tmp_path / f"cut-{cut}.json"
        chunks = _cut_chunks(full.response.chunks, cut)
        cut_response = attrs.evolve(full.response, chunks=chunks, error=error)
        save_cassette(cut_path, [attrs.evolve(full, response=cut_response)])
        replayed = await stream_once(CassetteTransport(cut_path, mode="none"), model)
        assert normalized(replayed) == normalized(live), cut
        last = replayed[-1]
        assert last.type == "error"
        assert last.error.error_message is not None
        assert last.error.error_message.startswith("Connection error")


def _cut_chunks(chunks: tuple[RecordedChunk, ...], size: int) -> tuple[RecordedChunk, ...]:
    kept: list[RecordedChunk] = []
    left = size
    for chunk in chunks:
        if left <= 0:
            break
        kept.append(attrs.evolve(chunk, data=chunk.data[:left]))
        left -= len(chunk.data)
    return tuple(kept)


# ---------------------------------------------------------------------------------------
# Timing on Trio's clock


def _completions_frame(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return ("data: " + json.dumps({"id": "c1", "choices": [choice]}) + "\n\n").encode()


def _slow_cassette(path: Path, url: str) -> None:
    frames = [
        (0.5, _completions_frame("Once")),
        (5.0, _completions_frame(" upon")),
        (10.25, _completions_frame(" a")),
        (15.0, _completions_frame(" time")),
        (20.0, _completions_frame(finish="stop") + b"data: [DONE]\n\n"),
    ]
    request = RecordedRequest(method="POST", url=url)
    response = RecordedResponse(
        status=200,
        headers=(("content-type", "text/event-stream"),),
        at=0.25,
        chunks=tuple(RecordedChunk(at=at, data=data) for at, data in frames),
    )
    save_cassette(path, [Interaction(request=request, response=response)])


async def test_a_20_s_stream_replays_at_its_recorded_times_in_no_wall_time(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "slow.json"
    model = make_model(COMPLETIONS, "http://api.example")
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    seen: list[tuple[str, float]] = []
    wall = time.perf_counter()
    async with httpx.AsyncClient(
        transport=CassetteTransport(path, mode="none", match_on=("method", "url"))
    ) as client:
        stream = Models(http_client=client).stream_simple(
            model, LlmContext(messages=[UserMessage(content="tell me")]), StreamOptions(api_key=KEY)
        )
        async with aclosing(stream):
            async for event in stream:
                seen.append((event.type, trio.current_time()))
    assert time.perf_counter() - wall < 1.0
    assert seen == [
        ("start", 0.25),
        ("text_start", 0.5),
        ("text_delta", 0.5),
        ("text_delta", 5.0),
        ("text_delta", 10.25),
        ("text_delta", 15.0),
        ("text_end", 20.0),
        ("done", 20.0),
    ]
    assert trio.current_time() == 20.0


async def test_pace_false_replays_without_waiting(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "slow.json"
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    transport = CassetteTransport(path, mode="none", match_on=("method", "url"), pace=False)
    events = await stream_once(transport, make_model(COMPLETIONS, "http://api.example"))
    assert events[-1].type == "done"
    assert trio.current_time() == 0.0


async def test_an_abort_mid_replay_ends_the_stream_like_a_real_one(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "slow.json"
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    transport = CassetteTransport(path, mode="none", match_on=("method", "url"))
    model = make_model(COMPLETIONS, "http://api.example")
    events = await stream_once(transport, model, abort_after_deltas=2)
    assert [e.type for e in events] == ["start", "text_start", "text_delta", "text_delta", "error"]
    last = events[-1]
    assert last.type == "error"
    assert (last.error.stop_reason, last.error.error_message) == ("aborted", "Request was aborted")
    assert trio.current_time() == 5.0


async def test_a_cancelled_replay_does_not_hang(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "slow.json"
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    model = make_model(COMPLETIONS, "http://api.example")
    transport = CassetteTransport(path, mode="none", match_on=("method", "url"))
    with trio.move_on_after(7) as scope:
        await stream_once(transport, model)
    assert scope.cancelled_caught
    assert trio.current_time() == 7.0


# ---------------------------------------------------------------------------------------
# Modes, matching, failures


async def test_modes(sse_server: SseServer, tmp_path: Path) -> None:
    model = make_model(COMPLETIONS, sse_server.base_url)
    path = tmp_path / "modes.json"
    text = sse_response([_completions_frame("hi"), _completions_frame(finish="stop")])

    # none: never records.
    with pytest.raises(CassetteMismatchError, match="the file does not exist"):
        await stream_once(CassetteTransport(path, mode="none"), model)
    assert not path.exists() and not sse_server.requests

    # once: records when the file is absent ...
    sse_server.enqueue(text)
    await stream_once(CassetteTransport(path, mode="once"), model)
    assert len(load_cassette(path)) == 1
    # ... replays once it exists, and refuses what it did not record.
    once = CassetteTransport(path, mode="once")
    assert not once.recording
    await stream_once(once, model)
    assert len(sse_server.requests) == 1
    other = StreamOptions(api_key=KEY, max_tokens=7)
    with pytest.raises(CassetteMismatchError):
        await stream_once(CassetteTransport(path, mode="once"), model, other)

    # new_episodes: replays what matches, records and appends the rest.
    sse_server.enqueue(text)
    episodes = CassetteTransport(path, mode="new_episodes")
    await stream_once(episodes, model)
    await stream_once(CassetteTransport(path, mode="new_episodes"), model, other)
    assert len(sse_server.requests) == 2
    assert len(load_cassette(path)) == 2

    # all: records everything again and rewrites the file.
    sse_server.enqueue(text)
    await stream_once(CassetteTransport(path, mode="all"), model)
    assert len(sse_server.requests) == 3
    assert len(load_cassette(path)) == 1

    with pytest.raises(ValueError, match="mode must be one of once, none, new_episodes, all"):
        CassetteTransport(path, mode="sometimes")  # type: ignore[arg-type]  # the wrong value under test


async def test_an_unmatched_request_names_the_closest_recording_and_the_difference(
    sse_server: SseServer, tmp_path: Path
) -> None:
    model = make_model(COMPLETIONS, sse_server.base_url)
    path = tmp_path / "closest.json"
    frames = [_completions_frame("hi"), _completions_frame(finish="stop")]
    sse_server.enqueue(sse_response(frames), sse_response(frames))
    await stream_once(CassetteTransport(path), model)
    await stream_once(
        CassetteTransport(path, mode="new_episodes"),
        model,
        StreamOptions(api_key=KEY, max_tokens=50),
    )

    transport = CassetteTransport(path, mode="none")
    events = await stream_once_quietly(transport, model, StreamOptions(api_key=KEY, max_tokens=60))
    url = f"{sse_server.base_url}/v1/chat/completions"
    expected = "\n".join(
        [
            f"cassette {path} (mode 'none') has no recorded response for POST {url}",
            f"closest recorded request: #1 POST {url}",
            "difference: body at $.max_completion_tokens: recorded 50, got 60",
        ]
    )
    last = events[-1]
    assert last.type == "error"
    assert last.error.error_message == expected
    with pytest.raises(CassetteMismatchError) as info:
        await transport.aclose()
    assert str(info.value) == expected


async def stream_once_quietly(
    transport: CassetteTransport, model: Model, options: StreamOptions
) -> list[AssistantMessageEvent]:
    # Without closing the transport (whose aclose() raises the mismatch again).
    client = httpx.AsyncClient(transport=transport)
    context = LlmContext(messages=[UserMessage(content=QUESTION, timestamp=1)])
    stream = Models(http_client=client).stream_simple(model, context, options)
    async with aclosing(stream):
        return [event async for event in stream]


async def test_a_request_played_up_says_so(sse_server: SseServer, tmp_path: Path) -> None:
    model = make_model(COMPLETIONS, sse_server.base_url)
    path = tmp_path / "once.json"
    sse_server.enqueue(sse_response([_completions_frame("hi"), _completions_frame(finish="stop")]))
    await stream_once(CassetteTransport(path), model)
    transport = CassetteTransport(path, mode="none")
    await stream_once_quietly(transport, model, StreamOptions(api_key=KEY))
    events = await stream_once_quietly(transport, model, StreamOptions(api_key=KEY))
    last = events[-1]
    assert last.type == "error"
    assert last.error.error_message is not None
    assert last.error.error_message.endswith(
        "difference: none, but it was already played (each recorded response answers one "
        "request; record again with mode 'new_episodes' or 'all')"
    )


async def test_retries_and_connection_errors_replay(
    autojump_clock: trio.testing.MockClock, sse_server: SseServer, tmp_path: Path
) -> None:
    model = make_model(COMPLETIONS, sse_server.base_url)
    path = tmp_path / "retry.json"
    sse_server.enqueue(
        error_response(429, {"error": {"message": "Rate limited"}}, {"retry-after": "3"}),
        sse_response([_completions_frame("ok"), _completions_frame(finish="stop")]),
    )
    options = StreamOptions(api_key=KEY, max_retries=1)
    live = await stream_once(CassetteTransport(path), model, options)
    assert [i.response.status for i in load_cassette(path) if i.response] == [429, 200]
    start = trio.current_time()
    replayed = await stream_once(CassetteTransport(path, mode="none"), model, options)
    assert normalized(replayed) == normalized(live)
    assert 3.0 <= trio.current_time() - start < 3.5

    # A request that never got a response replays its transport error.
    refused = make_model(COMPLETIONS, "http://127.0.0.1:9")
    refused_path = tmp_path / "refused.json"
    live = await stream_once(CassetteTransport(refused_path), refused)
    (interaction,) = load_cassette(refused_path)
    assert interaction.response is None and interaction.error is not None
    assert interaction.error.type == "ConnectError"
    replayed = await stream_once(CassetteTransport(refused_path, mode="none"), refused)
    assert normalized(replayed) == normalized(live)
    assert live[-1].type == "error"
    assert live[-1].error.error_message is not None
    assert live[-1].error.error_message.startswith("Connection error")


async def test_an_unresolved_host_replays_with_its_cause(tmp_path: Path) -> None:
    # Real clock: the name lookup runs in a thread, which an autojump clock would outrun.
    unknown = make_model(COMPLETIONS, "http://no-such-host.invalid")
    path = tmp_path / "unknown.json"
    with trio.fail_after(30):
        live = await stream_once(CassetteTransport(path), unknown)
    (interaction,) = load_cassette(path)
    assert interaction.error is not None
    assert interaction.error.cause_type == "socket.gaierror"
    replayed = await stream_once(CassetteTransport(path, mode="none"), unknown)
    assert normalized(replayed) == normalized(live)
    assert live[-1].type == "error"
    assert "the host name cannot be resolved" in str(live[-1].error.error_message)


async def test_a_recording_cut_short_by_its_client_fails_further_reads(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    path = tmp_path / "partial.json"
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    (full,) = load_cassette(path)
    assert full.response is not None
    partial = attrs.evolve(full.response, chunks=full.response.chunks[:2], complete=False)
    save_cassette(path, [attrs.evolve(full, response=partial)])
    transport = CassetteTransport(path, mode="none", match_on=("method", "url"))
    events = await stream_once(transport, make_model(COMPLETIONS, "http://api.example"))
    last = events[-1]
    assert last.type == "error"
    assert last.error.error_message is not None
    assert last.error.error_message.startswith("Connection error")
    assert last.error.error_message.endswith(
        f": cassette {path}: the recording of this response stopped after "
        "2 chunks (the recording client stopped reading)"
    )


def test_the_file_is_readable_json_with_one_line_per_chunk(tmp_path: Path) -> None:
    path = tmp_path / "slow.json"
    _slow_cassette(path, "http://api.example/v1/chat/completions")
    lines = path.read_text().splitlines()
    assert lines[:3] == ["{", '  "version": 1,', '  "interactions": [']
    chunk_lines = [line.strip() for line in lines if line.strip().startswith('{"at"')]
    assert chunk_lines[0] == (
        '{"at": 0.5, "text": "data: {\\"id\\": \\"c1\\", \\"choices\\": [{\\"index\\": 0, '
        '\\"delta\\": {\\"content\\": \\"Once\\"}, \\"finish_reason\\": null}]}\\n\\n"},'
    )
    assert len(chunk_lines) == 5
    assert load_cassette(path) == load_cassette(path)
    path.write_text('{"version": 2, "interactions": []}')
    with pytest.raises(CassetteError, match="version 2, expected 1"):
        load_cassette(path)
    path.write_text("[")
    with pytest.raises(CassetteError, match="is malformed"):
        load_cassette(path)
    assert RecordedError(type="ReadError", message="x").at == 0.0
