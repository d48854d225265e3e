"""``python -m bench.reliability``: the figures of docs/reliability.md, one JSON line each.

- ``soak``: 10,000 sequential prompts on one agent (``reset()`` every 100), each one tool
  call that reports progress and then an answer, after 1,000 warm-up runs; and the same
  with a fresh agent per prompt. Reported: RSS and traced-memory growth per 1,000 runs.
- ``abort``: the wall-clock latency from ``agent.abort()`` to ``prompt()`` returning, and
  from the caller's cancellation to the ``move_on_after`` block ending, while the stream
  is stalled (a provider read that never returns), over 200 runs each.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator

import trio

from trio_agent import (
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    AssistantMessageEvent,
    LlmContext,
    Model,
    StreamOptions,
    TextContent,
)

from ._common import MODEL, current_rss_bytes, emit_line, final_text_events, tool_call_events

_KIB = 1024


async def _progress(
    tool_call_id: str,
    params: dict[str, object],
    signal: object,
    on_update: AgentToolUpdateCallback,
) -> AgentToolResult:
    on_update(AgentToolResult(content=[TextContent(text="half way")]))
    await trio.lowlevel.checkpoint()
    return AgentToolResult(content=[TextContent(text="done")])


TOOL = AgentTool(
    name="work",
    label="work",
    description="works",
    parameters={"type": "object"},
    execute=_progress,
)


_CALL = tool_call_events([("call-1", "work")])
_ANSWER = final_text_events("ok")


def _agent() -> Agent:
    async def stream_fn(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        # A tool call when the last message is the prompt, the answer otherwise.
        events = _CALL if context.messages[-1].role == "user" else _ANSWER
        for event in events:
            yield event

    return Agent(AgentInitialState(model=MODEL, tools=[TOOL]), stream_fn=stream_fn)


async def _prompts(agent: Agent, runs: int, fresh: bool) -> Agent:
    """``runs`` prompts: each on a fresh agent, or on ``agent`` reset every 100."""
    for index in range(runs):
        if fresh:
            agent = _agent()
        elif index % 100 == 0:
            agent.reset()
        await agent.prompt("go")
    return agent


async def _soak(runs: int, fresh: bool) -> tuple[float, float]:
    agent = await _prompts(_agent(), 1_000, fresh)  # warm-up
    gc.collect()
    rss0 = current_rss_bytes()
    tracemalloc.start()
    traced0 = tracemalloc.get_traced_memory()[0]
    await _prompts(agent, runs, fresh)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - traced0
    tracemalloc.stop()
    rss = current_rss_bytes() - rss0
    per = runs / 1_000
    return rss / _KIB / per, traced / _KIB / per


def _stalled_agent() -> Agent:
    async def stalled(
        model: Model, context: LlmContext, options: StreamOptions
    ) -> AsyncIterator[AssistantMessageEvent]:
        events = final_text_events("never")
        yield events[0]  # start
        await trio.sleep_forever()
        yield events[-1]  # pragma: no cover

    return Agent(AgentInitialState(model=MODEL), stream_fn=stalled)


async def _abort_latency(runs: int) -> tuple[list[float], list[float]]:
    aborts: list[float] = []
    cancels: list[float] = []
    for _ in range(runs):
        agent = _stalled_agent()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.prompt, "go")
            await trio.sleep(0.001)
            start = time.perf_counter()
            agent.abort()
            await agent.wait_for_idle()
            aborts.append((time.perf_counter() - start) * 1000)
        agent = _stalled_agent()
        with trio.CancelScope() as scope:

            async def cancel_soon() -> None:
                await trio.sleep(0.001)
                nonlocal start
                start = time.perf_counter()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                await agent.prompt("go")
        cancels.append((time.perf_counter() - start) * 1000)
    return aborts, cancels


async def main(which: list[str]) -> None:
    if "soak" in which:
        for fresh in (False, True):
            rss, traced = await _soak(10_000, fresh)
            emit_line(
                {
                    "scenario": "soak",
                    "agents": "fresh per prompt" if fresh else "one (reset every 100)",
                    "runs": 10_000,
                    "rss_kib_per_1000_runs": round(rss, 2),
                    "traced_kib_per_1000_runs": round(traced, 2),
                }
            )
    if "abort" in which:
        aborts, cancels = await _abort_latency(200)
        for name, values in (("abort", aborts), ("outer_cancel", cancels)):
            emit_line(
                {
                    "scenario": f"{name}_latency",
                    "unit": "ms",
                    "runs": len(values),
                    "median": round(statistics.median(values), 3),
                    "max": round(max(values), 3),
                }
            )


if __name__ == "__main__":
    trio.run(main, sys.argv[1:] or ["soak", "abort"])
