"""The conformance suite every session store passes.

Run it against a store of your own::

    from trio_agent.sessions import CONFORMANCE_CHECKS

    @pytest.mark.parametrize("check", CONFORMANCE_CHECKS.values(), ids=CONFORMANCE_CHECKS)
    async def test_my_store(check, autojump_clock):
        await check(my_store_factory)

``my_store_factory(**options)`` returns an async context manager yielding a new, empty
:class:`SessionStore` built with ``options`` (``clock``, ``lease_seconds``, ``holder``).
The checks sleep on Trio's clock past leases, so run them under a
``trio.testing.MockClock`` that jumps: for a backend that works in threads, give it an
``autojump_threshold`` of about 0.02 s (with 0 the clock would jump while a renewal is
still in its thread, and the lease would expire under a live writer), e.g. pytest-trio's
``mock_clock`` fixture with ``mock_clock.autojump_threshold = 0.02``. Each check raises
``AssertionError`` naming what failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import trio

from .._abort import AbortSignal
from .._exceptions import SerializationError
from .._messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._tools import AgentTool, AgentToolResult, AgentToolUpdateCallback
from ._entries import (
    CustomEntry,
    LabelEntry,
    MessageEntry,
    RunFinishedEntry,
    RunStartedEntry,
    SessionEntry,
    UnknownEntry,
    encode_entry,
)
from ._errors import (
    DuplicateEntryError,
    SessionBusyError,
    SessionClaimLostError,
    SessionExistsError,
    SessionNotFoundError,
)
from ._recovery import INTERRUPTED_TEXT
from ._session import Session
from ._store import SessionStore

__all__ = ["CONFORMANCE_CHECKS", "StoreFactory", "run_conformance"]

StoreFactory = Callable[..., contextlib.AbstractAsyncContextManager[SessionStore]]
"""``factory(**options)``: a new empty store built with ``options``."""

LEASE = 30.0


def _clock() -> Callable[[], float]:
    """Wall-clock seconds that move with Trio's clock, so sleeping past a lease under
    ``autojump_clock`` expires it."""
    start = 1_800_000_000.0 - trio.current_time()
    return lambda: start + trio.current_time()


@contextlib.asynccontextmanager
async def _store(factory: StoreFactory, holder: str = "worker-a") -> Any:
    async with factory(clock=_clock(), lease_seconds=LEASE, holder=holder) as store:
        yield store


def _user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1_700_000_000_000)


def _wire(entries: list[SessionEntry]) -> list[dict[str, Any]]:
    return [encode_entry(entry) for entry in entries]


async def _same_as_stored(store: SessionStore, session: Session, what: str) -> None:
    stored = await store.open(session.id)
    assert _wire(stored.entries) == _wire(session.entries), f"{what}: store and session differ"


async def check_ordering(factory: StoreFactory) -> None:
    """Entries come back in append order, batch after batch; the leaf is the last one."""
    async with _store(factory) as store:
        session = await store.create(session_id="ordering")
        await session.append_message(_user("1"))
        await session.append_messages([_user("2"), _user("3")])
        await session.append_custom("note", {"n": 4})
        loaded = await store.open("ordering")
        assert _wire(loaded.entries) == _wire(session.entries), "entries differ after reopen"
        texts = [m.content for m in loaded.messages()]
        assert texts == ["1", "2", "3"], f"messages out of order: {texts}"
        assert loaded.leaf_id == session.entries[-1].id, "the leaf is not the last entry"
        parents = [e.parent_id for e in loaded.entries]
        ids = [e.id for e in loaded.entries]
        assert parents == [None, *ids[:-1]], "each entry must follow the one before"


async def check_atomic_batches(factory: StoreFactory) -> None:
    """A batch that fails (an id repeated inside it, a value JSON cannot hold) leaves
    nothing behind; a cancelled append either commits whole or not at all."""
    async with _store(factory) as store:
        session = await store.create(session_id="atomic")
        await session.append_message(_user("kept"))
        repeated = [
            MessageEntry(id="same0001", message=_user("a")),
            MessageEntry(id="same0001", message=_user("b")),
        ]
        try:
            await session.append(repeated)
        except DuplicateEntryError as exc:
            assert exc.entry_id == "same0001", str(exc)
        else:
            raise AssertionError("a batch repeating an id was accepted")
        bad = [MessageEntry(message=_user("a")), CustomEntry(custom_type="x", data=object())]
        try:
            await session.append(bad)
        except SerializationError:
            pass
        else:
            raise AssertionError("a batch holding an object() was accepted")
        assert len(session.entries) == 1, "a refused batch changed the session"
        await _same_as_stored(store, session, "after refused batches")
        for _ in range(20):
            with trio.CancelScope() as scope:
                scope.cancel()
                await session.append_messages([_user("x"), _user("y")])
        await _same_as_stored(store, session, "after cancelled appends")
        assert len(session.entries) % 2 == 1, "a cancelled append committed half a batch"


async def check_duplicate_ids(factory: StoreFactory) -> None:
    """An id already stored is refused with DuplicateEntryError and nothing changes."""
    async with _store(factory) as store:
        session = await store.create(session_id="dupes")
        await session.append([MessageEntry(id="abcd0001", message=_user("1"))])
        leaf = session.leaf_id
        try:
            await session.append(
                [MessageEntry(message=_user("2")), MessageEntry(id="abcd0001", message=_user("3"))]
            )
        except DuplicateEntryError as exc:
            assert str(exc) == (
                "session 'dupes' already has an entry 'abcd0001'; nothing was appended"
            ), str(exc)
        else:
            raise AssertionError("a duplicate id was accepted")
        assert session.leaf_id == leaf and len(session.entries) == 1, "the session changed"
        await _same_as_stored(store, session, "after a duplicate id")
        other = await store.create(session_id="dupes-other")
        await other.append([MessageEntry(id="abcd0001", message=_user("other"))])


async def check_branches(factory: StoreFactory) -> None:
    """branch() moves the leaf; the next append starts a branch that a reopen follows."""
    async with _store(factory) as store:
        session = await store.create(session_id="branches")
        a, b, _c = await session.append_messages([_user("a"), _user("b"), _user("c")])
        session.branch(a.id)
        (d,) = await session.append_messages([_user("d")])
        assert d.parent_id == a.id, "the new branch does not start at the chosen entry"
        loaded = await store.open("branches")
        assert [e.id for e in loaded.current_branch()] == [a.id, d.id], "wrong branch"
        assert [m.content for m in loaded.messages()] == ["a", "d"]
        assert len(loaded.entries) == 4, "the other branch was lost"
        summary = await loaded.branch_with_summary(b.id, "went to d")
        assert summary.parent_id == b.id and summary.from_id == d.id
        texts = [m.content for m in (await store.open("branches")).messages()]
        assert texts[:2] == ["a", "b"] and len(texts) == 3, texts


async def check_forks(factory: StoreFactory) -> None:
    """fork() copies a whole session, or one branch with its labels moved to its end."""
    async with _store(factory) as store:
        session = await store.create(session_id="source")
        a, _b = await session.append_messages([_user("a"), _user("b")])
        await session.append_label(a.id, "start")
        (c,) = await session.append_messages([_user("c")])
        whole = await store.fork("source", new_session_id="whole")
        assert whole.header.parent_session == "source"
        assert _wire(whole.entries) == _wire(session.entries), "a whole fork differs"
        part = await store.fork("source", c.id, new_session_id="part")
        kinds = [type(e).__name__ for e in part.entries]
        assert kinds == ["MessageEntry"] * 3 + ["LabelEntry"], kinds
        assert [m.content for m in part.messages()] == ["a", "b", "c"]
        await _same_as_stored(store, part, "a branch fork")
        assert len((await store.open("source")).entries) == 4, "the source changed"
        try:
            await store.fork("missing")
        except SessionNotFoundError:
            pass
        else:
            raise AssertionError("forking a missing session succeeded")


async def check_lifecycle(factory: StoreFactory) -> None:
    """create, list, delete; ids are unique; unknown ids are SessionNotFoundError."""
    async with _store(factory) as store:
        await store.create(session_id="one")
        await store.create(session_id="two")
        try:
            await store.create(session_id="one")
        except SessionExistsError:
            pass
        else:
            raise AssertionError("a second session with the same id was created")
        ids = sorted(h.id for h in await store.list())
        assert ids == ["one", "two"], ids
        await store.delete("one")
        assert [h.id for h in await store.list()] == ["two"]
        for action in (store.open, store.delete):
            try:
                await action("one")
            except SessionNotFoundError as exc:
                assert str(exc) == "no session 'one'", str(exc)
            else:
                raise AssertionError(f"{action.__name__}() of a deleted session succeeded")


async def check_claims(factory: StoreFactory) -> None:
    """One writer per session: a second writer and unclaimed appends get
    SessionBusyError naming the holder; the claim is free again after the block."""
    async with _store(factory, holder="worker-a") as store:
        await store.create(session_id="claimed")
        reader = await store.open("claimed")
        async with store.open_for_writing("claimed") as writer:
            await writer.append_message(_user("mine"))
            try:
                async with store.open_for_writing("claimed", holder="worker-b"):
                    raise AssertionError("a second writer got in")  # pragma: no cover
            except SessionBusyError as exc:
                assert exc.holder == "worker-a" and exc.session_id == "claimed"
                assert str(exc) == "session 'claimed' is being written by worker-a"
            try:
                await reader.append_message(_user("not mine"))
            except SessionBusyError:
                pass
            else:
                raise AssertionError("an unclaimed append got in while a writer held it")
            # The renewal keeps the claim far past the lease.
            for _ in range(12):
                await trio.sleep(LEASE / 6)
            try:
                async with store.open_for_writing("claimed", holder="worker-b"):
                    raise AssertionError("a live writer's claim expired")  # pragma: no cover
            except SessionBusyError:
                pass
            await writer.append_message(_user("still mine"))
        async with store.open_for_writing("claimed", holder="worker-b") as second:
            assert [m.content for m in second.messages()] == ["mine", "still mine"]
        await reader.reload()
        await reader.append_message(_user("free again"))


async def check_lease_expiry(factory: StoreFactory) -> None:
    """A writer that stops renewing (a crash) loses its claim after the lease; its late
    appends are refused with SessionClaimLostError."""
    async with _store(factory) as store:
        await store.create(session_id="crashed")
        clock = store.clock
        backend = store.backend
        now = clock()
        await backend.acquire_claim(
            "crashed", holder="dead-worker", token="t1", now=now, expires_at=now + LEASE
        )
        try:
            async with store.open_for_writing("crashed"):
                raise AssertionError("took a live claim")  # pragma: no cover
        except SessionBusyError as exc:
            assert exc.holder == "dead-worker", exc.holder
        await trio.sleep(LEASE + 1)
        async with store.open_for_writing("crashed") as session:
            await session.append_message(_user("taken over"))
            entry = MessageEntry(
                id="late0001", parent_id=None, timestamp="x", message=_user("late")
            )
            try:
                await backend.append_entries(
                    "crashed", [encode_entry(entry)], claim_token="t1", now=clock()
                )
            except SessionClaimLostError:
                pass
            else:
                raise AssertionError("the expired writer could still append")
            try:
                await backend.renew_claim(
                    "crashed",
                    holder="dead-worker",
                    token="t1",
                    now=clock(),
                    expires_at=clock() + LEASE,
                )
            except SessionClaimLostError:
                pass
            else:
                raise AssertionError("the expired writer could renew")
        assert [m.content for m in (await store.open("crashed")).messages()] == ["taken over"]


async def check_append_without_waiting(factory: StoreFactory) -> None:
    """``try_append_entries`` keeps every rule of ``append_entries``: a batch it commits
    is stored whole, in order; one it declines (``False``) left nothing; duplicates, a
    lost claim, a live claim of another writer and a missing session are the same
    errors, with nothing written."""
    async with _store(factory) as store:
        backend = store.backend
        clock = store.clock
        await store.create(session_id="nowait")
        expected: list[dict[str, Any]] = []

        async def stored() -> list[dict[str, Any]]:
            return _wire((await store.open("nowait")).entries)

        def entry(entry_id: str, text: str) -> dict[str, Any]:
            parent = expected[-1]["id"] if expected else None
            made = MessageEntry(id=entry_id, parent_id=parent, timestamp="t", message=_user(text))
            return encode_entry(made)

        token = "nowait-token"
        now = clock()
        await backend.acquire_claim(
            "nowait", holder="worker-a", token=token, now=now, expires_at=now + LEASE
        )
        for n, batch_size in enumerate([1, 2, 1]):
            batch: list[dict[str, Any]] = []
            for k in range(batch_size):
                batch.append(entry(f"nowait{n}{k}", f"{n}.{k}"))
                expected.append(batch[-1])
            if not backend.try_append_entries("nowait", batch, claim_token=token, now=clock()):
                assert await stored() == expected[: -len(batch)], "a declined batch wrote"
                await backend.append_entries("nowait", batch, claim_token=token, now=clock())
            assert await stored() == expected, "a batch committed without waiting differs"
        failures: list[tuple[str, type[Exception], Callable[[], bool]]] = [
            (
                "a duplicate id",
                DuplicateEntryError,
                lambda: backend.try_append_entries(
                    "nowait",
                    [entry("fresh001", "x"), entry("nowait00", "dup")],
                    claim_token=token,
                    now=clock(),
                ),
            ),
            (
                "a token that holds no claim",
                SessionClaimLostError,
                lambda: backend.try_append_entries(
                    "nowait", [entry("fresh002", "x")], claim_token="other", now=clock()
                ),
            ),
            (
                "no token while a writer holds the claim",
                SessionBusyError,
                lambda: backend.try_append_entries(
                    "nowait", [entry("fresh003", "x")], claim_token=None, now=clock()
                ),
            ),
            (
                "a missing session",
                SessionNotFoundError,
                lambda: backend.try_append_entries(
                    "missing", [entry("fresh004", "x")], claim_token=token, now=clock()
                ),
            ),
        ]
        for what, error, attempt in failures:
            try:
                committed = attempt()
            except error:
                pass
            else:
                assert not committed, f"{what} was accepted without waiting"
            assert await stored() == expected, f"{what} changed the session"


def _tool(name: str, replay: Literal["never", "safe"] | None, runs: list[str]) -> AgentTool:
    async def execute(
        tool_call_id: str,
        params: dict[str, Any],
        signal: AbortSignal,
        on_update: AgentToolUpdateCallback,
    ) -> AgentToolResult:
        await trio.lowlevel.checkpoint()
        runs.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text=f"{name} ran again")])

    return AgentTool(
        name=name,
        label=name,
        description=name,
        parameters={"type": "object", "properties": {}},
        execute=execute,
        replay=replay,
    )


async def check_journal_and_recovery(factory: StoreFactory) -> None:
    """A run journaled as started and never finished is recovered on open_for_writing:
    only replay="safe" tools run again, every other call gets the interrupted result,
    and the journal says what was done."""
    async with _store(factory) as store:
        session = await store.create(session_id="journal")
        run = await session.start_run("run-1")
        assistant = AssistantMessage(
            content=[
                ToolCall(id="call-safe", name="lookup", arguments={}),
                ToolCall(id="call-never", name="send_mail", arguments={}),
                ToolCall(id="call-unknown", name="gone", arguments={}),
            ],
            api="faux",
            provider="faux",
            model="faux-1",
            stop_reason="toolUse",
        )
        await session.append_messages([_user("go"), assistant])
        await session.start_tool(run.run_id, "call-never", "send_mail", "never")
        assert session.unfinished_run() == run
        runs: list[str] = []
        tools = [_tool("lookup", "safe", runs), _tool("send_mail", "never", runs)]
        async with store.open_for_writing("journal", tools=tools) as writer:
            assert runs == ["call-safe"], f"re-ran {runs}"
            assert writer.unfinished_run() is None
            assert writer.unanswered_tool_calls() == []
            finished = writer.entries[-1]
            assert isinstance(finished, RunFinishedEntry), finished
            assert finished.outcome == "recovered" and finished.run_id == "run-1"
            assert [(c.tool_call_id, c.action) for c in finished.recovered] == [
                ("call-safe", "rerun"),
                ("call-never", "interrupted"),
                ("call-unknown", "interrupted"),
            ]
            results = [m for m in writer.messages() if isinstance(m, ToolResultMessage)]
            assert [r.tool_call_id for r in results] == [
                "call-safe",
                "call-never",
                "call-unknown",
            ]
            texts = [getattr(r.content[0], "text", None) for r in results]
            assert texts == ["lookup ran again", INTERRUPTED_TEXT, INTERRUPTED_TEXT], texts
            assert [r.is_error for r in results] == [False, True, True]
        async with store.open_for_writing("journal", tools=tools) as again:
            assert runs == ["call-safe"], "recovery ran twice"
            assert await again.recover(tools) is None
        started = [e for e in again.entries if isinstance(e, RunStartedEntry)]
        assert len(started) == 1


async def check_unknown_entries(factory: StoreFactory) -> None:
    """Entries of unknown types, and messages of unknown roles, are kept as read."""
    async with _store(factory) as store:
        session = await store.create(session_id="unknown")
        future = UnknownEntry(data={"type": "future_thing", "payload": {"x": [1, 2.5, None]}})
        odd = UnknownEntry(
            data={
                "type": "message",
                "message": {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": "a",
                    "exitCode": 0,
                    "timestamp": 1,
                },
            }
        )
        await session.append([future, odd])
        await session.append_message(_user("after"))
        loaded = await store.open("unknown")
        assert _wire(loaded.entries) == _wire(session.entries)
        first = loaded.entries[0]
        assert isinstance(first, UnknownEntry) and first.type == "future_thing"
        assert first.data["payload"] == {"x": [1, 2.5, None]}
        assert isinstance(loaded.entries[1], UnknownEntry)
        assert [type(m).__name__ for m in loaded.messages()] == ["UserMessage", "UserMessage"]
        assert isinstance(loaded.entries[2], MessageEntry)
        assert not any(isinstance(e, LabelEntry) for e in loaded.entries)


CONFORMANCE_CHECKS: dict[str, Callable[[StoreFactory], Awaitable[None]]] = {
    "ordering": check_ordering,
    "atomic_batches": check_atomic_batches,
    "duplicate_ids": check_duplicate_ids,
    "branches": check_branches,
    "forks": check_forks,
    "lifecycle": check_lifecycle,
    "claims": check_claims,
    "lease_expiry": check_lease_expiry,
    "journal_and_recovery": check_journal_and_recovery,
    "unknown_entries": check_unknown_entries,
    "append_without_waiting": check_append_without_waiting,
}
"""Every check, by name: ``await check(factory)``."""


async def run_conformance(factory: StoreFactory) -> None:
    """Run every check in turn (under a jumping ``MockClock``: the checks sleep past
    leases)."""
    for check in CONFORMANCE_CHECKS.values():
        await check(factory)
