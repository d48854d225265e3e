"""``memory:`` — sessions in this process's memory, for tests and short-lived programs."""

from __future__ import annotations

import json

import attrs
import trio

from ._backend import (
    Claim,
    JsonObject,
    LoadedSession,
    SessionBackend,
    check_acquire,
    check_append_claim,
    check_batch_ids,
    check_renew,
    dump_json,
)
from ._errors import SessionExistsError, SessionNotFoundError
from ._inbox import PollingListener, QueueBackend, QueueListener

__all__ = ["MemoryBackend"]


@attrs.define(eq=False)
class _Stored:
    header: str
    lines: list[str] = attrs.Factory(list)
    ids: set[str] = attrs.Factory(set)


class MemoryBackend(SessionBackend, QueueBackend):
    """Sessions held as JSON text in a dict (so what is read back is a copy). Every
    method runs without awaiting anything but its checkpoint, so each is atomic."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Stored] = {}
        self._claims: dict[str, Claim] = {}
        self._queued: dict[str, list[str]] = {}

    def _get(self, session_id: str) -> _Stored:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFoundError(session_id) from None

    async def create_session(self, header: JsonObject, entries: list[JsonObject]) -> None:
        await trio.lowlevel.checkpoint()
        session_id = header["id"]
        if session_id in self._sessions:
            raise SessionExistsError(session_id)
        stored = _Stored(header=dump_json(header))
        check_batch_ids(session_id, entries, lambda _: False)
        stored.lines = [dump_json(entry) for entry in entries]
        stored.ids = {entry["id"] for entry in entries}
        self._sessions[session_id] = stored

    async def load_session(self, session_id: str) -> LoadedSession:
        await trio.lowlevel.checkpoint()
        stored = self._get(session_id)
        return LoadedSession(
            header=json.loads(stored.header), entries=[json.loads(line) for line in stored.lines]
        )

    async def append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> None:
        await trio.lowlevel.checkpoint()
        self.try_append_entries(session_id, entries, claim_token=claim_token, now=now)

    def try_append_entries(
        self, session_id: str, entries: list[JsonObject], *, claim_token: str | None, now: float
    ) -> bool:
        stored = self._get(session_id)
        check_append_claim(session_id, self._claims.get(session_id), claim_token, now)
        check_batch_ids(session_id, entries, stored.ids.__contains__)
        lines = [dump_json(entry) for entry in entries]  # may raise: before any change
        stored.lines.extend(lines)
        stored.ids.update(entry["id"] for entry in entries)
        return True

    async def list_sessions(self) -> list[JsonObject]:
        await trio.lowlevel.checkpoint()
        return [json.loads(stored.header) for stored in self._sessions.values()]

    async def delete_session(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        self._get(session_id)
        del self._sessions[session_id]
        self._claims.pop(session_id, None)
        self._queued.pop(session_id, None)

    async def acquire_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        await trio.lowlevel.checkpoint()
        self._get(session_id)
        check_acquire(session_id, self._claims.get(session_id), token, now)
        self._claims[session_id] = Claim(holder=holder, token=token, expires_at=expires_at)

    async def renew_claim(
        self, session_id: str, *, holder: str, token: str, now: float, expires_at: float
    ) -> None:
        await trio.lowlevel.checkpoint()
        claim = self._claims.get(session_id)
        check_renew(session_id, claim, token, holder, now)
        self._claims[session_id] = Claim(holder=holder, token=token, expires_at=expires_at)

    async def release_claim(self, session_id: str, *, token: str) -> None:
        await trio.lowlevel.checkpoint()
        claim = self._claims.get(session_id)
        if claim is not None and claim.token == token:
            del self._claims[session_id]

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()

    # --- queued messages (see _inbox.py) -------------------------------------------------------

    async def enqueue_message(self, session_id: str, item: JsonObject) -> None:
        await trio.lowlevel.checkpoint()
        self._get(session_id)
        self._queued.setdefault(session_id, []).append(dump_json(item))

    async def take_queued(
        self, session_id: str, *, claim_token: str, now: float
    ) -> list[JsonObject]:
        await trio.lowlevel.checkpoint()
        stored = self._get(session_id)
        check_append_claim(session_id, self._claims.get(session_id), claim_token, now)
        items = [json.loads(text) for text in self._queued.get(session_id, [])]
        kept = [item for item in items if item["id"] not in stored.ids]
        self._queued[session_id] = [dump_json(item) for item in kept]
        return kept

    def queue_listener(self, session_id: str) -> QueueListener:
        return PollingListener(0.05)
