"""The assistant message builder: snapshots stay cheap for long blocks (streaming is linear)."""

from __future__ import annotations

import gc
import json
import time
from contextlib import aclosing
from typing import Any

import httpx
from sse_server import ScriptedResponse, SseServer, sse_chunk

from trio_agent import (
    AssistantMessageEvent,
    DoneEvent,
    LlmContext,
    Model,
    ModelCost,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    UserMessage,
)
from trio_agent.models._builder import (
    EXACT_SNAPSHOT_CHARS,
    SNAPSHOT_LAG_DIVISOR,
    AssistantMessageBuilder,
)
from trio_agent.models._http import HttpEnv
from trio_agent.models._openai_completions import stream_openai_completions


def model(base_url: str) -> Model:
    return Model(
        id="gpt-test",
        name="Test",
        api="openai-completions",
        provider="custom",
        base_url=f"{base_url}/v1",
        input=["text"],
        cost=ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75),
        context_window=200000,
        max_tokens=32000,
    )


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
    return sse_chunk({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})


async def stream(server: SseServer, client: httpx.AsyncClient) -> list[AssistantMessageEvent]:
    context = LlmContext(messages=[UserMessage(content="Hi", timestamp=0)])
    events = stream_openai_completions(
        model(server.base_url), context, StreamOptions(api_key="k"), HttpEnv(client=client)
    )
    async with aclosing(events):
        return [event async for event in events]


def copied_text(events: list[AssistantMessageEvent], index: int) -> int:
    """Characters of the distinct text objects the snapshots of block ``index`` hold."""
    seen: set[int] = set()
    total = 0
    for event in events:
        partial = getattr(event, "partial", None)
        if partial is None or len(partial.content) <= index:
            continue
        block = partial.content[index]
        text = block.text if isinstance(block, TextContent) else None
        if isinstance(block, ToolCall):
            text = block.arguments.get("p")
        if isinstance(text, str) and id(text) not in seen:
            seen.add(id(text))
            total += len(text)
    return total


async def test_a_1mb_answer_in_20000_deltas_is_linear(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    piece = "0123456789" * 5
    frames = [chunk({"content": piece}) for _ in range(20000)]
    frames += [chunk({}, "stop"), b"data: [DONE]\n\n"]
    sse_server.enqueue(ScriptedResponse(chunks=[b"".join(frames)]))
    started = time.perf_counter()
    events = await stream(sse_server, http_client)
    elapsed = time.perf_counter() - started
    assert len(events) == 20004
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.message.content == [TextContent(text=piece * 20000)]
    # Every snapshot is exact up to 64 KiB, then lags by less than 1/16 of its text.
    for number, event in enumerate(events[2:-2], start=1):
        assert not isinstance(event, DoneEvent)
        shown = event.partial.content[0]  # type: ignore[union-attr]
        assert isinstance(shown, TextContent)
        if number * len(piece) <= EXACT_SNAPSHOT_CHARS:
            assert shown.text == piece * number
        else:
            assert (number * len(piece) - len(shown.text)) * SNAPSHOT_LAG_DIVISOR < len(
                shown.text
            ) + SNAPSHOT_LAG_DIVISOR * len(piece)
    # Linear: the snapshots copy each character a bounded number of times, not 10,000.
    exact_phase = EXACT_SNAPSHOT_CHARS**2 // len(piece)
    assert copied_text(events, 0) < (SNAPSHOT_LAG_DIVISOR + 2) * 1_000_000 + exact_phase
    assert elapsed < 10  # about 1 s on a loaded machine; quadratic was 14-34 s


async def test_a_10mb_tool_argument_in_1000_deltas_is_linear(
    sse_server: SseServer, http_client: httpx.AsyncClient
) -> None:
    piece = "a" * 10_000
    start = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}
    frames = [chunk({"tool_calls": [{**start, "function": {"name": "f", "arguments": '{"p":"'}}]})]
    frames += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for _ in range(1000)
    ]
    frames += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}),
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]
    sse_server.enqueue(ScriptedResponse(chunks=[b"".join(frames)]))
    started = time.perf_counter()
    events = await stream(sse_server, http_client)
    elapsed = time.perf_counter() - started
    done = events[-1]
    assert isinstance(done, DoneEvent)
    (call,) = done.message.content
    assert isinstance(call, ToolCall)
    assert call.arguments == {"p": piece * 1000}
    assert copied_text(events, 0) < (SNAPSHOT_LAG_DIVISOR + 2) * 10_000_000
    assert elapsed < 10  # about 0.5 s; quadratic was 4 s


async def test_builder_time_per_delta_does_not_grow_with_the_size() -> None:
    def run(deltas: int) -> float:
        gc.collect()
        builder = AssistantMessageBuilder(api="a", provider="p", model="m")
        started = time.perf_counter()
        index, _ = builder.start_text()
        thinking, _ = builder.start_thinking()
        call, _ = builder.start_tool_call(id="c", name="f")
        builder.tool_call_delta(call, '{"p":"')
        for _ in range(deltas):
            builder.text_delta(index, "x" * 50)
            builder.thinking_delta(thinking, "y" * 50)
            builder.tool_call_delta(call, "z" * 500)
        builder.tool_call_delta(call, '"}')
        builder.end_block(index)
        builder.end_block(thinking)
        builder.end_block(call)
        return time.perf_counter() - started

    run(1000)  # warm up
    small = min(run(5000) for _ in range(3))
    large = min(run(20000) for _ in range(3))
    # Linear gives 4; the quadratic builder gave about 40.
    assert large / small < 8


async def test_snapshots_are_exact_while_short_then_lag_by_a_bounded_fraction() -> None:
    builder = AssistantMessageBuilder(api="a", provider="p", model="m")
    index, _ = builder.start_text("ab")
    received = "ab"
    lags: list[int] = []
    for number in range(5000):
        delta = f"{number:05d}" * 8
        received += delta
        event = builder.text_delta(index, delta)
        shown = event.partial.content[index]
        assert isinstance(shown, TextContent)
        assert received.startswith(shown.text)
        if len(received) <= EXACT_SNAPSHOT_CHARS:
            assert shown.text == received
        assert (len(received) - len(shown.text)) * SNAPSHOT_LAG_DIVISOR < len(shown.text) + 640
        lags.append(len(received) - len(shown.text))
    assert max(lags) > 0
    # The complete text is there as soon as anything reads the content or the block ends.
    assert builder.content[index] == TextContent(text=received)
    end = builder.end_text(index)
    assert end.content == received
    assert end.partial.content == [TextContent(text=received)]


async def test_error_and_done_carry_the_complete_blocks() -> None:
    builder = AssistantMessageBuilder(api="a", provider="p", model="m")
    text, _ = builder.start_text()
    thinking, _ = builder.start_thinking(signature="s")
    call, _ = builder.start_tool_call(id="c", name="f")
    builder.tool_call_delta(call, '{"p":"')
    for _ in range(3000):
        builder.text_delta(text, "t" * 100)
        builder.thinking_delta(thinking, "h" * 100)
        builder.tool_call_delta(call, "a" * 100)
    error = builder.error("boom")
    assert error.error.content == [
        TextContent(text="t" * 300_000),
        ThinkingContent(thinking="h" * 300_000, thinking_signature="s"),
        ToolCall(id="c", name="f", arguments={"p": "a" * 300_000}),
    ]
    assert builder.tool_call_arguments_text(call) == '{"p":"' + "a" * 300_000
    assert json.loads(builder.tool_call_arguments_text(call) + '"}') == {"p": "a" * 300_000}
