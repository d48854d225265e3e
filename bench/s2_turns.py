"""S2: 1,000 turns of one call to an instant ``noop`` tool, then a final text answer.

A listener stamps every ``turn_end`` with :func:`time.perf_counter`. Reported: µs per
turn over the 1,000 tool turns (``prompt()`` start to the 1,000th ``turn_end``), and
separately for turns 1-100 and 901-1000 (a growing transcript must not slow turns down).
Floor: as many channel round trips as the agent delivers events in 1,000 tool turns
(events per tool turn, counted in the run, times 1,000), expressed per turn.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from trio_agent import Agent, AgentEvent, AgentInitialState, AssistantMessageEvent

from ._common import (
    MODEL,
    ScriptedStream,
    channel_round_trips,
    final_text_events,
    noop_tool,
    result_line,
    run_trio,
    tool_call_events,
)

TURNS = 1_000
WINDOW = 100


def build_scripts(turns: int = TURNS) -> list[list[AssistantMessageEvent]]:
    """``turns`` responses calling ``noop`` (ids ``call-1`` …), then ``done``."""
    scripts = [tool_call_events([(f"call-{turn}", "noop")]) for turn in range(1, turns + 1)]
    scripts.append(final_text_events("done"))
    return scripts


def run_agent(scripts: list[list[AssistantMessageEvent]]) -> tuple[float, list[float], int]:
    """One timed ``prompt()``.

    Returns (start time, ``turn_end`` times, events delivered in turn 500 — from the
    ``turn_end`` of turn 499 to that of turn 500).
    """
    agent = Agent(
        AgentInitialState(model=MODEL, tools=[noop_tool()]),
        stream_fn=ScriptedStream(scripts),
    )
    turn_ends: list[float] = []
    events_per_turn: list[int] = [0]

    def stamp(event: AgentEvent) -> None:
        events_per_turn[-1] += 1
        if event.type == "turn_end":
            turn_ends.append(time.perf_counter())
            events_per_turn.append(0)

    agent.subscribe(stamp)
    started: list[float] = []

    async def main() -> float:
        started.append(time.perf_counter())
        await agent.prompt("go")
        return time.perf_counter() - started[0]

    run_trio(main)
    if agent.state.error_message is not None:
        raise RuntimeError(f"S2 run failed: {agent.state.error_message}")
    if len(turn_ends) != len(scripts):
        raise RuntimeError(f"S2 expected {len(scripts)} turns, saw {len(turn_ends)}")
    return started[0], turn_ends, events_per_turn[len(scripts) // 2]


def profile_target() -> Callable[[], object]:
    """One agent run of S2, for ``python -m bench S2 --profile``."""
    scripts = build_scripts()
    return lambda: run_agent(scripts)


def run(runs: int) -> list[dict[str, Any]]:
    """Measure S2 ``runs`` times (after one warm-up run) and return its result line."""
    scripts = build_scripts()
    run_agent(scripts)  # warm-up
    overall: list[float] = []
    first: list[float] = []
    last: list[float] = []
    drift: list[float] = []
    floor: list[float] = []
    events_per_turn = 0
    for _ in range(runs):
        start, ends, events_per_turn = run_agent(scripts)
        overall.append((ends[TURNS - 1] - start) / TURNS * 1e6)
        first_us = (ends[WINDOW - 1] - start) / WINDOW * 1e6
        last_us = (ends[TURNS - 1] - ends[TURNS - WINDOW - 1]) / WINDOW * 1e6
        first.append(first_us)
        last.append(last_us)
        drift.append(last_us / first_us)
        raw = functools.partial(channel_round_trips, events_per_turn * TURNS)
        floor.append(run_trio(raw) / TURNS * 1e6)
    return [
        result_line(
            "S2",
            "us/turn",
            overall,
            floor,
            turns=TURNS,
            first_100_median=statistics.median(first),
            last_100_median=statistics.median(last),
            last_over_first_median=statistics.median(drift),
            last_over_first_max=max(drift),
            events_per_turn=events_per_turn,
            floor_round_trips=events_per_turn * TURNS,
        )
    ]
