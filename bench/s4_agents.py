"""S4: 1,000 agents, each running one short prompt, concurrently in one nursery.

Each repetition runs in a fresh interpreter (``python -m bench.s4_agents agent|floor``)
so that its resident-set growth belongs to it alone. Reported: wall milliseconds from
creating the agents to the last ``prompt()`` returning, and the peak RSS growth over
the baseline taken after a warm-up (total MB and KiB per agent; the current RSS with all
agents still alive is an extra). Floor: 1,000 raw tasks (one checkpoint each) in one
nursery, in a fresh interpreter as well.
"""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import trio

from trio_agent import (
    Agent,
    AgentInitialState,
    AssistantMessageEvent,
    LlmContext,
    Model,
    StreamOptions,
)

from ._common import (
    MODEL,
    current_rss_bytes,
    final_text_events,
    peak_rss_bytes,
    replay,
    result_line,
)

AGENTS = 1_000
_MB = 1024 * 1024
# The directory holding the ``bench`` package, so the child finds it from any cwd.
_PROJECT_ROOT = Path(__file__).resolve().parent.parent


def short_answer(
    model: Model, context: LlmContext, options: StreamOptions
) -> AsyncIterator[AssistantMessageEvent]:
    """Stream function of every S4 agent: a fresh five-event text answer per request
    (fresh objects, so each transcript owns its messages as with a real provider)."""
    return replay(final_text_events("ok"))


def _new_agent() -> Agent:
    return Agent(AgentInitialState(model=MODEL, system_prompt="Be brief."), stream_fn=short_answer)


async def _agents_child() -> dict[str, float]:
    warm = _new_agent()
    await warm.prompt("hi")
    del warm
    gc.collect()
    baseline = current_rss_bytes()
    start = time.perf_counter()
    agents = [_new_agent() for _ in range(AGENTS)]
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.prompt, "hi")
    elapsed = time.perf_counter() - start
    after = current_rss_bytes()
    failed = [a for a in agents if a.state.error_message is not None or len(a.state.messages) != 3]
    if failed:
        raise RuntimeError(f"S4: {len(failed)} agents did not finish cleanly")
    return {
        "wall_s": elapsed,
        "peak_growth_bytes": peak_rss_bytes() - baseline,
        "alive_growth_bytes": after - baseline,
    }


async def _floor_child() -> dict[str, float]:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.lowlevel.checkpoint)
    gc.collect()
    baseline = current_rss_bytes()
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(AGENTS):
            nursery.start_soon(trio.lowlevel.checkpoint)
    elapsed = time.perf_counter() - start
    after = current_rss_bytes()
    return {
        "wall_s": elapsed,
        "peak_growth_bytes": peak_rss_bytes() - baseline,
        "alive_growth_bytes": after - baseline,
    }


def profile_target() -> Callable[[], object]:
    """One S4 repetition in this process (its RSS figures are meaningless here), for
    ``python -m bench S4 --profile``."""
    return lambda: trio.run(_agents_child)


def _spawn(kind: str) -> dict[str, float]:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.s4_agents", kind],
        cwd=_PROJECT_ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(completed.stdout)
    return result


def run(runs: int) -> list[dict[str, Any]]:
    """Measure S4 ``runs`` times (agents and floor, each in a fresh interpreter)."""
    agent_runs = []
    floor_runs = []
    for _ in range(runs):
        agent_runs.append(_spawn("agent"))
        floor_runs.append(_spawn("floor"))
    peak_mb = [r["peak_growth_bytes"] / _MB for r in agent_runs]
    return [
        result_line(
            "S4",
            "ms",
            [r["wall_s"] * 1e3 for r in agent_runs],
            [r["wall_s"] * 1e3 for r in floor_runs],
            agents=AGENTS,
            rss_growth_mb_median=statistics.median(peak_mb),
            rss_growth_mb_min=min(peak_mb),
            rss_growth_mb_max=max(peak_mb),
            rss_kib_per_agent=statistics.median(peak_mb) * 1024 / AGENTS,
            rss_alive_growth_mb_median=statistics.median(
                r["alive_growth_bytes"] / _MB for r in agent_runs
            ),
            floor_rss_growth_mb_median=statistics.median(
                r["peak_growth_bytes"] / _MB for r in floor_runs
            ),
        )
    ]


def _child_main(kind: str) -> None:
    child = {"agent": _agents_child, "floor": _floor_child}[kind]
    print(json.dumps(trio.run(child)))


if __name__ == "__main__":
    _child_main(sys.argv[1])
