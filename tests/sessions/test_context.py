"""messages() / context(): pi's buildSessionContext() and convertToLlm() over entries."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent import AssistantMessage, SystemMessage, TextContent, UserMessage, content_text
from trio_agent.serialization import to_dict
from trio_agent.sessions import (
    CompactionEntry,
    ContextEditEntry,
    CustomMessageEntry,
    MemoryStore,
    Session,
    UnknownEntry,
    open_store,
)


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def reply(text: str, model: str = "m1") -> AssistantMessage:
    return AssistantMessage(
        content=[TextContent(text=text)], api="faux", provider="p", model=model, timestamp=2
    )


def texts(session: Session) -> list[Any]:
    return [content_text(m.content) for m in session.messages()]  # type: ignore[union-attr]


async def new_session() -> Session:
    return await MemoryStore().create(session_id="s", cwd="/w")


async def test_compaction_keeps_the_summary_then_the_kept_entries() -> None:
    session = await new_session()
    system = SystemMessage(content="be brief", timestamp=0)
    _s, _a, _b, c, _d = await session.append_messages(
        [system, user("a"), reply("b"), user("c"), reply("d")]
    )
    compaction = await session.append_compaction("a and b happened", c.id, 1234)
    await session.append_messages([user("e")])
    assert compaction.system_message == system
    assert compaction.first_kept_entry_id == c.id
    messages = session.messages()
    assert messages[0] == system
    summary = messages[1]
    assert isinstance(summary, UserMessage)
    assert summary.content == [
        TextContent(
            text="The conversation history before this point was compacted into the following "
            "summary:\n\n<summary>\na and b happened\n</summary>"
        )
    ]
    assert texts(session)[2:] == ["c", "d", "e"]


async def test_a_second_compaction_replaces_the_first() -> None:
    session = await new_session()
    await session.append_messages([user("a"), reply("b")])
    await session.append_compaction("first", None, 10)
    (c,) = await session.append_messages([user("c")])
    await session.append_compaction("second", c.id, 20)
    assert texts(session) == [
        "The conversation history before this point was compacted into the following "
        "summary:\n\n<summary>\nsecond\n</summary>",
        "c",
    ]


async def test_settings_follow_the_branch() -> None:
    session = await new_session()
    assert session.context().thinking_level == "off"
    assert session.context().model is None
    await session.append_model_change("openai", "gpt-4o")
    await session.append_thinking_level_change("high")
    assert session.context().model == ("openai", "gpt-4o")
    await session.append_messages([user("q"), reply("r", model="m2")])
    context = session.context()
    assert (context.model, context.thinking_level) == (("p", "m2"), "high")


async def test_custom_messages_branch_summaries_and_edits() -> None:
    session = await new_session()
    (a,) = await session.append_messages([user("a")])
    (custom,) = await session.append(
        [CustomMessageEntry(custom_type="note", content="from the app", display=False)]
    )
    (b,) = await session.append_messages([reply("b")])
    await session.append([ContextEditEntry(target_id=b.id, replacement={"content": "B"})])
    await session.append([ContextEditEntry(target_id=custom.id, replacement=None)])
    assert texts(session) == ["a", "B"]
    await session.branch_with_summary(a.id, "tried b")
    assert texts(session) == [
        "a",
        "The following is a summary of a branch that this conversation came back from:"
        "\n\n<summary>\ntried b</summary>",
    ]


async def test_pi_bash_execution_messages_become_user_text() -> None:
    session = await new_session()
    bash = {
        "role": "bashExecution",
        "command": "ls",
        "output": "a.txt",
        "exitCode": 2,
        "cancelled": False,
        "truncated": False,
        "timestamp": 5,
    }
    await session.append([UnknownEntry(data={"type": "message", "message": bash})])
    await session.append(
        [UnknownEntry(data={"type": "message", "message": {**bash, "excludeFromContext": True}})]
    )
    assert [to_dict(m) for m in session.messages()] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Ran `ls`\n```\na.txt\n```\n\nCommand exited with code 2"}
            ],
            "timestamp": 5,
        }
    ]


async def test_branch_rejects_an_unknown_entry() -> None:
    session = await new_session()
    with pytest.raises(KeyError, match="session 's' has no entry 'nope'"):
        session.branch("nope")


async def test_compaction_entry_round_trips_through_a_store(tmp_path: Any) -> None:
    async with open_store(f"sqlite:{tmp_path / 'db'}") as store:
        session = await store.create(session_id="s")
        await session.append_messages([user("a")])
        entry = await session.append_compaction("sum", None, 7, details={"k": 1})
        loaded = await store.open("s")
        assert loaded.entries[-1] == entry
        assert isinstance(entry, CompactionEntry)


async def test_open_store_rejects_unknown_urls() -> None:
    with pytest.raises(ValueError, match=r"unknown session store URL 'redis://x' \(known: "):
        async with open_store("redis://x"):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="an SQLite store needs a file: 'sqlite:PATH'"):
        async with open_store("sqlite:"):
            pass  # pragma: no cover


async def test_create_checks_the_id() -> None:
    with pytest.raises(ValueError, match="a session id must be non-empty"):
        await MemoryStore().create(session_id="../etc")
