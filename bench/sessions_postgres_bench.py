"""S2 with a session attached on PostgreSQL: µs per turn against S2 without a session.

``python -m bench.sessions_postgres_bench [--url URL] [--turns N] [--runs N]``

S2's agent (one call to an instant ``noop`` tool per turn, then a final answer) runs
once without a session and once attached (:func:`trio_agent.sessions.attach_agent`) to a
new session of the store, which commits per tool turn the assistant message, the journal
entry of the tool call and the tool result, each before the run goes on. Reported per
store, as one JSON line each: µs per turn (median of ``runs``), the ratio to S2 without a
session, and the commits per turn. Also run against ``sqlite:`` (a temporary file) for
comparison. The URL defaults to ``TRIO_AGENT_TEST_POSTGRES_URL``; the tables go to a
schema of their own, dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from typing import Any

from trio_agent import Agent, AgentEvent, AgentInitialState
from trio_agent.sessions import attach_agent, open_store

from ._common import MODEL, ScriptedStream, noop_tool, run_trio
from .s2_turns import build_scripts


def run_once(turns: int, url: str | None, options: dict[str, Any]) -> tuple[float, int]:
    """µs per tool turn of one ``prompt()``, and the entries committed."""
    scripts = build_scripts(turns)
    agent = Agent(
        AgentInitialState(model=MODEL, tools=[noop_tool()]),
        stream_fn=ScriptedStream(scripts),
    )
    turn_ends: list[float] = []

    def stamp(event: AgentEvent) -> None:
        if event.type == "turn_end":
            turn_ends.append(time.perf_counter())

    committed = [0]

    async def main() -> float:
        if url is None:
            agent.subscribe(stamp)
            start = time.perf_counter()
            await agent.prompt("go")
            return start
        async with open_store(url, **options) as store:
            created = await store.create()
            async with store.open_for_writing(created.id) as session:
                async with attach_agent(agent, session):
                    agent.subscribe(stamp)
                    await store.list()  # connections open before the clock starts
                    start = time.perf_counter()
                    await agent.prompt("go")
                committed[0] = len(session.entries)
            return start

    start = run_trio(main)
    if agent.state.error_message is not None:
        raise RuntimeError(f"run failed: {agent.state.error_message}")
    return (turn_ends[turns - 1] - start) / turns * 1e6, committed[0]


def measure(turns: int, runs: int, url: str | None, options: dict[str, Any]) -> tuple[float, int]:
    run_once(min(turns, 50), url, options)  # warm-up
    results = [run_once(turns, url, options) for _ in range(runs)]
    return statistics.median(us for us, _ in results), results[-1][1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("TRIO_AGENT_TEST_POSTGRES_URL"))
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.url:
        print("set TRIO_AGENT_TEST_POSTGRES_URL or pass --url", file=sys.stderr)
        return 2

    import psycopg

    baseline, _ = measure(args.turns, args.runs, None, {})
    print(json.dumps({"scenario": "S2", "store": None, "us_per_turn": round(baseline, 1)}))
    schema = f"bench_{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory() as tmp:
        stores: list[tuple[str, str, dict[str, Any]]] = [
            ("sqlite", f"sqlite:{os.path.join(tmp, 'bench.db')}", {}),
            ("postgresql", args.url, {"schema": schema}),
        ]
        try:
            for name, url, options in stores:
                us, entries = measure(args.turns, args.runs, url, options)
                print(
                    json.dumps(
                        {
                            "scenario": "S2 with a session",
                            "store": name,
                            "us_per_turn": round(us, 1),
                            "x_without": round(us / baseline, 1),
                            "entries_per_turn": round(entries / args.turns, 2),
                            "turns": args.turns,
                            "runs": args.runs,
                        }
                    )
                )
        finally:
            with psycopg.connect(args.url, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main())
