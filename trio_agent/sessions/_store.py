"""The store: create, open, list, delete and fork sessions; one writer per session."""

from __future__ import annotations

import builtins
import contextlib
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._backend import SessionBackend
from ._entries import (
    LabelEntry,
    SessionEntry,
    SessionHeader,
    decode_entry,
    decode_header,
    encode_entry,
    encode_header,
    iso_now,
    new_session_id,
)
from ._errors import SessionClaimLostError, SessionError, SessionStoreError
from ._memory import MemoryBackend
from ._session import Session

if TYPE_CHECKING:
    from .._agent import Agent
    from .._messages import AgentMessage
    from .._tools import AgentTool
    from ._inbox import Inbox

__all__ = ["DEFAULT_LEASE_SECONDS", "MemoryStore", "SessionStore", "default_holder"]

DEFAULT_LEASE_SECONDS = 30.0
"""How long a writer's claim lasts unless renewed (renewed every third of it)."""


def default_holder() -> str:
    """``host:pid``: who holds a claim, as :class:`SessionBusyError` names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


@attrs.define(eq=False)
class _Renewal:
    lost: SessionError | None = None


class SessionStore:
    """Sessions in pi's format, kept by a backend.

    Build one with :func:`open_store` (``"memory:"``, ``"jsonl:DIR"``, ``"sqlite:PATH"``)
    or directly (:class:`MemoryStore`, :class:`JsonlStore`, :class:`SqliteStore`), and
    close it with ``aclose()`` or ``async with``.

    Args:
        backend: The storage (see :class:`trio_agent.sessions.SessionBackend`).
        lease_seconds: How long a writer's claim lasts without renewal.
        clock: Wall-clock seconds used for leases; all processes sharing the store must
            agree on it (``time.time`` by default; tests pass a fake).
        holder: The name this process gives its claims (default ``host:pid``).
    """

    def __init__(
        self,
        backend: SessionBackend,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
        holder: str | None = None,
    ) -> None:
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
        self.backend = backend
        """The storage."""
        self.lease_seconds = lease_seconds
        self.clock = clock
        self.holder = holder or default_holder()

    async def __aenter__(self) -> SessionStore:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the backend (connections, files). Shielded: it completes even when the
        surrounding scope is cancelled."""
        with trio.CancelScope(shield=True):
            await self.backend.aclose()

    # --- sessions -----------------------------------------------------------------------------

    def _session(
        self,
        header: SessionHeader,
        entries: list[SessionEntry],
        dropped: tuple[str, ...] = (),
        claim_token: str | None = None,
    ) -> Session:
        return Session(
            backend=self.backend,
            clock=self.clock,
            header=header,
            entries=entries,
            claim_token=claim_token,
            dropped=dropped,
        )

    async def create(
        self,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        parent_session: str | None = None,
    ) -> Session:
        """Create an empty session and return it (for reading and unclaimed appends).

        Args:
            session_id: The id (default: a new UUID v7). Letters, digits, ``.``, ``_``
                and ``-``, starting and ending with a letter or digit, as pi requires.
            cwd: The working directory recorded in the header (default: the current one).
            parent_session: Recorded as the session it came from.

        Raises:
            SessionExistsError: the id is taken.
            ValueError: the id has other characters.
        """
        if session_id is not None:
            _check_id(session_id)
        header = SessionHeader(
            id=session_id or new_session_id(),
            timestamp=iso_now(),
            cwd=os.getcwd() if cwd is None else cwd,
            parent_session=parent_session,
        )
        await self.backend.create_session(encode_header(header), [])
        return self._session(header, [])

    async def _load(self, session_id: str, claim_token: str | None = None) -> Session:
        loaded = await self.backend.load_session(session_id)
        where = f"session {session_id!r}"
        header = decode_header(loaded.header, where)
        entries = [decode_entry(data, where) for data in loaded.entries]
        return self._session(header, entries, loaded.dropped, claim_token)

    async def open(self, session_id: str) -> Session:
        """Load a session, for reading (appends are refused while a writer holds it).

        Raises:
            SessionNotFoundError: no session has the id.
            SessionFormatError: it cannot be read.
        """
        return await self._load(session_id)

    @contextlib.asynccontextmanager
    async def open_for_writing(
        self, session_id: str, *, tools: Sequence[AgentTool] = (), holder: str | None = None
    ) -> AsyncIterator[Session]:
        """Claim a session, recover it, and keep the claim while the block runs.

        ``async with store.open_for_writing(session_id, tools=tools) as session:``
        takes the session's claim (one writer per session), loads the session, runs
        :meth:`Session.recover` with ``tools`` when a run was left unfinished, and
        yields the session. The block owns a nursery with one task that renews the
        claim every third of the lease (there is no task outside the block). On exit
        the renewal stops and the claim is released, also when the block is cancelled.

        If the claim cannot be renewed (the store lost it, or another writer took it
        after it expired), the block is cancelled and :class:`SessionClaimLostError`
        is raised; what was committed stays. A crashed process renews nothing: its claim
        expires after the lease and another writer can take the session.

        Raises:
            SessionBusyError: another writer holds the claim (its name is in the error).
            SessionNotFoundError: no session has the id.
            SessionClaimLostError: the claim was lost while the block ran.
        """
        holder = holder or self.holder
        token = secrets.token_hex(16)
        now = self.clock()
        await self.backend.acquire_claim(
            session_id, holder=holder, token=token, now=now, expires_at=now + self.lease_seconds
        )
        renewal = _Renewal()
        error: BaseException | None = None
        try:
            session = await self._load(session_id, claim_token=token)
            await session.recover(tools)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._renew, session_id, holder, token, renewal, nursery)
                try:
                    yield session
                except trio.Cancelled:
                    raise
                except BaseException as exc:
                    # Re-raised below as itself, not inside the nursery's exception group.
                    error = exc
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await self.backend.release_claim(session_id, token=token)
        if error is not None:
            raise error
        if renewal.lost is not None:
            raise renewal.lost

    async def _renew(
        self,
        session_id: str,
        holder: str,
        token: str,
        renewal: _Renewal,
        nursery: trio.Nursery,
    ) -> None:
        interval = self.lease_seconds / 3
        expires_at = self.clock() + self.lease_seconds
        while True:
            await trio.sleep(interval)
            now = self.clock()
            try:
                await self.backend.renew_claim(
                    session_id,
                    holder=holder,
                    token=token,
                    now=now,
                    expires_at=now + self.lease_seconds,
                )
            except SessionStoreError as exc:
                # Transient: try again while the claim may still be live.
                if self.clock() + interval < expires_at:
                    continue
                renewal.lost = SessionClaimLostError(session_id, holder)
                renewal.lost.__cause__ = exc
            except SessionError as exc:
                renewal.lost = exc
            else:
                expires_at = now + self.lease_seconds
                continue
            nursery.cancel_scope.cancel()
            return

    async def list(self) -> builtins.list[SessionHeader]:
        """The headers of every session, newest first."""
        headers = [
            decode_header(data, f"session {data.get('id')!r}")
            for data in await self.backend.list_sessions()
        ]
        headers.sort(key=lambda h: (h.timestamp, h.id), reverse=True)
        return headers

    async def delete(self, session_id: str) -> None:
        """Delete a session, its entries and its claim.

        Raises:
            SessionNotFoundError: no session has the id.
        """
        await self.backend.delete_session(session_id)

    async def fork(
        self, session_id: str, at_entry: str | None = None, *, new_session_id: str | None = None
    ) -> Session:
        """A new session holding a copy of another: all of it, or with ``at_entry`` the
        branch from the root to that entry (pi's ``createBranchedSession()``: labels of
        that branch come after it). Its header's ``parent_session`` is the source's id.

        Raises:
            SessionNotFoundError: no session has ``session_id``.
            KeyError: ``at_entry`` is not an entry of it.
        """
        source = await self._load(session_id)
        if at_entry is None:
            entries = source.entries
        else:
            if source.entry(at_entry) is None:
                raise KeyError(f"session {session_id!r} has no entry {at_entry!r}")
            source.branch(at_entry)
            entries = _relinked(source.current_branch())
        if new_session_id is not None:
            _check_id(new_session_id)
        header = SessionHeader(
            id=new_session_id or _new_id(),
            timestamp=iso_now(),
            cwd=source.header.cwd,
            parent_session=session_id,
        )
        await self.backend.create_session(
            encode_header(header), [encode_entry(entry) for entry in entries]
        )
        return self._session(header, entries)

    # --- queued messages (implemented in _inbox.py) ----------------------------------------

    async def steer(self, session_id: str, message: AgentMessage) -> str:
        """Queue a steering message for the session's owner, from any process.

        The worker that owns the session (its :meth:`open_for_writing` block) receives it
        through :meth:`open_inbox` and gives it to ``agent.steer()``; it is committed once,
        as an entry whose id is the returned queue id, when the agent delivers it.
        PostgreSQL wakes the owner at once (``NOTIFY``); other stores are polled.

        Raises:
            SessionNotFoundError: no session has the id.
            SessionStoreError: the storage failed, or this store cannot queue messages.
        """
        from ._inbox import enqueue

        return await enqueue(self, session_id, "steer", message)

    async def follow_up(self, session_id: str, message: AgentMessage) -> str:
        """Queue a follow-up message for the session's owner (``agent.follow_up()``);
        otherwise as :meth:`steer`."""
        from ._inbox import enqueue

        return await enqueue(self, session_id, "follow_up", message)

    def open_inbox(self, session: Session, agent: Agent) -> AbstractAsyncContextManager[Inbox]:
        """Hand the messages queued for ``session`` to ``agent`` while the block runs.

        ``async with store.open_inbox(session, agent) as inbox:`` with a session from
        :meth:`open_for_writing` and attached to the agent (:func:`attach_agent`). The
        block owns one task: it takes what is queued (claim checked), gives each message
        to ``agent.steer()`` / ``agent.follow_up()``, and waits for more (PostgreSQL
        ``LISTEN`` on a connection of its own; other stores poll). A message given to the
        agent counts as delivered once its entry is committed; one that never was (the
        process died) goes to the session's next owner. ``await inbox.wait_queued()``
        returns when the agent has queued messages: an idle agent then needs
        ``agent.continue_()``.

        Raises:
            SessionError: the session was not opened for writing.
            SessionClaimLostError: the claim was lost while the block ran.
        """
        from ._inbox import open_inbox

        return open_inbox(self, session, agent)


def _new_id() -> str:
    return new_session_id()


def _relinked(path: builtins.list[SessionEntry]) -> builtins.list[SessionEntry]:
    """A branch with its labels moved to its end, the rest chained again."""
    kept: builtins.list[SessionEntry] = []
    labels: builtins.list[SessionEntry] = []
    parent: str | None = None
    for entry in path:
        if isinstance(entry, LabelEntry):
            labels.append(entry)
            continue
        kept.append(attrs.evolve(entry, parent_id=parent))
        parent = entry.id
    for label in labels:
        kept.append(attrs.evolve(label, parent_id=parent))
        parent = label.id
    return kept


def _check_id(session_id: str) -> None:
    import re

    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?", session_id):
        raise ValueError(
            "a session id must be non-empty, contain only letters, digits, '-', '_' and "
            f"'.', and start and end with a letter or digit, not {session_id!r}"
        )


class MemoryStore(SessionStore):
    """Sessions in this process's memory (``open_store("memory:")``); gone at exit."""

    def __init__(self, **options: Any) -> None:
        super().__init__(MemoryBackend(), **options)
