"""Scenarios S1-S4 against trio_agent's Agent driven by an in-process scripted stream function.

Usage (from bench/py, with an interpreter in which `import trio_agent` works):
    python trio_agent_bench.py s1|s2small|s2|s2features|s3|s3seq|s4 [--producer pull|checkpoint]
    python trio_agent_bench.py --version     # prints the trio_agent version (exit 1 if not importable)
Prints one JSON line. Each process runs a reduced-size warm-up of the scenario first.

The stream function is an `async def` generator that reduces its scripted reply
into a fresh frozen `AssistantMessage` snapshot for every event, as a provider must. Producer modes: "pull" (default; no checkpoint
between events, the natural form of a trio provider whose data is already buffered) and
"checkpoint" (one `trio.lowlevel.checkpoint()` after each event, roughly what a provider reading
a socket pays). The listener is a plain function `(event, signal=None)`, subscribed once.

Besides the peers' metrics, S1/S2 report `faux_stream_ms`: the same scripted replies drained
with a no-op consumer and no agent, measured in the same process just before the agent run,
so the agent's own share reads as `wall_ms - faux_stream_ms`. S2 also reports the cost of
turns 1-100 and 901-1000 from timestamps taken at each `turn_end` (window means, their ratio
`turn_growth`, and the same from per-turn medians, `*_p50`).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
from importlib.metadata import PackageNotFoundError, version

import trio

# ---------------------------------------------------------------------------
# The trio_agent API, in one place.  The names and shapes follow the public API; what it
# leaves open is marked GUESS, so a wrong guess is fixed here and nowhere else.
# ---------------------------------------------------------------------------

import trio_agent as ta  # GUESS: every name used below is re-exported by the top-level package


def ta_version() -> str:
    """GUESS: `trio_agent.__version__`, else the version of the distribution `trio-agent`."""
    v = getattr(ta, "__version__", None)
    if v:
        return str(v)
    for dist in ("trio-agent", "trio_agent"):
        try:
            return version(dist)
        except PackageNotFoundError:
            pass
    return "unknown"


if __name__ == "__main__" and sys.argv[1:] == ["--version"]:  # before any other API name is touched
    print(ta_version())
    sys.exit(0)


def make_model():
    # Model(id, name, api, provider, base_url, reasoning, input, cost: ModelCost, context_window, max_tokens)
    return ta.Model(
        id="faux-1",
        name="Faux",
        api="faux-bench",
        provider="faux-bench",
        base_url="http://localhost:0",
        reasoning=False,
        input=["text"],
        cost=ta.ModelCost(input=0, output=0, cache_read=0, cache_write=0),
        context_window=1_000_000,
        max_tokens=100_000,
    )


def zero_usage():
    # Usage(input, output, cache_read, cache_write, total_tokens, reasoning=None, cost: Cost)
    return ta.Usage(input=0, output=0, cache_read=0, cache_write=0, total_tokens=0,
                    cost=ta.Cost(input=0, output=0, cache_read=0, cache_write=0, total=0))


def make_agent(stream_fn, tools=(), tool_execution=None, **features):
    """Agent(initial_state=..., stream_fn=..., tool_execution="parallel"|"sequential").
    GUESS: AgentInitialState takes `tools` and `messages` (upstream initialState; the seed example
    shows only system_prompt and model)."""
    initial = ta.AgentInitialState(system_prompt="bench", model=MODEL, tools=list(tools), messages=[])
    kwargs = {} if tool_execution is None else {"tool_execution": tool_execution}
    return ta.Agent(initial_state=initial, stream_fn=stream_fn, **kwargs, **features)


def subscribe(agent, listener) -> None:
    """subscribe(listener) -> unsubscribe.  The listeners here are plain functions
    `(event, signal=None)`, so they fit whether the Agent passes (event) or (event, signal)."""
    agent.subscribe(listener)


async def prompt_and_wait(agent) -> None:
    """The timed region's end points (prompt("go"), then wait_for_idle())."""
    await agent.prompt("go")
    await agent.wait_for_idle()


def final_message(agent):
    return agent.state.messages[-1]  # AgentState.messages


def make_tool(name, execute):
    # AgentTool(name, label, description, parameters, execute);
    # execute(tool_call_id, params, signal, on_update) is async and returns an AgentToolResult
    return ta.AgentTool(name=name, label=name, description=name, parameters={"type": "object", "properties": {}},
                        execute=execute)


