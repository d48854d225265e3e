"""The PostgreSQL store against a real server (``TRIO_AGENT_TEST_POSTGRES_URL``)."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import trio
import trio.testing

from trio_agent import AgentMessage, UserMessage, content_text
from trio_agent.sessions import (
    CONFORMANCE_CHECKS,
    DuplicateEntryError,
    MessageEntry,
    SessionBusyError,
    SessionStore,
    SessionStoreError,
    StoreFactory,
    open_store,
)
from trio_agent.sessions._postgres import PostgresBackend, PostgresStore

from ._postgres_support import new_schema_name, postgres_url, throwaway_schemas


@pytest.fixture
def url() -> str:
    return postgres_url()


@pytest.fixture
def schemas(url: str) -> Iterator[list[str]]:
    with throwaway_schemas(url) as names:
        yield names


@pytest.fixture
def pg_factory(url: str, schemas: list[str]) -> StoreFactory:
    @contextlib.asynccontextmanager
    async def factory(**options: Any) -> AsyncIterator[SessionStore]:
        schema = new_schema_name()
        schemas.append(schema)
        async with open_store(url, schema=schema, **options) as store:
            yield store

    return factory


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1_700_000_000_000)


def user_texts(messages: list[AgentMessage]) -> list[str]:
    return [content_text(m.content) for m in messages if isinstance(m, UserMessage)]


@pytest.mark.parametrize("check", CONFORMANCE_CHECKS.values(), ids=list(CONFORMANCE_CHECKS))
async def test_conformance(
    check: Callable[[StoreFactory], Awaitable[None]],
    pg_factory: StoreFactory,
    mock_clock: trio.testing.MockClock,
) -> None:
    # Not 0: the clock must not jump while a renewal is in a backend's thread.
    mock_clock.autojump_threshold = 0.02
    await check(pg_factory)


async def test_both_schemes_open_a_postgres_store(url: str, schemas: list[str]) -> None:
    for scheme_url in (url, url.replace("postgresql://", "postgres://", 1)):
        schemas.append(schema := new_schema_name())
        async with open_store(scheme_url, schema=schema) as store:
            assert isinstance(store, PostgresStore)
            await store.create(session_id="s")
            assert [h.id for h in await store.list()] == ["s"]


async def test_the_schema_is_created_once_and_versioned(url: str, schemas: list[str]) -> None:
    import psycopg

    schemas.append(schema := new_schema_name())

    async def open_one() -> None:
        async with open_store(url, schema=schema) as store:
            await store.list()

    # Processes starting together: the advisory lock makes creating the tables safe.
    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(open_one)
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(f'SELECT version FROM "{schema}".trio_agent_schema').fetchall()
        assert rows == [(1,)]
        connection.execute(f'UPDATE "{schema}".trio_agent_schema SET version = 99')
    with pytest.raises(SessionStoreError, match="schema version 99"):
        async with open_store(url, schema=schema) as store:
            await store.list()


async def test_duplicate_id_changes_nothing_in_the_database(
    pg_factory: StoreFactory,
) -> None:
    async with pg_factory() as store:
        session = await store.create(session_id="dup")
        (first,) = await session.append_messages([user("one")])
        with pytest.raises(DuplicateEntryError):
            await session.append(
                [
                    MessageEntry(id="fresh001", message=user("a")),
                    MessageEntry(id=first.id, message=user("b")),
                ]
            )
        stored = await store.open("dup")
        assert [e.id for e in stored.entries] == [first.id]
        # The next append continues the sequence with no gap or clash.
        await session.append_message(user("two"))
        stored = await store.open("dup")
        assert user_texts(stored.messages()) == ["one", "two"]


async def test_a_bad_url_is_a_session_store_error(schemas: list[str]) -> None:
    bad = "postgresql://nobody:wrong@127.0.0.1:1/none"
    with pytest.raises(SessionStoreError, match="cannot connect") as caught:
        async with open_store(bad, connect_timeout=1) as store:
            await store.list()
    assert caught.value.__cause__ is not None
    assert "wrong" not in str(caught.value)


def test_the_backend_needs_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_psycopg(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    with pytest.raises(ImportError, match=r"trio-agent\[postgres\]"):
        PostgresBackend("postgresql://x@localhost/y")


# --- cancellation and lost connections ------------------------------------------------------


@contextlib.contextmanager
def row_locked(url: str, schema: str, session_id: str) -> Iterator[Any]:
    """Another connection holds the session's row lock: appends and claims wait for it."""
    import psycopg

    with psycopg.connect(url) as connection:
        connection.execute(
            f'SELECT 1 FROM "{schema}".sessions WHERE id = %s FOR UPDATE', (session_id,)
        )
        yield connection
        connection.rollback()


