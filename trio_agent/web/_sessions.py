"""Where the web app keeps its sessions: the :class:`WebSessions` interface and the
in-memory :class:`MemorySessions`.

The app asks little of a session store: create a session, list them, read a transcript,
and wrap each run so the transcript is loaded before it and kept after (or while) it runs.
A durable store plugs in here (``trio_agent.sessions``: load with ``open_for_writing`` and
commit with ``attach_agent`` inside :meth:`WebSessions.open_run`, so the claim is held
only while a run goes on and any worker can serve the session's next run).
"""

from __future__ import annotations

import builtins
import contextlib
import re
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from .._messages import AgentMessage, UserMessage
from .._transcript import content_text

if TYPE_CHECKING:
    from .._agent import Agent

__all__ = ["MemorySessions", "SessionInfo", "UnknownSessionError", "WebSessions", "title_of"]

_TITLE_LENGTH = 60
# The ids pi's session format allows (trio_agent.sessions checks the same).
_VALID_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")


class UnknownSessionError(KeyError):
    """No session has this id (the app answers 404)."""


@attrs.frozen(kw_only=True)
class SessionInfo:
    """One line of the session list."""

    id: str
    """The session's id (the AG-UI ``threadId``)."""
    title: str
    """The first user message, shortened (``""`` before the first prompt)."""
    created_at: int
    """Creation time in Unix milliseconds."""
    running: bool = False
    """Whether a run of the session is going on in this process."""


def title_of(messages: Sequence[AgentMessage]) -> str:
    """A session's title: its first user message on one line, shortened."""
    for message in messages:
        if isinstance(message, UserMessage):
            text = " ".join(content_text(message.content, " ").split())
            if len(text) > _TITLE_LENGTH:
                return text[: _TITLE_LENGTH - 1] + "…"
            return text
    return ""


class WebSessions(Protocol):
    """A session store as the web app uses it.

    Every method is a checkpoint. ``open_run`` brackets one run: on entry it loads the
    session's transcript into ``agent`` (the agent may be new, or may have served this
    session before), while the block runs it may commit messages as they end, and on exit
    (also when cancelled) it keeps what the run added.
    """

    async def create(self, session_id: str | None = None) -> str:
        """Create an empty session and return its id (``session_id``, or a new one).

        Raises:
            ValueError: ``session_id`` is taken or not a valid id.
        """
        ...

    async def list(self) -> builtins.list[SessionInfo]:
        """The sessions, newest first."""
        ...

    async def messages(self, session_id: str) -> builtins.list[AgentMessage]:
        """The session's transcript (as of its last completed commit).

        Raises:
            UnknownSessionError: no session has the id.
        """
        ...

    def open_run(
        self, session_id: str, agent: Agent
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Load the transcript into ``agent`` and keep what the run adds.

        Raises:
            UnknownSessionError: no session has the id.
        """
        ...


@attrs.define(eq=False)
class _Stored:
    created_at: int
    messages: list[AgentMessage] = attrs.Factory(list)


@attrs.define(eq=False)
class MemorySessions:
    """Sessions kept in this process (lost when it exits): the app's default."""

    _sessions: dict[str, _Stored] = attrs.field(factory=dict, init=False)

    async def create(self, session_id: str | None = None) -> str:
        await trio.lowlevel.checkpoint()
        if session_id is None:
            session_id = secrets.token_hex(8)
        elif session_id in self._sessions or not _VALID_ID.fullmatch(session_id):
            raise ValueError(f"cannot create a session with the id {session_id!r}")
        self._sessions[session_id] = _Stored(created_at=int(time.time() * 1000))
        return session_id

    async def list(self) -> builtins.list[SessionInfo]:
        await trio.lowlevel.checkpoint()
        infos = [
            SessionInfo(id=key, title=title_of(stored.messages), created_at=stored.created_at)
            for key, stored in self._sessions.items()
        ]
        return sorted(infos, key=lambda info: info.created_at, reverse=True)

    def _get(self, session_id: str) -> _Stored:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise UnknownSessionError(session_id) from None

    async def messages(self, session_id: str) -> builtins.list[AgentMessage]:
        await trio.lowlevel.checkpoint()
        return list(self._get(session_id).messages)

    @contextlib.asynccontextmanager
    async def open_run(self, session_id: str, agent: Agent) -> AsyncIterator[None]:
        stored = self._get(session_id)
        await trio.lowlevel.checkpoint()
        if stored.messages:
            agent.state.messages = stored.messages
        else:
            stored.messages = list(agent.state.messages)  # the system message, say
        try:
            yield
        finally:
            stored.messages = list(agent.state.messages)
