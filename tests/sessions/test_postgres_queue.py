"""store.steer() / store.follow_up() on PostgreSQL: the owner's inbox hands queued messages
to its agent, woken by LISTEN/NOTIFY, and each is committed once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import trio

from trio_agent import (
    AbortSignal,
    Agent,
    AgentInitialState,
    AgentTool,
    AgentToolResult,
    AgentToolUpdateCallback,
    TextContent,
    UserMessage,
    content_text,
)
from trio_agent.sessions import (
    MessageEntry,
    SessionError,
    SessionNotFoundError,
    SessionStore,
    attach_agent,
    open_store,
)
from trio_agent.testing import FauxProvider, faux_assistant_message, faux_tool_call

from ._postgres_support import new_schema_name, postgres_url, throwaway_schemas


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
def schema(url: str) -> Iterator[str]:
    with throwaway_schemas(url) as names:
        names.append(name := new_schema_name())
        yield name


@contextlib.asynccontextmanager
async def pg(url: str, schema: str, **options: Any) -> AsyncIterator[SessionStore]:
    async with open_store(url, schema=schema, **options) as store:
        yield store


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1_700_000_000_000)


def make_agent(faux: FauxProvider, tools: list[AgentTool] = []) -> Agent:  # noqa: B006
    return Agent(
        initial_state=AgentInitialState(
            system_prompt="Queue test.", model=faux.get_model(), tools=tools
        ),
        stream_fn=faux.stream_fn,
    )


def texts(messages: list[Any], role: str = "user") -> list[str]:
    return [content_text(m.content) for m in messages if m.role == role]


async def test_a_steered_message_reaches_the_idle_owner_and_is_committed_once(
    url: str, schema: str
) -> None:
    async with pg(url, schema) as owner_store, pg(url, schema) as other_store:
        await owner_store.create(session_id="s")
        faux = FauxProvider([faux_assistant_message("hello"), faux_assistant_message("ok")])
        agent = make_agent(faux)
        async with owner_store.open_for_writing("s") as session, attach_agent(agent, session):
            await agent.prompt("hi")
            async with owner_store.open_inbox(session, agent) as inbox:
                # Another process (here: another store with its own pool) queues a message.
                queue_id = await other_store.steer("s", user("change of plan"))
                with trio.fail_after(10):
                    await inbox.wait_queued()
                await agent.continue_()
                assert inbox.delivered == 1
        stored = await owner_store.open("s")
        assert texts(stored.messages()) == ["hi", "change of plan"]
        assert texts(stored.messages(), "assistant") == ["hello", "ok"]
        # The entry of the delivered message has the queue id.
        entry = stored.entry(queue_id)
        assert isinstance(entry, MessageEntry)
        assert isinstance(entry.message, UserMessage)
        assert content_text(entry.message.content) == "change of plan"
        # A later owner does not get it again.
        agent = make_agent(FauxProvider([]))
        async with (
            owner_store.open_for_writing("s") as session,
            attach_agent(agent, session),
            owner_store.open_inbox(session, agent) as inbox,
        ):
            await trio.sleep(0.2)
            assert inbox.delivered == 0
            assert not agent.has_queued_messages()


async def test_steering_during_a_run_and_a_follow_up(url: str, schema: str) -> None:
    tool_started = trio.Event()
    release = trio.Event()

    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        tool_started.set()
        await release.wait()
        return AgentToolResult(content=[TextContent(text="looked")])

    tool = AgentTool(
        name="look",
        label="look",
        description="look",
        parameters={"type": "object", "properties": {}},
        execute=execute,
    )
    faux = FauxProvider(
        [
            faux_assistant_message([faux_tool_call("look", {}, id="c1")], stop_reason="toolUse"),
            faux_assistant_message("steered"),
            faux_assistant_message("followed up"),
        ]
    )
    agent = make_agent(faux, [tool])
    async with pg(url, schema) as store, pg(url, schema) as sender:
        await store.create(session_id="run")
        async with (
            store.open_for_writing("run") as session,
            attach_agent(agent, session),
            store.open_inbox(session, agent) as inbox,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(agent.prompt, "look around")
            await tool_started.wait()
            await sender.steer("run", user("also this"))
            await sender.follow_up("run", user("and then that"))
            while inbox.delivered < 2:  # noqa: ASYNC110  (the inbox has no event for it)
                await trio.sleep(0.01)
            release.set()
        stored = await store.open("run")
        assert texts(stored.messages()) == ["look around", "also this", "and then that"]
        assert texts(stored.messages(), "assistant")[-2:] == ["steered", "followed up"]


async def test_a_message_taken_but_never_committed_goes_to_the_next_owner(
    url: str, schema: str
) -> None:
    async with pg(url, schema) as store:
        await store.create(session_id="s")
        queue_id = await store.steer("s", user("are you there?"))
        # The first owner takes it and goes away before its agent delivers it.
        agent = make_agent(FauxProvider([faux_assistant_message("hello")]))
        async with store.open_for_writing("s") as session, attach_agent(agent, session):
            await agent.prompt("hi")
            async with store.open_inbox(session, agent) as inbox:
                await inbox.wait_queued()
        # The next owner gets it, and commits it under its queue id.
        agent = make_agent(FauxProvider([faux_assistant_message("yes")]))
        async with (
            store.open_for_writing("s") as session,
            attach_agent(agent, session),
            store.open_inbox(session, agent) as inbox,
        ):
            await inbox.wait_queued()
            await agent.continue_()
        stored = await store.open("s")
        assert texts(stored.messages()) == ["hi", "are you there?"]
        assert stored.entry(queue_id) is not None


async def test_misuse(url: str, schema: str) -> None:
    async with pg(url, schema) as store:
        with pytest.raises(SessionNotFoundError):
            await store.steer("nobody", user("hello?"))
        session = await store.create(session_id="reader")
        with pytest.raises(SessionError, match="not opened for writing"):
            async with store.open_inbox(session, make_agent(FauxProvider([]))):
                pass


async def test_many_inboxes_share_one_listening_connection(url: str, schema: str) -> None:
    import psycopg

    count = 30
    async with pg(url, schema, max_size=4) as store, pg(url, schema) as sender:
        delivered: dict[str, int] = {}
        async with trio.open_nursery() as nursery:

            async def own(session_id: str, task_status: Any) -> None:
                faux = FauxProvider([faux_assistant_message("hello"), faux_assistant_message("ok")])
                agent = make_agent(faux)
                await store.create(session_id=session_id)
                async with (
                    store.open_for_writing(session_id) as session,
                    attach_agent(agent, session),
                ):
                    await agent.prompt("hi")
                    async with store.open_inbox(session, agent) as inbox:
                        task_status.started()
                        await inbox.wait_queued()
                        await agent.continue_()
                        delivered[session_id] = inbox.delivered

            for n in range(count):
                await nursery.start(own, f"s{n}")
            with psycopg.connect(url, autocommit=True) as connection:
                (listening,) = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%'"
                ).fetchone() or (0,)
            assert listening == 1
            for n in reversed(range(count)):
                await sender.steer(f"s{n}", user(f"to {n}"))
        assert delivered == {f"s{n}": 1 for n in range(count)}
        for n in range(count):
            stored = await store.open(f"s{n}")
            assert texts(stored.messages()) == ["hi", f"to {n}"]