def ok_result():
    # AgentToolResult(content, details=None, ...)
    return ta.AgentToolResult(content=[ta.TextContent(text="ok")], details={})


# Event type strings.
MESSAGE_UPDATE, TURN_END, TOOL_EXECUTION_END = "message_update", "turn_end", "tool_execution_end"

# Assistant stream event and message classes.
AssistantMessage, TextContent, ToolCall = ta.AssistantMessage, ta.TextContent, ta.ToolCall
StartEvent, DoneEvent = ta.StartEvent, ta.DoneEvent
TextStartEvent, TextDeltaEvent, TextEndEvent = ta.TextStartEvent, ta.TextDeltaEvent, ta.TextEndEvent
ToolCallStartEvent, ToolCallDeltaEvent = ta.ToolCallStartEvent, ta.ToolCallDeltaEvent
ToolCallEndEvent = ta.ToolCallEndEvent
PENDING = "pending"  # stop_reason of partial messages while a response streams

# ---------------------------------------------------------------------------
# Faux stream function (the scripted provider)
# ---------------------------------------------------------------------------

MODEL = make_model()
ZERO_USAGE = zero_usage()
PRODUCER = "pull"
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def text_reply(n: int):
    return [("text", ["x"] * n)]


def tool_reply(k: int, name: str, count: int = 1):
    return [("toolCall", f"call_{k}_{j}", name, {}) for j in range(count)]


def make_stream_fn(script):
    """`script(call_index)` returns the reply's blocks: ("text", deltas) | ("toolCall", id, name, arguments).
    Events follow the upstream provider protocol; each event carries a fresh frozen snapshot."""
    calls = 0
    checkpoint = trio.lowlevel.checkpoint if PRODUCER == "checkpoint" else None

    async def stream_fn(model, context, options):
        nonlocal calls
        blocks = script(calls)
        calls += 1
        api, provider, model_id = model.api, model.provider, model.id
        timestamp = int(time.time() * 1000)
        content: list = []  # the provider's working copy; every event gets list(content)

        def snapshot(stop_reason=PENDING):
            return AssistantMessage(content=list(content), api=api, provider=provider, model=model_id,
                                    usage=ZERO_USAGE, stop_reason=stop_reason, timestamp=timestamp)

        yield StartEvent(partial=snapshot())
        if checkpoint:
            await checkpoint()
        has_tool = False
        for i, block in enumerate(blocks):
            if block[0] == "text":
                content.append(TextContent(text=""))
                yield TextStartEvent(content_index=i, partial=snapshot())
                if checkpoint:
                    await checkpoint()
                text = ""
                for delta in block[1]:
                    text += delta
                    content[i] = TextContent(text=text)
                    yield TextDeltaEvent(content_index=i, delta=delta, partial=snapshot())
                    if checkpoint:
                        await checkpoint()
                yield TextEndEvent(content_index=i, content=text, partial=snapshot())
                if checkpoint:
                    await checkpoint()
            else:
                has_tool = True
                _, call_id, name, arguments = block
                content.append(ToolCall(id=call_id, name=name, arguments={}))
                yield ToolCallStartEvent(content_index=i, partial=snapshot())
                if checkpoint:
                    await checkpoint()
                yield ToolCallDeltaEvent(content_index=i, delta=json.dumps(arguments), partial=snapshot())
                if checkpoint:
                    await checkpoint()
                call = ToolCall(id=call_id, name=name, arguments=dict(arguments))
                content[i] = call
                yield ToolCallEndEvent(content_index=i, tool_call=call, partial=snapshot())
                if checkpoint:
                    await checkpoint()
        reason = "toolUse" if has_tool else "stop"
        yield DoneEvent(reason=reason, message=snapshot(reason))

    return stream_fn


async def drain_faux(script, requests: int) -> float:
    """The faux provider alone: `requests` replies drained by a no-op consumer, no agent (ms)."""
    stream_fn = make_stream_fn(script)
    t0 = time.perf_counter()
    for _ in range(requests):
        async for _event in stream_fn(MODEL, None, None):
            pass
    return (time.perf_counter() - t0) * 1000


