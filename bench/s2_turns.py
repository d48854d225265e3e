"""S2: 1,000 turns of one call to an instant ``noop`` tool, then a final text answer.

A listener (a plain function, or an ``async def`` with ``"listener": "async"``) stamps
every ``turn_end`` with :func:`time.perf_counter`. Reported: µs per turn over the 1,000
tool turns (``prompt()`` start to the 1,000th ``turn_end``), and separately for turns
1-100 and 901-1000 (a growing transcript must not slow turns down). Floor: 1,000 times the
raw Trio work of a tool turn (a nursery with one task whose result comes back over a
memory channel) plus the listener calls of a turn (events per tool turn, counted in the
run), expressed per turn.
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
    final_text_events,
    noop_tool,
    result_line,
    run_trio,
    tool_call_events,
    tool_turns,
)
from .s1_stream import _listener

TURNS = 1_000
WINDOW = 100


def build_scripts(turns: int = TURNS) -> list[list[AssistantMessageEvent]]:
    """``turns`` responses calling ``noop`` (ids ``call-1`` …), then ``done``."""
    scripts = [tool_call_events([(f"call-{turn}", "noop")]) for turn in range(1, turns + 1)]
    scripts.append(final_text_events("done"))
    return scripts


def run_agent(
    scripts: list[list[AssistantMessageEvent]], *, awaiting: bool = False
) -> tuple[float, list[float], int]:
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

    async def stamp_async(event: AgentEvent) -> None:
        stamp(event)

    agent.subscribe(stamp_async if awaiting else stamp)
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
    """Measure S2 ``runs`` times (after one warm-up run) per listener kind and return the
    result lines."""
    scripts = build_scripts()
    lines = []
    for awaiting in (False, True):
        run_agent(scripts, awaiting=awaiting)  # warm-up
        overall: list[float] = []
        first: list[float] = []
        last: list[float] = []
        drift: list[float] = []
        floor: list[float] = []
        events_per_turn = 0
        for _ in range(runs):
            start, ends, events_per_turn = run_agent(scripts, awaiting=awaiting)
            overall.append((ends[TURNS - 1] - start) / TURNS * 1e6)
            first_us = (ends[WINDOW - 1] - start) / WINDOW * 1e6
            last_us = (ends[TURNS - 1] - ends[TURNS - WINDOW - 1]) / WINDOW * 1e6
            first.append(first_us)
            last.append(last_us)
            drift.append(last_us / first_us)
            raw = functools.partial(
                tool_turns, TURNS, events_per_turn, _listener(awaiting), awaiting=awaiting
            )
            floor.append(run_trio(raw) / TURNS * 1e6)
        lines.append(
            result_line(
                "S2",
                "us/turn",
                overall,
                floor,
                listener="async" if awaiting else "sync",
                turns=TURNS,
                first_100_median=statistics.median(first),
                last_100_median=statistics.median(last),
                last_over_first_median=statistics.median(drift),
                last_over_first_max=max(drift),
                events_per_turn=events_per_turn,
            )
        )
    return lines