def waiting_queries(url: str, schema: str) -> list[tuple[int, str]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT pid, query FROM pg_stat_activity "
            "WHERE state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
            (f'%"{schema}".sessions%FOR UPDATE%',),
        ).fetchall()
        return [(int(pid), str(query)) for pid, query in rows]


async def wait_until_waiting(url: str, schema: str) -> list[tuple[int, str]]:
    """Poll the server until a query of ours waits for the session's row lock (nothing
    on our side can tell)."""
    with trio.fail_after(10):
        while True:
            await trio.sleep(0.01)
            waiting = await trio.to_thread.run_sync(waiting_queries, url, schema)
            if waiting:
                return waiting


async def test_a_cancelled_query_is_cancelled_on_the_server_and_the_pool_stays_healthy(
    url: str, schemas: list[str]
) -> None:
    schemas.append(schema := new_schema_name())
    async with open_store(url, schema=schema, max_size=2) as store:
        session = await store.create(session_id="slow")
        await session.append_message(user("before"))
        for _ in range(5):  # more times than the pool has connections
            with row_locked(url, schema, "slow"):
                with trio.CancelScope() as scope:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(session.append_message, user("never"))
                        await wait_until_waiting(url, schema)
                        start = trio.current_time()
                        scope.cancel()
                assert scope.cancelled_caught
                # Not abandoned: the call returned once the server had cancelled it.
                assert trio.current_time() - start < 3.0
                assert await trio.to_thread.run_sync(waiting_queries, url, schema) == []
            stored = await store.open("slow")
            assert user_texts(stored.messages()) == ["before"]
        # Every connection went back clean: a batch commits on each of them.
        async with trio.open_nursery() as nursery:
            for n in range(4):
                nursery.start_soon(functools.partial(store.create, session_id=f"after-{n}"))
        await session.append_message(user("after"))
        stored = await store.open("slow")
        assert user_texts(stored.messages()) == ["before", "after"]


async def test_a_lost_connection_is_a_store_error_with_its_cause_and_no_half_batch(
    url: str, schemas: list[str]
) -> None:
    import psycopg

    schemas.append(schema := new_schema_name())
    async with open_store(url, schema=schema, max_size=2) as store:
        session = await store.create(session_id="lost")
        await session.append_message(user("kept"))
        with row_locked(url, schema, "lost") as locker:
            async with trio.open_nursery() as nursery:

                async def kill_the_waiting_connection() -> None:
                    ((pid, _),) = await wait_until_waiting(url, schema)
                    locker.execute("SELECT pg_terminate_backend(%s)", (pid,))

                nursery.start_soon(kill_the_waiting_connection)
                with pytest.raises(SessionStoreError) as caught:
                    await session.append_messages([user("a"), user("b")])
        assert isinstance(caught.value.__cause__, psycopg.OperationalError)
        stored = await store.open("lost")
        assert user_texts(stored.messages()) == ["kept"]
        # The pool replaced the broken connection.
        await session.append_messages([user("a"), user("b")])
        stored = await store.open("lost")
        assert user_texts(stored.messages()) == ["kept", "a", "b"]


async def test_writers_racing_for_a_claim_from_two_pools_one_wins(
    url: str, schemas: list[str]
) -> None:
    # Each store has its own pool, like two processes. Under READ COMMITTED a claim read
    # in the statement that waited for the session's row lock would be stale: both won.
    schemas.append(schema := new_schema_name())
    async with open_store(url, schema=schema) as a, open_store(url, schema=schema) as b:
        for n in range(40):
            await a.create(session_id=f"race-{n}")
        for n in range(40):
            winners: list[str] = []

            async def claim(
                store: SessionStore, name: str, session_id: str, winners: list[str] = winners
            ) -> None:
                try:
                    async with store.open_for_writing(session_id, holder=name):
                        winners.append(name)
                        await trio.sleep(0.05)
                except SessionBusyError:
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(claim, a, "a", f"race-{n}")
                nursery.start_soon(claim, b, "b", f"race-{n}")
            assert len(winners) == 1, (n, winners)
