"""The web app's sessions in a :mod:`trio_agent.sessions` store (memory, JSONL files,
SQLite, PostgreSQL).

Each run claims its session for its duration only (``open_for_writing``: one writer per
session, an interrupted run recovered first) and commits every message while its
``message_end`` is handled (``attach_agent``). Between runs nothing is held, so a reload,
a restart of the server or another worker resumes the session from the store.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import attrs

from .._messages import AgentMessage
from ..sessions import SessionExistsError, SessionNotFoundError, SessionStore, attach_agent
from ._sessions import SessionInfo, UnknownSessionError, title_of

if TYPE_CHECKING:
    from .._agent import Agent

__all__ = ["StoreSessions"]


def _milliseconds(timestamp: str) -> int:
    try:
        moment = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return 0
    return int(moment.timestamp() * 1000)


@attrs.define(eq=False)
class StoreSessions:
    """:class:`~trio_agent.web.WebSessions` kept in a :class:`~trio_agent.sessions.SessionStore`."""

    store: SessionStore
    """An open store (from :func:`trio_agent.sessions.open_store`); the caller closes it."""
    list_limit: int = 100
    """How many of the newest sessions the session list shows (each one's title is read
    from its transcript)."""

    async def create(self, session_id: str | None = None) -> str:
        try:
            return (await self.store.create(session_id=session_id)).id
        except SessionExistsError:
            raise ValueError(f"cannot create a session with the id {session_id!r}") from None

    async def list(self) -> builtins.list[SessionInfo]:
        infos = []
        for header in (await self.store.list())[: self.list_limit]:
            try:
                messages = (await self.store.open(header.id)).messages()
            except SessionNotFoundError:
                continue  # deleted meanwhile
            infos.append(
                SessionInfo(
                    id=header.id,
                    title=title_of(messages),
                    created_at=_milliseconds(header.timestamp),
                )
            )
        return infos

    async def messages(self, session_id: str) -> builtins.list[AgentMessage]:
        try:
            session = await self.store.open(session_id)
        except SessionNotFoundError:
            raise UnknownSessionError(session_id) from None
        return session.messages()

    @contextlib.asynccontextmanager
    async def open_run(self, session_id: str, agent: Agent) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            try:
                session = await stack.enter_async_context(
                    self.store.open_for_writing(session_id, tools=agent.state.tools)
                )
            except SessionNotFoundError:
                raise UnknownSessionError(session_id) from None
            await stack.enter_async_context(attach_agent(agent, session))
            yield
