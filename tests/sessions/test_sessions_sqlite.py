"""Stores under contention: eight processes on one SQLite file (and on one JSONL directory,
whose flock must keep them apart the same way), and a lock held past the busy timeout."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
import time
from pathlib import Path

import pytest
import trio

from trio_agent import UserMessage
from trio_agent.sessions import MessageEntry, SessionStoreError, SqliteStore, open_store

from . import _sqlite_writer as writer

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
