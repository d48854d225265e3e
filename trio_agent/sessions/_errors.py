"""Exceptions of :mod:`trio_agent.sessions`.

They sit under trio_agent's one base class::

    AgentError
    └── SessionError                 base class of everything a session store raises
        ├── SessionNotFoundError     no session has this id (also KeyError)
        ├── SessionExistsError       create() with an id that is taken
        ├── DuplicateEntryError      an appended entry reuses an id; nothing was written
        ├── SessionBusyError         another writer holds the session's claim
        ├── SessionClaimLostError    this writer's claim expired or was taken over
        ├── SessionFormatError       a stored session cannot be read (also ValueError):
        │                            corrupt line, unknown version; names file and line
        └── SessionStoreError        the storage failed (disk full, read-only, a database
                                     that stayed locked); nothing committed is lost
"""

from __future__ import annotations

from .._exceptions import AgentError

__all__ = [
    "DuplicateEntryError",
    "SessionBusyError",
    "SessionClaimLostError",
    "SessionError",
    "SessionExistsError",
    "SessionFormatError",
    "SessionNotFoundError",
    "SessionStoreError",
]


class SessionError(AgentError):
    """Base class of the exceptions raised by session stores."""


class SessionNotFoundError(SessionError, KeyError):
    """No session has the id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SessionExistsError(SessionError):
    """``create()`` was given an id that another session has."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id


class DuplicateEntryError(SessionError):
    """An appended entry has the id of an entry of the session (or of another entry of
    the same batch); the whole batch was refused and the session is unchanged."""

    def __init__(self, session_id: str, entry_id: str) -> None:
        super().__init__(
            f"session {session_id!r} already has an entry {entry_id!r}; nothing was appended"
        )
        self.session_id = session_id
        self.entry_id = entry_id


class SessionBusyError(SessionError):
    """Another writer holds the session's claim (one writer per session)."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"session {session_id!r} is being written by {holder}")
        self.session_id = session_id
        self.holder = holder


class SessionClaimLostError(SessionError):
    """This writer's claim on the session expired or another writer took it over; what
    was committed before stays, nothing more is written."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(f"{holder} no longer holds the claim on session {session_id!r}")
        self.session_id = session_id
        self.holder = holder


class SessionFormatError(SessionError, ValueError):
    """A stored session cannot be read: a corrupt line, a missing header, an unknown
    format version. The message names the file (or session) and the line."""


class SessionStoreError(SessionError):
    """The storage failed: a full disk, a read-only file, a database that stayed
    locked. The operation had no effect; what was committed before is kept."""
