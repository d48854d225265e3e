"""S2S and S4S: what a session costs.

**S2S** is S2 (1,000 turns of one call to an instant ``noop`` tool, then a final answer)
with the agent attached (:func:`trio_agent.sessions.attach_agent`) to a new session of
each store: every tool turn commits the assistant message, the journal entry of the tool
call and the tool result, each before the run goes on. Runs are interleaved (S2 without a
session, then each store, in every round). Reported per store: µs per turn (``prompt()``
start to the 1,000th ``turn_end``) and, as ``ratio``, that over S2 without a session in
the same rounds. Stores: ``memory:``, ``jsonl:`` and ``sqlite:`` in a temporary
directory, and ``postgresql://`` when ``TRIO_AGENT_BENCH_POSTGRES_URL`` (or
``TRIO_AGENT_TEST_POSTGRES_URL``) names a server (its tables go to a schema of their own,
dropped at the end).

**S4S** is S4's shape with sessions: 1,000 agents at once in one nursery, each attached
to its own session in one SQLite file, one tool turn and a final answer each. Reported:
wall seconds, and ``lock_errors`` (must be 0: no ``database is locked`` reaches a caller).
"""

from __future__ import annotations

import functools
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio

from trio_agent import Agent, AgentEvent, AgentInitialState
from trio_agent.sessions import SessionStoreError, attach_agent, open_store

from ._common import (
    MODEL,
    ScriptedStream,
    final_text_events,
    noop_tool,
    result_line,
    run_trio,
    tool_call_events,
)
from .s2_turns import build_scripts

TURNS = 1_000
AGENTS = 1_000

POSTGRES_URL_VARIABLES = ("TRIO_AGENT_BENCH_POSTGRES_URL", "TRIO_AGENT_TEST_POSTGRES_URL")


def run_agent(turns: int, url: str | None, options: dict[str, Any]) -> float:
    """µs per tool turn of one ``prompt()``, without a session when ``url`` is None."""
    agent = Agent(
        AgentInitialState(model=MODEL, tools=[noop_tool()]),
        stream_fn=ScriptedStream(build_scripts(turns)),
    )
    turn_ends: list[float] = []

    def stamp(event: AgentEvent) -> None:
        if event.type == "turn_end":
            turn_ends.append(time.perf_counter())

    async def main() -> float:
        if url is None:
            agent.subscribe(stamp)
            start = time.perf_counter()
            await agent.prompt("go")
            return start
        async with open_store(url, **options) as store:
            created = await store.create()
            async with (
                store.open_for_writing(created.id) as session,
                attach_agent(agent, session),
            ):
                agent.subscribe(stamp)
                start = time.perf_counter()
                await agent.prompt("go")
            return start

    start = run_trio(main)
    if agent.state.error_message is not None:
        raise RuntimeError(f"S2S run failed: {agent.state.error_message}")
    return (turn_ends[turns - 1] - start) / turns * 1e6


@contextmanager
def _stores() -> Iterator[list[tuple[str, Callable[[int], str], dict[str, Any]]]]:
    """(name, url of round n, open_store options) for every store measured."""
    postgres = next((os.environ[v] for v in POSTGRES_URL_VARIABLES if os.environ.get(v)), None)
    schema = f"bench_{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix="trio-agent-bench-") as tmp:
        stores: list[tuple[str, Callable[[int], str], dict[str, Any]]] = [
            ("memory", lambda n: "memory:", {}),
            ("jsonl", lambda n: f"jsonl:{os.path.join(tmp, f'jsonl-{n}')}", {}),
            ("sqlite", lambda n: f"sqlite:{os.path.join(tmp, f'bench-{n}.db')}", {}),
        ]
        if postgres is not None:
            stores.append(("postgresql", lambda n: postgres, {"schema": schema}))
        try:
            yield stores
        finally:
            if postgres is not None:
                import psycopg  # the "postgres" extra

                with psycopg.connect(postgres, autocommit=True) as connection:
                    connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def run_s2s(runs: int) -> list[dict[str, Any]]:
    """S2 with a session, per store, interleaved with S2 without one."""
    with _stores() as stores:
        run_agent(50, None, {})  # warm-up
        for _, url, options in stores:
            run_agent(50, url(-1), options)
        without: list[float] = []
        per_store: dict[str, list[float]] = {name: [] for name, _, _ in stores}
        for n in range(runs):
            without.append(run_agent(TURNS, None, {}))
            for name, url, options in stores:
                per_store[name].append(run_agent(TURNS, url(n), options))
    return [
        result_line(
            "S2S",
            "us/turn",
            values,
            without,
            store=name,
            turns=TURNS,
            floor="S2 without a session",
            without_median=statistics.median(without),
        )
        for name, values in per_store.items()
    ]


