"""Kill tests: a process running an agent on SQLite (and on JSONL files) is SIGKILLed at
random points.

Every reopen must give exactly a prefix of the uninterrupted run's entries, at least as
long as what the worker had seen committed; recovery must answer every tool call once; and
the next prompt must succeed.
"""

from __future__ import annotations

import multiprocessing
import os
import random
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import AssistantMessage, ToolCall, ToolResultMessage
from trio_agent.sessions import (
    MessageEntry,
    RunFinishedEntry,
    Session,
    SessionBusyError,
    SessionEntry,
    attach_agent,
    open_store,
)
from trio_agent.testing import FauxProvider, faux_assistant_message

from . import _kill_worker as worker

ITERATIONS = int(os.environ.get("TRIO_AGENT_KILL_ITERATIONS", "50"))


def shape(entries: list[SessionEntry]) -> list[tuple[str, ...]]:
    """Entry kinds without ids and times: what must match the uninterrupted run."""
    out: list[tuple[str, ...]] = []
    for entry in entries:
        if isinstance(entry, MessageEntry):
            message: Any = entry.message
            calls = [b.id for b in getattr(message, "content", []) if isinstance(b, ToolCall)]
            extra = getattr(message, "tool_call_id", "")
            out.append(("message", message.role, ",".join(calls), extra))
        else:
            detail = getattr(entry, "tool_call_id", getattr(entry, "outcome", ""))
            out.append((type(entry).__name__, str(detail)))
    return out


def assert_every_call_answered_once(messages: list[Any]) -> None:
    pending: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            assert pending == [], f"calls {pending} unanswered before the next assistant message"
            pending = [b.id for b in message.content if isinstance(b, ToolCall)]
        elif isinstance(message, ToolResultMessage):
            assert message.tool_call_id in pending, f"result for {message.tool_call_id} twice"
            pending.remove(message.tool_call_id)
    assert pending == []


async def reference_shape() -> list[tuple[str, ...]]:
    faux = FauxProvider(worker.script())
    agent = worker.make_agent(faux)
    async with open_store("memory:") as store:
        await store.create(session_id="ref")
        async with store.open_for_writing("ref") as session, attach_agent(agent, session):
            await agent.prompt("go")
        return shape((await store.open("ref")).entries)


async def recover_and_continue(session: Session) -> None:
    """open_for_writing() recovered: every call is answered and the next prompt works."""
    assert session.unfinished_run() is None
    assert_every_call_answered_once(session.messages())
    finished = [e for e in session.entries if isinstance(e, RunFinishedEntry)]
    assert len(finished) <= 1
    agent = worker.make_agent(FauxProvider([faux_assistant_message("resumed")]))
    async with attach_agent(agent, session):
        await agent.prompt("and now?")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "stop"
    assert_every_call_answered_once(session.messages())


@pytest.fixture(scope="module")
def context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["trio", "trio_agent.sessions", "trio_agent.testing"])
    return ctx


@pytest.mark.parametrize(
    ("kind", "iterations"), [("sqlite", ITERATIONS), ("jsonl", max(1, ITERATIONS // 2))]
)
async def test_kill_at_random_points(
    tmp_path: Path, context: Any, kind: str, iterations: int
) -> None:
    expected = await reference_shape()
    url = f"sqlite:{tmp_path / 'kill.db'}" if kind == "sqlite" else f"jsonl:{tmp_path}"
    rng = random.Random(int(os.environ.get("TRIO_AGENT_KILL_SEED", "21")))
    outcomes = {"finished": 0, "killed": 0}
    prefixes_seen: set[int] = set()
    for iteration in range(iterations):
        session_id = f"kill-{iteration}"
        # No lock: a worker killed while holding one would leave it held for good.
        committed = context.Value("i", 0, lock=False)
        started = context.Event()
        process = context.Process(target=worker.main, args=(url, session_id, committed, started))
        process.start()
        await trio.to_thread.run_sync(started.wait, 30)
        await trio.sleep(rng.uniform(0, 0.06))
        process.kill()
        await trio.to_thread.run_sync(process.join)
        seen = committed.value
        outcomes["finished" if seen == -1 else "killed"] += 1
        # This process's own claims get a long lease: a loaded machine must not take them
        # away while it recovers (the dead worker's short lease is what is waited for).
        async with open_store(url, lease_seconds=30) as store:
            stored = await store.open(session_id)
            got = shape(stored.entries)
            prefixes_seen.add(len(got))
            assert got == expected[: len(got)], f"iteration {iteration}: not a prefix"
            if seen == -1:
                assert got == expected
            else:
                assert len(got) >= seen, f"iteration {iteration}: lost committed entries"
            # The dead worker's claim holds until its lease runs out.
            while True:
                try:
                    async with store.open_for_writing(session_id, tools=worker.tools(0)) as session:
                        await recover_and_continue(session)
                except SessionBusyError:
                    assert seen != -1, "a finished worker left its claim"
                    await trio.sleep(worker.LEASE / 4)
                    continue
                break
            assert (await store.open(session_id)).unfinished_run() is None
    print(f"kill test: {outcomes}, prefix lengths {sorted(prefixes_seen)} of {len(expected)}")
    # The kills landed at many points of the run, not all before its first commit.
    assert len(prefixes_seen) >= min(5, iterations // 5), prefixes_seen
    assert outcomes["killed"] >= iterations // 3, outcomes
