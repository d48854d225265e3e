"""Queued messages: ``store.steer()`` / ``store.follow_up()`` from any process, and the
owner's inbox that hands them to its agent.

Any process that can open the store queues a message for a session: a row in the store's
queue, with a fresh id. The worker that owns the session (it holds the claim, through
:meth:`SessionStore.open_for_writing`) opens an inbox with
``async with store.open_inbox(session, agent)``; the block owns one task that takes the
session's queued messages and gives each to ``agent.steer()`` or ``agent.follow_up()``,
then waits for the next: PostgreSQL wakes it with ``LISTEN``/``NOTIFY``, other stores by
polling (the memory store at once, in-process).

Exactly once. The queue id becomes the id of the message's entry when
:func:`~trio_agent.sessions.attach_agent` commits the message (the agent delivered it to
the model). A queued message counts as delivered when the session has an entry with its
id; taking the queue (claim checked, in one transaction) drops delivered messages and
returns the others. So a message is committed to the transcript at most once (entry ids
are unique), and one that a crashed owner took but had not committed is still queued and
goes to the next owner.
"""

from __future__ import annotations

import abc
import contextlib
import secrets
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

import trio

from .._checks import check_message
from .._messages import AgentMessage
from ._entries import MessageEntry, decode_entry, encode_entry, iso_now
from ._errors import SessionClaimLostError, SessionError, SessionStoreError
from ._session import Session

if TYPE_CHECKING:
    from .._agent import Agent
    from ._store import SessionStore

__all__ = [
    "Inbox",
    "QueueBackend",
    "QueueKind",
    "QueueListener",
    "enqueue",
    "open_inbox",
    "queued_entry_id",
]

QueueKind = Literal["steer", "follow_up"]

JsonObject = dict[str, Any]

DEFAULT_POLL_SECONDS = 0.5
"""How often an inbox on a store without notifications looks for queued messages."""


class QueueListener(abc.ABC):
    """Wakes an inbox when a message may have been queued for its session (an async
    context manager: a PostgreSQL listener holds a connection while it is open)."""

    async def __aenter__(self) -> QueueListener:
        await trio.lowlevel.checkpoint()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await trio.lowlevel.checkpoint()

    @abc.abstractmethod
    async def wait(self) -> None:
        """Return when a message may have been queued since the last return (spurious
        wake-ups are allowed; a message queued before the listener opened need not
        wake it: the inbox takes the queue once after opening)."""


class PollingListener(QueueListener):
    """Wakes every ``interval`` seconds."""

    def __init__(self, interval: float = DEFAULT_POLL_SECONDS) -> None:
        self.interval = interval

    async def wait(self) -> None:
        await trio.sleep(self.interval)


class QueueBackend(abc.ABC):
    """What a :class:`~trio_agent.sessions.SessionBackend` adds to queue messages.

    An item is a JSON object with a string ``"id"``; the backend stores it as given.
    """

    @abc.abstractmethod
    async def enqueue_message(self, session_id: str, item: JsonObject) -> None:
        """Queue ``item`` for the session, after those queued before it.

        Raises:
            SessionNotFoundError: no session has the id.
        """

    @abc.abstractmethod
    async def take_queued(
        self, session_id: str, *, claim_token: str, now: float
    ) -> list[JsonObject]:
        """In one transaction, with the claim checked as for ``append_entries``: drop
        the queued items whose id is the id of an entry of the session, and return the
        others in queue order (they stay queued).

        Raises:
            SessionClaimLostError: ``claim_token``'s claim is not live.
        """

    def queue_listener(self, session_id: str) -> QueueListener:
        """How an inbox waits for the session's next message: polling by default."""
        return PollingListener()


# --- naming the entry of a delivered message ----------------------------------------------

# session -> {id(message): (message, queue id)}. The message is kept so that its id() is
# not reused while it is in the map; the map goes with the session.
_NAMED: weakref.WeakKeyDictionary[Session, dict[int, tuple[AgentMessage, str]]] = (
    weakref.WeakKeyDictionary()
)


def queued_entry_id(session: Session, message: AgentMessage) -> str:
    """The id the entry of ``message`` must have: its queue id when an inbox of
    ``session`` delivered it, otherwise ``""`` (a fresh id). Used by ``attach_agent``."""
    named = _NAMED.get(session)
    if not named:
        return ""
    found = named.get(id(message))
    if found is None or found[0] is not message:
        return ""
    del named[id(message)]
    return found[1]


