"""The interface between :class:`~trio_agent.sessions.SessionStore` and its storage.

A backend is a small class that stores JSON objects; everything else (entry classes,
ids, the tree, the context, leases, recovery, attaching agents) lives above it, in the
store and the session. To add a backend, subclass :class:`SessionBackend`, implement its
nine abstract methods (and, if it can commit some appends without waiting,
:meth:`~SessionBackend.try_append_entries`), add one line to the table of
:func:`~trio_agent.sessions.open_store`, and run
:func:`trio_agent.sessions.run_conformance` against it.

Data. A session is its header (a JSON object with ``"type": "session"`` and ``"id"``)
followed by its entries (JSON objects with a unique string ``"id"``), in the order they
were appended. The backend stores them as given and returns them in that order; it never
looks inside an entry except for its ``"id"`` (a backend may store the JSON as text, as
``jsonb``, ...). Objects passed in are not kept: copy them or serialize them.

Time. ``now`` and ``expires_at`` are wall-clock seconds (``time.time()``-like) read by the
store from its clock; a backend never reads a clock of its own, so all processes that
share a store agree on expiry as long as their clocks do, and tests can move time.

Claims. A session has at most one claim: ``(holder, token, expires_at)``. A claim is
*live* while ``now < expires_at``. A claim token is chosen by the store (random, never
reused). The rules, which the conformance suite checks:

- ``acquire_claim`` succeeds when there is no live claim, or the live one has the same
  token; it then records the claim. Otherwise it raises
  ``SessionBusyError(session_id, holder_of_the_live_claim)`` and changes nothing.
- ``renew_claim`` sets a new ``expires_at`` if the claim with this token is still live;
  otherwise ``SessionClaimLostError(session_id, holder)``.
- ``release_claim`` removes the claim if it has this token (a no-op otherwise).
- ``append_entries`` with ``claim_token=None`` is refused with ``SessionBusyError`` when
  someone holds a live claim; with a token it is refused with ``SessionClaimLostError``
  unless that token's claim is live.

Atomicity. Each method is atomic with respect to every other call on the same storage,
from this process or another: ``append_entries`` writes the whole batch or nothing. It
refuses the batch with ``DuplicateEntryError(session_id, entry_id)`` when an id appears
twice in the batch or is already stored, and then nothing is written. Checking the claim
and writing happen in the same transaction (or under the same lock).

Errors. ``SessionNotFoundError`` when the session does not exist (``create_session``:
``SessionExistsError`` when it does). Storage failures (disk full, read-only, a lost
connection, a database that stays locked after bounded retries) become
``SessionStoreError`` with the cause chained, after any partial write was undone. A
backend must not raise its driver's exceptions.

Concurrency. Methods are ``async``; a backend that blocks (files, SQLite, PostgreSQL)
runs the blocking part in ``trio.to_thread.run_sync`` without ``abandon_on_cancel``, so a
cancelled call still finishes (or rolls back) its transaction before the cancellation is
delivered: a cancellation never leaves half a batch. Every method is a checkpoint. The
one synchronous method, ``try_append_entries``, may commit on the calling (Trio) thread,
and only when it waits for nothing: no other writer's lock, no network, no ``fsync``.
"""

from __future__ import annotations

import abc
import json
import re
from typing import Any

import attrs

from .._serialization import _dumps
from ._errors import SessionBusyError, SessionClaimLostError

__all__ = ["Claim", "LoadedSession", "SessionBackend", "check_append_claim", "dump_json"]

