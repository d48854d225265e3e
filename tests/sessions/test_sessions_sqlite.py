"""Stores under contention: eight processes on one SQLite file (and on one JSONL directory,
whose flock must keep them apart the same way), and a lock held past the busy timeout."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from trio_agent import UserMessage
from trio_agent.serialization import to_dict
from trio_agent.sessions import (
    MessageEntry,
    SessionStoreError,
    SqliteStore,
    attach_agent,
    open_store,
)
from trio_agent.sessions import _sqlite as sqlite_module
from trio_agent.sessions._entries import encode_entry

from . import _sqlite_writer as writer
from .test_attach import make_agent, make_tool, tool_turn_faux

WRITERS = 8


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_eight_processes_write_one_store(tmp_path: Path, kind: str) -> None:
    url = f"sqlite:{tmp_path / 'shared.db'}" if kind == "sqlite" else f"jsonl:{tmp_path}"
    async with open_store(url) as store:
        await store.create(session_id="shared")
        await store.create(session_id="contended")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["trio", "trio_agent.sessions"])
    go = context.Event()
    results = context.Queue()
    processes = [
        context.Process(target=writer.main, args=(url, n, go, results)) for n in range(WRITERS)
    ]
    for process in processes:
        process.start()
    go.set()
    reports = [await trio.to_thread.run_sync(results.get, True, 120) for _ in processes]
    for process in processes:
        await trio.to_thread.run_sync(process.join)
    errors = [report[3] for report in reports if report[3] is not None]
    assert errors == []
    assert all(process.exitcode == 0 for process in processes)
    claimed = sum(report[1] for report in reports)
    async with open_store(url) as store:
        for n in range(WRITERS):
            own = await store.open(f"own-{n}")
            assert len(own.entries) == 3 * writer.ROUNDS
        shared = await store.open("shared")
        assert len(shared.entries) == WRITERS * writer.ROUNDS
        assert len({e.id for e in shared.entries}) == len(shared.entries)
        contended = await store.open("contended")
        assert len(contended.entries) == claimed > 0


async def test_a_lock_held_past_the_busy_timeout_is_waited_out(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    async with SqliteStore(path, busy_timeout_ms=20) as store:
        session = await store.create(session_id="s")
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN EXCLUSIVE")
        release = threading.Timer(0.3, holder.execute, ("COMMIT",))
        release.start()
        started = time.monotonic()
        await session.append_message(UserMessage(content="waited", timestamp=1))
        assert time.monotonic() - started >= 0.25
        release.join()
        holder.close()
        (entry,) = (await store.open("s")).entries
        assert isinstance(entry, MessageEntry)


async def test_a_full_database_is_a_clear_error_that_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    async with SqliteStore(path) as store:
        session = await store.create(session_id="s")
        await session.append_message(UserMessage(content="kept", timestamp=1))
        connection = store.backend._connection  # type: ignore[attr-defined]  # the test's lever
        (pages,) = connection.execute("PRAGMA page_count").fetchone()
        connection.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "disk full"
        with pytest.raises(SessionStoreError) as info:
            await session.append_message(UserMessage(content="x" * 100_000, timestamp=1))
        assert str(info.value) == (
            f"cannot write the session database {path}: database or disk is full"
        )
        assert len(session.entries) == 1
        connection.execute("PRAGMA max_page_count = 1073741823")
        await session.append_message(UserMessage(content="after", timestamp=1))
        stored = await store.open("s")
        assert [m.content for m in stored.messages()] == ["kept", "after"]  # type: ignore[union-attr]


def _entry(entry_id: str, parent: str | None = None) -> dict[str, Any]:
    made = MessageEntry(
        id=entry_id, parent_id=parent, timestamp="t", message=UserMessage(content=entry_id)
    )
    return encode_entry(made)


async def test_a_commit_that_would_wait_is_not_made_on_the_trio_thread(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    async with SqliteStore(path) as store:  # a busy timeout of 5 s in the worker thread
        await store.create(session_id="s")
        backend = store.backend
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        assert not backend.try_append_entries("s", [_entry("e1")], claim_token=None, now=0)
        assert time.monotonic() - started < 0.5
        holder.execute("COMMIT")
        holder.close()
        assert (await store.open("s")).entries == []
        assert backend.try_append_entries("s", [_entry("e1")], claim_token=None, now=0)
        assert [e.id for e in (await store.open("s")).entries] == ["e1"]


async def test_the_worker_thread_takes_every_nth_commit_and_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_module, "CHECKPOINT_COMMITS", 4)
    async with SqliteStore(tmp_path / "wal.db") as store:
        await store.create(session_id="s")  # commit 1, in the worker thread
        backend = store.backend
        statements: list[str] = []
        backend._connection.set_trace_callback(statements.append)  # type: ignore[attr-defined]
        now = time.time()
        await backend.acquire_claim("s", holder="h", token="t", now=now, expires_at=now + 60)
        outcomes = []
        parent: str | None = None
        for n in range(8):
            entry = _entry(f"e{n}", parent)
            parent = entry["id"]
            done = backend.try_append_entries("s", [entry], claim_token="t", now=time.time())
            outcomes.append(done)
            if not done:
                await backend.append_entries("s", [entry], claim_token="t", now=time.time())
        # Commits 3, then 4 in the thread (a checkpoint), 1-3 on the Trio thread, 4 in the
        # thread (a checkpoint), 1 on the Trio thread.
        assert outcomes == [True, False, True, True, True, False, True, True]
        assert statements.count("PRAGMA wal_checkpoint(PASSIVE)") == 2
        assert [e.id for e in (await store.open("s")).entries] == [f"e{n}" for n in range(8)]


async def test_a_full_disk_on_the_trio_thread_is_the_same_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "full.db"
    async with SqliteStore(path) as store:
        await store.create(session_id="s")
        backend = store.backend
        now = time.time()
        await backend.acquire_claim("s", holder="h", token="t", now=now, expires_at=now + 60)
        inline = backend._inline  # type: ignore[attr-defined]  # the test's lever
        assert inline is not None
        (pages,) = inline.execute("PRAGMA page_count").fetchone()
        inline.execute(f"PRAGMA max_page_count = {pages}")
        big = encode_entry(
            MessageEntry(id="big", timestamp="t", message=UserMessage(content="x" * 100_000))
        )
        with pytest.raises(SessionStoreError) as info:
            backend.try_append_entries("s", [big], claim_token="t", now=time.time())
        assert str(info.value) == (
            f"cannot write the session database {path}: database or disk is full"
        )
        assert (await store.open("s")).entries == []


async def test_an_attached_run_commits_on_the_trio_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faux = tool_turn_faux("found it")
    agent = make_agent(faux, [make_tool("look")])
    async with open_store(f"sqlite:{tmp_path / 'db'}") as store:
        created = await store.create(session_id="s")
        async with store.open_for_writing(created.id) as session, attach_agent(agent, session):
            hops: list[object] = []
            real = trio.to_thread.run_sync

            async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
                hops.append(fn)
                return await real(fn, *args, **kwargs)

            monkeypatch.setattr(trio.to_thread, "run_sync", counted)
            await agent.prompt("find it")
            monkeypatch.undo()
        assert hops == []
        stored = await store.open("s")
        assert [to_dict(m) for m in stored.messages()] == [to_dict(m) for m in agent.state.messages]