# --- the sender's side ---------------------------------------------------------------------


def _queue_of(store: SessionStore) -> QueueBackend:
    backend = store.backend
    if not isinstance(backend, QueueBackend):
        raise SessionStoreError(
            f"the session store's backend {type(backend).__name__} cannot queue messages"
        )
    return backend


async def enqueue(
    store: SessionStore, session_id: str, kind: QueueKind, message: AgentMessage
) -> str:
    """Queue ``message`` for the owner of ``session_id``; its queue id (see the module
    docstring)."""
    check_message(message, f"{kind}()")
    queue_id = secrets.token_hex(8)  # 16 digits: never one of pi's 8-digit entry ids
    entry = encode_entry(MessageEntry(id=queue_id, timestamp=iso_now(), message=message))
    await _queue_of(store).enqueue_message(
        session_id, {"id": queue_id, "kind": kind, "entry": entry}
    )
    return queue_id


# --- the owner's side ----------------------------------------------------------------------


class Inbox:
    """The owner's side of a session's queue, while ``store.open_inbox()``'s block runs."""

    def __init__(self, agent: Agent, session: Session) -> None:
        self._agent = agent
        self._session = session
        self._handed: set[str] = set()
        self._arrived = trio.Event()
        self.delivered = 0
        """How many queued messages this inbox gave the agent."""

    def _hand(self, items: list[JsonObject]) -> None:
        session = self._session
        named = _NAMED.setdefault(session, {})
        for item in items:
            queue_id = item["id"]
            if queue_id in self._handed:
                continue
            self._handed.add(queue_id)
            entry = decode_entry(item["entry"], f"queued message {queue_id!r}")
            assert isinstance(entry, MessageEntry)
            message = entry.message
            named[id(message)] = (message, queue_id)
            if item.get("kind") == "follow_up":
                self._agent.follow_up(message)
            else:
                self._agent.steer(message)
            self.delivered += 1
        if items:
            self._arrived.set()
            self._arrived = trio.Event()

    async def wait_queued(self) -> None:
        """Return once the agent has a queued message (at once if it has one): when the
        agent is idle, the caller then runs ``agent.continue_()``. A checkpoint."""
        while not self._agent.has_queued_messages():
            await self._arrived.wait()
        await trio.lowlevel.checkpoint()


async def _take(backend: QueueBackend, session: Session, inbox: Inbox) -> None:
    token = session._claim_token  # the writer's claim (same package)
    assert token is not None
    items = await backend.take_queued(session.id, claim_token=token, now=session._clock())
    inbox._hand(items)


async def _serve(
    backend: QueueBackend, session: Session, inbox: Inbox, failure: list[BaseException]
) -> None:
    delay = 0.1
    while True:
        try:
            async with backend.queue_listener(session.id) as listener:
                # Listening first, then taking: nothing queued in between is missed.
                await _take(backend, session, inbox)
                delay = 0.1
                while True:
                    await listener.wait()
                    await _take(backend, session, inbox)
        except SessionClaimLostError as exc:
            failure.append(exc)
            return
        except SessionStoreError:
            # A lost connection: listen and take again after a bounded backoff (the
            # claim's renewal decides whether this worker still owns the session).
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)


@contextlib.asynccontextmanager
async def open_inbox(store: SessionStore, session: Session, agent: Agent) -> AsyncIterator[Inbox]:
    """See :meth:`SessionStore.open_inbox`."""
    if not session.is_writer:
        raise SessionError(
            f"session {session.id!r} was not opened for writing: only its owner takes its "
            "queued messages"
        )
    backend = _queue_of(store)
    inbox = Inbox(agent, session)
    failure: list[BaseException] = []
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            await _serve(backend, session, inbox, failure)
            nursery.cancel_scope.cancel()

        nursery.start_soon(serve)
        try:
            yield inbox
        except trio.Cancelled:
            raise
        except BaseException as exc:
            # Re-raised below as itself, not inside the nursery's exception group.
            error = exc
        finally:
            nursery.cancel_scope.cancel()
    if error is not None:
        raise error
    if failure:
        raise failure[0]
