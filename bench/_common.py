"""Shared pieces of the benchmark scenarios: scripted streams, tools, floors, statistics.

Every scenario drives a real :class:`trio_agent.Agent` with an in-process scripted stream
function (no provider, no network). The stream functions here replay events built in
advance (or a handful of objects per call), so their own cost stays far below the
agent's; S1 reports it separately to prove that.

The *floor* of a scenario is the same amount of raw Trio work without the agent: memory
channel round trips to one consumer that awaits a no-op, or bare tasks. A scenario's
``ratio`` is its median divided by the floor's median.
"""

from __future__ import annotations

import gc
import json
import math
import os
import resource
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import trio

from trio_agent import (
    AbortSignal,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    DoneEvent,
    LlmContext,
    Model,
    StartEvent,
    StopReason,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ToolCall,
    ToolCallEndEvent,
    ToolCallStartEvent,
)

__all__ = [
    "MODEL",
    "ScriptedStream",
    "assistant_message",
    "direct_dispatch",
    "current_rss_bytes",
    "emit_line",
    "final_text_events",
    "noop_tool",
    "peak_rss_bytes",
    "tool_turns",
    "replay",
    "result_line",
    "run_trio",
    "sleep_tool",
    "summarize",
    "tool_call_events",
]

T = TypeVar("T")

MODEL = Model(
    id="bench-model",
    name="Benchmark model",
    api="bench",
    provider="bench",
    base_url="",
)
"""The model every scenario's agent uses (only its ids reach the messages)."""

_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

EventScript = Sequence[AssistantMessageEvent]
"""The events of one scripted response, replayed as they are."""


# ---------------------------------------------------------------------------------------
# Messages and stream events


def assistant_message(
    content: list[AssistantContent], stop_reason: StopReason = "stop"
) -> AssistantMessage:
    """An assistant message of :data:`MODEL` with a fixed timestamp (no clock read)."""
    return AssistantMessage(
        content=content,
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        stop_reason=stop_reason,
        timestamp=0,
    )


def final_text_events(text: str) -> list[AssistantMessageEvent]:
    """``start``, ``text_start``, one ``text_delta`` with all of ``text``, ``text_end``,
    ``done``: the shortest realistic text answer."""
    empty = assistant_message([])
    opened = assistant_message([TextContent(text="")])
    final = assistant_message([TextContent(text=text)])
    return [
        StartEvent(partial=empty),
        TextStartEvent(content_index=0, partial=opened),
        TextDeltaEvent(content_index=0, delta=text, partial=final),
        TextEndEvent(content_index=0, content=text, partial=final),
        DoneEvent(reason="stop", message=final),
    ]


def tool_call_events(calls: Sequence[tuple[str, str]]) -> list[AssistantMessageEvent]:
    """One assistant response calling ``calls`` (``(id, tool name)`` pairs, no
    arguments): ``start``, a ``toolcall_start``/``toolcall_end`` pair per call, ``done``."""
    blocks = [ToolCall(id=call_id, name=name, arguments={}) for call_id, name in calls]
    final = assistant_message(list(blocks), stop_reason="toolUse")
    events: list[AssistantMessageEvent] = [StartEvent(partial=assistant_message([]))]
    for index, block in enumerate(blocks):
        # The partials of a real stream grow block by block; the loop only forwards
        # them, so one shared snapshot per block keeps the script small.
        partial = assistant_message(list(blocks[: index + 1]), stop_reason="toolUse")
        events.append(ToolCallStartEvent(content_index=index, partial=partial))
        events.append(ToolCallEndEvent(content_index=index, tool_call=block, partial=partial))
    events.append(DoneEvent(reason="toolUse", message=final))
    return events


class ScriptedStream:
    """A stream function that replays prepared responses, one per call, in order.

    With ``repeat_last=True`` the last response is replayed for every further call
    (S4 shares one instance between all agents). The generator never checkpoints: the
    agent under test supplies every checkpoint, as it must for a provider that has data
    ready.
    """

    def __init__(self, responses: Sequence[EventScript], *, repeat_last: bool = False) -> None:
        if not responses:
            raise ValueError("ScriptedStream needs at least one response")
        self._responses = list(responses)
        self._repeat_last = repeat_last
        self.calls = 0
        """How many requests were made."""

    def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        index = self.calls
        self.calls += 1
        if index >= len(self._responses):
            if not self._repeat_last:
                raise RuntimeError(f"ScriptedStream has no response #{index + 1}")
            index = len(self._responses) - 1
        return replay(self._responses[index])