def _one_turn_scripts() -> list[Any]:
    return [tool_call_events([("call-1", "noop")]), final_text_events("done")]


async def _agents(path: str | None, agents: int) -> tuple[float, int]:
    """Wall seconds for ``agents`` agents at once, each attached to its own session in
    the SQLite file ``path`` (none when ``None``), and the lock errors seen."""
    lock_errors = 0

    async def one(store: Any, session_id: str | None) -> None:
        nonlocal lock_errors
        agent = Agent(
            AgentInitialState(model=MODEL, tools=[noop_tool()]),
            stream_fn=ScriptedStream(_one_turn_scripts()),
        )
        try:
            if session_id is None:
                await agent.prompt("go")
            else:
                async with (
                    store.open_for_writing(session_id) as session,
                    attach_agent(agent, session),
                ):
                    await agent.prompt("go")
        except SessionStoreError as exc:
            lock_errors += "locked" in str(exc)
            raise
        if agent.state.error_message is not None:
            lock_errors += "locked" in agent.state.error_message
            raise RuntimeError(f"S4S run failed: {agent.state.error_message}")

    async with open_store(f"sqlite:{path}" if path else "memory:") as store:
        ids = [None if path is None else (await store.create()).id for _ in range(agents)]
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for session_id in ids:
                nursery.start_soon(one, store, session_id)
        return time.perf_counter() - start, lock_errors


def run_s4s(runs: int) -> list[dict[str, Any]]:
    """1,000 attached agents at once on one SQLite file, against the same agents without
    sessions (interleaved)."""
    walls: list[float] = []
    without: list[float] = []
    errors = 0
    with tempfile.TemporaryDirectory(prefix="trio-agent-bench-") as tmp:
        for n in range(runs):
            without.append(run_trio(functools.partial(_agents, None, AGENTS))[0])
            path = os.path.join(tmp, f"agents-{n}.db")
            wall, lock_errors = run_trio(functools.partial(_agents, path, AGENTS))
            walls.append(wall)
            errors += lock_errors
    return [
        result_line(
            "S4S",
            "s",
            walls,
            without,
            agents=AGENTS,
            store="sqlite",
            floor="the same agents without sessions",
            lock_errors=errors,
        )
    ]


def profile_target() -> Callable[[], object]:
    """One S2 run attached to an SQLite session, for ``python -m bench S2S --profile``."""
    tmp = tempfile.mkdtemp(prefix="trio-agent-bench-")
    rounds = iter(range(1_000_000))
    return lambda: run_agent(TURNS, f"sqlite:{os.path.join(tmp, f'{next(rounds)}.db')}", {})


def profile_target_s4s() -> Callable[[], object]:
    """One S4S run, for ``python -m bench S4S --profile``."""
    tmp = tempfile.mkdtemp(prefix="trio-agent-bench-")
    rounds = iter(range(1_000_000))
    return lambda: run_trio(
        functools.partial(_agents, os.path.join(tmp, f"{next(rounds)}.db"), AGENTS)
    )
