"""S3: one assistant message with 200 calls to a tool that sleeps 10 ms (real clock).

Measured twice: ``tool_execution="parallel"`` and ``"sequential"``; reported in wall
milliseconds for the whole ``prompt()`` (both turns). Floors: 200 raw
``trio.sleep(0.01)`` tasks in one nursery (parallel), 200 consecutive
``trio.sleep(0.01)`` (sequential).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from trio_agent import Agent, AgentInitialState, AssistantMessageEvent, ToolExecutionMode

from ._common import (
    MODEL,
    ScriptedStream,
    final_text_events,
    result_line,
    run_trio,
    sleep_tool,
    tool_call_events,
)

CALLS = 200
SLEEP = 0.01


def build_scripts() -> list[list[AssistantMessageEvent]]:
    """One response with ``CALLS`` calls of ``sleep``, then the final answer."""
    calls = [(f"call-{index}", "sleep") for index in range(1, CALLS + 1)]
    return [tool_call_events(calls), final_text_events("done")]


def run_agent(scripts: list[list[AssistantMessageEvent]], mode: ToolExecutionMode) -> float:
    """One timed ``prompt()``; returns seconds."""
    agent = Agent(
        AgentInitialState(model=MODEL, tools=[sleep_tool(SLEEP)]),
        stream_fn=ScriptedStream(scripts),
        tool_execution=mode,
    )

    async def main() -> float:
        start = time.perf_counter()
        await agent.prompt("go")
        return time.perf_counter() - start

    elapsed = run_trio(main)
    if agent.state.error_message is not None:
        raise RuntimeError(f"S3 run failed: {agent.state.error_message}")
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    if len(results) != CALLS:
        raise RuntimeError(f"S3 expected {CALLS} tool results, got {len(results)}")
    return elapsed


async def _parallel_floor() -> float:
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(CALLS):
            nursery.start_soon(trio.sleep, SLEEP)
    return time.perf_counter() - start


async def _sequential_floor() -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        await trio.sleep(SLEEP)
    return time.perf_counter() - start


def profile_target() -> Callable[[], object]:
    """One parallel agent run of S3, for ``python -m bench S3 --profile``."""
    scripts = build_scripts()
    return lambda: run_agent(scripts, "parallel")


def run(runs: int) -> list[dict[str, Any]]:
    """Measure S3 parallel and sequential ``runs`` times each; two result lines."""
    scripts = build_scripts()
    modes: list[tuple[ToolExecutionMode, Callable[[], Awaitable[float]]]] = [
        ("parallel", _parallel_floor),
        ("sequential", _sequential_floor),
    ]
    run_agent(scripts, "parallel")  # warm-up (both modes share every code path but one)
    lines: list[dict[str, Any]] = []
    for mode, floor_fn in modes:
        agent_ms: list[float] = []
        floor_ms: list[float] = []
        for _ in range(runs):
            agent_ms.append(run_agent(scripts, mode) * 1e3)
            floor_ms.append(run_trio(floor_fn) * 1e3)
        lines.append(
            result_line(
                "S3",
                "ms",
                agent_ms,
                floor_ms,
                mode=mode,
                calls=CALLS,
                sleep_ms=SLEEP * 1e3,
                overhead_ms=statistics.median(agent_ms) - statistics.median(floor_ms),
            )
        )
    return lines
