"""Many workers over one PostgreSQL database, and kill tests on PostgreSQL.

Four worker processes serve 100 sessions; a fifth process steers messages to random
sessions while one worker is SIGKILLed. Every message is committed exactly once, in its
session; no session is owned by two workers at once; the killed worker's sessions are
taken over once its lease runs out.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import queue
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from trio_agent import UserMessage, content_text
from trio_agent.sessions import MessageEntry, RunFinishedEntry, SessionBusyError, open_store

from . import _kill_worker
from . import _postgres_workers as workers
from ._postgres_support import new_schema_name, postgres_url, throwaway_schemas
from .test_sessions_kill import recover_and_continue, reference_shape, shape

WORKERS = 4
SESSIONS = 100
MESSAGES = 300
LEASE = 2.0
KILL_ITERATIONS = int(os.environ.get("TRIO_AGENT_KILL_ITERATIONS", "50"))


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
def schema(url: str) -> Iterator[str]:
    with throwaway_schemas(url) as names:
        names.append(name := new_schema_name())
        yield name


@pytest.fixture(scope="module")
def context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["trio", "trio_agent.sessions", "trio_agent.testing"])
    return ctx


def drain(events: Any, into: list[tuple[Any, ...]]) -> None:
    while True:
        try:
            into.append(events.get_nowait())
        except queue.Empty:
            return


async def wait_for(events: Any, log: list[tuple[Any, ...]], done: Any, seconds: float) -> None:
    with trio.fail_after(seconds):
        while True:
            drain(events, log)
            if done(log):
                return
            await trio.sleep(0.05)


def owners_now(log: list[tuple[Any, ...]]) -> dict[str, str]:
    owner: dict[str, str] = {}
    for event in log:
        if event[0] == "own":
            owner[event[2]] = event[1]
        elif event[0] == "release" and owner.get(event[2]) == event[1]:
            del owner[event[2]]
    return owner


async def test_four_workers_one_database_steered_from_a_fifth_process(
    url: str, schema: str, context: Any
) -> None:
    session_ids = [f"chat-{n:03d}" for n in range(SESSIONS)]
    async with open_store(url, schema=schema) as store:
        for session_id in session_ids:
            await store.create(session_id=session_id)
    events = context.Queue()
    log: list[tuple[Any, ...]] = []
    processes = {
        f"w{n}": context.Process(
            target=workers.serve_main, args=(url, schema, f"w{n}", LEASE, events)
        )
        for n in range(WORKERS)
    }
    sender = None
    try:
        for process in processes.values():
            process.start()
        await wait_for(events, log, lambda log: len(owners_now(log)) == SESSIONS, 60)
        sender = context.Process(
            target=workers.send_main, args=(url, schema, session_ids, MESSAGES, 21, events)
        )
        sender.start()
        # Kill a worker while messages arrive.
        await wait_for(
            events, log, lambda log: sum(e[0] == "sent" for e in log) >= MESSAGES // 3, 60
        )
        victim = max(processes, key=lambda w: list(owners_now(log).values()).count(w))
        victim_sessions = {s for s, w in owners_now(log).items() if w == victim}
        assert victim_sessions, "the victim owns nothing"
        processes[victim].kill()
        killed_at = time.monotonic()
        await trio.to_thread.run_sync(processes[victim].join)
        drain(events, log)
        # Its sessions are released now, in the log: it will never write again.
        log.extend(("release", victim, s, killed_at) for s in victim_sessions)
        await wait_for(events, log, lambda log: ("done",) in log, 120)
        sent = [e for e in log if e[0] == "sent"]
        assert len(sent) == MESSAGES

        # Every message ends up committed once, in its session.
        async with open_store(url, schema=schema) as store:
            with trio.fail_after(60):
                while True:
                    sessions = {s: await store.open(s) for s in {e[1] for e in sent}}
                    missing = [e for e in sent if sessions[e[1]].entry(e[2]) is None]
                    if not missing:
                        break
                    await trio.sleep(0.2)
            for _, session_id, queue_id, text, _ in sent:
                entry = sessions[session_id].entry(queue_id)
                assert isinstance(entry, MessageEntry)
                assert isinstance(entry.message, UserMessage)
                assert content_text(entry.message.content) == text
            for session_id, session in sessions.items():
                texts = [
                    content_text(m.content)  # type: ignore[union-attr]
                    for m in session.messages()
                    if m.role == "user"
                ]
                expected = [e[3] for e in sent if e[1] == session_id]
                assert sorted(t for t in texts if t != "start") == sorted(expected), session_id
            drain(events, log)
    finally:
        for process in [*processes.values(), *([sender] if sender else [])]:
            if process.is_alive():
                process.kill()
            await trio.to_thread.run_sync(process.join)

    # No session was owned by two workers at once.
    intervals: dict[str, list[tuple[float, float, str]]] = {}
    start: dict[tuple[str, str], float] = {}
    for event in log:
        if event[0] == "own":
            start[(event[1], event[2])] = event[3]
        elif event[0] == "release" and (event[1], event[2]) in start:
            began = start.pop((event[1], event[2]))
            intervals.setdefault(event[2], []).append((began, event[3], event[1]))
    end_of_test = time.monotonic()
    for (worker, session_id), began in start.items():
        intervals.setdefault(session_id, []).append((began, end_of_test, worker))
    for session_id, spans in intervals.items():
        spans.sort()
        for (_, end, first), (begin, _, second) in itertools.pairwise(spans):
            assert end <= begin, f"{session_id} owned by {first} and {second} at once"

    # The killed worker's sessions were taken over once its lease ran out.
    takeovers = []
    for session_id in victim_sessions:
        later = [b for b, _, w in intervals[session_id] if w != victim and b >= killed_at]
        assert later, f"{session_id} was never taken over"
        takeovers.append(min(later) - killed_at)
    slack = workers.SCAN_SECONDS + 1.5
    assert max(takeovers) <= LEASE + slack, sorted(takeovers)
    print(
        f"{len(victim_sessions)} sessions of {victim} taken over after "
        f"{min(takeovers):.2f}-{max(takeovers):.2f} s (lease {LEASE} s); "
        f"{MESSAGES} messages delivered once"
    )


async def test_kill_at_random_points_on_postgres(url: str, schema: str, context: Any) -> None:
    expected = await reference_shape()
    rng = random.Random(int(os.environ.get("TRIO_AGENT_KILL_SEED", "21")))
    outcomes = {"finished": 0, "killed": 0}
    prefixes_seen: set[int] = set()
    for iteration in range(KILL_ITERATIONS):
        session_id = f"kill-{iteration}"
        committed = context.Value("i", 0)
        started = context.Event()
        process = context.Process(
            target=workers.kill_main, args=(url, schema, session_id, committed, started)
        )
        process.start()
        await trio.to_thread.run_sync(started.wait, 30)
        await trio.sleep(rng.uniform(0, 0.15))  # a run on PostgreSQL takes longer
        process.kill()
        await trio.to_thread.run_sync(process.join)
        seen = committed.value
        outcomes["finished" if seen == -1 else "killed"] += 1
        # This process's own claims get a long lease (see test_sessions_kill).
        async with open_store(url, schema=schema, lease_seconds=30) as store:
            stored = await store.open(session_id)
            got = shape(stored.entries)
            prefixes_seen.add(len(got))
            assert got == expected[: len(got)], f"iteration {iteration}: not a prefix"
            if seen == -1:
                assert got == expected
            else:
                assert len(got) >= seen, f"iteration {iteration}: lost committed entries"
            while True:
                try:
                    async with store.open_for_writing(
                        session_id, tools=_kill_worker.tools(0)
                    ) as session:
                        await recover_and_continue(session)
                except SessionBusyError:
                    assert seen != -1, "a finished worker left its claim"
                    await trio.sleep(workers.KILL_LEASE / 4)
                    continue
                break
            reopened = await store.open(session_id)
            assert reopened.unfinished_run() is None
            assert sum(isinstance(e, RunFinishedEntry) for e in reopened.entries) >= 1
    print(
        f"postgres kill test: {outcomes}, prefix lengths {sorted(prefixes_seen)} of {len(expected)}"
    )
    assert len(prefixes_seen) >= min(5, KILL_ITERATIONS // 5), prefixes_seen
    assert outcomes["killed"] >= KILL_ITERATIONS // 2, outcomes