# ---------------------------------------------------------------------------
# Scenarios (see bench/pi/README.md)
# ---------------------------------------------------------------------------


async def s1(n_deltas: int) -> dict:
    script = lambda k: text_reply(n_deltas)  # noqa: E731
    faux_ms = await drain_faux(script, 1)
    agent = make_agent(make_stream_fn(script))
    updates = 0

    def listener(event, signal=None):
        nonlocal updates
        if event.type == MESSAGE_UPDATE:
            updates += 1

    subscribe(agent, listener)
    t0 = time.perf_counter()
    await prompt_and_wait(agent)
    ms = (time.perf_counter() - t0) * 1000
    text = final_message(agent).content[0].text
    if len(text) != n_deltas:
        raise AssertionError(f"bad text length {len(text)}")
    # message_update events = text_start + deltas + text_end
    if updates != n_deltas + 2:
        raise AssertionError(f"message_update count {updates}, expected {n_deltas + 2}")
    return {"wall_ms": ms, "message_updates": updates, "events_per_s": updates / (ms / 1000),
            "us_per_event": ms * 1000 / updates,
            "faux_stream_ms": faux_ms, "faux_us_per_event": faux_ms * 1000 / updates}


async def s2(n_turns: int, features: bool = False) -> dict:
    """`features`: the same with what later issues added switched on (compaction checks
    before every request, usage limits checked before every request and tool call, and a
    session in a memory store committing every message as it ends), none of them
    reached."""
    if features:
        from trio_agent.sessions import attach_agent, open_store

        async with open_store("memory:") as store:
            session = await store.create()
            limits = ta.UsageLimits(requests=10**9, tool_calls=10**9, total_tokens=10**12)
            return await _s2(n_turns, session=session, attach=attach_agent,
                             features={"compaction": True, "usage_limits": limits})
    return await _s2(n_turns)


async def _s2(n_turns: int, session=None, attach=None, features=None) -> dict:
    script = lambda k: tool_reply(k, "noop") if k < n_turns else text_reply(1)  # noqa: E731
    faux_ms = await drain_faux(script, n_turns + 1)
    executed = 0

    async def noop(tool_call_id, params, signal=None, on_update=None):
        nonlocal executed
        executed += 1
        return ok_result()

    agent = make_agent(make_stream_fn(script), tools=[make_tool("noop", noop)], **(features or {}))
    if session is not None:
        async with attach(agent, session):
            return await _s2_timed(agent, n_turns, faux_ms, lambda: executed)
    return await _s2_timed(agent, n_turns, faux_ms, lambda: executed)


async def _s2_timed(agent, n_turns: int, faux_ms: float, executed_count) -> dict:
    stamps: list[float] = []  # perf_counter() at each turn_end

    def listener(event, signal=None):
        if event.type == TURN_END:
            stamps.append(time.perf_counter())

    subscribe(agent, listener)
    t0 = time.perf_counter()
    await prompt_and_wait(agent)
    t1 = time.perf_counter()
    ms = (t1 - t0) * 1000
    turns = len(stamps)
    executed = executed_count()
    if executed != n_turns or turns != n_turns + 1:
        raise AssertionError(f"executed={executed} turns={turns}")
    out = {"wall_ms": ms, "model_turns": turns, "turns_per_s": turns / (ms / 1000), "us_per_turn": ms * 1000 / turns,
           "faux_stream_ms": faux_ms, "faux_us_per_turn": faux_ms * 1000 / turns}
    # turn k (1-based) ends at stamps[k-1]; turn 1 starts at t0.  Means over each window, and
    # (informative, robust to a stray GC pause or scheduler hiccup) medians of the single turns.
    each = [(b - a) * 1e6 for a, b in zip([t0, *stamps[:-1]], stamps)]
    if turns >= 100:
        out["us_per_turn_1_100"] = (stamps[99] - t0) * 1e6 / 100
        out["us_per_turn_1_100_p50"] = statistics.median(each[:100])
    if turns >= 1000:
        out["us_per_turn_901_1000"] = (stamps[999] - stamps[899]) * 1e6 / 100
        out["us_per_turn_901_1000_p50"] = statistics.median(each[900:1000])
        out["turn_growth"] = out["us_per_turn_901_1000"] / out["us_per_turn_1_100"]
        out["turn_growth_p50"] = out["us_per_turn_901_1000_p50"] / out["us_per_turn_1_100_p50"]
    return out


