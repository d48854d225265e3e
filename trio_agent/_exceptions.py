"""Exceptions raised by trio_agent.

The hierarchy::

    AgentError                      base class of everything raised on purpose
    ├── AgentBusyError              a run is active (prompt/continue_/reset while busy)
    ├── NothingToContinueError      continue_() has nothing to continue from
    ├── ToolArgumentsError          tool-call arguments failed validation (also ValueError)
    ├── SerializationError          malformed JSON, unknown role/type (also ValueError)
    ├── SessionError                trio_agent.sessions: a session store failed or refused
    │   ├── SessionNotFoundError    no session has the id (also KeyError)
    │   ├── SessionExistsError      create() with a taken id
    │   ├── DuplicateEntryError     an appended entry id is taken; nothing was written
    │   ├── SessionBusyError        another writer holds the session (names session and holder)
    │   ├── SessionClaimLostError   this writer's claim expired or was taken over
    │   ├── SessionFormatError      a stored session cannot be read (also ValueError)
    │   └── SessionStoreError       the storage failed; nothing committed is lost
    └── McpConnectionError          an MCP server cannot be reached or listed
                                    (trio_agent.mcp, with the ``mcp`` extra)

Provider failures are never raised: a stream function encodes them in its final
message (``stop_reason`` ``"error"`` or ``"aborted"`` with ``error_message``).
"""

from __future__ import annotations

__all__ = [
    "AgentBusyError",
    "AgentError",
    "NothingToContinueError",
    "SerializationError",
    "ToolArgumentsError",
]


class AgentError(Exception):
    """Base class of the exceptions trio_agent raises on purpose."""


class AgentBusyError(AgentError):
    """The agent is already running; wait for it (``wait_for_idle()``) or queue messages."""


class NothingToContinueError(AgentError):
    """``continue_()`` was called without a transcript tail to continue from."""


class ToolArgumentsError(AgentError, ValueError):
    """Tool-call arguments are invalid; the message is the text the model will read."""


class SerializationError(AgentError, ValueError):
    """A value could not be read from or written to the JSON wire format."""
