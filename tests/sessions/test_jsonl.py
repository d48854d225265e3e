"""The jsonl: store: pi's layout, torn and corrupt files, failed writes."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path

import pytest

from trio_agent import UserMessage
from trio_agent.sessions import (
    JsonlStore,
    MessageEntry,
    SessionFormatError,
    SessionStoreError,
    open_store,
)
from trio_agent.sessions._entries import encode_entry


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


async def test_files_have_pi_names_and_lines(tmp_path: Path) -> None:
    async with open_store(f"jsonl:{tmp_path}") as store:
        session = await store.create(session_id="abc", cwd="/w")
        await session.append_messages([user("hi")])
    (path,) = tmp_path.glob("*.jsonl")  # noqa: ASYNC240  # a test's tmp_path
    stamp = session.header.timestamp.replace(":", "-").replace(".", "-")
    assert path.name == f"{stamp}_abc.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header == {
        "type": "session",
        "version": 3,
        "id": "abc",
        "timestamp": session.header.timestamp,
        "cwd": "/w",
    }
    entry = json.loads(lines[1])
    assert entry == {
        "type": "message",
        "id": session.entries[0].id,
        "parentId": None,
        "timestamp": session.entries[0].timestamp,
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    }


async def _session_file(tmp_path: Path) -> Path:
    store = JsonlStore(tmp_path)
    session = await store.create(session_id="s1")
    await session.append_messages([user("one"), user("two")])
    (path,) = tmp_path.glob("*.jsonl")  # noqa: ASYNC240  # a test's tmp_path
    return path


async def test_a_torn_last_line_is_left_out_and_reported(tmp_path: Path) -> None:
    path = await _session_file(tmp_path)
    with path.open("ab") as file:
        file.write(b'{"type":"message","id":"torn","par')
    store = JsonlStore(tmp_path)
    session = await store.open("s1")
    assert [m.content for m in session.messages()] == ["one", "two"]  # type: ignore[union-attr]
    assert session.dropped == (
        f"{path}:4: an incomplete last line of 34 bytes (a write cut short) was left out",
    )
    await session.append_messages([user("three")])
    again = await store.open("s1")
    assert again.dropped == ()
    assert [m.content for m in again.messages()] == ["one", "two", "three"]  # type: ignore[union-attr]
    assert path.read_bytes().count(b"torn") == 0


async def test_a_corrupt_line_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = await _session_file(tmp_path)
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"{not json"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(SessionFormatError, match=rf"^{path}:2: not a JSON line \("):
        await JsonlStore(tmp_path).open("s1")


async def test_an_unknown_version_is_an_error(tmp_path: Path) -> None:
    path = await _session_file(tmp_path)
    lines = path.read_text().split("\n")
    header = json.loads(lines[0])
    header["version"] = 4
    lines[0] = json.dumps(header)
    path.write_text("\n".join(lines))
    with pytest.raises(SessionFormatError) as info:
        await JsonlStore(tmp_path).open("s1")
    assert str(info.value) == (
        f"{path}:1: session format version 4 is not supported (this version of trio_agent "
        "reads version 3)"
    )


async def test_a_failed_write_is_cut_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = await _session_file(tmp_path)
    before = path.read_bytes()
    store = JsonlStore(tmp_path)
    session = await store.open("s1")
    real_write = os.write

    def half_then_full(fd: int, data: bytes | memoryview) -> int:
        if len(data) > 10:
            return real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(SessionStoreError, match=r"cannot append to .*: No space left on device"):
        await session.append_messages([user("lost")])
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert len(session.entries) == 2
    await session.append_messages([user("three")])
    assert len((await store.open("s1")).entries) == 3


async def test_sessions_are_found_by_header_when_renamed(tmp_path: Path) -> None:
    path = await _session_file(tmp_path)
    path.rename(tmp_path / "renamed.jsonl")
    session = await JsonlStore(tmp_path).open("s1")
    assert len(session.entries) == 2


async def test_an_id_from_a_header_never_names_a_path(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    path = await _session_file(store_dir)
    text = path.read_text().replace('"id":"s1"', '"id":"../../escape"', 1)
    (store_dir / "odd.jsonl").write_text(text)
    path.unlink()
    store = JsonlStore(store_dir)
    session = await store.open("../../escape")
    await session.append_messages([user("three")])
    async with store.open_for_writing("../../escape") as writer:
        assert len(writer.entries) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]  # noqa: ASYNC240


async def test_an_append_that_would_wait_for_the_lock_is_not_made_on_the_trio_thread(
    tmp_path: Path,
) -> None:
    async with JsonlStore(tmp_path) as store:
        session = await store.create(session_id="s")
        backend = store.backend
        entry = encode_entry(
            MessageEntry(id="e1", timestamp="t", message=UserMessage(content="x", timestamp=1))
        )
        holder = os.open(tmp_path / ".s.lock", os.O_RDWR)
        fcntl.flock(holder, fcntl.LOCK_EX)  # as another process appending
        started = time.monotonic()
        assert not backend.try_append_entries("s", [entry], claim_token=None, now=0)
        assert time.monotonic() - started < 0.5
        os.close(holder)  # releases the lock
        assert (await store.open("s")).entries == []
        assert backend.try_append_entries("s", [entry], claim_token=None, now=0)
        await session.reload()
        assert [e.id for e in session.entries] == ["e1"]