JsonObject = dict[str, Any]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dump_json(value: Any) -> str:
    """Compact JSON text of an entry, for backends that store text.

    The C encoder, not :func:`trio_agent.serialization.to_json`'s exact ``JSON.stringify``
    form (which is written in Python, and several times slower): a session line only has
    to parse to the same value in pi, and it does (``5.0`` reads back as ``5``). Lone
    surrogates are escaped as ``JSON.stringify`` does; a value the C encoder refuses
    (``NaN``, an object that is not JSON) goes through ``to_json``'s rules, which write
    ``null`` or raise :class:`~trio_agent.SerializationError`.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return _dumps(value)
    if _LONE_SURROGATE.search(text) is not None:
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


@attrs.frozen(kw_only=True)
class LoadedSession:
    """What :meth:`SessionBackend.load_session` returns."""

    header: JsonObject
    """The session's header object (``"type": "session"``)."""
    entries: list[JsonObject]
    """In append order."""
    dropped: tuple[str, ...] = ()
    """What could not be read and was left out (a torn last line of a file cut short by a
    crash), each described for a person; empty for backends that cannot tear."""


@attrs.frozen(kw_only=True)
class Claim:
    """A writer's claim on a session."""

    holder: str
    token: str
    expires_at: float

    def live(self, now: float) -> bool:
        return now < self.expires_at


def check_append_claim(session_id: str, claim: Claim | None, token: str | None, now: float) -> None:
    """The claim rule of ``append_entries`` for backends that read the claim first."""
    live = claim is not None and claim.live(now)
    if token is None:
        if live:
            assert claim is not None
            raise SessionBusyError(session_id, claim.holder)
        return
    if not live or claim is None or claim.token != token:
        raise SessionClaimLostError(session_id, "this writer" if claim is None else claim.holder)


def check_acquire(session_id: str, claim: Claim | None, token: str, now: float) -> None:
    """The rule of ``acquire_claim``."""
    if claim is not None and claim.live(now) and claim.token != token:
        raise SessionBusyError(session_id, claim.holder)


def check_renew(session_id: str, claim: Claim | None, token: str, holder: str, now: float) -> None:
    """The rule of ``renew_claim``."""
    if claim is None or claim.token != token or not claim.live(now):
        raise SessionClaimLostError(session_id, holder)


def check_batch_ids(session_id: str, entries: list[JsonObject], exists: Any) -> None:
    """Refuse a batch that repeats an id or reuses one ``exists(id)`` says is stored."""
    seen: set[str] = set()
    for entry in entries:
        entry_id = entry["id"]
        if entry_id in seen or exists(entry_id):
            from ._errors import DuplicateEntryError

            raise DuplicateEntryError(session_id, entry_id)
        seen.add(entry_id)


class SessionBackend(abc.ABC):
    """Storage for session stores (see the module docstring for the contract)."""

    @abc.abstractmethod
    async def create_session(self, header: JsonObject, entries: list[JsonObject]) -> None:
        """Store a new session with its first entries (a fork's copy), atomically."""

    @abc.abstractmethod
    async def load_session(self, session_id: str) -> LoadedSession:
        """The header and every entry, in append order."""

    @abc.abstractmethod
    async def append_entries(
        self,
        session_id: str,
        entries: list[JsonObject],
        *,
        claim_token: str | None,
        now: float,
    ) -> None:
        """Append a batch, whole or not at all, after the claim and id checks."""

    def try_append_entries(
        self,
        session_id: str,
        entries: list[JsonObject],
        *,
        claim_token: str | None,
        now: float,
    ) -> bool:
        """:meth:`append_entries` without waiting, for a backend that can sometimes
        commit at once on the calling thread: ``True`` when the batch was committed (same
        rules and errors), ``False`` when committing would have to wait for a lock, the
        network or the disk, and nothing was written (the caller then awaits
        :meth:`append_entries`). Never blocks on another writer. The default returns
        ``False``."""
        return False

    @abc.abstractmethod
    async def list_sessions(self) -> list[JsonObject]:
        """The headers of every session (any order)."""

    @abc.abstractmethod
    async def delete_session(self, session_id: str) -> None:
        """Remove the session, its entries and its claim."""

    @abc.abstractmethod
    async def acquire_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        """Take the claim (see the rules)."""

    @abc.abstractmethod
    async def renew_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        """Extend a live claim (see the rules)."""

    @abc.abstractmethod
    async def release_claim(self, session_id: str, *, token: str) -> None:
        """Drop the claim if it has this token."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release connections and files; the store calls it once, at its end."""
