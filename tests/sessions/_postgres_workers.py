"""Processes of the PostgreSQL many-worker and kill tests.

``serve_main``: a worker that claims every session it can of one store, attaches an agent
to each, and answers what is steered to it, until killed. ``send_main``: the process that
steers messages to random sessions. ``kill_main``: the kill tests' agent run
(``_kill_worker``'s script) on a PostgreSQL schema.
"""

from __future__ import annotations

import random
import time
from typing import Any

import trio

from trio_agent import Agent, AgentInitialState, UserMessage
from trio_agent.sessions import SessionBusyError, SessionStore, attach_agent, open_store
from trio_agent.testing import FauxProvider, faux_assistant_message

from . import _kill_worker

SCAN_SECONDS = 0.2
"""How often a worker looks for sessions nobody owns."""

KILL_LEASE = 0.3
"""The kill tests' lease: short, so a killed worker's claim expires quickly, but longer
than SQLite's 0.15 s: the server may take a moment to see that a killed client's
connection is gone and to release the row lock it held, and the lease runs meanwhile."""


def _agent() -> Agent:
    faux = FauxProvider([])

    def stream_fn(*args: Any, **kwargs: Any) -> Any:
        # Every model call gets an answer, however many turns steering adds.
        faux.append_responses([faux_assistant_message("ack")])
        return faux.stream_fn(*args, **kwargs)

    return Agent(
        initial_state=AgentInitialState(system_prompt="Worker.", model=faux.get_model()),
        stream_fn=stream_fn,
    )


async def _serve_session(
    store: SessionStore,
    session_id: str,
    name: str,
    owned: set[str],
    events: Any,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        async with store.open_for_writing(session_id) as session:
            owned.add(session_id)
            events.put(("own", name, session_id, time.monotonic()))
            task_status.started()
            try:
                agent = _agent()
                async with attach_agent(agent, session), store.open_inbox(session, agent) as inbox:
                    if not agent.state.messages or agent.state.messages[-1].role == "system":
                        await agent.prompt("start")
                    while True:
                        await inbox.wait_queued()
                        await agent.continue_()
            finally:
                events.put(("release", name, session_id, time.monotonic()))
    finally:
        owned.discard(session_id)


async def serve(url: str, schema: str, name: str, lease: float, events: Any) -> None:
    async with open_store(url, schema=schema, lease_seconds=lease, holder=name) as store:
        owned: set[str] = set()
        async with trio.open_nursery() as nursery:
            while True:
                for header in await store.list():
                    if header.id in owned:
                        continue
                    try:
                        await nursery.start(_serve_session, store, header.id, name, owned, events)
                    except SessionBusyError:
                        pass
                events.put(("scan", name, len(owned), time.monotonic()))
                await trio.sleep(SCAN_SECONDS)


def serve_main(url: str, schema: str, name: str, lease: float, events: Any) -> None:
    trio.run(serve, url, schema, name, lease, events)


async def send(
    url: str, schema: str, session_ids: list[str], count: int, seed: int, out: Any
) -> None:
    rng = random.Random(seed)
    async with open_store(url, schema=schema) as store:
        for n in range(count):
            session_id = rng.choice(session_ids)
            message = UserMessage(content=f"message {n}", timestamp=1_700_000_000_000 + n)
            if n % 4 == 3:
                queue_id = await store.follow_up(session_id, message)
            else:
                queue_id = await store.steer(session_id, message)
            out.put(("sent", session_id, queue_id, f"message {n}", time.monotonic()))
            await trio.sleep(rng.uniform(0, 0.02))
    out.put(("done",))


def send_main(
    url: str, schema: str, session_ids: list[str], count: int, seed: int, out: Any
) -> None:
    trio.run(send, url, schema, session_ids, count, seed, out)


async def kill_run(url: str, schema: str, session_id: str, committed: Any, started: Any) -> None:
    faux = FauxProvider(_kill_worker.script(), tokens_per_second=2000)
    agent = _kill_worker.make_agent(faux)
    async with open_store(url, schema=schema, lease_seconds=KILL_LEASE) as store:
        await store.create(session_id=session_id, cwd="/kill")
        async with store.open_for_writing(session_id) as session:

            def count(event: Any) -> None:
                # After the session's own listener: what is counted is committed.
                committed.value = len(session.entries)

            async with attach_agent(agent, session):
                agent.subscribe(count)
                started.set()
                await agent.prompt("go")
    committed.value = -1  # finished


def kill_main(url: str, schema: str, session_id: str, committed: Any, started: Any) -> None:
    trio.run(kill_run, url, schema, session_id, committed, started)