async def replay(events: EventScript) -> AsyncIterator[AssistantMessageEvent]:
    """Yield ``events`` one by one (an ``async def`` generator, as providers are)."""
    for event in events:
        yield event


# ---------------------------------------------------------------------------------------
# Tools

_OK = AgentToolResult(content=[TextContent(text="ok")])


def noop_tool() -> AgentTool:
    """``noop``: returns ``ok`` at once, without a checkpoint of its own."""

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        return _OK

    return AgentTool(
        name="noop",
        label="No-op",
        description="Does nothing.",
        parameters=_EMPTY_OBJECT_SCHEMA,
        execute=execute,
    )


def sleep_tool(seconds: float) -> AgentTool:
    """``sleep``: ``trio.sleep(seconds)`` on the real clock, then ``ok``."""

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        await trio.sleep(seconds)
        return _OK

    return AgentTool(
        name="sleep",
        label="Sleep",
        description=f"Sleeps {seconds} s.",
        parameters=_EMPTY_OBJECT_SCHEMA,
        execute=execute,
    )


# ---------------------------------------------------------------------------------------
# Floors: the same amount of raw Trio work without the agent


async def direct_dispatch(
    events: EventScript, listener: Callable[[object], object], *, awaiting: bool
) -> float:
    """Seconds to iterate a scripted stream and hand each event to one listener in this
    task: called directly (a sync listener) or awaited under a shield (an ``async def``
    one). The shape of the agent's dispatch: the run's own task calls its listeners."""
    start = time.perf_counter()
    async for event in replay(events):
        await _hand_over(listener, event, awaiting)
    return time.perf_counter() - start


async def _hand_over(listener: Callable[[object], object], event: object, awaiting: bool) -> None:
    if awaiting:
        with trio.CancelScope(shield=True):
            await listener(event)  # type: ignore[misc]  # an async listener here
    else:
        listener(event)


async def tool_turns(
    turns: int, events_per_turn: int, listener: Callable[[object], object], *, awaiting: bool
) -> float:
    """Seconds for ``turns`` times the raw Trio work of a tool turn: a nursery with one
    task that sends its result over a memory channel to this task, and
    ``events_per_turn`` listener calls as in :func:`direct_dispatch`."""
    send, receive = trio.open_memory_channel[int](math.inf)

    async def tool() -> None:
        send.send_nowait(1)

    start = time.perf_counter()
    for _ in range(turns):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(tool)
            await receive.receive()
        for event in range(events_per_turn):
            await _hand_over(listener, event, awaiting)
    return time.perf_counter() - start


# ---------------------------------------------------------------------------------------
# Running, memory, statistics, output


def run_trio(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` in a fresh ``trio.run`` after a full collection; returns its result.

    The timing happens inside ``fn`` so Trio's start-up is not measured.
    """
    gc.collect()
    return trio.run(fn)


def current_rss_bytes() -> int:
    """Resident set size now (``/proc/self/statm``; peak RSS where that is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
    except OSError:
        return peak_rss_bytes()
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``getrusage``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak if sys.platform == "darwin" else peak * 1024


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of ``values``."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.4g}")
    return value


def result_line(
    scenario: str,
    unit: str,
    values: Sequence[float],
    floor_values: Sequence[float],
    **extras: Any,
) -> dict[str, Any]:
    """The JSON object of one scenario: ``values`` and ``floor_values`` are per-run
    figures in ``unit``; ``ratio`` is median over floor median."""
    stats = summarize(values)
    floor = summarize(floor_values)
    line: dict[str, Any] = {
        "scenario": scenario,
        "unit": unit,
        **stats,
        "runs": len(values),
        "floor_median": floor["median"],
        "floor_min": floor["min"],
        "floor_max": floor["max"],
        "ratio": stats["median"] / floor["median"] if floor["median"] else math.inf,
    }
    line.update(extras)
    return {key: _rounded(value) for key, value in line.items()}


def emit_line(line: dict[str, Any]) -> None:
    """Print one scenario result as one JSON line (flushed, so partial runs show)."""
    print(json.dumps(line), flush=True)
