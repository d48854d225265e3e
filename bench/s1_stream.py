"""S1: one prompt whose response streams 20,000 one-character text deltas.

One counting listener is subscribed: a plain function (``"listener": "sync"``) or an
``async def`` (``"listener": "async"``). Reported: µs per text delta for the whole
``prompt()`` (all events of the run included). Floor: the same stream iterated in one
task that hands every event to the same listener itself (called, or awaited under a
shield), which is the agent's dispatch without the agent; an extra gives the scripted
stream's own cost per event.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from trio_agent import (
    Agent,
    AgentEvent,
    AgentInitialState,
    AssistantMessageEvent,
    DoneEvent,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
)

from ._common import (
    MODEL,
    ScriptedStream,
    assistant_message,
    direct_dispatch,
    replay,
    result_line,
    run_trio,
)

DELTAS = 20_000


def build_script(deltas: int = DELTAS) -> list[AssistantMessageEvent]:
    """``start``, ``text_start``, ``deltas`` one-character deltas, ``text_end``, ``done``.

    Every delta shares one partial snapshot: building 20,000 growing snapshots would
    cost more than the agent does (the loop only forwards ``partial``).
    """
    text = "x" * deltas
    partial = assistant_message([TextContent(text="")])
    final = assistant_message([TextContent(text=text)])
    events: list[AssistantMessageEvent] = [
        StartEvent(partial=assistant_message([])),
        TextStartEvent(content_index=0, partial=partial),
    ]
    events.extend(TextDeltaEvent(content_index=0, delta="x", partial=partial) for _ in text)
    events.append(TextEndEvent(content_index=0, content=text, partial=final))
    events.append(DoneEvent(reason="stop", message=final))
    return events


def run_agent(script: list[AssistantMessageEvent], *, awaiting: bool = False) -> tuple[float, int]:
    """One timed ``prompt()``; returns (seconds, events the listener counted)."""
    agent = Agent(AgentInitialState(model=MODEL), stream_fn=ScriptedStream([script]))
    counted = 0

    def count(event: AgentEvent) -> None:
        nonlocal counted
        counted += 1

    async def count_async(event: AgentEvent) -> None:
        nonlocal counted
        counted += 1

    agent.subscribe(count_async if awaiting else count)

    async def main() -> float:
        start = time.perf_counter()
        await agent.prompt("go")
        return time.perf_counter() - start

    elapsed = run_trio(main)
    if agent.state.error_message is not None:
        raise RuntimeError(f"S1 run failed: {agent.state.error_message}")
    return elapsed, counted


def _listener(awaiting: bool) -> Callable[[object], object]:
    def count(event: object) -> None:
        pass

    async def count_async(event: object) -> None:
        pass

    return count_async if awaiting else count


def stream_only(script: list[AssistantMessageEvent]) -> float:
    """Seconds to iterate the scripted stream alone (what the agent's figure includes)."""

    async def main() -> float:
        start = time.perf_counter()
        async for _ in replay(script):
            pass
        return time.perf_counter() - start

    return run_trio(main)


def profile_target() -> Callable[[], object]:
    """One agent run of S1, for ``python -m bench S1 --profile``."""
    script = build_script()
    return lambda: run_agent(script)


def run(runs: int) -> list[dict[str, Any]]:
    """Measure S1 ``runs`` times (after one warm-up run) per listener kind and return the
    result lines."""
    script = build_script()
    lines = []
    for awaiting in (False, True):
        run_agent(script, awaiting=awaiting)  # warm-up: imports, caches, allocator
        agent_us: list[float] = []
        floor_us: list[float] = []
        stream_us: list[float] = []
        events = 0
        for _ in range(runs):
            elapsed, events = run_agent(script, awaiting=awaiting)
            agent_us.append(elapsed / DELTAS * 1e6)
            floor = functools.partial(
                direct_dispatch, script, _listener(awaiting), awaiting=awaiting
            )
            floor_us.append(run_trio(floor) / DELTAS * 1e6)
            stream_us.append(stream_only(script) / DELTAS * 1e6)
        lines.append(
            result_line(
                "S1",
                "us/event",
                agent_us,
                floor_us,
                listener="async" if awaiting else "sync",
                deltas=DELTAS,
                events_delivered=events,
                stream_us_per_event=statistics.median(stream_us),
            )
        )
    return lines