async def s3(n_calls: int, sleep_s: float, mode: str) -> dict:
    executed = 0

    async def sleep(tool_call_id, params, signal=None, on_update=None):
        nonlocal executed
        await trio.sleep(sleep_s)
        executed += 1
        return ok_result()

    agent = make_agent(make_stream_fn(lambda k: tool_reply(k, "sleep", n_calls) if k == 0 else text_reply(1)),
                       tools=[make_tool("sleep", sleep)], tool_execution=mode)
    tool_ends = 0

    def listener(event, signal=None):
        nonlocal tool_ends
        if event.type == TOOL_EXECUTION_END:
            tool_ends += 1

    subscribe(agent, listener)
    # bare-timer baseline in the same process: the same sleeps with no agent
    tb = time.perf_counter()
    if mode == "sequential":
        for _ in range(n_calls):
            await trio.sleep(sleep_s)
    else:
        async with trio.open_nursery() as nursery:
            for _ in range(n_calls):
                nursery.start_soon(trio.sleep, sleep_s)
    baseline = (time.perf_counter() - tb) * 1000
    t0 = time.perf_counter()
    await prompt_and_wait(agent)
    ms = (time.perf_counter() - t0) * 1000
    if executed != n_calls or tool_ends != n_calls:
        raise AssertionError(f"executed={executed} tool_execution_end={tool_ends}")
    ideal = (n_calls if mode == "sequential" else 1) * sleep_s * 1000
    return {
        "wall_ms": ms,
        "tool_calls": n_calls,
        "ideal_ms": ideal,
        "bare_timers_ms": baseline,
        "overhead_us_per_call": (ms - ideal) * 1000 / n_calls,
        "overhead_vs_bare_us_per_call": (ms - baseline) * 1000 / n_calls,
    }


async def s4(n_agents: int, n_deltas: int) -> dict:
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter()
    agents = []
    updates = 0

    def make_listener():
        def listener(event, signal=None):
            nonlocal updates
            if event.type == MESSAGE_UPDATE:
                updates += 1

        return listener

    for _ in range(n_agents):
        agent = make_agent(make_stream_fn(lambda k: text_reply(n_deltas)))
        subscribe(agent, make_listener())
        agents.append(agent)
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(prompt_and_wait, agent)
    ms = (time.perf_counter() - t0) * 1000
    rss1 = rss_bytes()
    if updates != n_agents * (n_deltas + 2):
        raise AssertionError(f"updates={updates}")
    if not all(final_message(a).role == "assistant" and len(final_message(a).content[0].text) == n_deltas
               for a in agents):
        raise AssertionError("agent did not finish")
    return {"wall_ms": ms, "agents": n_agents, "rss_delta_mb": round((rss1 - rss0) / 2**20, 1),
            "kb_rss_per_agent": round((rss1 - rss0) / n_agents / 1024, 1)}


SCEN = {
    "s1": (lambda: s1(2_000), lambda: s1(20_000)),
    "s2small": (lambda: s2(100), lambda: s2(100)),
    "s2": (lambda: s2(100), lambda: s2(1_000)),
    # S2 with compaction checks, usage limits and a memory-store session switched on
    "s2features": (lambda: s2(100, True), lambda: s2(1_000, True)),
    "s3": (lambda: s3(20, 0.01, "parallel"), lambda: s3(200, 0.01, "parallel")),
    "s3seq": (lambda: s3(10, 0.01, "sequential"), lambda: s3(200, 0.01, "sequential")),
    # light warm-up that retains no state: one agent, one 5-delta prompt
    "s4": (lambda: s1(5), lambda: s4(1_000, 5)),
}


async def main(name: str) -> None:
    warm, real = SCEN[name]
    await warm()
    res = await real()
    print(json.dumps({"impl": f"trio_agent@{ta_version()}", "scenario": name, "producer": PRODUCER, **res}))


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--producer" in argv:
        i = argv.index("--producer")
        PRODUCER = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 1 or argv[0] not in SCEN or PRODUCER not in ("pull", "checkpoint"):
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(SCEN)} [--producer pull|checkpoint] | --version")
    trio.run(main, argv[0])
